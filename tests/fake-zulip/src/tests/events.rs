//! Event queues: registration, delivery, id gaps, long-polls, heartbeats,
//! pruning errors, expiry, garbage collection and restarts.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::Value;

use super::{Realm, SOON};
use crate::FakeConfig;

fn ids(events: &Value) -> Vec<i64> {
    events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_i64().unwrap())
        .collect()
}

#[tokio::test]
async fn register_and_deliver_with_gaps_in_event_ids() {
    let realm = Realm::default().await;
    let eagle = realm.client(realm.eagle);
    let register = eagle
        .post(
            "/register",
            &[
                ("event_types", r#"["message"]"#),
                ("fetch_event_types", r#"["realm"]"#),
            ],
        )
        .await;
    assert_eq!(register.status, 200, "{}", register.body);
    assert_eq!(register.body["max_message_length"], 10000);
    assert_eq!(register.body["max_topic_length"], 60);
    assert_eq!(register.body["event_queue_longpoll_timeout_seconds"], 2);
    assert_eq!(register.body["zulip_feature_level"], 372);
    let queue = register.body["queue_id"].as_str().unwrap().to_owned();

    let mut sent = Vec::new();
    for i in 0..12 {
        sent.push(
            realm
                .zulip
                .post(realm.alex, "executor", "run-42", &format!("message {i}")),
        );
    }
    let polled = eagle.events(&queue, -1, true).await;
    assert_eq!(polled.status, 200, "{}", polled.body);
    assert_eq!(polled.body["queue_id"], queue.as_str());
    let events = &polled.body["events"];
    let got = ids(events);
    assert_eq!(got.len(), 12);
    assert!(got.windows(2).all(|w| w[0] < w[1]), "{got:?}");
    assert!(
        got.windows(2).any(|w| w[1] - w[0] > 1),
        "ids should skip some values: {got:?}"
    );
    let ids_sent: Vec<u64> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["message"]["id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids_sent, sent);
    let first = &events[0];
    assert_eq!(first["type"], "message");
    assert_eq!(first["flags"], serde_json::json!([]));
    assert_eq!(first["message"]["display_recipient"], "executor");
    assert_eq!(first["message"]["subject"], "run-42");
    assert_eq!(first["message"]["content"], "message 0");
    assert_eq!(first["message"]["content_type"], "text/x-markdown");
    assert_eq!(first["message"]["sender_id"], realm.alex);

    // Acknowledging the last id empties the queue.
    let last = *got.last().unwrap();
    let empty = eagle.events(&queue, last, true).await;
    assert_eq!(empty.body["events"], serde_json::json!([]));
    realm.zulip.assert_clean();
}

#[tokio::test]
async fn a_parked_poll_wakes_on_a_message_and_a_newer_poll() {
    let realm = Realm::default().await;
    let eagle = realm.client(realm.eagle);
    let queue = eagle.register(&[]).await;

    let poll = tokio::spawn({
        let eagle = realm.client(realm.eagle);
        let queue = queue.clone();
        async move { eagle.events(&queue, -1, false).await }
    });
    assert!(
        realm
            .zulip
            .wait_until(SOON, |z| z.queues().iter().any(|q| q.parked))
            .await
    );
    let id = realm.zulip.post(realm.sam, "executor", "t", "wake up");
    let answer = poll.await.unwrap();
    assert_eq!(answer.body["events"][0]["message"]["id"], id);

    // A second poll on the same queue finishes the first.
    let last = answer.body["events"][0]["id"].as_i64().unwrap();
    let first = tokio::spawn({
        let eagle = realm.client(realm.eagle);
        let queue = queue.clone();
        async move { eagle.events(&queue, last, false).await }
    });
    assert!(
        realm
            .zulip
            .wait_until(SOON, |z| z.queues().iter().any(|q| q.parked))
            .await
    );
    let second = tokio::spawn({
        let eagle = realm.client(realm.eagle);
        let queue = queue.clone();
        async move { eagle.events(&queue, last, false).await }
    });
    let first = first.await.unwrap();
    assert_eq!(first.status, 200);
    assert_eq!(first.body["events"], serde_json::json!([]));
    realm
        .zulip
        .post(realm.sam, "executor", "t", "for the second");
    let second = second.await.unwrap();
    assert_eq!(
        second.body["events"][0]["message"]["content"],
        "for the second"
    );
    realm.zulip.assert_clean();
}

#[tokio::test]
async fn heartbeat_arrives_after_the_configured_period() {
    let heartbeat = Duration::from_millis(300);
    let realm = Realm::start(FakeConfig {
        heartbeat,
        ..FakeConfig::default()
    })
    .await;
    let eagle = realm.client(realm.eagle);
    // Heartbeats bypass the event_types filter.
    let queue = eagle.register(&[]).await;
    let started = Instant::now();
    let answer = eagle.events(&queue, -1, false).await;
    let waited = started.elapsed();
    assert!(waited >= heartbeat, "answered after {waited:?}");
    assert_eq!(
        answer.body["events"].as_array().unwrap().len(),
        1,
        "{}",
        answer.body
    );
    assert_eq!(answer.body["events"][0]["type"], "heartbeat");
    realm.zulip.assert_clean();
}

#[tokio::test]
async fn pruning_errors_and_foreign_or_expired_queues() {
    let realm = Realm::default().await;
    let eagle = realm.client(realm.eagle);
    let queue = eagle.register(&[]).await;
    for i in 0..6 {
        realm
            .zulip
            .post(realm.alex, "executor", "t", &format!("m{i}"));
    }
    let got = ids(&eagle.events(&queue, -1, true).await.body["events"]);
    // An id between two real ids (there is a gap somewhere).
    let gap = got
        .windows(2)
        .find(|w| w[1] - w[0] > 1)
        .map(|w| w[0] + 1)
        .unwrap();
    let not_in = eagle.events(&queue, gap, true).await;
    assert_eq!((not_in.status, not_in.code()), (400, "BAD_REQUEST"));
    assert_eq!(not_in.msg(), format!("Event {gap} was not in this queue"));
    // The events up to the gap were pruned anyway; an older id is now refused.
    let pruned = eagle.events(&queue, got[0] - 1, true).await;
    assert_eq!(pruned.status, 400);
    assert_eq!(
        pruned.msg(),
        format!(
            "An event newer than {} has already been pruned!",
            got[0] - 1
        )
    );

    let runner = realm.client(realm.runner);
    let foreign = runner.events(&queue, -1, true).await;
    assert_eq!(
        (foreign.status, foreign.code()),
        (400, "BAD_EVENT_QUEUE_ID")
    );
    assert_eq!(foreign.body["queue_id"], queue.as_str());

    realm.zulip.expire_queue(&queue);
    let expired = eagle.events(&queue, -1, true).await;
    assert_eq!(
        (expired.status, expired.code()),
        (400, "BAD_EVENT_QUEUE_ID")
    );
    assert_eq!(expired.msg(), format!("Bad event queue ID: {queue}"));

    // A poll parked when its queue expires gets BAD_EVENT_QUEUE_ID at once.
    let queue = eagle.register(&[]).await;
    let poll = tokio::spawn({
        let eagle = realm.client(realm.eagle);
        let queue = queue.clone();
        async move { eagle.events(&queue, -1, false).await }
    });
    assert!(
        realm
            .zulip
            .wait_until(SOON, |z| z.queues().iter().any(|q| q.parked))
            .await
    );
    realm.zulip.expire_queues_of(realm.eagle);
    assert_eq!(poll.await.unwrap().code(), "BAD_EVENT_QUEUE_ID");

    let queue = eagle.register(&[]).await;
    let deleted = eagle
        .call(Method::DELETE, "/events", &[("queue_id", &queue)])
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.body);
    let again = eagle
        .call(Method::DELETE, "/events", &[("queue_id", &queue)])
        .await;
    assert_eq!(again.code(), "BAD_EVENT_QUEUE_ID");
    realm.zulip.assert_clean();
}

#[tokio::test]
async fn idle_queues_are_collected_but_not_while_a_poll_is_parked() {
    let idle = Duration::from_millis(200);
    let heartbeat = Duration::from_millis(600);
    let realm = Realm::start(FakeConfig {
        idle_queue_timeout: idle,
        heartbeat,
        ..FakeConfig::default()
    })
    .await;
    let eagle = realm.client(realm.eagle);
    let queue = eagle.register(&[]).await;
    // Parked for longer than the idle timeout, the queue survives: the
    // poll ends with a heartbeat, not with BAD_EVENT_QUEUE_ID.
    let answer = eagle.events(&queue, -1, false).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["events"][0]["type"], "heartbeat");
    // Then, with nothing parked, it goes.
    assert!(
        realm
            .zulip
            .wait_until(SOON, |z| z.queues().is_empty())
            .await
    );
    let gone = eagle
        .events(
            &queue,
            answer.body["events"][0]["id"].as_i64().unwrap(),
            true,
        )
        .await;
    assert_eq!(gone.code(), "BAD_EVENT_QUEUE_ID");
    realm.zulip.assert_clean();
}

#[tokio::test]
async fn restart_ends_parked_polls_and_may_keep_queues() {
    let realm = Realm::default().await;
    let eagle = realm.client(realm.eagle);
    let queue = eagle.register(&[]).await;
    let poll = tokio::spawn({
        let eagle = realm.client(realm.eagle);
        let queue = queue.clone();
        async move { eagle.events(&queue, -1, false).await }
    });
    assert!(
        realm
            .zulip
            .wait_until(SOON, |z| z.queues().iter().any(|q| q.parked))
            .await
    );
    realm.zulip.restart(true);
    let answer = poll.await.unwrap();
    assert_eq!(answer.status, 502);
    assert!(answer.body.as_str().unwrap().contains("502 Bad Gateway"));
    assert_eq!(eagle.events(&queue, -1, true).await.status, 200);

    realm.zulip.restart(false);
    assert_eq!(
        eagle.events(&queue, -1, true).await.code(),
        "BAD_EVENT_QUEUE_ID"
    );
    realm.zulip.assert_clean();
}

#[tokio::test]
async fn narrows_filters_and_all_public_streams() {
    let realm = Realm::default().await;
    let eagle = realm.client(realm.eagle);
    let runner = realm.client(realm.runner);
    let narrowed = eagle
        .register(&[("narrow", r#"[["channel","EXECUTOR"],["topic","Run-42"]]"#)])
        .await;
    let everything = runner.register(&[("all_public_streams", "true")]).await;

    realm
        .zulip
        .post(realm.alex, "executor", "run-42", "in the narrow");
    realm
        .zulip
        .post(realm.alex, "executor", "other", "another topic");
    realm
        .zulip
        .post(realm.alex, "lobby", "run-42", "another channel");
    realm
        .zulip
        .post(realm.alex, "secret", "run-42", "a private channel");

    let got = eagle.events(&narrowed, -1, true).await;
    let contents: Vec<&str> = got.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["message"]["content"].as_str().unwrap())
        .collect();
    assert_eq!(contents, ["in the narrow"]);

    let got = runner.events(&everything, -1, true).await;
    let events = got.body["events"].as_array().unwrap();
    let contents: Vec<&str> = events
        .iter()
        .map(|e| e["message"]["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        contents,
        ["in the narrow", "another topic", "another channel"]
    );
    assert!(events.iter().all(|e| e["flags"] == serde_json::json!([])));

    let bad = eagle
        .post("/register", &[("narrow", r#"[["search","x"]]"#)])
        .await;
    assert_eq!(
        (bad.status, bad.msg()),
        (400, "Operator search not supported.")
    );
    realm.zulip.assert_clean();
}

#[tokio::test(start_paused = true)]
async fn zulip_timings_run_instantly_under_paused_time() {
    // Zulip's own periods: a 45 s heartbeat and 10 min idle expiry.
    let config = FakeConfig {
        heartbeat: Duration::from_secs(45),
        idle_queue_timeout: Duration::from_secs(600),
        ..FakeConfig::default()
    };
    let realm = Realm::start(config).await;
    let eagle = realm.client(realm.eagle);
    let queue = eagle.register(&[]).await;
    let started = tokio::time::Instant::now();
    let answer = eagle.events(&queue, -1, false).await;
    assert_eq!(
        answer.body["events"][0]["type"], "heartbeat",
        "{}",
        answer.body
    );
    assert!(started.elapsed() >= Duration::from_secs(45));
    let last = answer.body["events"][0]["id"].as_i64().unwrap();
    assert!(
        realm
            .zulip
            .wait_until(Duration::from_secs(700), |z| z.queues().is_empty())
            .await
    );
    assert!(started.elapsed() >= Duration::from_secs(645));
    let gone = eagle.events(&queue, last, true).await;
    assert_eq!(gone.code(), "BAD_EVENT_QUEUE_ID");
    realm.zulip.assert_clean();
}
