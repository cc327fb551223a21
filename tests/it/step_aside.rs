//! Escalations that step aside (issue 29), through the binary: both
//! profiles as `eagle run` processes against the fake Zulip, with the fake
//! worker. When a worker asks again for the same effect while a human
//! decides, Eagle edits its earlier escalation to say it no longer applies
//! and to name the new one; only the new one @-mentions the owner; an
//! `!approve` of the stale request names the current one and approves
//! nothing; a push that moves the head edits a merge escalation of the
//! old head. On both backends, an edit of a post known by its outbox entry
//! waits for that post and is sent to the message the server gave it.

use eagle::store::{Destination, NewOutboxItem, OutboxKind, Request, RequestStatus, Store};
use fake_apis::PrSpec;

use crate::executor::wait_for;
use crate::prloop::{REPO, SHA1, hub, start, wait_run_post};
use crate::support::{Db, TestDb};
use crate::zulip::{Realm, WAIT};

const SHA2: &str = "2222222222222222222222222222222222222222";

async fn requests(store: &Store, run: i64) -> Vec<Request> {
    store.requests().requests_of_run(run).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_asked_again_edits_the_first_escalation_and_a_stale_approve_names_the_new_one() {
    let db = TestDb::new(Db::Sqlite).await;
    let realm = Realm::start().await;
    let hub = hub().await;
    let (_home, eagle, executor) = start(&realm, &hub, &db, &[]).await;
    let store = db.open().await;

    realm
        .fake
        .post(realm.alex, "general", "tabs", "!queue Ship it mode:twice");
    realm
        .wait_replies("general", "tabs", |r| !r.is_empty())
        .await;
    realm.fake.post(realm.alex, "general", "tabs", "!go 1");

    // The worker asks, then asks again for the same merge in other words.
    let second = wait_run_post(&realm, realm.eagle, "[ESCALATED: merge_pr] run:1 req:2").await;
    let mention = format!("@**Alex|{}**", realm.alex);
    assert_eq!(second.matches(&mention).count(), 1, "{second}");
    assert!(second.contains("`!approve 1 2`"), "{second}");
    let asked = requests(&store, 1).await;
    assert_eq!(asked.len(), 2, "{asked:#?}");
    assert_eq!(asked[0].status, RequestStatus::Expired, "{asked:#?}");
    assert_eq!(asked[1].status, RequestStatus::Escalated, "{asked:#?}");

    // The first escalation was edited: it no longer applies, names the new
    // one, and pings nobody.
    let first_id = realm
        .fake
        .messages_in("executor", "run 1")
        .into_iter()
        .find(|m| m.sender_id == realm.eagle && m.content.contains("run:1 req:1"))
        .map(|m| m.id)
        .expect("the first escalation was posted");
    let edited = realm
        .fake
        .wait_until(WAIT, |f| {
            f.messages()
                .iter()
                .any(|m| m.id == first_id && m.content.contains("no longer applies"))
        })
        .await;
    let first = realm
        .fake
        .messages()
        .into_iter()
        .find(|m| m.id == first_id)
        .unwrap();
    assert!(edited, "{}", first.content);
    assert!(
        first.content.contains("req 2") && first.content.contains("`!approve 1 2` answers it"),
        "{}",
        first.content
    );
    assert!(!first.content.contains(&mention), "{}", first.content);
    assert!(!first.mentioned_user_ids.contains(&realm.alex), "{first:?}");
    let patches: Vec<_> = realm
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "PATCH" && r.path == format!("/api/v1/messages/{first_id}"))
        .collect();
    assert_eq!(patches.len(), 1, "one edit: {patches:#?}");

    // Approving the stale request approves nothing and names the current one.
    realm
        .fake
        .post(realm.alex, "executor", "run 1", "!approve 1 1");
    let answered = realm
        .wait_replies("executor", "run 1", |r| {
            r.iter().any(|m| m.content.contains("Request 1 of run 1"))
        })
        .await;
    let answer = answered
        .iter()
        .find(|m| m.content.contains("Request 1 of run 1"))
        .map(|m| m.content.clone())
        .unwrap();
    assert!(
        answer.contains("no longer applies") && answer.contains("`!approve 1 2`"),
        "{answer}"
    );
    let after = requests(&store, 1).await;
    assert_eq!(after[0].status, RequestStatus::Expired, "{after:#?}");
    assert_eq!(after[1].status, RequestStatus::Escalated, "{after:#?}");

    // The current one is answered as usual.
    realm
        .fake
        .post(realm.alex, "executor", "run 1", "!approve 1 2");
    let approved = wait_for(&store, || async {
        requests(&store, 1).await[1].status == RequestStatus::Approved
    })
    .await;
    assert!(approved, "{:#?}", requests(&store, 1).await);
    for running in [eagle, executor] {
        let (code, log) = running.stop();
        assert_eq!(code, Some(0), "{log}");
    }
    realm.fake.assert_clean();
}

/// An edit of a post not yet delivered waits behind it, then targets the
/// server's id of that post, from the post's identity.
async fn an_edit_of_an_outbox_entry_waits_for_it_and_targets_its_message(db: Db) {
    let db = TestDb::new(db).await;
    let store = db.open().await;
    let mut tx = store.begin_write().await.unwrap();
    let post = tx
        .outbox()
        .enqueue(&NewOutboxItem {
            identity: "eagle".into(),
            kind: OutboxKind::Message {
                to: Destination::Channel {
                    channel: "executor".into(),
                    topic: "run 1".into(),
                },
                content: "[ESCALATED: merge_pr] run:1 req:1".into(),
            },
            in_reply_to: None,
        })
        .await
        .unwrap();
    let edit = tx
        .outbox()
        .enqueue_edit_of(post, "no longer applies")
        .await
        .unwrap()
        .expect("the post exists");
    assert_eq!(
        tx.outbox().enqueue_edit_of(post + 100, "x").await.unwrap(),
        None
    );
    tx.commit().await.unwrap();

    // Only the post is due: the edit waits for its message id.
    let due = store.outbox().due_outbox("eagle", 10).await.unwrap();
    assert_eq!(
        due.iter().map(|i| i.id).collect::<Vec<_>>(),
        [post],
        "{due:#?}"
    );
    assert!(
        store
            .outbox()
            .due_outbox("executor", 10)
            .await
            .unwrap()
            .is_empty()
    );

    store
        .outbox()
        .outbox_delivered(post, Some(4242))
        .await
        .unwrap();
    let due = store.outbox().due_outbox("eagle", 10).await.unwrap();
    assert_eq!(due.len(), 1, "{due:#?}");
    assert_eq!(due[0].id, edit);
    assert_eq!(
        due[0].kind,
        OutboxKind::Edit {
            message_id: 4242,
            content: "no longer applies".into()
        }
    );
}

#[tokio::test]
async fn an_edit_of_an_outbox_entry_waits_for_it_on_sqlite() {
    an_edit_of_an_outbox_entry_waits_for_it_and_targets_its_message(Db::Sqlite).await;
}

#[tokio::test]
async fn an_edit_of_an_outbox_entry_waits_for_it_on_postgres() {
    an_edit_of_an_outbox_entry_waits_for_it_and_targets_its_message(Db::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_after_a_merge_escalation_edits_it_to_say_the_head_moved() {
    let db = TestDb::new(Db::Sqlite).await;
    let realm = Realm::start().await;
    let hub = hub().await;
    let mut spec = PrSpec::new("executor-bot", "eagle/run-1", SHA1);
    spec.draft = false;
    let number = hub.fake.open_pr(REPO, spec);
    hub.check(SHA1, "completed", Some("success"));
    hub.fake
        .add_review(REPO, number, Some("alex"), "APPROVED", "");
    let (_home, eagle, executor) = start(&realm, &hub, &db, &[]).await;
    let store = db.open().await;

    realm.fake.post(
        realm.alex,
        "general",
        "tabs",
        &format!("!queue Ship it mode:prmerge pr:{number}"),
    );
    realm
        .wait_replies("general", "tabs", |r| !r.is_empty())
        .await;
    realm.fake.post(realm.alex, "general", "tabs", "!go 1");
    wait_run_post(&realm, realm.eagle, "[ESCALATED: merge_pr] run:1 req:").await;
    let asked = realm
        .fake
        .messages_in("executor", "run 1")
        .into_iter()
        .find(|m| m.sender_id == realm.eagle && m.content.contains("[ESCALATED: merge_pr]"))
        .expect("the escalation was posted");
    assert!(asked.content.contains("`!merge 1`"), "{}", asked.content);

    // A push: the PR loop expires the request, and the escalation says so.
    hub.fake.push(REPO, number, SHA2);
    let edited = realm
        .fake
        .wait_until(WAIT, |f| {
            f.messages().iter().any(|m| {
                m.id == asked.id
                    && m.content.contains("no longer applies")
                    && m.content.contains("head moved to 2222222")
            })
        })
        .await;
    let now = realm
        .fake
        .messages()
        .into_iter()
        .find(|m| m.id == asked.id)
        .unwrap();
    assert!(edited, "{}", now.content);
    assert!(!now.mentioned_user_ids.contains(&realm.alex), "{now:?}");
    let merges = requests(&store, 1).await;
    assert_eq!(merges[0].status, RequestStatus::Expired, "{merges:#?}");
    for running in [eagle, executor] {
        let (code, log) = running.stop();
        assert_eq!(code, Some(0), "{log}");
    }
    hub.fake.assert_clean();
    realm.fake.assert_clean();
}
