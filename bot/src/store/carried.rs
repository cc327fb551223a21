//! What Eagle carried out for a worker, as the worker learns it: the
//! result (JSON, [`crate::policy::effect::Carried`]'s shape, kept as text here) of
//! a push, a PR opened, a comment posted, a merge, beside the request's
//! `carried_out` sentence.

use super::{QueryContext, Result, on_pool, on_tx};

super::store_handle!(
    /// What Eagle carried out for a worker, as the worker learns it: `store.carried()`.
    CarriedResults,
    carried
);

super::tx_handle!(
    /// What Eagle carried out for a worker, as the worker learns it, in a transaction: `tx.carried()`.
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
