//! Every command answered exactly once: across queue gaps and server
//! restarts, while stopped, through a crash, under rate limits and server
//! errors, in a burst, and with two instances running.

use std::time::Duration;

use fake_zulip::{Fault, Route};

use super::{Realm, Running, WAIT};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_posted_during_a_queue_gap_is_answered_once() {
    let realm = Realm::start().await;
    let home = realm.home();
    let eagle = Running::start(&home, "eagle");
    realm.wait_listening(realm.eagle, 1).await;
    realm
        .fake
        .post(realm.alex, "general", "gap", "!queue before the gap");
    realm.wait_replies("general", "gap", |r| r.len() == 1).await;

    realm.fake.expire_queues_of(realm.eagle);
    realm
        .fake
        .post(realm.alex, "general", "gap", "!queue during the gap");
    let replies = realm.wait_replies("general", "gap", |r| r.len() >= 2).await;
    assert_eq!(replies[1].content, "Queued task #2: during the gap");

    // A server restart that loses every queue: same.
    realm.fake.restart(false);
    realm
        .fake
        .post(realm.alex, "general", "gap", "!queue after the restart");
    let replies = realm.wait_replies("general", "gap", |r| r.len() >= 3).await;
    assert_eq!(replies[2].content, "Queued task #3: after the restart");

    // And nothing more: each command exactly once.
    realm.fake.post(realm.alex, "general", "gap", "!status");
    let replies = realm.wait_replies("general", "gap", |r| r.len() >= 4).await;
    assert_eq!(replies.len(), 4, "{replies:#?}");
    assert!(
        replies[3].content.contains("**Open tasks** (3)"),
        "{}",
        replies[3].content
    );
    let (code, log) = eagle.stop();
    assert_eq!(code, Some(0), "{log}");
    assert!(
        log.contains("the event queue expired; registering a new one"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_posted_while_stopped_are_answered_after_start() {
    let realm = Realm::start().await;
    let mut home = realm.home();
    // History from before the very first start is not replayed.
    realm.fake.post(
        realm.alex,
        "general",
        "old",
        "!queue from before Eagle existed",
    );
    let eagle = Running::start(&home, "eagle");
    realm.wait_listening(realm.eagle, 1).await;
    // A command after the start is answered; the old one never is.
    realm.fake.post(realm.alex, "general", "new", "!status");
    realm
        .wait_replies("general", "new", |r| !r.is_empty())
        .await;
    assert!(realm.replies("general", "old").is_empty());
    let (code, log) = eagle.stop();
    assert_eq!(code, Some(0), "{log}");
    assert!(
        realm.fake.queues().is_empty(),
        "the queue was not deleted on shutdown: {log}"
    );

    realm.fake.post(
        realm.alex,
        "general",
        "offline",
        "!queue while you were out",
    );
    let eagle = Running::start(&home, "eagle");
    let replies = realm
        .wait_replies("general", "offline", |r| !r.is_empty())
        .await;
    assert_eq!(replies[0].content, "Queued task #1: while you were out");
    let (code, _) = eagle.stop();
    assert_eq!(code, Some(0));

    // Commands older than late_command_age are reported, not carried out.
    home.set("EAGLE_ZULIP__LATE_COMMAND_AGE", "0s");
    realm
        .fake
        .post(realm.alex, "general", "offline", "!queue stale");
    let eagle = Running::start(&home, "eagle");
    let replies = realm
        .wait_replies("general", "offline", |r| r.len() >= 2)
        .await;
    assert!(
        replies[1].content.starts_with("I saw this message late"),
        "{}",
        replies[1].content
    );
    let (code, _) = eagle.stop();
    assert_eq!(code, Some(0));
    // Read after the stop: nothing else was said (the stale command did not run).
    let replies = realm.replies("general", "offline");
    assert_eq!(replies.len(), 2, "{replies:#?}");
    assert!(realm.replies("general", "old").is_empty());
    realm.fake.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_before_the_reply_is_confirmed_loses_and_doubles_nothing() {
    let realm = Realm::start().await;
    let home = realm.home();

    // 1. The reply reached the server, but its answer never came back.
    let eagle = Running::start(&home, "eagle");
    realm.wait_listening(realm.eagle, 1).await;
    realm
        .fake
        .inject(Route::SendMessage, Fault::AcceptThenHang, 1);
    realm
        .fake
        .post(realm.alex, "general", "crash", "!queue survive a crash");
    realm
        .wait_replies("general", "crash", |r| r.len() == 1)
        .await;
    eagle.kill();
    let eagle = Running::start(&home, "eagle");
    let replies = realm.settle("general", "crash").await;
    assert_eq!(replies.len(), 1, "the reply was posted twice: {replies:#?}");

    // 2. The reply never reached the server.
    realm.fake.inject(Route::SendMessage, Fault::Hang, 1);
    realm
        .fake
        .post(realm.alex, "general", "crash", "!queue and another");
    // The attempt is made, and hangs (status 0: no answer yet).
    let saw_attempt = realm
        .fake
        .wait_until(WAIT, |f| {
            f.requests().iter().any(|r| {
                r.method == "POST"
                    && r.path == "/api/v1/messages"
                    && r.status == 0
                    && r.params
                        .get("content")
                        .is_some_and(|c| c.contains("and another"))
            })
        })
        .await;
    assert!(saw_attempt);
    eagle.kill();
    let eagle = Running::start(&home, "eagle");
    let replies: Vec<_> = realm
        .settle("general", "crash")
        .await
        .into_iter()
        .filter(|m| !m.content.contains("`!queue [--repo NAME] [title]`"))
        .collect();
    assert_eq!(
        replies
            .iter()
            .map(|m| m.content.as_str())
            .collect::<Vec<_>>(),
        [
            "Queued task #1: survive a crash",
            "Queued task #2: and another"
        ],
        "{:#?}\n{}",
        realm.replies("general", "crash"),
        eagle.log()
    );
    let (code, log) = eagle.stop();
    assert_eq!(code, Some(0), "{log}");
    // The killed sender's lease was taken over at once, not waited out.
    assert!(
        log.contains("the previous sender died; taking over its lease"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_and_server_errors_lose_nothing() {
    let realm = Realm::start().await;
    let home = realm.home();
    let eagle = Running::start(&home, "eagle");
    realm.wait_listening(realm.eagle, 1).await;

    realm
        .fake
        .inject(Route::SendMessage, Fault::RateLimit(1.5), 1);
    realm
        .fake
        .post(realm.alex, "general", "limits", "!queue despite a 429");
    let replies = realm
        .wait_replies("general", "limits", |r| !r.is_empty())
        .await;
    assert_eq!(replies[0].content, "Queued task #1: despite a 429");
    let sends: Vec<_> = realm
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path == "/api/v1/messages")
        .collect();
    assert_eq!(sends[0].status, 429);
    assert!(
        sends[1].at.duration_since(sends[0].at) >= Duration::from_millis(1500),
        "Retry-After 1.5 was not honoured: {:?}",
        sends[1].at.duration_since(sends[0].at)
    );

    realm.fake.inject(Route::Events, Fault::Status502Html, 3);
    // The poll in flight answers this one; the next three polls get a 502
    // page each, and only then is the command after them read.
    realm.fake.post(realm.alex, "general", "limits", "!status");
    realm
        .wait_replies("general", "limits", |r| r.len() >= 2)
        .await;
    let served = realm
        .fake
        .wait_until(WAIT, |f| f.count_status(502) >= 3)
        .await;
    assert!(served, "the 502 pages were not served");
    realm
        .fake
        .post(realm.alex, "general", "limits", "!queue after three 502s");
    let replies = realm
        .wait_replies("general", "limits", |r| r.len() >= 3)
        .await;
    assert_eq!(replies[2].content, "Queued task #2: after three 502s");

    realm.fake.inject(Route::Events, Fault::NotJson, 1);
    realm.fake.post(
        realm.alex,
        "general",
        "limits",
        "!queue after a non-JSON answer",
    );
    let replies = realm
        .wait_replies("general", "limits", |r| r.len() >= 4)
        .await;
    assert_eq!(
        replies[3].content,
        "Queued task #3: after a non-JSON answer"
    );
    assert!(realm.fake.count_status(502) >= 3);
    let (code, log) = eagle.stop();
    assert_eq!(code, Some(0), "{log}");
}

async fn burst(limit: &[(Duration, u32)]) {
    let realm = Realm::start().await;
    realm.fake.set_rate_limit(limit);
    let home = realm.home();
    let eagle = Running::start(&home, "eagle");
    realm.wait_listening(realm.eagle, 1).await;
    for i in 1..=30 {
        realm.fake.post(
            realm.alex,
            "general",
            "burst",
            &format!("!queue burst item {i}"),
        );
    }
    let replies = realm
        .wait_replies("general", "burst", |r| r.len() >= 30)
        .await;
    let got: Vec<String> = replies.iter().map(|m| m.content.clone()).collect();
    let want: Vec<String> = (1..=30)
        .map(|i| format!("Queued task #{i}: burst item {i}"))
        .collect();
    assert_eq!(got, want, "answered out of order or more than once");
    assert_eq!(realm.fake.count_status(429), 0, "the pacing hit the limit");
    let (code, log) = eagle.stop();
    assert_eq!(code, Some(0), "{log}");
    assert!(
        log.contains("pacing to the server's rate limit"),
        "the limit never bound"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_is_answered_in_full_under_a_20_per_4s_limit() {
    burst(&[(Duration::from_secs(4), 20)]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_is_answered_in_full_under_a_10_per_2s_limit() {
    burst(&[(Duration::from_secs(2), 10)]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_profiles_run_at_once_and_two_instances_never_both_answer() {
    let realm = Realm::start().await;
    let home = realm.home();
    let eagle_a = Running::start(&home, "eagle");
    let eagle_b = Running::start(&home, "eagle");
    let executor = Running::start(&home, "executor");
    realm.wait_listening(realm.eagle, 2).await;
    realm.wait_listening(realm.executor, 1).await;

    for i in 1..=5 {
        realm
            .fake
            .post(realm.alex, "general", "pair", &format!("!queue pair {i}"));
    }
    let replies = realm
        .wait_replies("general", "pair", |r| r.len() >= 5)
        .await;
    realm.fake.post(realm.alex, "general", "pair", "!status");
    let replies_after = realm
        .wait_replies("general", "pair", |r| r.len() >= 6)
        .await;
    assert_eq!(replies.len(), 5);
    assert_eq!(
        replies_after.len(),
        6,
        "a command was answered twice: {replies_after:#?}"
    );
    // The executor ignores commands, and answers a direct message by pointing to Eagle.
    assert!(realm.fake.messages_from(realm.executor).is_empty());
    realm.fake.post_dm(realm.bob, &[realm.executor], "!status");
    let ok = realm
        .fake
        .wait_until(WAIT, |f| !f.messages_from(realm.executor).is_empty())
        .await;
    assert!(ok);
    let pointer = &realm.fake.messages_from(realm.executor)[0];
    assert!(
        pointer.content.contains("go to Eagle"),
        "{}",
        pointer.content
    );
    assert_eq!(
        pointer
            .dm_recipients
            .iter()
            .filter(|id| **id == realm.bob)
            .count(),
        1
    );

    for running in [eagle_a, eagle_b, executor] {
        let (code, log) = running.stop();
        assert_eq!(code, Some(0), "{log}");
    }
    realm.fake.assert_clean();
}
