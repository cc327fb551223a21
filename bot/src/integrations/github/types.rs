//! What the REST calls return, as Eagle uses it: only the fields read, with
//! nullable fields as `Option` (a deleted user is `null`, `mergeable` is
//! `null` while GitHub computes it) and status words as enums with a
//! catch-all, so a new value from GitHub never breaks a poll.
//!
//! Field names and values follow the REST description `2022-11-28`
//! (`shared/github/NOTES.md` §2).

use serde::{Deserialize, Serialize};

pub use crate::ground::repo::{InvalidRepo, Repo};

/// `open` or `closed` (a merged PR is closed, with `merged` set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PrState {
    /// Open.
    Open,
    /// Closed or merged.
    Closed,
}

/// A pull request (`GET /repos/{o}/{r}/pulls/{n}`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "wire::Pull")]
pub struct PullRequest {
    /// Its number.
    pub number: u64,
    /// Open or closed.
    pub state: PrState,
    /// Whether it is a draft (merging one gets 405).
    pub draft: bool,
    /// Whether it was merged.
    pub merged: bool,
    /// `None` while GitHub computes it (after a push): poll again, do not
    /// merge yet.
    pub mergeable: Option<bool>,
    /// GitHub's untyped word (`clean`, `dirty`, `unstable`, `draft`, …).
    pub mergeable_state: String,
    /// The head commit.
    pub head_sha: String,
    /// The head branch.
    pub head_ref: String,
    /// The repository the head branch is in (`head.repo.full_name`): the
    /// PR's own for a branch of it, another for a fork; `None` when GitHub
    /// says `null` (the fork was deleted).
    pub head_repo: Option<String>,
    /// The base branch.
    pub base_ref: String,
    /// Label names.
    pub labels: Vec<String>,
    /// The GraphQL id.
    pub node_id: String,
    /// The web page.
    pub html_url: String,
    /// The author's login; `None` for a deleted user.
    pub author: Option<String>,
    /// The title.
    pub title: String,
    /// When it last changed (ISO 8601, as GitHub wrote it).
    pub updated_at: String,
    /// How many conversation comments it has.
    pub comments: u64,
    /// How many review (diff) comments it has.
    pub review_comments: u64,
}

/// A check run's or workflow run's `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Waiting for a runner.
    Queued,
    /// Running.
    InProgress,
    /// Done; see the conclusion.
    Completed,
    /// Waiting (Actions: an environment's approval).
    Waiting,
    /// Requested (Actions).
    Requested,
    /// Pending (Actions: a concurrency group).
    Pending,
    /// A word this client does not know: treated as not finished.
    #[serde(other)]
    Other,
}

/// A completed run's `conclusion`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Conclusion {
    /// Passed.
    Success,
    /// Failed.
    Failure,
    /// Neither: counts as passing.
    Neutral,
    /// Cancelled.
    Cancelled,
    /// Skipped: counts as passing.
    Skipped,
    /// Ran out of time.
    TimedOut,
    /// Needs a person (e.g. approval to run).
    ActionRequired,
    /// Left incomplete for over 14 days; GitHub gave up on it.
    Stale,
    /// A workflow that could not start (bad YAML, …).
    StartupFailure,
    /// A word this client does not know: treated as failing.
    #[serde(other)]
    Other,
}

impl Conclusion {
    /// Whether this conclusion lets CI be green.
    pub fn is_passing(self) -> bool {
        matches!(
            self,
            Conclusion::Success | Conclusion::Neutral | Conclusion::Skipped
        )
    }
}

/// Check runs of a ref, every page read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct CheckRuns {
    /// How many GitHub counts.
    pub total_count: u64,
    /// The runs (the latest of each name, newest first).
    pub check_runs: Vec<CheckRun>,
}

/// A check run.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "wire::CheckRun")]
pub struct CheckRun {
    /// Its id.
    pub id: u64,
    /// Its name (a job's name for Actions).
    pub name: String,
    /// The commit it checks.
    pub head_sha: String,
    /// Where it is.
    pub status: RunStatus,
    /// How it ended; `None` until completed.
    pub conclusion: Option<Conclusion>,
    /// The suite it belongs to (a workflow run's `check_suite_id`).
    pub check_suite_id: Option<u64>,
    /// The app that owns it (`github-actions`, …).
    pub app_slug: Option<String>,
    /// Its details page.
    pub details_url: Option<String>,
}

/// The combined commit status of a ref, every page of `statuses` read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct CombinedStatus {
    /// `failure`, `pending` or `success`; `pending` also when there are no
    /// statuses at all, so read `statuses` instead.
    pub state: String,
    /// The commit.
    #[serde(default)]
    pub sha: String,
    /// How many contexts GitHub counts.
    pub total_count: u64,
    /// The latest status of each context.
    pub statuses: Vec<CommitStatus>,
}

/// A commit status (from an external CI).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CommitStatus {
    /// Its context, e.g. `ci/circleci`.
    pub context: String,
    /// Its state.
    pub state: StatusState,
    /// Its link.
    #[serde(default)]
    pub target_url: Option<String>,
    /// Its description.
    #[serde(default)]
    pub description: Option<String>,
}

/// A commit status's `state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StatusState {
    /// Errored.
    Error,
    /// Failed.
    Failure,
    /// Not done.
    Pending,
    /// Passed.
    Success,
    /// A word this client does not know: treated as failing.
    #[serde(other)]
    Other,
}

/// Workflow runs for a commit, every page read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct WorkflowRuns {
    /// How many GitHub counts.
    pub total_count: u64,
    /// The runs, newest first.
    pub workflow_runs: Vec<WorkflowRun>,
}

/// A GitHub Actions workflow run.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct WorkflowRun {
    /// Its id (what a re-run names).
    pub id: u64,
    /// The workflow's name.
    #[serde(default)]
    pub name: Option<String>,
    /// The workflow's id.
    pub workflow_id: u64,
    /// The commit it ran on (a re-run replays this one, not the new head).
    pub head_sha: String,
    /// The branch it ran on.
    #[serde(default)]
    pub head_branch: Option<String>,
    /// What started it (`pull_request`, `push`, `workflow_dispatch`, …).
    pub event: String,
    /// Where it is.
    pub status: RunStatus,
    /// How it ended.
    #[serde(default)]
    pub conclusion: Option<Conclusion>,
    /// Its check suite (shared with its jobs' check runs).
    #[serde(default)]
    pub check_suite_id: Option<u64>,
    /// Which attempt (re-runs count up).
    #[serde(default)]
    pub run_attempt: Option<u64>,
    /// Its web page.
    #[serde(default)]
    pub html_url: Option<String>,
}

/// A conversation comment on an issue or PR.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "wire::IssueComment")]
pub struct IssueComment {
    /// Its id.
    pub id: u64,
    /// The author; `None` for a deleted user.
    pub author: Option<String>,
    /// The author's relation to the repository (`author_association`).
    pub association: Option<String>,
    /// Its Markdown.
    pub body: String,
    /// When it was made (ISO 8601).
    pub created_at: String,
    /// Its web link.
    pub html_url: String,
}

/// A PR review.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "wire::Review")]
pub struct Review {
    /// Its id.
    pub id: u64,
    /// The reviewer; `None` for a deleted user.
    pub author: Option<String>,
    /// The reviewer's relation to the repository (`author_association`).
    pub association: Option<String>,
    /// `APPROVED`, `CHANGES_REQUESTED`, `COMMENTED`, `DISMISSED` or `PENDING`.
    pub state: String,
    /// Its Markdown.
    pub body: String,
    /// The commit it reviewed.
    pub commit_id: Option<String>,
    /// When it was submitted; `None` while pending.
    pub submitted_at: Option<String>,
}

/// A review (diff) comment. REST has no resolved flag: threads come from
/// GraphQL ([`crate::integrations::github::ReviewThread`]).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "wire::ReviewComment")]
pub struct ReviewComment {
    /// Its id.
    pub id: u64,
    /// The review it belongs to.
    pub pull_request_review_id: Option<u64>,
    /// The author; `None` for a deleted user.
    pub author: Option<String>,
    /// Its Markdown.
    pub body: String,
    /// The file.
    pub path: String,
    /// The line; `None` when outdated.
    pub line: Option<u64>,
    /// The comment it answers (the thread's first).
    pub in_reply_to_id: Option<u64>,
    /// The commit it was made on.
    pub commit_id: Option<String>,
    /// When it was made.
    pub created_at: String,
}

/// How to merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MergeMethod {
    /// A merge commit.
    Merge,
    /// One squashed commit.
    Squash,
    /// The commits rebased onto the base.
    Rebase,
}

/// A merge, always bound to the head commit that was approved: a push in
/// between gets 409 instead of merging unseen code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MergeRequest {
    /// The head commit that must still be the head.
    pub sha: String,
    /// The method, always sent (the default, merge commits, is disabled in
    /// many repositories).
    pub merge_method: MergeMethod,
    /// The commit's title, if not GitHub's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit_title: Option<String>,
    /// The commit's message, if not GitHub's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit_message: Option<String>,
}

impl MergeRequest {
    /// A merge of `sha` by `method` with GitHub's default title and message.
    pub fn new(sha: &str, method: MergeMethod) -> MergeRequest {
        MergeRequest {
            sha: sha.to_owned(),
            merge_method: method,
            commit_title: None,
            commit_message: None,
        }
    }
}

/// A merge GitHub made.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Merged {
    /// The commit the merge created.
    pub sha: String,
    /// Always true on success.
    pub merged: bool,
    /// GitHub's message.
    #[serde(default)]
    pub message: String,
}

/// The JSON shapes as GitHub sends them, turned into the flat types above.
mod wire {
    use serde::Deserialize;

    use super::{Conclusion, PrState, RunStatus};

    #[derive(Deserialize)]
    pub struct User {
        pub login: String,
    }

    #[derive(Deserialize)]
    pub struct Branch {
        #[serde(rename = "ref")]
        pub git_ref: String,
        pub sha: String,
        /// `null` when the head's fork was deleted.
        #[serde(default)]
        pub repo: Option<BranchRepo>,
    }

    #[derive(Deserialize)]
    pub struct BranchRepo {
        pub full_name: String,
    }

    #[derive(Deserialize)]
    pub struct Label {
        pub name: String,
    }

    #[derive(Deserialize)]
    pub struct Pull {
        number: u64,
        state: PrState,
        #[serde(default)]
        draft: Option<bool>,
        #[serde(default)]
        merged: Option<bool>,
        #[serde(default)]
        mergeable: Option<bool>,
        #[serde(default)]
        mergeable_state: Option<String>,
        head: Branch,
        base: Branch,
        #[serde(default)]
        labels: Vec<Label>,
        node_id: String,
        html_url: String,
        #[serde(default)]
        user: Option<User>,
        #[serde(default)]
        title: String,
        #[serde(default)]
        updated_at: String,
        #[serde(default)]
        comments: Option<u64>,
        #[serde(default)]
        review_comments: Option<u64>,
    }

    impl From<Pull> for super::PullRequest {
        fn from(p: Pull) -> Self {
            super::PullRequest {
                number: p.number,
                state: p.state,
                draft: p.draft.unwrap_or(false),
                merged: p.merged.unwrap_or(false),
                mergeable: p.mergeable,
                mergeable_state: p.mergeable_state.unwrap_or_default(),
                head_sha: p.head.sha,
                head_ref: p.head.git_ref,
                head_repo: p.head.repo.map(|r| r.full_name),
                base_ref: p.base.git_ref,
                labels: p.labels.into_iter().map(|l| l.name).collect(),
                node_id: p.node_id,
                html_url: p.html_url,
                author: p.user.map(|u| u.login),
                title: p.title,
                updated_at: p.updated_at,
                comments: p.comments.unwrap_or(0),
                review_comments: p.review_comments.unwrap_or(0),
            }
        }
    }

    #[derive(Deserialize)]
    pub struct Suite {
        id: u64,
    }

    #[derive(Deserialize)]
    pub struct App {
        #[serde(default)]
        slug: Option<String>,
    }

    #[derive(Deserialize)]
    pub struct CheckRun {
        id: u64,
        name: String,
        head_sha: String,
        status: RunStatus,
        #[serde(default)]
        conclusion: Option<Conclusion>,
        #[serde(default)]
        check_suite: Option<Suite>,
        #[serde(default)]
        app: Option<App>,
        #[serde(default)]
        details_url: Option<String>,
    }

    impl From<CheckRun> for super::CheckRun {
        fn from(c: CheckRun) -> Self {
            super::CheckRun {
                id: c.id,
                name: c.name,
                head_sha: c.head_sha,
                status: c.status,
                conclusion: c.conclusion,
                check_suite_id: c.check_suite.map(|s| s.id),
                app_slug: c.app.and_then(|a| a.slug),
                details_url: c.details_url,
            }
        }
    }

    #[derive(Deserialize)]
    pub struct IssueComment {
        id: u64,
        #[serde(default)]
        user: Option<User>,
        #[serde(default)]
        author_association: Option<String>,
        #[serde(default)]
        body: Option<String>,
        created_at: String,
        html_url: String,
    }

    impl From<IssueComment> for super::IssueComment {
        fn from(c: IssueComment) -> Self {
            super::IssueComment {
                id: c.id,
                author: c.user.map(|u| u.login),
                association: c.author_association,
                body: c.body.unwrap_or_default(),
                created_at: c.created_at,
                html_url: c.html_url,
            }
        }
    }

    #[derive(Deserialize)]
    pub struct Review {
        id: u64,
        #[serde(default)]
        user: Option<User>,
        #[serde(default)]
        author_association: Option<String>,
        state: String,
        #[serde(default)]
        body: Option<String>,
        #[serde(default)]
        commit_id: Option<String>,
        #[serde(default)]
        submitted_at: Option<String>,
    }

    impl From<Review> for super::Review {
        fn from(r: Review) -> Self {
            super::Review {
                id: r.id,
                author: r.user.map(|u| u.login),
                association: r.author_association,
                state: r.state,
                body: r.body.unwrap_or_default(),
                commit_id: r.commit_id,
                submitted_at: r.submitted_at,
            }
        }
    }

    #[derive(Deserialize)]
    pub struct ReviewComment {
        id: u64,
        #[serde(default)]
        pull_request_review_id: Option<u64>,
        #[serde(default)]
        user: Option<User>,
        #[serde(default)]
        body: String,
        path: String,
        #[serde(default)]
        line: Option<u64>,
        #[serde(default)]
        in_reply_to_id: Option<u64>,
        #[serde(default)]
        commit_id: Option<String>,
        created_at: String,
    }

    impl From<ReviewComment> for super::ReviewComment {
        fn from(c: ReviewComment) -> Self {
            super::ReviewComment {
                id: c.id,
                pull_request_review_id: c.pull_request_review_id,
                author: c.user.map(|u| u.login),
                body: c.body,
                path: c.path,
                line: c.line,
                in_reply_to_id: c.in_reply_to_id,
                commit_id: c.commit_id,
                created_at: c.created_at,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_names_are_checked() {
        let repo: Repo = "acme/app.rs".parse().unwrap();
        assert_eq!((repo.owner(), repo.name()), ("acme", "app.rs"));
        assert_eq!(repo.to_string(), "acme/app.rs");
        for bad in [
            "acme",
            "acme/",
            "/app",
            "acme/app/x",
            "acme/..",
            "ac me/app",
            "a/b?c",
        ] {
            assert!(bad.parse::<Repo>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_pull_request_reads_nulls_and_unknown_words() {
        let pr: PullRequest = serde_json::from_value(serde_json::json!({
            "number": 3, "state": "open", "draft": true, "merged": false,
            "mergeable": null, "mergeable_state": "unknown",
            "head": {"ref": "fix/a", "sha": "abc", "repo": {"full_name": "mallory/app"}},
            "base": {"ref": "main", "sha": "def", "repo": null},
            "labels": [{"name": "eagle"}], "node_id": "PR_1", "html_url": "https://github.com/o/r/pull/3",
            "user": null, "title": "t", "updated_at": "2024-01-01T00:00:00Z",
        }))
        .unwrap();
        assert_eq!(pr.mergeable, None);
        assert_eq!(pr.author, None);
        assert_eq!(pr.labels, ["eagle"]);
        assert_eq!(
            (pr.head_ref.as_str(), pr.base_ref.as_str()),
            ("fix/a", "main")
        );
        assert_eq!(pr.head_repo.as_deref(), Some("mallory/app"));
        let run: CheckRun = serde_json::from_value(serde_json::json!({
            "id": 1, "name": "build", "head_sha": "abc", "status": "brand_new",
            "conclusion": "also_new", "check_suite": {"id": 9}, "app": {"slug": "github-actions"},
        }))
        .unwrap();
        assert_eq!(run.status, RunStatus::Other);
        assert_eq!(run.conclusion, Some(Conclusion::Other));
        assert_eq!(run.check_suite_id, Some(9));
    }
}
