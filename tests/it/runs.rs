//! The executor loop's store, on SQLite and PostgreSQL alike: the transition
//! table, claims and the global worker limit, fences, requests decided
//! exactly once, a human's decision binding to one request, holds and notices.

use std::time::Duration;

use eagle::store::{
    Approval, ClaimLimits, Control, Fence, NewRequest, NewTask, Origin, RequestStatus, RequestVia,
    RunEnd, RunState, Store, StoreError, TaskStatus, Transition,
};

use crate::support::{Db, TestDb, WAIT, within};

on_both_backends!(
    the_transition_table_is_enforced_and_the_task_follows,
    claims_hold_the_global_limit_and_every_write_is_fenced,
    racing_claimers_never_exceed_the_limit,
    requests_are_recorded_once_and_decided_once,
    a_human_decision_binds_to_exactly_one_identical_request,
    failures_hold_the_run_for_its_owner_after_max_attempts,
    pause_and_hold_all_stop_claims,
    changes_wake_watchers,
);

const ALEX: &str = "human:26 <alex@example.com>";

fn limits(max_workers: i64) -> ClaimLimits {
    ClaimLimits {
        max_workers,
        lease: Duration::from_secs(30),
        alive_for: Duration::from_secs(600),
        cost_cap: Some(5.0),
    }
}

/// A task, approved with `!go`: returns the run's id.
async fn queued_run(store: &Store, n: usize) -> i64 {
    let mut tx = store.begin_write().await.unwrap();
    let id = tx
        .tasks()
        .insert_task(&NewTask {
            task_gid: format!("zulip:{n}"),
            source: "chat".into(),
            title: format!("task {n}"),
            origin: Origin {
                transport: "zulip".into(),
                ..Origin::default()
            },
            ..NewTask::default()
        })
        .await
        .unwrap()
        .unwrap();
    let run = tx.transitions().start_run(id, ALEX, "!go").await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(run.state, RunState::Queued);
    assert_eq!(
        run.thread_id.as_deref(),
        Some(format!("run {}", run.id).as_str())
    );
    run.id
}

async fn the_transition_table_is_enforced_and_the_task_follows(db: Db) {
    let test = TestDb::new(db).await;
    let store = test.open().await;
    let run = queued_run(&store, 1).await;
    let illegal = store
        .transitions()
        .transition_run(&Transition {
            run,
            to: RunState::Pr,
            actor: ALEX,
            reason: "skipping ahead",
            fence: None,
        })
        .await;
    assert!(
        matches!(
            illegal,
            Err(StoreError::IllegalTransition {
                from: "queued",
                to: "pr",
                ..
            })
        ),
        "{illegal:?}"
    );
    let cancelled = store
        .transitions()
        .transition_run(&Transition {
            run,
            to: RunState::Cancelled,
            actor: ALEX,
            reason: "not needed",
            fence: None,
        })
        .await
        .unwrap();
    assert_eq!(cancelled.state, RunState::Cancelled);
    assert!(cancelled.completed_at.is_some());
    let mut tx = store.begin_read().await.unwrap();
    let task = tx.tasks().task_by_gid("zulip:1").await.unwrap().unwrap();
    assert_eq!(
        task.status,
        TaskStatus::Cancelled,
        "the task follows its run"
    );
    drop(tx);
    let again = store
        .transitions()
        .transition_run(&Transition {
            run,
            to: RunState::InProgress,
            actor: ALEX,
            reason: "revive",
            fence: None,
        })
        .await;
    assert!(matches!(again, Err(StoreError::IllegalTransition { .. })));
    let trail = store
        .audit_log()
        .audit_trail(&format!("run:{run}"))
        .await
        .unwrap();
    let actions: Vec<&str> = trail.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(actions, vec!["run.queued", "run.cancelled"]);
    let task_trail = store
        .audit_log()
        .audit_trail(&format!("task:{}", task.id))
        .await
        .unwrap();
    assert!(task_trail.iter().any(|e| e.action == "task.approved"));
    assert!(task_trail.iter().any(|e| e.action == "task.cancelled"));
}

async fn claims_hold_the_global_limit_and_every_write_is_fenced(db: Db) {
    let test = TestDb::new(db).await;
    let store = test.open().await;
    for n in 1..=3 {
        queued_run(&store, n).await;
    }
    let a = store
        .claims()
        .claim_run("runner-a", &limits(2))
        .await
        .unwrap()
        .unwrap();
    let b = store
        .claims()
        .claim_run("runner-b", &limits(2))
        .await
        .unwrap()
        .unwrap();
    assert_ne!(a.run.id, b.run.id);
    assert_ne!(a.slot, b.slot);
    assert_eq!(a.run.state, RunState::InProgress);
    assert_eq!(a.fence.attempt, 1);
    assert!(
        store
            .claims()
            .claim_run("runner-c", &limits(2))
            .await
            .unwrap()
            .is_none(),
        "a third worker would break the limit"
    );
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.claims().busy_slots().await.unwrap(), 2);
    drop(tx);

    // A fence that is not the claim's refuses every write.
    let stale = Fence {
        attempt: a.fence.attempt + 1,
        ..a.fence.clone()
    };
    assert!(matches!(
        store.claims().heartbeat(&stale, &limits(2)).await,
        Err(StoreError::Fenced(_))
    ));
    let mut tx = store.begin_write().await.unwrap();
    let refused = tx
        .workers()
        .finish_attempt(&stale, Some(0), &RunEnd::Waiting)
        .await;
    assert!(matches!(refused, Err(StoreError::Fenced(_))), "{refused:?}");
    drop(tx);
    store
        .claims()
        .heartbeat(&a.fence, &limits(2))
        .await
        .unwrap();

    // The end of an attempt frees its slot: the third run gets one.
    let mut tx = store.begin_write().await.unwrap();
    let run = tx
        .workers()
        .finish_attempt(
            &a.fence,
            Some(0),
            &RunEnd::Moved {
                to: RunState::Pr,
                reason: "[DONE: pr_ready]".into(),
                pr: Some(eagle::store::PrLink {
                    number: 12,
                    url: None,
                    repo: None,
                }),
            },
        )
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(run.state, RunState::Pr);
    assert_eq!(run.pr_number, Some(12));
    assert!(run.lease_owner.is_none() && run.slot.is_none());
    let c = store
        .claims()
        .claim_run("runner-c", &limits(2))
        .await
        .unwrap()
        .unwrap();
    assert_ne!(c.run.id, a.run.id);
    assert_ne!(c.run.id, b.run.id);
}

async fn racing_claimers_never_exceed_the_limit(db: Db) {
    let test = TestDb::new(db).await;
    let store = test.open().await;
    for n in 1..=12 {
        queued_run(&store, n).await;
    }
    let mut claimers = Vec::new();
    for i in 0..8 {
        let store = store.clone();
        claimers.push(tokio::spawn(async move {
            let mut won = Vec::new();
            for _ in 0..3 {
                loop {
                    match store
                        .claims()
                        .claim_run(&format!("runner-{i}"), &limits(3))
                        .await
                    {
                        Ok(Some(claim)) => won.push(claim.run.id),
                        Ok(None) => break,
                        // A busy SQLite or a serialisation failure: the claim did not happen.
                        Err(e) if e.is_transient() => continue,
                        Err(e) => panic!("{e}"),
                    }
                }
            }
            won
        }));
    }
    let mut all = Vec::new();
    for claimer in claimers {
        all.extend(within(WAIT, "a claimer to finish", claimer).await.unwrap());
    }
    all.sort();
    let before = all.len();
    all.dedup();
    assert_eq!(before, all.len(), "a run was claimed twice: {all:?}");
    assert_eq!(all.len(), 3, "exactly max_workers claims: {all:?}");
}

fn request(run: i64, attempt: i64, key: &str, action: &str, body: &str) -> NewRequest {
    NewRequest {
        run_id: run,
        attempt,
        key: key.into(),
        via: RequestVia::Socket,
        escalate: false,
        action: action.into(),
        body: body.into(),
    }
}

async fn requests_are_recorded_once_and_decided_once(db: Db) {
    let test = TestDb::new(db).await;
    let store = test.open().await;
    queued_run(&store, 1).await;
    let claim = store
        .claims()
        .claim_run("runner-a", &limits(2))
        .await
        .unwrap()
        .unwrap();
    let new = request(
        claim.run.id,
        claim.fence.attempt,
        "sock:1",
        "run_tests",
        "all",
    );
    let mut tx = store.begin_write().await.unwrap();
    let first = tx
        .requests()
        .record_request(&new, &claim.fence)
        .await
        .unwrap();
    let again = tx
        .requests()
        .record_request(&new, &claim.fence)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert!(first.new && !again.new);
    assert_eq!(first.request.id, again.request.id);
    assert_eq!(
        store.requests().pending_requests(10).await.unwrap().len(),
        1
    );

    let mut tx = store.begin_write().await.unwrap();
    let decided = tx
        .requests()
        .decide_request(
            first.request.id,
            RequestStatus::Approved,
            "policy:default-approval",
            "ok",
            false,
            None,
        )
        .await
        .unwrap();
    let twice = tx
        .requests()
        .decide_request(
            first.request.id,
            RequestStatus::Denied,
            "policy:other",
            "no",
            false,
            None,
        )
        .await
        .unwrap();
    let human = tx
        .requests()
        .human_decision(
            first.request.id,
            &Approval {
                approve: false,
                actor: ALEX,
                text: Some("too late"),
                source_message_id: None,
            },
        )
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(decided.unwrap().status, RequestStatus::Approved);
    assert!(twice.is_none(), "a second decision was recorded");
    assert!(human.is_none(), "a human overrode a decision already made");

    // A run that ends expires what still waits.
    let mut tx = store.begin_write().await.unwrap();
    let open = tx
        .requests()
        .record_request(
            &request(
                claim.run.id,
                claim.fence.attempt,
                "sock:2",
                "merge_pr",
                "PR #1",
            ),
            &claim.fence,
        )
        .await
        .unwrap();
    tx.commit().await.unwrap();
    store
        .transitions()
        .transition_run(&Transition {
            run: claim.run.id,
            to: RunState::Cancelled,
            actor: ALEX,
            reason: "stop",
            fence: None,
        })
        .await
        .unwrap();
    let expired = store
        .requests()
        .request(open.request.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(expired.status, RequestStatus::Expired);
    // …and a runner that held it can record nothing new.
    let mut tx = store.begin_write().await.unwrap();
    tx.workers()
        .finish_attempt(
            &claim.fence,
            Some(143),
            &RunEnd::Stopped {
                reason: "cancelled".into(),
            },
        )
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_write().await.unwrap();
    let late = tx
        .requests()
        .record_request(
            &request(claim.run.id, claim.fence.attempt, "sock:3", "run_tests", ""),
            &claim.fence,
        )
        .await;
    assert!(matches!(late, Err(StoreError::Fenced(_))), "{late:?}");
}

async fn a_human_decision_binds_to_exactly_one_identical_request(db: Db) {
    let test = TestDb::new(db).await;
    let store = test.open().await;
    queued_run(&store, 1).await;
    let claim = store
        .claims()
        .claim_run("runner-a", &limits(2))
        .await
        .unwrap()
        .unwrap();
    let (run, attempt) = (claim.run.id, claim.fence.attempt);
    let mut tx = store.begin_write().await.unwrap();
    let asked = tx
        .requests()
        .record_request(
            &request(run, attempt, "sock:1", "merge_pr", "PR #7"),
            &claim.fence,
        )
        .await
        .unwrap()
        .request;
    tx.requests()
        .decide_request(
            asked.id,
            RequestStatus::Escalated,
            "policy:default-approval",
            "a human decides",
            true,
            None,
        )
        .await
        .unwrap()
        .unwrap();
    tx.requests()
        .human_decision(
            asked.id,
            &Approval {
                approve: true,
                actor: ALEX,
                text: Some("squash it"),
                source_message_id: Some(99),
            },
        )
        .await
        .unwrap()
        .unwrap();
    let same = tx
        .requests()
        .record_request(
            &request(run, attempt, "sock:2", "merge_pr", "PR #7"),
            &claim.fence,
        )
        .await
        .unwrap()
        .request;
    let other = tx
        .requests()
        .record_request(
            &request(run, attempt, "sock:3", "merge_pr", "PR #8"),
            &claim.fence,
        )
        .await
        .unwrap()
        .request;
    let bound = tx
        .requests()
        .bind_to_human_decision(&same)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(bound.status, RequestStatus::Approved);
    assert_eq!(bound.bound_to, Some(asked.id));
    assert_eq!(bound.note.as_deref(), Some("squash it"));
    assert!(
        tx.requests()
            .bind_to_human_decision(&other)
            .await
            .unwrap()
            .is_none(),
        "an approval of PR #7 does not approve PR #8"
    );
    let third = tx
        .requests()
        .record_request(
            &request(run, attempt, "sock:4", "merge_pr", "PR #7"),
            &claim.fence,
        )
        .await
        .unwrap()
        .request;
    assert!(
        tx.requests()
            .bind_to_human_decision(&third)
            .await
            .unwrap()
            .is_none(),
        "an approval is used once"
    );
    tx.commit().await.unwrap();
    let trail = store
        .audit_log()
        .audit_trail(&format!("request:{}", same.id))
        .await
        .unwrap();
    assert!(
        trail
            .iter()
            .any(|e| e.action == "request.decided" && e.decision.as_deref() == Some("approve"))
    );
    let human = store
        .audit_log()
        .audit_trail(&format!("request:{}", asked.id))
        .await
        .unwrap();
    assert!(
        human
            .iter()
            .any(|e| e.actor == ALEX && e.source_message_id == Some(99))
    );
}

async fn failures_hold_the_run_for_its_owner_after_max_attempts(db: Db) {
    let test = TestDb::new(db).await;
    let store = test.open().await;
    let run = queued_run(&store, 1).await;
    for attempt in 1..=2 {
        let claim = store
            .claims()
            .claim_run("runner-a", &limits(2))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(claim.fence.attempt, attempt);
        let mut tx = store.begin_write().await.unwrap();
        let after = tx
            .workers()
            .finish_attempt(
                &claim.fence,
                Some(1),
                &RunEnd::Failed {
                    reason: "crashed".into(),
                    max_attempts: 2,
                    owner: "Alex".into(),
                },
            )
            .await
            .unwrap();
        tx.commit().await.unwrap();
        assert_eq!(after.failures, attempt);
        assert_eq!(after.held, attempt == 2, "held after the last attempt");
    }
    let held = {
        let mut tx = store.begin_read().await.unwrap();
        tx.tasks().run(run).await.unwrap().unwrap()
    };
    assert_eq!(held.waiting_on.as_deref(), Some("Alex"));
    assert!(
        store
            .claims()
            .claim_run("runner-a", &limits(2))
            .await
            .unwrap()
            .is_none()
    );
    let notices = store.controls().unposted_notices(10).await.unwrap();
    assert_eq!(notices.len(), 1);
    assert_eq!(notices[0].kind, "attempts");
    // !retry: released, with a fresh count.
    let mut tx = store.begin_write().await.unwrap();
    let retried = tx
        .holds()
        .set_held(run, false, ALEX, "retried", true)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!((retried.held, retried.failures), (false, 0));
    assert!(
        store
            .claims()
            .claim_run("runner-a", &limits(2))
            .await
            .unwrap()
            .is_some()
    );
}

async fn pause_and_hold_all_stop_claims(db: Db) {
    let test = TestDb::new(db).await;
    let store = test.open().await;
    queued_run(&store, 1).await;
    for control in [Control::Paused, Control::HoldAll] {
        let mut tx = store.begin_write().await.unwrap();
        tx.controls()
            .set_control(control, true, ALEX)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        assert!(store.controls().control(control).await.unwrap());
        assert!(
            store
                .claims()
                .claim_run("runner-a", &limits(2))
                .await
                .unwrap()
                .is_none()
        );
        assert_eq!(store.claims().work_in_sight().await.unwrap(), 0);
        let mut tx = store.begin_write().await.unwrap();
        tx.controls()
            .set_control(control, false, ALEX)
            .await
            .unwrap();
        tx.commit().await.unwrap();
    }
    assert_eq!(store.claims().work_in_sight().await.unwrap(), 1);
    assert!(
        store
            .claims()
            .claim_run("runner-a", &limits(2))
            .await
            .unwrap()
            .is_some()
    );
}

async fn changes_wake_watchers(db: Db) {
    let test = TestDb::new(db).await;
    let store = test.open().await;
    // Another process's store: only the database connects them.
    let other = test.open().await;
    let mut changes = other.changes();
    within(WAIT, "the watcher to listen", changes.ready()).await;
    changes.mark_seen();
    let waiter = tokio::spawn(async move {
        changes.changed().await;
    });
    queued_run(&store, 1).await;
    tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .expect("a change in one store wakes a watcher of another")
        .unwrap();
}
