//! Telling the loops that something they care about changed in the database.
//!
//! The database is the bus between Eagle and the executor; this is how each
//! side learns, promptly and without a polling storm, that the other wrote:
//!
//! * **in-process**: a transaction that called [`super::Tx::notify`] bumps a
//!   counter on commit (the shell runs both sides in one process);
//! * **PostgreSQL**: the same transaction also runs `pg_notify`, delivered
//!   to every `LISTEN`ing process at commit. A `LISTEN` connection misses
//!   notifications while it reconnects, so a reconnect counts as a change
//!   and the listeners sweep everything pending;
//! * **SQLite across processes**: the committing process rings the others'
//!   doorbells ([`super::doorbell`]: a datagram to each watcher's socket
//!   beside the file), and a poll of `PRAGMA data_version` on a connection
//!   of its own catches what rings nobody (every 500 ms with a doorbell,
//!   every 25 ms without one). The pragma is a read-only check that never
//!   takes the write lock, and its value changes when another connection
//!   commits.
//!
//! A change is a hint, never the data: listeners always re-read what is
//! pending, so a spurious wake-up costs one sweep and a missed one is made up
//! by the next.

use std::sync::Arc;
use std::time::Duration;

use sqlx::Connection as _;

use super::doorbell::Doorbell;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The PostgreSQL notification channel.
pub(crate) const CHANNEL: &str = "eagle_changes";
/// How often SQLite's data version is read when nothing rings.
const SQLITE_POLL: Duration = Duration::from_millis(25);
/// How often it is read when the doorbell is bound: only a writer that does
/// not ring waits this long.
const SQLITE_POLL_WITH_DOORBELL: Duration = Duration::from_millis(500);

/// Shared by every clone of a store.
#[derive(Debug)]
pub(crate) struct Hub {
    generation: watch::Sender<u64>,
    /// Whether the watcher of other processes is connected.
    ready: watch::Sender<bool>,
    started: std::sync::Once,
    pub(crate) stop: CancellationToken,
    /// Other processes on this SQLite file, rung on commit.
    doorbell: Option<Doorbell>,
}

impl Hub {
    pub(crate) fn new(doorbell: Option<Doorbell>) -> Arc<Hub> {
        Arc::new(Hub {
            generation: watch::Sender::new(0),
            ready: watch::Sender::new(false),
            started: std::sync::Once::new(),
            stop: CancellationToken::new(),
            doorbell,
        })
    }

    /// Marks a change made in this process.
    pub(crate) fn bump(&self) {
        self.generation.send_modify(|g| *g = g.wrapping_add(1));
    }

    /// Marks a committed change: this process's loops, and the other
    /// processes' on the same SQLite file (PostgreSQL tells its listeners
    /// itself, at commit).
    pub(crate) fn committed(&self) {
        self.bump();
        if let Some(doorbell) = &self.doorbell {
            doorbell.ring();
        }
    }
}

/// A subscription to changes: [`Changes::changed`] resolves after the next one.
#[derive(Debug)]
pub struct Changes {
    rx: watch::Receiver<u64>,
    ready: watch::Receiver<bool>,
}

impl Changes {
    /// Waits for the next change after the last one seen.
    pub async fn changed(&mut self) {
        if self.rx.changed().await.is_err() {
            // The hub lives as long as the store; if it is gone, nothing
            // will ever change again.
            std::future::pending::<()>().await;
        }
    }

    /// Marks every change so far as seen.
    pub fn mark_seen(&mut self) {
        self.rx.borrow_and_update();
    }

    /// Waits until changes made by other processes are watched: from then
    /// on, none is missed.
    pub async fn ready(&mut self) {
        if self.ready.wait_for(|ready| *ready).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

impl super::Store {
    /// Subscribes to changes. The first subscription starts the watcher of
    /// other processes' changes (a `LISTEN` on PostgreSQL, a data-version
    /// poll on SQLite).
    pub fn changes(&self) -> Changes {
        let hub = Arc::clone(&self.hub);
        let store = self.clone();
        hub.started.call_once(|| {
            tokio::spawn(watch_others(store));
        });
        Changes {
            rx: self.hub.generation.subscribe(),
            ready: self.hub.ready.subscribe(),
        }
    }
}

async fn watch_others(store: super::Store) {
    let stop = store.hub.stop.clone();
    let work = async {
        match &store.pool {
            super::Pool::Postgres(pool) => listen_postgres(pool, &store.hub).await,
            super::Pool::Sqlite(_) => poll_sqlite(&store).await,
        }
    };
    tokio::select! {
        _ = stop.cancelled() => {}
        _ = work => {}
    }
}

async fn listen_postgres(pool: &sqlx::PgPool, hub: &Hub) {
    let mut backoff = crate::ground::backoff::Backoff::new();
    loop {
        let listener = async {
            let mut listener = sqlx::postgres::PgListener::connect_with(pool).await?;
            listener.listen(CHANNEL).await?;
            Ok::<_, sqlx::Error>(listener)
        };
        let mut listener = match listener.await {
            Ok(listener) => listener,
            Err(error) => {
                let wait = backoff.failed();
                tracing::warn!(%error, wait_ms = wait.as_millis() as u64, "cannot LISTEN for changes; retrying");
                tokio::time::sleep(wait).await;
                continue;
            }
        };
        // Whatever happened while not listening is swept now.
        hub.bump();
        hub.ready.send_replace(true);
        loop {
            match listener.try_recv().await {
                Ok(Some(_)) => {
                    backoff.succeeded();
                    hub.bump();
                }
                // The connection was lost and re-established: notifications
                // may be missing, so sweep.
                Ok(None) => hub.bump(),
                Err(error) => {
                    if hub.stop.is_cancelled() {
                        return;
                    }
                    let wait = backoff.failed();
                    tracing::warn!(%error, wait_ms = wait.as_millis() as u64, "the LISTEN connection failed; reconnecting");
                    hub.bump();
                    tokio::time::sleep(wait).await;
                    break;
                }
            }
        }
    }
}

async fn poll_sqlite(store: &super::Store) {
    let super::Pool::Sqlite(pool) = &store.pool else {
        return;
    };
    let hub = &store.hub;
    let bell = hub.doorbell.as_ref().and_then(Doorbell::listen);
    let every = if bell.is_some() {
        SQLITE_POLL_WITH_DOORBELL
    } else {
        SQLITE_POLL
    };
    let options = pool.connect_options();
    let mut backoff = crate::ground::backoff::Backoff::new();
    loop {
        let mut conn = match sqlx::SqliteConnection::connect_with(&options).await {
            Ok(conn) => conn,
            Err(error) => {
                let wait = backoff.failed();
                tracing::warn!(%error, "cannot open a connection to watch the database; retrying");
                tokio::time::sleep(wait).await;
                continue;
            }
        };
        let mut last: Option<i64> = None;
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let rung = async {
                match &bell {
                    Some(bell) => bell.rung().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = tick.tick() => {}
                result = rung => {
                    if result.is_ok() {
                        // A ring is a commit: no need to read the version.
                        hub.bump();
                        continue;
                    }
                }
            }
            match sqlx::query_scalar::<_, i64>("PRAGMA data_version")
                .fetch_one(&mut conn)
                .await
            {
                Ok(version) => {
                    backoff.succeeded();
                    match last {
                        Some(v) if v != version => hub.bump(),
                        Some(_) => {}
                        // Connected: whatever happened before is swept now.
                        None => {
                            hub.bump();
                            hub.ready.send_replace(true);
                        }
                    }
                    last = Some(version);
                }
                Err(error) => {
                    let wait = backoff.failed();
                    tracing::warn!(%error, wait_ms = wait.as_millis() as u64, "cannot read the database's data version; reconnecting");
                    hub.bump();
                    tokio::time::sleep(wait).await;
                    break;
                }
            }
        }
    }
}
