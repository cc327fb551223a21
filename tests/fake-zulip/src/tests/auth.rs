//! Authentication failures and the unauthenticated endpoint.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use reqwest::Method;

use super::{Client, Realm};

#[tokio::test]
async fn auth_failures_answer_like_zulip() {
    let realm = Realm::default().await;
    let zulip = &realm.zulip;

    let missing = Client::anonymous(zulip).get("/users/me", &[]).await;
    assert_eq!(missing.status, 401);
    assert_eq!(missing.code(), "UNAUTHORIZED");
    assert_eq!(missing.msg(), "Missing authorization header for basic auth");
    assert_eq!(missing.header("www-authenticate"), "Basic realm=\"zulip\"");
    assert_eq!(missing.header("content-type"), "application/json");

    let wrong_key = Client::new(zulip, "eagle-bot@example.com", &"x".repeat(32))
        .get("/users/me", &[])
        .await;
    assert_eq!(
        (wrong_key.status, wrong_key.code(), wrong_key.msg()),
        (401, "UNAUTHORIZED", "Invalid API key")
    );
    assert_eq!(
        wrong_key.header("www-authenticate"),
        "Basic realm=\"zulip\""
    );

    let malformed = Client::new(zulip, "eagle-bot@example.com", "short")
        .get("/users/me", &[])
        .await;
    assert_eq!(
        (malformed.status, malformed.msg()),
        (401, "Malformed API key")
    );

    // Alex's key with the bot's email.
    let swapped = Client::new(zulip, "eagle-bot@example.com", &zulip.api_key(realm.alex))
        .get("/users/me", &[])
        .await;
    assert_eq!((swapped.status, swapped.msg()), (401, "Invalid API key"));

    // Emails compare case-insensitively; the key's whitespace is stripped.
    let key = format!(" {} ", zulip.api_key(realm.eagle));
    let ok = Client::new(zulip, "Eagle-Bot@Example.com", &key)
        .get("/users/me", &[])
        .await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert_eq!(ok.body["user_id"], realm.eagle);
    assert_eq!(ok.body["is_bot"], true);
    assert_eq!(ok.body["full_name"], "Eagle");

    let bearer = reqwest::Client::new()
        .get(format!("{}/api/v1/users/me", zulip.url()))
        .header("authorization", "Bearer abc")
        .send()
        .await
        .unwrap();
    assert_eq!(bearer.status().as_u16(), 400);

    let garbled = reqwest::Client::new()
        .get(format!("{}/api/v1/users/me", zulip.url()))
        .header(
            "authorization",
            format!("Basic {}", STANDARD.encode("no-colon-here")),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(garbled.status().as_u16(), 401);
    let body: serde_json::Value = garbled.json().await.unwrap();
    assert_eq!(body["msg"], "Invalid authorization header for basic auth");

    zulip.deactivate(realm.runner);
    let gone = realm.client(realm.runner).get("/users/me", &[]).await;
    assert_eq!(
        (gone.status, gone.code(), gone.msg()),
        (401, "UNAUTHORIZED", "Account is deactivated")
    );

    // Authentication failures are answers, not client bugs.
    zulip.assert_clean();
}

#[tokio::test]
async fn server_settings_needs_no_auth_and_users_show_bots() {
    let realm = Realm::default().await;
    let settings = Client::anonymous(&realm.zulip)
        .get("/server_settings", &[])
        .await;
    assert_eq!(settings.status, 200, "{}", settings.body);
    assert_eq!(settings.body["zulip_version"], "10.2");
    assert_eq!(settings.body["zulip_feature_level"], 372);

    let alex = realm.client(realm.alex);
    let bot = alex.get(&format!("/users/{}", realm.eagle), &[]).await;
    assert_eq!(bot.status, 200, "{}", bot.body);
    assert_eq!(bot.body["user"]["is_bot"], true);
    assert_eq!(bot.body["user"]["bot_type"], 1);
    let human = alex.get("/users/sam@example.com", &[]).await;
    assert_eq!(human.body["user"]["is_bot"], false);
    let nobody = alex.get("/users/9999", &[]).await;
    assert_eq!((nobody.status, nobody.msg()), (400, "No such user"));

    let subs = alex
        .get(
            "/users/me/subscriptions",
            &[("include_subscribers", "true")],
        )
        .await;
    assert_eq!(subs.status, 200, "{}", subs.body);
    let names: Vec<&str> = subs.body["subscriptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["executor", "secret"]);

    let delete = alex.call(Method::DELETE, "/users/me", &[]).await;
    assert_eq!(delete.status, 405);
    assert_eq!(
        realm.zulip.violations().len(),
        1,
        "{:?}",
        realm.zulip.violations()
    );
    realm.zulip.clear_violations();
}
