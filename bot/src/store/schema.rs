//! The schema's version: the embedded migrations of each backend, what a
//! database has applied of them (sqlx's `_sqlx_migrations`), what an upgrade
//! would apply (`eagle migrate --check`), and the refusal of a database that
//! a newer Eagle has migrated further than this binary knows.

use sqlx::migrate::Migrator;

use super::{Backend, Pool, QueryContext, Result, Store, StoreError, on_pool};

/// One migration, by version and description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migration {
    pub version: i64,
    pub description: String,
}

impl std::fmt::Display for Migration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:04} {}", self.version, self.description)
    }
}

/// Where a database stands against this binary's migrations.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SchemaState {
    /// Migrations applied successfully that this binary knows.
    pub applied: usize,
    /// This binary's migrations the database has not applied (an upgrade
    /// would apply them, in this order).
    pub pending: Vec<Migration>,
    /// Migrations the database has applied that this binary does not know:
    /// a newer Eagle migrated it.
    pub unknown: Vec<Migration>,
}

impl SchemaState {
    /// The refusal of a database newer than the binary, if it is one.
    pub fn refusal(&self, url: &str) -> Option<StoreError> {
        (!self.unknown.is_empty()).then(|| StoreError::Newer {
            url: url.to_string(),
            versions: self
                .unknown
                .iter()
                .map(|m| format!("{m}"))
                .collect::<Vec<_>>()
                .join(", "),
        })
    }
}

/// The migrations embedded for `backend`. sqlx's own check of applied
/// versions it does not know stays on (`ignore_missing` false): Eagle
/// refuses such a database first, with [`StoreError::Newer`], and sqlx's
/// check only catches one migrated further between that look and the run.
pub(super) fn migrator(backend: Backend) -> Migrator {
    let mut migrator = match backend {
        Backend::Sqlite => sqlx::migrate!("../migrations/sqlite"),
        Backend::Postgres => sqlx::migrate!("../migrations/postgres"),
    };
    migrator.set_ignore_missing(false);
    migrator
}

impl Store {
    /// Compares what the database applied with this binary's migrations,
    /// applying nothing. A database never migrated has every migration
    /// pending.
    pub async fn schema_state(&self) -> Result<SchemaState> {
        let exists: bool = match &self.pool {
            Pool::Sqlite(pool) => sqlx::query_scalar(
                "SELECT COUNT(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
            )
            .fetch_one(pool)
            .await,
            Pool::Postgres(pool) => {
                sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
                    .fetch_one(pool)
                    .await
            }
        }
        .op("looking for the migrations table")?;
        let rows: Vec<(i64, String, bool)> = if exists {
            on_pool!(self, pool => {
                sqlx::query_as("SELECT version, description, success FROM _sqlx_migrations ORDER BY version")
                    .fetch_all(pool)
                    .await
            })
            .op("reading the applied migrations")?
        } else {
            Vec::new()
        };
        let migrator = migrator(self.backend());
        let known: Vec<&sqlx::migrate::Migration> = migrator
            .iter()
            .filter(|m| !m.migration_type.is_down_migration())
            .collect();
        let mut state = SchemaState::default();
        for (version, description, success) in &rows {
            if !known.iter().any(|m| m.version == *version) {
                state.unknown.push(Migration {
                    version: *version,
                    description: description.clone(),
                });
            } else if *success {
                state.applied += 1;
            }
        }
        for m in known {
            let done = rows
                .iter()
                .any(|(v, _, success)| *v == m.version && *success);
            if !done {
                state.pending.push(Migration {
                    version: m.version,
                    description: m.description.to_string(),
                });
            }
        }
        Ok(state)
    }
}
