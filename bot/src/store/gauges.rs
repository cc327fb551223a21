//! What the metrics read of the database at each scrape: counts by status
//! and state, the workers running, what waits on a human and on Zulip. One
//! read transaction; nothing of a task's text.

use chrono::{DateTime, Utc};

use super::{QueryContext as _, Result, Store, on_pool, on_tx};

/// The state the ops listener exports as gauges.
#[derive(Debug, Clone, PartialEq)]
pub struct Gauges {
    /// When they were read, by the database's clock.
    pub now: DateTime<Utc>,
    pub tasks: Vec<(String, i64)>,
    pub runs: Vec<(String, i64)>,
    pub workers_running: i64,
    pub worker_slots: i64,
    pub escalations_waiting: i64,
    pub oldest_escalation: Option<DateTime<Utc>>,
    pub outbox_depth: i64,
    pub oldest_outbox: Option<DateTime<Utc>>,
}

impl Store {
    /// Reads the gauges in one consistent view.
    pub async fn gauges(&self) -> Result<Gauges> {
        let mut tx = self.begin_read().await?;
        let now = tx.clock().await?;
        let gauges = on_tx!(tx, conn => {
            let tasks: Vec<(String, i64)> = sqlx::query_as(
                "SELECT status, COUNT(*) FROM executor_queue GROUP BY status ORDER BY status",
            )
            .fetch_all(&mut *conn)
            .await
            .op("counting tasks")?;
            let runs: Vec<(String, i64)> = sqlx::query_as(
                "SELECT state, COUNT(*) FROM executor_runs GROUP BY state ORDER BY state",
            )
            .fetch_all(&mut *conn)
            .await
            .op("counting runs")?;
            let (worker_slots, workers_running): (i64, i64) = sqlx::query_as(
                "SELECT COUNT(*), COUNT(CASE WHEN run_id IS NOT NULL AND expires_at > $1 THEN 1 END) \
                 FROM worker_slots",
            )
            .bind(now)
            .fetch_one(&mut *conn)
            .await
            .op("counting worker slots")?;
            let (escalations_waiting, oldest_escalation): (i64, Option<DateTime<Utc>>) =
                sqlx::query_as(
                    "SELECT COUNT(*), MIN(COALESCE(escalated_at, created_at)) FROM worker_requests \
                     WHERE status = 'escalated'",
                )
                .fetch_one(&mut *conn)
                .await
                .op("counting escalations")?;
            let (outbox_depth, oldest_outbox): (i64, Option<DateTime<Utc>>) = sqlx::query_as(
                "SELECT COUNT(*), MIN(created_at) FROM outbox \
                 WHERE delivered_at IS NULL AND gave_up_at IS NULL",
            )
            .fetch_one(&mut *conn)
            .await
            .op("counting the outbox")?;
            Gauges {
                now,
                tasks,
                runs,
                workers_running,
                worker_slots,
                escalations_waiting,
                oldest_escalation,
                outbox_depth,
                oldest_outbox,
            }
        });
        tx.rollback().await?;
        Ok(gauges)
    }

    /// Whether the database answers and holds this binary's schema: the
    /// readiness check.
    pub async fn schema_ready(&self) -> Result<bool> {
        match self.applied_migrations().await {
            Ok(applied) => Ok(applied >= self.known_migrations()),
            // The database answers, but not about migrations: the schema
            // is missing (an empty database, a schema dropped).
            Err(error) => {
                on_pool!(self, pool => sqlx::query("SELECT 1").execute(pool).await.map(|_| ()))
                    .op("reaching the database")?;
                tracing::debug!(%error, "no migrations table");
                Ok(false)
            }
        }
    }

    /// The names of the leases in `names` that nobody holds now.
    pub async fn unheld_leases(&self, names: &[String]) -> Result<Vec<String>> {
        let mut unheld = Vec::new();
        let mut tx = self.begin_read().await?;
        let now = tx.clock().await?;
        for name in names {
            let held: Option<String> = on_tx!(tx, conn => {
                sqlx::query_scalar("SELECT owner FROM leases WHERE name = $1 AND expires_at > $2")
                    .bind(name)
                    .bind(now)
                    .fetch_optional(&mut *conn)
                    .await
            })
            .op("reading a lease")?;
            if held.is_none() {
                unheld.push(name.clone());
            }
        }
        tx.rollback().await?;
        Ok(unheld)
    }
}
