//! The JSON GitHub sends for each kind of object, with the fields Eagle
//! reads and the ones every client sees (ids, node ids, URLs, timestamps).
//! API URLs inside bodies point at the fake, as `link` headers do; web URLs
//! point at github.com.

use serde_json::{Value, json};

use crate::common::clock::iso_seconds;
use crate::common::hash::hex40;
use crate::github::state::{
    CheckRun, Comment, CommitStatus, Pull, Repo, Review, ReviewComment, State, Thread, WorkflowRun,
};

/// Where web links point.
pub(crate) const WEB: &str = "https://github.com";

/// A `simple-user`, or `null` for a deleted user.
pub(crate) fn user(state: &mut State, api: &str, login: Option<&str>) -> Value {
    let Some(login) = login else {
        return Value::Null;
    };
    let id = state.user_id(login);
    let kind = if login.ends_with("[bot]") {
        "Bot"
    } else {
        "User"
    };
    json!({
        "login": login,
        "id": id,
        "node_id": format!("U_kgDO{id}"),
        "avatar_url": format!("https://avatars.githubusercontent.com/u/{id}?v=4"),
        "gravatar_id": "",
        "url": format!("{api}/users/{login}"),
        "html_url": format!("{WEB}/{login}"),
        "type": kind,
        "site_admin": false,
    })
}

/// A minimal `repository` object.
pub(crate) fn repo(state: &mut State, api: &str, repo: &Repo) -> Value {
    let owner = user(state, api, Some(&repo.owner));
    json!({
        "id": repo.id,
        "node_id": repo.node_id,
        "name": repo.name,
        "full_name": repo.full_name(),
        "private": false,
        "owner": owner,
        "html_url": format!("{WEB}/{}", repo.full_name()),
        "url": format!("{api}/repos/{}", repo.full_name()),
        "default_branch": repo.spec.default_branch,
        "allow_merge_commit": repo.spec.allow_merge_commit,
        "allow_squash_merge": repo.spec.allow_squash_merge,
        "allow_rebase_merge": repo.spec.allow_rebase_merge,
        "fork": repo.fork_of.is_some(),
    })
}

/// A label object; ids and colours derived from the name.
pub(crate) fn label(api: &str, full_name: &str, name: &str) -> Value {
    let hash = hex40(name);
    let id = u64::from_str_radix(&hash[..8], 16).unwrap_or(1);
    json!({
        "id": id,
        "node_id": format!("LA_kwDO{}", &hash[..12]),
        "url": format!("{api}/repos/{full_name}/labels/{name}"),
        "name": name,
        "description": null,
        "color": &hash[..6],
        "default": false,
    })
}

/// `mergeable_state`, an untyped string in the description; these are the
/// values GitHub is seen to send.
fn mergeable_state(repo: &Repo, pull: &Pull, mergeable: Option<bool>) -> &'static str {
    if pull.closed {
        return "unknown";
    }
    if pull.draft {
        return "draft";
    }
    match mergeable {
        None => "unknown",
        Some(false) => "dirty",
        Some(true) => {
            let head = &pull.head_sha;
            let failing_or_pending = repo.check_runs.iter().any(|c| {
                &c.head_sha == head
                    && (c.status != "completed"
                        || !matches!(
                            c.conclusion.as_deref(),
                            Some("success" | "neutral" | "skipped")
                        ))
            });
            if failing_or_pending {
                "unstable"
            } else {
                "clean"
            }
        }
    }
}

/// A full `pull-request`, with `mergeable` as the caller computed it.
pub(crate) fn pull(
    state: &mut State,
    api: &str,
    repo_index: usize,
    number: u64,
    mergeable: Option<bool>,
) -> Value {
    let repo_value = {
        let r = state.repos[repo_index].clone();
        repo(state, api, &r)
    };
    let r = state.repos[repo_index].clone();
    let Some(p) = r.pulls.get(&number) else {
        return Value::Null;
    };
    let author = user(state, api, Some(&p.author));
    let owner = user(state, api, Some(&r.owner));
    let merged_by = match &p.merged {
        Some(m) => user(state, api, Some(&m.by)),
        None => Value::Null,
    };
    let full = r.full_name();
    let labels: Vec<Value> = p.labels.iter().map(|l| label(api, &full, l)).collect();
    let merge_commit_sha = match (&p.merged, mergeable) {
        (Some(m), _) => json!(m.commit_sha),
        (None, Some(true)) => json!(hex40(&format!("test-merge {}", p.head_sha))),
        (None, _) => Value::Null,
    };
    let mergeable_value = if p.closed {
        Value::Null
    } else {
        json!(mergeable)
    };
    let closed_at = p.merged.as_ref().map(|m| iso_seconds(m.at));
    let side = |branch: &str, sha: &str| {
        json!({
            "label": format!("{}:{branch}", r.owner),
            "ref": branch,
            "sha": sha,
            "user": owner,
            "repo": repo_value,
        })
    };
    // A fork's head is its branch, its owner's and its repository's.
    let head = match &p.head_repo {
        None => side(&p.head_ref, &p.head_sha),
        Some(fork) => {
            let (fork_owner, fork_repo) = {
                let (o, n) = fork.split_once('/').unwrap_or((fork, ""));
                match state.repo_index(o, n) {
                    Some(i) => {
                        let f = state.repos[i].clone();
                        (f.owner.clone(), repo(state, api, &f))
                    }
                    None => (o.to_owned(), Value::Null),
                }
            };
            let fork_user = user(state, api, Some(&fork_owner));
            json!({
                "label": format!("{fork_owner}:{}", p.head_ref),
                "ref": p.head_ref,
                "sha": p.head_sha,
                "user": fork_user,
                "repo": fork_repo,
            })
        }
    };
    json!({
        "url": format!("{api}/repos/{full}/pulls/{number}"),
        "id": p.id,
        "node_id": p.node_id,
        "html_url": format!("{WEB}/{full}/pull/{number}"),
        "issue_url": format!("{api}/repos/{full}/issues/{number}"),
        "number": number,
        "state": if p.closed { "closed" } else { "open" },
        "locked": false,
        "title": p.title,
        "user": author,
        "body": p.body,
        "labels": labels,
        "created_at": iso_seconds(p.created_at),
        "updated_at": iso_seconds(p.updated_at),
        "closed_at": closed_at,
        "merged_at": closed_at,
        "merge_commit_sha": merge_commit_sha,
        "assignees": [],
        "requested_reviewers": [],
        "draft": p.draft,
        "head": head,
        "base": side(&p.base_ref, &hex40(&format!("base {}", p.base_ref))),
        "author_association": r.association(Some(&p.author)),
        "auto_merge": null,
        "merged": p.merged.is_some(),
        "mergeable": mergeable_value,
        "rebaseable": mergeable_value,
        "mergeable_state": mergeable_state(&r, p, mergeable),
        "merged_by": merged_by,
        "comments": r.comments.iter().filter(|c| c.issue == number).count(),
        "review_comments": r.threads.iter().filter(|t| t.pull == number).map(|t| t.comments.len()).sum::<usize>(),
        "maintainer_can_modify": false,
        "commits": 1,
        "additions": 1,
        "deletions": 0,
        "changed_files": 1,
    })
}

/// A `check-run`.
pub(crate) fn check_run(api: &str, repo: &Repo, run: &CheckRun) -> Value {
    let full = repo.full_name();
    let app = if run.app_id == crate::github::model::ACTIONS_APP_ID {
        json!({"id": run.app_id, "slug": "github-actions", "name": "GitHub Actions"})
    } else {
        json!({"id": run.app_id, "slug": format!("app-{}", run.app_id), "name": format!("App {}", run.app_id)})
    };
    json!({
        "id": run.id,
        "node_id": format!("CR_kwDO{}", run.id),
        "head_sha": run.head_sha,
        "external_id": "",
        "url": format!("{api}/repos/{full}/check-runs/{}", run.id),
        "html_url": format!("{WEB}/{full}/runs/{}", run.id),
        "details_url": run.details_url.clone().unwrap_or_else(|| format!("{WEB}/{full}/runs/{}", run.id)),
        "status": run.status,
        "conclusion": run.conclusion,
        "started_at": iso_seconds(run.started_at),
        "completed_at": run.completed_at.map(iso_seconds),
        "output": {"title": null, "summary": null, "text": null, "annotations_count": 0,
                   "annotations_url": format!("{api}/repos/{full}/check-runs/{}/annotations", run.id)},
        "name": run.name,
        "check_suite": {"id": run.suite_id},
        "app": app,
        "pull_requests": [],
    })
}

/// A commit `status`.
pub(crate) fn status(api: &str, repo: &Repo, s: &CommitStatus) -> Value {
    json!({
        "url": format!("{api}/repos/{}/statuses/{}", repo.full_name(), s.sha),
        "avatar_url": null,
        "id": s.id,
        "node_id": format!("SC_kwDO{}", s.id),
        "state": s.state,
        "description": s.description,
        "target_url": s.target_url,
        "context": s.context,
        "created_at": iso_seconds(s.created_at),
        "updated_at": iso_seconds(s.created_at),
    })
}

/// A `workflow-run`.
pub(crate) fn workflow_run(
    state: &mut State,
    api: &str,
    repo: &Repo,
    run: &WorkflowRun,
    with_pulls: bool,
) -> Value {
    let full = repo.full_name();
    let workflow = repo.workflows.iter().find(|w| w.id == run.workflow_id);
    let (name, path) = workflow.map_or((String::new(), String::new()), |w| {
        (w.name.clone(), w.path.clone())
    });
    let actor = user(state, api, Some(&run.actor));
    let pulls: Vec<Value> = if with_pulls {
        run.pull_requests
            .iter()
            .filter_map(|n| repo.pulls.get(n))
            .map(|p| {
                json!({
                    "id": p.id,
                    "number": p.number,
                    "url": format!("{api}/repos/{full}/pulls/{}", p.number),
                    "head": {"ref": p.head_ref, "sha": p.head_sha, "repo": {"id": repo.id, "url": format!("{api}/repos/{full}"), "name": repo.name}},
                    "base": {"ref": p.base_ref, "sha": hex40(&format!("base {}", p.base_ref)), "repo": {"id": repo.id, "url": format!("{api}/repos/{full}"), "name": repo.name}},
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    json!({
        "id": run.id,
        "name": name,
        "node_id": format!("WFR_kwLO{}", run.id),
        "head_branch": run.head_branch,
        "head_sha": run.head_sha,
        "path": path,
        "display_title": name,
        "run_number": run.run_number,
        "event": run.event,
        "status": run.status,
        "conclusion": run.conclusion,
        "workflow_id": run.workflow_id,
        "check_suite_id": run.suite_id,
        "check_suite_node_id": format!("CS_kwDO{}", run.suite_id),
        "url": format!("{api}/repos/{full}/actions/runs/{}", run.id),
        "html_url": format!("{WEB}/{full}/actions/runs/{}", run.id),
        "pull_requests": pulls,
        "created_at": iso_seconds(run.created_at),
        "updated_at": iso_seconds(run.updated_at),
        "run_attempt": run.run_attempt,
        "run_started_at": iso_seconds(run.created_at),
        "actor": actor,
        "triggering_actor": actor,
        "rerun_url": format!("{api}/repos/{full}/actions/runs/{}/rerun", run.id),
        "workflow_url": format!("{api}/repos/{full}/actions/workflows/{}", run.workflow_id),
    })
}

/// An `issue-comment`.
pub(crate) fn comment(state: &mut State, api: &str, repo: &Repo, c: &Comment) -> Value {
    let full = repo.full_name();
    let author = user(state, api, c.login.as_deref());
    json!({
        "id": c.id,
        "node_id": format!("IC_kwDO{}", c.id),
        "url": format!("{api}/repos/{full}/issues/comments/{}", c.id),
        "html_url": format!("{WEB}/{full}/pull/{}#issuecomment-{}", c.issue, c.id),
        "body": c.body,
        "user": author,
        "created_at": iso_seconds(c.created_at),
        "updated_at": iso_seconds(c.created_at),
        "issue_url": format!("{api}/repos/{full}/issues/{}", c.issue),
        "author_association": repo.association(c.login.as_deref()),
    })
}

/// A `pull-request-review`; a pending review has no `submitted_at`.
pub(crate) fn review(state: &mut State, api: &str, repo: &Repo, r: &Review) -> Value {
    let full = repo.full_name();
    let author = user(state, api, r.login.as_deref());
    let mut value = json!({
        "id": r.id,
        "node_id": format!("PRR_kwDO{}", r.id),
        "user": author,
        "body": r.body,
        "state": r.state,
        "html_url": format!("{WEB}/{full}/pull/{}#pullrequestreview-{}", r.pull, r.id),
        "pull_request_url": format!("{api}/repos/{full}/pulls/{}", r.pull),
        "author_association": repo.association(r.login.as_deref()),
        "commit_id": r.commit_id,
    });
    if r.state != "PENDING" {
        value["submitted_at"] = json!(iso_seconds(r.submitted_at));
    }
    value
}

/// A review comment (REST has no resolved flag).
pub(crate) fn review_comment(
    state: &mut State,
    api: &str,
    repo: &Repo,
    thread: &Thread,
    c: &ReviewComment,
) -> Value {
    let full = repo.full_name();
    let author = user(state, api, c.login.as_deref());
    let mut value = json!({
        "id": c.id,
        "node_id": c.node_id,
        "pull_request_review_id": null,
        "url": format!("{api}/repos/{full}/pulls/comments/{}", c.id),
        "diff_hunk": "@@ -1 +1 @@",
        "path": thread.path,
        "commit_id": c.commit_id,
        "original_commit_id": c.commit_id,
        "user": author,
        "body": c.body,
        "created_at": iso_seconds(c.created_at),
        "updated_at": iso_seconds(c.created_at),
        "html_url": format!("{WEB}/{full}/pull/{}#discussion_r{}", thread.pull, c.id),
        "pull_request_url": format!("{api}/repos/{full}/pulls/{}", thread.pull),
        "author_association": repo.association(c.login.as_deref()),
        "line": if thread.outdated { None } else { thread.line },
        "original_line": thread.line,
        "side": "RIGHT",
    });
    if let Some(parent) = c.in_reply_to {
        value["in_reply_to_id"] = json!(parent);
    }
    value
}
