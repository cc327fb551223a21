//! Data care: what may be pruned and the one function that prunes it (used
//! by `eagle db prune` and by Eagle's pruner loop), the consistent copy of a
//! SQLite database that `eagle db backup` writes, and the row counts it
//! reports.
//!
//! What is pruned, table by table, is [`RULES`]; everything else is kept on
//! purpose: tasks, runs, requests and their decisions, the audit log (whose
//! triggers refuse a DELETE anyway), conversations (what people asked),
//! egress refusals (what a worker tried to reach, `!status run N`),
//! milestones (the memory that tells each milestone once: forgetting one
//! would tell it again), bookmarks, cursors, controls and slots.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use chrono::{DateTime, Utc};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode};
use sqlx::{ConnectOptions, Connection};

use super::{Backend, QueryContext, Result, Store, StoreError, on_tx};
use crate::profile::DatabaseUrl;

/// One prunable table: what goes, as a condition on its rows, with `$1`
/// the cut (rows older than it may go).
#[derive(Debug, Clone, Copy)]
pub struct PruneRule {
    pub table: &'static str,
    /// What the rows that go are, in Eagle's words.
    pub what: &'static str,
    condition: &'static str,
}

/// Every table Eagle prunes, and what of it.
pub const RULES: &[PruneRule] = &[
    PruneRule {
        table: "outbox",
        what: "replies and posts delivered or given up",
        condition: "(delivered_at IS NOT NULL AND delivered_at < $1) \
                    OR (gave_up_at IS NOT NULL AND gave_up_at < $1)",
    },
    // The newest handled message of each identity stays: the back-fill
    // starts from it (with the saved bookmark), so it never moves back.
    PruneRule {
        table: "processed_messages",
        what: "ids of handled chat messages, the newest of each bot kept",
        condition: "processed_at < $1 AND message_id < (SELECT MAX(p.message_id) \
                    FROM processed_messages AS p WHERE p.identity = processed_messages.identity)",
    },
    PruneRule {
        table: "http_cache",
        what: "GitHub answers kept for conditional requests",
        condition: "stored_at < $1",
    },
    PruneRule {
        table: "analyzer_jobs",
        what: "finished analyzer jobs",
        condition: "done_at IS NOT NULL AND done_at < $1",
    },
    PruneRule {
        table: "run_notices",
        what: "notices already posted",
        condition: "posted_at IS NOT NULL AND posted_at < $1",
    },
    PruneRule {
        table: "leases",
        what: "leases expired long ago: runners and loops gone",
        condition: "expires_at < $1",
    },
];

/// Rows deleted per transaction.
pub const PRUNE_BATCH: u64 = 5000;

impl PruneRule {
    fn pruned(&self, rows: u64) -> Pruned {
        Pruned {
            table: self.table,
            what: self.what,
            rows,
        }
    }
}

/// What one table lost (or would lose).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pruned {
    pub table: &'static str,
    pub what: &'static str,
    pub rows: u64,
}

/// The main tables a backup reports, with what their rows are.
const COUNTED: &[(&str, &str)] = &[
    ("executor_queue", "tasks"),
    ("executor_runs", "runs"),
    ("worker_requests", "requests"),
    ("audit_log", "audit entries"),
    ("outbox", "outbox entries"),
    ("conversations", "conversations"),
];

/// How many rows the main tables hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowCounts(pub Vec<(&'static str, i64)>);

impl std::fmt::Display for RowCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|(what, n)| format!("{what}: {n}"))
            .collect();
        f.write_str(&parts.join(", "))
    }
}

impl Store {
    /// Prunes every table of [`RULES`] of what is older than `before`, and
    /// says per table how many rows went. Rows go [`PRUNE_BATCH`] at a time,
    /// each batch its own transaction, so that a first prune of a large
    /// backlog never holds SQLite's write lock for long while Eagle runs.
    /// With `dry_run`, counts them in one read and changes nothing.
    pub async fn prune_older_than(
        &self,
        before: DateTime<Utc>,
        dry_run: bool,
    ) -> Result<Vec<Pruned>> {
        let mut pruned = Vec::with_capacity(RULES.len());
        if dry_run {
            let mut tx = self.begin_read().await?;
            for rule in RULES {
                let sql = format!(
                    "SELECT COUNT(*) FROM {} WHERE {}",
                    rule.table, rule.condition
                );
                let n: i64 = on_tx!(tx, conn => {
                    sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                        .bind(before)
                        .fetch_one(conn)
                        .await
                })
                .op("counting what may be pruned")?;
                pruned.push(rule.pruned(n.max(0) as u64));
            }
            tx.rollback().await?;
            return Ok(pruned);
        }
        // A row's own address: every table here has one, whatever its key.
        let row = match self.backend() {
            Backend::Sqlite => "rowid",
            Backend::Postgres => "ctid",
        };
        for rule in RULES {
            let sql = format!(
                "DELETE FROM {table} WHERE {row} IN (SELECT {row} FROM {table} WHERE {condition} LIMIT {PRUNE_BATCH})",
                table = rule.table,
                condition = rule.condition,
            );
            let mut rows = 0;
            loop {
                let mut tx = self.begin_write().await?;
                let gone = on_tx!(tx, conn => {
                    sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
                        .bind(before)
                        .execute(conn)
                        .await
                        .map(|done| done.rows_affected())
                })
                .op("pruning")?;
                tx.commit().await?;
                rows += gone;
                if gone < PRUNE_BATCH {
                    break;
                }
            }
            pruned.push(rule.pruned(rows));
        }
        Ok(pruned)
    }

    /// How many rows the main tables hold, in one consistent view.
    pub async fn row_counts(&self) -> Result<RowCounts> {
        let mut tx = self.begin_read().await?;
        let mut counts = Vec::with_capacity(COUNTED.len());
        for (table, what) in COUNTED {
            let sql = format!("SELECT COUNT(*) FROM {table}");
            let n: i64 = on_tx!(tx, conn => {
                sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).fetch_one(conn).await
            })
            .op("counting rows")?;
            counts.push((*what, n));
        }
        tx.rollback().await?;
        Ok(RowCounts(counts))
    }

    /// Writes a consistent copy of this SQLite database into `target`, an
    /// empty file that exists already (so its mode is the caller's), while
    /// other connections and processes go on reading and writing: `VACUUM
    /// INTO` reads one snapshot. The copy is then made a single file
    /// (rollback journal, no `-wal` beside it), and its rows counted.
    pub async fn copy_sqlite_into(&self, target: &Path) -> Result<RowCounts> {
        let super::Pool::Sqlite(pool) = &self.pool else {
            return Err(StoreError::Corrupt(
                "a consistent copy through VACUUM INTO is a SQLite database's".into(),
            ));
        };
        let Some(name) = target.to_str() else {
            return Err(StoreError::Corrupt(format!(
                "{} is not a UTF-8 path",
                target.display()
            )));
        };
        sqlx::query("VACUUM INTO $1")
            .bind(name)
            .execute(pool)
            .await
            .op("copying the database (VACUUM INTO)")?;
        let options = SqliteConnectOptions::new()
            .filename(target)
            .create_if_missing(false)
            .journal_mode(SqliteJournalMode::Delete);
        let mut conn = options.connect().await.op("opening the copy")?;
        let mut counts = Vec::with_capacity(COUNTED.len());
        for (table, what) in COUNTED {
            let sql = format!("SELECT COUNT(*) FROM {table}");
            let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                .fetch_one(&mut conn)
                .await
                .op("counting the copy's rows")?;
            counts.push((*what, n));
        }
        let check: String = sqlx::query_scalar("PRAGMA quick_check")
            .fetch_one(&mut conn)
            .await
            .op("checking the copy")?;
        conn.close().await.op("closing the copy")?;
        if check != "ok" {
            return Err(StoreError::Corrupt(format!(
                "the copy fails SQLite's check: {check}"
            )));
        }
        Ok(RowCounts(counts))
    }
}

/// The file of a SQLite database URL (`None` for PostgreSQL or a URL that
/// is not one).
pub fn sqlite_file(url: &DatabaseUrl) -> Option<PathBuf> {
    if url.is_postgres() {
        return None;
    }
    let options = SqliteConnectOptions::from_str(url.expose()).ok()?;
    let file = options.get_filename();
    (file.as_os_str() != ":memory:").then(|| file.to_path_buf())
}
