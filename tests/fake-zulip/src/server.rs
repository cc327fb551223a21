//! The HTTP side: one handler takes every request, records it, and runs it
//! through routing, faults, authentication, parameter checks, rate limits
//! and the endpoint, then checks 2xx bodies against the spec.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::{Body, to_bytes};
use axum::extract::{Request, State as AxumState};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::{Map, Value, json};
use tokio::time::Instant;

use crate::auth::authenticate;
use crate::error::{ApiError, success};
use crate::events::{Polled, delete_queue, get_events, register};
use crate::faults::{Canned, canned, restart_page};
use crate::model::{Fault, RecordedRequest};
use crate::params::{Params, parse_urlencoded};
use crate::ratelimit::{Bucket, Decision, format_secs};
use crate::routes::{Endpoint, NoRoute, resolve};
use crate::state::Shared;
use crate::validate::{Verdict, check};
use crate::{edit, fetch, reactions, send, users};

/// Bodies larger than this are refused.
const MAX_BODY: usize = 16 * 1024 * 1024;

/// What one request gets.
enum Reply {
    Json {
        status: u16,
        body: Value,
        headers: Vec<(&'static str, String)>,
    },
    Canned(Canned),
    /// No answer at all; the connection stays open until the client gives up.
    Hang,
}

/// Everything the pipeline knows about the request.
struct Incoming {
    method: String,
    path: String,
    headers: HeaderMap,
    params: BTreeMap<String, String>,
    index: usize,
}

/// The single axum handler.
pub(crate) async fn handle(
    AxumState(shared): AxumState<Arc<Shared>>,
    request: Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let method = parts.method.as_str().to_owned();
    let path = parts.uri.path().to_owned();
    let mut params = BTreeMap::new();
    parse_urlencoded(&mut params, parts.uri.query().unwrap_or("").as_bytes());
    let (bytes, unreadable) = match to_bytes(body, MAX_BODY).await {
        Ok(bytes) => (bytes, false),
        Err(_) => (Default::default(), true),
    };
    let form = parts
        .headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    // Django reads no body on GET: parameters there must be in the query.
    let body_ignored = method == "GET" && !bytes.is_empty();
    if form && !body_ignored {
        parse_urlencoded(&mut params, &bytes);
    }
    let index = shared.mutate(|state| {
        if unreadable {
            state.violation(format!(
                "{method} {path}: the body is unreadable or over {MAX_BODY} bytes"
            ));
        }
        if body_ignored {
            state.violation(format!(
                "{method} {path}: a GET with a body, which Zulip ignores"
            ));
        } else if !bytes.is_empty() && !form {
            state.violation(format!(
                "{method} {path}: the body is not application/x-www-form-urlencoded"
            ));
        }
        state.requests.push(RecordedRequest {
            method: method.clone(),
            path: path.clone(),
            user_id: None,
            params: params.clone(),
            status: 0,
            at: std::time::Instant::now(),
        });
        state.requests.len() - 1
    });
    let incoming = Incoming {
        method,
        path,
        headers: parts.headers,
        params,
        index,
    };
    let reply = process(&shared, &incoming).await;
    finish(&shared, &incoming, reply).await
}

async fn process(shared: &Arc<Shared>, req: &Incoming) -> Reply {
    let endpoint = match resolve(&req.method, &req.path) {
        Ok(endpoint) => endpoint,
        Err(no_route) => {
            let fault = shared.mutate(|s| s.faults.take(None));
            if let Some(reply) = fault.and_then(fault_reply) {
                return reply;
            }
            return no_route_reply(shared, req, no_route);
        }
    };
    let fault = shared.mutate(|s| s.faults.take(endpoint.route()));
    if let Some(fault) = fault
        && let Some(reply) = fault_reply(fault)
    {
        return reply;
    }
    let mut reply = authenticated(shared, req, &endpoint).await;
    if fault == Some(Fault::AcceptThenHang) {
        reply = Reply::Hang;
    }
    reply
}

fn fault_reply(fault: Fault) -> Option<Reply> {
    match fault {
        Fault::Hang => Some(Reply::Hang),
        Fault::AcceptThenHang => None,
        other => canned(other).map(Reply::Canned),
    }
}

fn no_route_reply(shared: &Shared, req: &Incoming, no_route: NoRoute) -> Reply {
    let (status, body, why) = match no_route {
        NoRoute::NotFound => (
            404,
            json!({"result": "error", "msg": "Not Found", "code": "BAD_REQUEST"}),
            "unknown route".to_owned(),
        ),
        NoRoute::MethodNotAllowed(allowed) => (
            405,
            json!({"result": "error", "msg": "Method Not Allowed", "code": "BAD_REQUEST", "allowed_methods": allowed}),
            format!("method not allowed (allowed: {})", allowed.join(", ")),
        ),
    };
    shared.mutate(|s| s.violation(format!("{} {}: {why}", req.method, req.path)));
    Reply::Json {
        status,
        body,
        headers: Vec::new(),
    }
}

/// Authentication, parameter checks, rate limits and the endpoint.
async fn authenticated(shared: &Arc<Shared>, req: &Incoming, endpoint: &Endpoint) -> Reply {
    let user = if endpoint.authenticated() {
        let result = shared.mutate(|state| {
            let result = authenticate(state, &req.headers);
            if let (Ok(id), Some(r)) = (&result, state.requests.get_mut(req.index)) {
                r.user_id = Some(*id);
            }
            result
        });
        match result {
            Ok(id) => Some(id),
            Err(e) => return error_reply(shared, req, e, None),
        }
    } else {
        None
    };
    let known = endpoint.known_params();
    let ignored: Vec<String> = req
        .params
        .keys()
        .filter(|k| !known.contains(&k.as_str()))
        .cloned()
        .collect();
    if !ignored.is_empty() {
        let text = format!(
            "{} {}: unknown parameter(s) {} (reported in ignored_parameters_unsupported)",
            req.method,
            req.path,
            ignored.join(", ")
        );
        shared.mutate(|s| s.violation(text));
    }
    let limits = match user {
        Some(user) => {
            let bucket = if *endpoint == Endpoint::GetEvents {
                Bucket::Events
            } else {
                Bucket::Api
            };
            shared.mutate(|s| s.rate.check(user, bucket, Instant::now()))
        }
        None => None,
    };
    if let Some(decision) = limits.as_ref().filter(|d| !d.allowed) {
        let secs = decision.retry_after;
        let mut e = ApiError::new(
            429,
            "RATE_LIMIT_HIT",
            "API usage exceeded rate limit".into(),
        )
        .with("retry-after", json!(secs));
        e.headers.push(("retry-after", format_secs(secs)));
        return error_reply(shared, req, e, limits.as_ref());
    }
    let params = Params::new(&req.params);
    let result = match (endpoint, user) {
        (Endpoint::ServerSettings, _) => {
            Ok(users::server_settings(&format!("http://{}", shared.addr)))
        }
        (Endpoint::GetEvents, Some(user)) => {
            match get_events(Arc::clone(shared), user, &params).await {
                Polled::Answer(result) => result,
                Polled::Restarted => return Reply::Canned(restart_page()),
            }
        }
        (endpoint, Some(user)) => {
            let client = client_name(&req.headers);
            shared.mutate(|state| dispatch(shared, state, endpoint, user, &client, &params))
        }
        (_, None) => Err(ApiError::unauthorized(
            "Missing authorization header for basic auth",
        )),
    };
    match result {
        Ok(data) => {
            let mut reply = success_reply(data, &ignored);
            add_limit_headers(&mut reply, limits.as_ref());
            reply
        }
        Err(e) => error_reply(shared, req, e, limits.as_ref()),
    }
}

fn dispatch(
    shared: &Shared,
    state: &mut crate::state::State,
    endpoint: &Endpoint,
    user: u64,
    client: &str,
    p: &Params<'_>,
) -> Result<Map<String, Value>, ApiError> {
    let max_len = shared.config.max_message_length;
    match endpoint {
        Endpoint::UsersMe => users::users_me(state, user),
        Endpoint::User(which) => users::get_user(state, which, p),
        Endpoint::Subscriptions => users::subscriptions(state, user, p),
        Endpoint::Register => register(shared, state, user, p),
        Endpoint::DeleteEvents => delete_queue(state, user, p),
        Endpoint::SendMessage => send::post_messages(state, max_len, user, client, p),
        Endpoint::GetMessages => fetch::get_messages(state, user, p),
        Endpoint::EditMessage(id) => edit::patch_message(state, max_len, user, *id, p),
        Endpoint::AddReaction(id) => reactions::post_reaction(state, user, *id, p),
        Endpoint::RemoveReaction(id) => reactions::delete_reaction(state, user, *id, p),
        Endpoint::ServerSettings | Endpoint::GetEvents => {
            Err(ApiError::bad_request("unreachable".into()))
        }
    }
}

/// The client name Zulip derives from the User-Agent (`ZulipPython/0.9` →
/// `ZulipPython`).
fn client_name(headers: &HeaderMap) -> String {
    headers
        .get("user-agent")
        .and_then(|v| v.to_str().ok())
        .and_then(|ua| ua.split(['/', ' ']).next())
        .filter(|name| !name.is_empty())
        .unwrap_or("Unspecified")
        .to_owned()
}

fn success_reply(data: Map<String, Value>, ignored: &[String]) -> Reply {
    Reply::Json {
        status: 200,
        body: success(data, ignored),
        headers: Vec::new(),
    }
}

fn error_reply(shared: &Shared, req: &Incoming, e: ApiError, limits: Option<&Decision>) -> Reply {
    if let Some(why) = &e.violation {
        let text = format!("{} {}: {why} ({})", req.method, req.path, e.msg);
        shared.mutate(|s| s.violation(text));
    }
    let mut reply = Reply::Json {
        status: e.status,
        body: e.body(),
        headers: e.headers.clone(),
    };
    add_limit_headers(&mut reply, limits);
    reply
}

fn add_limit_headers(reply: &mut Reply, limits: Option<&Decision>) {
    if let (Reply::Json { headers, .. }, Some(d)) = (reply, limits) {
        headers.push(("x-ratelimit-limit", d.limit.to_string()));
        headers.push(("x-ratelimit-remaining", d.remaining.to_string()));
        headers.push(("x-ratelimit-reset", d.reset.to_string()));
    }
}

/// Validates, records the status, and turns the reply into a response.
async fn finish(shared: &Arc<Shared>, req: &Incoming, reply: Reply) -> Response {
    let (status, content_type, body, headers) = match reply {
        Reply::Hang => std::future::pending().await,
        Reply::Json {
            status,
            body,
            headers,
        } => {
            if shared.config.validate_responses && (200..300).contains(&status) {
                check_schema(shared, req, status, &body).await;
            }
            (status, "application/json", body.to_string(), headers)
        }
        Reply::Canned(c) => (c.status, c.content_type, c.body, c.headers),
    };
    shared.mutate(|state| {
        if let Some(r) = state.requests.get_mut(req.index) {
            r.status = status;
        }
        *state.statuses.entry(status).or_default() += 1;
    });
    let mut response = Response::new(Body::from(body));
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let h = response.headers_mut();
    h.insert("content-type", HeaderValue::from_static(content_type));
    for (name, value) in headers {
        if let Ok(value) = HeaderValue::from_str(&value) {
            h.insert(HeaderName::from_static(name), value);
        }
    }
    response
}

async fn check_schema(shared: &Shared, req: &Incoming, status: u16, body: &Value) {
    let api_path = req
        .path
        .strip_prefix("/api/v1")
        .unwrap_or(&req.path)
        .to_owned();
    let method = req.method.to_lowercase();
    let body = body.clone();
    let verdict = tokio::task::spawn_blocking(move || check(&method, &api_path, status, &body))
        .await
        .unwrap_or_else(|e| Verdict::Unavailable(format!("the validation task failed: {e}")));
    record_verdict(
        shared,
        &format!("{} {} ({status})", req.method, req.path),
        verdict,
    );
}

/// Records a failed or impossible schema check; an impossible one once.
pub(crate) fn record_verdict(shared: &Shared, what: &str, verdict: Verdict) {
    match verdict {
        Verdict::Valid => {}
        Verdict::Invalid(reason) => {
            shared.mutate(|s| s.violation(format!("schema: {what}: {reason}")));
        }
        Verdict::Unavailable(reason) => shared.mutate(|s| {
            let text = format!("schema: responses cannot be checked: {reason}");
            if !s.violations.contains(&text) {
                s.violation(text);
            }
        }),
    }
}
