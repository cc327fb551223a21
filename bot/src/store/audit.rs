//! The append-only audit log: who or what decided what, when, and why.
//!
//! The database itself refuses to change or remove a row (triggers in the
//! migrations); this module only ever inserts and reads.

use chrono::{DateTime, Utc};

use super::{QueryContext, Result, on_tx};

super::store_handle!(
    /// The append-only audit log: `store.audit_log()`.
    AuditLog,
    audit_log
);

super::tx_handle!(
    /// The append-only audit log, in a transaction: `tx.audit_log()`.
    AuditLogTx,
    audit_log
);

/// An entry to append.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewAuditEntry {
    /// Who or what acted: `human:<id or email>`, `policy`, `eagle`.
    pub actor: String,
    /// What happened: `task.queued`, `request.decided`, `task.filtered`.
    pub action: String,
    /// What it happened to: `task:12`, `run:42`, `request:7`.
    pub subject: String,
    pub decision: Option<String>,
    pub reason: Option<String>,
    pub plugin_name: Option<String>,
    pub plugin_version: Option<String>,
    /// The SHA-256 of the plugin's file: a plugin cannot pass itself off as another.
    pub plugin_hash: Option<String>,
    pub params_hash: Option<String>,
    pub source_message_id: Option<i64>,
    /// JSON with anything else worth keeping (every plugin's vote, say).
    pub detail: Option<String>,
}

/// A stored entry.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct AuditEntry {
    pub id: i64,
    pub at: DateTime<Utc>,
    pub actor: String,
    pub action: String,
    pub subject: String,
    pub decision: Option<String>,
    pub reason: Option<String>,
    pub plugin_name: Option<String>,
    pub plugin_version: Option<String>,
    pub plugin_hash: Option<String>,
    pub params_hash: Option<String>,
    pub source_message_id: Option<i64>,
    pub detail: String,
}

impl AuditLogTx<'_> {
    /// Appends an entry; returns its id.
    pub async fn audit(&mut self, entry: &NewAuditEntry) -> Result<i64> {
        let now = super::now();
        on_tx!(self, conn => {
            sqlx::query_scalar(
                "INSERT INTO audit_log (at, actor, action, subject, decision, reason, plugin_name, \
                 plugin_version, plugin_hash, params_hash, source_message_id, detail) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING id",
            )
            .bind(now)
            .bind(&entry.actor)
            .bind(&entry.action)
            .bind(&entry.subject)
            .bind(&entry.decision)
            .bind(&entry.reason)
            .bind(&entry.plugin_name)
            .bind(&entry.plugin_version)
            .bind(&entry.plugin_hash)
            .bind(&entry.params_hash)
            .bind(entry.source_message_id)
            .bind(entry.detail.as_deref().unwrap_or("{}"))
            .fetch_one(conn)
            .await
        })
        .op("appending to the audit log")
    }
}

impl AuditLog<'_> {
    /// Appends an entry in a transaction of its own.
    pub async fn audit(&self, entry: &NewAuditEntry) -> Result<i64> {
        let mut tx = self.begin_write().await?;
        let id = tx.audit_log().audit(entry).await?;
        tx.commit().await?;
        Ok(id)
    }

    /// The entries about a subject, oldest first.
    pub async fn audit_trail(&self, subject: &str) -> Result<Vec<AuditEntry>> {
        let mut tx = self.begin_read().await?;
        tx.audit_log().audit_trail(subject).await
    }
}

impl AuditLogTx<'_> {
    /// The entries about a subject, oldest first.
    pub async fn audit_trail(&mut self, subject: &str) -> Result<Vec<AuditEntry>> {
        on_tx!(self, conn => {
            sqlx::query_as(
                "SELECT id, at, actor, action, subject, decision, reason, plugin_name, plugin_version, \
                 plugin_hash, params_hash, source_message_id, detail \
                 FROM audit_log WHERE subject = $1 ORDER BY id",
            )
            .bind(subject)
            .fetch_all(conn)
            .await
        })
        .op("reading the audit log")
    }
}
