//! Stories: listing comments and posting one exactly as the description
//! asks, and the exactly-once case of a lost answer.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use super::SOON;
use super::asana::world;
use crate::{AsanaFault as Fault, AsanaRoute as Route};

#[tokio::test]
async fn comments_are_listed_and_posted() {
    let w = world().await;
    let path = format!("/tasks/{}/stories", w.t1);
    w.fake
        .add_comment(&w.t1, &w.alex, "Is this still happening?");
    let listed = w.client.get(&path).await;
    let story = &listed.body["data"][0];
    assert_eq!(story["resource_subtype"], "comment_added");
    assert_eq!(story["resource_type"], "story");
    assert_eq!(story["text"], "Is this still happening?");
    assert_eq!(
        story["created_by"],
        json!({"gid": w.alex, "resource_type": "user", "name": "Alex"})
    );
    assert!(story["created_at"].is_string());
    assert!(story.get("html_text").is_none());

    let before = w.fake.task_modified_at(&w.t1);
    let posted = w
        .client
        .post(
            &path,
            json!({"data": {"text": "[eagle:42:triage] Picked up"}}),
        )
        .await;
    assert_eq!(posted.status, 201);
    let data = &posted.body["data"];
    assert_eq!(
        (data["resource_subtype"].clone(), data["type"].clone()),
        (json!("comment_added"), json!("comment"))
    );
    assert_eq!(data["created_by"]["gid"], w.eagle);
    assert_eq!(data["text"], "[eagle:42:triage] Picked up");
    assert!(data.get("html_text").is_none());
    assert!(
        w.fake.task_modified_at(&w.t1) > before,
        "a comment moves modified_at"
    );

    let rich = w.client.post(&format!("{path}?opt_fields=html_text,text"), json!({"data": {"html_text": "<body>Fixed in <a href=\"https://github.com/acme/app/pull/1\">#1</a> &amp; merged</body>"}})).await;
    assert_eq!(rich.status, 201);
    assert_eq!(rich.body["data"]["text"], "Fixed in #1 & merged");
    assert!(
        rich.body["data"]["html_text"]
            .as_str()
            .unwrap()
            .starts_with("<body>")
    );

    let stories = w.fake.stories(&w.t1);
    assert_eq!(stories.len(), 3);
    assert_eq!(stories[1].created_by.as_deref(), Some(w.eagle.as_str()));
    assert_eq!(
        stories[1].html_text,
        "<body>[eagle:42:triage] Picked up</body>"
    );
    let page = w
        .client
        .get(&format!("{path}?limit=2&opt_fields=text,created_by.name"))
        .await;
    assert_eq!(page.body["data"].as_array().unwrap().len(), 2);
    assert_eq!(
        page.body["data"][1]["created_by"],
        json!({"gid": w.eagle, "name": "Eagle"})
    );
    assert!(page.body["next_page"]["offset"].is_string());
    w.fake.assert_clean();
}

#[tokio::test]
async fn writes_must_follow_the_description() {
    let w = world().await;
    let path = format!("/tasks/{}/stories", w.t1);
    let cases = [
        (json!({"text": "unwrapped"}), "data: Missing input"),
        (
            json!({"data": {"text": "a", "html_text": "<body>a</body>"}}),
            "only specify one",
        ),
        (json!({"data": {}}), "text: Missing input"),
        (
            json!({"data": {"html_text": "<p>no body</p>"}}),
            "html_text",
        ),
        (
            json!({"data": {"html_text": "<body><em>open</body>"}}),
            "html_text",
        ),
        (json!({"data": {"text": 7}}), "Not a string"),
    ];
    for (body, message) in cases {
        let answer = w.client.post(&path, body.clone()).await;
        assert_eq!(answer.status, 400, "{body}");
        assert!(
            answer.body["errors"][0]["message"]
                .as_str()
                .unwrap()
                .contains(message),
            "{body}: {}",
            answer.body
        );
    }
    assert_eq!(w.fake.violations().len(), 6);
    w.fake.clear_violations();
    let raw = w
        .client
        .with("content-type", "application/json")
        .try_call(Method::POST, &path, None, None)
        .await
        .unwrap();
    assert_eq!(raw.status, 400, "an empty body is not JSON");
    w.fake.clear_violations();

    let extra = w
        .client
        .post(
            &path,
            json!({"data": {"text": "hi", "gid": "1", "is_pinned": false}}),
        )
        .await;
    assert_eq!(extra.status, 201, "read-only members are ignored");
    assert!(w.fake.violations()[0].contains("gid"));
    w.fake.clear_violations();
    assert_eq!(
        w.client
            .post("/tasks/404/stories", json!({"data": {"text": "x"}}))
            .await
            .status,
        404
    );
    assert!(w.fake.stories(&w.t1).len() == 1);
    w.fake.assert_clean();
}

#[tokio::test]
async fn a_lost_answer_leaves_the_comment_posted() {
    let w = world().await;
    let path = format!("/tasks/{}/stories", w.t1);
    w.fake.inject(Route::CreateStory, Fault::AcceptThenHang, 1);
    let lost = tokio::spawn({
        let client = w.client.without("x-none");
        let path = path.clone();
        async move {
            client
                .try_call(
                    Method::POST,
                    &path,
                    Some(json!({"data": {"text": "[eagle:1:done]"}})),
                    Some(Duration::from_secs(60)),
                )
                .await
        }
    });
    assert!(
        w.fake
            .wait_until(SOON, |f| f.stories(&w.t1).len() == 1)
            .await
    );
    lost.abort();
    // The client re-reads before posting again and finds its marker.
    let stories = w.client.get(&format!("{path}?limit=100")).await;
    let mine: Vec<&Value> = stories.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| {
            s["created_by"]["gid"] == w.eagle
                && s["text"].as_str().unwrap().contains("[eagle:1:done]")
        })
        .collect();
    assert_eq!(mine.len(), 1);
    assert_eq!(
        w.fake.requests()[0].status,
        0,
        "the POST never got an answer"
    );
    w.fake.inject(Route::CreateStory, Fault::ServerError, 1);
    assert_eq!(
        w.client
            .post(&path, json!({"data": {"text": "x"}}))
            .await
            .status,
        500
    );
    assert_eq!(
        w.fake.stories(&w.t1).len(),
        1,
        "a 500 before the work does nothing"
    );
    w.fake.assert_clean();
}
