//! What a run waits on: a human's hold (`!hold`, `!unhold`, `!retry`) and
//! the person it waits for (shown by `!status`).

use super::fence::{Fence, fenced_update};
use super::{NewAuditEntry, QueryContext, Result, Run, StoreError, on_tx};

super::tx_handle!(
    /// What a run waits on: holds and waits, in a transaction: `tx.holds()`.
    HoldsTx,
    holds
);

impl HoldsTx<'_> {
    /// Sets or clears `held` on a run that has not ended (`!hold`, `!unhold`,
    /// `!retry`). Clearing it also clears the failures (and waits) count and who the run
    /// was waiting on, so that the run is claimed again. Audited.
    pub async fn set_held(
        &mut self,
        run_id: i64,
        held: bool,
        actor: &str,
        reason: &str,
        retry: bool,
    ) -> Result<Run> {
        let run = self
            .run_for_update(run_id)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("run {run_id} does not exist")))?;
        if run.state.is_final() {
            return Err(StoreError::IllegalTransition {
                what: format!("run {run_id}"),
                from: run.state.as_str(),
                to: if held { "held" } else { "unheld" },
            });
        }
        let now = super::now();
        on_tx!(self, conn => {
            sqlx::query(
                "UPDATE executor_runs SET held = $2, updated_at = $3, \
                 waiting_on = CASE WHEN $2 THEN waiting_on ELSE NULL END, \
                 failures = CASE WHEN $4 THEN 0 ELSE failures END, \
                 waits = CASE WHEN $4 THEN 0 ELSE waits END, \
                 ci_attempts = CASE WHEN $4 THEN 0 ELSE ci_attempts END, \
                 pr_rounds = CASE WHEN $4 THEN 0 ELSE pr_rounds END, \
                 cost_cap_usd = CASE WHEN $4 AND cost_cap_usd IS NOT NULL AND cost_usd >= cost_cap_usd \
                     THEN cost_usd + cost_cap_usd ELSE cost_cap_usd END, \
                 state_reason = $5 WHERE id = $1",
            )
            .bind(run_id)
            .bind(held)
            .bind(now)
            .bind(retry)
            .bind(reason)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("holding a run")?;
        let action = match (held, retry) {
            (true, _) => "run.held",
            (false, true) => "run.retried",
            (false, false) => "run.unheld",
        };
        self.audit_log()
            .audit(&NewAuditEntry {
                actor: actor.to_string(),
                action: action.into(),
                subject: format!("run:{run_id}"),
                reason: Some(reason.to_string()),
                ..NewAuditEntry::default()
            })
            .await?;
        self.notify().await?;
        self.tasks()
            .run(run_id)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("run {run_id} vanished")))
    }

    /// Records who a run waits on (shown by `!status`), fenced if a runner says so.
    pub async fn set_waiting_on(
        &mut self,
        run_id: i64,
        who: Option<&str>,
        fence: Option<&Fence>,
    ) -> Result<()> {
        let now = super::now();
        if let Some(fence) = fence {
            // The fence names the run it holds; the row written is `run_id`'s.
            let fence = Fence {
                run: run_id,
                ..fence.clone()
            };
            return fenced_update!(
                self,
                &fence,
                "recording who a run waits on",
                "waiting_on = $4, updated_at = $5",
                who,
                now,
            );
        }
        on_tx!(self, conn => {
            sqlx::query("UPDATE executor_runs SET waiting_on = $2, updated_at = $3 WHERE id = $1")
                .bind(run_id)
                .bind(who)
                .bind(now)
                .execute(conn)
                .await
                .map(|done| done.rows_affected())
        })
        .op("recording who a run waits on")?;
        Ok(())
    }

    /// Clears who a run waits on once nothing of it waits for a decision
    /// (unless it is held, which a human must lift).
    pub async fn settle_waiting(&mut self, run_id: i64) -> Result<()> {
        let now = super::now();
        on_tx!(self, conn => {
            sqlx::query(
                "UPDATE executor_runs SET waiting_on = NULL, updated_at = $2 WHERE id = $1 \
                 AND NOT held AND waiting_on IS NOT NULL AND NOT EXISTS (SELECT 1 FROM worker_requests AS q \
                 WHERE q.run_id = executor_runs.id AND q.status IN ('pending', 'escalated'))",
            )
            .bind(run_id)
            .bind(now)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("settling who a run waits on")?;
        Ok(())
    }
}
