//! `!merge` and one message per merge decision (issue 29), through the
//! binary: both profiles as `eagle run` processes against the fake Zulip
//! and the strict fake GitHub, with the fake worker. The owner is
//! @-mentioned once per merge to decide, the message names `!merge`;
//! `!merge` merges each run's PR at the head its message named, refuses a
//! head that moved since (naming the new one), and is an approver's only.

use eagle::store::{Request, RunState, Store};
use fake_apis::PrSpec;

use crate::executor::wait_for;
use crate::prloop::{Hub, REPO, SHA1, hub, start, wait_run_post};
use crate::support::{Db, TestDb};
use crate::zulip::{Realm, WAIT};

const SHA2: &str = "2222222222222222222222222222222222222222";

/// A ready PR of run `run`'s branch at `sha`: not a draft, CI green and a
/// writer's approval there.
fn ready_pr(hub: &Hub, run: i64, sha: &str) -> u64 {
    let mut spec = PrSpec::new("executor-bot", &format!("eagle/run-{run}"), sha);
    spec.draft = false;
    let number = hub.fake.open_pr(REPO, spec);
    hub.check(sha, "completed", Some("success"));
    hub.fake
        .add_review(REPO, number, Some("alex"), "APPROVED", "");
    number
}

/// Alex queues a task in its own topic and approves its run (`!go`).
async fn queue_and_go(realm: &Realm, topic: &str, task: i64, title: &str) {
    realm
        .fake
        .post(realm.alex, "general", topic, &format!("!queue {title}"));
    realm
        .wait_replies("general", topic, |r| !r.is_empty())
        .await;
    realm
        .fake
        .post(realm.alex, "general", topic, &format!("!go {task}"));
}

/// Waits for a reply of Eagle in a topic containing `needle`.
async fn reply(realm: &Realm, channel: &str, topic: &str, needle: &str) -> String {
    let replies = realm
        .wait_replies(channel, topic, |r| {
            r.iter().any(|m| m.content.contains(needle))
        })
        .await;
    replies
        .into_iter()
        .map(|m| m.content)
        .find(|c| c.contains(needle))
        .unwrap()
}

async fn merge_requests(store: &Store, run: i64) -> Vec<Request> {
    store
        .requests()
        .requests_of_run(run)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.action == "merge_pr")
        .collect()
}

async fn run_state(store: &Store, id: i64) -> eagle::store::Run {
    let mut tx = store.begin_read().await.unwrap();
    tx.tasks().run(id).await.unwrap().expect("the run exists")
}

/// Waits until every notice is posted and every post delivered: what
/// Eagle had to say has reached the fake Zulip.
async fn all_said(store: &Store) -> bool {
    wait_for(store, || async {
        store
            .controls()
            .unposted_notices(10)
            .await
            .unwrap()
            .is_empty()
            && store.outbox().undelivered_count("eagle").await.unwrap() == 0
            && store.outbox().undelivered_count("executor").await.unwrap() == 0
    })
    .await
}

/// The messages that @-mention Alex, the owner.
fn pings(realm: &Realm) -> Vec<String> {
    realm
        .fake
        .messages()
        .into_iter()
        .filter(|m| m.mentioned_user_ids.contains(&realm.alex))
        .map(|m| m.content)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_green_pr_with_a_workers_merge_request_pings_the_owner_once_naming_merge() {
    let db = TestDb::new(Db::Sqlite).await;
    let realm = Realm::start().await;
    let hub = hub().await;
    let number = ready_pr(&hub, 1, SHA1);
    let (_home, eagle, executor) = start(&realm, &hub, &db, &[]).await;
    let store = db.open().await;

    // CI green, nothing unresolved: the reviewer asks to merge, escalated.
    queue_and_go(
        &realm,
        "tabs",
        1,
        &format!("Ship it mode:prmerge pr:{number}"),
    )
    .await;
    let asked = wait_run_post(&realm, realm.eagle, "[ESCALATED: merge_pr] run:1").await;
    assert!(
        asked.contains(&format!("@**Alex|{}**", realm.alex)),
        "{asked}"
    );
    assert!(asked.contains("`!merge 1`"), "{asked}");
    assert!(asked.contains("at head `1111111`"), "{asked}");

    // `!merge` answers the worker's request: one merge, at that head.
    realm.fake.post(realm.alex, "executor", "run 1", "!merge 1");
    let merged = hub
        .fake
        .wait_until(WAIT, |f| f.pr(REPO, number).merged)
        .await;
    assert!(merged, "{:#?}", merge_requests(&store, 1).await);
    assert_eq!(
        hub.fake.pr(REPO, number).merged_head_sha.as_deref(),
        Some(SHA1)
    );
    // One decision: a worker resumed before it read the approval may ask
    // again, and that repetition is bound to the human's answer, not a
    // second decision.
    let requests: Vec<_> = merge_requests(&store, 1)
        .await
        .into_iter()
        .filter(|r| r.bound_to.is_none())
        .collect();
    assert_eq!(requests.len(), 1, "{requests:#?}");
    assert!(
        requests[0]
            .decided_by
            .as_deref()
            .is_some_and(|by| by.starts_with("human:")),
        "{requests:#?}"
    );
    // The run completes; everything Eagle says reaches chat: one ping.
    let ok = wait_for(&store, || async {
        run_state(&store, 1).await.state == RunState::Complete
    })
    .await;
    assert!(ok, "{:?}", run_state(&store, 1).await);
    assert!(all_said(&store).await);
    let pings = pings(&realm);
    assert_eq!(pings.len(), 1, "{pings:#?}");
    for running in [eagle, executor] {
        let (code, log) = running.stop();
        assert_eq!(code, Some(0), "{log}");
    }
    hub.fake.assert_clean();
    realm.fake.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_of_two_runs_merges_each_at_its_own_head_and_only_for_an_approver() {
    let db = TestDb::new(Db::Sqlite).await;
    let realm = Realm::start().await;
    let hub = hub().await;
    let one = ready_pr(&hub, 1, SHA1);
    let two = ready_pr(&hub, 2, SHA2);
    let (_home, eagle, executor) = start(&realm, &hub, &db, &[]).await;
    let store = db.open().await;

    queue_and_go(&realm, "one", 1, &format!("Fix one mode:pr pr:{one}")).await;
    queue_and_go(&realm, "two", 2, &format!("Fix two mode:pr pr:{two}")).await;
    // Each run completes green: its owner is asked, once, with `!merge`.
    for run in [1, 2] {
        let ok = realm
            .fake
            .wait_until(WAIT, |f| {
                f.messages_from(realm.eagle).iter().any(|m| {
                    m.content
                        .contains(&format!("`!merge {run}` has Eagle merge it"))
                })
            })
            .await;
        assert!(ok, "{:#?}", realm.fake.messages_from(realm.eagle));
    }

    // Bob is no approver: refused, nothing asked of the carrier.
    realm.fake.post(realm.bob, "general", "one", "!merge 1 2");
    reply(&realm, "general", "one", "You may not use `!merge`").await;
    for run in [1, 2] {
        assert!(merge_requests(&store, run).await.is_empty());
    }

    // Alex merges both, each at its own head.
    realm.fake.post(realm.alex, "general", "one", "!merge 1 2");
    let merged = hub
        .fake
        .wait_until(WAIT, |f| f.pr(REPO, one).merged && f.pr(REPO, two).merged)
        .await;
    assert!(merged, "{:#?}", realm.fake.messages_from(realm.eagle));
    assert_eq!(
        hub.fake.pr(REPO, one).merged_head_sha.as_deref(),
        Some(SHA1)
    );
    assert_eq!(
        hub.fake.pr(REPO, two).merged_head_sha.as_deref(),
        Some(SHA2)
    );
    let merges = hub
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "PUT" && r.path.ends_with("/merge"))
        .count();
    assert_eq!(merges, 2);
    for (run, sha) in [(1, SHA1), (2, SHA2)] {
        let requests = merge_requests(&store, run).await;
        assert_eq!(requests.len(), 1, "{requests:#?}");
        assert_eq!(requests[0].bound_sha.as_deref(), Some(sha));
        assert!(requests[0].by_command(), "{requests:#?}");
    }
    assert!(all_said(&store).await);
    let pings = pings(&realm);
    assert_eq!(pings.len(), 2, "one per merge to decide: {pings:#?}");
    for running in [eagle, executor] {
        let (code, log) = running.stop();
        assert_eq!(code, Some(0), "{log}");
    }
    hub.fake.assert_clean();
    realm.fake.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_on_a_moved_head_merges_nothing_and_offers_the_new_head() {
    let db = TestDb::new(Db::Sqlite).await;
    let realm = Realm::start().await;
    let hub = hub().await;
    let number = ready_pr(&hub, 1, SHA1);
    let (_home, eagle, executor) = start(&realm, &hub, &db, &[]).await;
    let store = db.open().await;

    queue_and_go(&realm, "tabs", 1, &format!("Fix it mode:pr pr:{number}")).await;
    let offer = wait_run_post(&realm, realm.eagle, "`!merge 1` has Eagle merge it").await;
    assert!(offer.contains("at `1111111`"), "{offer}");

    // A push after the owner was told: Eagle's PR loop sees the new head.
    hub.fake.push(REPO, number, SHA2);
    let moved = wait_for(&store, || async {
        run_state(&store, 1).await.head_sha.as_deref() == Some(SHA2)
    })
    .await;
    assert!(moved, "{:?}", run_state(&store, 1).await);
    realm.fake.post(realm.alex, "executor", "run 1", "!merge 1");
    let refused = reply(&realm, "executor", "run 1", "since Eagle named it to you").await;
    assert!(
        refused.contains("moved from `1111111` to `2222222`")
            && refused.contains("nothing was merged")
            && refused.contains("`!merge 1` merges it at `2222222`"),
        "{refused}"
    );
    assert!(merge_requests(&store, 1).await.is_empty());
    assert_eq!(
        run_state(&store, 1).await.merge_offered_sha.as_deref(),
        Some(SHA2)
    );
    let merges = |hub: &Hub| {
        hub.fake
            .requests()
            .into_iter()
            .filter(|r| r.method == "PUT" && r.path.ends_with("/merge"))
            .count()
    };
    assert_eq!(merges(&hub), 0, "GitHub was asked to merge nothing");
    assert!(!hub.fake.pr(REPO, number).merged);

    // The head offered now, green there: the same command merges it.
    hub.check(SHA2, "completed", Some("success"));
    hub.fake
        .add_review(REPO, number, Some("alex"), "APPROVED", "");
    realm.fake.post(realm.alex, "executor", "run 1", "!merge 1");
    let merged = hub
        .fake
        .wait_until(WAIT, |f| f.pr(REPO, number).merged)
        .await;
    assert!(merged, "{:#?}", merge_requests(&store, 1).await);
    assert_eq!(
        hub.fake.pr(REPO, number).merged_head_sha.as_deref(),
        Some(SHA2)
    );
    assert_eq!(merges(&hub), 1);
    for running in [eagle, executor] {
        let (code, log) = running.stop();
        assert_eq!(code, Some(0), "{log}");
    }
    hub.fake.assert_clean();
    realm.fake.assert_clean();
}
