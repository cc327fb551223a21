//! Claims: a runner takes a run that needs a worker and one of the global
//! worker slots in one transaction, renews its claim with heartbeats, and
//! takes over the runs of a runner of its host that is gone.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::fence::{Fence, fenced, fenced_update};
use super::tasks::{RUN_COLUMNS, sql};
use super::transitions::state_change_entry;
use super::{NewAuditEntry, QueryContext, Result, Run, RunState, StoreError, Tx, delta, on_tx};

use RunState as R;

super::store_handle!(
    /// Claims: a runner's hold on a run and a worker slot: `store.claims()`.
    Claims,
    claims
);

super::tx_handle!(
    /// Claims: a runner's hold on a run and a worker slot, in a transaction: `tx.claims()`.
    ClaimsTx,
    claims
);

/// The runs a runner may claim now (`$1`: now): queued, resumable, or in
/// `pr` with PR work asked for; not held; no live claim and no worker that
/// may still be alive; nothing waiting for a decision.
const CLAIMABLE: &str = "(r.state IN ('queued', 'in_progress') OR (r.state = 'pr' AND r.pr_work IS NOT NULL)) \
     AND NOT r.held \
     AND (r.lease_owner IS NULL OR r.lease_expires_at < $1) \
     AND (r.worker_alive_until IS NULL OR r.worker_alive_until < $1) \
     AND NOT EXISTS (SELECT 1 FROM worker_requests AS q \
         WHERE q.run_id = r.id AND q.status IN ('pending', 'escalated'))";

/// How claims are bounded.
#[derive(Debug, Clone, Copy)]
pub struct ClaimLimits {
    /// The global number of workers, across every runner.
    pub max_workers: i64,
    /// How long a claim lasts without a heartbeat.
    pub lease: Duration,
    /// How long the worker may outlive its runner (its hard timeout, the
    /// wrap-up grace and a margin): nobody else may claim the run before.
    pub alive_for: Duration,
    /// The cost cap a run starts with (`!retry` raises a run's own).
    pub cost_cap: Option<f64>,
}

/// A claimed run, ready for a worker.
#[derive(Debug, Clone)]
pub struct Claim {
    pub run: Run,
    pub fence: Fence,
    pub slot: i64,
    /// The state the run had before the claim (`queued`: a fresh start).
    pub from: RunState,
}

impl ClaimsTx<'_> {
    /// How many global worker slots are held now.
    pub async fn busy_slots(&mut self) -> Result<i64> {
        let now = self.clock().await?;
        on_tx!(self, conn => {
            sqlx::query_scalar(
                "SELECT COUNT(*) FROM worker_slots WHERE run_id IS NOT NULL AND expires_at >= $1",
            )
            .bind(now)
            .fetch_one(conn)
            .await
        })
        .op("counting busy worker slots")
    }

    /// Takes over a run whose previous runner (on this host) is gone and
    /// whose worker this runner re-adopts or rescues. Returns the new fence.
    pub async fn adopt_run(
        &mut self,
        run: &Run,
        owner: &str,
        limits: &ClaimLimits,
    ) -> Result<Option<Fence>> {
        // Fenced by the claim it takes over: a runner that took the run
        // meanwhile keeps it.
        let Some(holder) = run.lease_owner.clone() else {
            return Ok(None);
        };
        let previous = Fence {
            run: run.id,
            owner: holder,
            attempt: run.attempt,
        };
        let now = self.clock().await?;
        let lease_until = now + delta(limits.lease);
        match fenced_update!(
            self,
            &previous,
            "adopting a run",
            "lease_owner = $4, lease_expires_at = $5, heartbeat_at = $6, updated_at = $6",
            owner,
            lease_until,
            now,
        ) {
            Ok(()) => {}
            Err(StoreError::Fenced(_)) => return Ok(None),
            Err(error) => return Err(error),
        }
        if let Some(slot) = run.slot {
            on_tx!(self, conn => {
                sqlx::query("UPDATE worker_slots SET owner = $3 WHERE slot = $1 AND run_id = $2")
                    .bind(slot)
                    .bind(run.id)
                    .bind(owner)
                    .execute(conn)
                    .await
                    .map(|done| done.rows_affected())
            })
            .op("adopting a worker slot")?;
        }
        self.audit_log()
            .audit(&NewAuditEntry {
                actor: format!("runner:{owner}"),
                action: "run.adopted".into(),
                subject: format!("run:{}", run.id),
                reason: Some(format!(
                    "attempt {}: taken over from {}",
                    run.attempt,
                    run.lease_owner.as_deref().unwrap_or("nobody")
                )),
                ..NewAuditEntry::default()
            })
            .await?;
        Ok(Some(Fence {
            run: run.id,
            owner: owner.to_string(),
            attempt: run.attempt,
        }))
    }
}

impl Tx {
    /// Frees a slot held for `run_id` (not one a newer claim took over).
    pub(super) async fn release_slot(&mut self, slot: i64, run_id: i64) -> Result<()> {
        on_tx!(self, conn => {
            sqlx::query(
                "UPDATE worker_slots SET run_id = NULL, owner = NULL, expires_at = NULL \
                 WHERE slot = $1 AND run_id = $2",
            )
            .bind(slot)
            .bind(run_id)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("freeing a worker slot")?;
        Ok(())
    }

    /// Takes a free slot among `1..=max` for `run_id`; `None` when all are held.
    async fn take_slot(
        &mut self,
        run_id: i64,
        owner: &str,
        max: i64,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<Option<i64>> {
        for slot in 1..=max.max(0) {
            let taken: Option<i64> = on_tx!(self, conn => {
                sqlx::query_scalar(
                    "INSERT INTO worker_slots (slot, run_id, owner, expires_at, fence) \
                     VALUES ($1, $2, $3, $4, 1) \
                     ON CONFLICT (slot) DO UPDATE SET run_id = excluded.run_id, \
                         owner = excluded.owner, expires_at = excluded.expires_at, \
                         fence = worker_slots.fence + 1 \
                     WHERE worker_slots.run_id IS NULL OR worker_slots.expires_at < $5 \
                     RETURNING slot",
                )
                .bind(slot)
                .bind(run_id)
                .bind(owner)
                .bind(until)
                .bind(now)
                .fetch_optional(conn)
                .await
            })
            .op("taking a worker slot")?;
            if taken.is_some() {
                return Ok(taken);
            }
        }
        Ok(None)
    }
}

impl Claims<'_> {
    /// Claims the next run that needs a worker, if a global slot is free,
    /// claiming is not paused and nothing holds it. The claim, the slot and
    /// the state change commit together.
    pub async fn claim_run(&self, owner: &str, limits: &ClaimLimits) -> Result<Option<Claim>> {
        // A read first: most wake-ups find nothing to claim, and need not
        // take SQLite's write lock to learn it.
        if self.work_in_sight().await? == 0 {
            return Ok(None);
        }
        let mut tx = self.begin_write().await?;
        if tx.controls().control(super::Control::Paused).await?
            || tx.controls().control(super::Control::HoldAll).await?
        {
            return Ok(None);
        }
        let now = tx.clock().await?;
        let skip_locked = if tx.backend() == super::Backend::Postgres {
            " FOR UPDATE OF r SKIP LOCKED"
        } else {
            ""
        };
        // By the task's priority (1 first, none last), then the oldest run.
        let query = sql(&[
            "SELECT r.id FROM executor_runs AS r \
             JOIN executor_queue AS t ON t.task_gid = r.task_gid WHERE ",
            CLAIMABLE,
            " ORDER BY (t.priority IS NULL), t.priority, r.id LIMIT 1",
            skip_locked,
        ]);
        let candidate: Option<i64> = on_tx!(tx, conn => {
            sqlx::query_scalar(query).bind(now).fetch_optional(conn).await
        })
        .op("finding a run to claim")?;
        let Some(run_id) = candidate else {
            return Ok(None);
        };
        let Some(run) = tx.tasks().run(run_id).await? else {
            return Ok(None);
        };
        let alive_until = now + delta(limits.alive_for);
        let lease_until = now + delta(limits.lease);
        let Some(slot) = tx
            .take_slot(
                run_id,
                owner,
                limits.max_workers,
                now,
                alive_until.max(lease_until),
            )
            .await?
        else {
            return Ok(None);
        };
        let from = run.state;
        let changed = on_tx!(tx, conn => {
            sqlx::query(
                "UPDATE executor_runs SET lease_owner = $2, lease_expires_at = $3, \
                 heartbeat_at = $4, attempt = attempt + 1, slot = $5, \
                 worker_alive_until = $6, updated_at = $4, started_at = COALESCE(started_at, $4), \
                 waiting_on = NULL, worker_exit_code = NULL, \
                 cost_cap_usd = COALESCE(cost_cap_usd, $9) \
                 WHERE id = $1 AND state = $7 AND attempt = $8",
            )
            .bind(run_id)
            .bind(owner)
            .bind(lease_until)
            .bind(now)
            .bind(slot)
            .bind(alive_until)
            .bind(from.as_str())
            .bind(run.attempt)
            .bind(limits.cost_cap)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("claiming a run")?;
        if changed != 1 {
            return Ok(None);
        }
        let actor = format!("runner:{owner}");
        // A fresh start is the table's `queued → in_progress`. A run in
        // `in_progress` (its last worker ended without a result) or in `pr`
        // (a worker on its PR) keeps its state.
        if from == R::Queued {
            tx.write_state(run_id, from, R::InProgress, None, now)
                .await?;
            tx.audit_log()
                .audit(&state_change_entry(
                    &actor,
                    run_id,
                    from,
                    R::InProgress,
                    "claimed by a runner",
                ))
                .await?;
        }
        tx.audit_log()
            .audit(&NewAuditEntry {
                actor,
                action: "run.claimed".into(),
                subject: format!("run:{run_id}"),
                reason: Some(format!("attempt {} in slot {slot}", run.attempt + 1)),
                ..NewAuditEntry::default()
            })
            .await?;
        tx.notify().await?;
        let run = tx
            .tasks()
            .run(run_id)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("run {run_id} vanished")))?;
        tx.commit().await?;
        let fence = Fence {
            run: run_id,
            owner: owner.to_string(),
            attempt: run.attempt,
        };
        Ok(Some(Claim {
            run,
            fence,
            slot,
            from,
        }))
    }

    /// Renews a claim and its slot. Returns the run as it is now (so the
    /// runner learns of a cancel or a hold), or `Fenced` if the claim is lost.
    pub async fn heartbeat(&self, fence: &Fence, limits: &ClaimLimits) -> Result<Run> {
        let mut tx = self.begin_write().await?;
        let now = tx.clock().await?;
        let lease_until = now + delta(limits.lease);
        fenced_update!(
            tx,
            fence,
            "renewing a run's claim",
            "lease_expires_at = $4, heartbeat_at = $5",
            lease_until,
            now,
        )?;
        let run = tx
            .tasks()
            .run(fence.run)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("run {} vanished", fence.run)))?;
        if let Some(slot) = run.slot {
            let until = run
                .worker_alive_until
                .map_or(lease_until, |alive| alive.max(lease_until));
            let renewed = on_tx!(tx, conn => {
                sqlx::query(
                    "UPDATE worker_slots SET expires_at = CASE WHEN expires_at > $3 THEN expires_at ELSE $3 END \
                     WHERE slot = $1 AND run_id = $2",
                )
                .bind(slot)
                .bind(fence.run)
                .bind(until)
                .execute(conn)
                .await
                .map(|done| done.rows_affected())
            })
            .op("renewing a worker slot")?;
            // Its slot taken by another run: this worker is one too many.
            fenced(renewed, fence)?;
        }
        tx.commit().await?;
        Ok(run)
    }

    /// Runs claimed by a runner on `host` (lease owners are named
    /// `<host>#<pid>#<ticks>`), with or without a worker: what a runner
    /// starting there re-adopts or rescues when their runner is gone.
    pub async fn runs_claimed_on(&self, host: &str) -> Result<Vec<Run>> {
        let mut tx = self.begin_read().await?;
        let query = sql(&[
            "SELECT ",
            RUN_COLUMNS,
            " FROM executor_runs WHERE lease_owner LIKE $1 ORDER BY id",
        ]);
        // A host id is hex digits, '/' and digits: no LIKE wildcards.
        let pattern = format!("{host}#%");
        on_tx!(tx, conn => sqlx::query_as(query).bind(pattern).fetch_all(conn).await)
            .op("listing the runs claimed on this host")
    }

    /// Work that is about to happen without anyone's say: runs a runner
    /// would claim now (unless claiming is paused or every run is held),
    /// requests waiting for Eagle's plugins, notices waiting to be posted.
    /// Zero means everything waits on a human or is done.
    pub async fn work_in_sight(&self) -> Result<i64> {
        let mut tx = self.begin_read().await?;
        let now = tx.clock().await?;
        let stopped = tx.controls().control(super::Control::Paused).await?
            || tx.controls().control(super::Control::HoldAll).await?;
        let claimable: i64 = if stopped {
            0
        } else {
            let query = sql(&["SELECT COUNT(*) FROM executor_runs AS r WHERE ", CLAIMABLE]);
            on_tx!(tx, conn => {
                sqlx::query_scalar(query).bind(now).fetch_one(conn).await
            })
            .op("counting claimable runs")?
        };
        let pending: i64 = on_tx!(tx, conn => {
            sqlx::query_scalar(
                "SELECT (SELECT COUNT(*) FROM worker_requests WHERE status = 'pending') \
                 + (SELECT COUNT(*) FROM run_notices WHERE posted_at IS NULL)",
            )
            .fetch_one(conn)
            .await
        })
        .op("counting pending decisions")?;
        Ok(claimable + pending)
    }
}
