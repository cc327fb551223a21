//! Check runs for a ref and the combined commit status. A ref must name a
//! commit the repository knows (a SHA it has seen or a PR's head branch).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::common::query::last;
use crate::github::errors::ApiError;
use crate::github::paging::{link, paging, slice};
use crate::github::render;
use crate::github::server::{Answer, Ctx, Outcome};
use crate::github::state::{CheckRun, CommitStatus, State};

fn no_commit(status: u16, git_ref: &str) -> ApiError {
    ApiError::new(status, format!("No commit found for SHA: {git_ref}"))
        .violating(format!("ref {git_ref:?} names no commit of the repository"))
}

/// `GET /repos/{o}/{r}/commits/{ref}/check-runs`.
pub(crate) fn check_runs(state: &mut State, ctx: &Ctx<'_>, repo: usize, git_ref: &str) -> Outcome {
    let req = ctx.req;
    let Some(sha) = state.repos[repo].resolve_ref(git_ref) else {
        return Err(no_commit(422, git_ref));
    };
    let p = paging(state, req);
    let status = last(&req.query, "status");
    if let Some(s) = status
        && !["queued", "in_progress", "completed"].contains(&s)
    {
        return Err(ApiError::validation("CheckRun", "status", "invalid")
            .violating(format!("status={s:?}")));
    }
    let filter = last(&req.query, "filter").unwrap_or("latest");
    if !["latest", "all"].contains(&filter) {
        return Err(ApiError::validation("CheckRun", "filter", "invalid")
            .violating(format!("filter={filter:?}")));
    }
    let app_id = match last(&req.query, "app_id") {
        None => None,
        Some(raw) => match raw.parse::<u64>() {
            Ok(id) => Some(id),
            Err(_) => {
                return Err(ApiError::validation("CheckRun", "app_id", "invalid")
                    .violating(format!("app_id={raw:?}")));
            }
        },
    };
    let name = last(&req.query, "check_name");
    let r = &state.repos[repo];
    let mut runs: Vec<CheckRun> = r
        .check_runs
        .iter()
        .filter(|c| c.head_sha == sha)
        .filter(|c| name.is_none_or(|n| c.name == n))
        .filter(|c| status.is_none_or(|s| c.status == s))
        .filter(|c| app_id.is_none_or(|a| c.app_id == a))
        .cloned()
        .collect();
    if filter == "latest" {
        // The newest run of each name and app: a re-run hides the old one.
        let mut newest: BTreeMap<(String, u64), CheckRun> = BTreeMap::new();
        for run in runs {
            let key = (run.name.clone(), run.app_id);
            if newest.get(&key).is_none_or(|old| old.id < run.id) {
                newest.insert(key, run);
            }
        }
        runs = newest.into_values().collect();
    }
    runs.sort_by_key(|r| std::cmp::Reverse(r.id));
    let page: Vec<Value> = slice(&runs, p)
        .iter()
        .map(|c| render::check_run(&ctx.api, r, c))
        .collect();
    let body = json!({"total_count": runs.len(), "check_runs": page});
    Ok(Answer::ok(body).link(link(&ctx.api, req, p, runs.len())))
}

/// The combined state: failure if any latest status is error or failure,
/// pending if there are none or one is pending, success otherwise.
pub(crate) fn combined_state(latest: &[CommitStatus]) -> &'static str {
    if latest
        .iter()
        .any(|s| s.state == "error" || s.state == "failure")
    {
        "failure"
    } else if latest.is_empty() || latest.iter().any(|s| s.state == "pending") {
        "pending"
    } else {
        "success"
    }
}

/// `GET /repos/{o}/{r}/commits/{ref}/status`.
pub(crate) fn combined_status(
    state: &mut State,
    ctx: &Ctx<'_>,
    repo: usize,
    git_ref: &str,
) -> Outcome {
    let req = ctx.req;
    let Some(sha) = state.repos[repo].resolve_ref(git_ref) else {
        return Err(no_commit(404, git_ref));
    };
    let p = paging(state, req);
    let r = state.repos[repo].clone();
    let mut latest: BTreeMap<String, CommitStatus> = BTreeMap::new();
    for s in r.statuses.iter().filter(|s| s.sha == sha) {
        if latest.get(&s.context).is_none_or(|old| old.id < s.id) {
            latest.insert(s.context.clone(), s.clone());
        }
    }
    let latest: Vec<CommitStatus> = latest.into_values().collect();
    let page: Vec<Value> = slice(&latest, p)
        .iter()
        .map(|s| render::status(&ctx.api, &r, s))
        .collect();
    let repository = render::repo(state, &ctx.api, &r);
    let full = r.full_name();
    let body = json!({
        "state": combined_state(&latest),
        "statuses": page,
        "sha": sha,
        "total_count": latest.len(),
        "repository": repository,
        "commit_url": format!("{}/repos/{full}/commits/{sha}", ctx.api),
        "url": format!("{}/repos/{full}/commits/{sha}/status", ctx.api),
    });
    Ok(Answer::ok(body).link(link(&ctx.api, req, p, latest.len())))
}
