//! Rate limits and injected faults.

use std::time::Duration;

use super::{Realm, SOON};
use crate::{Fault, Route};

#[tokio::test]
async fn rate_limit_headers_and_429_with_a_float_retry_after() {
    let realm = Realm::default().await;
    let eagle = realm.client(realm.eagle);
    let plain = eagle.get("/users/me", &[]).await;
    assert_eq!(
        plain.header("x-ratelimit-limit"),
        "",
        "limits are off by default"
    );

    realm.zulip.set_rate_limit(&[(Duration::from_secs(60), 3)]);
    let first = eagle.get("/users/me", &[]).await;
    assert_eq!(first.header("x-ratelimit-limit"), "3");
    assert_eq!(first.header("x-ratelimit-remaining"), "2");
    let reset: u64 = first.header("x-ratelimit-reset").parse().unwrap();
    let now = crate::state::unix_now() as u64;
    assert!(
        reset >= now + 59 && reset <= now + 61,
        "reset {reset}, now {now}"
    );
    eagle.get("/users/me", &[]).await;
    let last = eagle.get("/users/me", &[]).await;
    assert_eq!(last.header("x-ratelimit-remaining"), "0");

    let limited = eagle.get("/users/me", &[]).await;
    assert_eq!((limited.status, limited.code()), (429, "RATE_LIMIT_HIT"));
    assert_eq!(limited.msg(), "API usage exceeded rate limit");
    let header: f64 = limited.header("retry-after").parse().unwrap();
    assert!(
        limited.header("retry-after").contains('.'),
        "{}",
        limited.header("retry-after")
    );
    let body = limited.body["retry-after"].as_f64().unwrap();
    assert!(header > 50.0 && header <= 60.0, "{header}");
    assert!((body - header).abs() < 1e-6);
    assert_eq!(limited.header("x-ratelimit-remaining"), "0");

    // GET /events has its own bucket; other users have their own counts.
    let queue = realm.client(realm.alex).register(&[]).await;
    assert_eq!(
        realm
            .client(realm.alex)
            .events(&queue, -1, true)
            .await
            .status,
        200
    );
    assert_eq!(realm.zulip.count_status(429), 1);

    // An injected 429 carries the given seconds.
    realm.zulip.inject(Route::UsersMe, Fault::RateLimit(1.5), 1);
    let injected = realm.client(realm.sam).get("/users/me", &[]).await;
    assert_eq!(
        (injected.status, injected.header("retry-after")),
        (429, "1.5".to_owned())
    );
    assert_eq!(injected.body["retry-after"], 1.5);
    realm.zulip.assert_clean();
}

#[tokio::test]
async fn injected_transport_faults() {
    let realm = Realm::default().await;
    let eagle = realm.client(realm.eagle);

    realm
        .zulip
        .inject(Route::SendMessage, Fault::Status502Html, 2);
    let params = [
        ("type", "stream"),
        ("to", "executor"),
        ("topic", "t"),
        ("content", "hello"),
    ];
    for _ in 0..2 {
        let answer = eagle.post("/messages", &params).await;
        assert_eq!(answer.status, 502);
        assert!(answer.header("content-type").starts_with("text/html"));
        assert!(answer.body.as_str().unwrap().contains("502 Bad Gateway"));
    }
    assert!(realm.zulip.messages().is_empty());
    assert_eq!(eagle.post("/messages", &params).await.status, 200);
    assert_eq!(realm.zulip.count_status(502), 2);

    realm.zulip.inject(Route::Any, Fault::NotJson, 1);
    let not_json = eagle.get("/users/me", &[]).await;
    assert_eq!(not_json.status, 200);
    assert!(not_json.body.is_string());

    realm.zulip.inject(Route::Register, Fault::Status503, 1);
    assert_eq!(eagle.post("/register", &[]).await.status, 503);

    // Hang: nothing happens and the client times out.
    realm.zulip.inject(Route::SendMessage, Fault::Hang, 1);
    let hung = eagle
        .call_with(
            reqwest::Method::POST,
            "/messages",
            &params,
            Some(Duration::from_millis(300)),
        )
        .await;
    assert!(hung.is_err_and(|e| e.is_timeout()));
    assert_eq!(realm.zulip.messages().len(), 1);

    // AcceptThenHang: the message is stored and delivered, but no answer.
    realm
        .zulip
        .inject(Route::SendMessage, Fault::AcceptThenHang, 1);
    let accepted = tokio::spawn({
        let eagle = realm.client(realm.eagle);
        async move {
            let params = [
                ("type", "stream"),
                ("to", "executor"),
                ("topic", "t"),
                ("content", "hello"),
            ];
            eagle
                .call_with(
                    reqwest::Method::POST,
                    "/messages",
                    &params,
                    Some(Duration::from_secs(60)),
                )
                .await
        }
    });
    assert!(
        realm
            .zulip
            .wait_until(SOON, |z| z.messages().len() == 2)
            .await
    );
    accepted.abort();
    let statuses: Vec<u16> = realm.zulip.requests().iter().map(|r| r.status).collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 0).count(),
        2,
        "{statuses:?}"
    );
    realm.zulip.assert_clean();
}
