//! The store: the only code with SQL.
//!
//! Two backends from day one, chosen by the profile's `database_url`: SQLite
//! (the embedded default: WAL, a busy timeout, `BEGIN IMMEDIATE` for every
//! transaction that reads then writes) and PostgreSQL (several instances on
//! several hosts). Queries are runtime queries written once in SQL that both
//! backends accept (`$1` placeholders, `RETURNING`, `ON CONFLICT`), and each
//! is type-checked twice: the [`on_tx!`] and [`on_pool!`] macros expand one
//! body per backend. The same test suite runs against both.
//!
//! Migrations are embedded (`migrations/sqlite`, `migrations/postgres`) and
//! applied when the store opens.
//!
//! Each table's reads and writes are reached through its handle, one file
//! each: `store.requests().pending_requests(…)` on the pool,
//! `tx.requests().record_request(…)`
//! in a transaction (the handle derefs to the [`Store`] or the [`Tx`]). What
//! `Store` and `Tx` offer themselves is only what every table shares:
//! opening, transactions, the clock, notifying the loops.

mod analysis;
mod audit;
mod care;
mod carried;
mod claims;
mod controls;
mod conversations;
mod doorbell;
mod egress;
mod fence;
mod gauges;
mod holds;
mod import;
mod inbox;
mod intake;
mod leases;
mod legacy;
mod outbox;
mod pr;
mod repos;
mod requests;
mod schema;
mod step_aside;
mod tasks;
mod transitions;
mod watch;
mod workers;

use std::str::FromStr;
use std::time::Duration;

use sqlx::pool::PoolOptions;
use sqlx::postgres::{PgConnectOptions, Postgres};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use sqlx::{PgPool, Sqlite, SqlitePool};

use crate::ground::database_url::DatabaseUrl;

// The tables' handles, one file each: `store.outbox()`, `tx.requests()`, …
pub use analysis::{Analyses, AnalysesTx};
pub use analysis::{Analysis, AnalyzerJob, SkipReason};
pub use audit::{AuditEntry, NewAuditEntry};
pub use audit::{AuditLog, AuditLogTx};
pub use care::{PRUNE_BATCH, PruneRule, Pruned, RULES as PRUNE_RULES, RowCounts, sqlite_file};
pub use carried::{CarriedResults, CarriedResultsTx};
pub use claims::{Claim, ClaimLimits};
pub use claims::{Claims, ClaimsTx};
pub use controls::{Control, Notice};
pub use controls::{Controls, ControlsTx};
pub use conversations::{
    Conclusion, Conversation, ConversationStatus, NewConversation, STATUS_LINES_KEPT, StatusLine,
    TopicPost, Usage,
};
pub use conversations::{Conversations, ConversationsTx};
pub use egress::{EgressRefusal, NewRefusals, OTHER_HOSTS};
pub use egress::{EgressRefusals, EgressRefusalsTx};
pub use fence::Fence;
pub use gauges::Gauges;
pub use holds::HoldsTx;
pub use import::ImportsTx;
pub use import::{ImportedRun, ImportedTask};
pub use inbox::Bookmark;
pub use inbox::{Handled, HandledTx};
pub use intake::IntakeTx;
pub use intake::{ExternalTask, Upserted};
pub use leases::RUNNER_PRESENCE_PREFIX;
pub use leases::{Leases, LeasesTx};
pub use legacy::{LegacyDb, LegacyRun, LegacyTask};
pub use outbox::{Destination, NewOutboxItem, OutboxHeads, OutboxItem, OutboxKind};
pub use outbox::{Outbox, OutboxTx};
pub use pr::{CachedAnswer, PolledPr, PrLink, PrPoll, PrSeen, short_sha};
pub use pr::{PullRequests, PullRequestsTx};
pub use repos::{AnnouncedRepo, Repos, ReposTx};
pub use requests::{
    Approval, MAX_REQUEST_BODY, NewRequest, Recorded, Request, RequestStatus, RequestVia,
    body_refusal, requests_summary,
};
pub use requests::{Requests, RequestsTx};
pub use schema::{Migration, SchemaState};
pub use step_aside::supersedes;
pub use tasks::TasksTx;
pub use tasks::{
    NewRun, NewTask, Origin, PrWork, PrWorkSlot, Run, RunState, StatusCounts, Task, TaskStatus,
};
pub use transitions::{Transition, run_transition_allowed, task_transition_allowed};
pub use transitions::{Transitions, TransitionsTx};
pub use watch::Changes;
pub use workers::WorkersTx;
pub use workers::{PrOutcome, RunEnd, WorkerMirror};

/// How long a SQLite writer waits for another before giving up.
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// Pooled PostgreSQL connections when nobody says otherwise (the profile's
/// `store.max_connections` defaults to the same).
pub const DEFAULT_POOL: u32 = 8;

/// Which database a store talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}

/// A store error: what Eagle was doing, and the database's own error.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the database {url}: {source}")]
    Connect { url: String, source: sqlx::Error },
    #[error("cannot create the database directory {dir}: {source}")]
    CreateDir { dir: String, source: std::io::Error },
    #[error("cannot migrate the database {url}: {source}")]
    Migrate {
        url: String,
        source: sqlx::migrate::MigrateError,
    },
    /// The database has applied migrations this binary does not know: a
    /// newer Eagle migrated it, and this one must not write to it.
    #[error(
        "the database {url} is newer than this eagle: it has applied migration(s) this binary does not know ({versions}); upgrade eagle"
    )]
    Newer { url: String, versions: String },
    #[error("database error while {op}: {source}")]
    Query {
        op: &'static str,
        source: sqlx::Error,
    },
    #[error("the database holds a value Eagle does not understand: {0}")]
    Corrupt(String),
    /// A state change the transition table does not allow.
    #[error("{what} cannot go from {from} to {to}")]
    IllegalTransition {
        what: String,
        from: &'static str,
        to: &'static str,
    },
    /// A fenced write whose fence no longer holds: another runner (or a
    /// human) changed the row since this runner claimed it.
    #[error("{0} is no longer this runner's to change (its lease or attempt moved on)")]
    Fenced(String),
}

impl StoreError {
    /// Whether trying again later may succeed: a lost connection, a busy or
    /// locked database, a deadlock or serialisation failure.
    pub fn is_transient(&self) -> bool {
        let source = match self {
            StoreError::Connect { .. } => return true,
            StoreError::Query { source, .. } => source,
            _ => return false,
        };
        match source {
            sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::Protocol(_) => true,
            sqlx::Error::Database(db) => {
                let code = db.code().unwrap_or_default();
                // SQLite: BUSY, LOCKED (and their extended codes); PostgreSQL:
                // serialisation failure, deadlock, connection and shutdown classes.
                matches!(
                    code.as_ref(),
                    "5" | "6" | "261" | "262" | "517" | "40001" | "40P01"
                ) || code.starts_with("08")
                    || code.starts_with("57P")
            }
            _ => false,
        }
    }

    /// Whether SQLite said the database is busy or locked (another process
    /// holds a lock for a moment).
    pub fn is_busy(&self) -> bool {
        let source = match self {
            StoreError::Connect { source, .. } | StoreError::Query { source, .. } => source,
            StoreError::Migrate {
                source: sqlx::migrate::MigrateError::Execute(source),
                ..
            } => source,
            _ => return false,
        };
        source.as_database_error().is_some_and(|db| {
            matches!(
                db.code().as_deref(),
                Some("5" | "6" | "261" | "262" | "517")
            )
        })
    }

    /// Whether the error is a violated uniqueness constraint.
    pub fn is_unique_violation(&self) -> bool {
        match self {
            StoreError::Query { source, .. } => source
                .as_database_error()
                .is_some_and(|e| e.is_unique_violation()),
            _ => false,
        }
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Names the operation a query failed in.
trait QueryContext<T> {
    fn op(self, op: &'static str) -> Result<T>;
}

impl<T> QueryContext<T> for std::result::Result<T, sqlx::Error> {
    fn op(self, op: &'static str) -> Result<T> {
        self.map_err(|source| StoreError::Query { op, source })
    }
}

#[derive(Clone)]
enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// Runs `$body` with `$pool` bound to the backend's pool (type-checked once per backend).
macro_rules! on_pool {
    ($store:expr, $pool:ident => $body:expr) => {
        match &$store.pool {
            $crate::store::Pool::Sqlite($pool) => $body,
            $crate::store::Pool::Postgres($pool) => $body,
        }
    };
}

/// Runs `$body` with `$conn` bound to the transaction's connection (type-checked once per backend).
macro_rules! on_tx {
    ($tx:expr, $conn:ident => $body:expr) => {
        match &mut $tx.inner {
            $crate::store::TxInner::Sqlite(tx) => {
                let $conn = &mut **tx;
                $body
            }
            $crate::store::TxInner::Postgres(tx) => {
                let $conn = &mut **tx;
                $body
            }
        }
    };
}
/// A table's handle on the store: `store.outbox()` is a `Outbox<'_>`, whose
/// methods are that table's reads and writes. It derefs to the [`Store`].
macro_rules! store_handle {
    ($(#[$doc:meta])* $name:ident, $accessor:ident) => {
        $(#[$doc])*
        pub struct $name<'s>(&'s $crate::store::Store);

        impl $crate::store::Store {
            $(#[$doc])*
            pub fn $accessor(&self) -> $name<'_> {
                $name(self)
            }
        }

        impl std::ops::Deref for $name<'_> {
            type Target = $crate::store::Store;

            fn deref(&self) -> &$crate::store::Store {
                self.0
            }
        }
    };
}

/// A table's handle in a transaction: `tx.requests()` is a
/// `RequestsTx<'_>`, whose methods are that table's reads and writes in
/// this transaction. It derefs to the [`Tx`].
macro_rules! tx_handle {
    ($(#[$doc:meta])* $name:ident, $accessor:ident) => {
        $(#[$doc])*
        pub struct $name<'t>(&'t mut $crate::store::Tx);

        impl $crate::store::Tx {
            $(#[$doc])*
            pub fn $accessor(&mut self) -> $name<'_> {
                $name(self)
            }
        }

        impl std::ops::Deref for $name<'_> {
            type Target = $crate::store::Tx;

            fn deref(&self) -> &$crate::store::Tx {
                self.0
            }
        }

        impl std::ops::DerefMut for $name<'_> {
            fn deref_mut(&mut self) -> &mut $crate::store::Tx {
                self.0
            }
        }
    };
}
pub(crate) use {on_pool, on_tx, store_handle, tx_handle};

/// A handle on the database, cheap to clone.
#[derive(Clone)]
pub struct Store {
    pool: Pool,
    url: String,
    hub: std::sync::Arc<watch::Hub>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("url", &self.url).finish()
    }
}

enum TxInner {
    Sqlite(sqlx::Transaction<'static, Sqlite>),
    Postgres(sqlx::Transaction<'static, Postgres>),
}

/// A transaction. Dropped without [`Tx::commit`], it rolls back.
pub struct Tx {
    inner: TxInner,
    hub: std::sync::Arc<watch::Hub>,
    /// Whether committing must wake the loops that watch for changes.
    notify: bool,
    /// What is counted once the transaction commits (a rolled-back
    /// decision is no decision).
    counted: Vec<Box<dyn FnOnce() + Send>>,
}

impl Tx {
    /// Makes the transaction's changes durable (and, if [`Tx::notify`] was
    /// called, tells the watching loops).
    pub async fn commit(self) -> Result<()> {
        match self.inner {
            TxInner::Sqlite(tx) => tx.commit().await,
            TxInner::Postgres(tx) => tx.commit().await,
        }
        .op("committing")?;
        if self.notify {
            self.hub.committed();
        }
        for count in self.counted {
            count();
        }
        Ok(())
    }

    /// Counts something in the metrics if (and when) this commits.
    pub(crate) fn count_on_commit(&mut self, count: impl FnOnce() + Send + 'static) {
        self.counted.push(Box::new(count));
    }

    /// Asks for the watching loops (the decider, the runner, other
    /// processes) to be woken when this transaction commits.
    pub async fn notify(&mut self) -> Result<()> {
        if self.notify {
            return Ok(());
        }
        self.notify = true;
        if let TxInner::Postgres(tx) = &mut self.inner {
            // Delivered to every listener when (and only if) this commits.
            sqlx::query("SELECT pg_notify($1, '')")
                .bind(watch::CHANNEL)
                .execute(&mut **tx)
                .await
                .op("notifying other processes")?;
        }
        Ok(())
    }

    /// The current time by the clock every instance agrees on: the database
    /// server's on PostgreSQL (hosts may disagree), the process's on SQLite
    /// (one file on one host). Leases and deadlines are computed from it.
    pub async fn clock(&mut self) -> Result<chrono::DateTime<chrono::Utc>> {
        match &mut self.inner {
            TxInner::Postgres(tx) => {
                let now: chrono::DateTime<chrono::Utc> =
                    sqlx::query_scalar("SELECT date_trunc('microseconds', clock_timestamp())")
                        .fetch_one(&mut **tx)
                        .await
                        .op("reading the database clock")?;
                Ok(now)
            }
            TxInner::Sqlite(_) => Ok(now()),
        }
    }

    /// Undoes the transaction's changes (dropping it does the same, later).
    pub async fn rollback(self) -> Result<()> {
        match self.inner {
            TxInner::Sqlite(tx) => tx.rollback().await,
            TxInner::Postgres(tx) => tx.rollback().await,
        }
        .op("rolling back")
    }

    /// The backend this transaction runs on.
    pub fn backend(&self) -> Backend {
        match self.inner {
            TxInner::Sqlite(_) => Backend::Sqlite,
            TxInner::Postgres(_) => Backend::Postgres,
        }
    }
}

impl Store {
    /// Opens the database at `url` and applies any pending migrations.
    ///
    /// Several processes may open one SQLite file at the same moment (both
    /// profiles starting together): switching a fresh file to WAL or
    /// migrating it takes locks the other may briefly hold, so a busy or
    /// locked database is tried again for a while before giving up.
    pub async fn open(url: &DatabaseUrl) -> Result<Store> {
        Store::open_pooled(url, DEFAULT_POOL).await
    }

    /// [`Store::open`] with at most `max_connections` pooled connections on
    /// PostgreSQL (the profile's `store.max_connections`); SQLite keeps its
    /// own pool of 4. The change listener's connection comes on top.
    pub async fn open_pooled(url: &DatabaseUrl, max_connections: u32) -> Result<Store> {
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let opened = async {
                let store = Store::connect_pooled(url, max_connections).await?;
                store.migrate().await?;
                Ok::<_, StoreError>(store)
            };
            match opened.await {
                Ok(store) => return Ok(store),
                Err(error) if attempt < 40 && error.is_busy() => {
                    tracing::debug!(%error, attempt, "the database is busy; opening it again");
                    tokio::time::sleep(Duration::from_millis(50 * u64::from(attempt.min(10))))
                        .await;
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// Opens the database without migrating it.
    pub async fn connect(url: &DatabaseUrl) -> Result<Store> {
        Store::connect_pooled(url, DEFAULT_POOL).await
    }

    /// [`Store::connect`] with at most `max_connections` pooled connections
    /// on PostgreSQL.
    pub async fn connect_pooled(url: &DatabaseUrl, max_connections: u32) -> Result<Store> {
        let shown = url.redacted();
        let connect_error = |source| StoreError::Connect {
            url: shown.clone(),
            source,
        };
        let mut doorbell = None;
        let pool = if url.is_postgres() {
            let options = PgConnectOptions::from_str(url.expose()).map_err(connect_error)?;
            let pool = PoolOptions::<Postgres>::new()
                .max_connections(max_connections.max(1))
                .acquire_timeout(Duration::from_secs(15))
                .connect_with(options)
                .await
                .map_err(connect_error)?;
            Pool::Postgres(pool)
        } else {
            let options = SqliteConnectOptions::from_str(url.expose())
                .map_err(connect_error)?
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .busy_timeout(SQLITE_BUSY_TIMEOUT)
                .foreign_keys(true);
            let file = options.get_filename().to_path_buf();
            if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty())
                && file.as_os_str() != ":memory:"
            {
                std::fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir {
                    dir: dir.display().to_string(),
                    source,
                })?;
            }
            let pool = PoolOptions::<Sqlite>::new()
                .max_connections(4)
                .acquire_timeout(Duration::from_secs(15))
                .connect_with(options)
                .await
                .map_err(connect_error)?;
            // The file exists now (unless it is in memory): the processes
            // sharing it ring each other beside it.
            doorbell = std::fs::canonicalize(&file)
                .ok()
                .and_then(|file| doorbell::Doorbell::beside(&file));
            Pool::Sqlite(pool)
        };
        Ok(Store {
            pool,
            url: shown,
            hub: watch::Hub::new(doorbell),
        })
    }

    /// Applies the embedded migrations; returns how many were new.
    ///
    /// Several processes may start at once on one database (both profiles,
    /// or two instances). PostgreSQL serialises them with an advisory lock;
    /// on SQLite a loser of the race sees the winner's work and retries.
    pub async fn migrate(&self) -> Result<usize> {
        // A database a newer Eagle migrated is refused before anything runs.
        if let Some(refusal) = self.schema_state().await?.refusal(&self.url) {
            return Err(refusal);
        }
        let migrator = schema::migrator(self.backend());
        let known = migrator.iter().count();
        let before = self.applied_migrations().await.unwrap_or(0);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let result = match &self.pool {
                Pool::Sqlite(pool) => migrator.run(pool).await,
                Pool::Postgres(pool) => migrator.run(pool).await,
            };
            match result {
                Ok(()) => return Ok(known.saturating_sub(before)),
                Err(sqlx::migrate::MigrateError::VersionMissing(_)) => {
                    // Migrated further meanwhile, by a newer Eagle.
                    let state = self.schema_state().await?;
                    return Err(state.refusal(&self.url).unwrap_or(StoreError::Newer {
                        url: self.url.clone(),
                        versions: "unknown".into(),
                    }));
                }
                Err(source) => {
                    let done = self.applied_migrations().await.unwrap_or(0);
                    if done >= known {
                        // Another process applied them meanwhile.
                        return Ok(0);
                    }
                    if attempt >= 10 || self.backend() == Backend::Postgres {
                        return Err(StoreError::Migrate {
                            url: self.url.clone(),
                            source,
                        });
                    }
                    tracing::debug!(error = %source, attempt, "migration raced another process; retrying");
                    tokio::time::sleep(Duration::from_millis(50 * attempt)).await;
                }
            }
        }
    }

    /// How many migrations this binary knows.
    pub fn known_migrations(&self) -> usize {
        match &self.pool {
            Pool::Sqlite(_) => sqlx::migrate!("../migrations/sqlite").iter().count(),
            Pool::Postgres(_) => sqlx::migrate!("../migrations/postgres").iter().count(),
        }
    }

    /// How many migrations the database has applied.
    pub async fn applied_migrations(&self) -> Result<usize> {
        let count: i64 = on_pool!(self, pool => {
            sqlx::query_scalar("SELECT COUNT(*) FROM _sqlx_migrations WHERE success")
                .fetch_one(pool)
                .await
        })
        .op("counting applied migrations")?;
        Ok(count as usize)
    }

    /// The backend this store talks to.
    pub fn backend(&self) -> Backend {
        match self.pool {
            Pool::Sqlite(_) => Backend::Sqlite,
            Pool::Postgres(_) => Backend::Postgres,
        }
    }

    /// The database URL with any password hidden.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Starts a transaction that will write. On SQLite it takes the write lock
    /// at once (`BEGIN IMMEDIATE`), so a read-then-write never fails halfway
    /// with `SQLITE_BUSY`.
    pub async fn begin_write(&self) -> Result<Tx> {
        let inner = match &self.pool {
            Pool::Sqlite(pool) => TxInner::Sqlite(
                pool.begin_with("BEGIN IMMEDIATE")
                    .await
                    .op("starting a write transaction")?,
            ),
            Pool::Postgres(pool) => {
                TxInner::Postgres(pool.begin().await.op("starting a write transaction")?)
            }
        };
        Ok(self.tx(inner))
    }

    fn tx(&self, inner: TxInner) -> Tx {
        Tx {
            inner,
            hub: std::sync::Arc::clone(&self.hub),
            notify: false,
            counted: Vec::new(),
        }
    }

    /// Starts a read-only transaction: a consistent view for reports.
    pub async fn begin_read(&self) -> Result<Tx> {
        let inner = match &self.pool {
            Pool::Sqlite(pool) => {
                TxInner::Sqlite(pool.begin().await.op("starting a read transaction")?)
            }
            Pool::Postgres(pool) => TxInner::Postgres(
                pool.begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    .await
                    .op("starting a read transaction")?,
            ),
        };
        Ok(self.tx(inner))
    }

    /// Closes every connection, waiting for them to finish.
    pub async fn close(&self) {
        self.hub.stop.cancel();
        on_pool!(self, pool => pool.close().await)
    }
}

/// Current time, truncated to microseconds so that both backends store and
/// return exactly the same instant.
pub fn now() -> chrono::DateTime<chrono::Utc> {
    let now = chrono::Utc::now();
    chrono::DateTime::from_timestamp_micros(now.timestamp_micros()).unwrap_or(now)
}

/// A bounded `Duration` as a `TimeDelta`.
fn delta(d: Duration) -> chrono::TimeDelta {
    chrono::TimeDelta::from_std(d).unwrap_or(chrono::TimeDelta::days(365))
}
