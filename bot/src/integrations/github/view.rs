//! One poll of a pull request, as the PR loop sees it each tick: the PR,
//! its CI on the head commit, and its open review threads.
//!
//! The REST reads are conditional, so an idle PR costs no quota at all.
//! GraphQL has no ETags, so threads are asked for only when the REST view
//! changed since the caller's [`PollMark`] (a new head, a new comment, any
//! update), or when the last read is older than
//! [`PollSettings::threads_max_age`]: resolving a thread changes nothing
//! REST shows, so without that bound a resolution would go unseen until the
//! next push.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::integrations::github::Error;
use crate::integrations::github::ci::{CiState, summarize};
use crate::integrations::github::client::GitHub;
use crate::integrations::github::graphql::ReviewThreads;
use crate::integrations::github::threads::{OpenThread, open_threads};
use crate::integrations::github::trust::Trusted;
use crate::integrations::github::types::{
    CheckRuns, CombinedStatus, PullRequest, Repo, WorkflowRuns,
};

/// How PRs are polled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PollSettings {
    /// Checks that must be there and pass (check run names or status
    /// contexts), e.g. `macOS UI Tests`.
    pub required_checks: Vec<String>,
    /// Threads are read again after this long even if REST shows no change.
    pub threads_max_age: Duration,
    /// Whose comments in review threads steer (writers, and the
    /// profile's `github.trusted_logins`).
    pub trusted: Trusted,
}

impl Default for PollSettings {
    /// No required checks; threads re-read at least every 30 minutes; only
    /// writers trusted.
    fn default() -> Self {
        PollSettings {
            required_checks: Vec::new(),
            threads_max_age: Duration::from_secs(30 * 60),
            trusted: Trusted::default(),
        }
    }
}

/// What a poll saw, for the next poll of the same PR to compare with. The
/// PR loop stores it with the run (it is plain data, serialisable).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PollMark {
    /// What of the REST view decides whether threads may have changed.
    pub fingerprint: String,
    /// When threads were last read.
    pub threads_read_at: DateTime<Utc>,
}

/// One poll of a PR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequestView {
    /// The repository.
    pub repo: Repo,
    /// The PR.
    pub pull: PullRequest,
    /// CI on the head commit, summarised.
    pub ci: CiState,
    /// The check runs behind it.
    pub check_runs: CheckRuns,
    /// The commit statuses behind it.
    pub status: CombinedStatus,
    /// The workflow runs behind it (a re-run names one).
    pub workflow_runs: WorkflowRuns,
    /// The review threads, when they were read this time; `None` when the
    /// REST view had not changed: what the caller saw last still holds.
    pub threads: Option<ReviewThreads>,
    /// The open threads among [`PullRequestView::threads`], when read.
    pub open_threads: Option<Vec<OpenThread>>,
    /// Whether the REST view differs from the caller's mark (always true
    /// without one).
    pub changed: bool,
    /// The mark to pass to the next poll.
    pub mark: PollMark,
}

/// The parts of a PR whose change may mean new or changed review threads:
/// the head (threads go outdated), the update time, the comment counts.
pub fn fingerprint(pull: &PullRequest) -> String {
    format!(
        "{} {} {:?} draft={} comments={} review_comments={}",
        pull.head_sha, pull.updated_at, pull.state, pull.draft, pull.comments, pull.review_comments
    )
}

impl GitHub {
    /// Polls a PR: the PR, CI on its head, and (only when the REST view
    /// changed since `last`, or the threads are older than the settings
    /// allow) its review threads.
    pub async fn poll_pull_request(
        &self,
        repo: &Repo,
        number: u64,
        settings: &PollSettings,
        last: Option<&PollMark>,
    ) -> Result<PullRequestView, Error> {
        let pull = self.pull_request(repo, number).await?;
        let check_runs = self.check_runs(repo, &pull.head_sha).await?;
        let status = self.combined_status(repo, &pull.head_sha).await?;
        let workflow_runs = self.workflow_runs(repo, &pull.head_sha).await?;
        let ci = summarize(
            &check_runs,
            &status,
            &workflow_runs,
            &settings.required_checks,
        );

        let now = Utc::now();
        let fingerprint = fingerprint(&pull);
        let changed = last.is_none_or(|m| m.fingerprint != fingerprint);
        let stale = last.is_none_or(|m| {
            now.signed_duration_since(m.threads_read_at)
                .to_std()
                .is_ok_and(|age| age >= settings.threads_max_age)
        });
        let (threads, threads_read_at) = match last {
            Some(m) if !changed && !stale => (None, m.threads_read_at),
            _ => (Some(self.review_threads(repo, number).await?), now),
        };
        // Only Eagle's own acknowledgements close a thread: its login is
        // asked once; unknown, none is trusted.
        let own = match &threads {
            Some(_) => self.own_login().await.ok(),
            None => None,
        };
        let open = threads
            .as_ref()
            .map(|t| open_threads(&t.threads, own.as_deref(), &settings.trusted));
        Ok(PullRequestView {
            repo: repo.clone(),
            pull,
            ci,
            check_runs,
            status,
            workflow_runs,
            threads,
            open_threads: open,
            changed,
            mark: PollMark {
                fingerprint,
                threads_read_at,
            },
        })
    }
}
