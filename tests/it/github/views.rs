//! What the client reads: a PR's view and CI from never ran to green, ETags
//! that make an idle PR free, review threads, and lists across pages.

use super::*;

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
