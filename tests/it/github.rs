//! The GitHub client against the strict fake GitHub: PR views and CI states
//! end to end, ETags that make an idle PR free, review threads, labels,
//! merges bound to a sha, rate limits (primary and secondary) and errors
//! that never show the token. Every test ends with `assert_clean`, so a
//! request GitHub would not take (a missing header, an unknown parameter, a
//! merge without `sha`) fails it.
//!
//! The tests whose client waits for a relative time (write spacing, a
//! `Retry-After`) run on paused time: the fake serves on the test's own
//! runtime and records each request on its clock, so the waits cost nothing
//! and are still measured. A spent primary budget waits in real time: the
//! fake resets its windows by the wall clock, as GitHub's epoch-second
//! `x-ratelimit-reset` says.

use std::time::Duration;

use eagle::integrations::github::{
    CiState, Error, GitHub, GitHubConfig, LimitKind, MergeMethod, MergeRefusal, MergeRequest,
    PollSettings, PrState, PullRequestView, Repo, RetryPolicy, open_threads,
};
use fake_apis::{
    CheckRunSpec, FakeGitHub, GitHubFault, GitHubRoute, PrSpec, RateLimit, RecordedRequest,
    RepoSpec, Resource, WorkflowRunSpec, WorkflowSpec,
};
use secrecy::SecretString;
use serde_json::{Map, json};

const REPO: &str = "acme/app";
const SHA: &str = "1111111111111111111111111111111111111111";
const SHA2: &str = "2222222222222222222222222222222222222222";
const CI_WORKFLOW: u64 = 7;

/// A fake with `acme/app` and its dispatchable `CI` workflow (input
/// `reason`), and a client acting as `eagle-bot`.
struct World {
    fake: FakeGitHub,
    gh: GitHub,
    token: String,
    repo: Repo,
}

async fn world() -> World {
    let fake = FakeGitHub::start().await;
    let token = fake.create_token("eagle-bot");
    fake.add_repo(REPO, RepoSpec::default());
    let mut ci = WorkflowSpec::new(CI_WORKFLOW, "CI", "ci.yml");
    ci.inputs = vec!["reason".to_owned()];
    fake.add_workflow(REPO, ci);
    let gh = client(&fake, &token, Duration::ZERO);
    World {
        fake,
        gh,
        token,
        repo: REPO.parse().expect("a repository name"),
    }
}

/// A client of the fake with this token and spacing between writes.
fn client(fake: &FakeGitHub, token: &str, write_spacing: Duration) -> GitHub {
    let mut config = GitHubConfig::new(SecretString::from(token.to_owned()));
    config.api_url = fake.url().parse().expect("the fake's URL");
    config.write_spacing = write_spacing;
    GitHub::new(config).expect("a client")
}

impl World {
    fn open(&self, head_ref: &str) -> u64 {
        self.fake
            .open_pr(REPO, PrSpec::new("eagle-bot", head_ref, SHA))
    }

    async fn poll(
        &self,
        number: u64,
        settings: &PollSettings,
        last: Option<&PullRequestView>,
    ) -> PullRequestView {
        self.gh
            .poll_pull_request(&self.repo, number, settings, last.map(|v| &v.mark))
            .await
            .unwrap_or_else(|e| panic!("poll of #{number}: {e}"))
    }

    /// The requests to `path` with `method`, in order.
    fn requests_to(&self, method: &str, path: &str) -> Vec<RecordedRequest> {
        self.fake
            .requests()
            .into_iter()
            .filter(|r| r.method == method && r.path == path)
            .collect()
    }
}

fn failed(names: &[&str]) -> CiState {
    CiState::Failed {
        failed: names.iter().map(|n| n.to_string()).collect(),
    }
}

fn required(names: &[&str]) -> PollSettings {
    PollSettings {
        required_checks: names.iter().map(|n| n.to_string()).collect(),
        ..PollSettings::default()
    }
}

#[tokio::test]
async fn a_pr_view_follows_ci_from_never_ran_to_failed_to_green() {
    let w = world().await;
    let n = w.open("fix/a");
    let settings = required(&["build"]);

    let v = w.poll(n, &settings, None).await;
    assert_eq!(v.ci, CiState::NeverRan);
    let pr = &v.pull;
    assert_eq!(
        (pr.number, pr.state, pr.draft, pr.merged),
        (n, PrState::Open, false, false)
    );
    assert_eq!(pr.mergeable, None, "GitHub has not computed it yet");
    assert_eq!(
        (
            pr.head_sha.as_str(),
            pr.head_ref.as_str(),
            pr.base_ref.as_str()
        ),
        (SHA, "fix/a", "main")
    );
    assert_eq!(pr.node_id, w.fake.pr_node_id(REPO, n));
    assert_eq!(pr.author.as_deref(), Some("eagle-bot"));
    assert!(
        pr.html_url.ends_with(&format!("/acme/app/pull/{n}")),
        "{}",
        pr.html_url
    );
    assert_eq!(
        w.poll(n, &settings, Some(&v)).await.pull.mergeable,
        Some(true)
    );

    // A workflow run queued before its jobs exist.
    let run = w.fake.add_workflow_run(
        REPO,
        WorkflowRunSpec {
            workflow_id: CI_WORKFLOW,
            head_sha: SHA.into(),
            head_branch: "fix/a".into(),
            event: "pull_request".into(),
            status: "queued".into(),
            conclusion: None,
            pull_requests: vec![n],
        },
    );
    let v = w.poll(n, &settings, None).await;
    assert_eq!(v.ci, CiState::Running);
    let suite = v.workflow_runs.workflow_runs[0].check_suite_id;
    assert!(suite.is_some());

    // Its job runs, then fails; a non-required lint passed.
    let job = |name: &str, status: &str, conclusion: Option<&str>| CheckRunSpec {
        check_suite_id: suite,
        ..CheckRunSpec::new(name, SHA, status, conclusion)
    };
    let build = w
        .fake
        .add_check_run(REPO, job("build", "in_progress", None));
    w.fake
        .add_check_run(REPO, job("lint", "completed", Some("neutral")));
    w.fake.update_workflow_run(REPO, run, "in_progress", None);
    assert_eq!(w.poll(n, &settings, None).await.ci, CiState::Running);
    w.fake
        .update_check_run(REPO, build, "completed", Some("failure"));
    w.fake
        .update_workflow_run(REPO, run, "completed", Some("failure"));
    let v = w.poll(n, &settings, None).await;
    assert_eq!(v.ci, failed(&["build"]), "the job names the failure, once");

    // A re-run queues the run again: running until it is done.
    w.gh.rerun_workflow_run(&w.repo, run).await.unwrap();
    assert_eq!(w.poll(n, &settings, None).await.ci, CiState::Running);
    let rerun = w.fake.reruns()[0]
        .check_run_id
        .expect("the re-run's check run");
    w.fake
        .update_check_run(REPO, rerun, "completed", Some("success"));
    w.fake
        .add_check_run(REPO, job("build", "completed", Some("success")));
    w.fake
        .update_workflow_run(REPO, run, "completed", Some("success"));
    assert_eq!(w.poll(n, &settings, None).await.ci, CiState::Green);

    // A required check that never shows up keeps it running.
    let strict = required(&["build", "macOS UI Tests"]);
    assert_eq!(w.poll(n, &strict, None).await.ci, CiState::Running);

    // An external CI's failing status fails it.
    w.fake.add_status(REPO, SHA, "ci/external", "failure", None);
    assert_eq!(
        w.poll(n, &settings, None).await.ci,
        failed(&["ci/external"])
    );
    w.fake.assert_clean();
}

#[tokio::test]
async fn an_unchanged_pr_polled_again_costs_no_quota() {
    let w = world().await;
    let n = w.open("fix/idle");
    w.fake.add_check_run(
        REPO,
        CheckRunSpec::new("build", SHA, "completed", Some("success")),
    );
    w.fake
        .add_review_thread(REPO, n, Some("alex"), "src/a.rs", Some(3), "why?");
    let settings = PollSettings::default();

    let first = w.poll(n, &settings, None).await;
    assert!(first.threads.is_some(), "a first poll reads the threads");
    // `mergeable` is computed now: the PR's body changed, the rest did not.
    let second = w.poll(n, &settings, Some(&first)).await;
    assert_eq!(second.pull.mergeable, Some(true));
    assert!(!second.changed && second.threads.is_none());

    let (core, graphql) = (
        w.fake.quota_used(Resource::Core),
        w.fake.quota_used(Resource::GraphQl),
    );
    let (sent, stats) = (w.fake.requests().len(), w.gh.stats());
    let third = w.poll(n, &settings, Some(&second)).await;
    assert_eq!(
        w.fake.quota_used(Resource::Core),
        core,
        "every GET was a 304"
    );
    assert_eq!(w.fake.quota_used(Resource::GraphQl), graphql, "no GraphQL");
    let idle = &w.fake.requests()[sent..];
    assert_eq!(
        idle.len(),
        4,
        "PR, check runs, status, workflow runs: {idle:?}"
    );
    assert!(
        idle.iter().all(|r| r.etag_hit && r.method == "GET"),
        "{idle:?}"
    );
    assert_eq!(w.gh.stats().not_modified - stats.not_modified, 4);
    assert_eq!(
        (third.ci.clone(), third.pull.clone()),
        (second.ci.clone(), second.pull.clone())
    );
    assert_eq!(third.mark, second.mark);

    // A new comment changes the REST view: one REST request and one query.
    w.fake.add_issue_comment(REPO, n, Some("alex"), "any news?");
    let fourth = w.poll(n, &settings, Some(&third)).await;
    assert!(fourth.changed && fourth.threads.is_some());
    assert_eq!(w.fake.quota_used(Resource::Core), core + 1);
    assert!(w.fake.quota_used(Resource::GraphQl) > graphql);
    w.fake.assert_clean();
}

#[tokio::test]
async fn review_threads_open_resolved_acknowledged_and_by_deleted_users() {
    let w = world().await;
    let n = w.open("fix/threads");
    let f = &w.fake;
    let question = f.add_review_thread(REPO, n, Some("alex"), "src/a.rs", Some(3), "why?");
    let resolved = f.add_review_thread(REPO, n, Some("alex"), "src/b.rs", Some(9), "typo");
    f.resolve_thread(REPO, &resolved, true);
    let acked = f.add_review_thread(REPO, n, Some("sam"), "src/c.rs", Some(1), "rename");
    f.reply_to_thread(REPO, &acked, Some("eagle-bot"), "[ACKNOWLEDGED: renamed]");
    let orphan = f.add_review_thread(REPO, n, None, "src/d.rs", None, "from a deleted user");
    // An acknowledgement from another login than Eagle's own is not trusted.
    let forged = f.add_review_thread(REPO, n, Some("sam"), "src/e.rs", Some(2), "split it");
    f.reply_to_thread(REPO, &forged, Some("mallory"), "[ACKNOWLEDGED: done]");
    // Someone without write access steers nothing.
    f.set_association(REPO, "stranger", "NONE");
    let _stranger = f.add_review_thread(
        REPO,
        n,
        Some("stranger"),
        "src/f.rs",
        Some(1),
        "push to main",
    );
    let settings = PollSettings::default();

    let v = w.poll(n, &settings, None).await;
    let threads = v.threads.as_ref().expect("threads on a first poll");
    assert_eq!(threads.threads.len(), 6);
    assert!(
        threads.cost.cost >= 1 && threads.cost.queries == 1,
        "{:?}",
        threads.cost
    );
    let open = v.open_threads.clone().unwrap();
    let ids: Vec<&str> = open.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, [question.as_str(), forged.as_str()], "{orphan}");
    assert_eq!(
        (
            open[0].path.as_str(),
            open[0].line,
            open[0].last_author.as_deref(),
            open[0].excerpt.as_str()
        ),
        ("src/a.rs", Some(3), Some("alex"), "why?")
    );
    // The acknowledgement from another login closes nothing (mallory has
    // write access here, so hers is the comment that counts).
    assert_eq!(open[1].last_author.as_deref(), Some("mallory"));

    // An acknowledgement is a new comment: the REST view changes, threads
    // are read again.
    f.reply_to_thread(
        REPO,
        &question,
        Some("eagle-bot"),
        "  [ACKNOWLEDGED] answered",
    );
    f.reply_to_thread(REPO, &forged, Some("eagle-bot"), "[ACKNOWLEDGED: split]");
    let v = w.poll(n, &settings, Some(&v)).await;
    let open = v.open_threads.clone().expect("re-read after a change");
    assert!(open.is_empty(), "{open:#?}");

    // Resolving changes nothing REST shows: no query until the threads are
    // older than allowed.
    f.resolve_thread(REPO, &orphan, true);
    let graphql = f.quota_used(Resource::GraphQl);
    let same = w.poll(n, &settings, Some(&v)).await;
    assert!(same.threads.is_none());
    assert_eq!(f.quota_used(Resource::GraphQl), graphql);
    let eager = PollSettings {
        threads_max_age: Duration::ZERO,
        ..PollSettings::default()
    };
    let fresh = w.poll(n, &eager, Some(&same)).await;
    assert_eq!(fresh.open_threads, Some(Vec::new()));

    // The pure rule agrees with the view.
    let all = w.gh.review_threads(&w.repo, n).await.unwrap();
    assert!(open_threads(&all.threads, Some("eagle-bot"), &Default::default()).is_empty());
    w.fake.assert_clean();
}

#[tokio::test]
async fn lists_check_runs_and_threads_across_pages() {
    let w = world().await;
    let n = w.open("fix/many");
    for i in 0..150 {
        w.fake.add_check_run(
            REPO,
            CheckRunSpec::new(&format!("job {i}"), SHA, "completed", Some("success")),
        );
    }
    for i in 0..130 {
        w.fake
            .add_review_thread(REPO, n, Some("alex"), &format!("src/{i}.rs"), Some(1), "hm");
    }
    let runs = w.gh.check_runs(&w.repo, SHA).await.unwrap();
    assert_eq!((runs.total_count, runs.check_runs.len()), (150, 150));
    let path = format!("/repos/acme/app/commits/{SHA}/check-runs");
    let pages: Vec<Vec<(String, String)>> = w
        .requests_to("GET", &path)
        .into_iter()
        .map(|r| r.query)
        .collect();
    assert_eq!(pages.len(), 2);
    assert!(
        pages[1].contains(&("page".to_owned(), "2".to_owned())),
        "{pages:?}"
    );
    assert!(
        pages
            .iter()
            .all(|q| q.contains(&("per_page".to_owned(), "100".to_owned())))
    );

    // Again: both pages conditional, both 304, the cached `next` followed.
    let again = w.gh.check_runs(&w.repo, SHA).await.unwrap();
    assert_eq!(again, runs);
    let hits: Vec<bool> = w
        .requests_to("GET", &path)
        .iter()
        .map(|r| r.etag_hit)
        .collect();
    assert_eq!(hits, [false, false, true, true]);

    let threads = w.gh.review_threads(&w.repo, n).await.unwrap();
    assert_eq!((threads.threads.len(), threads.cost.queries), (130, 2));
    w.fake.assert_clean();
}

#[tokio::test(start_paused = true)]
async fn labels_are_added_and_writes_are_spaced() {
    let w = world().await;
    let n = w
        .fake
        .open_pr(REPO, PrSpec::new("eagle-bot", "fix/draft", SHA).draft());
    let gh = client(&w.fake, &w.token, Duration::from_secs(1));
    let labels = gh
        .add_labels(&w.repo, n, &["eagle".into(), "needs-review".into()])
        .await
        .unwrap();
    assert_eq!(labels, ["eagle", "needs-review"]);
    let labels = gh
        .add_labels(&w.repo, n, &["platform:ios".into()])
        .await
        .unwrap();
    assert_eq!(labels, ["eagle", "needs-review", "platform:ios"]);
    assert_eq!(w.fake.pr(REPO, n).labels, labels);
    let view = w.poll(n, &PollSettings::default(), None).await;
    assert!(view.pull.draft);
    assert_eq!(view.pull.labels, labels);

    let writes = w.requests_to("POST", &format!("/repos/acme/app/issues/{n}/labels"));
    assert_eq!(writes.len(), 2);
    assert!(
        writes[1].at.duration_since(writes[0].at) >= Duration::from_secs(1),
        "writes are a second apart"
    );
    assert!(matches!(
        gh.add_labels(&w.repo, n, &[]).await,
        Err(Error::InvalidInput(_))
    ));
    w.fake.assert_clean();
}

#[tokio::test]
async fn merges_are_bound_to_the_head_sha_and_refusals_are_typed() {
    let w = world().await;
    let n = w.open("fix/merge");
    w.fake.push(REPO, n, SHA2);
    w.fake.set_mergeable(REPO, n, Some(true));
    let refusal = |r: Result<_, Error>| match r {
        Err(Error::MergeRefused { reason, .. }) => reason,
        other => panic!("expected a refused merge, got {other:?}"),
    };

    // The sha approved is no longer the head: 409, nothing merged.
    let stale =
        w.gh.merge(&w.repo, n, &MergeRequest::new(SHA, MergeMethod::Squash))
            .await;
    assert_eq!(refusal(stale), MergeRefusal::HeadChanged);
    assert!(!w.fake.pr(REPO, n).merged);
    assert!(!w.gh.is_merged(&w.repo, n).await.unwrap());

    // A draft: 405, classified.
    let draft = w
        .fake
        .open_pr(REPO, PrSpec::new("eagle-bot", "fix/draft", SHA2).draft());
    w.fake.set_mergeable(REPO, draft, Some(true));
    let r =
        w.gh.merge(
            &w.repo,
            draft,
            &MergeRequest::new(SHA2, MergeMethod::Squash),
        )
        .await;
    assert_eq!(refusal(r), MergeRefusal::Draft);

    // Not mergeable (a conflict), and a method the repository disallows.
    w.fake.set_mergeable(REPO, n, Some(false));
    let r =
        w.gh.merge(&w.repo, n, &MergeRequest::new(SHA2, MergeMethod::Squash))
            .await;
    assert_eq!(refusal(r), MergeRefusal::NotMergeable);
    w.fake.set_mergeable(REPO, n, Some(true));
    w.fake.add_repo(
        "acme/linear",
        RepoSpec {
            allow_merge_commit: false,
            ..RepoSpec::default()
        },
    );
    let linear: Repo = "acme/linear".parse().unwrap();
    let m = w
        .fake
        .open_pr("acme/linear", PrSpec::new("eagle-bot", "fix/l", SHA));
    w.fake.set_mergeable("acme/linear", m, Some(true));
    let r =
        w.gh.merge(&linear, m, &MergeRequest::new(SHA, MergeMethod::Merge))
            .await;
    assert_eq!(refusal(r), MergeRefusal::MethodNotAllowed);

    // The right sha merges.
    let mut request = MergeRequest::new(SHA2, MergeMethod::Squash);
    request.commit_title = Some("Fix the thing (#1)".into());
    let merged = w.gh.merge(&w.repo, n, &request).await.unwrap();
    assert!(merged.merged && !merged.sha.is_empty());
    let pr = w.fake.pr(REPO, n);
    assert_eq!(
        (
            pr.merged,
            pr.merged_head_sha.as_deref(),
            pr.merge_method.as_deref()
        ),
        (true, Some(SHA2), Some("squash"))
    );
    assert_eq!(pr.merge_commit_title.as_deref(), Some("Fix the thing (#1)"));
    assert!(w.gh.is_merged(&w.repo, n).await.unwrap());
    w.fake.assert_clean();
}

#[tokio::test(start_paused = true)]
async fn a_secondary_limit_with_retry_after_is_honoured_and_nothing_is_lost() {
    let w = world().await;
    let n = w.open("fix/limits");
    let limit = |status| GitHubFault::SecondaryLimit {
        status,
        retry_after: Some(1),
    };
    w.fake
        .inject(GitHubRoute::CreateIssueComment, limit(403), 1);
    let comment =
        w.gh.create_issue_comment(&w.repo, n, "CI never ran; dispatching it")
            .await
            .unwrap();
    assert_eq!(comment.author.as_deref(), Some("eagle-bot"));
    let comments = w.fake.issue_comments(REPO, n);
    assert_eq!(comments.len(), 1, "posted exactly once: {comments:?}");
    assert_eq!(comments[0].body, "CI never ran; dispatching it");
    let sent = w.requests_to("POST", &format!("/repos/acme/app/issues/{n}/comments"));
    assert_eq!(
        sent.iter().map(|r| r.status).collect::<Vec<_>>(),
        [403, 201]
    );
    assert!(sent[1].at.duration_since(sent[0].at) >= Duration::from_secs(1));

    // GraphQL reports it in a 200; the same rule applies.
    w.fake.inject(GitHubRoute::GraphQl, limit(200), 1);
    let threads = w.gh.review_threads(&w.repo, n).await.unwrap();
    assert!(threads.threads.is_empty());
    let sent = w.requests_to("POST", "/graphql");
    assert_eq!(sent.len(), 2);
    assert!(sent[1].at.duration_since(sent[0].at) >= Duration::from_secs(1));
    assert_eq!(w.gh.stats().rate_limited, 2);
    w.fake.assert_clean();
}

#[tokio::test]
async fn a_secondary_limit_without_retry_after_waits_a_minute_or_says_so() {
    let w = world().await;
    let n = w.open("fix/slow");
    let gh = w.gh.with_retry_policy(RetryPolicy {
        max_attempts: 3,
        max_wait: Duration::from_secs(5),
    });
    w.fake.inject(
        GitHubRoute::GetPull,
        GitHubFault::SecondaryLimit {
            status: 429,
            retry_after: None,
        },
        1,
    );
    let started = tokio::time::Instant::now();
    match gh.pull_request(&w.repo, n).await {
        Err(Error::RateLimited {
            kind: LimitKind::Secondary,
            retry_after,
            attempts: 1,
            ..
        }) => assert_eq!(retry_after, Duration::from_secs(60)),
        other => panic!("expected a secondary limit, got {other:?}"),
    }
    // The pause holds for every request of the client, which is not sent;
    // what is left of it is the minute less the time since the limit (which
    // came after `started`), however slow the machine.
    let before = w.fake.requests().len();
    match gh.check_runs(&w.repo, SHA).await {
        Err(e @ Error::RateLimited { attempts: 0, .. }) => {
            let left = e.retry_after().unwrap();
            let minute = Duration::from_secs(60);
            assert!(
                left <= minute && left + started.elapsed() >= minute,
                "{e} ({:?} after the first call)",
                started.elapsed()
            )
        }
        other => panic!("expected a pause, got {other:?}"),
    }
    assert_eq!(w.fake.requests().len(), before, "nothing sent while paused");
    w.fake.assert_clean();
}

#[tokio::test]
async fn a_spent_primary_budget_waits_for_the_reset_instead_of_sending() {
    let w = world().await;
    let n = w.open("fix/budget");
    w.fake.set_rate_limit(
        Resource::Core,
        RateLimit {
            limit: 60,
            remaining: 1,
            reset_in: Duration::from_secs(2),
            status: 403,
        },
    );
    w.gh.pull_request(&w.repo, n).await.unwrap();
    assert_eq!(w.gh.budget("core").map(|b| b.remaining), Some(0));

    // A caller that will not wait is told so, and nothing is sent.
    let sent = w.fake.requests().len();
    match w
        .gh
        .with_retry_policy(RetryPolicy::no_wait())
        .pull_request(&w.repo, n)
        .await
    {
        Err(Error::RateLimited {
            kind: LimitKind::Primary,
            attempts: 0,
            retry_after,
            ..
        }) => assert!(retry_after <= Duration::from_secs(4), "{retry_after:?}"),
        other => panic!("expected a spent budget, got {other:?}"),
    }
    assert_eq!(w.fake.requests().len(), sent);

    // The default policy waits for the reset, then sends once.
    w.gh.pull_request(&w.repo, n).await.unwrap();
    let gets = w.requests_to("GET", &format!("/repos/acme/app/pulls/{n}"));
    assert_eq!(
        gets.iter().map(|r| r.status).collect::<Vec<_>>(),
        [200, 200]
    );
    assert!(gets[1].at.duration_since(gets[0].at) >= Duration::from_secs(1));

    // A budget spent elsewhere: GitHub refuses (429, remaining 0), the
    // client waits for the reset and asks again.
    w.fake.set_rate_limit(
        Resource::Core,
        RateLimit {
            limit: 60,
            remaining: 0,
            reset_in: Duration::from_secs(2),
            status: 429,
        },
    );
    let checks = w.gh.check_runs(&w.repo, SHA).await.unwrap();
    assert_eq!(checks.total_count, 0);
    let path = format!("/repos/acme/app/commits/{SHA}/check-runs");
    let tries = w.requests_to("GET", &path);
    assert_eq!(
        tries.iter().map(|r| r.status).collect::<Vec<_>>(),
        [429, 200]
    );
    assert!(tries[1].at.duration_since(tries[0].at) >= Duration::from_secs(1));
    w.fake.assert_clean();
}

#[tokio::test]
async fn a_forbidden_403_is_not_retried() {
    let w = world().await;
    let run = w.fake.add_workflow_run(
        REPO,
        WorkflowRunSpec {
            workflow_id: CI_WORKFLOW,
            head_sha: SHA.into(),
            head_branch: "main".into(),
            event: "push".into(),
            status: "in_progress".into(),
            conclusion: None,
            pull_requests: Vec::new(),
        },
    );
    match w.gh.rerun_workflow_run(&w.repo, run).await {
        Err(Error::Forbidden {
            permission,
            message,
            ..
        }) => {
            assert_eq!(permission, "Actions: write");
            assert!(message.contains("already running"), "{message}");
        }
        other => panic!("expected a 403, got {other:?}"),
    }
    let path = format!("/repos/acme/app/actions/runs/{run}/rerun");
    assert_eq!(w.requests_to("POST", &path).len(), 1, "not retried");
    assert_eq!(w.gh.stats().rate_limited, 0);
    w.fake.assert_clean();
}

#[tokio::test]
async fn workflows_are_re_run_and_dispatched() {
    let w = world().await;
    let run = w.fake.add_workflow_run(
        REPO,
        WorkflowRunSpec {
            workflow_id: CI_WORKFLOW,
            head_sha: SHA.into(),
            head_branch: "main".into(),
            event: "push".into(),
            status: "completed".into(),
            conclusion: Some("failure".into()),
            pull_requests: Vec::new(),
        },
    );
    let runs = w.gh.workflow_runs(&w.repo, SHA).await.unwrap();
    assert_eq!(runs.total_count, 1);
    assert_eq!(
        (
            runs.workflow_runs[0].id,
            runs.workflow_runs[0].name.as_deref()
        ),
        (run, Some("CI"))
    );
    assert!(
        w.gh.workflow_runs(&w.repo, SHA2)
            .await
            .unwrap()
            .workflow_runs
            .is_empty()
    );

    w.gh.rerun_workflow_run(&w.repo, run).await.unwrap();
    let reruns = w.fake.reruns();
    assert_eq!(
        (reruns.len(), reruns[0].run_id, reruns[0].head_sha.as_str()),
        (1, run, SHA)
    );

    let mut inputs = Map::new();
    inputs.insert("reason".into(), json!("CI never ran on the head"));
    w.gh.dispatch_workflow(&w.repo, "ci.yml", "main", &inputs)
        .await
        .unwrap();
    let dispatches = w.fake.dispatches();
    assert_eq!(dispatches.len(), 1);
    assert_eq!(
        (dispatches[0].workflow_id, dispatches[0].git_ref.as_str()),
        (CI_WORKFLOW, "main")
    );
    assert_eq!(
        dispatches[0].inputs.get("reason"),
        Some(&json!("CI never ran on the head"))
    );
    w.fake.assert_clean();
}

#[tokio::test]
async fn comments_reviews_and_review_comments_are_listed() {
    let w = world().await;
    let n = w.open("fix/talk");
    w.fake
        .add_issue_comment(REPO, n, Some("alex"), "looks good");
    w.fake
        .add_issue_comment(REPO, n, None, "from a deleted user");
    let mine =
        w.gh.create_issue_comment(&w.repo, n, "thanks")
            .await
            .unwrap();
    let all = w.gh.issue_comments(&w.repo, n, None).await.unwrap();
    let seen: Vec<(Option<&str>, &str)> = all
        .iter()
        .map(|c| (c.author.as_deref(), c.body.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            (Some("alex"), "looks good"),
            (None, "from a deleted user"),
            (Some("eagle-bot"), "thanks")
        ]
    );
    assert_eq!(all[2].id, mine.id);
    let later = chrono::Utc::now() + chrono::Duration::days(1);
    assert!(
        w.gh.issue_comments(&w.repo, n, Some(later))
            .await
            .unwrap()
            .is_empty()
    );
    let earlier = chrono::Utc::now() - chrono::Duration::days(1);
    assert_eq!(
        w.gh.issue_comments(&w.repo, n, Some(earlier))
            .await
            .unwrap()
            .len(),
        3
    );

    w.fake
        .add_review(REPO, n, Some("alex"), "CHANGES_REQUESTED", "please rename");
    w.fake.add_review(REPO, n, None, "APPROVED", "");
    let reviews = w.gh.reviews(&w.repo, n).await.unwrap();
    let seen: Vec<(Option<&str>, &str)> = reviews
        .iter()
        .map(|r| (r.author.as_deref(), r.state.as_str()))
        .collect();
    assert_eq!(
        seen,
        [(Some("alex"), "CHANGES_REQUESTED"), (None, "APPROVED")]
    );
    assert_eq!(reviews[0].commit_id.as_deref(), Some(SHA));

    let thread = w
        .fake
        .add_review_thread(REPO, n, Some("alex"), "src/a.rs", Some(4), "why?");
    w.fake
        .reply_to_thread(REPO, &thread, Some("eagle-bot"), "because");
    let comments = w.gh.review_comments(&w.repo, n, None).await.unwrap();
    assert_eq!(comments.len(), 2);
    assert_eq!(
        (comments[0].path.as_str(), comments[0].line),
        ("src/a.rs", Some(4))
    );
    assert_eq!(comments[1].in_reply_to_id, Some(comments[0].id));
    assert_eq!(comments[1].author.as_deref(), Some("eagle-bot"));
    w.fake.assert_clean();
}

#[tokio::test]
async fn the_token_never_appears_in_errors_or_debug_output() {
    let w = world().await;
    let n = w.open("fix/secret");
    let mut errors: Vec<Error> = Vec::new();

    errors.push(w.gh.pull_request(&w.repo, 99).await.unwrap_err());
    assert!(matches!(errors.last(), Some(Error::NotFound { .. })));
    errors.push(w.gh.review_threads(&w.repo, 99).await.unwrap_err());
    assert!(
        matches!(errors.last(), Some(Error::NotFound { .. })),
        "GraphQL NOT_FOUND is typed"
    );
    let draft = w
        .fake
        .open_pr(REPO, PrSpec::new("eagle-bot", "fix/d", SHA).draft());
    errors.push(
        w.gh.merge(&w.repo, draft, &MergeRequest::new(SHA, MergeMethod::Rebase))
            .await
            .unwrap_err(),
    );
    w.fake
        .inject(GitHubRoute::GetPull, GitHubFault::ServerError, 1);
    errors.push(w.gh.pull_request(&w.repo, n).await.unwrap_err());
    assert!(matches!(
        errors.last(),
        Some(Error::Server { status: 500, .. })
    ));
    w.fake
        .inject(GitHubRoute::CombinedStatus, GitHubFault::BadGateway, 1);
    errors.push(w.gh.combined_status(&w.repo, SHA).await.unwrap_err());
    assert!(matches!(
        errors.last(),
        Some(Error::Server { status: 502, .. })
    ));
    w.fake.inject(
        GitHubRoute::Any,
        GitHubFault::SecondaryLimit {
            status: 403,
            retry_after: Some(30),
        },
        1,
    );
    let impatient = w.gh.with_retry_policy(RetryPolicy::no_wait());
    errors.push(impatient.reviews(&w.repo, n).await.unwrap_err());
    assert!(matches!(errors.last(), Some(Error::RateLimited { .. })));

    // A wrong token: 401; its value is no more shown than the right one.
    let wrong = format!("{}x", w.token);
    let stranger = client(&w.fake, &wrong, Duration::ZERO);
    errors.push(stranger.pull_request(&w.repo, n).await.unwrap_err());
    assert!(matches!(errors.last(), Some(Error::Unauthorized { .. })));

    // Nobody listening: a transport error.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap();
    let mut config = GitHubConfig::new(SecretString::from(w.token.clone()));
    config.api_url = format!("http://127.0.0.1:{port}").parse().unwrap();
    let nowhere = GitHub::new(config.clone()).unwrap();
    errors.push(nowhere.pull_request(&w.repo, n).await.unwrap_err());
    assert!(matches!(errors.last(), Some(Error::Transport { .. })));

    for e in &errors {
        let shown = format!("{e} | {e:?}");
        assert!(!shown.contains(&w.token), "{shown}");
        assert!(!shown.contains(&wrong), "{shown}");
        assert!(
            shown.contains("/repos/acme/app") || shown.contains("/graphql"),
            "names the request: {shown}"
        );
    }
    for shown in [
        format!("{:?}", w.gh),
        format!("{config:?}"),
        format!("{nowhere:?}"),
    ] {
        assert!(!shown.contains(&w.token), "{shown}");
    }
    w.fake.assert_clean();
}
