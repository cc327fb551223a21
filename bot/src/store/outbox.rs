//! The outbox: every reply, reaction and edit Eagle means to send, stored
//! in the transaction that decided it, then delivered by the sender of its
//! identity in order (per topic), retried, and recorded once delivered.

use chrono::{DateTime, Utc};

use super::leases::held_with_margin;
use super::tasks::sql;
use super::{QueryContext, Result, StoreError, Tx, on_pool, on_tx};

super::store_handle!(
    /// The outbox: every reply, reaction and edit Eagle means to send: `store.outbox()`.
    Outbox,
    outbox
);

super::tx_handle!(
    /// The outbox: every reply, reaction and edit Eagle means to send, in a transaction: `tx.outbox()`.
    OutboxTx,
    outbox
);

/// Where a reply goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// A channel topic.
    Channel { channel: String, topic: String },
    /// A direct message to these users (the bot itself excluded).
    Direct { user_ids: Vec<i64> },
}

impl Destination {
    /// Deliveries with the same key go out strictly in order.
    pub fn ordering_key(&self) -> String {
        match self {
            Destination::Channel { channel, topic } => format!(
                "channel:{}\u{1f}{}",
                crate::ground::text::fold_key(channel),
                crate::ground::text::fold_key(topic)
            ),
            Destination::Direct { user_ids } => {
                let mut ids = user_ids.clone();
                ids.sort_unstable();
                ids.dedup();
                let ids: Vec<String> = ids.iter().map(i64::to_string).collect();
                format!("direct:{}", ids.join(","))
            }
        }
    }
}

/// What an outbox entry does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutboxKind {
    /// Post `content` to the destination.
    Message { to: Destination, content: String },
    /// Add an emoji reaction to a message.
    ReactionAdd { message_id: i64, emoji: String },
    /// Remove an emoji reaction from a message.
    ReactionRemove { message_id: i64, emoji: String },
    /// Replace the content of one of the bot's own messages.
    Edit { message_id: i64, content: String },
}

/// An outbox entry to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewOutboxItem {
    /// The identity that sends it (a profile name, or `shell`).
    pub identity: String,
    pub kind: OutboxKind,
    /// The inbound message this answers, if any (used to find a reply that
    /// reached the server before a crash).
    pub in_reply_to: Option<i64>,
}

/// A stored outbox entry not yet confirmed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxItem {
    pub id: i64,
    pub identity: String,
    pub kind: OutboxKind,
    pub in_reply_to: Option<i64>,
    pub attempts: i64,
    pub ordering_key: String,
}

/// The entries an identity's sender may deliver now, and when more will be due.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct OutboxHeads {
    /// Due now, by id.
    pub due: Vec<OutboxItem>,
    /// When the earliest entry not due yet will be.
    pub next_due: Option<DateTime<Utc>>,
}

#[derive(sqlx::FromRow)]
struct OutboxHeadRow {
    #[sqlx(flatten)]
    row: OutboxRow,
    next_attempt_at: DateTime<Utc>,
}

#[derive(sqlx::FromRow)]
struct OutboxRow {
    id: i64,
    identity: String,
    kind: String,
    channel: Option<String>,
    topic: Option<String>,
    dm_user_ids: Option<String>,
    content: String,
    target_message_id: Option<i64>,
    attempts: i64,
    ordering_key: String,
}

impl OutboxRow {
    fn decode(self) -> Result<OutboxItem> {
        let corrupt = |what: &str| StoreError::Corrupt(format!("outbox entry {}: {what}", self.id));
        let target = || {
            self.target_message_id
                .ok_or_else(|| corrupt("no target message"))
        };
        let (kind, in_reply_to) = match self.kind.as_str() {
            "message" => {
                let to = match (&self.channel, &self.topic, &self.dm_user_ids) {
                    (Some(channel), Some(topic), None) => Destination::Channel {
                        channel: channel.clone(),
                        topic: topic.clone(),
                    },
                    (None, None, Some(ids)) => Destination::Direct {
                        user_ids: serde_json::from_str(ids)
                            .map_err(|_| corrupt("bad direct-message recipients"))?,
                    },
                    _ => return Err(corrupt("no destination")),
                };
                (
                    OutboxKind::Message {
                        to,
                        content: self.content.clone(),
                    },
                    self.target_message_id,
                )
            }
            "reaction_add" => (
                OutboxKind::ReactionAdd {
                    message_id: target()?,
                    emoji: self.content.clone(),
                },
                None,
            ),
            "reaction_remove" => (
                OutboxKind::ReactionRemove {
                    message_id: target()?,
                    emoji: self.content.clone(),
                },
                None,
            ),
            "edit" => (
                OutboxKind::Edit {
                    message_id: target()?,
                    content: self.content.clone(),
                },
                None,
            ),
            other => return Err(corrupt(&format!("unknown kind {other:?}"))),
        };
        Ok(OutboxItem {
            id: self.id,
            identity: self.identity,
            kind,
            in_reply_to,
            attempts: self.attempts,
            ordering_key: self.ordering_key,
        })
    }
}

impl OutboxTx<'_> {
    /// Stores a reply, reaction or edit for delivery.
    pub async fn enqueue(&mut self, item: &NewOutboxItem) -> Result<i64> {
        self.insert_outbox(item, false).await
    }

    /// Stores an edit of the post stored as outbox entry `target` (the
    /// same identity's): it waits until that post is delivered (it shares
    /// its ordering key) and is sent to the message the server gave it.
    /// `None` when the entry is gone (pruned).
    pub async fn enqueue_edit_of(&mut self, target: i64, content: &str) -> Result<Option<i64>> {
        let now = super::now();
        let id = on_tx!(self, conn => {
            sqlx::query_scalar(
                "INSERT INTO outbox (identity, created_at, kind, content, target_outbox_id, \
                 ordering_key, next_attempt_at) \
                 SELECT identity, $2, 'edit', $3, id, ordering_key, $2 FROM outbox \
                 WHERE id = $1 AND kind = 'message' RETURNING id",
            )
            .bind(target)
            .bind(now)
            .bind(content)
            .fetch_optional(conn)
            .await
        })
        .op("storing an edit in the outbox")?;
        if id.is_some() {
            self.notify().await?;
        }
        Ok(id)
    }

    /// Stores a reply with its first attempt recorded: the caller hands it
    /// to the sender of its process, which sends it at once (see
    /// `chat::ExpressLane`).
    pub async fn enqueue_attempted(&mut self, item: &NewOutboxItem) -> Result<i64> {
        self.insert_outbox(item, true).await
    }

    /// Whether replies in `ordering_key` may be handed straight to the
    /// sender: `None` unless `owner` holds the outbox lease `lease` with at
    /// least `margin` left; else the undelivered entries before them in the
    /// topic (usually none).
    pub async fn express_check(
        &mut self,
        lease: &str,
        owner: &str,
        margin: std::time::Duration,
        identity: &str,
        ordering_key: &str,
    ) -> Result<Option<Vec<i64>>> {
        // One round trip: no row if the lease is not held with the margin,
        // else one row per undelivered entry before (a NULL id for none).
        let query = sql(&[
            "SELECT o.id FROM (",
            held_with_margin(self.backend()),
            ") AS l LEFT JOIN outbox AS o ON o.identity = $4 AND o.ordering_key = $5 \
             AND o.delivered_at IS NULL AND o.gave_up_at IS NULL ORDER BY o.id",
        ]);
        let rows: Vec<Option<i64>> = match &mut self.inner {
            super::TxInner::Postgres(tx) => {
                sqlx::query_scalar(query)
                    .bind(lease)
                    .bind(owner)
                    .bind(margin.as_secs_f64())
                    .bind(identity)
                    .bind(ordering_key)
                    .fetch_all(&mut **tx)
                    .await
            }
            super::TxInner::Sqlite(tx) => {
                sqlx::query_scalar(query)
                    .bind(lease)
                    .bind(owner)
                    .bind(super::now() + super::delta(margin))
                    .bind(identity)
                    .bind(ordering_key)
                    .fetch_all(&mut **tx)
                    .await
            }
        }
        .op("checking the outbox lease")?;
        if rows.is_empty() {
            return Ok(None);
        }
        Ok(Some(rows.into_iter().flatten().collect()))
    }
}

impl Tx {
    async fn insert_outbox(&mut self, item: &NewOutboxItem, attempted: bool) -> Result<i64> {
        let now = super::now();
        let (kind, channel, topic, dm, content, target, key) = match &item.kind {
            OutboxKind::Message { to, content } => {
                let (channel, topic, dm) = match to {
                    Destination::Channel { channel, topic } => {
                        (Some(channel.clone()), Some(topic.clone()), None)
                    }
                    Destination::Direct { user_ids } => (
                        None,
                        None,
                        Some(serde_json::to_string(user_ids).expect("ids serialize")),
                    ),
                };
                (
                    "message",
                    channel,
                    topic,
                    dm,
                    content.clone(),
                    item.in_reply_to,
                    to.ordering_key(),
                )
            }
            OutboxKind::ReactionAdd { message_id, emoji } => (
                "reaction_add",
                None,
                None,
                None,
                emoji.clone(),
                Some(*message_id),
                format!("message:{message_id}"),
            ),
            OutboxKind::ReactionRemove { message_id, emoji } => (
                "reaction_remove",
                None,
                None,
                None,
                emoji.clone(),
                Some(*message_id),
                format!("message:{message_id}"),
            ),
            OutboxKind::Edit {
                message_id,
                content,
            } => (
                "edit",
                None,
                None,
                None,
                content.clone(),
                Some(*message_id),
                format!("message:{message_id}"),
            ),
        };
        on_tx!(self, conn => {
            sqlx::query_scalar(
                "INSERT INTO outbox (identity, created_at, kind, channel, topic, dm_user_ids, \
                 content, target_message_id, ordering_key, next_attempt_at, attempts, last_attempt_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $2, $10, $11) RETURNING id",
            )
            .bind(&item.identity)
            .bind(now)
            .bind(kind)
            .bind(channel)
            .bind(topic)
            .bind(dm)
            .bind(content)
            .bind(target)
            .bind(key)
            .bind(i64::from(attempted))
            .bind(attempted.then_some(now))
            .fetch_one(conn)
            .await
        })
        .op("storing a reply in the outbox")
    }
}

impl Outbox<'_> {
    /// Undelivered outbox entries of an identity that are due, oldest first.
    pub async fn due_outbox(&self, identity: &str, limit: i64) -> Result<Vec<OutboxItem>> {
        Ok(self.outbox_heads(identity, limit).await?.due)
    }

    /// What the sender of an identity has to do, in one query: the entries
    /// due now (at most `limit`, oldest first), and when the next one that
    /// is not due yet will be. An entry waits while an earlier one with its
    /// ordering key (its topic) is undelivered, so a retried reply is never
    /// overtaken.
    pub async fn outbox_heads(&self, identity: &str, limit: i64) -> Result<OutboxHeads> {
        let now = super::now();
        // Due entries sort first (by when they became due), so a batch is
        // never filled with entries that must wait while due ones are left out.
        let rows: Vec<(OutboxRow, DateTime<Utc>)> = on_pool!(self, pool => {
            sqlx::query_as(
                "SELECT id, identity, kind, channel, topic, dm_user_ids, content, \
                 COALESCE(target_message_id, (SELECT t.delivered_message_id FROM outbox AS t \
                     WHERE t.id = o.target_outbox_id)) AS target_message_id, \
                 attempts, ordering_key, next_attempt_at FROM outbox AS o \
                 WHERE identity = $1 AND delivered_at IS NULL AND gave_up_at IS NULL \
                 AND NOT EXISTS (SELECT 1 FROM outbox AS earlier \
                     WHERE earlier.identity = o.identity AND earlier.ordering_key = o.ordering_key \
                     AND earlier.id < o.id AND earlier.delivered_at IS NULL AND earlier.gave_up_at IS NULL) \
                 ORDER BY next_attempt_at, id LIMIT $2",
            )
            .bind(identity)
            .bind(limit)
            .fetch_all(pool)
            .await
            .map(|rows: Vec<OutboxHeadRow>| rows.into_iter().map(|r| (r.row, r.next_attempt_at)).collect())
        })
        .op("reading the outbox")?;
        let mut heads = OutboxHeads::default();
        for (row, due_at) in rows {
            if due_at > now {
                heads.next_due = Some(
                    heads
                        .next_due
                        .map_or(due_at, |n: DateTime<Utc>| n.min(due_at)),
                );
                continue;
            }
            let id = row.id;
            match row.decode() {
                Ok(item) => heads.due.push(item),
                Err(error) => {
                    // One unreadable row must not block every reply after it.
                    tracing::error!(id, %error, "an outbox entry cannot be read; giving up on it");
                    self.outbox_gave_up(id, &error.to_string()).await?;
                }
            }
        }
        heads.due.sort_by_key(|item| item.id);
        Ok(heads)
    }

    /// Whether a server message id is recorded as the delivery of some entry.
    pub async fn is_delivered_message(
        &self,
        identity: &str,
        server_message_id: i64,
    ) -> Result<bool> {
        let found: Option<i64> = on_pool!(self, pool => {
            sqlx::query_scalar("SELECT id FROM outbox WHERE identity = $1 AND delivered_message_id = $2 LIMIT 1")
                .bind(identity)
                .bind(server_message_id)
                .fetch_optional(pool)
                .await
        })
        .op("checking a delivered message")?;
        Ok(found.is_some())
    }

    /// How many outbox entries of an identity are not delivered yet.
    pub async fn undelivered_count(&self, identity: &str) -> Result<i64> {
        on_pool!(self, pool => {
            sqlx::query_scalar(
                "SELECT COUNT(*) FROM outbox WHERE identity = $1 AND delivered_at IS NULL AND gave_up_at IS NULL",
            )
                .bind(identity)
                .fetch_one(pool)
                .await
        })
        .op("counting the outbox")
    }

    /// Right before a delivery: records the attempt if `owner` still holds
    /// the outbox lease `lease` for at least `margin` (longer than the
    /// request can take). False: the lease is lost or about to be, or the
    /// entry is settled, and the delivery must not be sent.
    pub async fn outbox_attempting_under_lease(
        &self,
        id: i64,
        lease: &str,
        owner: &str,
        margin: std::time::Duration,
    ) -> Result<bool> {
        // One statement: the attempt is recorded only while `owner` holds
        // the lease for at least `margin` more.
        const UNSETTLED: &str = "WHERE id = $4 AND delivered_at IS NULL AND gave_up_at IS NULL \
             AND EXISTS (";
        let held = held_with_margin(self.backend());
        let attempted = match &self.pool {
            super::Pool::Postgres(pool) => {
                let query = sql(&[
                    "UPDATE outbox SET attempts = attempts + 1, last_attempt_at = now() ",
                    UNSETTLED,
                    held,
                    ")",
                ]);
                sqlx::query(query)
                    .bind(lease)
                    .bind(owner)
                    .bind(margin.as_secs_f64())
                    .bind(id)
                    .execute(pool)
                    .await
                    .map(|done| done.rows_affected())
            }
            super::Pool::Sqlite(pool) => {
                let now = super::now();
                let query = sql(&[
                    "UPDATE outbox SET attempts = attempts + 1, last_attempt_at = $5 ",
                    UNSETTLED,
                    held,
                    ")",
                ]);
                sqlx::query(query)
                    .bind(lease)
                    .bind(owner)
                    .bind(now + super::delta(margin))
                    .bind(id)
                    .bind(now)
                    .execute(pool)
                    .await
                    .map(|done| done.rows_affected())
            }
        }
        .op("recording a delivery attempt")?;
        Ok(attempted == 1)
    }

    /// Notes that a delivery is about to be attempted, so that after a crash
    /// the sender knows it may have reached the server.
    pub async fn outbox_attempting(&self, id: i64) -> Result<()> {
        let now = super::now();
        on_pool!(self, pool => {
            sqlx::query("UPDATE outbox SET attempts = attempts + 1, last_attempt_at = $2 WHERE id = $1")
                .bind(id)
                .bind(now)
                .execute(pool)
                .await
                .map(|done| done.rows_affected())
        })
        .op("recording a delivery attempt")?;
        Ok(())
    }

    /// Marks an entry delivered (with the server's id of the posted message, if any).
    pub async fn outbox_delivered(&self, id: i64, server_message_id: Option<i64>) -> Result<()> {
        let now = super::now();
        on_pool!(self, pool => {
            sqlx::query("UPDATE outbox SET delivered_at = $2, delivered_message_id = $3, last_error = NULL WHERE id = $1")
                .bind(id)
                .bind(now)
                .bind(server_message_id)
                .execute(pool)
                .await
                .map(|done| done.rows_affected())
        })
        .op("marking a reply delivered")?;
        Ok(())
    }

    /// Records a failed delivery and when to try again. (A reaction's
    /// attempts are counted here; a message's before it is sent.)
    pub async fn outbox_failed(&self, id: i64, error: &str, retry_at: DateTime<Utc>) -> Result<()> {
        on_pool!(self, pool => {
            sqlx::query(
                "UPDATE outbox SET last_error = $2, next_attempt_at = $3, \
                 attempts = attempts + CASE WHEN kind IN ('reaction_add', 'reaction_remove') THEN 1 ELSE 0 END \
                 WHERE id = $1 AND delivered_at IS NULL",
            )
                .bind(id)
                .bind(error)
                .bind(retry_at)
                .execute(pool)
                .await
                .map(|done| done.rows_affected())
        })
        .op("recording a failed delivery")?;
        Ok(())
    }

    /// Records that the server refused an entry for good; it stays in the
    /// table with the reason and is not retried.
    pub async fn outbox_gave_up(&self, id: i64, error: &str) -> Result<()> {
        let now = super::now();
        on_pool!(self, pool => {
            sqlx::query("UPDATE outbox SET last_error = $2, gave_up_at = $3 WHERE id = $1 AND delivered_at IS NULL")
                .bind(id)
                .bind(error)
                .bind(now)
                .execute(pool)
                .await
                .map(|done| done.rows_affected())
        })
        .op("recording a refused delivery")?;
        Ok(())
    }

    /// Messages (not reactions, which are dropped under rate pressure on
    /// purpose) of an identity given up in the last `within`, with the last
    /// error of the newest.
    pub async fn given_up(
        &self,
        identity: &str,
        within: std::time::Duration,
    ) -> Result<(i64, Option<String>)> {
        let since = super::now() - super::delta(within);
        let rows: Vec<(Option<String>,)> = on_pool!(self, pool => {
            sqlx::query_as(
                "SELECT last_error FROM outbox WHERE identity = $1 AND gave_up_at >= $2 \
                 AND kind IN ('message', 'edit') ORDER BY id DESC",
            )
            .bind(identity)
            .bind(since)
            .fetch_all(pool)
            .await
        })
        .op("counting given-up deliveries")?;
        Ok((rows.len() as i64, rows.first().and_then(|r| r.0.clone())))
    }
}
