//! Workers' requests and the decisions on them.
//!
//! A request enters only through the runner ([`Tx::record_request`]),
//! idempotent per (run, attempt, the worker's own key); a decision enters
//! only through Eagle's decider ([`Tx::decide_request`]) or an approver's
//! command ([`Tx::human_decision`]), each a conditional update, so a request
//! is decided exactly once however many deciders race.
//!
//! A human's decision binds to the request's parameter hash: when a resumed
//! worker asks again for exactly what a human approved (the same run, action
//! and words), the decider gives the new request that approval, once
//! ([`Tx::bind_to_human_decision`]); what a human denied stays denied.

use chrono::{DateTime, Utc};

use super::{Fence, NewAuditEntry, QueryContext, Result, StoreError, Tx, on_pool, on_tx};

super::store_handle!(
    /// Workers' requests and the decisions on them: `store.requests()`.
    Requests,
    requests
);

super::tx_handle!(
    /// Workers' requests and the decisions on them, in a transaction: `tx.requests()`.
    RequestsTx,
    requests
);

/// Where a request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RequestStatus {
    /// Waiting for Eagle's plugins.
    Pending,
    Approved,
    Denied,
    /// Waiting for a human.
    Escalated,
    /// Nobody answered in time, or its run ended.
    Expired,
}

impl RequestStatus {
    pub const ALL: [RequestStatus; 5] = [
        RequestStatus::Pending,
        RequestStatus::Approved,
        RequestStatus::Denied,
        RequestStatus::Escalated,
        RequestStatus::Expired,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RequestStatus::Pending => "pending",
            RequestStatus::Approved => "approved",
            RequestStatus::Denied => "denied",
            RequestStatus::Escalated => "escalated",
            RequestStatus::Expired => "expired",
        }
    }

    /// Whether the request still waits for someone.
    pub fn is_open(self) -> bool {
        matches!(self, RequestStatus::Pending | RequestStatus::Escalated)
    }
}

impl TryFrom<String> for RequestStatus {
    type Error = StoreError;
    fn try_from(value: String) -> Result<Self> {
        RequestStatus::ALL
            .into_iter()
            .find(|s| s.as_str() == value)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown request status {value:?}")))
    }
}

/// How a worker asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestVia {
    /// A `[REQUEST: …]` or `[ESCALATE: …]` line in its output: answered on resume.
    Line,
    /// `eagle request`: answered on the socket while the worker waits.
    Socket,
    /// Claude Code's PreToolUse hook: answered as the hook's decision.
    Hook,
}

impl RequestVia {
    pub fn as_str(self) -> &'static str {
        match self {
            RequestVia::Line => "line",
            RequestVia::Socket => "socket",
            RequestVia::Hook => "hook",
        }
    }
}

/// The longest request body Eagle records, in bytes. A longer one is
/// refused whole, never cut: an approval binds to exactly the bytes a
/// human could read (`!show`), so none may be dropped.
pub const MAX_REQUEST_BODY: usize = 64 * 1024;

/// Why a request body cannot be recorded, if it cannot: it is over
/// [`MAX_REQUEST_BODY`].
pub fn body_refusal(body: &str) -> Option<String> {
    (body.len() > MAX_REQUEST_BODY).then(|| {
        format!(
            "the request's text is {} bytes, over Eagle's limit of {MAX_REQUEST_BODY} bytes; \
             it is refused, not cut: ask for something shorter (put long text in a file of the \
             run and name it)",
            body.len()
        )
    })
}

/// A request to record.
#[derive(Debug, Clone)]
pub struct NewRequest {
    pub run_id: i64,
    pub attempt: i64,
    /// The worker's own key for it (`line:<offset>`, `sock:<id>`, `hook:<tool use id>`).
    pub key: String,
    pub via: RequestVia,
    /// `request` or `escalate`.
    pub escalate: bool,
    pub action: String,
    pub body: String,
}

impl NewRequest {
    /// What a decision binds to: the run, the kind, the action and the
    /// body's exact bytes (nothing folded, nothing cut).
    pub fn params_hash(&self) -> String {
        use sha2::Digest;
        let mut hasher = sha2::Sha256::new();
        let kind = if self.escalate { "escalate" } else { "request" };
        let run = self.run_id.to_string();
        for part in [kind, self.action.as_str(), run.as_str(), self.body.as_str()] {
            hasher.update((part.len() as u64).to_le_bytes());
            hasher.update(part.as_bytes());
        }
        crate::ground::text::hex(&hasher.finalize())
    }
}

/// A stored request.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Request {
    pub id: i64,
    pub run_id: i64,
    pub attempt: i64,
    pub request_key: String,
    pub via: String,
    pub kind: String,
    pub action: String,
    pub body: String,
    pub params_hash: String,
    pub created_at: DateTime<Utc>,
    #[sqlx(try_from = "String")]
    pub status: RequestStatus,
    pub decided_at: Option<DateTime<Utc>>,
    pub decided_by: Option<String>,
    pub decision_reason: Option<String>,
    pub notify_owner: bool,
    pub note: Option<String>,
    pub escalated_at: Option<DateTime<Utc>>,
    pub reminded_at: Option<DateTime<Utc>>,
    pub expires_at: Option<DateTime<Utc>>,
    pub delivered_at: Option<DateTime<Utc>>,
    pub bound_to: Option<i64>,
    /// For `merge_pr`: the PR head it was asked for.
    pub bound_sha: Option<String>,
    /// When Eagle carried it out (a merge, an Asana comment), and how it went.
    pub carried_out_at: Option<DateTime<Utc>>,
    pub carried_out: Option<String>,
    /// What Eagle told the run's topic the approved request waits for (a
    /// merge waiting for its checks), so that it is told once.
    pub carry_waiting: Option<String>,
}

impl Request {
    /// Whether an approver's `!merge` made it (no worker asked).
    pub fn by_command(&self) -> bool {
        self.via == "chat"
    }

    /// The protocol tag the worker used.
    pub fn tag(&self) -> &'static str {
        if self.kind == "escalate" {
            "ESCALATE"
        } else {
            "REQUEST"
        }
    }
}

const REQUEST_COLUMNS: &str = "id, run_id, attempt, request_key, via, kind, action, body, \
    params_hash, created_at, status, decided_at, decided_by, decision_reason, notify_owner, note, \
    escalated_at, reminded_at, expires_at, delivered_at, bound_to, bound_sha, carried_out_at, \
    carried_out, carry_waiting";

pub(super) fn select(tail: &str) -> sqlx::AssertSqlSafe<String> {
    super::tasks::sql(&["SELECT ", REQUEST_COLUMNS, " FROM worker_requests ", tail])
}

/// What recording a request did.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub request: Request,
    /// False when the same key was recorded before (a retry, a re-read log).
    pub new: bool,
}

/// A human's answer to a request.
#[derive(Debug, Clone)]
pub struct Approval<'a> {
    pub approve: bool,
    /// `human:26 <alex@…>`.
    pub actor: &'a str,
    /// For a denial: the reason the worker sees. For an approval: an optional note.
    pub text: Option<&'a str>,
    pub source_message_id: Option<i64>,
}

impl RequestsTx<'_> {
    /// Records a worker's request, once per (run, attempt, key), pending for
    /// the decider. The runner must hold the run.
    pub async fn record_request(&mut self, new: &NewRequest, fence: &Fence) -> Result<Recorded> {
        if let Some(refusal) = body_refusal(&new.body) {
            // The runner refuses these before: nothing cut reaches the table.
            return Err(StoreError::Corrupt(refusal));
        }
        // Locked (on PostgreSQL) until commit: the claim cannot end meanwhile.
        let run = self
            .run_for_update(fence.run)
            .await?
            .filter(|r| !r.state.is_final())
            .ok_or_else(|| StoreError::Fenced(format!("run {}", fence.run)))?;
        Tx::check_fence(&run, Some(fence))?;
        let now = super::now();
        let hash = new.params_hash();
        // A merge binds to the PR's head as the PR loop last saw it: a push
        // after that expires the request (and an approval of it merges only
        // that commit).
        let bound_sha = (new.action == "merge_pr").then_some(run.head_sha).flatten();
        let id: Option<i64> = on_tx!(self, conn => {
            sqlx::query_scalar(
                "INSERT INTO worker_requests (run_id, attempt, request_key, via, kind, action, body, \
                 params_hash, created_at, bound_sha) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
                 ON CONFLICT (run_id, attempt, request_key) DO NOTHING RETURNING id",
            )
            .bind(new.run_id)
            .bind(new.attempt)
            .bind(&new.key)
            .bind(new.via.as_str())
            .bind(if new.escalate { "escalate" } else { "request" })
            .bind(&new.action)
            .bind(&new.body)
            .bind(&hash)
            .bind(now)
            .bind(&bound_sha)
            .fetch_optional(conn)
            .await
        })
        .op("recording a request")?;
        let Some(id) = id else {
            let existing: Request = on_tx!(self, conn => {
                sqlx::query_as(select("WHERE run_id = $1 AND attempt = $2 AND request_key = $3"))
                    .bind(new.run_id)
                    .bind(new.attempt)
                    .bind(&new.key)
                    .fetch_one(conn)
                    .await
            })
            .op("reading a recorded request")?;
            return Ok(Recorded {
                request: existing,
                new: false,
            });
        };
        self.audit_log()
            .audit(&NewAuditEntry {
                actor: format!("runner:{}", fence.owner),
                action: "request.recorded".into(),
                subject: format!("request:{id}"),
                reason: Some(format!(
                    "run {} attempt {} asks {} via {}",
                    new.run_id,
                    new.attempt,
                    new.action,
                    new.via.as_str()
                )),
                params_hash: Some(hash.clone()),
                ..NewAuditEntry::default()
            })
            .await?;
        self.notify().await?;
        let request = self
            .request(id)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("request {id} vanished")))?;
        let action = request.action.clone();
        self.count_on_commit(move || {
            crate::ground::metrics::get()
                .requests
                .get_or_create(&crate::ground::metrics::ActionLabels { action })
                .inc();
        });
        Ok(Recorded { request, new: true })
    }

    /// Reuses a human's decision on an identical earlier request of the
    /// run, if there is one, for a request still pending. Returns the
    /// request as decided, or `None` (then the plugins decide, and the
    /// caller must roll this transaction back).
    pub async fn bind_to_human_decision(&mut self, request: &Request) -> Result<Option<Request>> {
        let (id, run_id, hash) = (request.id, request.run_id, request.params_hash.as_str());
        let earlier: Option<(i64, String, Option<String>, Option<String>)> = on_tx!(self, conn => {
            sqlx::query_as(
                "SELECT id, status, decision_reason, note FROM worker_requests \
                 WHERE run_id = $1 AND params_hash = $2 AND id < $3 \
                 AND bound_sha IS NOT DISTINCT FROM $4 \
                 AND decided_by LIKE 'human:%' AND bound_to IS NULL \
                 AND ((status = 'approved' AND consumed_at IS NULL) OR status = 'denied') \
                 ORDER BY id DESC LIMIT 1",
            )
            .bind(run_id)
            .bind(hash)
            .bind(id)
            .bind(&request.bound_sha)
            .fetch_optional(conn)
            .await
        })
        .op("looking for a human's decision to reuse")?;
        let Some((earlier, status, reason, note)) = earlier else {
            return Ok(None);
        };
        let now = super::now();
        if status == "approved" {
            // Used up first, conditionally: two deciders cannot both use it.
            let used = on_tx!(self, conn => {
                sqlx::query("UPDATE worker_requests SET consumed_at = $2 WHERE id = $1 AND consumed_at IS NULL")
                    .bind(earlier)
                    .bind(now)
                    .execute(conn)
                    .await
                    .map(|done| done.rows_affected())
            })
            .op("using up an approval")?;
            if used == 0 {
                return Ok(None);
            }
        }
        let changed = on_tx!(self, conn => {
            sqlx::query(
                "UPDATE worker_requests SET status = $2, decided_at = $3, decided_by = $4, \
                 decision_reason = $5, note = $6, bound_to = $7 WHERE id = $1 AND status = 'pending'",
            )
            .bind(id)
            .bind(&status)
            .bind(now)
            .bind(format!("bound:request:{earlier}"))
            .bind(&reason)
            .bind(&note)
            .bind(earlier)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("reusing a human's decision")?;
        if changed == 0 {
            // Decided meanwhile: the caller rolls its transaction back, and
            // with it the use of the approval.
            return Ok(None);
        }
        self.audit_log()
            .audit(&NewAuditEntry {
                actor: format!("bound:request:{earlier}"),
                action: "request.decided".into(),
                subject: format!("request:{id}"),
                decision: Some(
                    if status == "approved" {
                        "approve"
                    } else {
                        "deny"
                    }
                    .into(),
                ),
                reason: Some(format!(
                    "the same request as request {earlier}, which a human {status}"
                )),
                params_hash: Some(hash.to_string()),
                ..NewAuditEntry::default()
            })
            .await?;
        self.notify().await?;
        let status = if status == "approved" {
            RequestStatus::Approved
        } else {
            RequestStatus::Denied
        };
        self.count_decision(request, status, "human");
        self.request(id).await
    }

    /// One request by id.
    pub async fn request(&mut self, id: i64) -> Result<Option<Request>> {
        on_tx!(self, conn => sqlx::query_as(select("WHERE id = $1")).bind(id).fetch_optional(conn).await)
            .op("reading a request")
    }

    /// Every request of a run, oldest first.
    pub async fn requests_of_run(&mut self, run_id: i64) -> Result<Vec<Request>> {
        on_tx!(self, conn => {
            sqlx::query_as(select("WHERE run_id = $1 ORDER BY id"))
                .bind(run_id)
                .fetch_all(conn)
                .await
        })
        .op("listing a run's requests")
    }

    /// Records the decider's decision, if nobody decided first. `None` when
    /// the request was no longer pending (another instance or a human won).
    /// An escalation keeps the request open, waiting for a human, until `expires_at`.
    pub async fn decide_request(
        &mut self,
        id: i64,
        status: RequestStatus,
        decided_by: &str,
        reason: &str,
        notify_owner: bool,
        expires_at: Option<DateTime<Utc>>,
    ) -> Result<Option<Request>> {
        let now = super::now();
        let escalated = status == RequestStatus::Escalated;
        let changed = on_tx!(self, conn => {
            sqlx::query(
                "UPDATE worker_requests SET status = $2, decided_by = $3, decision_reason = $4, \
                 notify_owner = $5, decided_at = CASE WHEN $6 THEN NULL ELSE $7 END, \
                 escalated_at = CASE WHEN $6 THEN $7 ELSE NULL END, expires_at = $8 \
                 WHERE id = $1 AND status = 'pending'",
            )
            .bind(id)
            .bind(status.as_str())
            .bind(decided_by)
            .bind(reason)
            .bind(notify_owner)
            .bind(escalated)
            .bind(now)
            .bind(expires_at)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("recording a decision")?;
        if changed == 0 {
            return Ok(None);
        }
        self.notify().await?;
        let decided = self.request(id).await?;
        if let Some(request) = &decided {
            let by = decided_by.strip_prefix("policy:").unwrap_or("none");
            self.count_decision(request, status, by);
        }
        Ok(decided)
    }

    /// An approver's `!approve` / `!deny` on a request still open. `None`
    /// when it is not open any more.
    pub async fn human_decision(
        &mut self,
        id: i64,
        approval: &Approval<'_>,
    ) -> Result<Option<Request>> {
        let now = super::now();
        let (status, reason, note) = if approval.approve {
            (
                "approved",
                format!("approved by {}", approval.actor),
                approval.text,
            )
        } else {
            (
                "denied",
                approval.text.unwrap_or("denied").to_string(),
                None::<&str>,
            )
        };
        let changed = on_tx!(self, conn => {
            sqlx::query(
                "UPDATE worker_requests SET status = $2, decided_by = $3, decision_reason = $4, \
                 note = $5, decided_at = $6 WHERE id = $1 AND status IN ('pending', 'escalated')",
            )
            .bind(id)
            .bind(status)
            .bind(approval.actor)
            .bind(&reason)
            .bind(note)
            .bind(now)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("recording a human's decision")?;
        if changed == 0 {
            return Ok(None);
        }
        let request = self
            .request(id)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("request {id} vanished")))?;
        self.audit_log()
            .audit(&NewAuditEntry {
                actor: approval.actor.to_string(),
                action: "request.decided".into(),
                subject: format!("request:{id}"),
                decision: Some(if approval.approve { "approve" } else { "deny" }.into()),
                reason: Some(match approval.text {
                    Some(text) if approval.approve => format!("note: {text}"),
                    Some(text) => text.to_string(),
                    None => reason.clone(),
                }),
                params_hash: Some(request.params_hash.clone()),
                source_message_id: approval.source_message_id,
                ..NewAuditEntry::default()
            })
            .await?;
        self.notify().await?;
        let status = if approval.approve {
            RequestStatus::Approved
        } else {
            RequestStatus::Denied
        };
        self.count_decision(&request, status, "human");
        Ok(Some(request))
    }

    /// An approver's `!merge`: a `merge_pr` of the run's PR at `sha` (the
    /// head Eagle named to them; `body` is the effect's parameters naming
    /// it), recorded as approved by them, for the carrier to carry out
    /// exactly like an approved worker's request. No worker waits on it: it
    /// is recorded as delivered, and its `via` is `chat`. `None` when this
    /// message made it already.
    pub async fn record_merge_command(
        &mut self,
        run: &super::Run,
        sha: &str,
        body: &str,
        approval: &Approval<'_>,
    ) -> Result<Option<Request>> {
        let new = NewRequest {
            run_id: run.id,
            attempt: run.attempt,
            key: format!(
                "chat:{}:{sha}",
                approval.source_message_id.unwrap_or_default()
            ),
            // Only its hash is read: the row says `chat`.
            via: RequestVia::Line,
            escalate: false,
            action: "merge_pr".into(),
            body: body.to_string(),
        };
        let hash = new.params_hash();
        let now = super::now();
        let reason = format!("approved by {} (`!merge`)", approval.actor);
        let id: Option<i64> = on_tx!(self, conn => {
            sqlx::query_scalar(
                "INSERT INTO worker_requests (run_id, attempt, request_key, via, kind, action, body, \
                 params_hash, created_at, bound_sha, status, decided_at, decided_by, \
                 decision_reason, delivered_at) \
                 VALUES ($1, $2, $3, 'chat', 'request', $4, $5, $6, $7, $8, 'approved', $7, $9, $10, $7) \
                 ON CONFLICT (run_id, attempt, request_key) DO NOTHING RETURNING id",
            )
            .bind(new.run_id)
            .bind(new.attempt)
            .bind(&new.key)
            .bind(&new.action)
            .bind(&new.body)
            .bind(&hash)
            .bind(now)
            .bind(sha)
            .bind(approval.actor)
            .bind(&reason)
            .fetch_optional(conn)
            .await
        })
        .op("recording a merge by command")?;
        let Some(id) = id else {
            return Ok(None);
        };
        self.audit_log()
            .audit(&NewAuditEntry {
                actor: approval.actor.to_string(),
                action: "request.decided".into(),
                subject: format!("request:{id}"),
                decision: Some("approve".into()),
                reason: Some(format!(
                    "`!merge` of run {} at {}",
                    run.id,
                    super::short_sha(sha)
                )),
                params_hash: Some(hash),
                source_message_id: approval.source_message_id,
                ..NewAuditEntry::default()
            })
            .await?;
        self.notify().await?;
        let request = self
            .request(id)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("request {id} vanished")))?;
        self.count_decision(&request, RequestStatus::Approved, "human");
        Ok(Some(request))
    }

    /// Expires one escalated request nobody answered in time.
    pub async fn expire_request(&mut self, id: i64, reason: &str) -> Result<Option<Request>> {
        let now = super::now();
        let changed = on_tx!(self, conn => {
            sqlx::query(
                "UPDATE worker_requests SET status = 'expired', decided_at = $2, decided_by = 'eagle', \
                 decision_reason = $3 WHERE id = $1 AND status IN ('pending', 'escalated')",
            )
            .bind(id)
            .bind(now)
            .bind(reason)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("expiring a request")?;
        if changed == 0 {
            return Ok(None);
        }
        self.audit_log()
            .audit(&NewAuditEntry {
                actor: "eagle".into(),
                action: "request.expired".into(),
                subject: format!("request:{id}"),
                decision: Some("expire".into()),
                reason: Some(reason.to_string()),
                ..NewAuditEntry::default()
            })
            .await?;
        self.step_aside(id, reason).await?;
        self.notify().await?;
        self.request(id).await
    }

    /// Notes that a reminder about an escalated request was posted.
    pub async fn mark_reminded(&mut self, id: i64) -> Result<bool> {
        let now = super::now();
        let changed = on_tx!(self, conn => {
            sqlx::query(
                "UPDATE worker_requests SET reminded_at = $2 WHERE id = $1 AND status = 'escalated' \
                 AND reminded_at IS NULL",
            )
            .bind(id)
            .bind(now)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("recording a reminder")?;
        Ok(changed == 1)
    }

    /// Marks decisions as known to the worker.
    pub async fn mark_delivered(&mut self, ids: &[i64]) -> Result<()> {
        let now = super::now();
        for id in ids {
            on_tx!(self, conn => {
                sqlx::query("UPDATE worker_requests SET delivered_at = $2 WHERE id = $1 AND delivered_at IS NULL")
                    .bind(id)
                    .bind(now)
                    .execute(conn)
                    .await
                    .map(|done| done.rows_affected())
            })
            .op("recording a delivered decision")?;
        }
        Ok(())
    }
}

impl Tx {
    /// Counts a decision in the metrics, once this commits.
    fn count_decision(&mut self, request: &Request, status: RequestStatus, by: &str) {
        let outcome = match status {
            RequestStatus::Approved => "approve",
            RequestStatus::Denied => "deny",
            RequestStatus::Escalated => "escalate",
            _ => "other",
        };
        let waited = (super::now() - request.created_at).to_std().ok();
        let (action, by) = (request.action.clone(), by.to_string());
        self.count_on_commit(move || {
            crate::ground::metrics::get().decided(&action, outcome, &by, waited)
        });
    }

    /// Expires the open requests of a run that ended.
    pub(super) async fn expire_requests_of_run(&mut self, run_id: i64, reason: &str) -> Result<()> {
        let now = super::now();
        let expired: Vec<i64> = on_tx!(self, conn => {
            sqlx::query_scalar(
                "UPDATE worker_requests SET status = 'expired', decided_at = $2, decided_by = 'eagle', \
                 decision_reason = $3 WHERE run_id = $1 AND status IN ('pending', 'escalated') RETURNING id",
            )
            .bind(run_id)
            .bind(now)
            .bind(reason)
            .fetch_all(conn)
            .await
        })
        .op("expiring a run's requests")?;
        for id in expired {
            self.audit_log()
                .audit(&NewAuditEntry {
                    actor: "eagle".into(),
                    action: "request.expired".into(),
                    subject: format!("request:{id}"),
                    decision: Some("expire".into()),
                    reason: Some(reason.to_string()),
                    ..NewAuditEntry::default()
                })
                .await?;
            self.step_aside(id, reason).await?;
        }
        Ok(())
    }
}

impl Requests<'_> {
    /// Requests waiting for Eagle's plugins, oldest first.
    pub async fn pending_requests(&self, limit: i64) -> Result<Vec<Request>> {
        on_pool!(self, pool => {
            sqlx::query_as(select("WHERE status = 'pending' ORDER BY id LIMIT $1"))
                .bind(limit)
                .fetch_all(pool)
                .await
        })
        .op("listing pending requests")
    }

    /// Escalated requests, oldest first (for reminders and expiry).
    pub async fn escalated_requests(&self, limit: i64) -> Result<Vec<Request>> {
        on_pool!(self, pool => {
            sqlx::query_as(select("WHERE status = 'escalated' ORDER BY id LIMIT $1"))
                .bind(limit)
                .fetch_all(pool)
                .await
        })
        .op("listing escalated requests")
    }

    /// One request by id, outside any transaction.
    pub async fn request(&self, id: i64) -> Result<Option<Request>> {
        on_pool!(self, pool => sqlx::query_as(select("WHERE id = $1")).bind(id).fetch_optional(pool).await)
            .op("reading a request")
    }

    /// A run's requests, outside any transaction.
    pub async fn requests_of_run(&self, run_id: i64) -> Result<Vec<Request>> {
        on_pool!(self, pool => {
            sqlx::query_as(select("WHERE run_id = $1 ORDER BY id"))
                .bind(run_id)
                .fetch_all(pool)
                .await
        })
        .op("listing a run's requests")
    }
}

/// A one-line summary of requests for `!status`: `req 7 merge_pr (escalated)`.
pub fn requests_summary(requests: &[Request]) -> String {
    requests
        .iter()
        .map(|r| format!("req {} {} ({})", r.id, r.action, r.status.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}
