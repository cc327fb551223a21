//! Runs: the one transition table, claims by runners, fenced writes, the
//! global worker slots, and the worker's mirror in the run row.
//!
//! Every change of a run's `state` or a task's `status` goes through
//! [`Tx::transition_run`] / [`Tx::transition_task`], which check the tables
//! below and refuse anything else with [`StoreError::IllegalTransition`].
//! A task follows its run (see [`task_follows`]), and the requests of a run
//! that ends expire in the same transaction.
//!
//! After a runner claims a run, everything it writes about the run is
//! fenced by `(lease_owner, attempt)`: a runner that lost its claim (its
//! lease expired and another took the run, or a human cancelled it) gets
//! [`StoreError::Fenced`] and stops, never overwriting the newer state.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::tasks::{RUN_COLUMNS, sql};
use super::{
    NewAuditEntry, QueryContext, Result, Run, RunState, Store, StoreError, TaskStatus, Tx, on_tx,
};

use RunState as R;
use TaskStatus as T;

/// The run transitions, with when each happens.
pub const RUN_TRANSITIONS: &[(RunState, RunState, &str)] = &[
    (
        R::Queued,
        R::InProgress,
        "a runner claims it and starts a worker",
    ),
    (R::Queued, R::Cancelled, "!cancel"),
    (R::InProgress, R::Pr, "the worker reports [DONE: pr_ready]"),
    (
        R::InProgress,
        R::Abandoned,
        "the worker reports [DONE: abandoned]",
    ),
    (R::InProgress, R::Cancelled, "!cancel"),
    (
        R::Pr,
        R::Complete,
        "the PR loop finds CI and the review green and nothing unresolved, or the PR merged",
    ),
    (R::Pr, R::Abandoned, "the PR was closed unmerged"),
    (R::Pr, R::Cancelled, "!cancel"),
    (
        R::Complete,
        R::Pr,
        "a human comments on a complete draft PR",
    ),
    (R::Abandoned, R::Queued, "!retry"),
];

/// The task transitions, with when each happens.
pub const TASK_TRANSITIONS: &[(TaskStatus, TaskStatus, &str)] = &[
    (T::Pending, T::ForReview, "the analyzer keeps it"),
    (T::Pending, T::AwaitingGo, "the analyzer finds it ready"),
    (T::Pending, T::Skip, "a filter or the analysis skips it"),
    (T::Pending, T::Approved, "!go"),
    (T::Pending, T::Cancelled, "withdrawn"),
    (T::ForReview, T::AwaitingGo, "reviewed"),
    (T::ForReview, T::Approved, "!go"),
    (T::ForReview, T::Skip, "skipped on review"),
    (T::ForReview, T::Cancelled, "withdrawn"),
    (T::AwaitingGo, T::Approved, "!go"),
    (T::AwaitingGo, T::ForReview, "sent back for review"),
    (T::AwaitingGo, T::Skip, "skipped"),
    (T::AwaitingGo, T::Cancelled, "withdrawn"),
    (T::Skip, T::Pending, "re-analysis (the seed's Phase 7)"),
    (T::Skip, T::Approved, "!go overrides a skip (recorded)"),
    (T::Skip, T::Cancelled, "closed where it came from"),
    (T::Approved, T::Done, "its run is complete"),
    (T::Approved, T::Cancelled, "its run is cancelled"),
    (
        T::Approved,
        T::ForReview,
        "its run is abandoned: a human looks again",
    ),
    (
        T::Done,
        T::Approved,
        "its run goes back from complete to pr",
    ),
];

/// Whether the transition table allows a run to go from `from` to `to`.
pub fn run_transition_allowed(from: RunState, to: RunState) -> bool {
    RUN_TRANSITIONS
        .iter()
        .any(|(f, t, _)| *f == from && *t == to)
}

/// Whether the transition table allows a task to go from `from` to `to`.
pub fn task_transition_allowed(from: TaskStatus, to: TaskStatus) -> bool {
    TASK_TRANSITIONS
        .iter()
        .any(|(f, t, _)| *f == from && *t == to)
}

/// What the task does when its run goes to `to`.
pub fn task_follows(from: RunState, to: RunState) -> Option<TaskStatus> {
    match (from, to) {
        (_, R::Complete) => Some(T::Done),
        (_, R::Cancelled) => Some(T::Cancelled),
        (_, R::Abandoned) => Some(T::ForReview),
        (R::Complete, R::Pr) | (R::Abandoned, R::Queued) => Some(T::Approved),
        _ => None,
    }
}

/// A runner's claim on a run: every write it makes is conditional on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    pub run: i64,
    pub owner: String,
    pub attempt: i64,
}

/// A state change to make.
#[derive(Debug, Clone)]
pub struct Transition<'a> {
    pub run: i64,
    pub to: RunState,
    /// Who or what: `human:26 <alex@…>`, `runner:…`, `eagle`.
    pub actor: &'a str,
    pub reason: &'a str,
    /// Set when a runner makes the change: it must still hold the run.
    pub fence: Option<&'a Fence>,
}

/// How claims are bounded.
#[derive(Debug, Clone, Copy)]
pub struct ClaimLimits {
    /// The global number of workers, across every runner.
    pub max_workers: i64,
    /// How long a claim lasts without a heartbeat.
    pub lease: Duration,
    /// How long the worker may outlive its runner (its hard timeout, the
    /// wrap-up grace and a margin): nobody else may claim the run before.
    pub alive_for: Duration,
    /// The cost cap a run starts with (`!retry` raises a run's own).
    pub cost_cap: Option<f64>,
}

/// A claimed run, ready for a worker.
#[derive(Debug, Clone)]
pub struct Claim {
    pub run: Run,
    pub fence: Fence,
    pub slot: i64,
    /// The state the run had before the claim (`queued`: a fresh start).
    pub from: RunState,
}

/// What the runner records about a worker it started.
#[derive(Debug, Clone, Default)]
pub struct WorkerMirror {
    pub pid: i64,
    pub pgid: i64,
    pub host: String,
    pub start_ticks: i64,
    pub prompt_kind: String,
    pub session_id: Option<String>,
    pub log_path: String,
    pub exit_file: String,
    pub socket_path: String,
    pub token_sha256: String,
    pub workdir: String,
    pub branch: Option<String>,
    /// How long the worker may outlive its runner (its shim's deadline and a margin).
    pub alive_for: Duration,
}

/// What a worker on a run in `pr` reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrOutcome {
    /// A fix is pushed (or the comments answered): look again.
    Done,
    /// The review found the PR's head good (`[DONE: review_green]`).
    ReviewGreen,
    /// The review asked for changes (`[DONE: changes_requested]`): a
    /// fix-comments worker answers them.
    ChangesRequested,
}

/// How a worker's attempt ended, as the runner judged it.
#[derive(Debug, Clone, PartialEq)]
pub enum RunEnd {
    /// The worker reported a result that moves the run (`pr`, `abandoned`),
    /// naming its PR when it opened one.
    Moved {
        to: RunState,
        reason: String,
        pr: Option<super::PrLink>,
    },
    /// A worker on a run in `pr` (fix-ci, fix-comments, pr-review) finished
    /// its part: the PR loop looks at the PR again.
    PrWorkDone { outcome: PrOutcome, reason: String },
    /// It crashed, was killed by a watchdog, or stopped without a result:
    /// back to the pool, or held for the owner after `max_attempts`.
    Failed {
        reason: String,
        max_attempts: i64,
        owner: String,
    },
    /// It stopped to wait for decisions (escalated or still pending); the
    /// run is resumed once they are made.
    Waiting,
    /// It was stopped on purpose (`!hold`, `!hold all`, `!cancel`).
    Stopped { reason: String },
    /// It reached the run's cost cap: held for the owner.
    CostCap { reason: String, owner: String },
}

impl Tx {
    /// One run, locked for update on PostgreSQL (SQLite's write transaction
    /// already holds the lock).
    pub(super) async fn run_for_update(&mut self, id: i64) -> Result<Option<Run>> {
        let lock = if self.backend() == super::Backend::Postgres {
            " FOR UPDATE"
        } else {
            ""
        };
        let query = sql(&[
            "SELECT ",
            RUN_COLUMNS,
            " FROM executor_runs WHERE id = $1",
            lock,
        ]);
        on_tx!(self, conn => sqlx::query_as(query).bind(id).fetch_optional(conn).await)
            .op("reading a run")
    }

    fn check_fence(run: &Run, fence: Option<&Fence>) -> Result<()> {
        match fence {
            Some(f)
                if run.lease_owner.as_deref() != Some(f.owner.as_str())
                    || run.attempt != f.attempt =>
            {
                Err(StoreError::Fenced(format!("run {}", run.id)))
            }
            _ => Ok(()),
        }
    }

    /// Changes a run's state through the transition table; the task follows,
    /// and a run that ends expires its open requests. Audited.
    pub async fn transition_run(&mut self, t: &Transition<'_>) -> Result<Run> {
        let run = self
            .run_for_update(t.run)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("run {} does not exist", t.run)))?;
        Self::check_fence(&run, t.fence)?;
        let from = run.state;
        if !run_transition_allowed(from, t.to) {
            return Err(StoreError::IllegalTransition {
                what: format!("run {}", run.id),
                from: from.as_str(),
                to: t.to.as_str(),
            });
        }
        let now = super::now();
        let ending = t.to.is_final();
        on_tx!(self, conn => {
            sqlx::query(
                "UPDATE executor_runs SET state = $2, state_reason = $3, updated_at = $4, \
                 completed_at = CASE WHEN $5 THEN $4 ELSE NULL END, \
                 waiting_on = CASE WHEN $5 THEN NULL ELSE waiting_on END, \
                 held = CASE WHEN $5 THEN FALSE ELSE held END, \
                 failures = CASE WHEN $6 THEN 0 ELSE failures END \
                 WHERE id = $1 AND state = $7",
            )
            .bind(run.id)
            .bind(t.to.as_str())
            .bind(t.reason)
            .bind(now)
            .bind(ending)
            .bind(from == R::Abandoned)
            .bind(from.as_str())
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("changing a run's state")?;
        if let Some(status) = task_follows(from, t.to) {
            self.task_follows_run(&run, status, t.actor).await?;
        }
        if ending {
            self.expire_requests_of_run(run.id, &format!("run {} is {}", run.id, t.to.as_str()))
                .await?;
        }
        self.audit(&NewAuditEntry {
            actor: t.actor.to_string(),
            action: format!("run.{}", t.to.as_str()),
            subject: format!("run:{}", run.id),
            decision: Some(format!("{} → {}", from.as_str(), t.to.as_str())),
            reason: Some(t.reason.to_string()),
            ..NewAuditEntry::default()
        })
        .await?;
        self.notify().await?;
        self.run(run.id)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("run {} vanished", run.id)))
    }

    async fn task_follows_run(&mut self, run: &Run, to: TaskStatus, actor: &str) -> Result<()> {
        let Some(task) = self.task_by_gid(&run.task_gid).await? else {
            return Ok(());
        };
        if task.status == to {
            return Ok(());
        }
        self.transition_task(
            task.id,
            to,
            actor,
            &format!("run {} is {}", run.id, run_state_after(to)),
        )
        .await
    }

    /// Changes a task's status through the transition table. Audited.
    pub async fn transition_task(
        &mut self,
        id: i64,
        to: TaskStatus,
        actor: &str,
        reason: &str,
    ) -> Result<()> {
        // Locked (on PostgreSQL) until commit: a `!go` and the analyzer
        // concluding on the same task at once are serialised, and the later
        // one sees what the earlier did.
        let task = self
            .task_for_update(id)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("task {id} does not exist")))?;
        if !task_transition_allowed(task.status, to) {
            return Err(StoreError::IllegalTransition {
                what: format!("task #{id}"),
                from: task.status.as_str(),
                to: to.as_str(),
            });
        }
        let now = super::now();
        let changed = on_tx!(self, conn => {
            sqlx::query(
                "UPDATE executor_queue SET status = $2, status_reason = $3, updated_at = $4 \
                 WHERE id = $1 AND status = $5",
            )
            .bind(id)
            .bind(to.as_str())
            .bind(reason)
            .bind(now)
            .bind(task.status.as_str())
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("changing a task's status")?;
        if changed != 1 {
            return Err(StoreError::IllegalTransition {
                what: format!("task #{id} (changed meanwhile)"),
                from: task.status.as_str(),
                to: to.as_str(),
            });
        }
        self.audit(&NewAuditEntry {
            actor: actor.to_string(),
            action: format!("task.{}", to.as_str()),
            subject: format!("task:{id}"),
            decision: Some(format!("{} → {}", task.status.as_str(), to.as_str())),
            reason: Some(reason.to_string()),
            ..NewAuditEntry::default()
        })
        .await?;
        Ok(())
    }

    /// `!go`: approves a task and creates its run in `queued`, with its
    /// topic `run <id>` in the executor channel. Returns the run.
    pub async fn start_run(&mut self, task_id: i64, actor: &str, reason: &str) -> Result<Run> {
        self.transition_task(task_id, T::Approved, actor, reason)
            .await?;
        let task = self
            .task(task_id)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("task {task_id} vanished")))?;
        let id = self
            .insert_run(&super::NewRun {
                task_gid: task.task_gid.clone(),
                thread_id: None,
            })
            .await?;
        let topic = format!("run {id}");
        let now = super::now();
        on_tx!(self, conn => {
            sqlx::query("UPDATE executor_runs SET thread_id = $2, thread_key = $3, updated_at = $4 WHERE id = $1")
                .bind(id)
                .bind(&topic)
                .bind(crate::text::fold_key(&topic))
                .bind(now)
                .execute(conn)
                .await
                .map(|done| done.rows_affected())
        })
        .op("naming a run's topic")?;
        on_tx!(self, conn => {
            sqlx::query("UPDATE executor_queue SET executor_run_id = $2, updated_at = $3 WHERE id = $1")
                .bind(task_id)
                .bind(id)
                .bind(now)
                .execute(conn)
                .await
                .map(|done| done.rows_affected())
        })
        .op("linking a task to its run")?;
        self.audit(&NewAuditEntry {
            actor: actor.to_string(),
            action: "run.queued".into(),
            subject: format!("run:{id}"),
            reason: Some(format!("task #{task_id}: {reason}")),
            ..NewAuditEntry::default()
        })
        .await?;
        self.notify().await?;
        self.run(id)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("run {id} vanished")))
    }

    /// Sets or clears `held` on a run that has not ended (`!hold`, `!unhold`,
    /// `!retry`). Clearing it also clears the failures count and who the run
    /// was waiting on, so that the run is claimed again. Audited.
    pub async fn set_held(
        &mut self,
        run_id: i64,
        held: bool,
        actor: &str,
        reason: &str,
        retry: bool,
    ) -> Result<Run> {
        let run = self
            .run_for_update(run_id)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("run {run_id} does not exist")))?;
        if run.state.is_final() {
            return Err(StoreError::IllegalTransition {
                what: format!("run {run_id}"),
                from: run.state.as_str(),
                to: if held { "held" } else { "unheld" },
            });
        }
        let now = super::now();
        on_tx!(self, conn => {
            sqlx::query(
                "UPDATE executor_runs SET held = $2, updated_at = $3, \
                 waiting_on = CASE WHEN $2 THEN waiting_on ELSE NULL END, \
                 failures = CASE WHEN $4 THEN 0 ELSE failures END, \
                 ci_attempts = CASE WHEN $4 THEN 0 ELSE ci_attempts END, \
                 pr_rounds = CASE WHEN $4 THEN 0 ELSE pr_rounds END, \
                 cost_cap_usd = CASE WHEN $4 AND cost_cap_usd IS NOT NULL AND cost_usd >= cost_cap_usd \
                     THEN cost_usd + cost_cap_usd ELSE cost_cap_usd END, \
                 state_reason = $5 WHERE id = $1",
            )
            .bind(run_id)
            .bind(held)
            .bind(now)
            .bind(retry)
            .bind(reason)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("holding a run")?;
        let action = match (held, retry) {
            (true, _) => "run.held",
            (false, true) => "run.retried",
            (false, false) => "run.unheld",
        };
        self.audit(&NewAuditEntry {
            actor: actor.to_string(),
            action: action.into(),
            subject: format!("run:{run_id}"),
            reason: Some(reason.to_string()),
            ..NewAuditEntry::default()
        })
        .await?;
        self.notify().await?;
        self.run(run_id)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("run {run_id} vanished")))
    }

    /// Records who a run waits on (shown by `!status`), fenced if a runner says so.
    pub async fn set_waiting_on(
        &mut self,
        run_id: i64,
        who: Option<&str>,
        fence: Option<&Fence>,
    ) -> Result<()> {
        let now = super::now();
        let (owner, attempt) = fence_parts(fence);
        let changed = on_tx!(self, conn => {
            sqlx::query(
                "UPDATE executor_runs SET waiting_on = $2, updated_at = $3 WHERE id = $1 \
                 AND ($4 IS NULL OR (lease_owner = $4 AND attempt = $5))",
            )
            .bind(run_id)
            .bind(who)
            .bind(now)
            .bind(owner)
            .bind(attempt)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("recording who a run waits on")?;
        if changed == 0 && fence.is_some() {
            return Err(StoreError::Fenced(format!("run {run_id}")));
        }
        Ok(())
    }

    /// Clears who a run waits on once nothing of it waits for a decision
    /// (unless it is held, which a human must lift).
    pub async fn settle_waiting(&mut self, run_id: i64) -> Result<()> {
        let now = super::now();
        on_tx!(self, conn => {
            sqlx::query(
                "UPDATE executor_runs SET waiting_on = NULL, updated_at = $2 WHERE id = $1 \
                 AND NOT held AND waiting_on IS NOT NULL AND NOT EXISTS (SELECT 1 FROM worker_requests AS q \
                 WHERE q.run_id = executor_runs.id AND q.status IN ('pending', 'escalated'))",
            )
            .bind(run_id)
            .bind(now)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("settling who a run waits on")?;
        Ok(())
    }

    /// Records a worker the runner started for its claim.
    pub async fn record_worker(&mut self, fence: &Fence, worker: &WorkerMirror) -> Result<()> {
        let now = self.clock().await?;
        // The worker may outlive its runner until its shim ends it: from now
        // (not from the claim, which a slow clone may precede by long).
        let alive_until = now + delta(worker.alive_for);
        let changed = on_tx!(self, conn => {
            sqlx::query(
                "UPDATE executor_runs SET worker_pid = $4, worker_pgid = $5, worker_host = $6, \
                 worker_start_ticks = $7, worker_started_at = $8, prompt_kind = $9, \
                 session_cost_usd = CASE WHEN $10 IS NOT NULL AND worker_session_id IS NOT NULL \
                     AND worker_session_id = $10 THEN session_cost_usd ELSE 0 END, \
                 worker_session_id = COALESCE($10, worker_session_id), log_path = $11, \
                 worker_exit_file = $12, socket_path = $13, token_sha256 = $14, \
                 worktree_path = $15, branch_name = COALESCE($16, branch_name), \
                 worker_last_update = $8, worker_exit_code = NULL, log_offset = 0, \
                 updated_at = $8, worker_alive_until = $17 \
                 WHERE id = $1 AND lease_owner = $2 AND attempt = $3",
            )
            .bind(fence.run)
            .bind(&fence.owner)
            .bind(fence.attempt)
            .bind(worker.pid)
            .bind(worker.pgid)
            .bind(&worker.host)
            .bind(worker.start_ticks)
            .bind(now)
            .bind(&worker.prompt_kind)
            .bind(&worker.session_id)
            .bind(&worker.log_path)
            .bind(&worker.exit_file)
            .bind(&worker.socket_path)
            .bind(&worker.token_sha256)
            .bind(&worker.workdir)
            .bind(&worker.branch)
            .bind(alive_until)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("recording a worker")?;
        fenced(changed, fence)?;
        on_tx!(self, conn => {
            sqlx::query(
                "UPDATE worker_slots SET expires_at = CASE WHEN expires_at > $3 THEN expires_at ELSE $3 END \
                 WHERE run_id = $1 AND owner = $2",
            )
            .bind(fence.run)
            .bind(&fence.owner)
            .bind(alive_until)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("extending a worker slot")?;
        self.audit(&NewAuditEntry {
            actor: format!("runner:{}", fence.owner),
            action: "run.worker_started".into(),
            subject: format!("run:{}", fence.run),
            reason: Some(format!(
                "attempt {}: {} worker, pid {}",
                fence.attempt, worker.prompt_kind, worker.pid
            )),
            ..NewAuditEntry::default()
        })
        .await?;
        Ok(())
    }

    /// Records what the runner read of the worker's log: how far, when the
    /// last output came, and what the worker reported of itself. Claude Code
    /// reports a session's cost cumulatively (also across resumes), so
    /// `session_cost` is the session's total so far; the run's cost grows by
    /// what it adds.
    pub async fn record_progress(
        &mut self,
        fence: &Fence,
        offset: i64,
        last_output: Option<DateTime<Utc>>,
        session_cost: Option<f64>,
        turns_delta: i64,
        session_id: Option<&str>,
    ) -> Result<()> {
        let now = super::now();
        let changed = on_tx!(self, conn => {
            sqlx::query(
                "UPDATE executor_runs SET log_offset = $4, \
                 worker_last_update = COALESCE($5, worker_last_update), \
                 cost_usd = cost_usd + CASE WHEN $6 > session_cost_usd THEN $6 - session_cost_usd ELSE 0 END, \
                 session_cost_usd = CASE WHEN $6 > session_cost_usd THEN $6 ELSE session_cost_usd END, \
                 turns = turns + $7, \
                 worker_session_id = COALESCE($8, worker_session_id), updated_at = $9 \
                 WHERE id = $1 AND lease_owner = $2 AND attempt = $3",
            )
            .bind(fence.run)
            .bind(&fence.owner)
            .bind(fence.attempt)
            .bind(offset)
            .bind(last_output)
            .bind(session_cost)
            .bind(turns_delta)
            .bind(session_id)
            .bind(now)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("recording a worker's progress")?;
        fenced(changed, fence)
    }

    /// Ends a worker's attempt: frees its slot and its claim, records its
    /// exit, and applies `end` (a transition, a failure, a hold). Audited.
    pub async fn finish_attempt(
        &mut self,
        fence: &Fence,
        exit_code: Option<i64>,
        end: &RunEnd,
    ) -> Result<Run> {
        let run = self
            .run_for_update(fence.run)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("run {} does not exist", fence.run)))?;
        Self::check_fence(&run, Some(fence))?;
        // A run cancelled while its worker was ending stays cancelled.
        let stopped;
        let end = match end {
            RunEnd::Moved { .. } | RunEnd::PrWorkDone { .. } if run.state.is_final() => {
                stopped = RunEnd::Stopped {
                    reason: format!("the run is {}", run.state.as_str()),
                };
                &stopped
            }
            other => other,
        };
        let actor = format!("runner:{}", fence.owner);
        let now = super::now();
        if let Some(slot) = run.slot {
            self.release_slot(slot, run.id).await?;
        }
        let (failures, held, waiting_on, reason) = match end {
            RunEnd::Failed {
                reason,
                max_attempts,
                owner,
            } => {
                let failures = run.failures + 1;
                let give_up = failures >= *max_attempts;
                // A human's hold stands: a failure never lifts it.
                let waiting = if give_up {
                    Some(owner.clone())
                } else if run.held {
                    run.waiting_on.clone()
                } else {
                    None
                };
                (failures, give_up || run.held, waiting, reason.clone())
            }
            RunEnd::CostCap { reason, owner } => {
                (run.failures, true, Some(owner.clone()), reason.clone())
            }
            RunEnd::Stopped { reason } => (
                run.failures,
                run.held,
                run.waiting_on.clone(),
                reason.clone(),
            ),
            RunEnd::Waiting => (
                run.failures,
                run.held,
                run.waiting_on.clone(),
                "waiting for decisions".into(),
            ),
            // A human's hold stands: the next step waits for `!unhold`.
            RunEnd::Moved { reason, .. } | RunEnd::PrWorkDone { reason, .. } => (
                run.failures,
                run.held,
                run.held.then(|| run.waiting_on.clone()).flatten(),
                reason.clone(),
            ),
        };
        on_tx!(self, conn => {
            sqlx::query(
                "UPDATE executor_runs SET worker_pid = NULL, worker_pgid = NULL, \
                 worker_alive_until = NULL, worker_exit_code = $4, lease_owner = NULL, \
                 lease_expires_at = NULL, slot = NULL, failures = $5, held = $6, \
                 waiting_on = $7, state_reason = $8, updated_at = $9, \
                 worker_stuck_count = worker_stuck_count + $10 \
                 WHERE id = $1 AND lease_owner = $2 AND attempt = $3",
            )
            .bind(fence.run)
            .bind(&fence.owner)
            .bind(fence.attempt)
            .bind(exit_code)
            .bind(failures)
            .bind(held)
            .bind(&waiting_on)
            .bind(&reason)
            .bind(now)
            .bind(i64::from(matches!(end, RunEnd::Failed { .. })))
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("recording a worker's end")?;
        self.audit(&NewAuditEntry {
            actor: actor.clone(),
            action: "run.worker_exited".into(),
            subject: format!("run:{}", fence.run),
            decision: Some(
                match end {
                    RunEnd::Moved { .. } => "moved",
                    RunEnd::PrWorkDone { .. } => "pr_work_done",
                    RunEnd::Failed { .. } if held => "held",
                    RunEnd::Failed { .. } => "retry",
                    RunEnd::Waiting => "waiting",
                    RunEnd::Stopped { .. } => "stopped",
                    RunEnd::CostCap { .. } => "held",
                }
                .into(),
            ),
            reason: Some(match exit_code {
                Some(code) => format!("attempt {}: exit {code}: {reason}", fence.attempt),
                None => format!("attempt {}: {reason}", fence.attempt),
            }),
            ..NewAuditEntry::default()
        })
        .await?;
        if let RunEnd::Moved { to, reason, pr } = end {
            if let Some(link) = pr {
                self.record_pr_link(fence.run, link).await?;
            }
            // Unfenced now: the claim was released above, in this transaction.
            self.transition_run(&Transition {
                run: fence.run,
                to: *to,
                actor: &actor,
                reason,
                fence: None,
            })
            .await?;
        }
        if let RunEnd::PrWorkDone { outcome, .. } = end {
            self.pr_work_done(fence.run, *outcome, now).await?;
        }
        if held && matches!(end, RunEnd::Failed { .. } | RunEnd::CostCap { .. }) {
            let kind = if matches!(end, RunEnd::CostCap { .. }) {
                "cost_cap"
            } else {
                "attempts"
            };
            self.insert_notice(fence.run, kind, &reason).await?;
        }
        self.notify().await?;
        self.run(fence.run)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("run {} vanished", fence.run)))
    }

    /// How many global worker slots are held now.
    pub async fn busy_slots(&mut self) -> Result<i64> {
        let now = self.clock().await?;
        on_tx!(self, conn => {
            sqlx::query_scalar(
                "SELECT COUNT(*) FROM worker_slots WHERE run_id IS NOT NULL AND expires_at >= $1",
            )
            .bind(now)
            .fetch_one(conn)
            .await
        })
        .op("counting busy worker slots")
    }

    /// Frees a slot held for `run_id` (not one a newer claim took over).
    pub(super) async fn release_slot(&mut self, slot: i64, run_id: i64) -> Result<()> {
        on_tx!(self, conn => {
            sqlx::query(
                "UPDATE worker_slots SET run_id = NULL, owner = NULL, expires_at = NULL \
                 WHERE slot = $1 AND run_id = $2",
            )
            .bind(slot)
            .bind(run_id)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("freeing a worker slot")?;
        Ok(())
    }

    /// Takes a free slot among `1..=max` for `run_id`; `None` when all are held.
    async fn take_slot(
        &mut self,
        run_id: i64,
        owner: &str,
        max: i64,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<Option<i64>> {
        for slot in 1..=max.max(0) {
            let taken: Option<i64> = on_tx!(self, conn => {
                sqlx::query_scalar(
                    "INSERT INTO worker_slots (slot, run_id, owner, expires_at, fence) \
                     VALUES ($1, $2, $3, $4, 1) \
                     ON CONFLICT (slot) DO UPDATE SET run_id = excluded.run_id, \
                         owner = excluded.owner, expires_at = excluded.expires_at, \
                         fence = worker_slots.fence + 1 \
                     WHERE worker_slots.run_id IS NULL OR worker_slots.expires_at < $5 \
                     RETURNING slot",
                )
                .bind(slot)
                .bind(run_id)
                .bind(owner)
                .bind(until)
                .bind(now)
                .fetch_optional(conn)
                .await
            })
            .op("taking a worker slot")?;
            if taken.is_some() {
                return Ok(taken);
            }
        }
        Ok(None)
    }

    /// Takes over a run whose previous runner (on this host) is gone and
    /// whose worker this runner re-adopts or rescues. Returns the new fence.
    pub async fn adopt_run(
        &mut self,
        run: &Run,
        owner: &str,
        limits: &ClaimLimits,
    ) -> Result<Option<Fence>> {
        let now = self.clock().await?;
        let lease_until = now + delta(limits.lease);
        let changed = on_tx!(self, conn => {
            sqlx::query(
                "UPDATE executor_runs SET lease_owner = $4, lease_expires_at = $5, heartbeat_at = $6, \
                 updated_at = $6 WHERE id = $1 AND lease_owner = $2 AND attempt = $3",
            )
            .bind(run.id)
            .bind(&run.lease_owner)
            .bind(run.attempt)
            .bind(owner)
            .bind(lease_until)
            .bind(now)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("adopting a run")?;
        if changed == 0 {
            return Ok(None);
        }
        if let Some(slot) = run.slot {
            on_tx!(self, conn => {
                sqlx::query("UPDATE worker_slots SET owner = $3 WHERE slot = $1 AND run_id = $2")
                    .bind(slot)
                    .bind(run.id)
                    .bind(owner)
                    .execute(conn)
                    .await
                    .map(|done| done.rows_affected())
            })
            .op("adopting a worker slot")?;
        }
        self.audit(&NewAuditEntry {
            actor: format!("runner:{owner}"),
            action: "run.adopted".into(),
            subject: format!("run:{}", run.id),
            reason: Some(format!(
                "attempt {}: taken over from {}",
                run.attempt,
                run.lease_owner.as_deref().unwrap_or("nobody")
            )),
            ..NewAuditEntry::default()
        })
        .await?;
        Ok(Some(Fence {
            run: run.id,
            owner: owner.to_string(),
            attempt: run.attempt,
        }))
    }
}

impl Store {
    /// Claims the next run that needs a worker, if a global slot is free,
    /// claiming is not paused and nothing holds it. The claim, the slot and
    /// the state change commit together.
    pub async fn claim_run(&self, owner: &str, limits: &ClaimLimits) -> Result<Option<Claim>> {
        // A read first: most wake-ups find nothing to claim, and need not
        // take SQLite's write lock to learn it.
        if self.work_in_sight().await? == 0 {
            return Ok(None);
        }
        let mut tx = self.begin_write().await?;
        if tx.control(super::Control::Paused).await? || tx.control(super::Control::HoldAll).await? {
            return Ok(None);
        }
        let now = tx.clock().await?;
        let skip_locked = if tx.backend() == super::Backend::Postgres {
            " FOR UPDATE OF r SKIP LOCKED"
        } else {
            ""
        };
        let query = sql(&[
            "SELECT r.id FROM executor_runs AS r \
             WHERE (r.state IN ('queued', 'in_progress') OR (r.state = 'pr' AND r.pr_work IS NOT NULL)) \
             AND NOT r.held \
             AND (r.lease_owner IS NULL OR r.lease_expires_at < $1) \
             AND (r.worker_alive_until IS NULL OR r.worker_alive_until < $1) \
             AND NOT EXISTS (SELECT 1 FROM worker_requests AS q \
                 WHERE q.run_id = r.id AND q.status IN ('pending', 'escalated')) \
             ORDER BY r.id LIMIT 1",
            skip_locked,
        ]);
        let candidate: Option<i64> = on_tx!(tx, conn => {
            sqlx::query_scalar(query).bind(now).fetch_optional(conn).await
        })
        .op("finding a run to claim")?;
        let Some(run_id) = candidate else {
            return Ok(None);
        };
        let Some(run) = tx.run(run_id).await? else {
            return Ok(None);
        };
        let alive_until = now + delta(limits.alive_for);
        let lease_until = now + delta(limits.lease);
        let Some(slot) = tx
            .take_slot(
                run_id,
                owner,
                limits.max_workers,
                now,
                alive_until.max(lease_until),
            )
            .await?
        else {
            return Ok(None);
        };
        let from = run.state;
        let changed = on_tx!(tx, conn => {
            sqlx::query(
                "UPDATE executor_runs SET \
                 state = CASE WHEN state = 'pr' THEN 'pr' ELSE 'in_progress' END, lease_owner = $2, \
                 lease_expires_at = $3, heartbeat_at = $4, attempt = attempt + 1, slot = $5, \
                 worker_alive_until = $6, updated_at = $4, started_at = COALESCE(started_at, $4), \
                 waiting_on = NULL, worker_exit_code = NULL, \
                 cost_cap_usd = COALESCE(cost_cap_usd, $9) \
                 WHERE id = $1 AND state = $7 AND attempt = $8",
            )
            .bind(run_id)
            .bind(owner)
            .bind(lease_until)
            .bind(now)
            .bind(slot)
            .bind(alive_until)
            .bind(from.as_str())
            .bind(run.attempt)
            .bind(limits.cost_cap)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("claiming a run")?;
        if changed != 1 {
            return Ok(None);
        }
        let actor = format!("runner:{owner}");
        if from == R::Queued {
            tx.audit(&NewAuditEntry {
                actor: actor.clone(),
                action: "run.in_progress".into(),
                subject: format!("run:{run_id}"),
                decision: Some("queued → in_progress".into()),
                reason: Some("claimed by a runner".into()),
                ..NewAuditEntry::default()
            })
            .await?;
        }
        tx.audit(&NewAuditEntry {
            actor,
            action: "run.claimed".into(),
            subject: format!("run:{run_id}"),
            reason: Some(format!("attempt {} in slot {slot}", run.attempt + 1)),
            ..NewAuditEntry::default()
        })
        .await?;
        tx.notify().await?;
        let run = tx
            .run(run_id)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("run {run_id} vanished")))?;
        tx.commit().await?;
        let fence = Fence {
            run: run_id,
            owner: owner.to_string(),
            attempt: run.attempt,
        };
        Ok(Some(Claim {
            run,
            fence,
            slot,
            from,
        }))
    }

    /// Renews a claim and its slot. Returns the run as it is now (so the
    /// runner learns of a cancel or a hold), or `Fenced` if the claim is lost.
    pub async fn heartbeat(&self, fence: &Fence, limits: &ClaimLimits) -> Result<Run> {
        let mut tx = self.begin_write().await?;
        let now = tx.clock().await?;
        let lease_until = now + delta(limits.lease);
        let changed = on_tx!(tx, conn => {
            sqlx::query(
                "UPDATE executor_runs SET lease_expires_at = $4, heartbeat_at = $5 \
                 WHERE id = $1 AND lease_owner = $2 AND attempt = $3",
            )
            .bind(fence.run)
            .bind(&fence.owner)
            .bind(fence.attempt)
            .bind(lease_until)
            .bind(now)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("renewing a run's claim")?;
        fenced(changed, fence)?;
        let run = tx
            .run(fence.run)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("run {} vanished", fence.run)))?;
        if let Some(slot) = run.slot {
            let until = run
                .worker_alive_until
                .map_or(lease_until, |alive| alive.max(lease_until));
            let renewed = on_tx!(tx, conn => {
                sqlx::query(
                    "UPDATE worker_slots SET expires_at = CASE WHEN expires_at > $3 THEN expires_at ELSE $3 END \
                     WHERE slot = $1 AND run_id = $2",
                )
                .bind(slot)
                .bind(fence.run)
                .bind(until)
                .execute(conn)
                .await
                .map(|done| done.rows_affected())
            })
            .op("renewing a worker slot")?;
            // Its slot taken by another run: this worker is one too many.
            fenced(renewed, fence)?;
        }
        tx.commit().await?;
        Ok(run)
    }

    /// Runs claimed by a runner on `host` (lease owners are named
    /// `<host>#<pid>#<ticks>`), with or without a worker: what a runner
    /// starting there re-adopts or rescues when their runner is gone.
    pub async fn runs_claimed_on(&self, host: &str) -> Result<Vec<Run>> {
        let mut tx = self.begin_read().await?;
        let query = sql(&[
            "SELECT ",
            RUN_COLUMNS,
            " FROM executor_runs WHERE lease_owner LIKE $1 ORDER BY id",
        ]);
        // A host id is hex digits, '/' and digits: no LIKE wildcards.
        let pattern = format!("{host}#%");
        on_tx!(tx, conn => sqlx::query_as(query).bind(pattern).fetch_all(conn).await)
            .op("listing the runs claimed on this host")
    }

    /// Work that is about to happen without anyone's say: runs a runner
    /// would claim now (unless claiming is paused or every run is held),
    /// requests waiting for Eagle's plugins, notices waiting to be posted.
    /// Zero means everything waits on a human or is done.
    pub async fn work_in_sight(&self) -> Result<i64> {
        let mut tx = self.begin_read().await?;
        let now = tx.clock().await?;
        let stopped = tx.control(super::Control::Paused).await?
            || tx.control(super::Control::HoldAll).await?;
        let claimable: i64 = if stopped {
            0
        } else {
            on_tx!(tx, conn => {
                sqlx::query_scalar(
                    "SELECT COUNT(*) FROM executor_runs AS r \
                     WHERE (r.state IN ('queued', 'in_progress') OR (r.state = 'pr' AND r.pr_work IS NOT NULL)) \
             AND NOT r.held \
                     AND (r.lease_owner IS NULL OR r.lease_expires_at < $1) \
                     AND (r.worker_alive_until IS NULL OR r.worker_alive_until < $1) \
                     AND NOT EXISTS (SELECT 1 FROM worker_requests AS q \
                         WHERE q.run_id = r.id AND q.status IN ('pending', 'escalated'))",
                )
                .bind(now)
                .fetch_one(conn)
                .await
            })
            .op("counting claimable runs")?
        };
        let pending: i64 = on_tx!(tx, conn => {
            sqlx::query_scalar(
                "SELECT (SELECT COUNT(*) FROM worker_requests WHERE status = 'pending') \
                 + (SELECT COUNT(*) FROM run_notices WHERE posted_at IS NULL)",
            )
            .fetch_one(conn)
            .await
        })
        .op("counting pending decisions")?;
        Ok(claimable + pending)
    }

    /// Runs in one transaction of their own.
    pub async fn transition_run(&self, t: &Transition<'_>) -> Result<Run> {
        let mut tx = self.begin_write().await?;
        let run = tx.transition_run(t).await?;
        tx.commit().await?;
        Ok(run)
    }
}

/// A bounded `Duration` as a `TimeDelta`.
pub(super) fn delta(d: Duration) -> chrono::TimeDelta {
    chrono::TimeDelta::from_std(d).unwrap_or(chrono::TimeDelta::days(365))
}

fn fenced(changed: u64, fence: &Fence) -> Result<()> {
    if changed == 0 {
        Err(StoreError::Fenced(format!("run {}", fence.run)))
    } else {
        Ok(())
    }
}

fn fence_parts(fence: Option<&Fence>) -> (Option<String>, Option<i64>) {
    match fence {
        Some(f) => (Some(f.owner.clone()), Some(f.attempt)),
        None => (None, None),
    }
}

/// The run state that makes a task reach `status` (for the audit reason).
fn run_state_after(status: TaskStatus) -> &'static str {
    match status {
        T::Done => "complete",
        T::Cancelled => "cancelled",
        T::ForReview => "abandoned",
        _ => "active again",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn final_runs_only_leave_by_the_reserved_doors() {
        for (from, to, _) in RUN_TRANSITIONS {
            if from.is_final() {
                assert!(
                    matches!((from, to), (R::Complete, R::Pr) | (R::Abandoned, R::Queued)),
                    "{from:?} → {to:?}"
                );
            }
        }
        assert!(!run_transition_allowed(R::Cancelled, R::Queued));
        assert!(!run_transition_allowed(R::Queued, R::Pr));
        assert!(run_transition_allowed(R::InProgress, R::Pr));
    }

    #[test]
    fn a_task_follows_its_run_only_along_its_own_table() {
        for (from, to, _) in RUN_TRANSITIONS {
            if let Some(status) = task_follows(*from, *to) {
                let from_status = match status {
                    T::Approved if *from == R::Complete => T::Done,
                    T::Approved => T::ForReview,
                    _ => T::Approved,
                };
                assert!(
                    task_transition_allowed(from_status, status),
                    "{from:?} → {to:?} makes the task {from_status:?} → {status:?}"
                );
            }
        }
    }
}
