//! Issue endpoints on pull requests: adding labels and the conversation
//! comments. Every PR is an issue; the fake has no issues that are not PRs.

use serde_json::Value;

use crate::common::clock::parse_iso;
use crate::common::http::Incoming;
use crate::common::query::last;
use crate::github::errors::ApiError;
use crate::github::paging::{link, paging, slice};
use crate::github::render;
use crate::github::server::{Answer, Ctx, Outcome, json_body, unknown_members};
use crate::github::state::{Comment, State};

/// The `since` parameter: an ISO 8601 timestamp. GitHub rejects one it
/// cannot read with 422.
pub(crate) fn since(req: &Incoming) -> Result<Option<i64>, ApiError> {
    match last(&req.query, "since") {
        None => Ok(None),
        Some(raw) => match parse_iso(raw) {
            Some(ms) => Ok(Some(ms)),
            None => Err(ApiError::validation("Issue", "since", "invalid")
                .violating(format!("since={raw:?} is not ISO 8601"))),
        },
    }
}

/// The label names of an add-labels body: `{"labels": [...]}` with names or
/// `{name}` objects, or the bare array, as the description's `oneOf` allows.
fn label_names(body: &Value) -> Option<Vec<String>> {
    let list = match body {
        Value::Object(map) => map.get("labels")?,
        Value::Array(_) => body,
        _ => return None,
    };
    list.as_array()?
        .iter()
        .map(|item| match item {
            Value::String(name) => Some(name.clone()),
            Value::Object(o) => o.get("name")?.as_str().map(str::to_owned),
            _ => None,
        })
        .collect()
}

/// `POST /repos/{o}/{r}/issues/{n}/labels`: 200 with every label now on it.
pub(crate) fn add_labels(state: &mut State, ctx: &Ctx<'_>, repo: usize, number: u64) -> Outcome {
    if !state.repos[repo].pulls.contains_key(&number) {
        return Err(ApiError::not_found());
    }
    let body = json_body(state, ctx)?;
    if body.is_object() {
        unknown_members(state, ctx, &body, &["labels"]);
    }
    let names = match label_names(&body) {
        Some(names) if !names.is_empty() && names.iter().all(|n| !n.trim().is_empty()) => names,
        _ => {
            return Err(ApiError::validation("Label", "labels", "missing_field")
                .violating("labels must be a non-empty list of names"));
        }
    };
    let now = state.clock.now_ms();
    let r = &mut state.repos[repo];
    let full = r.full_name();
    let Some(pull) = r.pulls.get_mut(&number) else {
        return Err(ApiError::not_found());
    };
    for name in names {
        // Label names compare case-insensitively on GitHub.
        if !pull.labels.iter().any(|l| l.eq_ignore_ascii_case(&name)) {
            pull.labels.push(name);
        }
    }
    pull.updated_at = now;
    let labels: Vec<Value> = pull
        .labels
        .iter()
        .map(|l| render::label(&ctx.api, &full, l))
        .collect();
    Ok(Answer::ok(Value::Array(labels)))
}

/// `GET /repos/{o}/{r}/issues/{n}/comments`: ascending by id.
pub(crate) fn list_comments(state: &mut State, ctx: &Ctx<'_>, repo: usize, number: u64) -> Outcome {
    if !state.repos[repo].pulls.contains_key(&number) {
        return Err(ApiError::not_found());
    }
    let p = paging(state, ctx.req);
    let since = since(ctx.req)?;
    let r = state.repos[repo].clone();
    let all: Vec<Comment> = r
        .comments
        .iter()
        .filter(|c| c.issue == number && since.is_none_or(|s| c.created_at >= s))
        .cloned()
        .collect();
    let page: Vec<Value> = slice(&all, p)
        .iter()
        .map(|c| render::comment(state, &ctx.api, &r, c))
        .collect();
    Ok(Answer::ok(Value::Array(page)).link(link(&ctx.api, ctx.req, p, all.len())))
}

/// `POST /repos/{o}/{r}/issues/{n}/comments` with `{body}`: 201.
pub(crate) fn create_comment(
    state: &mut State,
    ctx: &Ctx<'_>,
    repo: usize,
    number: u64,
) -> Outcome {
    if !state.repos[repo].pulls.contains_key(&number) {
        return Err(ApiError::not_found());
    }
    let body = json_body(state, ctx)?;
    unknown_members(state, ctx, &body, &["body"]);
    let Some(text) = body
        .get("body")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    else {
        return Err(
            ApiError::validation("IssueComment", "body", "missing_field")
                .violating("`body` is missing or empty"),
        );
    };
    let id = state.new_id();
    let now = state.clock.now_ms();
    let comment = Comment {
        id,
        issue: number,
        login: Some(ctx.login.to_owned()),
        body: text.to_owned(),
        created_at: now,
    };
    state.repos[repo].comments.push(comment.clone());
    let r = state.repos[repo].clone();
    let value = render::comment(state, &ctx.api, &r, &comment);
    let mut answer = Answer::with_status(201, value);
    answer.headers.push((
        "location",
        format!("{}/repos/{}/issues/comments/{id}", ctx.api, r.full_name()),
    ));
    Ok(answer)
}
