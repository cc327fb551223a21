//! Pull requests over REST: reading one (mergeable after a push), merging
//! it (bound to the head sha), labels, conversation comments, reviews and
//! review comments.

use serde_json::{Value, json};

use super::github::{REPO, SHA, SHA2, world};
use crate::{PrSpec, RepoSpec};

const PR: &str = "/repos/acme/app/pulls/1";
const MERGE: &str = "/repos/acme/app/pulls/1/merge";

#[tokio::test]
async fn a_pull_request_has_the_fields_eagle_reads() {
    let (fake, gh) = world().await;
    let pr = gh.get(PR).await;
    assert_eq!(pr.status, 200);
    let b = &pr.body;
    assert_eq!(b["number"], 1);
    assert_eq!(b["state"], "open");
    assert_eq!(b["draft"], false);
    assert_eq!(b["merged"], false);
    assert_eq!(b["mergeable"], true);
    assert_eq!(b["mergeable_state"], "clean");
    assert_eq!(b["head"]["sha"], SHA);
    assert_eq!(b["head"]["ref"], "fix/a");
    assert_eq!(b["base"]["ref"], "main");
    assert_eq!(b["user"]["login"], "eagle-bot");
    assert_eq!(b["html_url"], "https://github.com/acme/app/pull/1");
    assert_eq!(b["node_id"], fake.pr_node_id(REPO, 1));
    assert_eq!(b["labels"], json!([]));
    assert!(
        b["merge_commit_sha"]
            .as_str()
            .is_some_and(|s| s.len() == 40),
        "a test merge commit exists"
    );
    assert_eq!(pr.header("content-type"), "application/json; charset=utf-8");
    fake.assert_clean();
}

#[tokio::test]
async fn mergeable_is_null_for_a_few_reads_after_a_push() {
    let (fake, gh) = world().await;
    fake.set_mergeable_null_reads(2);
    fake.push(REPO, 1, SHA2);
    let mut seen = Vec::new();
    for _ in 0..3 {
        let pr = gh.get(PR).await;
        seen.push((
            pr.body["mergeable"].clone(),
            pr.body["mergeable_state"].clone(),
            pr.body["merge_commit_sha"].is_null(),
        ));
        assert_eq!(pr.body["head"]["sha"], SHA2);
    }
    assert_eq!(
        seen,
        [
            (Value::Null, json!("unknown"), true),
            (Value::Null, json!("unknown"), true),
            (json!(true), json!("clean"), false),
        ]
    );
    fake.set_mergeable(REPO, 1, Some(false));
    let conflicting = gh.get(PR).await;
    assert_eq!(
        (
            conflicting.body["mergeable"].clone(),
            conflicting.body["mergeable_state"].clone()
        ),
        (json!(false), json!("dirty"))
    );
    fake.set_mergeable(REPO, 1, None);
    assert_eq!(
        gh.get(PR).await.body["mergeable"],
        Value::Null,
        "None keeps it unknown"
    );

    let draft = fake.open_pr(REPO, PrSpec::new("eagle-bot", "fix/b", SHA).draft());
    let body = gh.get(&format!("/repos/acme/app/pulls/{draft}")).await.body;
    assert_eq!(
        (body["draft"].clone(), body["mergeable_state"].clone()),
        (json!(true), json!("draft"))
    );
    fake.assert_clean();
}

#[tokio::test]
async fn merging_is_bound_to_the_head_and_refused_as_github_refuses() {
    let (fake, gh) = world().await;
    type Case<'a> = (Box<dyn Fn() + 'a>, Value, u16, &'static str);
    let cases: Vec<Case<'_>> = vec![
        (
            Box::new(|| fake.set_draft(REPO, 1, true)),
            json!({"sha": SHA, "merge_method": "squash"}),
            405,
            "Pull Request is still a draft",
        ),
        (
            Box::new(|| fake.set_draft(REPO, 1, false)),
            json!({"sha": SHA2, "merge_method": "squash"}),
            409,
            "Head branch was modified. Review and try the merge again.",
        ),
        (
            Box::new(|| fake.set_mergeable(REPO, 1, Some(false))),
            json!({"sha": SHA, "merge_method": "squash"}),
            405,
            "Pull Request is not mergeable",
        ),
        (
            Box::new(|| fake.set_mergeable(REPO, 1, None)),
            json!({"sha": SHA, "merge_method": "squash"}),
            405,
            "Pull Request is not mergeable",
        ),
    ];
    for (setup, body, status, message) in cases {
        setup();
        let answer = gh.put(MERGE, body).await;
        assert_eq!(
            (answer.status, answer.body["message"].as_str()),
            (status, Some(message))
        );
        assert!(
            answer.body["documentation_url"]
                .as_str()
                .unwrap()
                .contains("merge-a-pull-request")
        );
    }
    assert_eq!(gh.get(MERGE).await.status, 404, "not merged yet");
    fake.set_mergeable(REPO, 1, Some(true));
    let merged = gh
        .put(MERGE, json!({"sha": SHA, "merge_method": "squash", "commit_title": "Fix a (#1)", "commit_message": ""}))
        .await;
    assert_eq!(merged.status, 200);
    assert_eq!(merged.body["merged"], true);
    assert_eq!(merged.body["message"], "Pull Request successfully merged");
    let merge_sha = merged.body["sha"].as_str().unwrap().to_owned();
    let snapshot = fake.pr(REPO, 1);
    assert!(snapshot.merged);
    assert_eq!(snapshot.state, "closed");
    assert_eq!(snapshot.merged_head_sha.as_deref(), Some(SHA));
    assert_eq!(
        snapshot.merge_commit_sha.as_deref(),
        Some(merge_sha.as_str())
    );
    assert_eq!(snapshot.merge_method.as_deref(), Some("squash"));
    assert_eq!(snapshot.merge_commit_title.as_deref(), Some("Fix a (#1)"));
    assert_eq!(gh.get(MERGE).await.status, 204);
    let after = gh.get(PR).await.body;
    assert_eq!(
        (
            after["merged"].clone(),
            after["state"].clone(),
            after["merge_commit_sha"].clone()
        ),
        (json!(true), json!("closed"), json!(merge_sha))
    );
    assert_eq!(after["merged_by"]["login"], "eagle-bot");

    let twice = gh
        .put(MERGE, json!({"sha": SHA, "merge_method": "squash"}))
        .await;
    assert_eq!(
        (twice.status, twice.body["message"].as_str()),
        (405, Some("Pull Request is not mergeable"))
    );
    fake.assert_clean();
}

#[tokio::test]
async fn merge_methods_the_repository_disallows_and_merges_without_a_sha() {
    let (fake, gh) = world().await;
    fake.add_repo(
        "acme/strict",
        RepoSpec {
            allow_merge_commit: false,
            allow_rebase_merge: false,
            ..RepoSpec::default()
        },
    );
    fake.set_mergeable_null_reads(0);
    fake.open_pr("acme/strict", PrSpec::new("eagle-bot", "fix/s", SHA));
    let path = "/repos/acme/strict/pulls/1/merge";
    for (method, message) in [
        (None, "Merge commits are not allowed on this repository."),
        (
            Some("merge"),
            "Merge commits are not allowed on this repository.",
        ),
        (
            Some("rebase"),
            "Rebase merges are not allowed on this repository.",
        ),
    ] {
        let mut body = json!({"sha": SHA});
        if let Some(m) = method {
            body["merge_method"] = json!(m);
        }
        let answer = gh.put(path, body).await;
        assert_eq!(
            (answer.status, answer.body["message"].as_str()),
            (405, Some(message)),
            "{method:?}"
        );
    }
    let bad = gh
        .put(path, json!({"sha": SHA, "merge_method": "octopus"}))
        .await;
    assert_eq!(
        (bad.status, bad.body["message"].as_str()),
        (422, Some("Validation Failed"))
    );
    assert_eq!(fake.violations().len(), 1);
    fake.clear_violations();

    // A merge that does not bind the sha is a violation, though GitHub merges.
    let unbound = gh.put(path, json!({"merge_method": "squash"})).await;
    assert_eq!(unbound.status, 200);
    let violations = fake.violations();
    assert!(violations[0].contains("without `sha`"), "{violations:?}");
    fake.clear_violations();

    let not_json = gh
        .call(reqwest::Method::PUT, MERGE, Some(json!("merge please")))
        .await;
    assert_eq!(not_json.status, 400);
    fake.clear_violations();
    fake.assert_clean();
}

#[tokio::test]
async fn labels_are_added_and_all_returned() {
    let (fake, gh) = world().await;
    let path = "/repos/acme/app/issues/1/labels";
    let first = gh.post(path, json!({"labels": ["eagle", "ready"]})).await;
    assert_eq!(first.status, 200);
    let second = gh
        .post(path, json!({"labels": [{"name": "Ready"}, {"name": "ci"}]}))
        .await;
    let names: Vec<&str> = second
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["eagle", "ready", "ci"],
        "names compare case-insensitively"
    );
    assert!(second.body[0]["id"].is_u64() && second.body[0]["color"].is_string());
    assert_eq!(fake.pr(REPO, 1).labels, ["eagle", "ready", "ci"]);
    let pr = gh.get(PR).await;
    assert_eq!(pr.body["labels"][2]["name"], "ci");

    for bad in [json!({"labels": []}), json!({}), json!({"labels": "eagle"})] {
        let answer = gh.post(path, bad.clone()).await;
        assert_eq!(
            (answer.status, answer.body["message"].as_str()),
            (422, Some("Validation Failed")),
            "{bad}"
        );
    }
    assert_eq!(fake.violations().len(), 3);
    fake.clear_violations();
    assert_eq!(
        gh.post("/repos/acme/app/issues/7/labels", json!({"labels": ["x"]}))
            .await
            .status,
        404
    );
    fake.assert_clean();
}

#[tokio::test]
async fn conversation_comments_are_created_and_listed_in_pages() {
    let (fake, gh) = world().await;
    let path = "/repos/acme/app/issues/1/comments";
    let created = gh
        .post(path, json!({"body": "[eagle:run-1] CI is green"}))
        .await;
    assert_eq!(created.status, 201);
    let c = &created.body;
    assert!(c["id"].is_u64());
    assert_eq!(c["user"]["login"], "eagle-bot");
    assert_eq!(c["body"], "[eagle:run-1] CI is green");
    assert!(
        c["html_url"]
            .as_str()
            .unwrap()
            .starts_with("https://github.com/acme/app/pull/1#issuecomment-")
    );
    assert!(c["created_at"].as_str().unwrap().ends_with('Z'));
    assert!(
        created
            .header("location")
            .ends_with(&format!("/issues/comments/{}", c["id"]))
    );
    let stored = fake.issue_comments(REPO, 1);
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].login.as_deref(), Some("eagle-bot"));

    fake.add_issue_comment(REPO, 1, Some("alex"), "looks good");
    fake.add_issue_comment(REPO, 1, None, "from a deleted account");
    let single = gh.get(path).await;
    assert_eq!(single.body.as_array().unwrap().len(), 3);
    assert_eq!(single.header("link"), "", "one page, no link header");
    assert_eq!(single.body[2]["user"], Value::Null);

    let page1 = gh.get(&format!("{path}?per_page=2")).await;
    assert_eq!(page1.body.as_array().unwrap().len(), 2);
    let link = page1.header("link");
    assert!(
        link.contains("rel=\"next\"") && link.contains("rel=\"last\""),
        "{link}"
    );
    let next = link
        .split(';')
        .next()
        .unwrap()
        .trim_matches(|c| c == '<' || c == '>');
    let next_path = next.strip_prefix(&fake.url()).unwrap();
    let page2 = gh.get(next_path).await;
    assert_eq!(page2.body.as_array().unwrap().len(), 1);
    assert!(page2.header("link").contains("rel=\"prev\""));

    let since = stored[0].created_at.clone();
    let later = gh.get(&format!("{path}?since={since}")).await;
    assert!(!later.body.as_array().unwrap().is_empty());
    let future = gh.get(&format!("{path}?since=2999-01-01T00:00:00Z")).await;
    assert_eq!(future.body, json!([]));
    let bad_since = gh.get(&format!("{path}?since=yesterday")).await;
    assert_eq!(bad_since.status, 422);
    fake.clear_violations();

    let empty = gh.post(path, json!({"body": ""})).await;
    assert_eq!(empty.status, 422);
    assert_eq!(fake.violations().len(), 1);
    fake.clear_violations();
    fake.assert_clean();
}

#[tokio::test]
async fn reviews_and_review_comments() {
    let (fake, gh) = world().await;
    fake.add_review(REPO, 1, Some("alex"), "CHANGES_REQUESTED", "see comments");
    fake.add_review(REPO, 1, Some("sam"), "PENDING", "");
    let thread =
        fake.add_review_thread(REPO, 1, Some("alex"), "src/tab.rs", Some(12), "off by one?");
    let reply = fake.reply_to_thread(REPO, &thread, Some("eagle-bot"), "[ACKNOWLEDGED: fixed]");
    fake.resolve_thread(REPO, &thread, true);

    let reviews = gh.get("/repos/acme/app/pulls/1/reviews").await;
    assert_eq!(reviews.status, 200);
    let r = reviews.body.as_array().unwrap();
    assert_eq!(r.len(), 2);
    assert_eq!(
        (r[0]["user"]["login"].clone(), r[0]["state"].clone()),
        (json!("alex"), json!("CHANGES_REQUESTED"))
    );
    assert_eq!(r[0]["commit_id"], SHA);
    assert!(r[0]["submitted_at"].is_string());
    assert!(
        r[1].get("submitted_at").is_none(),
        "a pending review has no submitted_at"
    );

    let comments = gh.get("/repos/acme/app/pulls/1/comments").await;
    let c = comments.body.as_array().unwrap();
    assert_eq!(c.len(), 2);
    assert_eq!(
        (c[0]["path"].clone(), c[0]["line"].clone()),
        (json!("src/tab.rs"), json!(12))
    );
    assert_eq!(c[1]["in_reply_to_id"], c[0]["id"]);
    assert_eq!(c[1]["id"], reply);
    assert!(
        c.iter()
            .all(|x| x.get("resolved").is_none() && x.get("isResolved").is_none()),
        "REST has no resolved flag"
    );
    let sorted = gh
        .get("/repos/acme/app/pulls/1/comments?sort=created&direction=desc")
        .await;
    assert_eq!(sorted.body[0]["id"], reply);
    let bad = gh.get("/repos/acme/app/pulls/1/comments?sort=size").await;
    assert_eq!(bad.status, 422);
    fake.clear_violations();
    fake.assert_clean();
}
