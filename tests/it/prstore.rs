//! The store of the PR loop, Eagle's carry-outs, intake and the analyzer's
//! jobs, on SQLite and PostgreSQL alike: PR work claimed while the run
//! stays in `pr`, polls fenced by the run's last change, merges bound to a
//! head and expired by a push, a new PR starting afresh, carry-outs claimed
//! and recorded once, idempotent imports, and jobs taken up once.

use std::time::Duration;

use eagle::store::{
    Approval, ClaimLimits, ExternalTask, NewRequest, NewTask, PrLink, PrOutcome, PrPoll, PrWork,
    RequestStatus, RequestVia, RunEnd, RunState, Store, TaskStatus, Upserted,
};

use crate::support::{Db, TestDb, WAIT};

on_both_backends!(
    pr_work_is_claimed_in_pr_and_polls_are_fenced,
    carry_outs_are_claimed_and_recorded_once,
    imports_are_idempotent_and_jobs_taken_up_once,
);

const ALEX: &str = "human:26 <alex@example.com>";
const SHA1: &str = "1111111111111111111111111111111111111111";
const SHA2: &str = "2222222222222222222222222222222222222222";

fn limits() -> ClaimLimits {
    ClaimLimits {
        max_workers: 2,
        lease: Duration::from_secs(30),
        alive_for: Duration::from_secs(600),
        cost_cap: None,
    }
}

async fn run_of(store: &Store, id: i64) -> eagle::store::Run {
    let mut tx = store.begin_read().await.unwrap();
    tx.tasks().run(id).await.unwrap().unwrap()
}

/// A run that reached `pr` with PR #7.
async fn run_in_pr(store: &Store) -> i64 {
    let mut tx = store.begin_write().await.unwrap();
    let task = tx
        .tasks()
        .insert_task(&NewTask {
            task_gid: "zulip:1".into(),
            source: "chat".into(),
            title: "tabs".into(),
            ..NewTask::default()
        })
        .await
        .unwrap()
        .unwrap();
    let run = tx
        .transitions()
        .start_run(task, ALEX, "!go")
        .await
        .unwrap()
        .id;
    tx.commit().await.unwrap();
    let claim = store
        .claims()
        .claim_run("runner-a", &limits())
        .await
        .unwrap()
        .unwrap();
    let mut tx = store.begin_write().await.unwrap();
    tx.workers()
        .finish_attempt(
            &claim.fence,
            Some(0),
            &RunEnd::Moved {
                to: RunState::Pr,
                reason: "[DONE: pr_ready]".into(),
                pr: Some(PrLink {
                    number: 7,
                    url: Some("https://github.com/acme/app/pull/7".into()),
                    repo: Some("acme/app".into()),
                }),
            },
        )
        .await
        .unwrap();
    tx.commit().await.unwrap();
    run
}

/// The claimed worker asks to merge PR #7.
async fn ask_merge(
    tx: &mut eagle::store::Tx,
    claim: &eagle::store::Claim,
) -> eagle::store::Request {
    tx.requests()
        .record_request(
            &NewRequest {
                run_id: claim.run.id,
                attempt: claim.fence.attempt,
                key: "sock:1".into(),
                via: RequestVia::Socket,
                escalate: false,
                action: "merge_pr".into(),
                body: "PR #7".into(),
            },
            &claim.fence,
        )
        .await
        .unwrap()
        .request
}

fn poll<'a>(run: &eagle::store::Run, head: &'a str, work: Option<PrWork>) -> PrPoll<'a> {
    PrPoll {
        run: run.id,
        state: run.state,
        head_sha: head,
        pr_url: None,
        status: "polled",
        poll: Some("{}"),
        work,
        counts_ci_attempt: work == Some(PrWork::FixCi),
        counts_round: work.is_some(),
        read_at: run.updated_at,
        ci_triggered_sha: None,
        comments_seen_at: None,
        seen: None,
    }
}

async fn pr_work_is_claimed_in_pr_and_polls_are_fenced(db: Db) {
    let test = TestDb::new(db).await;
    let store = test.open().await;
    let id = run_in_pr(&store).await;
    let run = run_of(&store, id).await;
    assert_eq!((run.state, run.pr_number), (RunState::Pr, Some(7)));
    assert_eq!(
        run.pr_url.as_deref(),
        Some("https://github.com/acme/app/pull/7")
    );
    assert_eq!(store.prs().prs_to_look_at().await.unwrap(), 1);
    assert_eq!(store.prs().runs_to_watch(10).await.unwrap().len(), 1);
    // Nothing to do while CI runs: not claimable.
    assert!(
        store
            .claims()
            .claim_run("runner-b", &limits())
            .await
            .unwrap()
            .is_none()
    );

    // CI failed: fix-ci asked for, counted.
    let mut tx = store.begin_write().await.unwrap();
    let polled = tx
        .prs()
        .record_pr_poll(&poll(&run, SHA1, Some(PrWork::FixCi)))
        .await
        .unwrap()
        .expect("recorded");
    tx.commit().await.unwrap();
    assert!(polled.new_head);
    let run = run_of(&store, id).await;
    assert_eq!(run.pr_work.0, Some(PrWork::FixCi));
    assert_eq!((run.ci_attempts, run.pr_rounds), (1, 1));
    assert_eq!(run.head_sha.as_deref(), Some(SHA1));
    assert_eq!(store.prs().prs_to_look_at().await.unwrap(), 0);
    // A poll that read the run before its last change writes nothing.
    let mut stale = poll(&run, SHA1, None);
    stale.read_at = run.updated_at - chrono::TimeDelta::seconds(1);
    let mut tx = store.begin_write().await.unwrap();
    assert!(tx.prs().record_pr_poll(&stale).await.unwrap().is_none());
    drop(tx);

    // Claimed for the work: the run stays in pr and leaves the watch list.
    let claim = store
        .claims()
        .claim_run("runner-b", &limits())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((claim.from, claim.run.state), (RunState::Pr, RunState::Pr));
    assert!(store.prs().runs_to_watch(10).await.unwrap().is_empty());
    let mut tx = store.begin_write().await.unwrap();
    assert!(
        tx.prs()
            .record_pr_poll(&poll(&claim.run, SHA1, None))
            .await
            .unwrap()
            .is_none(),
        "never over a worker"
    );
    // A merge asked now binds to the head the loop saw.
    let merge = ask_merge(&mut tx, &claim).await;
    tx.commit().await.unwrap();
    assert_eq!(merge.bound_sha.as_deref(), Some(SHA1));
    let mut tx = store.begin_write().await.unwrap();
    tx.workers()
        .finish_attempt(&claim.fence, Some(3), &RunEnd::Waiting)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let run = run_of(&store, id).await;
    assert_eq!(run.pr_work.0, Some(PrWork::FixCi), "kept while it waits");

    // A push: the merge request of the old head expires.
    let mut again = poll(&run, SHA2, Some(PrWork::FixCi));
    (again.counts_ci_attempt, again.counts_round) = (false, false);
    let mut tx = store.begin_write().await.unwrap();
    let polled = tx.prs().record_pr_poll(&again).await.unwrap().unwrap();
    tx.commit().await.unwrap();
    assert_eq!(polled.expired.len(), 1);
    let expired = store.requests().request(merge.id).await.unwrap().unwrap();
    assert_eq!(expired.status, RequestStatus::Expired);
    assert!(
        expired
            .decision_reason
            .as_deref()
            .is_some_and(|r| r.contains("moved to 2222222")),
        "{expired:?}"
    );
    let run = run_of(&store, id).await;
    assert_eq!(
        run.ci_attempts, 1,
        "the same fix-ci work is not a new attempt"
    );

    // A green review binds to the head; another PR starts afresh.
    let claim = store
        .claims()
        .claim_run("runner-b", &limits())
        .await
        .unwrap()
        .unwrap();
    let mut tx = store.begin_write().await.unwrap();
    tx.workers()
        .finish_attempt(
            &claim.fence,
            Some(0),
            &RunEnd::PrWorkDone {
                outcome: PrOutcome::ReviewGreen,
                reason: "[DONE: review_green]".into(),
            },
        )
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let run = run_of(&store, id).await;
    assert_eq!(run.review_green_sha.as_deref(), Some(SHA2));
    assert_eq!(run.pr_work.0, None);
    assert_eq!(run.pr_work_done_sha.as_deref(), Some(SHA2));
    let mut tx = store.begin_write().await.unwrap();
    tx.prs()
        .record_pr_link(
            id,
            &PrLink {
                number: 8,
                url: None,
                repo: None,
            },
        )
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let run = run_of(&store, id).await;
    assert_eq!(run.pr_number, Some(8));
    assert_eq!((run.ci_attempts, run.pr_rounds), (0, 0));
    assert!(run.head_sha.is_none() && run.review_green_sha.is_none() && run.pr_url.is_none());
}

async fn carry_outs_are_claimed_and_recorded_once(db: Db) {
    let test = TestDb::new(db).await;
    let store = test.open().await;
    let id = run_in_pr(&store).await;
    let run = run_of(&store, id).await;
    let mut tx = store.begin_write().await.unwrap();
    tx.prs()
        .record_pr_poll(&poll(&run, SHA1, Some(PrWork::PrReview)))
        .await
        .unwrap()
        .unwrap();
    tx.commit().await.unwrap();
    let claim = store
        .claims()
        .claim_run("runner-a", &limits())
        .await
        .unwrap()
        .unwrap();
    let mut tx = store.begin_write().await.unwrap();
    let merge = ask_merge(&mut tx, &claim).await;
    tx.commit().await.unwrap();
    assert!(
        store
            .carried()
            .requests_to_carry_out(10)
            .await
            .unwrap()
            .is_empty()
    );
    let mut tx = store.begin_write().await.unwrap();
    tx.requests()
        .human_decision(
            merge.id,
            &Approval {
                approve: true,
                actor: ALEX,
                text: None,
                source_message_id: None,
            },
        )
        .await
        .unwrap()
        .expect("decided");
    tx.commit().await.unwrap();
    let due = store.carried().requests_to_carry_out(10).await.unwrap();
    assert_eq!(due.iter().map(|r| r.id).collect::<Vec<_>>(), vec![merge.id]);
    let ttl = Duration::from_secs(600);
    assert!(
        store
            .carried()
            .claim_carry_out(merge.id, "eagle-a", ttl)
            .await
            .unwrap()
    );
    assert!(
        store
            .carried()
            .claim_carry_out(merge.id, "eagle-a", ttl)
            .await
            .unwrap(),
        "its own again"
    );
    assert!(
        !store
            .carried()
            .claim_carry_out(merge.id, "eagle-b", ttl)
            .await
            .unwrap()
    );
    let mut tx = store.begin_write().await.unwrap();
    assert!(
        tx.carried()
            .record_carried_out(merge.id, "merged", true)
            .await
            .unwrap()
    );
    assert!(
        !tx.carried()
            .record_carried_out(merge.id, "merged", true)
            .await
            .unwrap()
    );
    tx.commit().await.unwrap();
    assert!(
        store
            .carried()
            .requests_to_carry_out(10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        !store
            .carried()
            .claim_carry_out(merge.id, "eagle-b", ttl)
            .await
            .unwrap()
    );
    let done = store.requests().request(merge.id).await.unwrap().unwrap();
    assert_eq!(done.carried_out.as_deref(), Some("merged"));
    let trail = store
        .audit_log()
        .audit_trail(&format!("request:{}", merge.id))
        .await
        .unwrap();
    assert!(
        trail.iter().any(|e| e.action == "request.carried_out"),
        "{trail:#?}"
    );
}

async fn imports_are_idempotent_and_jobs_taken_up_once(db: Db) {
    let test = TestDb::new(db).await;
    let store = test.open().await;
    let task = |gid: &str, title: &str, closed: bool| ExternalTask {
        task_gid: format!("asana:{gid}"),
        source: "user_reports".into(),
        title: title.into(),
        platform: Some("macos".into()),
        closed,
        ..ExternalTask::default()
    };
    let mut tx = store.begin_write().await.unwrap();
    let created = tx
        .intake()
        .upsert_external_task(&task("1", "Tabs", false), "test")
        .await
        .unwrap();
    let again = tx
        .intake()
        .upsert_external_task(&task("1", "Tabs", false), "test")
        .await
        .unwrap();
    let renamed = tx
        .intake()
        .upsert_external_task(&task("1", "Tab bar", false), "test")
        .await
        .unwrap();
    let done_there = tx
        .intake()
        .upsert_external_task(&task("2", "Old", true), "test")
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let Upserted::Created(id) = created else {
        panic!("{created:?}")
    };
    assert_eq!(again, Upserted::Unchanged(id));
    assert_eq!(renamed, Upserted::Updated(id));
    assert_eq!(done_there, Upserted::Ignored);
    assert_eq!(store.analyses().analyzer_work().await.unwrap(), 1);
    // Completed there while it waits: it leaves the inbox.
    let mut tx = store.begin_write().await.unwrap();
    tx.intake()
        .upsert_external_task(&task("1", "Tab bar", true), "test")
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(
        store.analyses().task_statuses(&[id, 999]).await.unwrap(),
        vec![(id, TaskStatus::Cancelled)]
    );
    // The import's mark.
    assert!(store.imported_at("asana").await.unwrap().is_none());
    let at = chrono::DateTime::from_timestamp_millis(1_780_000_000_123).unwrap();
    let mut tx = store.begin_write().await.unwrap();
    tx.intake()
        .set_imported_at("asana", at, "test")
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(store.imported_at("asana").await.unwrap(), Some(at));

    // A job is taken up once, and ends once.
    let to = eagle::store::Destination::Direct { user_ids: vec![26] };
    let mut tx = store.begin_write().await.unwrap();
    let job = tx
        .analyses()
        .request_analyzer_job(true, ALEX, "eagle", &to)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let jobs = store.analyses().open_analyzer_jobs().await.unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(
        (jobs[0].id, jobs[0].reanalyze, &jobs[0].reply_to),
        (job, true, &to)
    );
    assert_eq!(store.analyses().analyzer_work().await.unwrap(), 1);
    let mut tx = store.begin_write().await.unwrap();
    assert!(tx.analyses().set_job_reopened(job, &[id]).await.unwrap());
    assert!(
        !tx.analyses().set_job_reopened(job, &[]).await.unwrap(),
        "taken up once"
    );
    assert!(tx.analyses().finish_analyzer_job(job).await.unwrap());
    assert!(!tx.analyses().finish_analyzer_job(job).await.unwrap());
    tx.commit().await.unwrap();
    assert!(
        store
            .analyses()
            .open_analyzer_jobs()
            .await
            .unwrap()
            .is_empty()
    );
}

/// How many backends that hold a lock in `schema` wait for a lock held by
/// another backend that holds one there: this test's own connections
/// waiting for each other, whatever else runs on the server.
async fn lock_waits_in(watcher: &sqlx::PgPool, schema: &str) -> i64 {
    sqlx::query_scalar(
        "WITH ours AS (
             SELECT DISTINCT l.pid FROM pg_locks l
             JOIN pg_class c ON c.oid = l.relation
             JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
               AND n.nspname = $1
         )
         SELECT COUNT(*) FROM ours w
         WHERE EXISTS (SELECT 1 FROM ours h WHERE h.pid = ANY (pg_blocking_pids(w.pid)))",
    )
    .bind(schema)
    .fetch_one(watcher)
    .await
    .unwrap()
}

/// `!go` and the analyzer concluding on the same task at once (PostgreSQL,
/// where nothing serialises whole transactions): the later one waits for
/// the earlier and sees what it did, so the `!go` is not refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_go_while_the_analyzer_concludes_waits_for_it_on_postgres() {
    let test = TestDb::new(Db::Postgres).await;
    let store = test.open().await;
    let mut tx = store.begin_write().await.unwrap();
    let task = tx
        .tasks()
        .insert_task(&NewTask {
            task_gid: "zulip:1".into(),
            source: "chat".into(),
            title: "tabs".into(),
            ..NewTask::default()
        })
        .await
        .unwrap()
        .unwrap();
    tx.commit().await.unwrap();
    // The analyzer concludes and holds its transaction open...
    let mut analyzer = store.begin_write().await.unwrap();
    let concluded = analyzer
        .analyses()
        .record_analysis(
            task,
            &eagle::store::Analysis {
                status: Some(TaskStatus::ForReview),
                reason: "kept".into(),
                ..eagle::store::Analysis::default()
            },
            "analyzer",
        )
        .await
        .unwrap();
    assert!(concluded);
    // ...while an approver's `!go` arrives.
    let mut go = tokio::spawn({
        let store = store.clone();
        async move {
            let mut tx = store.begin_write().await.unwrap();
            let run = tx.transitions().start_run(task, ALEX, "!go").await;
            if run.is_ok() {
                tx.commit().await.unwrap();
            }
            run.map(|r| r.id)
        }
    });
    // The `!go` waits for the analyzer's row lock.
    let schema = test.schema().expect("a PostgreSQL schema");
    let watcher = sqlx::PgPool::connect(&test.url).await.unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    while lock_waits_in(&watcher, schema).await == 0 {
        if go.is_finished() {
            let ended = (&mut go).await.unwrap();
            panic!("the !go did not wait for the analyzer's transaction: it ended with {ended:?}");
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "after {WAIT:?} the !go neither waits for the analyzer's lock nor has it ended"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    analyzer.commit().await.unwrap();
    let run = go
        .await
        .unwrap()
        .expect("the !go goes through after the analysis");
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(
        tx.tasks().task(task).await.unwrap().unwrap().status,
        TaskStatus::Approved
    );
    assert_eq!(
        tx.tasks().run(run).await.unwrap().unwrap().state,
        RunState::Queued
    );
}
