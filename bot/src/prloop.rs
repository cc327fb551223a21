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

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::github::cache::{CacheFuture, CachedResponse, EtagCache};
use crate::github::{
    CiState, Conclusion, GitHub, GitHubConfig, OpenThread, PollMark, PollSettings, PrState,
    PullRequestView, Repo, RunStatus,
};
use crate::mirror::{People, Poster};
use crate::profile::GithubSettings;
use crate::store::{
    CachedAnswer, PrPoll, PrWork, RequestStatus, Run, RunState, Store, StoreError, Transition,
    short_sha,
};
use crate::text::{neutralize_mentions, one_line};

/// The loop's lease.
const LEASE: &str = "pr-loop";
const LEASE_TTL: Duration = Duration::from_secs(60);
/// Runs polled per tick.
const BATCH: i64 = 200;
/// Kept answers older than this are forgotten.
const CACHE_AGE: Duration = Duration::from_secs(30 * 24 * 3600);
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

/// What the loop remembers of a PR between polls (the run's `pr_poll`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Memo {
    /// The last poll's mark: whether review threads must be read again.
    pub mark: Option<PollMark>,
    /// The open threads as last read.
    #[serde(default)]
    pub open_threads: Vec<OpenThread>,
    /// How many comments the PR had (conversation and review): a human's
    /// new comment on a complete draft is looked for only when it grew.
    #[serde(default)]
    pub comments: u64,
}

/// What the PR loop decides for one run, from one poll (pure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Nothing for a worker to do; the status says why it waits.
    Wait { status: String },
    /// The run waits for answers to its worker's requests: what is asked of
    /// it stays as it is, and nothing else happens.
    Answers { status: String },
    /// Ask a worker for `work`.
    Work {
        work: PrWork,
        status: String,
        /// Asked for anew, not already asked (it counts against the caps).
        new: bool,
    },
    /// CI never ran on the head: start it.
    TriggerCi { how: Trigger, status: String },
    /// Past the cap of fix-ci workers, or of PR workers of every kind: hold
    /// the run for its owner.
    Hold { status: String },
    /// Green, reviewed, nothing unresolved.
    Complete { status: String },
    /// The PR was merged.
    Merged,
    /// The PR was closed without merging.
    Closed,
}

/// How CI is started again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    /// `POST …/actions/workflows/{workflow}/dispatches` on the PR's branch.
    Dispatch { workflow: String, branch: String },
    /// `POST …/actions/runs/{id}/rerun`: the head's own run was cancelled
    /// or went stale.
    Rerun { run_id: u64 },
    /// Nothing to start it with.
    None,
}

/// What the run remembers of its PR, as [`next_step`] reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunFacts {
    /// The head the last poll saw.
    pub head_sha: Option<String>,
    pub head_seen_at: Option<DateTime<Utc>>,
    pub ci_triggered_sha: Option<String>,
    /// fix-ci workers asked for so far.
    pub ci_attempts: i64,
    pub pr_work: Option<PrWork>,
    pub review_green_sha: Option<String>,
    pub pr_work_done_sha: Option<String>,
    pub pr_work_done_at: Option<DateTime<Utc>>,
    /// PR workers asked for so far.
    pub pr_rounds: i64,
    /// Its worker waits for answers: a request is open, or answered and
    /// not yet delivered to the worker that is to be resumed.
    pub waiting: bool,
}

impl RunFacts {
    pub fn of(run: &Run) -> RunFacts {
        RunFacts {
            head_sha: run.head_sha.clone(),
            head_seen_at: run.head_seen_at,
            ci_triggered_sha: run.ci_triggered_sha.clone(),
            ci_attempts: run.ci_attempts,
            pr_work: run.pr_work.0,
            review_green_sha: run.review_green_sha.clone(),
            pr_work_done_sha: run.pr_work_done_sha.clone(),
            pr_work_done_at: run.pr_work_done_at,
            pr_rounds: run.pr_rounds,
            waiting: false,
        }
    }
}

/// What one poll saw of the PR, as [`next_step`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrFacts {
    pub merged: bool,
    pub closed: bool,
    pub head_sha: String,
    pub head_ref: String,
    pub ci: CiState,
    /// The head's own workflow run, when CI failed only because it was
    /// cancelled or went stale (see [`rerunnable`]).
    pub rerun: Option<u64>,
}

impl PrFacts {
    pub fn of(view: &PullRequestView) -> PrFacts {
        PrFacts {
            merged: view.pull.merged,
            closed: view.pull.state == PrState::Closed,
            head_sha: view.pull.head_sha.clone(),
            head_ref: view.pull.head_ref.clone(),
            ci: view.ci.clone(),
            rerun: rerunnable(view, &view.pull.head_sha),
        }
    }
}

/// The facts [`next_step`] needs.
#[derive(Debug, Clone)]
pub struct Facts<'a> {
    pub run: &'a RunFacts,
    pub pr: &'a PrFacts,
    pub open_threads: &'a [OpenThread],
    pub settings: &'a GithubSettings,
    pub now: DateTime<Utc>,
}

/// Decides what happens to a run in `pr` after a poll (seed 003's rules,
/// in order), within the caps. Pure, so that each rule is tested on its own.
pub fn next_step(f: &Facts<'_>) -> Step {
    match rule(f) {
        Step::Work {
            work,
            status,
            new: true,
        } => {
            if work == PrWork::FixCi && f.run.ci_attempts >= f.settings.ci_attempts {
                return Step::Hold {
                    status: format!(
                        "{status}, after {} fix-ci worker(s): held for its owner",
                        f.run.ci_attempts
                    ),
                };
            }
            if f.run.pr_rounds >= f.settings.max_rounds {
                return Step::Hold {
                    status: format!(
                        "{status}, after {} PR worker(s): held for its owner",
                        f.run.pr_rounds
                    ),
                };
            }
            Step::Work {
                work,
                status,
                new: true,
            }
        }
        step => step,
    }
}

/// Seed 003's rules, without the caps.
fn rule(f: &Facts<'_>) -> Step {
    let pull = f.pr;
    if pull.merged {
        return Step::Merged;
    }
    if pull.closed {
        return Step::Closed;
    }
    let head = pull.head_sha.as_str();
    let short = short_sha(head);
    if f.run.waiting {
        return Step::Answers {
            status: format!("on {short}, its worker waits for answers to its requests"),
        };
    }
    let new_head = f.run.head_sha.as_deref() != Some(head);
    // Work asked for by a person's comment or a review that wanted changes
    // stands until it is done or the head moves (CI failing comes first).
    if f.run.pr_work == Some(PrWork::FixComments)
        && !new_head
        && !matches!(pull.ci, CiState::Failed { .. })
    {
        return Step::Work {
            work: PrWork::FixComments,
            status: format!("comments to answer on {short}"),
            new: false,
        };
    }
    let grace =
        chrono::TimeDelta::from_std(f.settings.ci_grace).unwrap_or(chrono::TimeDelta::minutes(10));
    // The same work is not asked again for the head it ended on until the
    // push it made had time to show.
    let just_worked_on = !new_head
        && f.run.pr_work_done_sha.as_deref() == Some(head)
        && f.run.pr_work_done_at.is_some_and(|at| f.now - at < grace);
    match &pull.ci {
        CiState::Running => Step::Wait {
            status: format!("waiting for CI on {short}"),
        },
        CiState::NeverRan => {
            let since = if new_head {
                f.now
            } else {
                f.run.head_seen_at.unwrap_or(f.now)
            };
            if f.now - since < grace || just_worked_on {
                return Step::Wait {
                    status: format!("waiting for CI to start on {short}"),
                };
            }
            if f.run.ci_triggered_sha.as_deref() == Some(head) {
                return Step::Wait {
                    status: format!(
                        "CI never ran on {short}, even after it was started again: a human looks"
                    ),
                };
            }
            match &f.settings.ci_workflow {
                Some(workflow) => Step::TriggerCi {
                    how: Trigger::Dispatch {
                        workflow: workflow.clone(),
                        branch: pull.head_ref.clone(),
                    },
                    status: format!(
                        "CI never ran on {short}: {workflow} is dispatched on {}",
                        pull.head_ref
                    ),
                },
                None => Step::TriggerCi {
                    how: Trigger::None,
                    status: format!(
                        "CI never ran on {short}, and github.ci_workflow is unset: nothing can start it"
                    ),
                },
            }
        }
        CiState::Failed { failed } => {
            if let Some(run_id) = pull.rerun
                && f.run.ci_triggered_sha.as_deref() != Some(head)
            {
                return Step::TriggerCi {
                    how: Trigger::Rerun { run_id },
                    status: format!("CI on {short} was cancelled or went stale: it is re-run"),
                };
            }
            let names = failed.join(", ");
            if just_worked_on {
                return Step::Wait {
                    status: format!(
                        "CI failed on {short} ({names}); waiting for the fix to reach GitHub"
                    ),
                };
            }
            Step::Work {
                work: PrWork::FixCi,
                status: format!("CI failed on {short}: {names}"),
                new: f.run.pr_work != Some(PrWork::FixCi),
            }
        }
        CiState::Green if !f.open_threads.is_empty() => {
            let status = format!(
                "{} unresolved review thread(s): {}",
                f.open_threads.len(),
                f.open_threads
                    .iter()
                    .take(3)
                    .map(|t| match t.line {
                        Some(line) => format!("{}:{line}", t.path),
                        None => t.path.clone(),
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            if just_worked_on && f.run.pr_work.is_none() {
                return Step::Wait {
                    status: format!("{status}; waiting for the answers to reach GitHub"),
                };
            }
            Step::Work {
                work: PrWork::FixComments,
                status,
                new: f.run.pr_work != Some(PrWork::FixComments),
            }
        }
        CiState::Green if f.run.review_green_sha.as_deref() == Some(head) => Step::Complete {
            status: format!("complete: CI and the review green on {short}, nothing unresolved"),
        },
        CiState::Green => Step::Work {
            work: PrWork::PrReview,
            status: format!("CI green on {short}, nothing unresolved: a review follows"),
            new: f.run.pr_work != Some(PrWork::PrReview),
        },
    }
}

/// The head's own workflow run to re-run, when CI failed only because its
/// latest run was cancelled or went stale (no job of it failed).
fn rerunnable(view: &PullRequestView, head: &str) -> Option<u64> {
    let checks_failed = view.check_runs.check_runs.iter().any(|c| {
        c.status == RunStatus::Completed
            && !c.conclusion.is_some_and(Conclusion::is_passing)
            && !matches!(
                c.conclusion,
                Some(Conclusion::Cancelled | Conclusion::Stale)
            )
    });
    if checks_failed {
        return None;
    }
    view.workflow_runs
        .workflow_runs
        .iter()
        .filter(|r| r.head_sha == head && r.status == RunStatus::Completed)
        .max_by_key(|r| r.id)
        .filter(|r| {
            matches!(
                r.conclusion,
                Some(Conclusion::Cancelled | Conclusion::Stale)
            )
        })
        .map(|r| r.id)
}

/// Whether a comment is a human's: not a bot account, not one of the
/// profile's own logins, and not a protocol line.
fn by_human(author: Option<&str>, body: &str, settings: &GithubSettings) -> bool {
    let Some(author) = author else { return false };
    let author = author.to_lowercase();
    !author.ends_with("[bot]")
        && !settings.bot_logins.contains(&author)
        && !body.trim_start().starts_with("[ACKNOWLEDGED")
}

/// The PR loop of one executor profile.
#[derive(Clone)]
pub struct PrLoop {
    store: Store,
    poster: Poster,
    people: People,
    github: Option<Arc<Watcher>>,
    /// GitHub asked to be left alone until then (a rate limit).
    paused: Arc<std::sync::Mutex<Option<tokio::time::Instant>>>,
    /// One loop per deployment.
    lease: Arc<tokio::sync::Mutex<crate::singleton::Lease>>,
}

struct Watcher {
    client: GitHub,
    settings: GithubSettings,
    repo: Repo,
    poll: PollSettings,
}

impl std::fmt::Debug for PrLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrLoop")
            .field("github", &self.github.as_ref().map(|w| w.repo.to_string()))
            .finish_non_exhaustive()
    }
}

/// ETags and bodies in the database, so that a restart costs no quota.
struct StoreCache(Store);

impl EtagCache for StoreCache {
    fn get<'a>(&'a self, url: &'a str) -> CacheFuture<'a, Option<CachedResponse>> {
        Box::pin(async move {
            match self.0.cached_answer(url).await {
                Ok(found) => found.map(|a| CachedResponse {
                    etag: a.etag,
                    body: a.body.into_bytes(),
                    next_page: a.next_page,
                }),
                Err(error) => {
                    tracing::warn!(%error, "cannot read a kept GitHub answer; asking again");
                    None
                }
            }
        })
    }

    fn put<'a>(&'a self, url: &'a str, response: CachedResponse) -> CacheFuture<'a, ()> {
        Box::pin(async move {
            // GitHub answers JSON, which is UTF-8; anything else is not kept.
            let Ok(body) = String::from_utf8(response.body) else {
                return;
            };
            let answer = CachedAnswer {
                etag: response.etag,
                body,
                next_page: response.next_page,
            };
            if let Err(error) = self.0.keep_answer(url, &answer).await {
                tracing::warn!(%error, "cannot keep a GitHub answer; the next poll costs quota");
            }
        })
    }
}

/// A GitHub client for a profile's `[github]`, its ETags kept in `store`.
pub fn client(settings: &GithubSettings, store: &Store) -> Result<GitHub, crate::github::Error> {
    let mut config = GitHubConfig::new(settings.token.clone());
    config.api_url = settings.api_url.clone();
    GitHub::with_etag_cache(config, Arc::new(StoreCache(store.clone())))
}

impl PrLoop {
    /// The PR loop of `profile` (posting under `poster`). Without `[github]`
    /// it only says, for `!status`, that nothing watches the runs in `pr`.
    pub fn for_profile(
        profile: &crate::profile::Profile,
        store: Store,
        poster: Poster,
        people: People,
    ) -> anyhow::Result<PrLoop> {
        let github = match &profile.github {
            None => None,
            Some(settings) => {
                let repo: Repo = settings
                    .repo
                    .parse()
                    .map_err(|e| anyhow::anyhow!("profile {}: github.repo: {e}", profile.name))?;
                let client = client(settings, &store)
                    .map_err(|e| anyhow::anyhow!("profile {}: github: {e}", profile.name))?
                    .with_retry_policy(crate::github::RetryPolicy {
                        max_attempts: 3,
                        max_wait: LONGEST_INLINE_WAIT,
                    });
                Some(Arc::new(Watcher {
                    client,
                    repo,
                    poll: PollSettings {
                        required_checks: settings.required_checks.clone(),
                        ..PollSettings::default()
                    },
                    settings: settings.clone(),
                }))
            }
        };
        Ok(PrLoop {
            store,
            poster,
            people,
            github,
            paused: Arc::default(),
            lease: Arc::new(tokio::sync::Mutex::new(crate::singleton::Lease::new(
                LEASE,
                crate::host::instance_name(),
                LEASE_TTL,
            ))),
        })
    }

    /// Works until `shutdown`: polls each watched run when it is due (every
    /// `poll_interval`, and at once after a worker finished or the run
    /// entered `pr`).
    pub async fn run(&self, shutdown: CancellationToken) {
        let mut changes = self.store.changes();
        let mut backoff = crate::backoff::Backoff::new();
        let mut pruned: Option<tokio::time::Instant> = None;
        loop {
            changes.mark_seen();
            let wait = match tokio::select! {
                result = self.tick() => result,
                _ = shutdown.cancelled() => break,
            } {
                Ok(next) => {
                    backoff.succeeded();
                    next
                }
                Err(error) => {
                    let wait = backoff.failed();
                    tracing::error!(%error, wait_ms = wait.as_millis() as u64, "the PR loop failed; retrying");
                    wait
                }
            };
            if pruned.is_none_or(|at| at.elapsed() > Duration::from_secs(3600)) {
                pruned = Some(tokio::time::Instant::now());
                if let Err(error) = self.store.prune_answers(CACHE_AGE).await {
                    tracing::warn!(%error, "cannot prune kept GitHub answers");
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                // Background work: let the change that woke it (a chat
                // reply on its way, say) go first, and take a burst as one.
                _ = changes.changed() => tokio::time::sleep(crate::singleton::SETTLE).await,
                _ = tokio::time::sleep(wait) => {}
            }
        }
        self.lease.lock().await.release(&self.store).await;
    }

    /// Whether this instance leads (holds the loop's lease), renewing it.
    async fn leads(&self) -> Result<bool, StoreError> {
        self.lease.lock().await.hold(&self.store).await
    }

    /// Polls every watched run that is due, while this instance leads.
    /// Returns how long until the next one is due.
    pub async fn tick(&self) -> Result<Duration, StoreError> {
        if !self.leads().await? {
            return Ok(self.lease.lock().await.renew_in());
        }
        let runs = self.store.runs_to_watch(BATCH).await?;
        let Some(watcher) = &self.github else {
            for run in runs.iter().filter(|r| r.state == RunState::Pr) {
                if run.pr_status.as_deref() != Some(NO_GITHUB) {
                    self.store.set_pr_status(run.id, NO_GITHUB).await?;
                }
            }
            return Ok(Duration::from_secs(3600));
        };
        let interval = watcher.settings.poll_interval;
        if let Some(wait) = self.paused_for() {
            return Ok(wait);
        }
        let now = crate::store::now();
        let mut next = interval.min(self.lease.lock().await.renew_in());
        for run in runs {
            let due_at = due_at(&run, interval);
            if due_at > now {
                next = next.min((due_at - now).to_std().unwrap_or(interval));
                continue;
            }
            // A lease lost in the middle (a slow GitHub) ends the tick:
            // the instance that took it over polls from now on.
            if !self.leads().await? {
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
                    self.store.set_pr_status(run.id, &status).await?;
                    if let Some(wait) = error.retry_after() {
                        // A rate limit is the token's: every PR waits it out.
                        self.pause(wait);
                        return Ok(wait);
                    }
                }
            }
        }
        Ok(next)
    }

    /// How long GitHub asked to be left alone, if still.
    fn paused_for(&self) -> Option<Duration> {
        let until = (*self.paused.lock().unwrap_or_else(|e| e.into_inner()))?;
        until.checked_duration_since(tokio::time::Instant::now())
    }

    fn pause(&self, wait: Duration) {
        *self.paused.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(tokio::time::Instant::now() + wait);
    }

    async fn poll(&self, watcher: &Watcher, run: &Run) -> Result<(), PollError> {
        let Some(number) = run.pr_number.filter(|n| *n > 0) else {
            if run.state == RunState::Pr {
                self.store.set_pr_status(run.id, NO_PR_NUMBER).await?;
            }
            return Ok(());
        };
        // Only the profile's repository: a worker's line must not make
        // Eagle watch, label or merge elsewhere.
        let repo = watcher.repo.clone();
        if let Some(other) = run
            .pr_repo
            .as_deref()
            .filter(|r| !r.eq_ignore_ascii_case(&watcher.settings.repo))
        {
            let status = format!(
                "its PR is in {}, not in github.repo {}: Eagle does not follow it",
                one_line(other, 100),
                watcher.settings.repo
            );
            self.store.set_pr_status(run.id, &status).await?;
            return Ok(());
        }
        let memo: Memo = run
            .pr_poll
            .as_deref()
            .and_then(|json| serde_json::from_str(json).ok())
            .unwrap_or_default();
        let view = watcher
            .client
            .poll_pull_request(&repo, number as u64, &watcher.poll, memo.mark.as_ref())
            .await?;
        let comments_before = memo.comments;
        let open_threads = view.open_threads.clone().unwrap_or(memo.open_threads);
        let memo = Memo {
            mark: Some(view.mark.clone()),
            open_threads: open_threads.clone(),
            comments: view.pull.comments + view.pull.review_comments,
        };
        let memo_json = serde_json::to_string(&memo).ok();
        if run.state == RunState::Complete {
            let grew = memo.comments > comments_before;
            return self
                .watch_complete(watcher, run, &repo, &view, memo_json, grew)
                .await;
        }
        // Draft PRs carry the labels the profile requires. A refusal (the
        // token may not write issues) is logged and blocks nothing.
        if view.pull.draft && view.pull.state == PrState::Open {
            let missing: Vec<String> = watcher
                .settings
                .required_labels
                .iter()
                .filter(|l| {
                    !view
                        .pull
                        .labels
                        .iter()
                        .any(|have| have.eq_ignore_ascii_case(l))
                })
                .cloned()
                .collect();
            if !missing.is_empty() {
                match watcher
                    .client
                    .add_labels(&repo, number as u64, &missing)
                    .await
                {
                    Ok(_) => {
                        tracing::info!(run = run.id, labels = ?missing, "added the required labels to a draft PR")
                    }
                    Err(error) if error.is_transient() || error.retry_after().is_some() => {
                        return Err(error.into());
                    }
                    Err(error) => {
                        tracing::warn!(run = run.id, %error, "cannot add the required labels")
                    }
                }
            }
        }
        let requests = self.store.requests_of_run(run.id).await?;
        let mut facts = RunFacts::of(run);
        facts.waiting = requests.iter().any(|r| {
            r.status.is_open()
                || (run.pr_work.0.is_some()
                    && r.delivered_at.is_none()
                    && matches!(
                        r.status,
                        RequestStatus::Approved | RequestStatus::Denied | RequestStatus::Expired
                    ))
        });
        let now = crate::store::now();
        let mut step = next_step(&Facts {
            run: &facts,
            pr: &PrFacts::of(&view),
            open_threads: &open_threads,
            settings: &watcher.settings,
            now,
        });
        let head = view.pull.head_sha.as_str();
        let mut triggered = None;
        if let Step::TriggerCi { how, status } = &step {
            let started = match how {
                Trigger::Dispatch { workflow, branch } => {
                    watcher
                        .client
                        .dispatch_workflow(&repo, workflow, branch, &serde_json::Map::new())
                        .await
                }
                Trigger::Rerun { run_id } => {
                    watcher.client.rerun_workflow_run(&repo, *run_id).await
                }
                Trigger::None => Ok(()),
            };
            triggered = Some(head);
            match started {
                Ok(()) => {}
                Err(error) if error.is_transient() || error.retry_after().is_some() => {
                    return Err(error.into());
                }
                // Refused for good (no workflow_dispatch trigger, a
                // permission): said once, not asked again for this head.
                Err(error) => {
                    step = Step::TriggerCi {
                        how: Trigger::None,
                        status: format!(
                            "{status}, but GitHub refused: {}",
                            one_line(&error.to_string(), 200)
                        ),
                    };
                }
            }
        }
        let (status, work, new) = match &step {
            Step::Wait { status }
            | Step::TriggerCi { status, .. }
            | Step::Hold { status }
            | Step::Complete { status } => (status.clone(), None, false),
            // What is asked of the run stays as it is.
            Step::Answers { status } => (status.clone(), run.pr_work.0, false),
            Step::Work { work, status, new } => (status.clone(), Some(*work), *new),
            Step::Merged => ("merged".to_string(), None, false),
            Step::Closed => ("closed without merging".to_string(), None, false),
        };
        let mut tx = self.store.begin_write().await?;
        let Some(polled) = tx
            .record_pr_poll(&PrPoll {
                run: run.id,
                state: run.state,
                head_sha: head,
                pr_url: Some(view.pull.html_url.as_str()),
                status: &status,
                poll: memo_json.as_deref(),
                work,
                counts_ci_attempt: new && work == Some(PrWork::FixCi),
                counts_round: new,
                read_at: run.updated_at,
                ci_triggered_sha: triggered,
                comments_seen_at: None,
            })
            .await?
        else {
            // The run changed meanwhile (a runner claimed it, a worker
            // ended): the next tick looks again.
            return Ok(());
        };
        for request in &polled.expired {
            tx.insert_notice(
                run.id,
                "merge_expired",
                &format!(
                    "req:{} the PR's head moved to {}; the worker asks again",
                    request.id,
                    short_sha(head)
                ),
            )
            .await?;
        }
        let topic = run.topic();
        let pr = format!("PR #{number}");
        match step {
            Step::Merged => {
                tx.close_pr(run.id, "merged").await?;
                tx.transition_run(&Transition {
                    run: run.id,
                    to: RunState::Complete,
                    actor: ACTOR,
                    reason: "its PR was merged",
                    fence: None,
                })
                .await?;
                self.poster
                    .post(
                        &mut tx,
                        &topic,
                        &format!("[STATUS: complete] run:{} {pr} was merged", run.id),
                    )
                    .await?;
            }
            Step::Closed => {
                tx.close_pr(run.id, "closed without merging").await?;
                tx.transition_run(&Transition {
                    run: run.id,
                    to: RunState::Abandoned,
                    actor: ACTOR,
                    reason: "its PR was closed without merging",
                    fence: None,
                })
                .await?;
                self.poster
                    .post(
                        &mut tx,
                        &topic,
                        &format!(
                            "[STATUS: abandoned] run:{} {pr} was closed without merging; the task goes back for review",
                            run.id
                        ),
                    )
                    .await?;
            }
            Step::Hold { status } if !run.held => {
                tx.set_held(run.id, true, ACTOR, &status, false).await?;
                let owner = self.owner_label(run).await;
                tx.set_waiting_on(run.id, Some(&owner), None).await?;
                tx.insert_notice(run.id, "pr_held", &format!("{pr}: {status}"))
                    .await?;
                self.poster
                    .post(
                        &mut tx,
                        &topic,
                        &format!("[STATUS: held] run:{} {}", run.id, quote(&status)),
                    )
                    .await?;
            }
            Step::Complete { status } => {
                tx.transition_run(&Transition {
                    run: run.id,
                    to: RunState::Complete,
                    actor: ACTOR,
                    reason: &status,
                    fence: None,
                })
                .await?;
                tx.mark_comments_seen(run.id, now).await?;
                tx.insert_notice(run.id, "complete", view.pull.html_url.as_str())
                    .await?;
                self.poster
                    .post(
                        &mut tx,
                        &topic,
                        &format!("[STATUS: complete] run:{} {pr}: {}", run.id, quote(&status)),
                    )
                    .await?;
            }
            Step::TriggerCi {
                how: Trigger::None,
                status,
            } => {
                tx.insert_notice(run.id, "ci_never_ran", &format!("{pr}: {status}"))
                    .await?;
            }
            Step::TriggerCi { status, .. } => {
                self.poster
                    .post(
                        &mut tx,
                        &topic,
                        &format!("[STATUS: ci] run:{} {}", run.id, quote(&status)),
                    )
                    .await?;
            }
            Step::Work { work, status, .. } if run.pr_work.0 != Some(work) => {
                self.poster
                    .post(
                        &mut tx,
                        &topic,
                        &format!(
                            "[STATUS: {}] run:{} {}; a worker follows",
                            work.as_str(),
                            run.id,
                            quote(&status)
                        ),
                    )
                    .await?;
            }
            _ => {}
        }
        tx.commit().await?;
        Ok(())
    }

    /// A complete run: merged or closed ends the watch; a human's comment
    /// on its draft PR since it completed sends it back to `pr`.
    async fn watch_complete(
        &self,
        watcher: &Watcher,
        run: &Run,
        repo: &Repo,
        view: &PullRequestView,
        memo: Option<String>,
        comments_grew: bool,
    ) -> Result<(), PollError> {
        let pull = &view.pull;
        if pull.merged || pull.state == PrState::Closed {
            let mut tx = self.store.begin_write().await?;
            tx.close_pr(run.id, if pull.merged { "merged" } else { "closed" })
                .await?;
            tx.commit().await?;
            return Ok(());
        }
        // GitHub's times have whole seconds: a comment in the second the
        // run completed counts (only comments made since the last poll are
        // looked at, so an older one cannot).
        let seen = run
            .pr_comments_seen_at
            .or(run.completed_at)
            .unwrap_or(run.updated_at)
            .trunc_subsecs(0);
        // The newest human comment after `seen`: in the conversation, or
        // the last reply of a review thread.
        let mut human: Option<(DateTime<Utc>, String)> = None;
        let mut consider = |at: &str, author: Option<&str>, body: &str| {
            if let Ok(at) = at.parse::<DateTime<Utc>>()
                && at >= seen
                && by_human(author, body, &watcher.settings)
                && human.as_ref().is_none_or(|(t, _)| at > *t)
            {
                human = Some((at, author.unwrap_or_default().to_string()));
            }
        };
        if pull.draft && comments_grew {
            for c in watcher
                .client
                .issue_comments(repo, pull.number, Some(seen))
                .await?
            {
                consider(&c.created_at, c.author.as_deref(), &c.body);
            }
            for t in view.threads.iter().flat_map(|t| &t.threads) {
                if let Some(last) = &t.last_comment {
                    consider(&last.created_at, last.author.as_deref(), &last.body);
                }
            }
        }
        let mut tx = self.store.begin_write().await?;
        match human {
            Some((at, author)) => {
                let reason = format!(
                    "{} commented on its draft PR",
                    neutralize_mentions(&one_line(&author, 60))
                );
                tx.reopen_pr(run.id, at, &reason).await?;
                self.poster
                    .post(
                        &mut tx,
                        &run.topic(),
                        &format!(
                            "[STATUS: pr] run:{} {reason}: back to pr, a worker answers",
                            run.id
                        ),
                    )
                    .await?;
            }
            None => {
                tx.record_pr_poll(&PrPoll {
                    run: run.id,
                    state: RunState::Complete,
                    head_sha: &pull.head_sha,
                    pr_url: Some(&pull.html_url),
                    status: "complete: waiting for a human to merge it",
                    poll: memo.as_deref(),
                    work: None,
                    counts_ci_attempt: false,
                    counts_round: false,
                    read_at: run.updated_at,
                    ci_triggered_sha: None,
                    comments_seen_at: None,
                })
                .await?;
            }
        }
        tx.commit().await?;
        Ok(())
    }

    async fn owner_label(&self, run: &Run) -> String {
        let task = async {
            let mut tx = self.store.begin_read().await.ok()?;
            tx.task_by_gid(&run.task_gid).await.ok()?
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
    GitHub(#[from] crate::github::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    fn settings() -> GithubSettings {
        GithubSettings {
            api_url: url::Url::parse("https://api.github.com").unwrap(),
            repo: "acme/app".into(),
            token: secrecy::SecretString::from("t".to_string()),
            required_checks: vec![],
            required_labels: vec![],
            ci_workflow: Some("ci.yml".into()),
            ci_grace: Duration::from_secs(600),
            poll_interval: Duration::from_secs(120),
            merge_method: "squash".into(),
            ci_attempts: 2,
            max_rounds: 5,
            bot_logins: vec!["executor-bot".into()],
        }
    }

    fn pr(ci: CiState) -> PrFacts {
        PrFacts {
            merged: false,
            closed: false,
            head_sha: A.into(),
            head_ref: "eagle/run-1".into(),
            ci,
            rerun: None,
        }
    }

    fn seen(head: &str) -> RunFacts {
        RunFacts {
            head_sha: Some(head.into()),
            head_seen_at: Some(Utc::now() - chrono::TimeDelta::hours(1)),
            ..RunFacts::default()
        }
    }

    fn thread() -> OpenThread {
        OpenThread {
            id: "T1".into(),
            path: "TabBar.swift".into(),
            line: Some(12),
            outdated: false,
            last_author: Some("alex".into()),
            excerpt: "rename".into(),
        }
    }

    fn step(run: &RunFacts, pr: &PrFacts, threads: &[OpenThread]) -> Step {
        next_step(&Facts {
            run,
            pr,
            open_threads: threads,
            settings: &settings(),
            now: Utc::now(),
        })
    }

    fn failed() -> CiState {
        CiState::Failed {
            failed: vec!["macOS UI Tests".into()],
        }
    }

    #[test]
    fn seed_003s_rules_in_order() {
        let kind = |s: &Step| match s {
            Step::Wait { .. } => "wait".to_string(),
            Step::Work { work, new, .. } => format!("{} new={new}", work.as_str()),
            Step::Answers { .. } => "answers".into(),
            Step::TriggerCi { how, .. } => format!("trigger {how:?}"),
            Step::Hold { .. } => "hold".into(),
            Step::Complete { .. } => "complete".into(),
            Step::Merged => "merged".into(),
            Step::Closed => "closed".into(),
        };
        let just_fixed = RunFacts {
            pr_work_done_sha: Some(A.into()),
            pr_work_done_at: Some(Utc::now()),
            ..seen(A)
        };
        let reviewed = RunFacts {
            review_green_sha: Some(A.into()),
            ..seen(A)
        };
        let capped = RunFacts {
            ci_attempts: 2,
            ..seen(A)
        };
        let merged = PrFacts {
            merged: true,
            ..pr(CiState::Green)
        };
        let closed = PrFacts {
            closed: true,
            ..pr(CiState::Green)
        };
        let cancelled = PrFacts {
            rerun: Some(77),
            ..pr(failed())
        };
        let cases: Vec<(&str, RunFacts, PrFacts, Vec<OpenThread>, &str)> = vec![
            ("merged wins", seen(A), merged, vec![], "merged"),
            ("closed", seen(A), closed, vec![], "closed"),
            (
                "CI running: nothing",
                seen(A),
                pr(CiState::Running),
                vec![],
                "wait",
            ),
            (
                "a new head gets its grace",
                seen(B),
                pr(CiState::NeverRan),
                vec![],
                "wait",
            ),
            (
                "never ran after the grace: dispatch",
                seen(A),
                pr(CiState::NeverRan),
                vec![],
                "trigger Dispatch { workflow: \"ci.yml\", branch: \"eagle/run-1\" }",
            ),
            (
                "dispatched once per head",
                RunFacts {
                    ci_triggered_sha: Some(A.into()),
                    ..seen(A)
                },
                pr(CiState::NeverRan),
                vec![],
                "wait",
            ),
            (
                "failed: fix-ci",
                seen(A),
                pr(failed()),
                vec![],
                "fix_ci new=true",
            ),
            (
                "a fix-ci worker already asked for does not count again",
                RunFacts {
                    pr_work: Some(PrWork::FixCi),
                    ..seen(A)
                },
                pr(failed()),
                vec![],
                "fix_ci new=false",
            ),
            (
                "the fix has not reached GitHub yet",
                just_fixed.clone(),
                pr(failed()),
                vec![],
                "wait",
            ),
            (
                "past ci_attempts: the owner",
                capped,
                pr(failed()),
                vec![],
                "hold",
            ),
            (
                "cancelled: re-run, not fix",
                seen(A),
                cancelled,
                vec![],
                "trigger Rerun { run_id: 77 }",
            ),
            (
                "green, a thread open: fix-comments",
                seen(A),
                pr(CiState::Green),
                vec![thread()],
                "fix_comments new=true",
            ),
            (
                "answers not on GitHub yet",
                just_fixed,
                pr(CiState::Green),
                vec![thread()],
                "wait",
            ),
            (
                "green, nothing open: review",
                seen(A),
                pr(CiState::Green),
                vec![],
                "pr_review new=true",
            ),
            (
                "reviewed green on this head: complete",
                reviewed.clone(),
                pr(CiState::Green),
                vec![],
                "complete",
            ),
            (
                "a review of another head does not count",
                RunFacts {
                    review_green_sha: Some(B.into()),
                    ..seen(A)
                },
                pr(CiState::Green),
                vec![],
                "pr_review new=true",
            ),
            (
                "reviewed, but a thread opened since",
                reviewed,
                pr(CiState::Green),
                vec![thread()],
                "fix_comments new=true",
            ),
            (
                "its worker waits for answers: nothing else happens",
                RunFacts {
                    waiting: true,
                    pr_work: Some(PrWork::PrReview),
                    ..seen(A)
                },
                pr(CiState::Green),
                vec![],
                "answers",
            ),
            (
                "comments a person asked about stand, not overwritten by a review",
                RunFacts {
                    pr_work: Some(PrWork::FixComments),
                    ..seen(A)
                },
                pr(CiState::Green),
                vec![],
                "fix_comments new=false",
            ),
            (
                "... even while CI runs",
                RunFacts {
                    pr_work: Some(PrWork::FixComments),
                    ..seen(A)
                },
                pr(CiState::Running),
                vec![],
                "fix_comments new=false",
            ),
            (
                "... but a failing CI comes first",
                RunFacts {
                    pr_work: Some(PrWork::FixComments),
                    ..seen(A)
                },
                pr(failed()),
                vec![],
                "fix_ci new=true",
            ),
            (
                "past max_rounds: the owner",
                RunFacts {
                    pr_rounds: 5,
                    ..seen(A)
                },
                pr(CiState::Green),
                vec![],
                "hold",
            ),
            (
                "work already asked for is not a new round",
                RunFacts {
                    pr_rounds: 5,
                    pr_work: Some(PrWork::PrReview),
                    ..seen(A)
                },
                pr(CiState::Green),
                vec![],
                "pr_review new=false",
            ),
        ];
        for (what, run, pr, threads, want) in cases {
            assert_eq!(kind(&step(&run, &pr, &threads)), want, "{what}");
        }
    }

    #[test]
    fn no_workflow_to_dispatch_is_said() {
        let mut s = settings();
        s.ci_workflow = None;
        let step = next_step(&Facts {
            run: &seen(A),
            pr: &pr(CiState::NeverRan),
            open_threads: &[],
            settings: &s,
            now: Utc::now(),
        });
        match step {
            Step::TriggerCi {
                how: Trigger::None,
                status,
            } => assert!(status.contains("github.ci_workflow is unset"), "{status}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn humans_are_told_from_bots_and_protocol_lines() {
        let s = settings();
        assert!(by_human(Some("alex"), "please fix", &s));
        assert!(!by_human(Some("Executor-Bot"), "done", &s));
        assert!(!by_human(Some("dependabot[bot]"), "bump", &s));
        assert!(!by_human(Some("alex"), "  [ACKNOWLEDGED: fixed]", &s));
        assert!(!by_human(None, "a deleted user", &s));
    }
}
