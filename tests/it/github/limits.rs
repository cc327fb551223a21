//! Rate limits (secondary with and without `Retry-After`, a spent primary
//! budget), a 403 that is not retried, and a token that never shows.

use super::*;

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
