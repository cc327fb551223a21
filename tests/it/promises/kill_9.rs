//! `kill -9` of either side with a request in flight: after the restart,
//! one decision and one answer to the worker.

use crate::support::{Db, TestDb};

/// Which side `kill -9` takes down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Victim {
    Eagle,
    Executor,
}

/// What is in flight when it dies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InFlight {
    /// The worker's request is recorded, not decided.
    Pending,
    /// The decision is recorded, not yet delivered to the worker.
    Decided,
}

fn signal(pid: u32, signal: i32) {
    // SAFETY: kill(2) on a child of this test.
    let done = unsafe { libc::kill(pid as i32, signal) };
    assert_eq!(done, 0, "kill -{signal} {pid}");
}

async fn run_tests_request(store: &eagle::store::Store) -> Option<eagle::store::Request> {
    store
        .requests()
        .requests_of_run(1)
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.action == "run_tests")
}

/// One side dies by `kill -9` with a request in flight, the other side
/// lives on; after its restart the request has exactly one decision and
/// the worker got exactly one answer (one worker, one result).
async fn kill_9_of_one_side(db: Db, victim: Victim, in_flight: InFlight) {
    use crate::executor::{fake_worker_command, start_both, wait_for};
    use crate::zulip::{Realm, Running};
    use eagle::store::{RequestStatus, RunState};
    let test_db = TestDb::new(db).await;
    let realm = Realm::start().await;
    let mut home = realm.home();
    home.set("EAGLE_DATABASE_URL", &test_db.url)
        .set("EAGLE_RUNNER__WORKER_COMMAND", &fake_worker_command());
    let gate = home.exchange().join("gate");
    let (eagle, executor) = start_both(&realm, &home).await;
    realm.fake.post(
        realm.alex,
        "general",
        "gate",
        &format!("!queue gated mode:gate gate:{}", gate.display()),
    );
    realm
        .wait_replies("general", "gate", |r| !r.is_empty())
        .await;
    realm.fake.post(realm.alex, "general", "gate", "!go 1");
    let store = test_db.open().await;
    let working = wait_for(&store, || async {
        let mut tx = store.begin_read().await.unwrap();
        tx.tasks()
            .run(1)
            .await
            .unwrap()
            .is_some_and(|r| r.worker_pid.is_some())
    })
    .await;
    assert!(working, "no worker started:\n{}", executor.log());
    // Eagle has told the task's topic that the run started and is quiet
    // (a process stopped inside a write would hold SQLite's lock).
    let told = realm
        .fake
        .wait_until(crate::zulip::WAIT, |f| {
            f.messages_from(realm.eagle)
                .iter()
                .any(|m| m.topic == "gate" && m.content.starts_with("Run 1 of task #1 started"))
        })
        .await;
    assert!(told, "no milestone:\n{}", eagle.log());
    let quiet = wait_for(&store, || async {
        !store
            .conversations()
            .changed_after_cursor(eagle::chat::milestones::CURSOR)
            .await
            .unwrap()
            && store.outbox().undelivered_count("eagle").await.unwrap() == 0
    })
    .await;
    assert!(quiet, "Eagle is still writing:\n{}", eagle.log());

    // Eagle is paused, so the request waits for it.
    signal(eagle.pid(), libc::SIGSTOP);
    std::fs::write(&gate, "go").unwrap();
    let pending = wait_for(&store, || async {
        run_tests_request(&store)
            .await
            .is_some_and(|r| r.status == RequestStatus::Pending)
    })
    .await;
    assert!(pending, "the request was not recorded:\n{}", executor.log());
    let decided = || async {
        run_tests_request(&store)
            .await
            .is_some_and(|r| r.status == RequestStatus::Approved)
    };
    let (eagle, executor) = match (victim, in_flight) {
        (Victim::Eagle, InFlight::Pending) => {
            eagle.kill();
            (Running::start(&home, "eagle"), executor)
        }
        (Victim::Executor, InFlight::Pending) => {
            executor.kill();
            signal(eagle.pid(), libc::SIGCONT);
            assert!(wait_for(&store, decided).await, "{}", eagle.log());
            (eagle, Running::start(&home, "executor"))
        }
        (Victim::Eagle, InFlight::Decided) => {
            // The executor is paused, so the decision waits to be delivered.
            signal(executor.pid(), libc::SIGSTOP);
            signal(eagle.pid(), libc::SIGCONT);
            assert!(wait_for(&store, decided).await, "{}", eagle.log());
            eagle.kill();
            signal(executor.pid(), libc::SIGCONT);
            (Running::start(&home, "eagle"), executor)
        }
        (Victim::Executor, InFlight::Decided) => {
            signal(executor.pid(), libc::SIGSTOP);
            signal(eagle.pid(), libc::SIGCONT);
            assert!(wait_for(&store, decided).await, "{}", eagle.log());
            executor.kill();
            (eagle, Running::start(&home, "executor"))
        }
    };

    let done = wait_for(&store, || async {
        let mut tx = store.begin_read().await.unwrap();
        tx.tasks()
            .run(1)
            .await
            .unwrap()
            .is_some_and(|r| r.state == RunState::Pr)
    })
    .await;
    let run = {
        let mut tx = store.begin_read().await.unwrap();
        tx.tasks().run(1).await.unwrap().unwrap()
    };
    assert!(done, "{run:?}\n{}\n{}", eagle.log(), executor.log());
    assert_eq!(run.attempt, 1, "a second worker was started: {run:?}");
    let requests: Vec<_> = store
        .requests()
        .requests_of_run(1)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.action == "run_tests")
        .collect();
    assert_eq!(requests.len(), 1, "{requests:#?}");
    let request = &requests[0];
    assert_eq!(request.status, RequestStatus::Approved);
    assert!(request.delivered_at.is_some(), "{request:?}");
    let decisions = store
        .audit_log()
        .audit_trail(&format!("request:{}", request.id))
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.action == "request.decided")
        .count();
    assert_eq!(decisions, 1, "one decision");
    let arrived = realm
        .fake
        .wait_until(crate::zulip::WAIT, |f| {
            f.messages_from(realm.executor).iter().any(|m| {
                m.content
                    .starts_with("[DONE: pr_ready] run:1 through the gate")
            }) && f
                .messages_from(realm.eagle)
                .iter()
                .any(|m| m.content.starts_with("[APPROVED: run_tests] run:1"))
        })
        .await;
    assert!(arrived, "{}\n{}", eagle.log(), executor.log());
    let executor_posts = realm.fake.messages_from(realm.executor);
    let count = |needle: &str| {
        executor_posts
            .iter()
            .filter(|m| m.content.starts_with(needle))
            .count()
    };
    assert_eq!(count("[STATUS: started] run:1"), 1, "one worker, one start");
    // The worker went past its request once: one answer, one result.
    assert_eq!(count("[DONE: pr_ready] run:1 through the gate"), 1);
    let approvals = realm
        .fake
        .messages_from(realm.eagle)
        .into_iter()
        .filter(|m| m.content.starts_with("[APPROVED: run_tests] run:1"))
        .count();
    assert_eq!(approvals, 1, "one decision, posted once");
    for running in [eagle, executor] {
        let (code, log) = running.stop();
        assert_eq!(code, Some(0), "{log}");
    }
}

// The "decided, not delivered" cases pause the executor with SIGSTOP; on
// SQLite a pause inside its write transaction can keep Eagle from writing
// the decision, so they run on PostgreSQL only (see the report of issue 13).
macro_rules! kill_9_cases {
    ($($name:ident: $db:expr, $victim:expr, $in_flight:expr;)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            kill_9_of_one_side($db, $victim, $in_flight).await;
        }
    )*};
}

kill_9_cases! {
    kill_9_of_eagle_with_a_request_pending_on_sqlite: Db::Sqlite, Victim::Eagle, InFlight::Pending;
    kill_9_of_eagle_with_a_request_pending_on_postgres: Db::Postgres, Victim::Eagle, InFlight::Pending;
    kill_9_of_the_executor_with_a_request_pending_on_sqlite: Db::Sqlite, Victim::Executor, InFlight::Pending;
    kill_9_of_the_executor_with_a_request_pending_on_postgres: Db::Postgres, Victim::Executor, InFlight::Pending;
    kill_9_of_eagle_with_a_decision_undelivered_on_postgres: Db::Postgres, Victim::Eagle, InFlight::Decided;
    kill_9_of_the_executor_with_a_decision_undelivered_on_postgres: Db::Postgres, Victim::Executor, InFlight::Decided;
}
