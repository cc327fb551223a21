//! What Eagle carries out for a worker: the approved requests that wait
//! for the carrier, the carrier's claim on one, what it waits for, and what
//! it carried out (the request's `carried_out` sentence, and the result the
//! worker learns: JSON in [`crate::policy::effect::Carried`]'s shape, kept
//! as text here).

use super::requests::select;
use super::{NewAuditEntry, QueryContext, Request, Result, on_pool, on_tx};

super::store_handle!(
    /// What Eagle carries out for a worker: `store.carried()`.
    CarriedResults,
    carried
);

super::tx_handle!(
    /// What Eagle carries out for a worker, in a transaction: `tx.carried()`.
    CarriedResultsTx,
    carried
);

impl CarriedResultsTx<'_> {
    /// Keeps the result of an effect carried out for request `id` (in the
    /// transaction that records it as carried out).
    pub async fn record_carried_result(&mut self, id: i64, result: &str) -> Result<()> {
        on_tx!(self, conn => {
            sqlx::query("UPDATE worker_requests SET carried_result = $2 WHERE id = $1")
                .bind(id)
                .bind(result)
                .execute(conn)
                .await
                .map(|done| done.rows_affected())
        })
        .op("recording what an effect gave")?;
        Ok(())
    }
}

impl CarriedResults<'_> {
    /// The result kept for request `id`, if it was carried out with one.
    pub async fn carried_result(&self, id: i64) -> Result<Option<String>> {
        on_pool!(self, pool => {
            sqlx::query_scalar::<_, Option<String>>(
                "SELECT carried_result FROM worker_requests WHERE id = $1",
            )
            .bind(id)
            .fetch_optional(pool)
            .await
        })
        .op("reading what an effect gave")
        .map(Option::flatten)
    }

    /// The results of the effects carried out for a run's `action`
    /// requests, newest first.
    pub async fn carried_results(&self, run_id: i64, action: &str) -> Result<Vec<String>> {
        on_pool!(self, pool => {
            sqlx::query_scalar::<_, String>(
                "SELECT carried_result FROM worker_requests WHERE run_id = $1 AND action = $2 \
                 AND carried_result IS NOT NULL ORDER BY id DESC",
            )
            .bind(run_id)
            .bind(action)
            .fetch_all(pool)
            .await
        })
        .op("reading what a run's effects gave")
    }
}

impl CarriedResults<'_> {
    /// Approved requests Eagle's carrier carries out (`merge_pr`,
    /// `post_asana_comment`, and `open_draft_pr`, `comment_on_pr`,
    /// `reply_thread` with their parameters; a push is the runner's) and has not yet, oldest first. A request that
    /// reused an earlier human approval (`bound_to`) is that approval's
    /// repetition, not a second merge.
    pub async fn requests_to_carry_out(&self, limit: i64) -> Result<Vec<Request>> {
        on_pool!(self, pool => {
            sqlx::query_as(select(
                "WHERE status = 'approved' AND carried_out_at IS NULL AND bound_to IS NULL \
                 AND (action IN ('merge_pr', 'post_asana_comment') \
                 OR (action IN ('open_draft_pr', 'comment_on_pr', 'reply_thread') AND body LIKE '{%')) \
                 ORDER BY id LIMIT $1",
            ))
            .bind(limit)
            .fetch_all(pool)
            .await
        })
        .op("listing approved requests to carry out")
    }
}

impl CarriedResults<'_> {
    /// Takes an approved request to carry out, for `ttl`: false if another
    /// instance is carrying it out (a holder that was a process of this host
    /// and has died is taken over at once), or it is done.
    pub async fn claim_carry_out(
        &self,
        id: i64,
        owner: &str,
        ttl: std::time::Duration,
    ) -> Result<bool> {
        let now = super::now();
        let until = now + super::delta(ttl);
        let claim = |holder: Option<String>| async move {
            on_pool!(self, pool => {
                sqlx::query(
                    "UPDATE worker_requests SET carrying_by = $2, carrying_until = $3 \
                     WHERE id = $1 AND carried_out_at IS NULL AND (carrying_by IS NULL \
                     OR carrying_by = $2 OR carrying_until < $4 OR carrying_by = $5)",
                )
                .bind(id)
                .bind(owner)
                .bind(until)
                .bind(now)
                .bind(&holder)
                .execute(pool)
                .await
                .map(|done| done.rows_affected())
            })
            .op("taking a request to carry out")
        };
        if claim(None).await? == 1 {
            return Ok(true);
        }
        let holder: Option<String> = on_pool!(self, pool => {
            sqlx::query_scalar("SELECT carrying_by FROM worker_requests WHERE id = $1 AND carried_out_at IS NULL")
                .bind(id)
                .fetch_optional(pool)
                .await
        })
        .op("reading who carries a request out")?
        .flatten();
        match holder {
            Some(holder) if crate::ground::host::holder_is_dead(&holder) => {
                Ok(claim(Some(holder)).await? == 1)
            }
            _ => Ok(false),
        }
    }
}

impl CarriedResultsTx<'_> {
    /// Records what an approved request waits for, as the run's topic is
    /// told it; false when it is done already or said so already.
    pub async fn record_carry_waiting(&mut self, id: i64, text: &str) -> Result<bool> {
        let changed = on_tx!(self, conn => {
            sqlx::query(
                "UPDATE worker_requests SET carry_waiting = $2 \
                 WHERE id = $1 AND carried_out_at IS NULL AND carry_waiting IS DISTINCT FROM $2",
            )
            .bind(id)
            .bind(text)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("recording what an approved request waits for")?;
        Ok(changed == 1)
    }

    /// Records that Eagle carried out an approved request (or why it could
    /// not), once: false if it was recorded already. Audited.
    pub async fn record_carried_out(&mut self, id: i64, outcome: &str, done: bool) -> Result<bool> {
        let now = super::now();
        let changed = on_tx!(self, conn => {
            sqlx::query(
                "UPDATE worker_requests SET carried_out_at = $2, carried_out = $3 \
                 WHERE id = $1 AND carried_out_at IS NULL",
            )
            .bind(id)
            .bind(now)
            .bind(outcome)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("recording what Eagle carried out")?;
        if changed == 0 {
            return Ok(false);
        }
        self.audit_log()
            .audit(&NewAuditEntry {
                actor: "eagle".into(),
                action: if done {
                    "request.carried_out"
                } else {
                    "request.not_carried_out"
                }
                .into(),
                subject: format!("request:{id}"),
                reason: Some(outcome.to_string()),
                ..NewAuditEntry::default()
            })
            .await?;
        Ok(true)
    }
}
