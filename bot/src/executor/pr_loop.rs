//! The PR loop (the executor profile): seed 003's "pr sub-logic", a
//! script rather than a worker. For every run in `pr` it reads the PR from
//! GitHub and decides what happens next:
//!
//! * CI running → nothing this tick, and the run holds no worker slot;
//! * CI never ran → the configured workflow is dispatched on the PR's
//!   branch (Actions API); a cancelled or stale run is re-run instead;
//! * CI failed → a fix-ci worker, at most `ci_attempts` times; past that
//!   the run is held and its owner asked;
//! * review threads whose last reply is not `[ACKNOWLEDGED: …]` → a
//!   fix-comments worker;
//! * CI green and nothing unresolved → a pr-review worker; its green review
//!   of this very head → `complete`, and the owner is @-mentioned with the
//!   PR's link;
//! * a human comment on a complete draft PR → back to `pr`;
//! * merged → `complete`; closed unmerged → `abandoned`.
//!
//! Draft PRs get the labels the profile requires. A push expires the merge
//! requests bound to the old head. One loop runs per deployment (a lease);
//! every write is conditional on no runner holding the run, so the loop
//! never writes over a worker. The REST reads are conditional (ETags kept
//! in the database), so an idle PR costs no quota; GraphQL is asked for
//! review threads only when the REST view changed.

mod poll;
mod rule;

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::ground::text::{neutralize_mentions, one_line};
use crate::integrations::github::{GitHub, PollSettings};
use crate::profile::GithubSettings;
use crate::runtime::background::{BackgroundLoop, LeaseSpec, Next, Tick};
use crate::runtime::posts::{People, Poster};
use crate::store::{Run, RunState, Store, StoreError};

pub use rule::{Facts, Memo, PrFacts, RunFacts, Step, Trigger, next_step};

/// The loop's lease.
const LEASE: &str = "pr-loop";
const LEASE_TTL: Duration = Duration::from_secs(60);
/// Runs polled per tick.
const BATCH: i64 = 200;
/// The actor in the audit log.
const ACTOR: &str = "pr-loop";
/// Why a run waits in `pr` when its worker named no PR.
pub const NO_PR_NUMBER: &str =
    "nothing to watch: the worker named no PR (`[DONE: pr_ready] PR #<n>`)";
/// Why a run waits in `pr` when nothing can watch it.
pub const NO_GITHUB: &str = "nothing watches its PR: the executor has no [github] configured";
/// The longest rate-limit wait the client sits out inside a poll; a longer
/// one pauses the loop instead.
const LONGEST_INLINE_WAIT: Duration = Duration::from_secs(15);

/// The PR loop of one executor profile.
pub struct PrLoop {
    store: Store,
    poster: Poster,
    people: People,
    github: Option<Watcher>,
    /// GitHub asked to be left alone until then (a rate limit).
    paused: Option<tokio::time::Instant>,
}

/// What the loop reads GitHub with.
struct Watcher {
    client: GitHub,
    settings: GithubSettings,
    poll: PollSettings,
}

impl std::fmt::Debug for PrLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrLoop")
            .field(
                "github",
                &self.github.as_ref().map(|w| w.settings.repo.to_string()),
            )
            .finish_non_exhaustive()
    }
}

impl BackgroundLoop for PrLoop {
    const NAME: &'static str = "PR loop";
    /// A poll half-way is made again by the next leader.
    const ABANDON_ON_STOP: bool = true;

    fn lease(&self) -> Option<LeaseSpec> {
        Some(LeaseSpec {
            name: LEASE,
            ttl: LEASE_TTL,
        })
    }

    /// Polls each watched run when it is due (every `poll_interval`, and at
    /// once after a worker finished or the run entered `pr`).
    async fn tick(&mut self, tick: &mut Tick<'_>) -> anyhow::Result<Next> {
        let next = self.poll_due(tick).await?;
        Ok(Next::After(next))
    }
}

impl PrLoop {
    /// The PR loop of an executor profile, posting under `poster`.
    /// `github` is its client and `[github]`; without them it only says,
    /// for `!status`, that nothing watches the runs in `pr`.
    pub fn new(
        store: Store,
        poster: Poster,
        people: People,
        github: Option<(GitHub, GithubSettings)>,
    ) -> PrLoop {
        let github = github.map(|(client, settings)| Watcher {
            client: client.with_retry_policy(crate::integrations::github::RetryPolicy {
                max_attempts: 3,
                max_wait: LONGEST_INLINE_WAIT,
            }),
            poll: PollSettings {
                required_checks: settings.required_checks.clone(),
                trusted: settings.trusted.clone(),
                ..PollSettings::default()
            },
            settings,
        });
        PrLoop {
            store,
            poster,
            people,
            github,
            paused: None,
        }
    }

    /// Polls every watched run that is due, while this instance leads.
    /// Returns how long until the next one is due.
    async fn poll_due(&mut self, tick: &mut Tick<'_>) -> Result<Duration, StoreError> {
        let runs = self.store.prs().runs_to_watch(BATCH).await?;
        let Some(watcher) = &self.github else {
            for run in runs.iter().filter(|r| r.state == RunState::Pr) {
                if run.pr_status.as_deref() != Some(NO_GITHUB) {
                    self.store.prs().set_pr_status(run.id, NO_GITHUB).await?;
                }
            }
            return Ok(Duration::from_secs(3600));
        };
        let interval = watcher.settings.poll_interval;
        if let Some(wait) = self
            .paused
            .and_then(|until| until.checked_duration_since(tokio::time::Instant::now()))
        {
            return Ok(wait);
        }
        let now = crate::store::now();
        let mut next = interval;
        for run in runs {
            let due_at = due_at(&run, interval);
            if due_at > now {
                next = next.min((due_at - now).to_std().unwrap_or(interval));
                continue;
            }
            // A lease lost in the middle (a slow GitHub) ends the tick:
            // the instance that took it over polls from now on.
            if !tick.leads().await? {
                break;
            }
            match self.poll(watcher, &run).await {
                Ok(()) => {}
                Err(PollError::Store(error)) => return Err(error),
                Err(PollError::GitHub(error)) => {
                    tracing::warn!(run = run.id, %error, "cannot read the run's PR; trying again later");
                    let status = format!(
                        "cannot read its PR from GitHub: {}",
                        one_line(&error.to_string(), 300)
                    );
                    self.store.prs().set_pr_status(run.id, &status).await?;
                    if let Some(wait) = error.retry_after() {
                        // A rate limit is the token's: every PR waits it out.
                        self.paused = Some(tokio::time::Instant::now() + wait);
                        return Ok(wait);
                    }
                }
            }
        }
        Ok(next)
    }

    async fn owner_label(&self, run: &Run) -> String {
        let task = async {
            let mut tx = self.store.begin_read().await.ok()?;
            tx.tasks().task_by_gid(&run.task_gid).await.ok()?
        };
        self.people.owner_label(task.await.as_ref())
    }
}

/// When a run is due for a poll: never polled, changed since (a worker
/// finished, it entered `pr`), or `interval` after the last poll.
fn due_at(run: &Run, interval: Duration) -> DateTime<Utc> {
    match run.pr_checked_at {
        None => DateTime::<Utc>::MIN_UTC,
        Some(checked) if run.updated_at > checked => DateTime::<Utc>::MIN_UTC,
        Some(checked) => {
            checked + chrono::TimeDelta::from_std(interval).unwrap_or(chrono::TimeDelta::minutes(2))
        }
    }
}

fn quote(text: &str) -> String {
    neutralize_mentions(&one_line(text, 300))
}

#[derive(Debug, thiserror::Error)]
enum PollError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    GitHub(#[from] crate::integrations::github::Error),
}
