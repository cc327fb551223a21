//! The run's socket: where a worker asks (`eagle request`, Claude Code's
//! hook through `eagle hook claude-pretool`) and gets Eagle's answer.
//!
//! Each attempt gets its own socket file (only the worker's user may open
//! it) and token (only its hash is kept). A question is recorded as a
//! request in the database, fenced by the runner's claim, and posted in the
//! run's topic in the same transaction; the answer is whatever Eagle (or a
//! human) records, read back from the database.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;

use super::Shared;
use super::attempt::SocketCtx;
use super::hook::{self, HookInput, HookVerdict};
use crate::ground::wire::{Answer, Ask, MAX_LINE, Status, valid_action};
use crate::store::{NewRequest, Request, RequestStatus, RequestVia, StoreError, body_refusal};

/// How long a worker has to send its question once connected.
const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections one attempt's socket serves at once; one over it is closed
/// at once (`eagle request` and the hook reconnect, so a burst only waits).
/// With [`MAX_LINE`] per question, what a worker can make the runner hold
/// is bounded.
pub(super) const MAX_CONNECTIONS: usize = 32;

/// Binds the socket at `path`, replacing a stale file, private to the worker's user.
pub(super) fn bind(path: &Path, shared: &Shared) -> std::io::Result<UnixListener> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let listener = UnixListener::bind(path)?;
    crate::ground::host::chmod(path, 0o600)?;
    if let Some(user) = &shared.worker_user {
        crate::ground::host::chown(path, user)?;
    }
    Ok(listener)
}

/// Answers connections until `shutdown`.
pub(super) async fn serve(
    listener: UnixListener,
    ctx: Arc<SocketCtx>,
    shutdown: CancellationToken,
) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) if connections.len() >= MAX_CONNECTIONS => {
                    tracing::debug!(run = ctx.fence.run, "the run's socket is busy; a connection is closed");
                    drop(stream);
                }
                Ok((stream, _)) => {
                    let ctx = Arc::clone(&ctx);
                    connections.spawn(async move { handle(stream, &ctx).await });
                }
                Err(error) => {
                    tracing::warn!(%error, run = ctx.fence.run, "the run's socket failed to accept");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    connections.abort_all();
}

async fn handle(stream: UnixStream, ctx: &SocketCtx) {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read.take(MAX_LINE as u64));
    let mut line = String::new();
    let answer = match tokio::time::timeout(READ_TIMEOUT, reader.read_line(&mut line)).await {
        Ok(Ok(n)) if n >= MAX_LINE && !line.ends_with('\n') => Answer::new(
            Status::Invalid,
            format!("the request is over {MAX_LINE} bytes: refused, not read"),
        ),
        Ok(Ok(_)) => match serde_json::from_str::<Ask>(&line) {
            Ok(ask) => answer(ctx, ask).await,
            Err(_) => Answer::new(Status::Invalid, "not a request Eagle understands"),
        },
        _ => return,
    };
    let mut text = serde_json::to_string(&answer).unwrap_or_default();
    text.push('\n');
    let _ = write.write_all(text.as_bytes()).await;
    let _ = write.shutdown().await;
}

fn token_ok(ctx: &SocketCtx, token: &str) -> bool {
    let got = crate::policy::content_hash(token.as_bytes());
    let want = ctx.token_sha256.as_bytes();
    // Compared without an early exit.
    got.len() == want.len()
        && got
            .as_bytes()
            .iter()
            .zip(want)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

async fn answer(ctx: &SocketCtx, ask: Ask) -> Answer {
    let token = match &ask {
        Ask::Request { token, .. } | Ask::Hook { token, .. } => token,
    };
    if !token_ok(ctx, token) {
        tracing::warn!(
            run = ctx.fence.run,
            "a request with a wrong token was refused"
        );
        return Answer::new(Status::Invalid, "wrong token for this run");
    }
    if let Some(reason) = ctx.stop.borrow().clone() {
        return Answer::new(Status::Stop, reason);
    }
    let result = match ask {
        Ask::Request {
            key,
            action,
            body,
            escalate,
            ..
        } => request(ctx, key, action, body, escalate).await,
        Ask::Hook { input, .. } => {
            let started = std::time::Instant::now();
            let answered = hook_call(ctx, input).await;
            crate::ground::metrics::get()
                .hook_seconds
                .observe(started.elapsed().as_secs_f64());
            answered
        }
    };
    result.unwrap_or_else(|error| match error {
        StoreError::Fenced(_) => Answer::new(
            Status::Stop,
            "this attempt is over (its run was taken over or ended): stop now",
        ),
        error => {
            tracing::error!(%error, run = ctx.fence.run, "cannot answer a worker");
            Answer::new(
                Status::Escalated,
                "Eagle cannot record the request now: stop; you will be resumed",
            )
        }
    })
}

async fn request(
    ctx: &SocketCtx,
    key: String,
    action: String,
    body: String,
    escalate: bool,
) -> Result<Answer, StoreError> {
    if !valid_action(&action) {
        return Ok(Answer::new(
            Status::Invalid,
            format!(
                "{:?} is not an action: use lower case letters, digits and '_' (run_tests, merge_pr)",
                crate::ground::text::one_line(&action, 64)
            ),
        ));
    }
    // Refused whole, never cut: an approval binds to the exact bytes.
    if let Some(refusal) = body_refusal(&body) {
        return Ok(Answer::new(Status::Invalid, refusal));
    }
    if let Some(refused) = super::effects::precheck(ctx, &action, &body).await? {
        return Ok(refused);
    }
    let key: String = key.chars().filter(|c| !c.is_control()).take(200).collect();
    let new = NewRequest {
        run_id: ctx.fence.run,
        attempt: ctx.fence.attempt,
        key: format!("sock:{key}"),
        via: RequestVia::Socket,
        escalate,
        action,
        body,
    };
    let recorded = match record(ctx, &new).await? {
        None => return Ok(flooded(ctx)),
        Some(Err(_)) => return Ok(reused_key()),
        Some(Ok(request)) => request,
    };
    tracing::info!(run = ctx.fence.run, request = recorded.id, action = %recorded.action, "request recorded; waiting for the decision");
    let deadline = tokio::time::Instant::now() + ctx.shared.settings.request_wait;
    let decided = wait(ctx, &[recorded.id], deadline).await?;
    if let Some(request) = &decided {
        tracing::debug!(
            run = ctx.fence.run,
            request = request.id,
            status = request.status.as_str(),
            "decision handed to the worker"
        );
    }
    let Some(request) = decided else {
        return Ok(Answer::new(Status::Stop, stop_reason(ctx)));
    };
    if let Some(carried) = super::effects::after_approval(ctx, &request).await? {
        return Ok(carried);
    }
    finish(ctx, &[request], "eagle request").await
}

async fn hook_call(ctx: &SocketCtx, input: serde_json::Value) -> Result<Answer, StoreError> {
    let Ok(input) = serde_json::from_value::<HookInput>(input) else {
        return Ok(Answer::new(
            Status::Denied,
            "Eagle cannot read this tool call",
        ));
    };
    match hook::judge(&input, &ctx.workdir, &ctx.shared.settings.hook_rules) {
        HookVerdict::Allow => Ok(Answer::new(Status::Approved, "")),
        HookVerdict::Deny(reason) => Ok(Answer::new(Status::Denied, reason)),
        HookVerdict::Ask(asks) => {
            let call = input
                .tool_use_id
                .clone()
                .unwrap_or_else(|| format!("{:016x}", fastrand::u64(..)));
            let mut ids = Vec::new();
            for ask in asks {
                if let Some(refusal) = body_refusal(&ask.body) {
                    return Ok(Answer::new(Status::Denied, refusal));
                }
                let new = NewRequest {
                    run_id: ctx.fence.run,
                    attempt: ctx.fence.attempt,
                    key: format!("hook:{call}:{}", ask.action),
                    via: RequestVia::Hook,
                    escalate: false,
                    action: ask.action,
                    body: ask.body,
                };
                match record(ctx, &new).await? {
                    Some(Ok(request)) => ids.push(request.id),
                    Some(Err(_)) => return Ok(reused_key()),
                    None => return Ok(flooded(ctx)),
                }
            }
            // Answer well before Claude Code's own hook timeout.
            let budget = ctx
                .shared
                .settings
                .hook_timeout
                .saturating_sub(Duration::from_secs(10))
                .max(Duration::from_secs(5));
            let deadline = tokio::time::Instant::now() + budget;
            let mut decided = Vec::new();
            for id in &ids {
                match wait(ctx, &[*id], deadline).await? {
                    Some(request) => decided.push(request),
                    None => return Ok(Answer::new(Status::Stop, stop_reason(ctx))),
                }
            }
            finish(ctx, &decided, "this tool call").await
        }
    }
}

fn reused_key() -> Answer {
    Answer::new(
        Status::Invalid,
        "this request's key was used before for another request",
    )
}

fn flooded(ctx: &SocketCtx) -> Answer {
    Answer::new(
        Status::Stop,
        format!(
            "more than {} requests in one attempt: stop now",
            ctx.shared.settings.max_requests
        ),
    )
}

fn stop_reason(ctx: &SocketCtx) -> String {
    ctx.stop
        .borrow()
        .clone()
        .unwrap_or_else(|| "stop now".into())
}

/// Records a request and posts it in the run's topic. `None` past the flood
/// cap; `Err` (the earlier request) when the key was used for other parameters.
async fn record(
    ctx: &SocketCtx,
    new: &NewRequest,
) -> Result<Option<Result<Request, Request>>, StoreError> {
    if ctx.requests.load(Ordering::Relaxed) >= ctx.shared.settings.max_requests {
        return Ok(None);
    }
    let (done, flushed) = tokio::sync::oneshot::channel();
    if ctx.flush.send(done).await.is_ok() {
        let _ = tokio::time::timeout(Duration::from_secs(2), flushed).await;
    }
    let mut tx = ctx.shared.store.begin_write().await?;
    let recorded = super::supervise::record_request(
        &mut tx,
        &ctx.shared,
        &ctx.fence,
        &ctx.requests,
        ctx.private,
        new,
    )
    .await?;
    if !recorded.new && recorded.request.params_hash != new.params_hash() {
        // The same key for something else: not the same request.
        return Ok(Some(Err(recorded.request)));
    }
    tx.commit().await?;
    Ok(Some(Ok(recorded.request)))
}

/// Waits until none of `ids` is pending (escalated counts: a human decides
/// later), or `deadline`. `None` when the worker must stop meanwhile.
async fn wait(
    ctx: &SocketCtx,
    ids: &[i64],
    deadline: tokio::time::Instant,
) -> Result<Option<Request>, StoreError> {
    let mut changes = ctx.shared.store.changes();
    let mut stop = ctx.stop.clone();
    loop {
        changes.mark_seen();
        let mut last = None;
        let mut pending = false;
        for id in ids {
            let request = ctx
                .shared
                .store
                .requests()
                .request(*id)
                .await?
                .ok_or_else(|| StoreError::Corrupt(format!("request {id} vanished")))?;
            pending |= request.status == RequestStatus::Pending;
            last = Some(request);
        }
        if !pending || tokio::time::Instant::now() >= deadline {
            return Ok(last);
        }
        if stop.borrow().is_some() {
            return Ok(None);
        }
        tokio::select! {
            _ = changes.changed() => {}
            _ = stop.changed() => {}
            _ = tokio::time::sleep_until(deadline) => {}
        }
    }
}

/// The answer to decided requests (all must be approved to go ahead), and
/// the decisions marked known to the worker.
async fn finish(ctx: &SocketCtx, requests: &[Request], what: &str) -> Result<Answer, StoreError> {
    let mut delivered = Vec::new();
    let mut answer: Option<Answer> = None;
    let mut note = None;
    for request in requests {
        let reason = request.decision_reason.clone().unwrap_or_default();
        let this = match request.status {
            RequestStatus::Approved => {
                delivered.push(request.id);
                note = note.or_else(|| request.note.clone());
                continue;
            }
            RequestStatus::Denied => {
                delivered.push(request.id);
                Answer::new(
                    Status::Denied,
                    format!(
                        "{} (request {}) is denied: {reason}",
                        request.action, request.id
                    ),
                )
            }
            RequestStatus::Expired => {
                delivered.push(request.id);
                Answer::new(
                    Status::Denied,
                    format!(
                        "{} (request {}) expired: {reason}",
                        request.action, request.id
                    ),
                )
            }
            RequestStatus::Escalated => Answer::new(
                Status::Escalated,
                format!(
                    "a human decides on {} (request {}) for {what}: stop now and end your turn; \
                     you will be resumed with the answer",
                    request.action, request.id
                ),
            ),
            RequestStatus::Pending => Answer::new(
                Status::Escalated,
                format!(
                    "no decision on {} (request {}) yet: stop now and end your turn; \
                     you will be resumed with the answer",
                    request.action, request.id
                ),
            ),
        };
        // A denial outranks waiting for a human.
        let rank = |a: &Answer| matches!(a.status, Status::Denied) as u8;
        if answer.as_ref().is_none_or(|a| rank(&this) > rank(a)) {
            answer = Some(Answer {
                request: Some(request.id),
                ..this
            });
        }
    }
    if !delivered.is_empty() {
        let mut tx = ctx.shared.store.begin_write().await?;
        tx.requests().mark_delivered(&delivered).await?;
        tx.commit().await?;
    }
    Ok(answer.unwrap_or_else(|| Answer {
        status: Status::Approved,
        reason: String::new(),
        request: requests.last().map(|r| r.id),
        note,
        outcome: None,
    }))
}
