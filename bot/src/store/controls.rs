//! Switches people flip from chat (`!pause`, `!hold all`) and the notices a
//! runner leaves for Eagle to post with an @-mention.

use chrono::{DateTime, Utc};

use super::{NewAuditEntry, QueryContext, Result, on_pool, on_tx};

super::store_handle!(
    /// Switches people flip from chat and the notices they post: `store.controls()`.
    Controls,
    controls
);

super::tx_handle!(
    /// Switches people flip from chat and the notices they post, in a transaction: `tx.controls()`.
    ControlsTx,
    controls
);

/// A switch in the `controls` table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// `!pause`: no runner claims new work; running workers go on.
    Paused,
    /// `!hold all`: every running worker is stopped at a safe point and
    /// nothing new starts.
    HoldAll,
}

impl Control {
    pub fn as_str(self) -> &'static str {
        match self {
            Control::Paused => "paused",
            Control::HoldAll => "hold_all",
        }
    }
}

/// Something a human must hear about a run.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Notice {
    pub id: i64,
    pub run_id: i64,
    /// `attempts` (held after `max_attempts`), `cost_cap`.
    pub kind: String,
    pub text: String,
    pub created_at: DateTime<Utc>,
}

impl ControlsTx<'_> {
    /// Whether a switch is on.
    pub async fn control(&mut self, control: Control) -> Result<bool> {
        let value: Option<String> = on_tx!(self, conn => {
            sqlx::query_scalar("SELECT value FROM controls WHERE name = $1")
                .bind(control.as_str())
                .fetch_optional(conn)
                .await
        })
        .op("reading a control")?;
        Ok(value.as_deref() == Some("on"))
    }

    /// Turns a switch on or off. Audited.
    pub async fn set_control(&mut self, control: Control, on: bool, actor: &str) -> Result<()> {
        let now = super::now();
        on_tx!(self, conn => {
            sqlx::query(
                "INSERT INTO controls (name, value, updated_at, updated_by) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (name) DO UPDATE SET value = excluded.value, \
                 updated_at = excluded.updated_at, updated_by = excluded.updated_by",
            )
            .bind(control.as_str())
            .bind(if on { "on" } else { "off" })
            .bind(now)
            .bind(actor)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("setting a control")?;
        self.audit_log()
            .audit(&NewAuditEntry {
                actor: actor.to_string(),
                action: format!("control.{}", control.as_str()),
                subject: "controls".into(),
                decision: Some(if on { "on" } else { "off" }.into()),
                ..NewAuditEntry::default()
            })
            .await?;
        self.notify().await
    }

    /// Leaves a notice for Eagle to post.
    pub async fn insert_notice(&mut self, run_id: i64, kind: &str, text: &str) -> Result<i64> {
        let now = super::now();
        on_tx!(self, conn => {
            sqlx::query_scalar(
                "INSERT INTO run_notices (run_id, kind, text, created_at) VALUES ($1, $2, $3, $4) RETURNING id",
            )
            .bind(run_id)
            .bind(kind)
            .bind(text)
            .bind(now)
            .fetch_one(conn)
            .await
        })
        .op("leaving a notice")
    }

    /// Marks a notice posted; false if another instance posted it first.
    pub async fn mark_notice_posted(&mut self, id: i64) -> Result<bool> {
        let now = super::now();
        let changed = on_tx!(self, conn => {
            sqlx::query("UPDATE run_notices SET posted_at = $2 WHERE id = $1 AND posted_at IS NULL")
                .bind(id)
                .bind(now)
                .execute(conn)
                .await
                .map(|done| done.rows_affected())
        })
        .op("marking a notice posted")?;
        Ok(changed == 1)
    }
}

impl Controls<'_> {
    /// Whether a switch is on, outside any transaction.
    pub async fn control(&self, control: Control) -> Result<bool> {
        let mut tx = self.begin_read().await?;
        tx.controls().control(control).await
    }

    /// Notices not posted yet, oldest first.
    pub async fn unposted_notices(&self, limit: i64) -> Result<Vec<Notice>> {
        on_pool!(self, pool => {
            sqlx::query_as(
                "SELECT id, run_id, kind, text, created_at FROM run_notices \
                 WHERE posted_at IS NULL ORDER BY id LIMIT $1",
            )
            .bind(limit)
            .fetch_all(pool)
            .await
        })
        .op("listing notices")
    }
}
