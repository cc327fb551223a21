//! The fake Asana's request rules: tokens, error bodies, routes and
//! parameters, `limit`/`offset`, `opt_fields`, rate limits and faults.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use super::asana::world;
use super::{SOON, panics};
use crate::{AsanaFault as Fault, AsanaRoute as Route, FakeAsana};

#[tokio::test]
async fn tokens_and_error_bodies() {
    let w = world().await;
    let me = w.client.get("/users/me").await;
    assert_eq!(me.status, 200);
    assert_eq!(me.body["data"]["gid"], w.eagle);
    assert_eq!(me.body["data"]["resource_type"], "user");
    assert_eq!(me.body["data"]["email"], "eagle@example.com");
    assert_eq!(me.body["data"]["workspaces"].as_array().unwrap().len(), 2);
    let by_gid = w.client.get(&format!("/users/{}", w.alex)).await;
    assert_eq!(by_gid.body["data"]["name"], "Alex");

    let wrong = w
        .client
        .with("authorization", "Bearer 2/1/nope")
        .get("/users/me")
        .await;
    assert_eq!(wrong.status, 401);
    let error = &wrong.body["errors"][0];
    assert_eq!(error["message"], "Not Authorized");
    assert!(
        error["help"]
            .as_str()
            .unwrap()
            .contains("developers.asana.com")
    );
    assert!(error.get("phrase").is_none(), "phrase is only on 500s");
    w.fake.assert_clean();

    let anonymous = w.client.without("authorization").get("/users/me").await;
    assert_eq!(anonymous.status, 401);
    assert!(w.fake.violations()[0].contains("no Authorization"));
    w.fake.clear_violations();
    assert_eq!(w.fake.requests()[0].user.as_deref(), Some(w.eagle.as_str()));

    w.fake.inject(Route::User, Fault::ServerError, 1);
    let broken = w.client.get("/users/me").await;
    assert_eq!(broken.status, 500);
    assert!(broken.body["errors"][0]["phrase"].is_string());
    w.fake.inject(Route::Any, Fault::BadGateway, 1);
    assert_eq!(w.client.get("/users/me").await.status, 502);
    w.fake.assert_clean();
}

#[tokio::test]
async fn unknown_routes_and_parameters() {
    let w = world().await;
    for (method, path) in [
        (Method::GET, "/api/1.0/users/me"),
        (Method::DELETE, "/tasks/1"),
        (Method::GET, "/events"),
    ] {
        let answer = w.client.try_call(method, path, None, None).await.unwrap();
        assert_eq!(answer.status, 404, "{path}");
        assert!(answer.body["errors"][0]["message"].is_string());
    }
    assert_eq!(w.fake.violations().len(), 3);
    w.fake.clear_violations();
    let missing = w.client.get("/tasks/999").await;
    assert_eq!(
        (
            missing.status,
            missing.body["errors"][0]["message"].as_str()
        ),
        (404, Some("Unknown object: 999"))
    );
    w.fake.assert_clean();

    let extra = w
        .client
        .get(&format!("/tasks/{}?colour=blue&opt_pretty=true", w.t1))
        .await;
    assert_eq!(
        extra.status, 200,
        "Asana ignores parameters it does not know"
    );
    assert!(w.fake.violations()[0].contains("colour"));
    w.fake.clear_violations();
    let since = w
        .client
        .get(&format!(
            "/projects/{}/tasks?modified_since=2024-01-01T00:00:00Z",
            w.project
        ))
        .await;
    assert_eq!(since.status, 200);
    assert!(w.fake.violations()[0].contains("modified_since is only taken by GET /tasks"));
    w.fake.clear_violations();
    w.fake.assert_clean();
}

#[tokio::test]
async fn limit_offset_and_next_page() {
    let w = world().await;
    let path = format!("/projects/{}/tasks", w.project);
    let unpaged = w.client.get(&path).await;
    assert_eq!(unpaged.body["data"].as_array().unwrap().len(), 2);
    assert!(
        unpaged.body.get("next_page").is_none(),
        "next_page only when limit was sent"
    );

    let first = w.client.get(&format!("{path}?limit=1")).await;
    assert_eq!(first.body["data"][0]["gid"], w.t1);
    let next = first.body["next_page"].clone();
    let offset = next["offset"].as_str().unwrap().to_owned();
    assert!(
        next["path"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{path}?limit=1&offset="))
    );
    assert_eq!(
        next["uri"].as_str().unwrap(),
        format!("{}{}", w.fake.url(), next["path"].as_str().unwrap())
    );
    let second = w.client.get(next["path"].as_str().unwrap()).await;
    assert_eq!(second.body["data"][0]["gid"], w.t2);
    assert_eq!(
        second.body["next_page"],
        Value::Null,
        "null on the last page"
    );
    w.fake.assert_clean();

    for bad in [
        "limit=0",
        "limit=101",
        "limit=ten",
        "offset=eyJmb3JnZWQiOjF9",
        "limit=1&offset=abc",
    ] {
        let answer = w.client.get(&format!("{path}?{bad}")).await;
        assert_eq!(answer.status, 400, "{bad}");
        assert!(answer.body["errors"][0]["message"].is_string());
    }
    // An offset belongs to the listing that issued it.
    let elsewhere = w
        .client
        .get(&format!(
            "/projects/{}/sections?limit=1&offset={offset}",
            w.project
        ))
        .await;
    assert_eq!(elsewhere.status, 400);
    assert_eq!(w.fake.violations().len(), 6);
    w.fake.clear_violations();
}

#[tokio::test]
async fn opt_fields_choose_what_comes_back() {
    let w = world().await;
    let path = format!("/projects/{}/tasks", w.project);
    let compact = w.client.get(&path).await;
    assert_eq!(
        compact.body["data"][0],
        json!({"gid": w.t1, "resource_type": "task", "name": "Tab preview stuck", "resource_subtype": "default_task",
               "created_by": {"gid": w.alex, "resource_type": "user"}})
    );
    let fields = "name,notes,completed,assignee.name,memberships.project.name,memberships.section.name,tags.name,custom_fields.display_value,custom_fields.name,custom_fields.gid,permalink_url,modified_at,followers,parent";
    let full = w.client.get(&format!("{path}?opt_fields={fields}")).await;
    let t = &full.body["data"][0];
    assert_eq!(t["gid"], w.t1);
    assert_eq!(t["notes"], "Steps: open <two> tabs & hover");
    assert!(t.get("html_notes").is_none(), "html_notes only when named");
    assert!(t.get("resource_type").is_none());
    assert_eq!(t["assignee"], json!({"gid": w.eagle, "name": "Eagle"}));
    assert_eq!(t["memberships"][0]["section"]["name"], "Inbox");
    assert_eq!(
        t["memberships"][0]["project"]["name"],
        "O-L Backlog (Desktop Browsers)"
    );
    assert_eq!(t["tags"][0]["name"], "bug");
    assert_eq!(t["custom_fields"][0]["display_value"], "macOS");
    assert!(t["custom_fields"][0]["gid"].is_string());
    assert_eq!(
        t["followers"][0],
        json!({"gid": w.alex, "resource_type": "user", "name": "Alex"})
    );
    assert!(t["permalink_url"].as_str().unwrap().ends_with(&w.t1));
    assert!(t["modified_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(t["parent"], Value::Null);
    let html = w
        .client
        .get(&format!("/tasks/{}?opt_fields=html_notes", w.t1))
        .await;
    assert_eq!(
        html.body["data"],
        json!({"gid": w.t1, "html_notes": "<body>Steps: open &lt;two&gt; tabs &amp; hover</body>"})
    );
    let sub = w
        .client
        .get(&format!("/tasks/{}?opt_fields=parent.name", w.t3))
        .await;
    assert_eq!(
        sub.body["data"]["parent"],
        json!({"gid": w.t1, "name": "Tab preview stuck"})
    );
    w.fake.assert_clean();

    let unknown = w
        .client
        .get(&format!("{path}?opt_fields=name,colour"))
        .await;
    assert_eq!(unknown.status, 400);
    assert!(
        unknown.body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("colour")
    );
    assert_eq!(w.fake.violations().len(), 1);
    w.fake.clear_violations();
    let unmodelled = w
        .client
        .get(&format!("{path}?opt_fields=name,due_on"))
        .await;
    assert_eq!(unmodelled.status, 200);
    assert!(unmodelled.body["data"][0].get("due_on").is_none());
    assert!(w.fake.violations()[0].contains("does not model"));
    w.fake.clear_violations();
}

#[tokio::test]
async fn rate_limits_answer_429_with_retry_after() {
    let w = world().await;
    w.fake.set_rate_limit(Some(2));
    assert_eq!(w.client.get("/users/me").await.status, 200);
    assert_eq!(w.client.get("/users/me").await.status, 200);
    let limited = w.client.get("/users/me").await;
    assert_eq!(limited.status, 429);
    let wait = limited.number("retry-after");
    assert!((59..=60).contains(&wait), "{wait}");
    assert!(
        limited.body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("too many requests")
    );
    w.fake.set_rate_limit(None);

    w.fake
        .inject(Route::Task, Fault::RateLimit { retry_after: 7 }, 1);
    let injected = w.client.get(&format!("/tasks/{}", w.t1)).await;
    assert_eq!(
        (injected.status, injected.header("retry-after")),
        (429, "7".to_owned())
    );
    assert_eq!(w.client.get(&format!("/tasks/{}", w.t1)).await.status, 200);

    w.fake.inject(Route::Stories, Fault::Hang, 1);
    let hung = w
        .client
        .try_call(
            Method::GET,
            &format!("/tasks/{}/stories", w.t1),
            None,
            Some(Duration::from_millis(300)),
        )
        .await;
    assert!(hung.is_err_and(|e| e.is_timeout()));
    w.fake.assert_clean();
}

#[tokio::test]
async fn the_guard_and_wait_until() {
    let w = world().await;
    let waiter = tokio::spawn({
        let fake = w.fake.clone();
        let task = w.t1.clone();
        async move { fake.wait_until(SOON, |f| f.stories(&task).len() == 1).await }
    });
    w.fake.add_comment(&w.t1, &w.alex, "ping");
    assert!(waiter.await.unwrap());
    w.client.get("/nowhere").await;
    let message = panics(|| w.fake.assert_clean());
    assert!(message.contains("GET /nowhere"), "{message}");
    let fake: FakeAsana = w.fake.clone();
    drop(w);
    assert!(panics(move || drop(fake)).contains("never checked"));
}
