//! `[store]`: how many database connections one process keeps, read and
//! checked once, here.

use serde::Deserialize;

use super::ProfileError;
use super::field::Origins;

/// The most PostgreSQL connections a process of either role opens by
/// default (its change listener's `LISTEN` connection comes on top).
/// (the store's own default, `store::DEFAULT_POOL`, is the same).
pub const DEFAULT_MAX_CONNECTIONS: u32 = 8;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStore {
    pub max_connections: Option<i64>,
    /// Read by `care::prune_after`.
    pub prune_after: Option<String>,
}

/// The database pool of one process (`[store]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreSettings {
    /// The most connections this process's pool opens on PostgreSQL, besides
    /// the `LISTEN` connection of its change listener (SQLite keeps its own
    /// small pool and ignores it). Every Eagle and every executor sharing a
    /// server counts this plus one against the server's `max_connections`.
    pub max_connections: u32,
}

pub(super) fn store(raw: &RawStore, origins: &Origins<'_>) -> Result<StoreSettings, ProfileError> {
    let max_connections = match raw.max_connections {
        None => DEFAULT_MAX_CONNECTIONS,
        Some(n) if (2..=64).contains(&n) => n as u32,
        Some(n) => {
            return Err(origins.error(
                "store.max_connections",
                None,
                format!("{n} is outside 2..=64 (one connection starves the loops that share it)"),
            ));
        }
    };
    Ok(StoreSettings { max_connections })
}
