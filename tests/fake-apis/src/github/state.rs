//! Everything the fake GitHub knows: users and tokens, repositories with
//! their pull requests, checks, runs and comments, the quotas, the faults and
//! the journal, all behind one mutex (see [`crate::common::hub`]).

use std::collections::{BTreeMap, BTreeSet, HashSet};

use crate::common::clock::Clock;
use crate::common::faults::Faults;
use crate::common::hub::Hub;
use crate::common::journal::{Journal, Journaled};
use crate::github::apps::Apps;
use crate::github::model::{Dispatch, Fault, Protection, RepoSpec, Rerun, Route, WorkflowSpec};
use crate::github::quota::Quotas;

/// The hub type of the fake GitHub.
pub(crate) type Shared = Hub<State>;

/// A pull request.
#[derive(Debug, Clone)]
pub(crate) struct Pull {
    pub number: u64,
    pub id: u64,
    pub node_id: String,
    pub author: String,
    pub title: String,
    pub head_ref: String,
    /// The fork the head branch is in; `None`: the repository itself.
    pub head_repo: Option<String>,
    pub head_sha: String,
    pub base_ref: String,
    pub draft: bool,
    pub labels: Vec<String>,
    pub closed: bool,
    pub merged: Option<Merged>,
    /// The value `mergeable` takes once computed; `None` keeps it null.
    pub mergeable_value: Option<bool>,
    /// The description given when it was opened (`null` when none).
    pub body: Option<String>,
    /// Reads left that still see `mergeable: null`.
    pub null_reads_left: u32,
    /// The last merge branch protection refused: (head, GitHub's message).
    pub protection_refusal: Option<(String, String)>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// How a pull request was merged.
#[derive(Debug, Clone)]
pub(crate) struct Merged {
    pub commit_sha: String,
    pub head_sha: String,
    pub method: String,
    pub title: Option<String>,
    pub by: String,
    pub at: i64,
}

/// A check run.
#[derive(Debug, Clone)]
pub(crate) struct CheckRun {
    pub id: u64,
    pub name: String,
    pub head_sha: String,
    pub status: String,
    pub conclusion: Option<String>,
    pub app_id: u64,
    pub suite_id: u64,
    pub details_url: Option<String>,
    pub started_at: i64,
    pub completed_at: Option<i64>,
}

/// A commit status.
#[derive(Debug, Clone)]
pub(crate) struct CommitStatus {
    pub id: u64,
    pub sha: String,
    pub context: String,
    pub state: String,
    pub target_url: Option<String>,
    pub description: Option<String>,
    pub created_at: i64,
}

/// A workflow run.
#[derive(Debug, Clone)]
pub(crate) struct WorkflowRun {
    pub id: u64,
    pub workflow_id: u64,
    pub head_sha: String,
    pub head_branch: String,
    pub event: String,
    pub status: String,
    pub conclusion: Option<String>,
    pub suite_id: u64,
    pub run_number: u64,
    pub run_attempt: u64,
    pub pull_requests: Vec<u64>,
    pub actor: String,
    pub created_at: i64,
    pub updated_at: i64,
}

/// An issue comment.
#[derive(Debug, Clone)]
pub(crate) struct Comment {
    pub id: u64,
    pub issue: u64,
    pub login: Option<String>,
    pub body: String,
    pub created_at: i64,
}

/// A pull request review.
#[derive(Debug, Clone)]
pub(crate) struct Review {
    pub id: u64,
    pub pull: u64,
    pub login: Option<String>,
    pub state: String,
    pub body: String,
    pub commit_id: String,
    pub submitted_at: i64,
}

/// A review thread (only GraphQL sees threads as such).
#[derive(Debug, Clone)]
pub(crate) struct Thread {
    pub node_id: String,
    pub pull: u64,
    pub path: String,
    pub line: Option<u64>,
    pub resolved: bool,
    pub outdated: bool,
    pub comments: Vec<ReviewComment>,
}

/// A review comment: a thread's first comment or a reply.
#[derive(Debug, Clone)]
pub(crate) struct ReviewComment {
    pub id: u64,
    pub node_id: String,
    pub login: Option<String>,
    pub body: String,
    pub commit_id: String,
    pub in_reply_to: Option<u64>,
    pub created_at: i64,
}

/// A repository and everything in it.
#[derive(Debug, Clone)]
pub(crate) struct Repo {
    pub id: u64,
    pub node_id: String,
    pub owner: String,
    pub name: String,
    pub spec: RepoSpec,
    pub workflows: Vec<WorkflowSpec>,
    pub pulls: BTreeMap<u64, Pull>,
    pub next_number: u64,
    pub check_runs: Vec<CheckRun>,
    pub statuses: Vec<CommitStatus>,
    pub runs: Vec<WorkflowRun>,
    pub comments: Vec<Comment>,
    pub reviews: Vec<Review>,
    pub threads: Vec<Thread>,
    /// Every commit the repository has seen: heads, old heads, checked shas.
    pub shas: BTreeSet<String>,
    /// Branches pushed to it (name → head), beside the PRs' own.
    pub branches: BTreeMap<String, String>,
    /// Logins whose relation to the repository is not `MEMBER`.
    pub associations: BTreeMap<String, String>,
    /// The repository this one is a fork of (`owner/name`).
    pub fork_of: Option<String>,
    /// Protected branches.
    pub protections: BTreeMap<String, Protection>,
}

impl Repo {
    /// `owner/name`.
    pub fn full_name(&self) -> String {
        format!("{}/{}", self.owner, self.name)
    }

    /// `author_association` of a login (`NONE` for a deleted user).
    pub fn association(&self, login: Option<&str>) -> String {
        match login {
            None => "NONE".to_owned(),
            Some(login) => self
                .associations
                .get(&login.to_ascii_lowercase())
                .cloned()
                .unwrap_or_else(|| "MEMBER".to_owned()),
        }
    }

    /// Resolves a `ref` (a SHA, a branch, `heads/…`, `refs/heads/…`) to a
    /// commit the repository knows.
    pub fn resolve_ref(&self, git_ref: &str) -> Option<String> {
        if self.shas.contains(git_ref) {
            return Some(git_ref.to_owned());
        }
        let branch = git_ref
            .strip_prefix("refs/heads/")
            .or_else(|| git_ref.strip_prefix("heads/"))
            .unwrap_or(git_ref);
        if let Some(sha) = self.branches.get(branch) {
            return Some(sha.clone());
        }
        // A fork's branch of the same name is not this repository's.
        let own = |p: &&Pull| p.head_ref == branch && p.head_repo.is_none();
        self.pulls
            .values()
            .rev()
            .find(|p| own(p) && !p.closed)
            .or_else(|| self.pulls.values().rev().find(own))
            .map(|p| p.head_sha.clone())
    }

    /// Whether `git_ref` names a branch the repository has.
    pub fn has_branch(&self, git_ref: &str) -> bool {
        let branch = git_ref.strip_prefix("refs/heads/").unwrap_or(git_ref);
        branch == self.spec.default_branch
            || self.branches.contains_key(branch)
            || self
                .pulls
                .values()
                .any(|p| (p.head_ref == branch && p.head_repo.is_none()) || p.base_ref == branch)
    }

    /// A workflow by numeric id or file name.
    pub fn workflow(&self, id_or_file: &str) -> Option<&WorkflowSpec> {
        self.workflows.iter().find(|w| {
            w.id.to_string() == id_or_file || w.path.rsplit('/').next() == Some(id_or_file)
        })
    }
}

/// Everything the fake knows.
pub(crate) struct State {
    pub journal: Journal,
    /// Token → login.
    pub tokens: BTreeMap<String, String>,
    /// Login → user id.
    pub users: BTreeMap<String, u64>,
    pub repos: Vec<Repo>,
    pub quotas: Quotas,
    pub faults: Faults<Route, Fault>,
    /// Every GraphQL cursor the fake handed out.
    pub cursors: HashSet<String>,
    pub clock: Clock,
    /// Reads of a PR that still see `mergeable: null` after a push.
    pub mergeable_null_reads: u32,
    /// Whether a re-run queues a new check run for the run's commit.
    pub rerun_creates_check_run: bool,
    pub reruns: Vec<Rerun>,
    pub dispatches: Vec<Dispatch>,
    /// GitHub Apps, their installations and installation tokens.
    pub apps: Apps,
    /// Seeded, so that ids and shas are the same on every run.
    pub rng: fastrand::Rng,
    next_id: u64,
}

impl Journaled for State {
    fn journal(&self) -> &Journal {
        &self.journal
    }
}

impl State {
    /// An empty fake.
    pub fn new() -> State {
        State {
            journal: Journal::default(),
            tokens: BTreeMap::new(),
            users: BTreeMap::new(),
            repos: Vec::new(),
            quotas: Quotas::new(),
            faults: Faults::default(),
            cursors: HashSet::new(),
            clock: Clock::default(),
            mergeable_null_reads: 1,
            rerun_creates_check_run: true,
            reruns: Vec::new(),
            dispatches: Vec::new(),
            apps: Apps::default(),
            rng: fastrand::Rng::with_seed(0x6174_6875_6221),
            next_id: 1_000,
        }
    }

    /// A fresh id, increasing with a gap now and then, as on a busy server.
    pub fn new_id(&mut self) -> u64 {
        self.next_id += 1 + self.rng.u64(0..3);
        self.next_id
    }

    /// A fresh GraphQL node id with GitHub's prefix for its kind.
    pub fn new_node_id(&mut self, prefix: &str) -> String {
        let tail: String = std::iter::repeat_with(|| self.rng.alphanumeric())
            .take(16)
            .collect();
        format!("{prefix}_kwDO{tail}")
    }

    /// The user id of a login, made up the first time.
    pub fn user_id(&mut self, login: &str) -> u64 {
        if let Some(id) = self.users.get(login) {
            return *id;
        }
        let id = self.new_id();
        self.users.insert(login.to_owned(), id);
        id
    }

    /// The repository `owner/name` (case-insensitive, as GitHub).
    pub fn repo_index(&self, owner: &str, name: &str) -> Option<usize> {
        self.repos
            .iter()
            .position(|r| r.owner.eq_ignore_ascii_case(owner) && r.name.eq_ignore_ascii_case(name))
    }

    /// The repository named `owner/name` in a control call; panics if there
    /// is none, which is a bug in the test.
    pub fn repo_mut(&mut self, full_name: &str) -> &mut Repo {
        let (owner, name) = full_name.split_once('/').unwrap_or((full_name, ""));
        match self.repo_index(owner, name) {
            Some(i) => &mut self.repos[i],
            None => panic!("the fake GitHub has no repository {full_name}"),
        }
    }

    /// Records a violation.
    pub fn violation(&mut self, text: String) {
        self.journal.violation(text);
    }
}
