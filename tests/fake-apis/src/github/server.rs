//! The HTTP side of the fake GitHub: one handler takes every request,
//! records it, and runs it through routing, the header rules, the token
//! (a user's, an installation's, or an App's JWT: see `apps.rs`),
//! injected faults, the primary limit and the endpoint, then adds the rate
//! limit headers and, for a GET, the etag (answering 304 for a match).

use std::sync::Arc;

use axum::extract::Request;
use axum::response::Response;
use serde_json::{Value, json};

use crate::common::hash::fnv;
use crate::common::http::{Incoming, Reply};
use crate::github::apps::{self, Caller};
use crate::github::errors::ApiError;
use crate::github::model::{Fault, Resource, Route};
use crate::github::routes::{Endpoint, RepoPath, resolve};
use crate::github::state::{Shared, State};
use crate::github::{actions, checks, graphql, issues, opening, pulls};

/// The only API version the fake answers.
pub(crate) const API_VERSION: &str = "2022-11-28";

/// The request as the endpoints see it.
pub(crate) struct Ctx<'a> {
    pub req: &'a Incoming,
    pub login: &'a str,
    /// The App, when the request authenticated with its JWT.
    pub app: Option<u64>,
    /// The installation, when it authenticated with an installation token.
    pub installation: Option<u64>,
    /// The fake's base URL, standing for `https://api.github.com`.
    pub api: String,
}

impl Ctx<'_> {
    /// `METHOD /path`, for violation texts.
    pub fn what(&self) -> String {
        self.req.what()
    }
}

/// A successful REST answer.
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: u16,
    pub body: Option<Value>,
    pub headers: Vec<(&'static str, String)>,
}

impl Answer {
    /// 200 with a body.
    pub fn ok(body: Value) -> Answer {
        Answer {
            status: 200,
            body: Some(body),
            headers: Vec::new(),
        }
    }

    /// Another status with a body.
    pub fn with_status(status: u16, body: Value) -> Answer {
        Answer {
            status,
            body: Some(body),
            headers: Vec::new(),
        }
    }

    /// A status without a body (204).
    pub fn empty(status: u16) -> Answer {
        Answer {
            status,
            body: None,
            headers: Vec::new(),
        }
    }

    /// Adds a `link` header when there is one.
    pub fn link(mut self, link: Option<String>) -> Answer {
        if let Some(link) = link {
            self.headers.push(("link", link));
        }
        self
    }
}

/// What an endpoint returns.
pub(crate) type Outcome = Result<Answer, ApiError>;

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
    shared.mutate(|s| s.journal.finish(req.index, status, status == 304));
    reply.into_response().await
}

async fn process(shared: &Arc<Shared>, req: &Incoming) -> Reply {
    let Some(endpoint) = resolve(&req.method, &req.path) else {
        return shared.mutate(|s| {
            s.violation(format!(
                "{}: no such endpoint (GitHub answers 404)",
                req.what()
            ));
            finish_error(s, Resource::Core, ApiError::not_found())
        });
    };
    let graphql = endpoint == Endpoint::GraphQl;
    let resource = if graphql {
        Resource::GraphQl
    } else {
        Resource::Core
    };
    if let Some(reply) = shared.mutate(|s| check_headers(s, req, graphql, resource)) {
        return reply;
    }
    let caller = match shared.mutate(|s| authenticate(s, req, &endpoint, resource)) {
        Ok(caller) => caller,
        Err(reply) => return reply,
    };
    let login = caller.login;
    let route = endpoint.route();
    let fault = shared.mutate(|s| s.faults.take(|r| r == Route::Any || r == route));
    match fault {
        Some(Fault::Hang) => return Reply::Hang,
        Some(Fault::AcceptThenHang) | None => {}
        Some(other) => return shared.mutate(|s| fault_reply(s, other, resource, graphql)),
    }
    let ctx = Ctx {
        req,
        login: &login,
        app: caller.app,
        installation: caller.installation,
        api: shared.url(),
    };
    let reply = shared.mutate(|s| {
        if s.quotas.budget(resource).remaining() == 0 {
            return primary_refusal(s, resource, &login);
        }
        if graphql {
            graphql::handle(s, &ctx)
        } else {
            rest(s, &ctx, &endpoint)
        }
    });
    if fault == Some(Fault::AcceptThenHang) {
        return Reply::Hang;
    }
    reply
}

/// User-Agent, API version and media type.
fn check_headers(
    state: &mut State,
    req: &Incoming,
    graphql: bool,
    resource: Resource,
) -> Option<Reply> {
    if req
        .header("user-agent")
        .is_none_or(|ua| ua.trim().is_empty())
    {
        state.violation(format!("{}: no User-Agent header", req.what()));
        let mut reply = Reply::json(
            403,
            json!({"message": "Request forbidden by administrative rules. Please make sure your request has a User-Agent header (https://docs.github.com/en/rest/overview/resources-in-the-rest-api#user-agent-required). Check https://developer.github.com for other possible causes."}),
        );
        reply.add_headers(state.quotas.headers(resource));
        return Some(reply);
    }
    if graphql {
        // The version header and the media type are REST matters.
        return None;
    }
    match req.header("x-github-api-version") {
        None => state.violation(format!(
            "{}: no X-GitHub-Api-Version header (GitHub would pick a default version)",
            req.what()
        )),
        Some(API_VERSION) => {}
        Some(other) => {
            state.violation(format!(
                "{}: X-GitHub-Api-Version {other:?} is not {API_VERSION}",
                req.what()
            ));
            let e = ApiError::new(
                400,
                format!(
                    "The version you specified in the \"X-GitHub-Api-Version\" request header, \"{other}\", is not a supported version. The following versions are currently supported: \"{API_VERSION}\"."
                ),
            );
            return Some(finish_error(state, resource, e));
        }
    }
    match req.header("accept") {
        None => state.violation(format!(
            "{}: no Accept header (send application/vnd.github+json)",
            req.what()
        )),
        Some(accept) if accept.contains("application/vnd.github+json") => {}
        Some(other) => state.violation(format!(
            "{}: Accept {other:?} is not application/vnd.github+json",
            req.what()
        )),
    }
    None
}

/// Who is behind `Authorization: Bearer <token>`: a user's token, an
/// installation token, or (on the App endpoints only) an App's JWT.
fn authenticate(
    state: &mut State,
    req: &Incoming,
    endpoint: &Endpoint,
    resource: Resource,
) -> Result<Caller, Reply> {
    let graphql = *endpoint == Endpoint::GraphQl;
    let docs = if graphql {
        "https://docs.github.com/graphql"
    } else {
        crate::github::errors::DOCS
    };
    let Some((scheme, token)) = crate::common::http::bearer(&req.headers) else {
        state.violation(format!("{}: no Authorization header", req.what()));
        let message = if graphql {
            "This endpoint requires you to be authenticated."
        } else {
            "Requires authentication"
        };
        return Err(finish_error(
            state,
            resource,
            ApiError::new(401, message).docs(docs),
        ));
    };
    if !scheme.eq_ignore_ascii_case("bearer") {
        state.violation(format!(
            "{}: Authorization scheme {scheme:?} is not Bearer",
            req.what()
        ));
    }
    let bad_credentials = |state: &mut State| {
        finish_error(
            state,
            resource,
            ApiError::new(401, "Bad credentials").docs(docs),
        )
    };
    if endpoint.takes_jwt() {
        return match apps::verify_jwt(state, &token) {
            Ok(app_id) => {
                let login = state.apps.apps[&app_id].slug.clone();
                state.journal.set_user(req.index, &login);
                Ok(Caller {
                    login,
                    app: Some(app_id),
                    installation: None,
                })
            }
            Err(e) => {
                if let Some(why) = &e.violation {
                    state.violation(format!(
                        "{}: {why} ({} {})",
                        req.what(),
                        e.status,
                        e.message
                    ));
                }
                Err(finish_error(state, resource, e))
            }
        };
    }
    if apps::looks_like_jwt(&token) {
        state.violation(format!(
            "{}: an App's JWT sent as a token (it authenticates only /app/… and …/installation)",
            req.what()
        ));
        return Err(bad_credentials(state));
    }
    if let Some(login) = state.tokens.get(&token).cloned() {
        state.journal.set_user(req.index, &login);
        return Ok(Caller::user(login));
    }
    match apps::installation_caller(state, &token) {
        Some(Ok(caller)) => {
            state.journal.set_user(req.index, &caller.login);
            Ok(caller)
        }
        // An expired installation token, or no token GitHub issued.
        Some(Err(())) | None => Err(bad_credentials(state)),
    }
}

/// The answer to an injected fault that answers at once.
fn fault_reply(state: &mut State, fault: Fault, resource: Resource, graphql: bool) -> Reply {
    let mut reply = match fault {
        Fault::SecondaryLimit {
            status,
            retry_after,
        } => {
            let message = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID 0000:1111:2222222:3333333:44444444.";
            let body = if graphql && status == 200 {
                json!({"errors": [{"type": "RATE_LIMITED", "message": message}]})
            } else {
                json!({
                    "message": message,
                    "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits",
                    "status": status.to_string(),
                })
            };
            let mut reply = Reply::json(status, body);
            if let Some(secs) = retry_after {
                reply.add_headers(vec![("retry-after", secs.to_string())]);
            }
            reply
        }
        Fault::ServerError => Reply::json(500, json!({"message": "Server Error"})),
        Fault::BadGateway => {
            return Reply::Text {
                status: 502,
                content_type: "text/html",
                body: "<html><head><title>502 Bad Gateway</title></head><body><h1>Unicorn! &middot; GitHub</h1><p>We had issues producing the response to your request.</p></body></html>\n".to_owned(),
            };
        }
        Fault::Hang | Fault::AcceptThenHang => Reply::Hang,
    };
    reply.add_headers(state.quotas.headers(resource));
    reply
}

/// The answer once the primary limit is spent: 403 or 429 for REST, 200
/// with a `RATE_LIMITED` error for GraphQL.
fn primary_refusal(state: &mut State, resource: Resource, login: &str) -> Reply {
    let id = state.user_id(login);
    let mut reply = match resource {
        Resource::GraphQl => Reply::json(
            200,
            json!({"errors": [{"type": "RATE_LIMITED", "message": format!("API rate limit exceeded for user ID {id}.")}]}),
        ),
        Resource::Core => {
            let status = state.quotas.budget(resource).status;
            Reply::json(
                status,
                json!({
                    "message": format!("API rate limit exceeded for user ID {id}. If you reach out to GitHub Support for help, please include the request ID 0000:1111:2222222:3333333:44444444."),
                    "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
                    "status": status.to_string(),
                }),
            )
        }
    };
    reply.add_headers(state.quotas.headers(resource));
    reply
}

/// An error reply with the rate limit headers; records its violation.
pub(crate) fn finish_error(state: &mut State, resource: Resource, e: ApiError) -> Reply {
    let mut reply = Reply::json(e.status, e.body());
    reply.add_headers(state.quotas.headers(resource));
    reply
}

/// Runs a REST endpoint, then charges it and adds the etag and headers.
fn rest(state: &mut State, ctx: &Ctx<'_>, endpoint: &Endpoint) -> Reply {
    let req = ctx.req;
    let known = endpoint.known_params();
    let unknown: Vec<&str> = req
        .query
        .iter()
        .map(|(k, _)| k.as_str())
        .filter(|k| !known.contains(k))
        .collect();
    if !unknown.is_empty() {
        state.violation(format!(
            "{}: unknown query parameter(s) {} (GitHub ignores them)",
            req.what(),
            unknown.join(", ")
        ));
    }
    if req.method == "GET" && !req.body.is_empty() {
        state.violation(format!("{}: a GET with a body", req.what()));
    }
    let outcome = match (ctx.installation, endpoint.repo()) {
        // GitHub hides what an installation does not hold.
        (Some(installation), Some(repo)) if !apps::holds(state, installation, repo) => {
            Err(ApiError::not_found())
        }
        _ => dispatch(state, ctx, endpoint),
    };
    let resource = Resource::Core;
    let answer = match outcome {
        Ok(answer) => answer,
        Err(e) => {
            if let Some(why) = &e.violation {
                state.violation(format!(
                    "{}: {why} ({} {})",
                    req.what(),
                    e.status,
                    e.message
                ));
            }
            state.quotas.charge(resource, 1);
            return finish_error(state, resource, e);
        }
    };
    let mut headers = answer.headers;
    if req.method == "GET" && answer.status == 200 {
        let body_text = answer
            .body
            .as_ref()
            .map(Value::to_string)
            .unwrap_or_default();
        let etag = format!(
            "W/\"{:016x}{:016x}\"",
            fnv(body_text.as_bytes(), 0),
            fnv(body_text.as_bytes(), 7)
        );
        if if_none_match(state, req, &etag) {
            let mut headers = vec![("etag", etag)];
            headers.extend(state.quotas.headers(resource));
            return Reply::Empty {
                status: 304,
                headers,
            };
        }
        headers.push(("etag", etag));
    }
    state.quotas.charge(resource, 1);
    headers.extend(state.quotas.headers(resource));
    match answer.body {
        Some(body) => Reply::Json {
            status: answer.status,
            body,
            headers,
        },
        None => Reply::Empty {
            status: answer.status,
            headers,
        },
    }
}

/// Whether `If-None-Match` names `etag`. The values must be quoted (an
/// unquoted one never matches and is a violation); `W/` is optional and
/// compared weakly, as GitHub does.
fn if_none_match(state: &mut State, req: &Incoming, etag: &str) -> bool {
    let Some(header) = req.header("if-none-match") else {
        return false;
    };
    let strip = |tag: &str| tag.trim().trim_start_matches("W/").to_owned();
    let ours = strip(etag);
    let mut matched = false;
    for tag in header.split(',') {
        let tag = tag.trim();
        if tag == "*" {
            matched = true;
            continue;
        }
        let bare = strip(tag);
        if !(bare.len() >= 2 && bare.starts_with('"') && bare.ends_with('"')) {
            state.violation(format!(
                "{}: If-None-Match {tag:?} is not a quoted etag",
                req.what()
            ));
            continue;
        }
        matched |= bare == ours;
    }
    matched
}

fn dispatch(state: &mut State, ctx: &Ctx<'_>, endpoint: &Endpoint) -> Outcome {
    match endpoint {
        Endpoint::GetPull(repo, n) => pulls::get(state, ctx, repo_index(state, repo)?, *n),
        Endpoint::Merge(repo, n) => pulls::merge(state, ctx, repo_index(state, repo)?, *n),
        Endpoint::CheckMerged(repo, n) => pulls::check_merged(state, repo_index(state, repo)?, *n),
        Endpoint::Reviews(repo, n) => pulls::reviews(state, ctx, repo_index(state, repo)?, *n),
        Endpoint::ReviewComments(repo, n) => {
            pulls::review_comments(state, ctx, repo_index(state, repo)?, *n)
        }
        Endpoint::CheckRuns(repo, git_ref) => {
            checks::check_runs(state, ctx, repo_index(state, repo)?, git_ref)
        }
        Endpoint::CombinedStatus(repo, git_ref) => {
            checks::combined_status(state, ctx, repo_index(state, repo)?, git_ref)
        }
        Endpoint::WorkflowRuns(repo) => actions::runs(state, ctx, repo_index(state, repo)?),
        Endpoint::Rerun(repo, id) => actions::rerun(state, ctx, repo_index(state, repo)?, *id),
        Endpoint::Dispatch(repo, workflow) => {
            actions::dispatch(state, ctx, repo_index(state, repo)?, workflow)
        }
        Endpoint::AddLabels(repo, n) => {
            issues::add_labels(state, ctx, repo_index(state, repo)?, *n)
        }
        Endpoint::ListIssueComments(repo, n) => {
            issues::list_comments(state, ctx, repo_index(state, repo)?, *n)
        }
        Endpoint::CreateIssueComment(repo, n) => {
            issues::create_comment(state, ctx, repo_index(state, repo)?, *n)
        }
        Endpoint::CreatePull(repo) => opening::create(state, ctx, repo_index(state, repo)?),
        Endpoint::ListPulls(repo) => opening::list(state, ctx, repo_index(state, repo)?),
        Endpoint::GetUser if ctx.installation.is_some() => {
            Err(ApiError::new(403, "Resource not accessible by integration"))
        }
        Endpoint::GetUser => opening::user(state, ctx),
        Endpoint::InstallationToken(id) => apps::access_token(state, ctx, *id),
        Endpoint::RepoInstallation(repo) => apps::repo_installation(state, ctx, repo),
        Endpoint::AppInstallations => apps::list(state, ctx),
        Endpoint::GetApp => apps::get(state, ctx),
        Endpoint::GraphQl => Err(ApiError::not_found()),
    }
}

fn repo_index(state: &State, repo: &RepoPath) -> Result<usize, ApiError> {
    state
        .repo_index(&repo.owner, &repo.name)
        .ok_or_else(ApiError::not_found)
}

/// The JSON body of a write. An empty body counts as `{}`; a body that is
/// not JSON gets GitHub's 400 and is a violation.
pub(crate) fn json_body(state: &mut State, ctx: &Ctx<'_>) -> Result<Value, ApiError> {
    let req = ctx.req;
    if req.body.is_empty() {
        return Ok(json!({}));
    }
    if !req
        .header("content-type")
        .is_some_and(|t| t.starts_with("application/json"))
    {
        state.violation(format!(
            "{}: a JSON body without Content-Type: application/json",
            req.what()
        ));
    }
    serde_json::from_slice(&req.body)
        .map_err(|_| ApiError::new(400, "Problems parsing JSON").violating("the body is not JSON"))
}

/// Records a violation for body members the endpoint does not take.
pub(crate) fn unknown_members(state: &mut State, ctx: &Ctx<'_>, body: &Value, known: &[&str]) {
    if let Some(map) = body.as_object() {
        let unknown: Vec<&str> = map
            .keys()
            .map(String::as_str)
            .filter(|k| !known.contains(k))
            .collect();
        if !unknown.is_empty() {
            state.violation(format!(
                "{}: unknown body member(s) {}",
                ctx.what(),
                unknown.join(", ")
            ));
        }
    }
}
