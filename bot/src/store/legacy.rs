//! The old executor's database (seed 003's `executor_queue` and
//! `executor_runs`, on PostgreSQL), read for `eagle import executor-v2`.
//!
//! The connection is read-only twice over: every session starts with
//! `default_transaction_read_only = on`, and each page is read in a
//! `BEGIN READ ONLY` transaction, so nothing Eagle runs can change the old
//! database. Columns seed 003 lists that a database lacks (an older one
//! has `user_context` where the new schema has `notes`) are read as NULL;
//! the list of columns is fixed here, so no name from the database is ever
//! put into a query.

use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::pool::PoolOptions;
use sqlx::postgres::{PgConnectOptions, PgPool, Postgres};

use super::{QueryContext, Result, StoreError};
use crate::profile::DatabaseUrl;

/// One row of the old `executor_queue`.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct LegacyTask {
    pub id: i64,
    pub task_gid: String,
    pub added_at: Option<DateTime<Utc>>,
    pub updated_at: Option<DateTime<Utc>>,
    pub source: Option<String>,
    pub description: Option<String>,
    pub notes: Option<String>,
    pub user_context: Option<String>,
    pub status: Option<String>,
    pub priority: Option<i64>,
    pub complexity: Option<String>,
    pub feasibility: Option<String>,
    pub analysis_summary: Option<String>,
    pub executor_run_id: Option<i64>,
}

/// One row of the old `executor_runs`.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct LegacyRun {
    pub id: i64,
    pub task_gid: Option<String>,
    pub worktree_path: Option<String>,
    pub branch_name: Option<String>,
    pub pr_url: Option<String>,
    pub pr_number: Option<i64>,
    pub thread_id: Option<String>,
    pub started_at: Option<DateTime<Utc>>,
    pub updated_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub state: Option<String>,
    pub ci_attempts: Option<i64>,
    pub worker_session_id: Option<String>,
    pub worker_stuck_count: Option<i64>,
}

/// `(column, how it is read)`: what seed 003 names, cast to what Eagle reads.
const TASK_COLUMNS: &[(&str, &str)] = &[
    ("id", "id::bigint"),
    ("task_gid", "task_gid::text"),
    ("added_at", "added_at::timestamptz"),
    ("updated_at", "updated_at::timestamptz"),
    ("source", "source::text"),
    ("description", "description::text"),
    ("notes", "notes::text"),
    ("user_context", "user_context::text"),
    ("status", "status::text"),
    ("priority", "priority::bigint"),
    ("complexity", "complexity::text"),
    ("feasibility", "feasibility::text"),
    ("analysis_summary", "analysis_summary::text"),
    ("executor_run_id", "executor_run_id::bigint"),
];

const RUN_COLUMNS: &[(&str, &str)] = &[
    ("id", "id::bigint"),
    ("task_gid", "task_gid::text"),
    ("worktree_path", "worktree_path::text"),
    ("branch_name", "branch_name::text"),
    ("pr_url", "pr_url::text"),
    ("pr_number", "pr_number::bigint"),
    ("thread_id", "thread_id::text"),
    ("started_at", "started_at::timestamptz"),
    ("updated_at", "updated_at::timestamptz"),
    ("completed_at", "completed_at::timestamptz"),
    ("state", "state::text"),
    ("ci_attempts", "ci_attempts::bigint"),
    ("worker_session_id", "worker_session_id::text"),
    ("worker_stuck_count", "worker_stuck_count::bigint"),
];

/// The columns every import needs; a table without one is not seed 003's.
const REQUIRED: &[(&str, &str)] = &[
    ("executor_queue", "id"),
    ("executor_queue", "task_gid"),
    ("executor_queue", "status"),
    ("executor_runs", "id"),
    ("executor_runs", "task_gid"),
    ("executor_runs", "state"),
];

/// A read-only connection to the old executor's database.
pub struct LegacyDb {
    pool: PgPool,
    shown: String,
    task_select: String,
    run_select: String,
}

impl std::fmt::Debug for LegacyDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LegacyDb")
            .field("url", &self.shown)
            .finish_non_exhaustive()
    }
}

impl LegacyDb {
    /// Connects read-only and learns which of seed 003's columns exist.
    pub async fn open(url: &DatabaseUrl) -> Result<LegacyDb> {
        let shown = url.redacted();
        if !url.is_postgres() {
            return Err(StoreError::Corrupt(format!(
                "{shown}: the old executor's database is PostgreSQL (postgres://…)"
            )));
        }
        let connect_error = |source| StoreError::Connect {
            url: shown.clone(),
            source,
        };
        let options = PgConnectOptions::from_str(url.expose())
            .map_err(connect_error)?
            .options([("default_transaction_read_only", "on")]);
        let pool = PoolOptions::<Postgres>::new()
            .max_connections(2)
            .acquire_timeout(Duration::from_secs(15))
            .connect_with(options)
            .await
            .map_err(connect_error)?;
        let present: Vec<(String, String)> = sqlx::query_as(
            "SELECT table_name::text, column_name::text FROM information_schema.columns \
             WHERE table_schema = current_schema() \
             AND table_name IN ('executor_queue', 'executor_runs')",
        )
        .fetch_all(&pool)
        .await
        .op("reading the old executor's schema")?;
        let has =
            |table: &str, column: &str| present.iter().any(|(t, c)| t == table && c == column);
        let missing: Vec<String> = REQUIRED
            .iter()
            .filter(|(t, c)| !has(t, c))
            .map(|(t, c)| format!("{t}.{c}"))
            .collect();
        if !missing.is_empty() {
            return Err(StoreError::Corrupt(format!(
                "{shown} does not look like the old executor's database (seed 003): no {}",
                missing.join(", ")
            )));
        }
        let select = |table: &str, columns: &[(&str, &str)]| {
            let list: Vec<String> = columns
                .iter()
                .map(|(name, read)| {
                    if has(table, name) {
                        format!("{read} AS {name}")
                    } else {
                        let ty = read.rsplit("::").next().unwrap_or("text");
                        format!("NULL::{ty} AS {name}")
                    }
                })
                .collect();
            format!(
                "SELECT {} FROM {table} WHERE id > $1 ORDER BY id LIMIT $2",
                list.join(", ")
            )
        };
        Ok(LegacyDb {
            task_select: select("executor_queue", TASK_COLUMNS),
            run_select: select("executor_runs", RUN_COLUMNS),
            pool,
            shown,
        })
    }

    /// The address, with any password replaced.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// Up to `limit` tasks with an id above `after`, by id.
    pub async fn tasks(&self, after: i64, limit: i64) -> Result<Vec<LegacyTask>> {
        let mut tx = self
            .pool
            .begin_with("BEGIN READ ONLY")
            .await
            .op("reading the old executor_queue")?;
        let rows = sqlx::query_as(sqlx::AssertSqlSafe(self.task_select.clone()))
            .bind(after)
            .bind(limit)
            .fetch_all(&mut *tx)
            .await
            .op("reading the old executor_queue")?;
        tx.rollback().await.op("reading the old executor_queue")?;
        Ok(rows)
    }

    /// Up to `limit` runs with an id above `after`, by id.
    pub async fn runs(&self, after: i64, limit: i64) -> Result<Vec<LegacyRun>> {
        let mut tx = self
            .pool
            .begin_with("BEGIN READ ONLY")
            .await
            .op("reading the old executor_runs")?;
        let rows = sqlx::query_as(sqlx::AssertSqlSafe(self.run_select.clone()))
            .bind(after)
            .bind(limit)
            .fetch_all(&mut *tx)
            .await
            .op("reading the old executor_runs")?;
        tx.rollback().await.op("reading the old executor_runs")?;
        Ok(rows)
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}
