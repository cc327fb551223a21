//! The worker's mirror in its run's row: what the runner started, how far
//! it read the worker's log, what the worker cost, and how its attempt ended.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::fence::{Fence, fenced_update};
use super::transitions::Transition;
use super::{NewAuditEntry, QueryContext, Result, Run, RunState, StoreError, Tx, delta, on_tx};

super::tx_handle!(
    /// The worker's mirror in its run's row, in a transaction: `tx.workers()`.
    WorkersTx,
    workers
);

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
    /// It stopped to wait once more than `max_waits` allows: counted like
    /// [`RunEnd::Waiting`], and the run is held for the owner.
    WaitedTooOften { reason: String, owner: String },
    /// It was stopped on purpose (`!hold`, `!hold all`, `!cancel`).
    Stopped { reason: String },
    /// It reached the run's cost cap: held for the owner.
    CostCap { reason: String, owner: String },
}

impl WorkersTx<'_> {
    /// Records a worker the runner started for its claim.
    pub async fn record_worker(&mut self, fence: &Fence, worker: &WorkerMirror) -> Result<()> {
        let now = self.clock().await?;
        // The worker may outlive its runner until its shim ends it: from now
        // (not from the claim, which a slow clone may precede by long).
        let alive_until = now + delta(worker.alive_for);
        fenced_update!(
            self,
            fence,
            "recording a worker",
            "worker_pid = $4, worker_pgid = $5, worker_host = $6, \
             worker_start_ticks = $7, worker_started_at = $8, prompt_kind = $9, \
             session_cost_usd = CASE WHEN $10 IS NOT NULL AND worker_session_id IS NOT NULL \
                 AND worker_session_id = $10 THEN session_cost_usd ELSE 0 END, \
             worker_session_id = COALESCE($10, worker_session_id), log_path = $11, \
             worker_exit_file = $12, socket_path = $13, token_sha256 = $14, \
             worktree_path = $15, branch_name = COALESCE($16, branch_name), \
             worker_last_update = $8, worker_exit_code = NULL, log_offset = 0, \
             updated_at = $8, worker_alive_until = $17",
            worker.pid,
            worker.pgid,
            &worker.host,
            worker.start_ticks,
            now,
            &worker.prompt_kind,
            &worker.session_id,
            &worker.log_path,
            &worker.exit_file,
            &worker.socket_path,
            &worker.token_sha256,
            &worker.workdir,
            &worker.branch,
            alive_until,
        )?;
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
        self.audit_log()
            .audit(&NewAuditEntry {
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
        fenced_update!(
            self,
            fence,
            "recording a worker's progress",
            "log_offset = $4, \
             worker_last_update = COALESCE($5, worker_last_update), \
             cost_usd = cost_usd + CASE WHEN $6 > session_cost_usd THEN $6 - session_cost_usd ELSE 0 END, \
             session_cost_usd = CASE WHEN $6 > session_cost_usd THEN $6 ELSE session_cost_usd END, \
             turns = turns + $7, \
             worker_session_id = COALESCE($8, worker_session_id), updated_at = $9",
            offset,
            last_output,
            session_cost,
            turns_delta,
            session_id,
            now,
        )
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
        Tx::check_fence(&run, Some(fence))?;
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
        let waits = run.waits
            + i64::from(matches!(
                end,
                RunEnd::Waiting | RunEnd::WaitedTooOften { .. }
            ));
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
            RunEnd::CostCap { reason, owner } | RunEnd::WaitedTooOften { reason, owner } => {
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
        // Fenced like every write of the claim (the check above, under the
        // row's lock, makes it hold).
        fenced_update!(
            self,
            fence,
            "recording a worker's end",
            "worker_pid = NULL, worker_pgid = NULL, \
             worker_alive_until = NULL, worker_exit_code = $4, lease_owner = NULL, \
             lease_expires_at = NULL, slot = NULL, failures = $5, held = $6, \
             waiting_on = $7, state_reason = $8, updated_at = $9, \
             worker_stuck_count = worker_stuck_count + $10, waits = $11",
            exit_code,
            failures,
            held,
            &waiting_on,
            &reason,
            now,
            i64::from(matches!(end, RunEnd::Failed { .. })),
            waits,
        )?;
        self.audit_log()
            .audit(&NewAuditEntry {
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
                        RunEnd::CostCap { .. } | RunEnd::WaitedTooOften { .. } => "held",
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
                self.prs().record_pr_link(fence.run, link).await?;
            }
            // Unfenced now: the claim was released above, in this transaction.
            self.transitions()
                .transition_run(&Transition {
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
        if held
            && matches!(
                end,
                RunEnd::Failed { .. } | RunEnd::CostCap { .. } | RunEnd::WaitedTooOften { .. }
            )
        {
            let kind = match end {
                RunEnd::CostCap { .. } => "cost_cap",
                RunEnd::WaitedTooOften { .. } => "waits",
                _ => "attempts",
            };
            self.controls()
                .insert_notice(fence.run, kind, &reason)
                .await?;
        }
        self.notify().await?;
        self.tasks()
            .run(fence.run)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("run {} vanished", fence.run)))
    }
}
