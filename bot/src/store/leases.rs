//! Leases (the `leases` table): each elects the one instance that runs a
//! singleton (the outbox sender of an identity, the analyzer, the PR loop,
//! ...), and runners keep a presence lease that `!status` counts. The
//! take-over rule (a holder that died on this host) is
//! `singleton::Lease`'s; this is the SQL.

use super::{Backend, QueryContext, Result, on_pool, on_tx};

super::store_handle!(
    /// Leases: the one instance that runs a loop: `store.leases()`.
    Leases,
    leases
);

super::tx_handle!(
    /// Leases: the one instance that runs a loop, in a transaction: `tx.leases()`.
    LeasesTx,
    leases
);

/// The prefix of runner presence leases (`runner:<instance>`).
pub const RUNNER_PRESENCE_PREFIX: &str = "runner:";

/// A query with a row if the lease `$1` is held by `$2` with more than a
/// margin left, `$3`: on PostgreSQL the margin in seconds, by the database
/// server's clock (instances run on several hosts); on SQLite the instant
/// the margin ends, by the one host's clock. A statement that may only run
/// under a lease (an outbox delivery's attempt) includes it, so that the
/// check and the write are one statement.
pub(super) fn held_with_margin(backend: Backend) -> &'static str {
    match backend {
        Backend::Postgres => {
            "SELECT 1 AS held FROM leases WHERE name = $1 AND owner = $2 \
             AND expires_at > now() + make_interval(secs => $3)"
        }
        Backend::Sqlite => {
            "SELECT 1 AS held FROM leases WHERE name = $1 AND owner = $2 AND expires_at > $3"
        }
    }
}

impl Leases<'_> {
    /// Takes or renews the lease `name` for `owner` for `ttl`. Returns whether
    /// `owner` holds it now. Leases elect the one instance that runs a
    /// singleton (the outbox sender of an identity, the analyzer).
    pub async fn acquire_lease(
        &self,
        name: &str,
        owner: &str,
        ttl: std::time::Duration,
    ) -> Result<bool> {
        const UPSERT: &str = "ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at, \
                     fence = leases.fence + CASE WHEN leases.owner = excluded.owner THEN 0 ELSE 1 END \
                 WHERE leases.owner = excluded.owner OR leases.expires_at < ";
        let holder: Option<String> = match &self.pool {
            // One host's clock for every instance: the database server's.
            super::Pool::Postgres(pool) => sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "INSERT INTO leases (name, owner, expires_at, fence) \
                 VALUES ($1, $2, now() + make_interval(secs => $3), 1) {UPSERT} now() RETURNING owner"
            )))
            .bind(name)
            .bind(owner)
            .bind(ttl.as_secs_f64())
            .fetch_optional(pool)
            .await,
            // SQLite is one file on one host: its clock is the processes' clock.
            super::Pool::Sqlite(pool) => {
                let now = super::now();
                let expires = now + chrono::TimeDelta::from_std(ttl).unwrap_or(chrono::TimeDelta::seconds(30));
                sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                    "INSERT INTO leases (name, owner, expires_at, fence) VALUES ($1, $2, $3, 1) {UPSERT} $4 RETURNING owner"
                )))
                .bind(name)
                .bind(owner)
                .bind(expires)
                .bind(now)
                .fetch_optional(pool)
                .await
            }
        }
        .op("taking a lease")?;
        Ok(holder.as_deref() == Some(owner))
    }

    /// Who holds the lease `name`, if anyone (expired or not).
    pub async fn lease_owner(&self, name: &str) -> Result<Option<String>> {
        on_pool!(self, pool => {
            sqlx::query_scalar("SELECT owner FROM leases WHERE name = $1")
                .bind(name)
                .fetch_optional(pool)
                .await
        })
        .op("reading a lease")
    }

    /// Gives up a lease held by `owner`.
    pub async fn release_lease(&self, name: &str, owner: &str) -> Result<()> {
        on_pool!(self, pool => {
            sqlx::query("DELETE FROM leases WHERE name = $1 AND owner = $2")
                .bind(name)
                .bind(owner)
                .execute(pool)
                .await
                .map(|done| done.rows_affected())
        })
        .op("releasing a lease")?;
        Ok(())
    }
}

impl LeasesTx<'_> {
    /// How many leases whose name starts with `prefix` are held now (live
    /// runners). `prefix` is a constant without LIKE wildcards.
    pub async fn live_leases(&mut self, prefix: &str) -> Result<i64> {
        let now = self.clock().await?;
        on_tx!(self, conn => {
            sqlx::query_scalar("SELECT COUNT(*) FROM leases WHERE name LIKE $1 AND expires_at >= $2")
                .bind(format!("{prefix}%"))
                .bind(now)
                .fetch_one(conn)
                .await
        })
        .op("counting live leases")
    }
}
