//! Escalations that step aside (issue 29), through the binary: both
//! profiles as `eagle run` processes against the fake Zulip, with the fake
//! worker. When a worker asks again for the same effect while a human
//! decides, Eagle edits its earlier escalation to say it no longer applies
//! and to name the new one; only the new one @-mentions the owner; an
//! `!approve` of the stale request names the current one and approves
//! nothing.

use eagle::store::{Request, RequestStatus, Store};

use crate::executor::wait_for;
use crate::prloop::{hub, start, wait_run_post};
use crate::support::{Db, TestDb};
use crate::zulip::{Realm, WAIT};

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
