//! The test-control API of the fake GitHub: setting up users, repositories,
//! pull requests and CI, acting as people, reading back what clients did,
//! and breaking things on purpose.
//!
//! These methods panic on misuse by the test itself (an unknown repository,
//! PR or thread, a status GitHub does not have), which is a bug in the test,
//! not input from a client.

use std::collections::BTreeMap;

use crate::FakeGitHub;
use crate::common::journal::{RecordedRequest, assert_no_violations};
use crate::github::model::{
    CheckRunSpec, Dispatch, Fault, IssueComment, PrSnapshot, PrSpec, Protection, RateLimit,
    RepoSpec, Rerun, Resource, Route, WorkflowRunSpec, WorkflowSpec,
};
use crate::github::state::{
    CheckRun, Comment, CommitStatus, Pull, Repo, Review, ReviewComment, State, Thread, WorkflowRun,
};

const CHECK_STATUSES: &[&str] = &[
    "queued",
    "in_progress",
    "completed",
    "waiting",
    "requested",
    "pending",
];
const CONCLUSIONS: &[&str] = &[
    "success",
    "failure",
    "neutral",
    "cancelled",
    "skipped",
    "timed_out",
    "action_required",
    "stale",
    "startup_failure",
];

fn check_status(status: &str, conclusion: Option<&str>) {
    assert!(
        CHECK_STATUSES.contains(&status),
        "no check or run status {status:?} on GitHub"
    );
    match conclusion {
        Some(c) => {
            assert!(CONCLUSIONS.contains(&c), "no conclusion {c:?} on GitHub");
            assert!(
                status == "completed",
                "a conclusion needs status completed, not {status:?}"
            );
        }
        None => assert!(status != "completed", "a completed run needs a conclusion"),
    }
}

fn pull_mut<'s>(state: &'s mut State, repo: &str, number: u64) -> &'s mut Pull {
    match state.repo_mut(repo).pulls.get_mut(&number) {
        Some(pull) => pull,
        None => panic!("the fake GitHub has no PR {repo}#{number}"),
    }
}

fn thread_mut<'s>(repo: &'s mut Repo, thread_id: &str) -> &'s mut Thread {
    match repo.threads.iter_mut().find(|t| t.node_id == thread_id) {
        Some(thread) => thread,
        None => panic!("the fake GitHub has no review thread {thread_id}"),
    }
}

impl FakeGitHub {
    /// Creates a personal access token acting as `login`.
    pub fn create_token(&self, login: &str) -> String {
        self.shared.mutate(|s| {
            let token: String = std::iter::repeat_with(|| s.rng.alphanumeric())
                .take(36)
                .collect();
            let token = format!("github_pat_{token}");
            s.tokens.insert(token.clone(), login.to_owned());
            s.user_id(login);
            token
        })
    }

    /// Adds a repository `owner/name`.
    pub fn add_repo(&self, full_name: &str, spec: RepoSpec) {
        let Some((owner, name)) = full_name.split_once('/') else {
            panic!("a repository is named owner/name, not {full_name:?}");
        };
        self.shared.mutate(|s| {
            assert!(
                s.repo_index(owner, name).is_none(),
                "the repository {full_name} exists already"
            );
            let id = s.new_id();
            let node_id = s.new_node_id("R");
            s.repos.push(Repo {
                id,
                node_id,
                owner: owner.to_owned(),
                name: name.to_owned(),
                spec,
                workflows: Vec::new(),
                pulls: BTreeMap::new(),
                next_number: 1,
                check_runs: Vec::new(),
                statuses: Vec::new(),
                runs: Vec::new(),
                comments: Vec::new(),
                reviews: Vec::new(),
                threads: Vec::new(),
                shas: Default::default(),
                branches: BTreeMap::new(),
                associations: BTreeMap::new(),
                fork_of: None,
                protections: BTreeMap::new(),
            });
        });
    }

    /// Adds `fork` (`owner/name`) as a fork of `parent`: a PR into `parent`
    /// may come from its branches ([`PrSpec::from_fork`]), with the fork as
    /// `head.repo`, as anyone's fork of a public repository may.
    pub fn add_fork(&self, parent: &str, fork: &str) {
        // The parent must exist (a bug in the test otherwise).
        self.shared.mutate(|s| {
            s.repo_mut(parent);
        });
        self.add_repo(fork, RepoSpec::default());
        self.shared
            .mutate(|s| s.repo_mut(fork).fork_of = Some(parent.to_owned()));
    }

    /// Protects `branch` of `repo`: a merge into it needs `protection`'s
    /// checks passed and approvals given, or GitHub answers 405.
    pub fn protect_branch(&self, repo: &str, branch: &str, protection: Protection) {
        self.shared.mutate(|s| {
            s.repo_mut(repo)
                .protections
                .insert(branch.to_owned(), protection);
        });
    }

    /// Adds a workflow to a repository.
    pub fn add_workflow(&self, repo: &str, workflow: WorkflowSpec) {
        self.shared.mutate(|s| {
            let r = s.repo_mut(repo);
            assert!(
                r.workflows.iter().all(|w| w.id != workflow.id),
                "workflow {} exists already",
                workflow.id
            );
            r.workflows.push(workflow);
        });
    }

    /// Opens a pull request; returns its number. `mergeable` is null for the
    /// next [`FakeGitHub::set_mergeable_null_reads`] reads.
    pub fn open_pr(&self, repo: &str, spec: PrSpec) -> u64 {
        self.shared.mutate(|s| {
            if let Some(fork) = &spec.head_repo {
                let parent = s.repo_mut(fork).fork_of.clone();
                assert!(
                    parent.is_some_and(|p| p.eq_ignore_ascii_case(repo)),
                    "{fork} is not a fork of {repo} (add_fork)"
                );
            }
            s.user_id(&spec.author);
            let id = s.new_id();
            let node_id = s.new_node_id("PR");
            let now = s.clock.now_ms();
            let null_reads = s.mergeable_null_reads;
            let r = s.repo_mut(repo);
            let number = r.next_number;
            r.next_number += 1;
            r.shas.insert(spec.head_sha.clone());
            r.pulls.insert(
                number,
                Pull {
                    number,
                    id,
                    node_id,
                    author: spec.author,
                    title: spec.title,
                    head_ref: spec.head_ref,
                    head_repo: spec.head_repo,
                    head_sha: spec.head_sha,
                    base_ref: spec.base_ref,
                    draft: spec.draft,
                    labels: spec.labels,
                    closed: false,
                    merged: None,
                    mergeable_value: Some(spec.mergeable),
                    body: None,
                    null_reads_left: null_reads,
                    protection_refusal: None,
                    created_at: now,
                    updated_at: now,
                },
            );
            number
        })
    }

    /// Pushes a new head commit: `mergeable` is null again for the next few
    /// reads, then what it was set to.
    pub fn push(&self, repo: &str, number: u64, new_sha: &str) {
        self.shared.mutate(|s| {
            let now = s.clock.now_ms();
            let null_reads = s.mergeable_null_reads;
            s.repo_mut(repo).shas.insert(new_sha.to_owned());
            let pull = pull_mut(s, repo, number);
            pull.head_sha = new_sha.to_owned();
            pull.null_reads_left = null_reads;
            pull.updated_at = now;
        });
    }

    /// Sets `mergeable` at once: `Some` is the computed value, `None` keeps
    /// it null until set again.
    pub fn set_mergeable(&self, repo: &str, number: u64, mergeable: Option<bool>) {
        self.shared.mutate(|s| {
            let pull = pull_mut(s, repo, number);
            pull.mergeable_value = mergeable;
            pull.null_reads_left = 0;
        });
    }

    /// How many reads see `mergeable: null` after a PR is opened or pushed.
    pub fn set_mergeable_null_reads(&self, reads: u32) {
        self.shared.mutate(|s| s.mergeable_null_reads = reads);
    }

    /// Marks a PR as a draft or ready, as a person would in the web UI.
    pub fn set_draft(&self, repo: &str, number: u64, draft: bool) {
        self.shared
            .mutate(|s| pull_mut(s, repo, number).draft = draft);
    }

    /// Adds a check run; returns its id.
    pub fn add_check_run(&self, repo: &str, spec: CheckRunSpec) -> u64 {
        check_status(&spec.status, spec.conclusion.as_deref());
        self.shared.mutate(|s| {
            let id = s.new_id();
            let now = s.clock.now_ms();
            let existing = s
                .repo_mut(repo)
                .check_runs
                .iter()
                .find(|c| c.head_sha == spec.head_sha && c.app_id == spec.app_id)
                .map(|c| c.suite_id);
            let suite_id = match spec.check_suite_id.or(existing) {
                Some(suite) => suite,
                None => s.new_id(),
            };
            let r = s.repo_mut(repo);
            r.shas.insert(spec.head_sha.clone());
            let completed = spec.status == "completed";
            r.check_runs.push(CheckRun {
                id,
                name: spec.name,
                head_sha: spec.head_sha,
                status: spec.status,
                conclusion: spec.conclusion,
                app_id: spec.app_id,
                suite_id,
                details_url: spec.details_url,
                started_at: now,
                completed_at: completed.then_some(now),
            });
            id
        })
    }

    /// Moves a check run on (e.g. `in_progress`, then `completed` + conclusion).
    pub fn update_check_run(&self, repo: &str, id: u64, status: &str, conclusion: Option<&str>) {
        check_status(status, conclusion);
        self.shared.mutate(|s| {
            let now = s.clock.now_ms();
            let Some(run) = s.repo_mut(repo).check_runs.iter_mut().find(|c| c.id == id) else {
                panic!("the fake GitHub has no check run {id} in {repo}");
            };
            run.status = status.to_owned();
            run.conclusion = conclusion.map(str::to_owned);
            run.completed_at = (status == "completed").then_some(now);
        });
    }

    /// Adds a commit status (`error`, `failure`, `pending` or `success`).
    pub fn add_status(
        &self,
        repo: &str,
        sha: &str,
        context: &str,
        state: &str,
        target_url: Option<&str>,
    ) -> u64 {
        assert!(
            ["error", "failure", "pending", "success"].contains(&state),
            "no commit status state {state:?}"
        );
        self.shared.mutate(|s| {
            let id = s.new_id();
            let now = s.clock.now_ms();
            let r = s.repo_mut(repo);
            r.shas.insert(sha.to_owned());
            r.statuses.push(CommitStatus {
                id,
                sha: sha.to_owned(),
                context: context.to_owned(),
                state: state.to_owned(),
                target_url: target_url.map(str::to_owned),
                description: None,
                created_at: now,
            });
            id
        })
    }

    /// Adds a workflow run of a workflow the repository has; returns its id.
    pub fn add_workflow_run(&self, repo: &str, spec: WorkflowRunSpec) -> u64 {
        check_status(&spec.status, spec.conclusion.as_deref());
        self.shared.mutate(|s| {
            let id = s.new_id();
            let suite_id = s.new_id();
            let now = s.clock.now_ms();
            let r = s.repo_mut(repo);
            assert!(
                r.workflows.iter().any(|w| w.id == spec.workflow_id),
                "no workflow {} in {repo}",
                spec.workflow_id
            );
            let run_number = r
                .runs
                .iter()
                .filter(|w| w.workflow_id == spec.workflow_id)
                .count() as u64
                + 1;
            let actor = spec
                .pull_requests
                .first()
                .and_then(|n| r.pulls.get(n))
                .map_or_else(|| r.owner.clone(), |p| p.author.clone());
            r.shas.insert(spec.head_sha.clone());
            r.runs.push(WorkflowRun {
                id,
                workflow_id: spec.workflow_id,
                head_sha: spec.head_sha,
                head_branch: spec.head_branch,
                event: spec.event,
                status: spec.status,
                conclusion: spec.conclusion,
                suite_id,
                run_number,
                run_attempt: 1,
                pull_requests: spec.pull_requests,
                actor,
                created_at: now,
                updated_at: now,
            });
            id
        })
    }

    /// Moves a workflow run on.
    pub fn update_workflow_run(&self, repo: &str, id: u64, status: &str, conclusion: Option<&str>) {
        check_status(status, conclusion);
        self.shared.mutate(|s| {
            let now = s.clock.now_ms();
            let Some(run) = s.repo_mut(repo).runs.iter_mut().find(|w| w.id == id) else {
                panic!("the fake GitHub has no workflow run {id} in {repo}");
            };
            run.status = status.to_owned();
            run.conclusion = conclusion.map(str::to_owned);
            run.updated_at = now;
        });
    }

    /// Whether a re-run queues a new check run for the run's original commit
    /// (on by default).
    pub fn set_rerun_creates_check_run(&self, creates: bool) {
        self.shared.mutate(|s| s.rerun_creates_check_run = creates);
    }

    /// Adds a review (`APPROVED`, `CHANGES_REQUESTED`, `COMMENTED`,
    /// `DISMISSED` or `PENDING`) on the PR's head; `None` is a deleted user.
    pub fn add_review(
        &self,
        repo: &str,
        number: u64,
        login: Option<&str>,
        state: &str,
        body: &str,
    ) -> u64 {
        assert!(
            [
                "APPROVED",
                "CHANGES_REQUESTED",
                "COMMENTED",
                "DISMISSED",
                "PENDING"
            ]
            .contains(&state),
            "no review state {state:?}"
        );
        self.shared.mutate(|s| {
            let id = s.new_id();
            let now = s.clock.now_ms();
            let commit_id = pull_mut(s, repo, number).head_sha.clone();
            s.repo_mut(repo).reviews.push(Review {
                id,
                pull: number,
                login: login.map(str::to_owned),
                state: state.to_owned(),
                body: body.to_owned(),
                commit_id,
                submitted_at: now,
            });
            id
        })
    }

    /// Starts a review thread with its first comment; returns the thread's
    /// GraphQL id.
    pub fn add_review_thread(
        &self,
        repo: &str,
        number: u64,
        author: Option<&str>,
        path: &str,
        line: Option<u64>,
        body: &str,
    ) -> String {
        self.shared.mutate(|s| {
            let node_id = s.new_node_id("PRRT");
            let comment = new_review_comment(s, repo, number, author, body, None);
            s.repo_mut(repo).threads.push(Thread {
                node_id: node_id.clone(),
                pull: number,
                path: path.to_owned(),
                line,
                resolved: false,
                outdated: false,
                comments: vec![comment],
            });
            node_id
        })
    }

    /// Replies in a thread; returns the comment's REST id.
    pub fn reply_to_thread(
        &self,
        repo: &str,
        thread_id: &str,
        author: Option<&str>,
        body: &str,
    ) -> u64 {
        self.shared.mutate(|s| {
            let thread = thread_mut(s.repo_mut(repo), thread_id);
            let (number, first) = (thread.pull, thread.comments.first().map(|c| c.id));
            let comment = new_review_comment(s, repo, number, author, body, first);
            let id = comment.id;
            thread_mut(s.repo_mut(repo), thread_id)
                .comments
                .push(comment);
            id
        })
    }

    /// Resolves (or unresolves) a thread, as a reviewer would.
    pub fn resolve_thread(&self, repo: &str, thread_id: &str, resolved: bool) {
        self.shared
            .mutate(|s| thread_mut(s.repo_mut(repo), thread_id).resolved = resolved);
    }

    /// A thread's comments, oldest first: (author's login, body).
    pub fn thread_comments(&self, repo: &str, thread_id: &str) -> Vec<(Option<String>, String)> {
        self.shared.mutate(|s| {
            thread_mut(s.repo_mut(repo), thread_id)
                .comments
                .iter()
                .map(|c| (c.login.clone(), c.body.clone()))
                .collect()
        })
    }

    /// Marks a thread outdated (its line changed in a later push).
    pub fn set_thread_outdated(&self, repo: &str, thread_id: &str, outdated: bool) {
        self.shared
            .mutate(|s| thread_mut(s.repo_mut(repo), thread_id).outdated = outdated);
    }

    /// Adds a conversation comment as `login` (`None`: a deleted user).
    pub fn add_issue_comment(
        &self,
        repo: &str,
        number: u64,
        login: Option<&str>,
        body: &str,
    ) -> u64 {
        self.shared.mutate(|s| {
            pull_mut(s, repo, number);
            let id = s.new_id();
            let now = s.clock.now_ms();
            s.repo_mut(repo).comments.push(Comment {
                id,
                issue: number,
                login: login.map(str::to_owned),
                body: body.to_owned(),
                created_at: now,
            });
            id
        })
    }

    /// A push to a branch of the repository as GitHub would see it (the
    /// tests' git remote stands for GitHub's storage): the branch exists,
    /// at `sha`; an open PR from it gets the new head.
    pub fn push_branch(&self, repo: &str, branch: &str, sha: &str) {
        self.shared.mutate(|s| {
            let null_reads = s.mergeable_null_reads;
            let r = s.repo_mut(repo);
            r.shas.insert(sha.to_owned());
            r.branches.insert(branch.to_owned(), sha.to_owned());
            for p in r.pulls.values_mut() {
                if p.head_ref == branch && p.head_repo.is_none() && !p.closed && p.head_sha != sha {
                    p.head_sha = sha.to_owned();
                    p.null_reads_left = null_reads;
                }
            }
        });
    }

    /// Sets a login's relation to the repository (`author_association`:
    /// `OWNER`, `MEMBER`, `COLLABORATOR`, `CONTRIBUTOR`, `NONE`, …); every
    /// login is a `MEMBER` unless set.
    pub fn set_association(&self, repo: &str, login: &str, association: &str) {
        self.shared.mutate(|s| {
            s.repo_mut(repo)
                .associations
                .insert(login.to_ascii_lowercase(), association.to_owned());
        });
    }

    /// The numbers of the repository's PRs, ascending.
    pub fn pr_numbers(&self, repo: &str) -> Vec<u64> {
        self.shared
            .mutate(|s| s.repo_mut(repo).pulls.keys().copied().collect())
    }

    /// What a PR looks like now (without using up a `mergeable` read).
    pub fn pr(&self, repo: &str, number: u64) -> PrSnapshot {
        self.shared.mutate(|s| {
            let p = pull_mut(s, repo, number).clone();
            PrSnapshot {
                number,
                state: if p.closed { "closed" } else { "open" }.to_owned(),
                draft: p.draft,
                merged: p.merged.is_some(),
                merged_head_sha: p.merged.as_ref().map(|m| m.head_sha.clone()),
                merge_commit_sha: p.merged.as_ref().map(|m| m.commit_sha.clone()),
                merge_method: p.merged.as_ref().map(|m| m.method.clone()),
                merge_commit_title: p.merged.as_ref().and_then(|m| m.title.clone()),
                head_sha: p.head_sha,
                labels: p.labels,
                title: p.title,
                body: p.body,
                head_ref: p.head_ref,
                base_ref: p.base_ref,
                head_repo: p.head_repo.unwrap_or_else(|| repo.to_owned()),
                author: p.author,
            }
        })
    }

    /// A PR's GraphQL id (its REST `node_id`).
    pub fn pr_node_id(&self, repo: &str, number: u64) -> String {
        self.shared
            .mutate(|s| pull_mut(s, repo, number).node_id.clone())
    }

    /// The conversation comments of a PR, ascending.
    pub fn issue_comments(&self, repo: &str, number: u64) -> Vec<IssueComment> {
        self.shared.mutate(|s| {
            s.repo_mut(repo)
                .comments
                .iter()
                .filter(|c| c.issue == number)
                .map(|c| IssueComment {
                    id: c.id,
                    login: c.login.clone(),
                    body: c.body.clone(),
                    created_at: crate::common::clock::iso_seconds(c.created_at),
                })
                .collect()
        })
    }

    /// Every re-run clients asked for, in order.
    pub fn reruns(&self) -> Vec<Rerun> {
        self.shared.read().reruns.clone()
    }

    /// Every workflow dispatch clients asked for, in order.
    pub fn dispatches(&self) -> Vec<Dispatch> {
        self.shared.read().dispatches.clone()
    }

    /// Requests (REST) or points (GraphQL) charged so far; a 304 costs none.
    pub fn quota_used(&self, resource: Resource) -> u64 {
        self.shared.read().quotas.spent(resource)
    }

    /// Sets a primary limit's window: what is left and when it resets.
    pub fn set_rate_limit(&self, resource: Resource, limit: RateLimit) {
        assert!(
            [403, 429].contains(&limit.status),
            "a primary limit answers 403 or 429"
        );
        self.shared.mutate(|s| s.quotas.set(resource, limit));
    }

    /// The next `times` requests on `route` get `fault`.
    pub fn inject(&self, route: Route, fault: Fault, times: usize) {
        self.shared.mutate(|s| s.faults.inject(route, fault, times));
    }

    /// Every HTTP request received, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.read().journal.requests.clone()
    }

    /// Every strictness violation so far.
    pub fn violations(&self) -> Vec<String> {
        self.shared.read().journal.violations.clone()
    }

    /// Forgets the violations so far (for tests that provoke some on purpose).
    pub fn clear_violations(&self) {
        self.shared.mutate(|s| s.journal.violations.clear());
    }

    /// Panics, listing every violation, if there is any.
    pub fn assert_clean(&self) {
        assert_no_violations("GitHub", &self.violations());
    }
}

pub(crate) fn new_review_comment(
    s: &mut State,
    repo: &str,
    number: u64,
    author: Option<&str>,
    body: &str,
    reply_to: Option<u64>,
) -> ReviewComment {
    let id = s.new_id();
    let node_id = s.new_node_id("PRRC");
    let now = s.clock.now_ms();
    let commit_id = pull_mut(s, repo, number).head_sha.clone();
    ReviewComment {
        id,
        node_id,
        login: author.map(str::to_owned),
        body: body.to_owned(),
        commit_id,
        in_reply_to: reply_to,
        created_at: now,
    }
}
