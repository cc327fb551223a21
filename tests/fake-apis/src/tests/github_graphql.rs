//! GraphQL: review threads with cursors, the rate limit object, the
//! ready-for-review mutation, and the errors GitHub reports in `errors[]`.

use std::time::Duration;

use serde_json::{Value, json};

use super::github::{REPO, world};
use crate::{RateLimit, Resource};

const THREADS: &str = r#"
query Threads($owner: String!, $name: String!, $number: Int!, $after: String) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      id isDraft number headRefOid
      reviewThreads(first: 1, after: $after) {
        pageInfo { hasNextPage endCursor }
        totalCount
        nodes {
          id isResolved isOutdated path line
          comments(first: 100) {
            totalCount
            pageInfo { hasNextPage endCursor }
            nodes { id author { login } body createdAt url }
          }
        }
      }
    }
  }
  rateLimit { cost limit remaining used resetAt nodeCount }
}"#;

fn vars(after: Value) -> Value {
    json!({"owner": "acme", "name": "app", "number": 1, "after": after})
}

#[tokio::test]
async fn review_threads_page_by_cursor_with_only_the_selected_fields() {
    let (fake, gh) = world().await;
    let first = fake.add_review_thread(REPO, 1, Some("alex"), "src/a.rs", Some(3), "why?");
    fake.reply_to_thread(REPO, &first, None, "a deleted user answered");
    fake.resolve_thread(REPO, &first, true);
    let second = fake.add_review_thread(REPO, 1, Some("sam"), "src/b.rs", Some(9), "typo");
    fake.set_thread_outdated(REPO, &second, true);

    let page1 = gh.graphql(THREADS, vars(Value::Null)).await;
    assert_eq!(page1.status, 200);
    assert_eq!(
        page1.header("etag"),
        "",
        "GraphQL has no conditional requests"
    );
    assert_eq!(page1.header("x-ratelimit-resource"), "graphql");
    assert!(page1.body.get("errors").is_none(), "{}", page1.body);
    let pr = &page1.body["data"]["repository"]["pullRequest"];
    assert_eq!(pr["id"], fake.pr_node_id(REPO, 1));
    assert_eq!(
        (
            pr["isDraft"].clone(),
            pr["number"].clone(),
            pr["headRefOid"].clone()
        ),
        (json!(false), json!(1), json!(super::github::SHA))
    );
    let keys: Vec<&String> = pr.as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 5, "only what was selected: {keys:?}");
    let threads = &pr["reviewThreads"];
    assert_eq!(
        (
            threads["totalCount"].clone(),
            threads["pageInfo"]["hasNextPage"].clone()
        ),
        (json!(2), json!(true))
    );
    let t = &threads["nodes"][0];
    assert_eq!(
        (
            t["id"].clone(),
            t["isResolved"].clone(),
            t["isOutdated"].clone()
        ),
        (json!(first), json!(true), json!(false))
    );
    assert_eq!(
        (t["path"].clone(), t["line"].clone()),
        (json!("src/a.rs"), json!(3))
    );
    let comments = &t["comments"];
    assert_eq!(comments["totalCount"], 2);
    assert_eq!(comments["pageInfo"]["hasNextPage"], false);
    assert_eq!(comments["nodes"][0]["author"]["login"], "alex");
    assert_eq!(
        comments["nodes"][1]["author"],
        Value::Null,
        "a deleted user"
    );
    assert!(
        comments["nodes"][0]["url"]
            .as_str()
            .unwrap()
            .contains("#discussion_r")
    );
    let rate = &page1.body["data"]["rateLimit"];
    assert_eq!(
        (rate["cost"].clone(), rate["limit"].clone()),
        (json!(1), json!(5000))
    );
    assert_eq!(
        (rate["used"].clone(), rate["remaining"].clone()),
        (json!(1), json!(4999))
    );
    assert_eq!(rate["nodeCount"], 101, "one thread and up to 100 comments");
    assert!(rate["resetAt"].as_str().unwrap().ends_with('Z'));
    assert_eq!(page1.header("x-ratelimit-remaining"), "4999");

    let cursor = threads["pageInfo"]["endCursor"].clone();
    let page2 = gh.graphql(THREADS, vars(cursor)).await;
    let threads2 = &page2.body["data"]["repository"]["pullRequest"]["reviewThreads"];
    assert_eq!(threads2["nodes"][0]["id"], second);
    assert_eq!(
        (
            threads2["nodes"][0]["isOutdated"].clone(),
            threads2["nodes"][0]["line"].clone()
        ),
        (json!(true), Value::Null)
    );
    assert_eq!(threads2["pageInfo"]["hasNextPage"], false);
    assert_eq!(
        fake.quota_used(Resource::GraphQl),
        2,
        "every query costs at least a point"
    );
    assert_eq!(fake.quota_used(Resource::Core), 0);
    fake.assert_clean();
}

#[tokio::test]
async fn aliases_fragments_typename_and_last() {
    let (fake, gh) = world().await;
    let thread = fake.add_review_thread(REPO, 1, Some("alex"), "a", None, "one");
    fake.reply_to_thread(REPO, &thread, Some("ci[bot]"), "two");
    let query = r#"
      query { repository(owner: "acme", name: "app") { pr: pullRequest(number: 1) { ...Bits } } }
      fragment Bits on PullRequest {
        __typename
        reviewThreads(last: 1) { edges { cursor node { comments(last: 1, skip: 0) { nodes { author { __typename ... on Bot { login } } } } } } }
        isDraft @include(if: false)
      }"#;
    let answer = gh.graphql(query, json!({})).await;
    assert!(answer.body.get("errors").is_none(), "{}", answer.body);
    let pr = &answer.body["data"]["repository"]["pr"];
    assert_eq!(pr["__typename"], "PullRequest");
    assert!(pr.get("isDraft").is_none());
    let edge = &pr["reviewThreads"]["edges"][0];
    assert!(edge["cursor"].is_string());
    assert_eq!(
        edge["node"]["comments"]["nodes"][0]["author"],
        json!({"__typename": "Bot", "login": "ci[bot]"})
    );
    fake.assert_clean();
}

#[tokio::test]
async fn mistakes_come_back_as_errors_with_status_200() {
    let (fake, gh) = world().await;
    let cases: &[(&str, Value, &str)] = &[
        (
            r#"{ repository(owner: "acme", name: "app") { pullRequest(number: 1) { mergeQueueEntry } } }"#,
            json!({}),
            "Field 'mergeQueueEntry' doesn't exist on type 'PullRequest'",
        ),
        (
            r#"{ repository(owner: "acme", name: "app", private: true) { id } }"#,
            json!({}),
            "Field 'repository' doesn't accept argument 'private'",
        ),
        (
            r#"{ repository(owner: "acme") { id } }"#,
            json!({}),
            "missing required arguments: name",
        ),
        (
            r#"{ repository(owner: "acme", name: "app") { pullRequest(number: "1") { id } } }"#,
            json!({}),
            "Expected type 'Int!'",
        ),
        (
            r#"{ repository(owner: "acme", name: "app") { pullRequest(number: 1) { reviewThreads { totalCount } } } }"#,
            json!({}),
            "You must provide a `first` or `last` value",
        ),
        (
            r#"{ repository(owner: "acme", name: "app") { pullRequest(number: 1) { reviewThreads(first: 101) { totalCount } } } }"#,
            json!({}),
            "exceeds the `first` limit of 100 records",
        ),
        (
            r#"{ repository(owner: "acme", name: "app") { pullRequest(number: 1) { id { x } } } }"#,
            json!({}),
            "Selections can't be made on scalars",
        ),
        (
            r#"{ repository(owner: "acme", name: "app") { pullRequest(number: 1) } }"#,
            json!({}),
            "Field must have selections",
        ),
        (
            r#"query($n: Int!) { repository(owner: "acme", name: "app") { pullRequest(number: $n) { id } } }"#,
            json!({}),
            "Variable $n of type Int! was provided invalid value",
        ),
        (
            r#"query($n: String!) { repository(owner: "acme", name: "app") { pullRequest(number: $n) { id } } }"#,
            json!({"n": "1"}),
            "Type mismatch on variable $n",
        ),
        (
            r#"query($unused: Int) { rateLimit { cost } }"#,
            json!({}),
            "Variable $unused is declared by query but not used",
        ),
        (r#"{ rateLimit { cost } "#, json!({}), "Parse error"),
        (
            r#"{ rateLimit(dryRun: true) { cost } }"#,
            json!({}),
            "doesn't accept argument 'dryRun'",
        ),
    ];
    for (query, variables, message) in cases {
        let answer = gh.graphql(query, variables.clone()).await;
        assert_eq!(answer.status, 200, "{query}");
        assert!(
            answer.body.get("data").is_none(),
            "{query}: {}",
            answer.body
        );
        let text = answer.body["errors"][0]["message"].as_str().unwrap_or("");
        assert!(text.contains(message), "{query}: {}", answer.body);
        assert!(!fake.violations().is_empty(), "{query}");
        fake.clear_violations();
    }
    let located = gh
        .graphql("{\n  viewer { login colour }\n}", json!({}))
        .await;
    assert_eq!(
        located.body["errors"][0]["locations"],
        json!([{"line": 2, "column": 18}])
    );
    assert_eq!(
        located.body["errors"][0]["extensions"]["code"],
        "undefinedField"
    );
    assert_eq!(
        located.body["errors"][0]["path"],
        json!(["query", "viewer", "colour"])
    );
    fake.clear_violations();
    assert_eq!(
        fake.quota_used(Resource::GraphQl),
        14,
        "a refused query still costs a point"
    );
    fake.assert_clean();
}

#[tokio::test]
async fn cursors_must_be_issued_by_the_fake() {
    let (fake, gh) = world().await;
    fake.add_review_thread(REPO, 1, Some("alex"), "a", Some(1), "x");
    let forged = gh.graphql(THREADS, vars(json!("Y3Vyc29yOnYyOjE="))).await;
    assert_eq!(forged.body["errors"][0]["type"], "INVALID_CURSOR_ARGUMENTS");
    assert_eq!(
        forged.body["data"]["repository"]["pullRequest"],
        Value::Null,
        "a non-null failure nulls its parent"
    );
    assert!(fake.violations()[0].contains("never issued"));
    fake.clear_violations();
    // A cursor of one connection is no good for another.
    let comments = gh.graphql(THREADS, vars(Value::Null)).await;
    let comment_cursor =
        comments.body["data"]["repository"]["pullRequest"]["reviewThreads"]["nodes"][0]["comments"]
            ["pageInfo"]["endCursor"]
            .clone();
    let crossed = gh.graphql(THREADS, vars(comment_cursor)).await;
    assert_eq!(
        crossed.body["errors"][0]["type"],
        "INVALID_CURSOR_ARGUMENTS"
    );
    fake.clear_violations();
    fake.assert_clean();
}

#[tokio::test]
async fn missing_objects_are_null_with_not_found() {
    let (fake, gh) = world().await;
    let answer = gh
        .graphql(
            THREADS,
            json!({"owner": "acme", "name": "gone", "number": 1}),
        )
        .await;
    assert_eq!(answer.body["data"]["repository"], Value::Null);
    assert_eq!(answer.body["data"]["rateLimit"]["cost"], 1);
    assert_eq!(answer.body["errors"][0]["type"], "NOT_FOUND");
    assert_eq!(
        answer.body["errors"][0]["message"],
        "Could not resolve to a Repository with the name 'acme/gone'."
    );
    assert_eq!(answer.body["errors"][0]["path"], json!(["repository"]));
    let pr = gh
        .graphql(
            THREADS,
            json!({"owner": "acme", "name": "app", "number": 9}),
        )
        .await;
    assert_eq!(pr.body["data"]["repository"]["pullRequest"], Value::Null);
    assert_eq!(
        pr.body["errors"][0]["message"],
        "Could not resolve to a PullRequest with the number of 9."
    );
    fake.assert_clean();
}

#[tokio::test]
async fn marking_a_draft_ready_for_review() {
    let (fake, gh) = world().await;
    fake.set_draft(REPO, 1, true);
    let mutation = r#"mutation Ready($id: ID!) { markPullRequestReadyForReview(input: {pullRequestId: $id}) { pullRequest { id isDraft } } }"#;
    let id = fake.pr_node_id(REPO, 1);
    let answer = gh.graphql(mutation, json!({"id": id})).await;
    assert_eq!(
        answer.body,
        json!({"data": {"markPullRequestReadyForReview": {"pullRequest": {"id": id, "isDraft": false}}}})
    );
    assert!(!fake.pr(REPO, 1).draft);
    let rest = gh.get("/repos/acme/app/pulls/1").await;
    assert_eq!(rest.body["draft"], false);

    let unknown = gh.graphql(mutation, json!({"id": "PR_nope"})).await;
    assert_eq!(
        unknown.body["data"]["markPullRequestReadyForReview"],
        Value::Null
    );
    assert_eq!(
        unknown.body["errors"][0]["message"],
        "Could not resolve to a node with the global id of 'PR_nope'."
    );
    let as_query = gh.graphql(r#"{ markPullRequestReadyForReview(input: {pullRequestId: "x"}) { clientMutationId } }"#, json!({})).await;
    assert!(
        as_query.body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("doesn't exist on type 'Query'")
    );
    fake.clear_violations();
    fake.assert_clean();
}

#[tokio::test]
async fn graphql_limits_and_bodies() {
    let (fake, gh) = world().await;
    fake.set_rate_limit(
        Resource::GraphQl,
        RateLimit {
            limit: 5000,
            remaining: 0,
            reset_in: Duration::from_secs(60),
            status: 403,
        },
    );
    let limited = gh.graphql("{ viewer { login } }", json!({})).await;
    assert_eq!(limited.status, 200);
    assert_eq!(limited.body["errors"][0]["type"], "RATE_LIMITED");
    assert_eq!(limited.header("x-ratelimit-remaining"), "0");
    assert_eq!(
        gh.get("/repos/acme/app/pulls/1").await.status,
        200,
        "REST has its own budget"
    );
    fake.set_rate_limit(
        Resource::GraphQl,
        RateLimit {
            limit: 5000,
            remaining: 5000,
            reset_in: Duration::from_secs(60),
            status: 403,
        },
    );
    let viewer = gh.graphql("{ viewer { login } }", json!({})).await;
    assert_eq!(
        viewer.body,
        json!({"data": {"viewer": {"login": "eagle-bot"}}})
    );
    // The version header and the media type are REST matters.
    assert_eq!(
        gh.without("x-github-api-version")
            .with("accept", "application/json")
            .graphql("{ viewer { login } }", json!({}))
            .await
            .status,
        200
    );
    fake.assert_clean();

    let not_json = gh
        .call(reqwest::Method::POST, "/graphql", Some(json!(["query"])))
        .await;
    assert_eq!(not_json.status, 400);
    let no_query = gh.post("/graphql", json!({"variables": {}})).await;
    assert_eq!(
        no_query.body["errors"][0]["message"],
        "A query attribute must be specified and must be a string."
    );
    let anonymous = gh
        .without("authorization")
        .graphql("{ viewer { login } }", json!({}))
        .await;
    assert_eq!(anonymous.status, 401);
    assert_eq!(fake.violations().len(), 3);
    fake.clear_violations();
}
