//! Escalations that step aside: when a request escalated to a human no
//! longer applies (nobody answered in time, the worker asked again for the
//! same effect, the PR's head moved, the run ended), the post that asked
//! the human is edited to say so, in the transaction that closed the
//! request. Every path that closes an open request goes through
//! [`Tx::step_aside`], so no escalation is left asking for an answer that
//! can no longer be carried out.
//!
//! The post is known by its outbox entry (recorded with the escalation):
//! its server id exists only once it is delivered, so the edit waits behind
//! it in the outbox (see `OutboxTx::enqueue_edit_of`).

use super::{NewAuditEntry, QueryContext, Request, Result, Tx, on_tx};

/// Effects a run has at most one of (its branch, its PR, its merge, its
/// task's comment): a new request for one replaces an earlier open one.
/// A PR comment, a thread reply or a command differ by what they name.
const ONE_PER_RUN: &[&str] = &[
    "push_branch",
    "open_draft_pr",
    "merge_pr",
    "post_asana_comment",
];

/// Whether a new request for `action` replaces an open earlier one.
pub fn supersedes(action: &str) -> bool {
    ONE_PER_RUN.contains(&action)
}

impl Tx {
    /// Remembers which outbox entry asked a human about request `id`.
    pub async fn record_escalation_post(&mut self, id: i64, outbox_id: i64) -> Result<()> {
        on_tx!(self, conn => {
            sqlx::query("UPDATE worker_requests SET escalation_outbox_id = $2 WHERE id = $1")
                .bind(id)
                .bind(outbox_id)
                .execute(conn)
                .await
                .map(|done| done.rows_affected())
        })
        .op("recording an escalation's post")?;
        Ok(())
    }

    /// Edits the post that escalated request `id`, if one did, to say it
    /// no longer applies and `why` (which names what applies now, if
    /// anything). Called by every path that closes an open request.
    pub async fn step_aside(&mut self, id: i64, why: &str) -> Result<()> {
        let row: Option<(i64, String, Option<i64>)> = on_tx!(self, conn => {
            sqlx::query_as(
                "SELECT run_id, action, escalation_outbox_id FROM worker_requests WHERE id = $1",
            )
            .bind(id)
            .fetch_optional(conn)
            .await
        })
        .op("reading an escalation's post")?;
        let Some((run, action, Some(post))) = row else {
            return Ok(());
        };
        // No mention: the edit informs, the new escalation (if any) asks.
        let text = format!(
            "~~[ESCALATED: {action}] run:{run} req:{id}~~ no longer applies: {why}. \
             Nothing waits on this message."
        );
        let text = crate::ground::text::neutralize_mentions(&text);
        if self.outbox().enqueue_edit_of(post, &text).await?.is_none() {
            tracing::debug!(
                request = id,
                post,
                "the escalation's post is gone; not edited"
            );
        }
        Ok(())
    }

    /// Expires the open requests of `new`'s run for the same effect as
    /// `new` (one of [`supersedes`]'s), asked before it, and edits their
    /// escalations to name `current` (what answers `new`, in words).
    /// Returns the requests expired.
    pub async fn supersede_earlier(&mut self, new: &Request, current: &str) -> Result<Vec<i64>> {
        if new.kind != "request" || !supersedes(&new.action) {
            return Ok(Vec::new());
        }
        let now = super::now();
        let reason = format!("superseded by req {}", new.id);
        let ids: Vec<i64> = on_tx!(self, conn => {
            sqlx::query_scalar(
                "UPDATE worker_requests SET status = 'expired', decided_at = $4, \
                 decided_by = 'eagle', decision_reason = $5 \
                 WHERE run_id = $1 AND action = $2 AND kind = 'request' AND id < $3 \
                 AND status IN ('pending', 'escalated') RETURNING id",
            )
            .bind(new.run_id)
            .bind(&new.action)
            .bind(new.id)
            .bind(now)
            .bind(&reason)
            .fetch_all(conn)
            .await
        })
        .op("expiring superseded requests")?;
        for id in &ids {
            self.audit_log()
                .audit(&NewAuditEntry {
                    actor: "eagle".into(),
                    action: "request.expired".into(),
                    subject: format!("request:{id}"),
                    decision: Some("expire".into()),
                    reason: Some(reason.clone()),
                    ..NewAuditEntry::default()
                })
                .await?;
            self.step_aside(
                *id,
                &format!(
                    "the worker asked again for the same (req {}): {current}",
                    new.id
                ),
            )
            .await?;
        }
        Ok(ids)
    }
}

#[cfg(test)]
mod tests {
    use super::supersedes;

    #[test]
    fn only_effects_a_run_has_one_of_are_superseded() {
        for (action, want) in [
            ("merge_pr", true),
            ("push_branch", true),
            ("open_draft_pr", true),
            ("post_asana_comment", true),
            ("comment_on_pr", false),
            ("reply_thread", false),
            ("run_command", false),
            ("scope_expansion", false),
        ] {
            assert_eq!(supersedes(action), want, "{action}");
        }
    }
}
