//! Opening and listing pull requests, and the authenticated user:
//! `POST /repos/{o}/{r}/pulls` (docs: rest/pulls/pulls#create-a-pull-request),
//! `GET /repos/{o}/{r}/pulls` (#list-pull-requests) and `GET /user`
//! (rest/users/users#get-the-authenticated-user).
//!
//! Creating follows the documented validation: `head` and `base` are
//! required and must be branches of the repository (422 `Validation Failed`,
//! `field` `head`/`base`, `code` `invalid`), `title` is required, and a
//! second open PR from the same head is refused with 422 `A pull request
//! already exists for owner:branch.`. The head's commit is the branch's, as
//! pushed ([`crate::FakeGitHub::push_branch`]).

use serde_json::{Value, json};

use crate::common::query::last;
use crate::github::errors::ApiError;
use crate::github::paging::{link, paging, slice};
use crate::github::render;
use crate::github::server::{Answer, Ctx, Outcome, json_body, unknown_members};
use crate::github::state::{Pull, State};

/// `POST /repos/{o}/{r}/pulls`: 201 with the `pull-request`.
pub(crate) fn create(state: &mut State, ctx: &Ctx<'_>, repo: usize) -> Outcome {
    let body = json_body(state, ctx)?;
    if !body.is_object() {
        return Err(
            ApiError::new(400, "Problems parsing JSON").violating("the body is not a JSON object")
        );
    }
    unknown_members(
        state,
        ctx,
        &body,
        &[
            "title",
            "head",
            "head_repo",
            "base",
            "body",
            "maintainer_can_modify",
            "draft",
            "issue",
        ],
    );
    let text = |name: &str| body.get(name).and_then(Value::as_str).map(str::to_owned);
    let Some(title) = text("title").filter(|t| !t.trim().is_empty()) else {
        return Err(
            ApiError::validation("PullRequest", "title", "missing_field")
                .violating("`title` is missing or empty"),
        );
    };
    let (Some(head), Some(base)) = (text("head"), text("base")) else {
        return Err(ApiError::validation("PullRequest", "head", "missing_field")
            .violating("`head` and `base` are required"));
    };
    if let Some(draft) = body.get("draft")
        && !draft.is_boolean()
    {
        return Err(ApiError::validation("PullRequest", "draft", "invalid")
            .violating("`draft` is not a boolean"));
    }
    let r = &state.repos[repo];
    // `head` may be `owner:branch`; only the repository's own owner here.
    let branch = match head.split_once(':') {
        Some((owner, branch)) if owner.eq_ignore_ascii_case(&r.owner) => branch.to_owned(),
        Some(_) => return Err(ApiError::validation("PullRequest", "head", "invalid")),
        None => head.clone(),
    };
    let Some(head_sha) = r.branches.get(&branch).cloned() else {
        return Err(ApiError::validation("PullRequest", "head", "invalid"));
    };
    if !r.has_branch(&base) {
        return Err(ApiError::validation("PullRequest", "base", "invalid"));
    }
    if r.pulls
        .values()
        .any(|p| p.head_ref == branch && p.head_repo.is_none() && !p.closed)
    {
        let mut e = ApiError::new(422, "Validation Failed");
        e.errors = Some(json!([{
            "resource": "PullRequest",
            "code": "custom",
            "message": format!("A pull request already exists for {}:{branch}.", r.owner),
        }]));
        return Err(e);
    }
    let id = state.new_id();
    let node_id = state.new_node_id("PR");
    let now = state.clock.now_ms();
    let null_reads = state.mergeable_null_reads;
    let author = ctx.login.to_owned();
    state.user_id(&author);
    let r = &mut state.repos[repo];
    let number = r.next_number;
    r.next_number += 1;
    r.shas.insert(head_sha.clone());
    r.pulls.insert(
        number,
        Pull {
            number,
            id,
            node_id,
            author,
            title,
            head_ref: branch,
            head_repo: None,
            head_sha,
            base_ref: base,
            draft: body.get("draft").and_then(Value::as_bool).unwrap_or(false),
            labels: Vec::new(),
            closed: false,
            merged: None,
            mergeable_value: Some(true),
            body: text("body"),
            null_reads_left: null_reads,
            protection_refusal: None,
            created_at: now,
            updated_at: now,
        },
    );
    let full = state.repos[repo].full_name();
    let value = render::pull(state, &ctx.api, repo, number, None);
    let mut answer = Answer::with_status(201, value);
    answer.headers.push((
        "location",
        format!("{}/repos/{full}/pulls/{number}", ctx.api),
    ));
    Ok(answer)
}

/// What a `pull-request-simple` (a list's item) lacks of a `pull-request`.
const SIMPLE_LACKS: &[&str] = &[
    "merged",
    "mergeable",
    "rebaseable",
    "mergeable_state",
    "merged_by",
    "comments",
    "review_comments",
    "maintainer_can_modify",
    "commits",
    "additions",
    "deletions",
    "changed_files",
];

/// `GET /repos/{o}/{r}/pulls`: `state` (default `open`), `head`
/// (`owner:branch`), `base`; newest first.
pub(crate) fn list(state: &mut State, ctx: &Ctx<'_>, repo: usize) -> Outcome {
    let p = paging(state, ctx.req);
    let wanted = last(&ctx.req.query, "state").unwrap_or("open").to_owned();
    if !["open", "closed", "all"].contains(&wanted.as_str()) {
        return Err(ApiError::validation("PullRequest", "state", "invalid")
            .violating(format!("state={wanted:?} is not open, closed or all")));
    }
    let head = last(&ctx.req.query, "head").map(str::to_owned);
    if let Some(head) = &head
        && !head.contains(':')
    {
        state.violation(format!(
            "{}: head={head:?} is not user:ref-name (GitHub ignores it)",
            ctx.what()
        ));
    }
    let base = last(&ctx.req.query, "base").map(str::to_owned);
    let r = &state.repos[repo];
    let mut numbers: Vec<u64> = r
        .pulls
        .values()
        .filter(|pull| match wanted.as_str() {
            "open" => !pull.closed,
            "closed" => pull.closed,
            _ => true,
        })
        .filter(|pull| {
            // `owner:branch` names the owner of the head's repository: a
            // fork's PR is its owner's, not the repository's.
            let head_owner = match &pull.head_repo {
                Some(fork) => fork.split_once('/').map_or(fork.as_str(), |(o, _)| o),
                None => r.owner.as_str(),
            };
            head.as_deref().is_none_or(|h| match h.split_once(':') {
                Some((owner, branch)) => {
                    owner.eq_ignore_ascii_case(head_owner) && branch == pull.head_ref
                }
                None => true,
            })
        })
        .filter(|pull| base.as_deref().is_none_or(|b| b == pull.base_ref))
        .map(|pull| pull.number)
        .collect();
    numbers.reverse();
    let page = slice(&numbers, p);
    let mut values = Vec::new();
    for n in &page {
        // A `pull-request-simple`: no mergeability, no counts.
        let mut value = render::pull(state, &ctx.api, repo, *n, None);
        if let Some(map) = value.as_object_mut() {
            for key in SIMPLE_LACKS {
                map.remove(*key);
            }
        }
        values.push(value);
    }
    Ok(Answer::ok(Value::Array(values)).link(link(&ctx.api, ctx.req, p, numbers.len())))
}

/// `GET /user`: the token's user.
pub(crate) fn user(state: &mut State, ctx: &Ctx<'_>) -> Outcome {
    let value = render::user(state, &ctx.api, Some(ctx.login));
    Ok(Answer::ok(value))
}
