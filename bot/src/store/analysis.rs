//! The analyzer's reads and writes: tasks pending analysis, what the
//! filters or the analysis concluded, and putting skipped tasks back.
//!
//! Every conclusion is a transition from `pending` through the task table
//! (so it is audited and happens once, however many analyzers race), with
//! its details in the same transaction.

use super::tasks::{TASK_COLUMNS, TaskStatus, sql};
use super::{QueryContext, Result, Store, StoreError, Task, Tx, on_pool, on_tx};

/// One filter's reason to skip a task.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SkipReason {
    /// The plugin, as `name version`.
    pub plugin: String,
    pub reason: String,
}

/// What the analysis command concluded (or what stands in for it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Analysis {
    /// `for_review`, `awaiting_go` or `skip`.
    pub status: Option<TaskStatus>,
    pub summary: Option<String>,
    pub complexity: Option<String>,
    pub feasibility: Option<String>,
    pub priority: Option<i64>,
    /// The answer as it was, when it could not be read.
    pub raw: Option<String>,
    /// Why, in a sentence (the status reason).
    pub reason: String,
}

impl Store {
    /// Tasks waiting for analysis, oldest first.
    pub async fn pending_tasks(&self, limit: i64) -> Result<Vec<Task>> {
        let query = sql(&[
            "SELECT ",
            TASK_COLUMNS,
            " FROM executor_queue WHERE status = 'pending' ORDER BY id LIMIT $1",
        ]);
        on_pool!(self, pool => sqlx::query_as(query).bind(limit).fetch_all(pool).await)
            .op("listing tasks pending analysis")
    }

    /// How many tasks wait for analysis.
    pub async fn pending_count(&self) -> Result<i64> {
        on_pool!(self, pool => {
            sqlx::query_scalar("SELECT COUNT(*) FROM executor_queue WHERE status = 'pending'")
                .fetch_one(pool)
                .await
        })
        .op("counting tasks pending analysis")
    }

    /// Skipped tasks after `after_id`, by id (for re-analysis).
    pub async fn skipped_tasks(&self, after_id: i64, limit: i64) -> Result<Vec<Task>> {
        let query = sql(&[
            "SELECT ",
            TASK_COLUMNS,
            " FROM executor_queue WHERE status = 'skip' AND id > $1 ORDER BY id LIMIT $2",
        ]);
        on_pool!(self, pool => {
            sqlx::query_as(query).bind(after_id).bind(limit).fetch_all(pool).await
        })
        .op("listing skipped tasks")
    }
}

impl Tx {
    /// A filter skipped a pending task: every reason is kept. False if the
    /// task is no longer pending (someone else concluded first).
    pub async fn record_filter_skip(
        &mut self,
        id: i64,
        reasons: &[SkipReason],
        actor: &str,
    ) -> Result<bool> {
        let text = reasons
            .iter()
            .map(|r| format!("{}: {}", r.plugin, r.reason))
            .collect::<Vec<_>>()
            .join("; ");
        if !self
            .conclude(
                id,
                TaskStatus::Skip,
                actor,
                &format!("skipped by a filter: {text}"),
            )
            .await?
        {
            return Ok(false);
        }
        let json = serde_json::to_string(reasons)
            .map_err(|e| StoreError::Corrupt(format!("skip reasons: {e}")))?;
        let now = super::now();
        on_tx!(self, conn => {
            sqlx::query(
                "UPDATE executor_queue SET skipped_by = 'filter', skip_reasons = $2, analyzed_at = $3, \
                 analysis_summary = NULL, analysis_raw = NULL WHERE id = $1",
            )
            .bind(id)
            .bind(json)
            .bind(now)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("recording a skip")?;
        Ok(true)
    }

    /// The analysis (or its stand-in) concluded on a pending task. False
    /// if the task is no longer pending.
    pub async fn record_analysis(
        &mut self,
        id: i64,
        analysis: &Analysis,
        actor: &str,
    ) -> Result<bool> {
        let status = analysis.status.unwrap_or(TaskStatus::ForReview);
        if !self.conclude(id, status, actor, &analysis.reason).await? {
            return Ok(false);
        }
        let now = super::now();
        let skipped_by = (status == TaskStatus::Skip).then_some("analysis");
        on_tx!(self, conn => {
            sqlx::query(
                "UPDATE executor_queue SET skipped_by = $2, skip_reasons = NULL, analyzed_at = $3, \
                 analysis_summary = $4, complexity = $5, feasibility = $6, priority = $7, \
                 analysis_raw = $8, analysis_attempts = analysis_attempts + 1 WHERE id = $1",
            )
            .bind(id)
            .bind(skipped_by)
            .bind(now)
            .bind(&analysis.summary)
            .bind(&analysis.complexity)
            .bind(&analysis.feasibility)
            .bind(analysis.priority)
            .bind(&analysis.raw)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("recording an analysis")?;
        Ok(true)
    }

    /// Puts a skipped task back for analysis; its conclusion then goes into
    /// a summary (`quiet`), not a message of its own. False if it is no
    /// longer skipped.
    pub async fn reopen_for_analysis(&mut self, id: i64, actor: &str, quiet: bool) -> Result<bool> {
        if !self
            .conclude_from(
                id,
                TaskStatus::Skip,
                TaskStatus::Pending,
                actor,
                "put back for re-analysis",
            )
            .await?
        {
            return Ok(false);
        }
        on_tx!(self, conn => {
            sqlx::query(
                "UPDATE executor_queue SET skipped_by = NULL, skip_reasons = NULL, quiet_analysis = $2 \
                 WHERE id = $1",
            )
            .bind(id)
            .bind(quiet)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("putting a task back")?;
        self.notify().await?;
        Ok(true)
    }

    /// Clears a task's quiet mark once its conclusion is in a summary.
    pub async fn clear_quiet(&mut self, id: i64) -> Result<()> {
        on_tx!(self, conn => {
            sqlx::query("UPDATE executor_queue SET quiet_analysis = $2 WHERE id = $1")
                .bind(id)
                .bind(false)
                .execute(conn)
                .await
                .map(|done| done.rows_affected())
        })
        .op("clearing a task's re-analysis mark")?;
        Ok(())
    }

    async fn conclude(
        &mut self,
        id: i64,
        to: TaskStatus,
        actor: &str,
        reason: &str,
    ) -> Result<bool> {
        self.conclude_from(id, TaskStatus::Pending, to, actor, reason)
            .await
    }

    /// `from` → `to`, or false if the task is not in `from` (any more).
    async fn conclude_from(
        &mut self,
        id: i64,
        from: TaskStatus,
        to: TaskStatus,
        actor: &str,
        reason: &str,
    ) -> Result<bool> {
        match self.task(id).await? {
            Some(task) if task.status == from => {}
            _ => return Ok(false),
        }
        match self.transition_task(id, to, actor, reason).await {
            Ok(()) => Ok(true),
            // Changed between the read and the write (PostgreSQL).
            Err(StoreError::IllegalTransition { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }
}
