//! GitHub Actions: listing workflow runs, re-running one (which replays its
//! original commit), and dispatching a workflow.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::common::query::last;
use crate::github::errors::ApiError;
use crate::github::model::{ACTIONS_APP_ID, Dispatch, Rerun};
use crate::github::paging::{link, paging, slice};
use crate::github::render;
use crate::github::server::{Answer, Ctx, Outcome, json_body, unknown_members};
use crate::github::state::{CheckRun, State, WorkflowRun};

/// The `status` filter's values: a status or a conclusion.
const RUN_STATUS_FILTER: &[&str] = &[
    "completed",
    "action_required",
    "cancelled",
    "failure",
    "neutral",
    "skipped",
    "stale",
    "success",
    "timed_out",
    "in_progress",
    "queued",
    "requested",
    "waiting",
    "pending",
];

fn invalid(field: &str, value: &str) -> ApiError {
    ApiError::validation("WorkflowRun", field, "invalid").violating(format!("{field}={value:?}"))
}

/// `GET /repos/{o}/{r}/actions/runs`: newest first.
pub(crate) fn runs(state: &mut State, ctx: &Ctx<'_>, repo: usize) -> Outcome {
    let req = ctx.req;
    let p = paging(state, req);
    let q = |name: &str| last(&req.query, name);
    if let Some(s) = q("status")
        && !RUN_STATUS_FILTER.contains(&s)
    {
        return Err(invalid("status", s));
    }
    let exclude_pulls = match q("exclude_pull_requests") {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => return Err(invalid("exclude_pull_requests", other)),
    };
    let suite = match q("check_suite_id") {
        None => None,
        Some(raw) => Some(
            raw.parse::<u64>()
                .map_err(|_| invalid("check_suite_id", raw))?,
        ),
    };
    if q("created").is_some() {
        state.violation(format!(
            "{}: the fake does not model the `created` filter",
            req.what()
        ));
    }
    let r = state.repos[repo].clone();
    let mut runs: Vec<WorkflowRun> = r
        .runs
        .iter()
        .filter(|w| q("branch").is_none_or(|b| w.head_branch == b))
        .filter(|w| q("head_sha").is_none_or(|s| w.head_sha == s))
        .filter(|w| q("event").is_none_or(|e| w.event == e))
        .filter(|w| q("actor").is_none_or(|a| w.actor == a))
        .filter(|w| suite.is_none_or(|s| w.suite_id == s))
        .filter(|w| q("status").is_none_or(|s| w.status == s || w.conclusion.as_deref() == Some(s)))
        .cloned()
        .collect();
    runs.sort_by_key(|r| std::cmp::Reverse(r.id));
    let page: Vec<Value> = slice(&runs, p)
        .iter()
        .map(|w| render::workflow_run(state, &ctx.api, &r, w, !exclude_pulls))
        .collect();
    let body = json!({"total_count": runs.len(), "workflow_runs": page});
    Ok(Answer::ok(body).link(link(&ctx.api, req, p, runs.len())))
}

/// `POST /repos/{o}/{r}/actions/runs/{run_id}/rerun`: 201 `{}`.
pub(crate) fn rerun(state: &mut State, ctx: &Ctx<'_>, repo: usize, run_id: u64) -> Outcome {
    let body = json_body(state, ctx)?;
    unknown_members(state, ctx, &body, &["enable_debug_logging"]);
    if body
        .get("enable_debug_logging")
        .is_some_and(|v| !v.is_boolean())
    {
        return Err(invalid(
            "enable_debug_logging",
            &body["enable_debug_logging"].to_string(),
        ));
    }
    let Some(index) = state.repos[repo].runs.iter().position(|w| w.id == run_id) else {
        return Err(ApiError::not_found());
    };
    let run = state.repos[repo].runs[index].clone();
    if run.status != "completed" {
        return Err(ApiError::new(403, "This workflow is already running"));
    }
    let now = state.clock.now_ms();
    let check_run_id = if state.rerun_creates_check_run {
        let id = state.new_id();
        let name = state.repos[repo]
            .workflows
            .iter()
            .find(|w| w.id == run.workflow_id)
            .map_or_else(|| "build".to_owned(), |w| w.name.clone());
        state.repos[repo].check_runs.push(CheckRun {
            id,
            name,
            head_sha: run.head_sha.clone(),
            status: "queued".to_owned(),
            conclusion: None,
            app_id: ACTIONS_APP_ID,
            suite_id: run.suite_id,
            details_url: None,
            started_at: now,
            completed_at: None,
        });
        Some(id)
    } else {
        None
    };
    let r = &mut state.repos[repo];
    let full = r.full_name();
    let w = &mut r.runs[index];
    w.run_attempt += 1;
    w.status = "queued".to_owned();
    w.conclusion = None;
    w.updated_at = now;
    state.reruns.push(Rerun {
        repo: full,
        run_id,
        head_sha: run.head_sha,
        check_run_id,
    });
    Ok(Answer::with_status(201, json!({})))
}

/// `POST /repos/{o}/{r}/actions/workflows/{id}/dispatches`: 204.
pub(crate) fn dispatch(state: &mut State, ctx: &Ctx<'_>, repo: usize, workflow: &str) -> Outcome {
    let body = json_body(state, ctx)?;
    if !body.is_object() {
        return Err(
            ApiError::new(400, "Problems parsing JSON").violating("the body is not a JSON object")
        );
    }
    unknown_members(state, ctx, &body, &["ref", "inputs", "return_run_details"]);
    let Some(spec) = state.repos[repo].workflow(workflow).cloned() else {
        return Err(ApiError::not_found());
    };
    if body.get("return_run_details").is_some() {
        state.violation(format!(
            "{}: the fake does not model return_run_details",
            ctx.what()
        ));
    }
    let Some(git_ref) = body.get("ref").and_then(Value::as_str) else {
        return Err(
            ApiError::new(422, "Invalid request.\n\n\"ref\" wasn't supplied.")
                .violating("`ref` is missing or not a string"),
        );
    };
    let inputs: BTreeMap<String, Value> = match body.get("inputs") {
        None | Some(Value::Null) => BTreeMap::new(),
        Some(Value::Object(map)) => map.clone().into_iter().collect(),
        Some(_) => {
            return Err(ApiError::new(
                422,
                "Invalid request.\n\nFor 'properties/inputs', is not an object.",
            )
            .violating("`inputs` is not an object"));
        }
    };
    if inputs.len() > 25 {
        return Err(ApiError::new(
            422,
            "Invalid request.\n\nFor 'properties/inputs', maximum of 25 properties allowed.",
        )
        .violating("more than 25 inputs"));
    }
    if !spec.dispatchable {
        return Err(
            ApiError::new(422, "Workflow does not have 'workflow_dispatch' trigger").violating(
                format!("workflow {} has no workflow_dispatch trigger", spec.path),
            ),
        );
    }
    let r = &state.repos[repo];
    if !r.has_branch(git_ref) && r.resolve_ref(git_ref).is_none() {
        return Err(
            ApiError::new(422, format!("No ref found for: {git_ref}")).violating(format!(
                "ref {git_ref:?} is not a branch or commit of the repository"
            )),
        );
    }
    let unexpected: Vec<&String> = inputs.keys().filter(|k| !spec.inputs.contains(k)).collect();
    if !unexpected.is_empty() {
        return Err(
            ApiError::new(422, format!("Unexpected inputs provided: {unexpected:?}"))
                .violating("inputs the workflow does not declare"),
        );
    }
    let full = r.full_name();
    state.dispatches.push(Dispatch {
        repo: full,
        workflow_id: spec.id,
        git_ref: git_ref.to_owned(),
        inputs,
    });
    Ok(Answer::empty(204))
}
