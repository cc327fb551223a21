//! Strictness: unknown routes and parameters, malformed values, and the
//! schema check itself.

use std::time::Duration;

use serde_json::json;

use super::{Client, Realm};
use crate::validate_response;

#[tokio::test]
async fn unknown_routes_and_parameters_are_violations() {
    let realm = Realm::default().await;
    let eagle = realm.client(realm.eagle);
    assert_eq!(eagle.get("/users/me", &[]).await.status, 200);
    realm.zulip.assert_clean();

    let unknown = eagle.get("/no/such/endpoint", &[]).await;
    assert_eq!(
        (unknown.status, unknown.body["result"].as_str()),
        (404, Some("error"))
    );
    assert_eq!(unknown.header("content-type"), "application/json");
    let outside = Client::anonymous(&realm.zulip);
    let answer = reqwest::get(format!("{}/json/users/me", realm.zulip.url()))
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 404);
    drop(outside);
    let violations = realm.zulip.violations();
    assert_eq!(violations.len(), 2, "{violations:?}");
    assert!(
        violations[0].contains("GET /api/v1/no/such/endpoint"),
        "{violations:?}"
    );
    let result =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| realm.zulip.assert_clean()));
    assert!(
        result.is_err(),
        "assert_clean must fail after an unknown route"
    );
    realm.zulip.clear_violations();

    let extra = eagle.get("/users/me", &[("colour", "blue")]).await;
    assert_eq!(extra.status, 200);
    assert_eq!(
        extra.body["ignored_parameters_unsupported"],
        json!(["colour"])
    );
    assert!(realm.zulip.violations()[0].contains("colour"));
    realm.zulip.clear_violations();

    let missing = eagle
        .post(
            "/messages",
            &[("type", "stream"), ("to", "executor"), ("topic", "t")],
        )
        .await;
    assert_eq!(
        (missing.status, missing.code()),
        (400, "REQUEST_VARIABLE_MISSING")
    );
    assert_eq!(missing.msg(), "Missing 'content' argument");
    assert_eq!(missing.body["var_name"], "content");

    let not_json = eagle.post("/register", &[("event_types", "message")]).await;
    assert_eq!(
        (not_json.status, not_json.msg()),
        (400, "event_types is not valid JSON")
    );
    let not_bool = eagle.post("/register", &[("apply_markdown", "True")]).await;
    assert_eq!(not_bool.status, 400);
    let queue = eagle.register(&[]).await;
    let no_last = eagle.get("/events", &[("queue_id", &queue)]).await;
    assert_eq!(no_last.msg(), "Missing 'last_event_id' argument");
    let json_body = reqwest::Client::new()
        .post(format!("{}/api/v1/messages", realm.zulip.url()))
        .basic_auth(
            "eagle-bot@example.com",
            Some(realm.zulip.api_key(realm.eagle)),
        )
        .json(&json!({"type": "stream"}))
        .send()
        .await
        .unwrap();
    assert_eq!(json_body.status().as_u16(), 400);
    assert_eq!(
        realm.zulip.violations().len(),
        6,
        "{:?}",
        realm.zulip.violations()
    );

    realm.zulip.clear_violations();
    let get_with_body = reqwest::Client::new()
        .get(format!("{}/api/v1/messages", realm.zulip.url()))
        .basic_auth(
            "eagle-bot@example.com",
            Some(realm.zulip.api_key(realm.eagle)),
        )
        .form(&[
            ("anchor", "newest"),
            ("num_before", "1"),
            ("num_after", "0"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(get_with_body.status().as_u16(), 400);
    assert!(realm.zulip.violations()[0].contains("a GET with a body"));

    let recorded = realm.zulip.requests();
    let last = recorded.last().unwrap();
    assert_eq!(
        (
            last.method.as_str(),
            last.path.as_str(),
            last.user_id,
            last.status
        ),
        ("GET", "/api/v1/messages", Some(realm.eagle), 400)
    );
    assert_eq!(recorded[0].params.len(), 0);
    realm.zulip.clear_violations();
}

#[test]
fn validate_response_accepts_good_and_rejects_bad_bodies() {
    let good = json!({
        "result": "success", "msg": "", "user_id": 9, "email": "eagle-bot@example.com",
        "delivery_email": "eagle-bot@example.com", "full_name": "Eagle", "is_bot": true,
        "is_admin": false, "is_owner": false, "is_guest": false, "is_active": true, "role": 400,
        "timezone": "", "date_joined": "2024-06-01T12:00:00+00:00",
        "avatar_url": "https://secure.gravatar.com/avatar/0?d=identicon&version=1",
        "avatar_version": 1, "profile_data": {}, "max_message_id": -1,
    });
    assert_eq!(validate_response("get", "/users/me", 200, &good), Ok(()));

    let mut wrong_type = good.clone();
    wrong_type["user_id"] = json!("9");
    let error = validate_response("get", "/users/me", 200, &wrong_type).unwrap_err();
    assert!(error.contains("user_id"), "{error}");

    let mut extra = good.clone();
    extra["bot_flavour"] = json!("vanilla");
    let error = validate_response("get", "/users/me", 200, &extra).unwrap_err();
    assert!(error.contains("bot_flavour"), "{error}");

    let mut null_avatar = good.clone();
    null_avatar["avatar_url"] = json!(null);
    assert!(validate_response("get", "/users/me", 200, &null_avatar).is_err());

    // POST /messages requires `id`.
    assert!(
        validate_response(
            "post",
            "/messages",
            200,
            &json!({"result": "success", "msg": ""})
        )
        .is_err()
    );
    assert_eq!(
        validate_response(
            "post",
            "/messages",
            200,
            &json!({"result": "success", "msg": "", "id": 4})
        ),
        Ok(())
    );
    // 4xx bodies are not checked, as in Zulip.
    assert_eq!(
        validate_response("get", "/users/me", 400, &json!({"anything": 1})),
        Ok(())
    );
}

#[tokio::test]
async fn wait_until_times_out_when_nothing_happens() {
    let realm = Realm::default().await;
    let alex = realm.alex;
    assert!(
        !realm
            .zulip
            .wait_until(Duration::from_millis(50), |z| !z
                .messages_from(alex)
                .is_empty())
            .await
    );
    let zulip = realm.zulip.clone();
    let poster = tokio::spawn(async move { zulip.post(alex, "executor", "t", "hi") });
    assert!(
        realm
            .zulip
            .wait_until(super::SOON, |z| !z.messages_from(alex).is_empty())
            .await
    );
    poster.await.unwrap();
}

#[tokio::test]
async fn a_violation_nobody_checked_fails_the_test_when_the_fake_goes() {
    let realm = Realm::default().await;
    let eagle = realm.client(realm.eagle);
    assert_eq!(eagle.get("/no/such/endpoint", &[]).await.status, 404);
    let Realm { zulip, .. } = realm;
    let copy = zulip.clone();
    drop(zulip);
    // The last handle goes here: the unchecked violation is reported.
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(copy)));
    let message = dropped.expect_err("dropping an unchecked fake must fail");
    let text = message
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(text.contains("never checked"), "{text}");
    assert!(text.contains("/no/such/endpoint"), "{text}");
}
