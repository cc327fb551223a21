//! Pull requests: get (with `mergeable` null for a few reads after a push),
//! merge (bound to the head sha, refused by the base's branch protection as
//! GitHub refuses it), "was it merged", reviews and review comments.
//!
//! Branch protection answers a merge that does not meet it with 405 and
//! GitHub's message: `Required status check "X" is expected.` (or `is in
//! progress.`, `is failing.`), `At least N approving review(s) is required
//! by reviewers with write access.`, or `Changes were requested by a
//! reviewer with write access.` (the last wording is the fake's: GitHub's
//! was not seen). Asking again for the same head after such a refusal, with
//! nothing changed, is a violation: a client that loops on a 405 would
//! spend the token's quota for an answer it has.

use serde_json::{Value, json};

use crate::common::hash::hex40;
use crate::github::errors::ApiError;
use crate::github::paging::{link, paging, slice};
use crate::github::render;
use crate::github::server::{Answer, Ctx, Outcome, json_body, unknown_members};
use crate::github::state::{Merged, Pull, Repo, State};

const MERGE_DOCS: &str = "https://docs.github.com/rest/pulls/pulls#merge-a-pull-request";

/// `mergeable` as one read sees it, using up one of the null reads.
pub(crate) fn read_mergeable(state: &mut State, repo: usize, number: u64) -> Option<bool> {
    let pull = state.repos[repo].pulls.get_mut(&number)?;
    if pull.null_reads_left > 0 {
        pull.null_reads_left -= 1;
        return None;
    }
    pull.mergeable_value
}

/// `GET /repos/{o}/{r}/pulls/{n}`.
pub(crate) fn get(state: &mut State, ctx: &Ctx<'_>, repo: usize, number: u64) -> Outcome {
    if !state.repos[repo].pulls.contains_key(&number) {
        return Err(ApiError::not_found());
    }
    let mergeable = read_mergeable(state, repo, number);
    Ok(Answer::ok(render::pull(
        state, &ctx.api, repo, number, mergeable,
    )))
}

/// `GET /repos/{o}/{r}/pulls/{n}/merge`: 204 if merged, else 404.
pub(crate) fn check_merged(state: &mut State, repo: usize, number: u64) -> Outcome {
    match state.repos[repo].pulls.get(&number) {
        Some(p) if p.merged.is_some() => Ok(Answer::empty(204)),
        _ => Err(ApiError::not_found()),
    }
}

fn not_mergeable(message: &str) -> ApiError {
    ApiError::new(405, message).docs(MERGE_DOCS)
}

/// `PUT /repos/{o}/{r}/pulls/{n}/merge`.
pub(crate) fn merge(state: &mut State, ctx: &Ctx<'_>, repo: usize, number: u64) -> Outcome {
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
        &["sha", "merge_method", "commit_title", "commit_message"],
    );
    let method = match body.get("merge_method") {
        None => "merge".to_owned(),
        Some(Value::String(m)) if ["merge", "squash", "rebase"].contains(&m.as_str()) => m.clone(),
        Some(other) => {
            return Err(
                ApiError::validation("PullRequest", "merge_method", "invalid").violating(format!(
                    "merge_method {other} is not merge, squash or rebase"
                )),
            );
        }
    };
    let text = |key: &str| -> Result<Option<String>, ApiError> {
        match body.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(ApiError::validation("PullRequest", key, "invalid")
                .violating(format!("{key} is not a string"))),
        }
    };
    let sha = text("sha")?;
    let title = text("commit_title")?;
    text("commit_message")?;
    if sha.is_none() {
        state.violation(format!(
            "{}: a merge without `sha` (Eagle must bind every merge to the head it checked)",
            ctx.what()
        ));
    }
    let spec = state.repos[repo].spec.clone();
    let Some(pull) = state.repos[repo].pulls.get(&number).cloned() else {
        return Err(ApiError::not_found());
    };
    if pull.merged.is_some() || pull.closed {
        return Err(not_mergeable("Pull Request is not mergeable"));
    }
    if pull.draft {
        return Err(not_mergeable("Pull Request is still a draft"));
    }
    if let Some(sha) = &sha
        && *sha != pull.head_sha
    {
        return Err(ApiError::new(
            409,
            "Head branch was modified. Review and try the merge again.",
        )
        .docs(MERGE_DOCS));
    }
    let allowed = match method.as_str() {
        "merge" => spec
            .allow_merge_commit
            .then_some(())
            .ok_or("Merge commits are not allowed on this repository."),
        "squash" => spec
            .allow_squash_merge
            .then_some(())
            .ok_or("Squash merges are not allowed on this repository."),
        _ => spec
            .allow_rebase_merge
            .then_some(())
            .ok_or("Rebase merges are not allowed on this repository."),
    };
    if let Err(message) = allowed {
        return Err(not_mergeable(message));
    }
    if let Some(message) = protection_refusal(&state.repos[repo], &pull) {
        let again =
            pull.protection_refusal.as_ref() == Some(&(pull.head_sha.clone(), message.clone()));
        if again {
            state.violation(format!(
                "{}: a merge asked again after GitHub refused it ({message}), with nothing changed",
                ctx.what()
            ));
        }
        if let Some(p) = state.repos[repo].pulls.get_mut(&number) {
            p.protection_refusal = Some((pull.head_sha.clone(), message.clone()));
        }
        return Err(not_mergeable(&message));
    }
    // A merge does not wait for the background job: while `mergeable` is
    // still unknown (or false) GitHub refuses.
    let computed = if pull.null_reads_left > 0 {
        None
    } else {
        pull.mergeable_value
    };
    if computed != Some(true) {
        return Err(not_mergeable("Pull Request is not mergeable"));
    }
    let now = state.clock.now_ms();
    let commit_sha = hex40(&format!("merge {} {} {method}", pull.head_sha, number));
    let by = ctx.login.to_owned();
    let r = &mut state.repos[repo];
    r.shas.insert(commit_sha.clone());
    if let Some(p) = r.pulls.get_mut(&number) {
        p.closed = true;
        p.updated_at = now;
        p.merged = Some(Merged {
            commit_sha: commit_sha.clone(),
            head_sha: pull.head_sha.clone(),
            method,
            title,
            by,
            at: now,
        });
    }
    Ok(Answer::ok(json!({
        "sha": commit_sha,
        "merged": true,
        "message": "Pull Request successfully merged",
    })))
}

/// Why the base's branch protection refuses merging `pull` now, if it does.
fn protection_refusal(repo: &Repo, pull: &Pull) -> Option<String> {
    let protection = repo.protections.get(&pull.base_ref)?;
    let head = &pull.head_sha;
    for name in &protection.required_checks {
        let run = repo
            .check_runs
            .iter()
            .filter(|c| &c.head_sha == head && &c.name == name)
            .max_by_key(|c| c.id);
        let status = repo
            .statuses
            .iter()
            .filter(|s| &s.sha == head && &s.context == name)
            .max_by_key(|s| s.id);
        let state = match (run, status) {
            (Some(c), _) if c.status != "completed" => "in progress",
            (Some(c), _)
                if matches!(
                    c.conclusion.as_deref(),
                    Some("success" | "neutral" | "skipped")
                ) =>
            {
                continue;
            }
            (Some(_), _) => "failing",
            (None, Some(s)) if s.state == "success" => continue,
            (None, Some(s)) if s.state == "pending" => "in progress",
            (None, Some(_)) => "failing",
            (None, None) => "expected",
        };
        return Some(format!("Required status check \"{name}\" is {state}."));
    }
    // The latest verdict of each reviewer with write access.
    let mut latest: Vec<(&str, &str)> = Vec::new();
    for review in repo.reviews.iter().filter(|r| r.pull == pull.number) {
        let Some(login) = review.login.as_deref() else {
            continue;
        };
        let writer = matches!(
            repo.association(Some(login)).as_str(),
            "OWNER" | "MEMBER" | "COLLABORATOR"
        );
        if !writer
            || !matches!(
                review.state.as_str(),
                "APPROVED" | "CHANGES_REQUESTED" | "DISMISSED"
            )
        {
            continue;
        }
        match latest.iter_mut().find(|(who, _)| *who == login) {
            Some(slot) => slot.1 = &review.state,
            None => latest.push((login, &review.state)),
        }
    }
    if latest
        .iter()
        .any(|(_, state)| *state == "CHANGES_REQUESTED")
    {
        return Some("Changes were requested by a reviewer with write access.".to_owned());
    }
    let approvals = latest.iter().filter(|(_, s)| *s == "APPROVED").count() as u32;
    if approvals < protection.required_approvals {
        let n = protection.required_approvals;
        return Some(if n == 1 {
            "At least 1 approving review is required by reviewers with write access.".to_owned()
        } else {
            format!("At least {n} approving reviews are required by reviewers with write access.")
        });
    }
    None
}

/// `GET /repos/{o}/{r}/pulls/{n}/reviews`: chronological.
pub(crate) fn reviews(state: &mut State, ctx: &Ctx<'_>, repo: usize, number: u64) -> Outcome {
    if !state.repos[repo].pulls.contains_key(&number) {
        return Err(ApiError::not_found());
    }
    let p = paging(state, ctx.req);
    let r = state.repos[repo].clone();
    let all: Vec<_> = r
        .reviews
        .iter()
        .filter(|v| v.pull == number)
        .cloned()
        .collect();
    let page: Vec<Value> = slice(&all, p)
        .iter()
        .map(|v| render::review(state, &ctx.api, &r, v))
        .collect();
    Ok(Answer::ok(Value::Array(page)).link(link(&ctx.api, ctx.req, p, all.len())))
}

/// `GET /repos/{o}/{r}/pulls/{n}/comments`: ascending by id unless sorted.
pub(crate) fn review_comments(
    state: &mut State,
    ctx: &Ctx<'_>,
    repo: usize,
    number: u64,
) -> Outcome {
    if !state.repos[repo].pulls.contains_key(&number) {
        return Err(ApiError::not_found());
    }
    let req = ctx.req;
    let p = paging(state, req);
    let since = crate::github::issues::since(req)?;
    let sort = crate::common::query::last(&req.query, "sort");
    let direction = crate::common::query::last(&req.query, "direction");
    if let Some(sort) = sort
        && !["created", "updated"].contains(&sort)
    {
        return Err(
            ApiError::validation("PullRequestReviewComment", "sort", "invalid")
                .violating(format!("sort={sort:?}")),
        );
    }
    if let Some(direction) = direction
        && !["asc", "desc"].contains(&direction)
    {
        return Err(
            ApiError::validation("PullRequestReviewComment", "direction", "invalid")
                .violating(format!("direction={direction:?}")),
        );
    }
    let r = state.repos[repo].clone();
    let mut all: Vec<_> = r
        .threads
        .iter()
        .filter(|t| t.pull == number)
        .flat_map(|t| t.comments.iter().map(move |c| (t.clone(), c.clone())))
        .filter(|(_, c)| since.is_none_or(|s| c.created_at >= s))
        .collect();
    all.sort_by_key(|(_, c)| c.id);
    // `direction` is ignored without `sort`, as the description says.
    if sort.is_some() && direction == Some("desc") {
        all.reverse();
    }
    let page: Vec<Value> = slice(&all, p)
        .iter()
        .map(|(t, c)| render::review_comment(state, &ctx.api, &r, t, c))
        .collect();
    Ok(Answer::ok(Value::Array(page)).link(link(&ctx.api, req, p, all.len())))
}
