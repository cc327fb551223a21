//! The approvers' controls: `!hold`, `!unhold`, `!pause`, `!resume` and
//! `!cancel`, for one run and for all.

use eagle::store::RunState;

use super::{fake_worker_command, run_of, start_both, wait_post};
use crate::zulip::Realm;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvers_hold_cancel_pause_and_hold_everything() {
    let test_db = crate::support::TestDb::new(crate::support::Db::Sqlite).await;
    let realm = Realm::start().await;
    let mut home = realm.home();
    home.set("EAGLE_DATABASE_URL", &test_db.url)
        .set("EAGLE_RUNNER__WORKER_COMMAND", &fake_worker_command())
        .set("EAGLE_RUNNER__WRAP_UP_GRACE", "2s");
    let (eagle, executor) = start_both(&realm, &home).await;
    let store = test_db.open().await;
    let say = |text: &str| realm.fake.post(realm.alex, "general", "controls", text);
    let never = home.dir.path().join("never");
    say(&format!("!queue first mode:gate gate:{}", never.display()));
    say(&format!("!queue second mode:gate gate:{}", never.display()));
    realm
        .wait_replies("general", "controls", |r| r.len() >= 2)
        .await;
    say("!go 1");
    wait_post(&realm, realm.executor, "[STATUS: working] run:1").await;
    let worker = run_of(&store, 1).await;
    let (pid, ticks) = (
        worker.worker_pid.unwrap() as i32,
        worker.worker_start_ticks.unwrap() as u64,
    );

    // !hold: the worker is stopped at a safe point and not restarted.
    say("!hold 1");
    wait_post(
        &realm,
        realm.executor,
        "[STATUS: held] run:1 the run is held",
    )
    .await;
    assert!(
        !eagle::ground::host::is_alive(pid, ticks),
        "the held run's worker lives on"
    );
    let run = run_of(&store, 1).await;
    assert!(run.held && !run.has_worker(), "{run:?}");
    assert_eq!(run.failures, 0, "a hold is not a failure");
    // !unhold: a fresh worker picks it up.
    say("!unhold 1");
    wait_post(&realm, realm.executor, "[STATUS: started] run:1 attempt 2").await;

    // !pause: nothing new starts; !resume: it does.
    say("!pause");
    wait_post(&realm, realm.eagle, "Paused: no runner starts new work").await;
    assert_eq!(store.claims().work_in_sight().await.unwrap(), 0);
    say("!go 2");
    wait_post(&realm, realm.eagle, "run 2 is queued").await;
    say("!resume");
    wait_post(&realm, realm.executor, "[STATUS: started] run:2 attempt 1").await;

    // !cancel: the worker is killed, the run and its task end.
    wait_post(&realm, realm.executor, "[STATUS: working] run:2").await;
    let worker = run_of(&store, 2).await;
    let (pid2, ticks2) = (
        worker.worker_pid.unwrap() as i32,
        worker.worker_start_ticks.unwrap() as u64,
    );
    say("!cancel 2");
    wait_post(
        &realm,
        realm.executor,
        "[STATUS: stopped] run:2 the run was cancelled",
    )
    .await;
    assert!(!eagle::ground::host::is_alive(pid2, ticks2));
    assert_eq!(run_of(&store, 2).await.state, RunState::Cancelled);

    // !hold all: every running worker stops; !unhold all: they start again.
    wait_post(&realm, realm.executor, "[STATUS: working] run:1").await;
    say("!hold all");
    wait_post(
        &realm,
        realm.executor,
        "[STATUS: held] run:1 every run is held",
    )
    .await;
    assert!(!run_of(&store, 1).await.has_worker());
    say("!unhold all");
    wait_post(&realm, realm.executor, "[STATUS: started] run:1 attempt 3").await;

    // Every control is in the audit log, by whom.
    let trail = store.audit_log().audit_trail("run:1").await.unwrap();
    for action in ["run.held", "run.unheld"] {
        assert!(
            trail
                .iter()
                .any(|e| e.action == action && e.actor.contains("alex@example.com")),
            "{action}"
        );
    }
    let controls = store.audit_log().audit_trail("controls").await.unwrap();
    assert_eq!(controls.len(), 4, "{controls:#?}");
    say("!cancel 1");
    wait_post(&realm, realm.executor, "[STATUS: stopped] run:1").await;
    for running in [eagle, executor] {
        let (code, log) = running.stop();
        assert_eq!(code, Some(0), "{log}");
    }
    realm.fake.assert_clean();
}
