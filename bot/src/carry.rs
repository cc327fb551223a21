//! What Eagle carries out itself once a request is approved, so that no
//! worker needs a token that could merge or write to Asana:
//!
//! * `merge_pr`: the PR is merged with `PUT …/pulls/{n}/merge` bound to the
//!   head the request was made for (a push since gives GitHub's 409, never
//!   a merge of unseen code);
//! * `post_asana_comment`: the request's words are posted on the run's
//!   Asana task, with a marker that is looked for before every POST.
//!
//! Each is done exactly once, also across a crash: the outcome is recorded
//! with its post in one transaction, and before acting again Eagle looks
//! whether it already happened (the PR merged, the marker there). One
//! carrier runs per deployment (a lease). A request that reused an earlier
//! human approval (a resumed worker asking again) is not carried out twice.

use std::time::Duration;

use crate::asana::{Asana, CommentOutcome};
use crate::background::{BackgroundLoop, LeaseSpec, Next, Tick};
use crate::github::{Error as GitHubError, GitHub, MergeMethod, MergeRefusal, MergeRequest};
use crate::mirror::Poster;
use crate::profile::GithubSettings;
use crate::store::{PrLink, Request, Run, RunState, Store, StoreError, short_sha};
use crate::text::{neutralize_mentions, one_line};

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
    /// Cannot be done: recorded and posted, never tried again.
    Refused(String),
    /// Not now (GitHub still computing mergeability, a transient error):
    /// tried again on a later sweep.
    Later(String),
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
        Ok(Next::After(PERIODIC))
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
        for request in self.store.requests_to_carry_out(BATCH).await? {
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
                .claim_carry_out(request.id, &self.instance, CARRY_CLAIM)
                .await?
            {
                continue;
            }
            let run = {
                let mut tx = self.store.begin_read().await?;
                tx.run(request.run_id).await?
            };
            let Some(run) = run else { continue };
            let outcome = if matches!(run.state, RunState::Cancelled | RunState::Abandoned) {
                Outcome::Refused(format!(
                    "Eagle did not carry out the approved {}: run {} is {}",
                    request.action,
                    run.id,
                    run.state.as_str()
                ))
            } else {
                match request.action.as_str() {
                    "merge_pr" => self.merge(&request, &run).await,
                    _ => self.comment(&request, &run).await,
                }
            };
            let (text, done) = match &outcome {
                Outcome::Later(why) => {
                    let wait = self.try_later(request.id);
                    tracing::info!(
                        request = request.id,
                        why,
                        wait_s = wait.as_secs(),
                        "an approved request waits to be carried out"
                    );
                    continue;
                }
                Outcome::Done(text) => (text.as_str(), true),
                Outcome::Refused(text) => (text.as_str(), false),
            };
            self.later.remove(&request.id);
            let mut tx = self.store.begin_write().await?;
            if tx.record_carried_out(request.id, text, done).await? {
                let line = format!(
                    "{} (run:{} req:{})",
                    neutralize_mentions(&one_line(text, 400)),
                    run.id,
                    request.id
                );
                self.poster.post(&mut tx, &run.topic(), &line).await?;
                tx.commit().await?;
                settled += 1;
            }
        }
        Ok(settled)
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

    async fn merge(&self, request: &Request, run: &Run) -> Outcome {
        let Some((client, settings)) = &self.github else {
            return Outcome::Refused(
                "Eagle did not merge: it has no [github] configured; merge the PR by hand".into(),
            );
        };
        let number = run
            .pr_number
            .or_else(|| PrLink::find(&request.body).map(|l| l.number))
            .filter(|n| *n > 0);
        let Some(number) = number else {
            return Outcome::Refused(format!("Eagle did not merge: run {} names no PR", run.id));
        };
        let Some(sha) = request.bound_sha.as_deref() else {
            return Outcome::Refused(format!(
                "Eagle did not merge PR #{number}: the request was made before Eagle saw the PR's head, \
                 so the approval is of no particular commit; ask again once the run is in pr"
            ));
        };
        // Only in the profile's repository, whatever a worker's line named.
        if let Some(other) = run
            .pr_repo
            .as_deref()
            .filter(|r| !settings.repo.is_named(r))
        {
            return Outcome::Refused(format!(
                "Eagle did not merge: the run's PR is in {}, not in github.repo {}",
                one_line(other, 100),
                settings.repo
            ));
        }
        let repo = settings.repo.clone();
        let number = number as u64;
        // Looked at first: a merge made before a crash is not made again,
        // and a head that moved is refused without spending a merge.
        let pull = match client.pull_request(&repo, number).await {
            Ok(pull) => pull,
            Err(error) => return classify(number, &error),
        };
        if pull.merged {
            return Outcome::Done(format!("PR #{number} is merged"));
        }
        if pull.head_sha != sha {
            return Outcome::Refused(format!(
                "Eagle did not merge PR #{number}: its head moved from {} to {} since the request",
                short_sha(sha),
                short_sha(&pull.head_sha)
            ));
        }
        if pull.mergeable.is_none() {
            let waited = request
                .decided_at
                .map(|at| (crate::store::now() - at).to_std().unwrap_or_default())
                .unwrap_or_default();
            if waited < MERGEABLE_PATIENCE {
                return Outcome::Later("GitHub has not computed whether it can be merged".into());
            }
        }
        let method = match settings.merge_method.as_str() {
            "merge" => MergeMethod::Merge,
            "rebase" => MergeMethod::Rebase,
            _ => MergeMethod::Squash,
        };
        match client
            .merge(&repo, number, &MergeRequest::new(sha, method))
            .await
        {
            Ok(merged) if merged.merged => {
                Outcome::Done(format!("Eagle merged PR #{number} at {}", short_sha(sha)))
            }
            Ok(merged) => Outcome::Refused(format!(
                "Eagle did not merge PR #{number}: GitHub says {}",
                one_line(&merged.message, 200)
            )),
            Err(error) => classify(number, &error),
        }
    }

    async fn comment(&self, request: &Request, run: &Run) -> Outcome {
        let Some(asana) = &self.asana else {
            return Outcome::Refused(
                "Eagle did not post the Asana comment: it has no [asana] configured".into(),
            );
        };
        let Some(task_gid) = run.task_gid.strip_prefix("asana:") else {
            return Outcome::Refused(format!(
                "Eagle did not post the Asana comment: the task of run {} did not come from Asana",
                run.id
            ));
        };
        let text = request.body.trim();
        if text.is_empty() {
            return Outcome::Refused(
                "Eagle did not post the Asana comment: the request holds no text".into(),
            );
        }
        let marker = format!("[eagle:run-{}-req-{}]", run.id, request.id);
        match asana.post_comment_once(task_gid, &marker, text).await {
            Ok(CommentOutcome::Posted { story_gid }) => Outcome::Done(format!(
                "Eagle posted the approved comment on the Asana task (story {story_gid})"
            )),
            Ok(CommentOutcome::Found { story_gid }) => Outcome::Done(format!(
                "The approved comment is on the Asana task (story {story_gid})"
            )),
            Err(error @ crate::asana::Error::RateLimited { .. }) => {
                Outcome::Later(error.to_string())
            }
            Err(error) if error.is_ambiguous() => Outcome::Later(error.to_string()),
            Err(error) => Outcome::Refused(format!(
                "Eagle did not post the Asana comment: {}",
                one_line(&error.to_string(), 300)
            )),
        }
    }
}

/// A GitHub error while merging: transient ones wait for a later sweep;
/// the rest are recorded.
fn classify(number: u64, error: &GitHubError) -> Outcome {
    match error {
        GitHubError::MergeRefused {
            reason: MergeRefusal::NotMergeable,
            ..
        } => Outcome::Refused(format!(
            "Eagle did not merge PR #{number}: GitHub says it is not mergeable (a conflict?)"
        )),
        GitHubError::MergeRefused { reason, .. } => {
            Outcome::Refused(format!("Eagle did not merge PR #{number}: {reason}"))
        }
        error if error.is_transient() || error.retry_after().is_some() => {
            Outcome::Later(error.to_string())
        }
        error => Outcome::Refused(format!(
            "Eagle did not merge PR #{number}: {}",
            one_line(&error.to_string(), 300)
        )),
    }
}
