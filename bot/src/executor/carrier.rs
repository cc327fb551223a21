//! What Eagle carries out itself once a request is approved, so that no
//! worker holds a token (the request's body is the effect's exact
//! parameters, [`crate::policy::effect::Effect`]):
//!
//! * `push_branch` ([`push`]): carried out by the runner, on the host of the
//!   worker's checkout, from a repository of Eagle's own;
//! * `open_draft_pr` ([`pr`]): the run's draft PR from its branch to
//!   `github.base`, with the approved title and body (a PR already open
//!   from the branch is found first);
//! * `comment_on_pr`, `reply_thread` ([`comment`]): the approved text,
//!   once, with a marker that is looked for before every POST;
//! * `merge_pr` ([`merge`]): only the run's own PR (its branch, its base),
//!   at the approved head, with the required checks and the review green
//!   at that head; merged with `PUT …/pulls/{n}/merge` bound to that sha;
//! * `post_asana_comment` ([`asana`]): the approved words on the run's
//!   Asana task, with a marker looked for before every POST.
//!
//! Each is done exactly once, also across a crash: the outcome is recorded
//! with its post in one transaction, and before acting again Eagle looks
//! whether it already happened (the PR merged, the marker there). One
//! carrier runs per deployment (a lease). A request that reused an earlier
//! human approval (a resumed worker asking again) is not carried out twice.

mod asana;
mod comment;
mod merge;
mod pr;
pub mod push;

use std::time::Duration;

use crate::ground::text::{neutralize_mentions, one_line};
use crate::integrations::asana::Asana;
use crate::integrations::github::GitHub;
use crate::policy::effect::Carried;
use crate::profile::GithubSettings;
use crate::runtime::background::{BackgroundLoop, LeaseSpec, Next, Tick};
use crate::runtime::posts::Poster;
use crate::store::{PrLink, Run, RunState, Store, StoreError};

const LEASE: &str = "carrier";
const LEASE_TTL: Duration = Duration::from_secs(60);
/// Requests looked at per sweep.
const BATCH: i64 = 20;
/// How often approved requests are looked for when nothing wakes the carrier.
const PERIODIC: Duration = Duration::from_secs(30);
/// How long GitHub may take to say whether a PR can be merged before the
/// merge is given up.
const MERGEABLE_PATIENCE: Duration = Duration::from_secs(10 * 60);
/// How long one instance holds a request it carries out (far longer than
/// any merge or comment takes, retries included).
const CARRY_CLAIM: Duration = Duration::from_secs(10 * 60);

/// Eagle's hands for approved requests.
pub struct Carrier {
    store: Store,
    /// Eagle's identity in the executor channel.
    poster: Poster,
    /// Eagle's GitHub client and settings (the repository merges go to).
    github: Option<(GitHub, GithubSettings)>,
    asana: Option<std::sync::Arc<Asana>>,
    /// This instance's name for claiming a request.
    instance: String,
    /// Requests put off (`Later`): not tried again before then, the wait
    /// doubling with each try, so that a slow GitHub is not asked on every
    /// change of the database.
    later: std::collections::HashMap<i64, (tokio::time::Instant, u32)>,
}

impl Carrier {
    /// Where `run`'s PR is on GitHub and the branch it goes into
    /// ([`crate::executor::repos::github_of_run`]); `Err` says why nowhere.
    async fn repo_of(
        &self,
        settings: &GithubSettings,
        run: &Run,
    ) -> Result<(crate::ground::repo::Repo, String), String> {
        crate::executor::repos::github_of_run(&self.store, (&settings.repo, &settings.base), run)
            .await
    }
}

impl std::fmt::Debug for Carrier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Carrier")
            .field("github", &self.github.is_some())
            .field("asana", &self.asana.is_some())
            .finish_non_exhaustive()
    }
}

/// What became of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    /// Done (or found done): recorded and posted.
    Done(String),
    /// Done, with what the worker learns (the PR, the comment's address).
    Carried(String, Carried),
    /// Cannot be done: recorded and posted, never tried again.
    Refused(String),
    /// Cannot be done, for a reason the run's owner must hear of (the
    /// checks at an approved head failing or absent, GitHub's own refusal
    /// of a merge): like `Refused`, and the owner is told, once.
    Blocked(String),
    /// Not done: the head of the PR moved since the owner's `!merge` named
    /// it. Like `Blocked`, and the new head (the second field) is what the
    /// owner is offered now.
    Moved(String, String),
    /// Not now (GitHub still computing mergeability, a transient error):
    /// tried again on a later sweep.
    Later(String),
    /// Not now, for a reason the run's topic is told (what it waits for,
    /// and until when), once for each thing it says: tried again later.
    Waits(String),
}

impl BackgroundLoop for Carrier {
    const NAME: &'static str = "carrier";
    /// A merge or a comment half-way is claimed and looked for again.
    const ABANDON_ON_STOP: bool = true;

    fn lease(&self) -> Option<LeaseSpec> {
        Some(LeaseSpec {
            name: LEASE,
            ttl: LEASE_TTL,
        })
    }

    async fn tick(&mut self, tick: &mut Tick<'_>) -> anyhow::Result<Next> {
        self.sweep(tick).await?;
        // A request put off is tried again when its time comes, not only
        // at the next change or period.
        let now = tokio::time::Instant::now();
        let next = self
            .later
            .values()
            .map(|(at, _)| at.saturating_duration_since(now))
            .fold(PERIODIC, Duration::min);
        Ok(Next::After(next))
    }
}

impl Carrier {
    /// The carrier of the orchestrator profile: `github` (its client and
    /// `[github]`) merges, `asana` comments; `instance` names this process.
    pub fn new(
        store: Store,
        poster: Poster,
        github: Option<(GitHub, GithubSettings)>,
        asana: Option<std::sync::Arc<Asana>>,
        instance: String,
    ) -> Carrier {
        Carrier {
            store,
            poster,
            github,
            asana,
            instance,
            later: std::collections::HashMap::new(),
        }
    }

    /// Carries out the approved requests waiting for it. Returns how many
    /// were settled.
    pub async fn sweep(&mut self, tick: &mut Tick<'_>) -> Result<usize, StoreError> {
        let mut settled = 0;
        for request in self.store.carried().requests_to_carry_out(BATCH).await? {
            if self.put_off(request.id) {
                continue;
            }
            // While this instance leads, and holds the request itself: a
            // lease that changed hands in the middle never makes two carry
            // one request out.
            if !tick.leads().await? {
                break;
            }
            if !self
                .store
                .carried()
                .claim_carry_out(request.id, &self.instance, CARRY_CLAIM)
                .await?
            {
                continue;
            }
            let run = {
                let mut tx = self.store.begin_read().await?;
                tx.tasks().run(request.run_id).await?
            };
            let Some(run) = run else { continue };
            let outcome = if matches!(run.state, RunState::Cancelled | RunState::Abandoned) {
                Outcome::Refused(format!(
                    "Eagle did not carry out the approved {}: run {} is {}",
                    request.action,
                    run.id,
                    run.state.as_str()
                ))
            } else if run.dry_run {
                Outcome::Done(self.dry_run_text(&request, &run).await?)
            } else {
                match request.action.as_str() {
                    "merge_pr" => self.merge(&request, &run).await,
                    "open_draft_pr" => self.open_pr(&request, &run).await,
                    "comment_on_pr" | "reply_thread" => {
                        self.comment_on_github(&request, &run).await
                    }
                    _ => self.comment(&request, &run).await,
                }
            };
            let found = Carried::default();
            let (text, done_with) = match &outcome {
                Outcome::Later(why) | Outcome::Waits(why) => {
                    let wait = self.try_later(request.id);
                    tracing::info!(
                        request = request.id,
                        why,
                        wait_s = wait.as_secs(),
                        "an approved request waits to be carried out"
                    );
                    if matches!(outcome, Outcome::Waits(_)) {
                        self.say_it_waits(&request, &run, why).await?;
                    }
                    continue;
                }
                Outcome::Done(text) => (text.as_str(), Some(&found)),
                Outcome::Carried(text, carried) => (text.as_str(), Some(carried)),
                Outcome::Refused(text) | Outcome::Blocked(text) | Outcome::Moved(text, _) => {
                    (text.as_str(), None)
                }
            };
            let done = matches!(outcome, Outcome::Done(_) | Outcome::Carried(..));
            self.later.remove(&request.id);
            // Where a PR was opened: the run's repository, as open_pr found it.
            let opened_in = match (&self.github, request.action.as_str()) {
                (Some((_, settings)), "open_draft_pr") => self
                    .repo_of(settings, &run)
                    .await
                    .map(|(repo, _)| repo.to_string())
                    .ok(),
                _ => None,
            };
            let mut tx = self.store.begin_write().await?;
            if tx
                .carried()
                .record_carried_out(request.id, text, done)
                .await?
            {
                if let Some(carried) = done_with {
                    let json = serde_json::to_string(carried).unwrap_or_default();
                    tx.carried()
                        .record_carried_result(request.id, &json)
                        .await?;
                }
                if let (Outcome::Carried(_, carried), "open_draft_pr") =
                    (&outcome, request.action.as_str())
                    && let Some(number) = carried.pr_number
                {
                    let link = PrLink {
                        number: number as i64,
                        url: carried.url.clone(),
                        repo: opened_in.clone(),
                    };
                    tx.prs().record_pr_link(run.id, &link).await?;
                    // Known before the PR loop looks: an escalated merge
                    // says at once that the PR is a draft.
                    if let Some(draft) = carried.draft {
                        tx.prs().set_pr_draft(run.id, draft).await?;
                    }
                }
                let line = format!(
                    "{} (run:{} req:{})",
                    neutralize_mentions(&one_line(text, 400)),
                    run.id,
                    request.id
                );
                self.poster.post(&mut tx, &run.topic(), &line).await?;
                // Recorded once, so told once: the owner hears it with an
                // @-mention (the decider posts notices).
                if let Outcome::Blocked(text) = &outcome {
                    tx.controls()
                        .insert_notice(
                            run.id,
                            "carry_blocked",
                            &format!("{text} (req:{})", request.id),
                        )
                        .await?;
                }
                if let Outcome::Moved(text, head) = &outcome {
                    tx.prs().record_merge_offer(run.id, head).await?;
                    tx.controls()
                        .insert_notice(
                            run.id,
                            "merge_moved",
                            &format!("{text} (req:{})", request.id),
                        )
                        .await?;
                }
                tx.commit().await?;
                settled += 1;
            }
        }
        Ok(settled)
    }

    /// What a dry run says instead of carrying `request` out: the effect as
    /// approved, in Eagle's words (its text quoted unless the task is
    /// private), and that nothing was done.
    async fn dry_run_text(
        &self,
        request: &crate::store::Request,
        run: &Run,
    ) -> Result<String, StoreError> {
        let private = {
            let mut tx = self.store.begin_read().await?;
            tx.tasks()
                .task_by_gid(&run.task_gid)
                .await?
                .is_none_or(|t| t.origin_private)
        };
        let what = crate::policy::effect::describe(request, run, private)
            .unwrap_or_else(|| format!("Eagle will carry out {}.", request.action));
        Ok(format!(
            "Dry run: Eagle did not carry out the approved {}; approved, it would have done this: {what}",
            request.action
        ))
    }

    /// Tells the run's topic what an approved request waits for, unless it
    /// was told that already (the store keeps what was said last).
    async fn say_it_waits(
        &self,
        request: &crate::store::Request,
        run: &crate::store::Run,
        text: &str,
    ) -> Result<(), StoreError> {
        if request.carry_waiting.as_deref() == Some(text) {
            return Ok(());
        }
        let mut tx = self.store.begin_write().await?;
        if tx.carried().record_carry_waiting(request.id, text).await? {
            let line = format!(
                "{} (run:{} req:{})",
                neutralize_mentions(&one_line(text, 400)),
                run.id,
                request.id
            );
            self.poster.post(&mut tx, &run.topic(), &line).await?;
        }
        tx.commit().await
    }

    /// Whether a request was put off and its time has not come.
    fn put_off(&self, id: i64) -> bool {
        self.later
            .get(&id)
            .is_some_and(|(at, _)| *at > tokio::time::Instant::now())
    }

    /// Puts a request off: 5 s, doubling, at most 5 minutes.
    fn try_later(&mut self, id: i64) -> Duration {
        let later = &mut self.later;
        let tries = later.get(&id).map_or(0, |(_, n)| *n);
        let wait = Duration::from_secs(5)
            .saturating_mul(1 << tries.min(6))
            .min(Duration::from_secs(300));
        later.insert(id, (tokio::time::Instant::now() + wait, tries + 1));
        wait
    }
}
