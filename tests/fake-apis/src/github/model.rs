//! The public data types of the fake GitHub: what tests set up, read back,
//! and inject.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

/// Settings of a repository.
#[derive(Debug, Clone)]
pub struct RepoSpec {
    /// Whether merge commits are allowed (`merge_method: merge`).
    pub allow_merge_commit: bool,
    /// Whether squash merges are allowed.
    pub allow_squash_merge: bool,
    /// Whether rebase merges are allowed.
    pub allow_rebase_merge: bool,
    /// The default branch, a valid `ref` for dispatches.
    pub default_branch: String,
}

impl Default for RepoSpec {
    fn default() -> Self {
        RepoSpec {
            allow_merge_commit: true,
            allow_squash_merge: true,
            allow_rebase_merge: true,
            default_branch: "main".to_owned(),
        }
    }
}

/// A GitHub Actions workflow of a repository.
#[derive(Debug, Clone)]
pub struct WorkflowSpec {
    /// Its numeric id, usable in `…/actions/workflows/{id}/dispatches`.
    pub id: u64,
    /// Its display name, also the name of the check runs it creates.
    pub name: String,
    /// Its file, e.g. `.github/workflows/ci.yml`; the file name alone is also
    /// usable as the workflow id in URLs.
    pub path: String,
    /// Whether it has a `workflow_dispatch` trigger.
    pub dispatchable: bool,
    /// The `workflow_dispatch` inputs it declares.
    pub inputs: Vec<String>,
}

impl WorkflowSpec {
    /// A dispatchable workflow without inputs at `.github/workflows/{file}`.
    pub fn new(id: u64, name: &str, file: &str) -> WorkflowSpec {
        WorkflowSpec {
            id,
            name: name.to_owned(),
            path: format!(".github/workflows/{file}"),
            dispatchable: true,
            inputs: Vec::new(),
        }
    }
}

/// A pull request to open.
#[derive(Debug, Clone)]
pub struct PrSpec {
    /// The author's login.
    pub author: String,
    /// The title.
    pub title: String,
    /// The head branch.
    pub head_ref: String,
    /// The repository the head branch is in: `None` for the PR's own, a
    /// fork's `owner/name` (added with [`crate::FakeGitHub::add_fork`]) for
    /// a PR from a fork.
    pub head_repo: Option<String>,
    /// The head commit.
    pub head_sha: String,
    /// The base branch.
    pub base_ref: String,
    /// Whether it is a draft.
    pub draft: bool,
    /// Label names.
    pub labels: Vec<String>,
    /// What `mergeable` becomes once GitHub has "computed" it.
    pub mergeable: bool,
}

impl PrSpec {
    /// A ready, mergeable PR into `main` without labels.
    pub fn new(author: &str, head_ref: &str, head_sha: &str) -> PrSpec {
        PrSpec {
            author: author.to_owned(),
            title: format!("Changes from {head_ref}"),
            head_ref: head_ref.to_owned(),
            head_repo: None,
            head_sha: head_sha.to_owned(),
            base_ref: "main".to_owned(),
            draft: false,
            labels: Vec::new(),
            mergeable: true,
        }
    }

    /// The same PR as a draft.
    pub fn draft(mut self) -> PrSpec {
        self.draft = true;
        self
    }

    /// The same PR from the branch of the same name in the fork `fork`
    /// (`owner/name`).
    pub fn from_fork(mut self, fork: &str) -> PrSpec {
        self.head_repo = Some(fork.to_owned());
        self
    }
}

/// Branch protection of a base branch, as GitHub enforces it on merges
/// through the API (for everyone: the fake models "Do not allow bypassing
/// the above settings", so an admin's token gets the same 405).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Protection {
    /// Check runs or status contexts that must have passed at the head
    /// (`success`, `neutral` or `skipped`).
    pub required_checks: Vec<String>,
    /// Approving reviews needed from people with write access, whose latest
    /// review counts; a writer's latest `CHANGES_REQUESTED` blocks.
    pub required_approvals: u32,
}

/// What a pull request looks like now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrSnapshot {
    /// Its number.
    pub number: u64,
    /// `open` or `closed`.
    pub state: String,
    /// Whether it is a draft.
    pub draft: bool,
    /// Whether it was merged.
    pub merged: bool,
    /// The head commit the merge was bound to.
    pub merged_head_sha: Option<String>,
    /// The commit the merge created.
    pub merge_commit_sha: Option<String>,
    /// `merge`, `squash` or `rebase`.
    pub merge_method: Option<String>,
    /// The `commit_title` the merge request gave, if any.
    pub merge_commit_title: Option<String>,
    /// The head commit now.
    pub head_sha: String,
    /// Label names, in the order they were added.
    pub labels: Vec<String>,
    /// The title and description (`None`: none given).
    pub title: String,
    pub body: Option<String>,
    /// The head and base branches.
    pub head_ref: String,
    pub base_ref: String,
    /// The repository the head branch is in (`owner/name`).
    pub head_repo: String,
    /// Who opened it.
    pub author: String,
}

/// A check run to add.
#[derive(Debug, Clone)]
pub struct CheckRunSpec {
    /// Its name.
    pub name: String,
    /// The commit it checks.
    pub head_sha: String,
    /// `queued`, `in_progress`, `completed`, `waiting`, `requested` or `pending`.
    pub status: String,
    /// Set only when completed: `success`, `failure`, `neutral`, `cancelled`,
    /// `skipped`, `timed_out`, `action_required` or `stale`.
    pub conclusion: Option<String>,
    /// The GitHub App that owns it (GitHub Actions is 15368).
    pub app_id: u64,
    /// Its check suite; one per (sha, app) when `None`.
    pub check_suite_id: Option<u64>,
    /// The link to its details.
    pub details_url: Option<String>,
}

impl CheckRunSpec {
    /// A GitHub Actions check run.
    pub fn new(name: &str, head_sha: &str, status: &str, conclusion: Option<&str>) -> CheckRunSpec {
        CheckRunSpec {
            name: name.to_owned(),
            head_sha: head_sha.to_owned(),
            status: status.to_owned(),
            conclusion: conclusion.map(str::to_owned),
            app_id: ACTIONS_APP_ID,
            check_suite_id: None,
            details_url: None,
        }
    }
}

/// The app id of GitHub Actions.
pub const ACTIONS_APP_ID: u64 = 15368;

/// A workflow run to add.
#[derive(Debug, Clone)]
pub struct WorkflowRunSpec {
    /// The workflow (added with the repository).
    pub workflow_id: u64,
    /// The commit it ran on.
    pub head_sha: String,
    /// The branch it ran on.
    pub head_branch: String,
    /// `push`, `pull_request`, `workflow_dispatch`, …
    pub event: String,
    /// Like a check run's status.
    pub status: String,
    /// Like a check run's conclusion.
    pub conclusion: Option<String>,
    /// The numbers of the PRs it belongs to.
    pub pull_requests: Vec<u64>,
}

/// A re-run a client asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rerun {
    /// `owner/name`.
    pub repo: String,
    /// The run that was re-run.
    pub run_id: u64,
    /// The commit it re-ran: always the run's original commit.
    pub head_sha: String,
    /// The queued check run the re-run created, if it created one.
    pub check_run_id: Option<u64>,
}

/// A workflow dispatch a client asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct Dispatch {
    /// `owner/name`.
    pub repo: String,
    /// The workflow's numeric id.
    pub workflow_id: u64,
    /// The `ref` given.
    pub git_ref: String,
    /// The `inputs` given.
    pub inputs: BTreeMap<String, Value>,
}

/// An issue (conversation) comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssueComment {
    /// Its id.
    pub id: u64,
    /// Its author; `None` for a deleted user.
    pub login: Option<String>,
    /// Its Markdown.
    pub body: String,
    /// When it was made (ISO 8601).
    pub created_at: String,
}

/// A GitHub App ([`crate::FakeGitHub::add_app`]).
#[derive(Debug, Clone)]
pub struct AppSpec {
    /// The App's id (a JWT's `iss`).
    pub id: u64,
    /// Its slug: its installation tokens act as `{slug}[bot]`.
    pub slug: String,
    /// Its public key in PEM (`openssl rsa -in key.pem -pubout`).
    pub public_key_pem: String,
    /// How long an installation token lives (GitHub: an hour).
    pub token_lifetime: Duration,
}

impl AppSpec {
    /// An App whose installation tokens live an hour, as GitHub's do.
    pub fn new(id: u64, slug: &str, public_key_pem: &str) -> AppSpec {
        AppSpec {
            id,
            slug: slug.to_owned(),
            public_key_pem: public_key_pem.to_owned(),
            token_lifetime: Duration::from_secs(3600),
        }
    }
}

/// Which primary rate limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Resource {
    /// REST (`x-ratelimit-resource: core`).
    Core,
    /// GraphQL, counted in points (`x-ratelimit-resource: graphql`).
    GraphQl,
}

impl Resource {
    /// The header value.
    pub fn name(self) -> &'static str {
        match self {
            Resource::Core => "core",
            Resource::GraphQl => "graphql",
        }
    }
}

/// A primary rate limit to set.
#[derive(Debug, Clone, Copy)]
pub struct RateLimit {
    /// Requests (REST) or points (GraphQL) per window.
    pub limit: u64,
    /// How many are left now.
    pub remaining: u64,
    /// When the window resets, from now.
    pub reset_in: Duration,
    /// The status of a refused REST request: 403 or 429.
    pub status: u16,
}

/// Which requests an injected fault applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `GET …/pulls/{n}`.
    GetPull,
    /// `PUT …/pulls/{n}/merge`.
    Merge,
    /// `GET …/pulls/{n}/merge`.
    CheckMerged,
    /// `GET …/pulls/{n}/reviews`.
    Reviews,
    /// `GET …/pulls/{n}/comments`.
    ReviewComments,
    /// `GET …/commits/{ref}/check-runs`.
    CheckRuns,
    /// `GET …/commits/{ref}/status`.
    CombinedStatus,
    /// `GET …/actions/runs`.
    WorkflowRuns,
    /// `POST …/actions/runs/{id}/rerun`.
    Rerun,
    /// `POST …/actions/workflows/{id}/dispatches`.
    Dispatch,
    /// `POST …/issues/{n}/labels`.
    AddLabels,
    /// `GET …/issues/{n}/comments`.
    ListIssueComments,
    /// `POST …/issues/{n}/comments`.
    CreateIssueComment,
    /// `POST …/pulls`.
    CreatePull,
    /// `GET …/pulls`.
    ListPulls,
    /// `GET /user`.
    GetUser,
    /// `POST /graphql`.
    GraphQl,
    /// `POST /app/installations/{id}/access_tokens`.
    InstallationToken,
    /// `GET /repos/{o}/{r}/installation`.
    RepoInstallation,
    /// `GET /app/installations`.
    AppInstallations,
    /// `GET /app`.
    GetApp,
    /// Every request.
    Any,
}

/// What an injected fault does to a matching request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// A secondary rate limit: this status (403 or 429; GraphQL may also
    /// answer 200) with a message naming the secondary limit, and
    /// `retry-after` when given.
    SecondaryLimit {
        /// The status.
        status: u16,
        /// The `retry-after` seconds, if sent.
        retry_after: Option<u64>,
    },
    /// 500 with GitHub's JSON error body.
    ServerError,
    /// 502 with an HTML page, as the load balancer sends it.
    BadGateway,
    /// Never answer, and do nothing: the client must time out.
    Hang,
    /// Do the work (merge, comment, label, …) but never answer, so that a
    /// client's retry after a lost response can be tested.
    AcceptThenHang,
}
