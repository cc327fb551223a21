//! What the egress proxy refused a run: one row per destination, its
//! repeats counted. The proxy coalesces refusals in memory and writes them
//! at most about once a second, so a worker in a loop costs one upsert per
//! destination per second, not one per attempt.

use chrono::{DateTime, Utc};

use super::{QueryContext, Result, on_pool, on_tx};

super::store_handle!(
    /// What the egress proxy refused a run: `store.egress()`.
    EgressRefusals,
    egress
);

super::tx_handle!(
    /// What the egress proxy refused a run, in a transaction: `tx.egress()`.
    EgressRefusalsTx,
    egress
);

/// The host every destination past the proxy's per-attempt cap is counted
/// under (with port 0).
pub const OTHER_HOSTS: &str = "*";

/// Refusals of one destination since the last write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRefusals {
    pub host: String,
    pub port: u16,
    pub reason: String,
    pub first_at: DateTime<Utc>,
    pub last_at: DateTime<Utc>,
    pub count: u64,
}

/// A destination the proxy refused a run, with how often and when.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct EgressRefusal {
    pub run_id: i64,
    /// The host as the worker named it, or `*` for destinations past the
    /// proxy's per-attempt cap.
    pub host: String,
    pub port: i64,
    pub reason: String,
    pub first_at: DateTime<Utc>,
    pub last_at: DateTime<Utc>,
    pub count: i64,
}

impl EgressRefusalsTx<'_> {
    /// Adds `refusals` to the run's counts (a destination seen before keeps
    /// its first time and gets the newest reason).
    pub async fn record_refusals(&mut self, run_id: i64, refusals: &[NewRefusals]) -> Result<()> {
        for r in refusals {
            on_tx!(self, conn => {
                sqlx::query(
                    "INSERT INTO egress_refusals (run_id, host, port, reason, first_at, last_at, count) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7) \
                     ON CONFLICT (run_id, host, port) DO UPDATE SET \
                     count = egress_refusals.count + excluded.count, \
                     reason = excluded.reason, \
                     last_at = CASE WHEN excluded.last_at > egress_refusals.last_at \
                               THEN excluded.last_at ELSE egress_refusals.last_at END",
                )
                .bind(run_id)
                .bind(&r.host)
                .bind(i64::from(r.port))
                .bind(&r.reason)
                .bind(r.first_at)
                .bind(r.last_at)
                .bind(i64::try_from(r.count).unwrap_or(i64::MAX))
                .execute(conn)
                .await
                .map(|done| done.rows_affected())
            })
            .op("recording egress refusals")?;
        }
        Ok(())
    }

    /// What the proxy refused the run, the most refused first.
    pub async fn egress_refusals(&mut self, run_id: i64) -> Result<Vec<EgressRefusal>> {
        on_tx!(self, conn => {
            sqlx::query_as(
                "SELECT run_id, host, port, reason, first_at, last_at, count FROM egress_refusals \
                 WHERE run_id = $1 ORDER BY count DESC, last_at DESC, host, port",
            )
            .bind(run_id)
            .fetch_all(conn)
            .await
        })
        .op("reading egress refusals")
    }
}

impl EgressRefusals<'_> {
    /// Records refusals in a transaction of their own.
    pub async fn record_refusals(&self, run_id: i64, refusals: &[NewRefusals]) -> Result<()> {
        if refusals.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin_write().await?;
        tx.egress().record_refusals(run_id, refusals).await?;
        tx.commit().await
    }

    /// What the proxy refused the run, outside any transaction.
    pub async fn egress_refusals(&self, run_id: i64) -> Result<Vec<EgressRefusal>> {
        on_pool!(self, pool => {
            sqlx::query_as(
                "SELECT run_id, host, port, reason, first_at, last_at, count FROM egress_refusals \
                 WHERE run_id = $1 ORDER BY count DESC, last_at DESC, host, port",
            )
            .bind(run_id)
            .fetch_all(pool)
            .await
        })
        .op("reading egress refusals")
    }
}
