//! The fake GitHub's request rules: headers, token, routes and parameters,
//! rate limits and conditional requests, injected faults, and the guard.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use super::github::{REPO, world};
use super::{SOON, panics};
use crate::{FakeGitHub, GitHubFault as Fault, GitHubRoute as Route, RateLimit, Resource};

const PR: &str = "/repos/acme/app/pulls/1";

#[tokio::test]
async fn headers_are_required_and_checked() {
    let (fake, gh) = world().await;
    assert_eq!(gh.get(PR).await.status, 200);
    fake.assert_clean();

    let no_agent = gh.without("user-agent").get(PR).await;
    assert_eq!(no_agent.status, 403);
    assert!(
        no_agent.body["message"]
            .as_str()
            .unwrap()
            .contains("User-Agent")
    );
    assert!(
        fake.violations()[0].contains("no User-Agent"),
        "{:?}",
        fake.violations()
    );
    fake.clear_violations();

    let no_version = gh.without("x-github-api-version").get(PR).await;
    assert_eq!(no_version.status, 200, "GitHub picks a default version");
    assert!(fake.violations()[0].contains("X-GitHub-Api-Version"));
    fake.clear_violations();

    let other = gh.with("x-github-api-version", "2026-03-10").get(PR).await;
    assert_eq!(other.status, 400);
    assert!(
        other.body["message"]
            .as_str()
            .unwrap()
            .contains("is not a supported version")
    );
    assert_eq!(fake.violations().len(), 1);
    fake.clear_violations();

    for accept in [None, Some("*/*")] {
        let client = match accept {
            None => gh.without("accept"),
            Some(a) => gh.with("accept", a),
        };
        assert_eq!(client.get(PR).await.status, 200);
        assert!(
            fake.violations()[0].contains("Accept"),
            "{:?}",
            fake.violations()
        );
        fake.clear_violations();
    }
    fake.assert_clean();
}

#[tokio::test]
async fn tokens_and_credentials() {
    let (fake, gh) = world().await;
    let wrong = gh
        .with("authorization", "Bearer github_pat_nope")
        .get(PR)
        .await;
    assert_eq!(wrong.status, 401);
    assert_eq!(wrong.body["message"], "Bad credentials");
    assert_eq!(
        wrong.body["documentation_url"],
        "https://docs.github.com/rest"
    );
    assert_eq!(wrong.header("x-ratelimit-resource"), "core");
    // A wrong token is a case Eagle must handle, not a mistake in how it asks.
    fake.assert_clean();

    let anonymous = gh.without("authorization").get(PR).await;
    assert_eq!(
        (anonymous.status, anonymous.body["message"].as_str()),
        (401, Some("Requires authentication"))
    );
    assert_eq!(fake.violations().len(), 1);
    fake.clear_violations();

    let token = gh
        .headers
        .iter()
        .find(|(n, _)| *n == "authorization")
        .unwrap()
        .1
        .replace("Bearer ", "");
    let old_scheme = gh
        .with("authorization", &format!("token {token}"))
        .get(PR)
        .await;
    assert_eq!(old_scheme.status, 200, "GitHub still takes `token`");
    assert!(fake.violations()[0].contains("not Bearer"));
    fake.clear_violations();

    let recorded = fake.requests();
    let users: Vec<Option<&str>> = recorded.iter().map(|r| r.user.as_deref()).collect();
    assert_eq!(
        users,
        [None, None, Some("eagle-bot")],
        "only a good token names its user"
    );
    assert_eq!(recorded[0].status, 401);
    fake.assert_clean();
}

#[tokio::test]
async fn unknown_routes_methods_and_parameters() {
    let (fake, gh) = world().await;
    for (method, path) in [
        (Method::GET, "/repos/acme/app/pulls/1/files"),
        (Method::PATCH, "/repos/acme/app/pulls/1"),
        (Method::GET, "/repos/acme/app/pulls/1/"),
        (Method::POST, "/user"),
    ] {
        let answer = gh.call(method.clone(), path, None).await;
        assert_eq!(
            (answer.status, answer.body["message"].as_str()),
            (404, Some("Not Found")),
            "{method} {path}"
        );
        assert_eq!(answer.body["status"], "404");
    }
    let violations = fake.violations();
    assert_eq!(violations.len(), 4, "{violations:?}");
    assert!(violations[1].contains("PATCH /repos/acme/app/pulls/1"));
    fake.clear_violations();

    let missing = gh.get("/repos/acme/other/pulls/1").await;
    assert_eq!(missing.status, 404);
    let no_pr = gh.get("/repos/acme/app/pulls/99").await;
    assert_eq!(no_pr.status, 404);
    fake.assert_clean();

    let extra = gh
        .get("/repos/acme/app/pulls/1?per_page=5&colour=blue")
        .await;
    assert_eq!(
        extra.status, 200,
        "GitHub ignores parameters it does not know"
    );
    let violations = fake.violations();
    assert!(violations[0].contains("per_page, colour"), "{violations:?}");
    fake.clear_violations();

    let big = gh
        .get("/repos/acme/app/issues/1/comments?per_page=101")
        .await;
    assert_eq!(big.status, 200);
    assert!(fake.violations()[0].contains("per_page=101"));
    fake.clear_violations();
    fake.assert_clean();
}

#[tokio::test]
async fn conditional_requests_cost_no_quota() {
    let (fake, gh) = world().await;
    let first = gh.get(PR).await;
    assert_eq!(first.status, 200);
    let etag = first.header("etag");
    assert!(etag.starts_with("W/\"") && etag.ends_with('"'), "{etag}");
    assert_eq!(first.header("x-ratelimit-limit"), "5000");
    assert_eq!(first.header("x-ratelimit-remaining"), "4999");
    assert_eq!(first.header("x-ratelimit-used"), "1");
    assert_eq!(first.header("x-ratelimit-resource"), "core");
    let reset = first.number("x-ratelimit-reset");
    let now = chrono::Utc::now().timestamp() as u64;
    assert!(reset > now && reset <= now + 3_600, "{reset} vs {now}");
    assert_eq!(fake.quota_used(Resource::Core), 1);

    // The same etag, weak or strong, quoted: 304, no body, no quota.
    let strong = etag.trim_start_matches("W/").to_owned();
    for tag in [etag.clone(), strong, format!("\"other\", {etag}")] {
        let idle = gh.with("if-none-match", &tag).get(PR).await;
        assert_eq!(idle.status, 304, "{tag}");
        assert_eq!(idle.body, serde_json::Value::Null);
        assert_eq!(idle.header("etag"), etag);
        assert_eq!(idle.header("x-ratelimit-remaining"), "4999");
    }
    assert_eq!(
        fake.quota_used(Resource::Core),
        1,
        "an idle PR costs no quota"
    );
    let hits: Vec<bool> = fake.requests().iter().map(|r| r.etag_hit).collect();
    assert_eq!(hits, [false, true, true, true]);

    // A change makes a new etag: a full answer that costs one.
    fake.add_issue_comment(REPO, 1, Some("alex"), "hi");
    let labelled = gh
        .post(
            "/repos/acme/app/issues/1/labels",
            json!({"labels": ["eagle"]}),
        )
        .await;
    assert_eq!(labelled.status, 200);
    assert_eq!(labelled.header("etag"), "", "only GETs carry an etag");
    let changed = gh.with("if-none-match", &etag).get(PR).await;
    assert_eq!(changed.status, 200);
    assert_ne!(changed.header("etag"), etag);
    assert_eq!(fake.quota_used(Resource::Core), 3);

    // An unquoted etag never matches, and is a violation.
    let bare = changed
        .header("etag")
        .trim_start_matches("W/")
        .trim_matches('"')
        .to_owned();
    assert_eq!(gh.with("if-none-match", &bare).get(PR).await.status, 200);
    assert!(fake.violations()[0].contains("not a quoted etag"));
    fake.clear_violations();
    fake.assert_clean();
}

#[tokio::test]
async fn an_exhausted_primary_limit_answers_403_or_429() {
    let (fake, gh) = world().await;
    for status in [403, 429] {
        fake.set_rate_limit(
            Resource::Core,
            RateLimit {
                limit: 60,
                remaining: 1,
                reset_in: Duration::from_secs(120),
                status,
            },
        );
        let last = gh.get(PR).await;
        assert_eq!(last.status, 200);
        assert_eq!(last.header("x-ratelimit-remaining"), "0");
        let refused = gh.get(PR).await;
        assert_eq!(refused.status, status);
        assert!(
            refused.body["message"]
                .as_str()
                .unwrap()
                .starts_with("API rate limit exceeded")
        );
        assert_eq!(refused.header("x-ratelimit-remaining"), "0");
        assert_eq!(refused.header("x-ratelimit-limit"), "60");
        let reset = refused.number("x-ratelimit-reset");
        let now = chrono::Utc::now().timestamp() as u64;
        assert!((now + 118..=now + 121).contains(&reset), "{reset} vs {now}");
    }
    // A refusal costs nothing more.
    assert_eq!(fake.quota_used(Resource::Core), 2);
    fake.assert_clean();
}

#[tokio::test]
async fn injected_secondary_limits_and_server_errors() {
    let (fake, gh) = world().await;
    fake.inject(
        Route::GetPull,
        Fault::SecondaryLimit {
            status: 403,
            retry_after: Some(30),
        },
        1,
    );
    fake.inject(
        Route::GetPull,
        Fault::SecondaryLimit {
            status: 429,
            retry_after: None,
        },
        1,
    );
    fake.inject(Route::Any, Fault::ServerError, 1);
    fake.inject(Route::GetPull, Fault::BadGateway, 1);

    let first = gh.get(PR).await;
    assert_eq!(first.status, 403);
    assert!(
        first.body["message"]
            .as_str()
            .unwrap()
            .contains("secondary rate limit")
    );
    assert_eq!(first.header("retry-after"), "30");
    assert_ne!(
        first.header("x-ratelimit-remaining"),
        "0",
        "a secondary limit leaves the primary alone"
    );
    let second = gh.get(PR).await;
    assert_eq!(
        (second.status, second.header("retry-after")),
        (429, String::new())
    );
    assert!(
        second.body["message"]
            .as_str()
            .unwrap()
            .contains("secondary rate limit")
    );
    let third = gh.get(PR).await;
    assert_eq!(
        (third.status, third.body["message"].as_str()),
        (500, Some("Server Error"))
    );
    let fourth = gh.get(PR).await;
    assert_eq!(fourth.status, 502);
    assert!(fourth.body.as_str().unwrap().contains("Unicorn"));
    assert_eq!(gh.get(PR).await.status, 200);

    // Hang: nothing happens and the client times out.
    fake.inject(Route::CreateIssueComment, Fault::Hang, 1);
    let hung = gh
        .try_call(
            Method::POST,
            "/repos/acme/app/issues/1/comments",
            Some(json!({"body": "x"})),
            Some(Duration::from_millis(300)),
        )
        .await;
    assert!(hung.is_err_and(|e| e.is_timeout()));
    assert!(fake.issue_comments(REPO, 1).is_empty());
    assert_eq!(
        fake.requests().last().unwrap().status,
        0,
        "a hung request has no status"
    );
    fake.assert_clean();
}

#[tokio::test]
async fn accept_then_hang_applies_the_write_and_loses_the_answer() {
    let (fake, gh) = world().await;
    fake.inject(Route::Merge, Fault::AcceptThenHang, 1);
    let merge = json!({"sha": super::github::SHA, "merge_method": "squash"});
    let lost = tokio::spawn({
        let gh = gh.without("x-none");
        let merge = merge.clone();
        async move {
            gh.try_call(
                Method::PUT,
                "/repos/acme/app/pulls/1/merge",
                Some(merge),
                Some(Duration::from_secs(60)),
            )
            .await
        }
    });
    assert!(fake.wait_until(SOON, |f| f.pr(REPO, 1).merged).await);
    lost.abort();
    // The retry finds the PR merged: exactly once.
    let retry = gh.put("/repos/acme/app/pulls/1/merge", merge).await;
    assert_eq!(
        (retry.status, retry.body["message"].as_str()),
        (405, Some("Pull Request is not mergeable"))
    );
    assert_eq!(gh.get("/repos/acme/app/pulls/1/merge").await.status, 204);
    fake.assert_clean();
}

#[tokio::test]
async fn the_guard_fails_a_test_that_left_violations_unchecked() {
    let (fake, gh) = world().await;
    gh.get("/nowhere").await;
    let message = panics(|| fake.assert_clean());
    assert!(
        message.contains("1 violation(s)") && message.contains("GET /nowhere"),
        "{message}"
    );
    let clone = fake.clone();
    drop(fake);
    let message = panics(move || drop(clone));
    assert!(message.contains("never checked"), "{message}");

    // A clean fake drops quietly.
    let quiet = FakeGitHub::start().await;
    drop(quiet);
}

#[tokio::test]
async fn wait_until_wakes_on_changes_and_times_out() {
    let (fake, gh) = world().await;
    let waiter = tokio::spawn({
        let fake = fake.clone();
        async move {
            fake.wait_until(SOON, |f| f.issue_comments(REPO, 1).len() == 1)
                .await
        }
    });
    assert_eq!(
        gh.post("/repos/acme/app/issues/1/comments", json!({"body": "done"}))
            .await
            .status,
        201
    );
    assert!(waiter.await.unwrap());
    assert!(
        !fake
            .wait_until(Duration::from_millis(50), |f| f
                .issue_comments(REPO, 1)
                .len()
                == 2)
            .await
    );
    fake.assert_clean();
}
