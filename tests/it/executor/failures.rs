//! Workers and runners that fail: the watchdogs kill a silent, chatty,
//! crashing or flooding worker's group, `kill -9` of either side loses
//! nothing, and two executors never run more than `max_workers`.

use std::path::Path;

use eagle::store::{RequestStatus, Run, RunState};

use super::{
    fake_home, fake_worker_command, home_store, posts, run_of, start_both, wait_for, wait_post,
};
use crate::support::{Home, text};
use crate::zulip::{Realm, Running};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdogs_kill_the_group_retry_and_then_ask_the_owner() {
    let mut home = fake_home();
    home.set("EAGLE_RUNNER__NO_OUTPUT_TIMEOUT", "1s")
        .set("EAGLE_RUNNER__HARD_TIMEOUT", "3s")
        .set("EAGLE_RUNNER__WRAP_UP_GRACE", "1s")
        .set("EAGLE_RUNNER__MAX_ATTEMPTS", "2")
        .set("EAGLE_RUNNER__MAX_REQUESTS", "200")
        .set("EAGLE_RUNNER__STATUS_INTERVAL", "0s");
    let input = "!queue silent mode:silent\n!queue chatty mode:chatty\n!queue crash mode:crash\n\
                 !queue flood mode:flood\n!go 1\n!go 2\n!go 3\n!go 4\n";
    let out = home.run(&["shell"], input);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let store = home_store(&home).await;

    // Silent: killed with its whole group, twice, then held for the owner.
    let silent = posts(&stdout, 1);
    assert!(
        silent
            .iter()
            .any(|p| p.contains("[STATUS: retry] run:1 attempt 1 failed: no output for 1s")),
        "{stdout}"
    );
    assert!(
        silent
            .iter()
            .any(|p| p.contains("[STATUS: held] run:1 attempt 2 failed: no output for 1s"))
    );
    assert!(
        silent.iter().any(|p| p.starts_with("Eagle: @**")
            && p.contains("run 1 is held after 2 failed attempt(s)")
            && p.contains("`!retry 1`")
            && p.contains("`!cancel 1`")),
        "the owner is asked: {stdout}"
    );
    let run = run_of(&store, 1).await;
    assert!(
        run.held && run.failures == 2 && run.worker_stuck_count == 2,
        "{run:?}"
    );
    assert_eq!(run.state, RunState::InProgress);
    assert!(run.waiting_on.is_some());
    for log in logs_of(&home, &run) {
        let child = log
            .lines()
            .find_map(|l| l.strip_prefix("child "))
            .expect("the silent worker names its child");
        assert!(
            !Path::new(&format!("/proc/{child}")).exists(),
            "the worker's child {child} outlived the kill"
        );
    }

    // Chatty: asked to wrap up past its hard limit, then killed.
    let chatty = posts(&stdout, 2);
    assert!(
        chatty
            .iter()
            .any(|p| p.contains("[STATUS: wrap_up] run:2 past its hard limit of 3s")),
        "{stdout}"
    );
    assert!(
        chatty
            .iter()
            .any(|p| p.contains("[STATUS: wrapping_up] run:2 asked to wrap up")),
        "{stdout}"
    );
    assert!(
        chatty
            .iter()
            .any(|p| p.contains("past its hard limit of 3s and did not wrap up")),
        "{stdout}"
    );

    // Crash: its exit code is recorded.
    let crash = posts(&stdout, 3);
    assert!(
        crash
            .iter()
            .any(|p| p.contains("attempt 1 failed: exit code 7")),
        "{stdout}"
    );
    assert_eq!(run_of(&store, 3).await.worker_exit_code, Some(7));

    // Flood: stopped, with the requests capped.
    let flood = posts(&stdout, 4);
    assert!(
        flood
            .iter()
            .any(|p| p.contains("more than 200 requests in one attempt")),
        "{stdout}"
    );
    let recorded = store.requests().requests_of_run(4).await.unwrap();
    assert!(recorded.len() <= 2 * 200, "{} requests", recorded.len());

    // Nothing is silently stuck: every run is held for a named human.
    for id in 1..=4 {
        let run = run_of(&store, id).await;
        assert!(run.held && run.waiting_on.is_some(), "run {id}: {run:?}");
        assert!(!run.has_worker(), "run {id} still has a worker");
    }
}

/// The work logs of a run's attempts.
fn logs_of(home: &Home, run: &Run) -> Vec<String> {
    let dir = home
        .dir
        .path()
        .join("data/executor/logs")
        .join(run.task_gid.replace(':', "_"));
    let mut logs: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    logs.sort();
    logs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_either_side_loses_nothing_and_starts_no_second_worker() {
    let test_db = crate::support::TestDb::new(crate::support::Db::Sqlite).await;
    let realm = Realm::start().await;
    let mut home = realm.home();
    home.set("EAGLE_DATABASE_URL", &test_db.url)
        .set("EAGLE_RUNNER__WORKER_COMMAND", &fake_worker_command());
    let gate = home.dir.path().join("gate");
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
    wait_post(&realm, realm.executor, "[STATUS: working] run:1").await;
    let store = test_db.open().await;
    let before = run_of(&store, 1).await;
    let pid = before.worker_pid.expect("a worker") as i32;
    let ticks = before.worker_start_ticks.expect("its start time") as u64;

    // Both sides die at once; the worker lives on in its own group.
    executor.kill();
    eagle.kill();
    assert!(
        eagle::ground::host::is_alive(pid, ticks),
        "the worker died with its runner"
    );

    // The executor comes back first and re-adopts the worker; its request
    // waits in the database while Eagle is down.
    let executor = Running::start(&home, "executor");
    std::fs::write(&gate, "go").unwrap();
    let pending = wait_for(&store, || async {
        store
            .requests()
            .requests_of_run(1)
            .await
            .unwrap()
            .iter()
            .any(|r| r.action == "run_tests" && r.status == RequestStatus::Pending)
    })
    .await;
    assert!(
        pending,
        "the re-adopted worker's request was not recorded:\n{}",
        executor.log()
    );

    // Eagle comes back: the request is decided exactly once, and the run goes on.
    let eagle = Running::start(&home, "eagle");
    let done = wait_for(&store, || async {
        run_of(&store, 1).await.state == RunState::Pr
    })
    .await;
    assert!(done, "{:?}\n{}", run_of(&store, 1).await, executor.log());
    let run = run_of(&store, 1).await;
    assert_eq!(run.attempt, 1, "a second worker was started: {run:?}");
    let request = store
        .requests()
        .requests_of_run(1)
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.action == "run_tests")
        .unwrap();
    assert_eq!(request.status, RequestStatus::Approved);
    let decisions = store
        .audit_log()
        .audit_trail(&format!("request:{}", request.id))
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.action == "request.decided")
        .count();
    assert_eq!(decisions, 1);
    let adopted = store
        .audit_log()
        .audit_trail("run:1")
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.action == "run.adopted")
        .count();
    assert_eq!(adopted, 1);
    let starts = realm
        .fake
        .messages_from(realm.executor)
        .into_iter()
        .filter(|m| m.content.starts_with("[STATUS: started] run:1"))
        .count();
    assert_eq!(starts, 1, "one worker, one start");
    for running in [eagle, executor] {
        let (code, log) = running.stop();
        assert_eq!(code, Some(0), "{log}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_executors_on_postgres_never_run_more_than_max_workers() {
    let test_db = crate::support::TestDb::new(crate::support::Db::Postgres).await;
    let realm = Realm::start().await;
    let mut home = realm.home();
    home.set("EAGLE_DATABASE_URL", &test_db.url)
        .set("EAGLE_RUNNER__WORKER_COMMAND", &fake_worker_command())
        .set("EAGLE_RUNNER__MAX_WORKERS", "2");
    let shared = home.exchange();
    let store = test_db.open().await;
    const RUNS: usize = 10;
    for n in 1..=RUNS {
        let mut tx = store.begin_write().await.unwrap();
        let id = tx
            .tasks()
            .insert_task(&eagle::store::NewTask {
                task_gid: format!("test:{n}"),
                source: "chat".into(),
                title: format!("count mode:count dir:{}", shared.display()),
                ..eagle::store::NewTask::default()
            })
            .await
            .unwrap()
            .unwrap();
        tx.transitions().start_run(id, "test", "!go").await.unwrap();
        tx.commit().await.unwrap();
    }
    let a = Running::start(&home, "executor");
    let b = Running::start(&home, "executor");
    let all_done = wait_for(&store, || async {
        let mut tx = store.begin_read().await.unwrap();
        let counts = tx.tasks().status_counts().await.unwrap();
        counts
            .runs
            .iter()
            .any(|(s, n)| *s == RunState::Pr && *n == RUNS as i64)
    })
    .await;
    assert!(all_done, "{}\n{}", a.log(), b.log());
    let seen = std::fs::read_to_string(shared.join("seen")).unwrap();
    let counts: Vec<usize> = seen.lines().map(|l| l.trim().parse().unwrap()).collect();
    assert_eq!(counts.len(), RUNS, "one line per worker: {seen}");
    assert!(
        counts.iter().all(|c| *c <= 2),
        "more than 2 workers at once: {counts:?}"
    );
    for running in [a, b] {
        let (code, log) = running.stop();
        assert_eq!(code, Some(0), "{log}");
    }
}
