//! Writing what `eagle import` brings in from another system: tasks by
//! their `task_gid`, runs by `imported_from`, so that importing again adds
//! nothing. A run is inserted in the state it had there (it is not a
//! transition: nothing of Eagle moved it), with its own topic `run <id>`.

use chrono::{DateTime, Utc};

use super::{QueryContext, Result, RunState, TaskStatus, on_tx};

super::tx_handle!(
    /// What `eagle import` brings in from another system, in a transaction: `tx.imports()`.
    ImportsTx,
    imports
);

/// A task to bring in.
#[derive(Debug, Clone)]
pub struct ImportedTask {
    pub task_gid: String,
    pub source: String,
    pub title: String,
    pub description: String,
    pub notes: String,
    pub status: TaskStatus,
    pub status_reason: Option<String>,
    pub priority: Option<i64>,
    pub complexity: Option<String>,
    pub feasibility: Option<String>,
    pub analysis_summary: Option<String>,
    pub added_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A run to bring in.
#[derive(Debug, Clone)]
pub struct ImportedRun {
    /// `<system>:<its id there>`.
    pub imported_from: String,
    pub task_gid: String,
    pub state: RunState,
    pub state_reason: String,
    pub worktree_path: Option<String>,
    pub branch_name: Option<String>,
    pub pr_url: Option<String>,
    pub pr_number: Option<i64>,
    pub pr_repo: Option<String>,
    pub ci_attempts: i64,
    pub worker_session_id: Option<String>,
    pub worker_stuck_count: i64,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
    pub completed_at: Option<DateTime<Utc>>,
}

impl ImportsTx<'_> {
    /// Brings a task in; `None` if a task with its gid is there already.
    pub async fn import_task(&mut self, task: &ImportedTask) -> Result<Option<i64>> {
        let analysed = (task.status != TaskStatus::Pending).then_some(task.updated_at);
        let skipped_by = (task.status == TaskStatus::Skip).then_some("analysis");
        on_tx!(self, conn => {
            sqlx::query_scalar(
                "INSERT INTO executor_queue (task_gid, added_at, updated_at, source, title, \
                 description, notes, status, status_reason, priority, complexity, feasibility, \
                 analysis_summary, analyzed_at, skipped_by) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) \
                 ON CONFLICT (task_gid) DO NOTHING RETURNING id",
            )
            .bind(&task.task_gid)
            .bind(task.added_at)
            .bind(task.updated_at)
            .bind(&task.source)
            .bind(&task.title)
            .bind(&task.description)
            .bind(&task.notes)
            .bind(task.status.as_str())
            .bind(&task.status_reason)
            .bind(task.priority)
            .bind(&task.complexity)
            .bind(&task.feasibility)
            .bind(&task.analysis_summary)
            .bind(analysed)
            .bind(skipped_by)
            .fetch_optional(conn)
            .await
        })
        .op("importing a task")
    }

    /// Brings a run in, with its topic `run <id>`; `None` if it was
    /// imported before.
    pub async fn import_run(&mut self, run: &ImportedRun) -> Result<Option<i64>> {
        let id: Option<i64> = on_tx!(self, conn => {
            sqlx::query_scalar(
                "INSERT INTO executor_runs (imported_from, task_gid, created_at, updated_at, \
                 started_at, completed_at, state, state_reason, worktree_path, branch_name, \
                 pr_url, pr_number, pr_repo, ci_attempts, worker_session_id, worker_stuck_count) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) \
                 ON CONFLICT (imported_from) DO NOTHING RETURNING id",
            )
            .bind(&run.imported_from)
            .bind(&run.task_gid)
            .bind(run.created_at)
            .bind(run.updated_at)
            .bind(run.started_at)
            .bind(run.completed_at)
            .bind(run.state.as_str())
            .bind(&run.state_reason)
            .bind(&run.worktree_path)
            .bind(&run.branch_name)
            .bind(&run.pr_url)
            .bind(run.pr_number)
            .bind(&run.pr_repo)
            .bind(run.ci_attempts)
            .bind(&run.worker_session_id)
            .bind(run.worker_stuck_count)
            .fetch_optional(conn)
            .await
        })
        .op("importing a run")?;
        let Some(id) = id else { return Ok(None) };
        let topic = format!("run {id}");
        let key = crate::ground::text::fold_key(&topic);
        on_tx!(self, conn => {
            sqlx::query(
                "UPDATE executor_runs SET thread_id = $2, thread_key = $3 WHERE id = $1",
            )
            .bind(id)
            .bind(&topic)
            .bind(&key)
            .execute(conn)
            .await
            .map(|_| ())
        })
        .op("naming an imported run's topic")?;
        // The task points at its newest run, unless it points at one already.
        on_tx!(self, conn => {
            sqlx::query(
                "UPDATE executor_queue SET executor_run_id = $2 \
                 WHERE task_gid = $1 AND (executor_run_id IS NULL OR executor_run_id < $2)",
            )
            .bind(&run.task_gid)
            .bind(id)
            .execute(conn)
            .await
            .map(|_| ())
        })
        .op("linking an imported run to its task")?;
        Ok(Some(id))
    }

    /// Whether a task with this gid exists.
    pub async fn has_task(&mut self, task_gid: &str) -> Result<bool> {
        let found: Option<i64> = on_tx!(self, conn => {
            sqlx::query_scalar("SELECT id FROM executor_queue WHERE task_gid = $1")
                .bind(task_gid)
                .fetch_optional(conn)
                .await
        })
        .op("looking a task up by gid")?;
        Ok(found.is_some())
    }
}
