//! The HTTP side of the fake Asana: one handler takes every request,
//! records it, and runs it through routing, the token, injected faults, the
//! per-minute limit, the shared parameter checks and the endpoint.

use std::sync::Arc;

use axum::extract::Request;
use axum::response::Response;
use serde_json::Value;
use tokio::time::Instant;

use crate::asana::errors::{ApiError, body};
use crate::asana::fields::{compact, project, unmodelled};
use crate::asana::model::{Fault, Route};
use crate::asana::params::opt_fields;
use crate::asana::render::sample;
use crate::asana::routes::{Endpoint, resolve};
use crate::asana::state::{Shared, State};
use crate::asana::{stories, tasks, users};
use crate::common::http::{Incoming, Reply, bearer};

/// The request as the endpoints see it.
pub(crate) struct Ctx<'a> {
    pub req: &'a Incoming,
    /// The caller's user gid.
    pub user: &'a str,
    /// The fake's base URL, standing for `https://app.asana.com/api/1.0`.
    pub base: String,
    /// The `opt_fields` paths, if sent.
    pub fields: Option<Vec<String>>,
}

impl Ctx<'_> {
    /// A full record as the request wants it: projected on `opt_fields`,
    /// else compact (lists) or whole without the opt-in fields.
    pub fn out(&self, full: Value, compact_by_default: bool) -> Value {
        match &self.fields {
            Some(paths) => project(&full, paths),
            None if compact_by_default => compact(&full),
            None => {
                let mut full = full;
                if let Some(map) = full.as_object_mut() {
                    map.remove("html_notes");
                    map.remove("html_text");
                }
                full
            }
        }
    }
}

/// What an endpoint returns: the status and the whole body.
pub(crate) type Outcome = Result<(u16, Value), ApiError>;

/// The single axum handler.
pub(crate) async fn handle(shared: Arc<Shared>, request: Request) -> Response {
    let mut req = Incoming::read(request).await;
    req.index = shared.mutate(|s| {
        let index = s.journal.begin(&req.method, &req.path, &req.query);
        if req.unreadable {
            s.violation(format!(
                "{}: the body is unreadable or too large",
                req.what()
            ));
        }
        index
    });
    let reply = process(&shared, &req).await;
    let status = reply.status();
    shared.mutate(|s| s.journal.finish(req.index, status, false));
    reply.into_response().await
}

fn error_reply(state: &mut State, req: &Incoming, e: ApiError) -> Reply {
    if let Some(why) = &e.violation {
        state.violation(format!("{}: {why}", req.what()));
    }
    let mut reply = Reply::json(e.status, e.body());
    reply.add_headers(e.headers);
    reply
}

async fn process(shared: &Arc<Shared>, req: &Incoming) -> Reply {
    let Some(endpoint) = resolve(&req.method, &req.path) else {
        return shared.mutate(|s| {
            let e =
                ApiError::new(404, "No matching route for request").violating("no such endpoint");
            error_reply(s, req, e)
        });
    };
    let user = match shared.mutate(|s| authenticate(s, req)) {
        Ok(user) => user,
        Err(e) => return shared.mutate(|s| error_reply(s, req, e)),
    };
    let route = endpoint.route();
    let fault = shared.mutate(|s| s.faults.take(|r| r == Route::Any || r == route));
    match fault {
        Some(Fault::Hang) => return Reply::Hang,
        Some(Fault::AcceptThenHang) | None => {}
        Some(other) => return fault_reply(other),
    }
    let token = bearer(&req.headers).map(|(_, t)| t).unwrap_or_default();
    let limited = shared.mutate(|s| s.limiter.check(&token, Instant::now()));
    if let Err(secs) = limited {
        return too_many(secs);
    }
    let reply = shared.mutate(|s| match run(s, req, &endpoint, &user, shared.url()) {
        Ok((status, body)) => Reply::json(status, body),
        Err(e) => error_reply(s, req, e),
    });
    if fault == Some(Fault::AcceptThenHang) {
        return Reply::Hang;
    }
    reply
}

/// The user behind `Authorization: Bearer <PAT>`.
fn authenticate(state: &mut State, req: &Incoming) -> Result<String, ApiError> {
    let Some((scheme, token)) = bearer(&req.headers) else {
        return Err(ApiError::new(401, "Not Authorized").violating("no Authorization header"));
    };
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(ApiError::new(401, "Not Authorized")
            .violating(format!("Authorization scheme {scheme:?} is not Bearer")));
    }
    match state.pats.get(&token).cloned() {
        Some(user) => {
            state.journal.set_user(req.index, &user);
            Ok(user)
        }
        None => Err(ApiError::new(401, "Not Authorized")),
    }
}

fn too_many(secs: u64) -> Reply {
    let mut reply = Reply::json(
        429,
        body(
            429,
            "You have made too many requests recently. Please, be chill.",
        ),
    );
    reply.add_headers(vec![("retry-after", secs.to_string())]);
    reply
}

fn fault_reply(fault: Fault) -> Reply {
    match fault {
        Fault::RateLimit { retry_after } => too_many(retry_after),
        Fault::ServerError => Reply::json(500, body(500, "Server Error")),
        Fault::BadGateway => Reply::json(502, body(502, "Bad Gateway")),
        Fault::Hang | Fault::AcceptThenHang => Reply::Hang,
    }
}

/// The shared checks, then the endpoint.
fn run(
    state: &mut State,
    req: &Incoming,
    endpoint: &Endpoint,
    user: &str,
    base: String,
) -> Outcome {
    let known = endpoint.known_params();
    for (name, _) in &req.query {
        if known.contains(&name.as_str()) || name == "opt_fields" || name == "opt_pretty" {
            continue;
        }
        if name == "offset" && matches!(endpoint, Endpoint::Search(_)) {
            // Search refuses it with a 400 of its own.
            continue;
        }
        let why = if name == "modified_since" {
            "modified_since is only taken by GET /tasks (Asana ignores it here)".to_owned()
        } else {
            format!("unknown query parameter {name} (Asana ignores it)")
        };
        state.violation(format!("{}: {why}", req.what()));
    }
    if req.method == "GET" && !req.body.is_empty() {
        state.violation(format!("{}: a GET with a body", req.what()));
    }
    let (kind, list) = endpoint.kind();
    let fields = opt_fields(req, kind, list)?;
    if let Some(paths) = &fields {
        let missing = unmodelled(&sample(kind), paths);
        if !missing.is_empty() {
            state.violation(format!(
                "{}: opt_fields the fake does not model (left out of the answer): {}",
                req.what(),
                missing.join(", ")
            ));
        }
    }
    let ctx = Ctx {
        req,
        user,
        base,
        fields,
    };
    match endpoint {
        Endpoint::User(gid) => users::user(state, &ctx, gid),
        Endpoint::UserTaskList(gid) => users::user_task_list(state, &ctx, gid),
        Endpoint::UserTaskListTasks(gid) => tasks::user_task_list_tasks(state, &ctx, gid),
        Endpoint::ProjectTasks(gid) => tasks::project_tasks(state, &ctx, gid),
        Endpoint::ProjectSections(gid) => tasks::project_sections(state, &ctx, gid),
        Endpoint::SectionTasks(gid) => tasks::section_tasks(state, &ctx, gid),
        Endpoint::Tasks => tasks::tasks(state, &ctx),
        Endpoint::Task(gid) => tasks::task(state, &ctx, gid),
        Endpoint::Stories(gid) => stories::list(state, &ctx, gid),
        Endpoint::CreateStory(gid) => stories::create(state, &ctx, gid),
        Endpoint::Search(gid) => tasks::search(state, &ctx, gid),
    }
}
