//! Task reads: the lists (My Tasks, project, section, `GET /tasks`), one
//! task, a project's sections, and the premium-only search.

use serde_json::{Value, json};

use crate::asana::errors::ApiError;
use crate::asana::params::{completed_since, list_params, page};
use crate::asana::render;
use crate::asana::server::{Ctx, Outcome};
use crate::asana::state::{State, Task};
use crate::asana::stories::visible_task;
use crate::common::clock::parse_iso;
use crate::common::query::last;

/// A paginated answer of full records, compacted or projected.
fn list(state: &mut State, ctx: &Ctx<'_>, full: Vec<Value>) -> Outcome {
    let p = list_params(state, ctx.req)?;
    let (items, next) = page(state, &ctx.base, ctx.req, &p, &full);
    let data: Vec<Value> = items.into_iter().map(|v| ctx.out(v, true)).collect();
    let mut body = json!({"data": data});
    if let Some(next) = next {
        body["next_page"] = next;
    }
    Ok((200, body))
}

/// Tasks (in creation order, Asana's "priority" for the fake), filtered by
/// `completed_since`, as a list answer.
fn task_list(state: &mut State, ctx: &Ctx<'_>, keep: impl Fn(&Task) -> bool) -> Outcome {
    let chosen: Vec<Task> = state.tasks.values().filter(|t| keep(t)).cloned().collect();
    let chosen = completed_since(ctx.req, chosen)?;
    let full: Vec<Value> = chosen
        .iter()
        .map(|t| render::task(state, t, ctx.user))
        .collect();
    list(state, ctx, full)
}

fn workspace_of(state: &State, ctx: &Ctx<'_>, container: &str) -> Result<(), ApiError> {
    let workspace = if let Some(p) = state.projects.get(container) {
        &p.workspace
    } else if let Some(l) = state.user_task_lists.get(container) {
        &l.workspace
    } else {
        return Err(ApiError::unknown(container));
    };
    if state.member(ctx.user, workspace) {
        Ok(())
    } else {
        Err(ApiError::forbidden())
    }
}

/// `GET /user_task_lists/{gid}/tasks`: the owner's tasks in the workspace.
pub(crate) fn user_task_list_tasks(state: &mut State, ctx: &Ctx<'_>, gid: &str) -> Outcome {
    let Some(l) = state.user_task_lists.get(gid).cloned() else {
        return Err(ApiError::unknown(gid));
    };
    workspace_of(state, ctx, gid)?;
    task_list(state, ctx, |t| {
        t.workspace == l.workspace && t.assignee.as_deref() == Some(l.owner.as_str())
    })
}

/// `GET /projects/{gid}/tasks`.
pub(crate) fn project_tasks(state: &mut State, ctx: &Ctx<'_>, gid: &str) -> Outcome {
    if !state.projects.contains_key(gid) {
        return Err(ApiError::unknown(gid));
    }
    workspace_of(state, ctx, gid)?;
    task_list(state, ctx, |t| t.memberships.iter().any(|(p, _)| p == gid))
}

/// `GET /projects/{gid}/sections`, in the project's order.
pub(crate) fn project_sections(state: &mut State, ctx: &Ctx<'_>, gid: &str) -> Outcome {
    let Some(project) = state.projects.get(gid).cloned() else {
        return Err(ApiError::unknown(gid));
    };
    workspace_of(state, ctx, gid)?;
    let full: Vec<Value> = project
        .sections
        .iter()
        .filter_map(|s| state.sections.get(s))
        .map(|s| render::section(state, s))
        .collect();
    list(state, ctx, full)
}

/// `GET /sections/{gid}/tasks`: a project section's tasks, or (for a My
/// Tasks section) the owner's tasks filed there.
pub(crate) fn section_tasks(state: &mut State, ctx: &Ctx<'_>, gid: &str) -> Outcome {
    let Some(section) = state.sections.get(gid).cloned() else {
        return Err(ApiError::unknown(gid));
    };
    workspace_of(state, ctx, &section.container)?;
    let owner = state
        .user_task_lists
        .get(&section.container)
        .map(|l| l.owner.clone());
    task_list(state, ctx, |t| match &owner {
        Some(owner) => {
            t.assignee.as_ref() == Some(owner) && t.assignee_section.as_deref() == Some(gid)
        }
        None => t
            .memberships
            .iter()
            .any(|(p, s)| *p == section.container && s.as_deref() == Some(gid)),
    })
}

/// `GET /tasks`: exactly one of `project`, `section`, or `assignee` with
/// `workspace`; the only list that takes `modified_since`.
pub(crate) fn tasks(state: &mut State, ctx: &Ctx<'_>) -> Outcome {
    let q = |name: &str| last(&ctx.req.query, name).map(str::to_owned);
    let modified_since = match q("modified_since") {
        None => None,
        Some(raw) => Some(parse_iso(&raw).ok_or_else(|| {
            ApiError::bad_request(format!("modified_since: Not a valid date-time: {raw:?}"))
        })?),
    };
    let fresh = move |t: &Task| modified_since.is_none_or(|since| t.modified_at > since);
    match (q("project"), q("section"), q("assignee"), q("workspace")) {
        (Some(project), None, None, None) => {
            if !state.projects.contains_key(&project) {
                return Err(ApiError::unknown(&project));
            }
            workspace_of(state, ctx, &project)?;
            task_list(state, ctx, |t| {
                fresh(t) && t.memberships.iter().any(|(p, _)| *p == project)
            })
        }
        (None, Some(section), None, None) => {
            let Some(s) = state.sections.get(&section).cloned() else {
                return Err(ApiError::unknown(&section));
            };
            workspace_of(state, ctx, &s.container)?;
            task_list(state, ctx, |t| {
                fresh(t)
                    && t.memberships.iter().any(|(p, sec)| {
                        *p == s.container && sec.as_deref() == Some(section.as_str())
                    })
            })
        }
        (None, None, Some(assignee), Some(workspace)) => {
            let assignee = if assignee == "me" {
                ctx.user.to_owned()
            } else {
                assignee
            };
            if !state.users.contains_key(&assignee) {
                return Err(ApiError::unknown(&assignee));
            }
            if !state.workspaces.contains_key(&workspace) {
                return Err(ApiError::unknown(&workspace));
            }
            if !state.member(ctx.user, &workspace) {
                return Err(ApiError::forbidden());
            }
            task_list(state, ctx, |t| {
                fresh(t)
                    && t.workspace == workspace
                    && t.assignee.as_deref() == Some(assignee.as_str())
            })
        }
        _ => Err(ApiError::bad_request(
            "Must specify exactly one of project, tag, section, user task list, or assignee + workspace",
        )),
    }
}

/// `GET /tasks/{gid}`: the full record.
pub(crate) fn task(state: &mut State, ctx: &Ctx<'_>, gid: &str) -> Outcome {
    visible_task(state, ctx, gid)?;
    let full = render::task(state, &state.tasks[gid], ctx.user);
    Ok((200, json!({"data": ctx.out(full, false)})))
}

/// The search filters the fake applies; the other filters the description
/// lists are accepted but recorded as not modelled.
const MODELLED: &[&str] = &[
    "text",
    "resource_subtype",
    "assignee.any",
    "projects.any",
    "sections.any",
    "followers.any",
    "created_at.after",
    "created_at.before",
    "modified_at.after",
    "modified_at.before",
    "completed",
    "is_subtask",
    "sort_by",
    "sort_ascending",
    "limit",
];

/// `GET /workspaces/{gid}/tasks/search`: premium only (402 otherwise), no
/// `offset`, at most 100 results.
pub(crate) fn search(state: &mut State, ctx: &Ctx<'_>, workspace: &str) -> Outcome {
    let req = ctx.req;
    let Some(ws) = state.workspaces.get(workspace).cloned() else {
        return Err(ApiError::unknown(workspace));
    };
    if !state.member(ctx.user, workspace) {
        return Err(ApiError::forbidden());
    }
    if !ws.premium {
        return Err(ApiError::new(
            402,
            "Search is only available to premium users.",
        ));
    }
    if last(&req.query, "offset").is_some() {
        return Err(ApiError::bad_request(
            "offset: Search has no pagination; sort by created_at and exclude what you have seen",
        ));
    }
    let unmodelled: Vec<&str> = req
        .query
        .iter()
        .map(|(k, _)| k.as_str())
        .filter(|k| {
            !MODELLED.contains(k)
                && crate::asana::routes::Endpoint::Search(String::new())
                    .known_params()
                    .contains(k)
        })
        .collect();
    if !unmodelled.is_empty() {
        state.violation(format!(
            "{}: search filters the fake does not model: {}",
            req.what(),
            unmodelled.join(", ")
        ));
    }
    let limit = match last(&req.query, "limit") {
        None => {
            state.violation(format!(
                "{}: no `limit` (the default page size is unspecified)",
                req.what()
            ));
            20
        }
        Some(raw) => match raw.parse::<usize>() {
            Ok(n) if (1..=100).contains(&n) => n,
            _ => {
                return Err(ApiError::bad_request(format!(
                    "limit: Must be an integer between 1 and 100, got {raw:?}"
                )));
            }
        },
    };
    let filter = SearchFilter::read(ctx)?;
    let mut found: Vec<Task> = state
        .tasks
        .values()
        .filter(|t| t.workspace == workspace && filter.matches(t))
        .cloned()
        .collect();
    let sort_by = last(&req.query, "sort_by").unwrap_or("modified_at");
    let key = |t: &Task| -> i64 {
        match sort_by {
            "created_at" => t.created_at,
            "completed_at" => t.completed_at.unwrap_or(0),
            _ => t.modified_at,
        }
    };
    if ![
        "due_date",
        "created_at",
        "completed_at",
        "likes",
        "modified_at",
        "relevance",
    ]
    .contains(&sort_by)
    {
        return Err(ApiError::bad_request(format!(
            "sort_by: Not a valid value: {sort_by:?}"
        )));
    }
    if !["created_at", "completed_at", "modified_at"].contains(&sort_by) {
        state.violation(format!(
            "{}: the fake sorts by modified_at instead of {sort_by}",
            req.what()
        ));
    }
    found.sort_by_key(|t| (key(t), t.gid.clone()));
    if last(&req.query, "sort_ascending") != Some("true") {
        found.reverse();
    }
    found.truncate(limit);
    let data: Vec<Value> = found
        .iter()
        .map(|t| ctx.out(render::task(state, t, ctx.user), true))
        .collect();
    Ok((200, json!({"data": data})))
}

/// The modelled search filters of one request.
struct SearchFilter {
    user: String,
    text: Option<String>,
    subtype: Option<String>,
    assignees: Option<Vec<String>>,
    projects: Option<Vec<String>>,
    sections: Option<Vec<String>>,
    followers: Option<Vec<String>>,
    created: (Option<i64>, Option<i64>),
    modified: (Option<i64>, Option<i64>),
    completed: Option<bool>,
    subtask: Option<bool>,
}

impl SearchFilter {
    fn read(ctx: &Ctx<'_>) -> Result<SearchFilter, ApiError> {
        let q = |name: &str| last(&ctx.req.query, name);
        let list = |name: &str| {
            q(name).map(|v| {
                v.split(',')
                    .map(|s| s.trim().to_owned())
                    .collect::<Vec<_>>()
            })
        };
        let time = |name: &str| -> Result<Option<i64>, ApiError> {
            match q(name) {
                None => Ok(None),
                Some(raw) => parse_iso(raw).map(Some).ok_or_else(|| {
                    ApiError::bad_request(format!("{name}: Not a valid date-time: {raw:?}"))
                }),
            }
        };
        let flag = |name: &str| -> Result<Option<bool>, ApiError> {
            match q(name) {
                None => Ok(None),
                Some("true") => Ok(Some(true)),
                Some("false") => Ok(Some(false)),
                Some(raw) => Err(ApiError::bad_request(format!(
                    "{name}: Not a boolean: {raw:?}"
                ))),
            }
        };
        flag("sort_ascending")?;
        Ok(SearchFilter {
            user: ctx.user.to_owned(),
            text: q("text").map(str::to_lowercase),
            subtype: q("resource_subtype").map(str::to_owned),
            assignees: list("assignee.any"),
            projects: list("projects.any"),
            sections: list("sections.any"),
            followers: list("followers.any"),
            created: (time("created_at.after")?, time("created_at.before")?),
            modified: (time("modified_at.after")?, time("modified_at.before")?),
            completed: flag("completed")?,
            subtask: flag("is_subtask")?,
        })
    }

    fn me<'a>(&'a self, gid: &'a str) -> &'a str {
        if gid == "me" { &self.user } else { gid }
    }

    fn matches(&self, t: &Task) -> bool {
        let within = |range: (Option<i64>, Option<i64>), at: i64| {
            range.0.is_none_or(|after| at > after) && range.1.is_none_or(|before| at < before)
        };
        let any = |list: &Option<Vec<String>>, hit: &dyn Fn(&str) -> bool| {
            list.as_ref()
                .is_none_or(|l| l.iter().any(|g| hit(self.me(g))))
        };
        // `projects.any` and `sections.any` together match either.
        let in_project = |g: &str| t.memberships.iter().any(|(p, _)| p == g);
        let in_section = |g: &str| t.memberships.iter().any(|(_, s)| s.as_deref() == Some(g));
        let container = match (&self.projects, &self.sections) {
            (Some(_), Some(_)) => {
                any(&self.projects, &in_project) || any(&self.sections, &in_section)
            }
            _ => any(&self.projects, &in_project) && any(&self.sections, &in_section),
        };
        container
            && self.text.as_ref().is_none_or(|text| {
                t.name.to_lowercase().contains(text) || t.notes.to_lowercase().contains(text)
            })
            && self
                .subtype
                .as_ref()
                .is_none_or(|s| *s == t.resource_subtype)
            && any(&self.assignees, &|g| t.assignee.as_deref() == Some(g))
            && any(&self.followers, &|g| t.followers.iter().any(|f| f == g))
            && within(self.created, t.created_at)
            && within(self.modified, t.modified_at)
            && self.completed.is_none_or(|c| c == t.completed)
            && self.subtask.is_none_or(|s| s == t.parent.is_some())
    }
}
