//! The one transition table: every change of a run's `state` or a task's
//! `status` goes through [`Tx::transition_run`] / [`Tx::transition_task`],
//! which check the tables below and refuse anything else with
//! [`StoreError::IllegalTransition`]. A task follows its run (see
//! [`task_follows`]), and the requests of a run that ends expire in the same
//! transaction.

use chrono::{DateTime, Utc};

use super::fence::Fence;
use super::{
    NewAuditEntry, QueryContext, Result, Run, RunState, StoreError, TaskStatus, Tx, on_tx,
};

use RunState as R;
use TaskStatus as T;

super::store_handle!(
    /// The one transition table: every change of a run's or a task's state: `store.transitions()`.
    Transitions,
    transitions
);

super::tx_handle!(
    /// The one transition table: every change of a run's or a task's state, in a transaction: `tx.transitions()`.
    TransitionsTx,
    transitions
);

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
    (T::Skip, T::AwaitingGo, "!review overrides a skip"),
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

impl TransitionsTx<'_> {
    /// Changes a run's state through the transition table; the task follows,
    /// and a run that ends expires its open requests. Audited.
    pub async fn transition_run(&mut self, t: &Transition<'_>) -> Result<Run> {
        let run = self
            .run_for_update(t.run)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("run {} does not exist", t.run)))?;
        Tx::check_fence(&run, t.fence)?;
        let from = run.state;
        let ending = t.to.is_final();
        self.write_state(run.id, from, t.to, Some(t.reason), super::now())
            .await?;
        if let Some(status) = task_follows(from, t.to) {
            self.task_follows_run(&run, status, t.actor).await?;
        }
        if ending {
            self.expire_requests_of_run(run.id, &format!("run {} is {}", run.id, t.to.as_str()))
                .await?;
        }
        self.audit_log()
            .audit(&state_change_entry(t.actor, run.id, from, t.to, t.reason))
            .await?;
        self.notify().await?;
        self.tasks()
            .run(run.id)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("run {} vanished", run.id)))
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
        self.audit_log()
            .audit(&NewAuditEntry {
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
            .tasks()
            .task(task_id)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("task {task_id} vanished")))?;
        let id = self
            .tasks()
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
                .bind(crate::ground::text::fold_key(&topic))
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
        self.audit_log()
            .audit(&NewAuditEntry {
                actor: actor.to_string(),
                action: "run.queued".into(),
                subject: format!("run:{id}"),
                reason: Some(format!("task #{task_id}: {reason}")),
                ..NewAuditEntry::default()
            })
            .await?;
        self.notify().await?;
        self.tasks()
            .run(id)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("run {id} vanished")))
    }
}

impl Tx {
    /// The one place a run's `state` is written ([`Tx::transition_run`] and
    /// the claim's `queued → in_progress` come here). Refuses what the table
    /// does not allow; otherwise moves the row, if it is still in `from`,
    /// with what the move implies: a run that ends is completed and neither
    /// waits nor is held any more, one that leaves `abandoned` starts its
    /// failures afresh, and `reason`, if given, becomes its state reason
    /// (the claim gives none and keeps the one the run has). The caller
    /// audits the change, in its own order.
    pub(super) async fn write_state(
        &mut self,
        run: i64,
        from: RunState,
        to: RunState,
        reason: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<()> {
        if !run_transition_allowed(from, to) {
            return Err(StoreError::IllegalTransition {
                what: format!("run {run}"),
                from: from.as_str(),
                to: to.as_str(),
            });
        }
        // `completed_at` is cleared by every move that does not end the run:
        // only a final run has one.
        on_tx!(self, conn => {
            sqlx::query(
                "UPDATE executor_runs SET state = $2, state_reason = COALESCE($3, state_reason), \
                 updated_at = $4, completed_at = CASE WHEN $5 THEN $4 ELSE NULL END, \
                 waiting_on = CASE WHEN $5 THEN NULL ELSE waiting_on END, \
                 held = CASE WHEN $5 THEN FALSE ELSE held END, \
                 failures = CASE WHEN $6 THEN 0 ELSE failures END, \
                 waits = CASE WHEN $6 THEN 0 ELSE waits END \
                 WHERE id = $1 AND state = $7",
            )
            .bind(run)
            .bind(to.as_str())
            .bind(reason)
            .bind(now)
            .bind(to.is_final())
            .bind(from == R::Abandoned)
            .bind(from.as_str())
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("changing a run's state")?;
        if from != to {
            self.count_on_commit(move || {
                crate::ground::metrics::get()
                    .run_transitions
                    .get_or_create(&crate::ground::metrics::TransitionLabels {
                        from: from.as_str().into(),
                        to: to.as_str().into(),
                    })
                    .inc();
            });
        }
        Ok(())
    }

    async fn task_follows_run(&mut self, run: &Run, to: TaskStatus, actor: &str) -> Result<()> {
        let Some(task) = self.tasks().task_by_gid(&run.task_gid).await? else {
            return Ok(());
        };
        if task.status == to {
            return Ok(());
        }
        self.transitions()
            .transition_task(
                task.id,
                to,
                actor,
                &format!("run {} is {}", run.id, run_state_after(to)),
            )
            .await
    }
}

impl Transitions<'_> {
    /// Runs in one transaction of their own.
    pub async fn transition_run(&self, t: &Transition<'_>) -> Result<Run> {
        let mut tx = self.begin_write().await?;
        let run = tx.transitions().transition_run(t).await?;
        tx.commit().await?;
        Ok(run)
    }
}

/// The audit entry of a run's state change: `run.<to>`, `from → to`.
pub(super) fn state_change_entry(
    actor: &str,
    run: i64,
    from: RunState,
    to: RunState,
    reason: &str,
) -> NewAuditEntry {
    NewAuditEntry {
        actor: actor.to_string(),
        action: format!("run.{}", to.as_str()),
        subject: format!("run:{run}"),
        decision: Some(format!("{} → {}", from.as_str(), to.as_str())),
        reason: Some(reason.to_string()),
        ..NewAuditEntry::default()
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
