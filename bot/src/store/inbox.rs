//! The inbox side of a chat transport: messages handled (so none is handled
//! twice), local message ids (the shell), and each identity's bookmark in
//! the message stream with its event queue.

use super::{QueryContext, Result, on_pool, on_tx};

super::store_handle!(
    /// Chat messages handled, so none is handled twice: `store.handled()`.
    Handled,
    handled
);

super::tx_handle!(
    /// Chat messages handled, so none is handled twice, in a transaction: `tx.handled()`.
    HandledTx,
    handled
);

/// An identity's place in the message stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bookmark {
    /// The newest message handled; back-fill resumes after it.
    pub last_message_id: i64,
    pub queue_id: Option<String>,
    pub last_event_id: Option<i64>,
}

impl HandledTx<'_> {
    /// Claims an inbound message for handling. Returns `true` if this
    /// transaction's insert won; `false` if the message was handled already
    /// (by an earlier run, a back-fill, or another instance).
    pub async fn mark_processed(
        &mut self,
        identity: &str,
        message_id: i64,
        outcome: &str,
    ) -> Result<bool> {
        let now = super::now();
        let inserted = on_tx!(self, conn => {
            sqlx::query(
                "INSERT INTO processed_messages (identity, message_id, processed_at, outcome) \
                 VALUES ($1, $2, $3, $4) ON CONFLICT (identity, message_id) DO NOTHING",
            )
            .bind(identity)
            .bind(message_id)
            .bind(now)
            .bind(outcome)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("recording a processed message")?;
        Ok(inserted == 1)
    }

    /// The next message id of a transport without server ids (the shell):
    /// one counter per transport, shared by every session and never reset,
    /// so no two messages of any sessions get one id (and one task key).
    pub async fn next_local_message_id(&mut self, transport: &str) -> Result<i64> {
        let id: i64 = on_tx!(self, conn => {
            sqlx::query_scalar(
                "INSERT INTO local_message_ids (transport, last_id) VALUES ($1, 1) \
                 ON CONFLICT (transport) DO UPDATE SET last_id = local_message_ids.last_id + 1 \
                 RETURNING last_id",
            )
            .bind(transport)
            .fetch_one(conn)
            .await
        })
        .op("numbering a local message")?;
        Ok(id)
    }

    /// Moves an identity's bookmark forward (never back).
    pub async fn advance_bookmark(&mut self, identity: &str, message_id: i64) -> Result<()> {
        let now = super::now();
        on_tx!(self, conn => {
            sqlx::query(
                "INSERT INTO event_bookmarks (identity, last_message_id, updated_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (identity) DO UPDATE SET \
                 last_message_id = CASE WHEN event_bookmarks.last_message_id < excluded.last_message_id \
                     THEN excluded.last_message_id ELSE event_bookmarks.last_message_id END, \
                 updated_at = excluded.updated_at",
            )
            .bind(identity)
            .bind(message_id)
            .bind(now)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("advancing a bookmark")?;
        Ok(())
    }
}

impl Handled<'_> {
    /// Whether a message was handled already by this identity.
    pub async fn is_processed(&self, identity: &str, message_id: i64) -> Result<bool> {
        let found: Option<i64> = on_pool!(self, pool => {
            sqlx::query_scalar("SELECT message_id FROM processed_messages WHERE identity = $1 AND message_id = $2")
                .bind(identity)
                .bind(message_id)
                .fetch_optional(pool)
                .await
        })
        .op("checking a processed message")?;
        Ok(found.is_some())
    }

    /// Moves an identity's bookmark forward (never back), in a transaction of its own.
    pub async fn advance_bookmark(&self, identity: &str, message_id: i64) -> Result<()> {
        let mut tx = self.begin_write().await?;
        tx.handled().advance_bookmark(identity, message_id).await?;
        tx.commit().await
    }

    /// An identity's bookmark, if it has one.
    pub async fn bookmark(&self, identity: &str) -> Result<Option<Bookmark>> {
        // A handled message is not written to the bookmark (one statement
        // less per message): the newest one handled counts as well. Messages
        // are decided in order, so everything before it was decided too.
        const NEWEST: &str = "b.last_message_id, COALESCE((SELECT MAX(p.message_id) FROM processed_messages AS p \
             WHERE p.identity = b.identity), 0)";
        let sql = |greatest: &str| {
            format!(
                "SELECT {greatest}({NEWEST}), b.queue_id, b.last_event_id \
                 FROM event_bookmarks AS b WHERE b.identity = $1"
            )
        };
        let row: Option<(i64, Option<String>, Option<i64>)> = match &self.pool {
            super::Pool::Postgres(pool) => {
                sqlx::query_as(sqlx::AssertSqlSafe(sql("GREATEST")))
                    .bind(identity)
                    .fetch_optional(pool)
                    .await
            }
            super::Pool::Sqlite(pool) => {
                sqlx::query_as(sqlx::AssertSqlSafe(sql("MAX")))
                    .bind(identity)
                    .fetch_optional(pool)
                    .await
            }
        }
        .op("reading a bookmark")?;
        Ok(
            row.map(|(last_message_id, queue_id, last_event_id)| Bookmark {
                last_message_id,
                queue_id,
                last_event_id,
            }),
        )
    }

    /// Sets an identity's bookmark if it has none yet (the first start).
    pub async fn init_bookmark(&self, identity: &str, message_id: i64) -> Result<()> {
        let now = super::now();
        on_pool!(self, pool => {
            sqlx::query(
                "INSERT INTO event_bookmarks (identity, last_message_id, updated_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (identity) DO NOTHING",
            )
            .bind(identity)
            .bind(message_id)
            .bind(now)
            .execute(pool)
            .await
            .map(|done| done.rows_affected())
        })
        .op("creating a bookmark")?;
        Ok(())
    }

    /// Records the identity's current event queue (for `eagle check` and clean-up).
    pub async fn record_queue(
        &self,
        identity: &str,
        queue_id: Option<&str>,
        last_event_id: Option<i64>,
    ) -> Result<()> {
        let now = super::now();
        on_pool!(self, pool => {
            sqlx::query("UPDATE event_bookmarks SET queue_id = $2, last_event_id = $3, updated_at = $4 WHERE identity = $1")
                .bind(identity)
                .bind(queue_id)
                .bind(last_event_id)
                .bind(now)
                .execute(pool)
                .await
                .map(|done| done.rows_affected())
        })
        .op("recording an event queue")?;
        Ok(())
    }
}
