//! The read-only tools Eagle offers the model: the inbox, a task, a run
//! with its worker and requests, the audit trail, a run's topic, and what
//! changed since a time; and `propose_task`, which only proposes.
//!
//! Every result is JSON read from Eagle's own state in a read transaction,
//! with only what the asker may see: a private task's text stays in its
//! own conversation. Task titles and worker lines are data in a JSON
//! string, never instructions (the system prompt says so, and no tool
//! changes anything, so nothing a task says can act).

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::backend::{ToolCall, ToolSpec};
use crate::ground::text::one_line;
use crate::store::{Destination, Run, Store, StoreError, Task, Tx};

/// The longest tool result handed to the model.
const MAX_RESULT_CHARS: usize = 12_000;
/// How many messages of a run's topic a question reads (the seeds' window).
pub const TOPIC_WINDOW: i64 = 20;

/// Who asks, and where: what they may see.
#[derive(Debug, Clone)]
pub struct Viewer {
    pub user_id: i64,
    pub approver: bool,
    pub place: Destination,
}

impl Viewer {
    /// Whether a task's text may be shown to this asker here: anywhere for
    /// a public task; a private one in its own channel, or in a direct
    /// conversation with its requester or an approver.
    pub fn sees(&self, task: &Task) -> bool {
        if !task.origin_private {
            return true;
        }
        match &self.place {
            Destination::Direct { .. } => {
                self.approver || task.requested_by_id == Some(self.user_id)
            }
            Destination::Channel { channel, .. } => task
                .origin_channel
                .as_deref()
                .is_some_and(|c| crate::ground::text::eq_fold(c, channel)),
        }
    }
}

/// What a tool call came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A result for the model.
    Result { content: String, is_error: bool },
    /// The model proposes a task: the question ends here, with a confirmation.
    Propose { title: String, description: String },
}

/// The tools, as the model is told of them.
pub fn specs() -> Vec<ToolSpec> {
    let id = |what: &str| {
        json!({"type": "object", "properties": {"id": {"type": "integer", "description": what}},
               "required": ["id"]})
    };
    vec![
        ToolSpec {
            name: "inbox",
            description: "Lists the open tasks of the inbox (newest first): id, title, status, \
                          priority and their run. Optionally only one status (pending, for_review, \
                          awaiting_go, approved).",
            schema: json!({"type": "object", "properties": {
                "status": {"type": "string"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 30}
            }}),
        },
        ToolSpec {
            name: "task",
            description: "One task by its id: title, description, status and why, who asked, its runs.",
            schema: id("the task id (#12 is 12)"),
        },
        ToolSpec {
            name: "run",
            description: "One run by its id: state, whether it is held and on whom it waits, its \
                          worker and the worker's latest status lines, its PR and CI, its requests \
                          with their decisions and the command that answers an open one.",
            schema: id("the run id"),
        },
        ToolSpec {
            name: "audit",
            description: "The audit trail of a task, a run or a request: who or what decided \
                          what, when and why (the newest 20).",
            schema: json!({"type": "object", "properties": {
                "subject": {"type": "string", "description": "task:12, run:3 or request:7"}
            }, "required": ["subject"]}),
        },
        ToolSpec {
            name: "run_topic",
            description: "The last 20 messages Eagle and the executor posted in a run's topic.",
            schema: id("the run id"),
        },
        ToolSpec {
            name: "changes_since",
            description: "What changed since a time: tasks added, runs started, completed, held or \
                          failed. `since` is an RFC 3339 time, `today` (since midnight UTC) or a \
                          span such as `2h` or `1d`.",
            schema: json!({"type": "object", "properties": {"since": {"type": "string"}},
                           "required": ["since"]}),
        },
        ToolSpec {
            name: "propose_task",
            description: "When the message asks for work to be done (not a question), propose it as \
                          a task with a short title. Nothing is queued: the asker confirms first.",
            schema: json!({"type": "object", "properties": {
                "title": {"type": "string"},
                "description": {"type": "string"}
            }, "required": ["title"]}),
        },
    ]
}

/// Carries out one tool call.
pub async fn call(
    store: &Store,
    viewer: &Viewer,
    executor_channel: &str,
    history: Option<&dyn crate::runtime::posts::History>,
    call: &ToolCall,
) -> Result<Outcome, StoreError> {
    let input = &call.input;
    let id = || {
        input["id"]
            .as_i64()
            .or_else(|| input["id"].as_str()?.trim_start_matches('#').parse().ok())
    };
    let result = match call.name.as_str() {
        "propose_task" => {
            let title = input["title"]
                .as_str()
                .map(|t| one_line(t, 200))
                .unwrap_or_default();
            if title.trim().is_empty() {
                Err("propose_task needs a title".to_string())
            } else {
                let description = input["description"]
                    .as_str()
                    .map(|d| crate::runtime::posts::cap(d, 4000))
                    .unwrap_or_default();
                return Ok(Outcome::Propose { title, description });
            }
        }
        "inbox" => {
            let mut tx = store.begin_read().await?;
            inbox(
                &mut tx,
                viewer,
                input["status"].as_str(),
                input["limit"].as_i64(),
            )
            .await
        }
        "task" => match id() {
            Some(id) => {
                let mut tx = store.begin_read().await?;
                task(&mut tx, viewer, id).await
            }
            None => Err("task needs an integer id".into()),
        },
        "run" => match id() {
            Some(id) => {
                let mut tx = store.begin_read().await?;
                run(&mut tx, viewer, id).await
            }
            None => Err("run needs an integer id".into()),
        },
        "run_topic" => match id() {
            Some(id) => {
                let mut tx = store.begin_read().await?;
                run_topic(&mut tx, executor_channel, history, id).await
            }
            None => Err("run_topic needs an integer id".into()),
        },
        "audit" => {
            let subject = input["subject"]
                .as_str()
                .unwrap_or_default()
                .trim()
                .to_string();
            let mut tx = store.begin_read().await?;
            audit(&mut tx, viewer, &subject).await
        }
        "changes_since" => {
            let since = input["since"].as_str().unwrap_or_default();
            match parse_since(since, crate::store::now()) {
                Some(at) => {
                    let mut tx = store.begin_read().await?;
                    changes_since(&mut tx, viewer, at).await
                }
                None => Err(format!(
                    "since {:?} is not a time: use RFC 3339, today, or a span such as 2h",
                    one_line(since, 40)
                )),
            }
        }
        other => Err(format!(
            "there is no tool {:?}: the tools are read-only lookups and propose_task; \
             nothing can be approved, denied or changed through them",
            one_line(other, 40)
        )),
    };
    Ok(match result {
        Ok(Ok(value)) => Outcome::Result {
            content: crate::runtime::posts::cap(&value.to_string(), MAX_RESULT_CHARS),
            is_error: false,
        },
        Ok(Err(message)) | Err(message) => Outcome::Result {
            content: message,
            is_error: true,
        },
    })
}

type Lookup = Result<Result<Value, String>, String>;

fn store_error(error: StoreError) -> String {
    tracing::warn!(%error, "a question's lookup failed");
    "Eagle's database did not answer this lookup".to_string()
}

/// A task's title as the viewer may see it.
fn title(viewer: &Viewer, task: &Task) -> Value {
    if viewer.sees(task) {
        json!(task.title)
    } else {
        json!("(private: asked in another conversation)")
    }
}

async fn inbox(tx: &mut Tx, viewer: &Viewer, status: Option<&str>, limit: Option<i64>) -> Lookup {
    let limit = limit.unwrap_or(15).clamp(1, 30);
    let tasks = tx.tasks().open_tasks(0, 200).await.map_err(store_error)?;
    let mut out = Vec::new();
    for task in tasks.iter().rev() {
        if status.is_some_and(|s| s != task.status.as_str()) {
            continue;
        }
        out.push(json!({
            "task": task.id,
            "title": title(viewer, task),
            "status": task.status.as_str(),
            "priority": task.priority,
            "run": task.executor_run_id,
        }));
        if out.len() as i64 >= limit {
            break;
        }
    }
    let total = tx.tasks().open_task_count().await.map_err(store_error)?;
    Ok(Ok(json!({"open_tasks": total, "tasks": out})))
}

async fn task(tx: &mut Tx, viewer: &Viewer, id: i64) -> Lookup {
    let Some(task) = tx.tasks().task(id).await.map_err(store_error)? else {
        return Ok(Err(format!("there is no task {id}")));
    };
    let runs = tx
        .tasks()
        .runs_of_task(&task.task_gid)
        .await
        .map_err(store_error)?;
    let visible = viewer.sees(&task);
    Ok(Ok(json!({
        "task": task.id,
        "title": title(viewer, &task),
        "description": if visible { json!(crate::runtime::posts::cap(&task.description, 1500)) } else { Value::Null },
        "status": task.status.as_str(),
        "status_reason": if visible { json!(task.status_reason) } else { Value::Null },
        "priority": task.priority,
        "source": task.source,
        "requested_by": task.requested_by,
        "added_at": task.added_at,
        "runs": runs.iter().map(|r| json!({"run": r.id, "state": r.state.as_str()})).collect::<Vec<_>>(),
    })))
}

async fn run(tx: &mut Tx, viewer: &Viewer, id: i64) -> Lookup {
    let Some(run) = tx.tasks().run(id).await.map_err(store_error)? else {
        return Ok(Err(format!("there is no run {id}")));
    };
    let task = tx
        .tasks()
        .task_by_gid(&run.task_gid)
        .await
        .map_err(store_error)?;
    let requests = tx
        .requests()
        .requests_of_run(run.id)
        .await
        .map_err(store_error)?;
    let status = tx
        .conversations()
        .status_lines(run.id)
        .await
        .map_err(store_error)?;
    let private = task.as_ref().is_some_and(|t| !viewer.sees(t));
    let requests: Vec<Value> = requests
        .iter()
        .rev()
        .take(10)
        .map(|r| {
            let open = r.status.is_open();
            json!({
                "request": r.id,
                "action": r.action,
                "status": r.status.as_str(),
                "decided_by": r.decided_by,
                "reason": r.decision_reason.as_deref().map(|t| one_line(t, 300)),
                "answer_with": open.then(|| format!("!approve {} {} or !deny {} {} <reason>", run.id, r.id, run.id, r.id)),
                "carried_out": r.carried_out.as_deref().map(|t| one_line(t, 200)),
            })
        })
        .collect();
    Ok(Ok(json!({
        "run": run.id,
        "task": task.as_ref().map(|t| t.id),
        "title": task.as_ref().map(|t| title(viewer, t)),
        "state": run.state.as_str(),
        "state_reason": if private { Value::Null } else { json!(run.state_reason.as_deref().map(|t| one_line(t, 300))) },
        "held": run.held,
        "waiting_on": run.waiting_on,
        "started_at": run.started_at,
        "completed_at": run.completed_at,
        "branch": run.branch_name,
        "pr": run.pr_url,
        "pr_loop": run.pr_status.as_deref().map(|t| one_line(t, 300)),
        "worker": worker(&run),
        "latest_status_lines": status.iter().map(|s| json!({"at": s.at, "line": s.text})).collect::<Vec<_>>(),
        "cost_usd": run.cost_usd,
        "requests_newest_first": requests,
    })))
}

fn worker(run: &Run) -> Value {
    if run.has_worker() {
        json!({
            "running": true,
            "kind": run.prompt_kind,
            "attempt": run.attempt,
            "started_at": run.worker_started_at,
            "last_output_at": run.worker_last_update,
        })
    } else {
        json!({"running": false, "attempts": run.attempt, "failed_attempts": run.failures})
    }
}

async fn run_topic(
    tx: &mut Tx,
    channel: &str,
    history: Option<&dyn crate::runtime::posts::History>,
    id: i64,
) -> Lookup {
    let Some(run) = tx.tasks().run(id).await.map_err(store_error)? else {
        return Ok(Err(format!("there is no run {id}")));
    };
    // People's messages too, from the server; else the bots' own posts.
    if let Some(history) = history
        && let Some(said) = history
            .topic_window(channel, &run.topic(), TOPIC_WINDOW as u32)
            .await
    {
        return Ok(Ok(json!({
            "run": run.id,
            "topic": format!("#{channel} > {}", run.topic()),
            "messages": said.iter().map(|m| json!({
                "at": m.at,
                "from": m.sender,
                "text": crate::runtime::posts::cap(&m.content, 500),
            })).collect::<Vec<_>>(),
        })));
    }
    let posts = tx
        .conversations()
        .topic_posts(channel, &run.topic(), TOPIC_WINDOW)
        .await
        .map_err(store_error)?;
    Ok(Ok(json!({
        "run": run.id,
        "topic": format!("#{channel} > {}", run.topic()),
        "messages": posts.iter().map(|p| json!({"at": p.created_at, "text": crate::runtime::posts::cap(&p.content, 500)})).collect::<Vec<_>>(),
    })))
}

async fn audit(tx: &mut Tx, viewer: &Viewer, subject: &str) -> Lookup {
    let Some((kind, id)) = subject.split_once(':') else {
        return Ok(Err("subject is task:<id>, run:<id> or request:<id>".into()));
    };
    let Ok(id) = id.trim().parse::<i64>() else {
        return Ok(Err("subject is task:<id>, run:<id> or request:<id>".into()));
    };
    // A private task's trail is as private as its text.
    let task = match kind.trim() {
        "task" => tx.tasks().task(id).await.map_err(store_error)?,
        "run" => match tx.tasks().run(id).await.map_err(store_error)? {
            Some(run) => tx
                .tasks()
                .task_by_gid(&run.task_gid)
                .await
                .map_err(store_error)?,
            None => None,
        },
        "request" => match tx.requests().request(id).await.map_err(store_error)? {
            Some(r) => match tx.tasks().run(r.run_id).await.map_err(store_error)? {
                Some(run) => tx
                    .tasks()
                    .task_by_gid(&run.task_gid)
                    .await
                    .map_err(store_error)?,
                None => None,
            },
            None => None,
        },
        _ => return Ok(Err("subject is task:<id>, run:<id> or request:<id>".into())),
    };
    let private = task.as_ref().is_some_and(|t| !viewer.sees(t));
    let entries = tx
        .audit_log()
        .audit_trail(&format!("{}:{id}", kind.trim()))
        .await
        .map_err(store_error)?;
    let entries: Vec<Value> = entries
        .iter()
        .rev()
        .take(20)
        .map(|e| {
            json!({
                "at": e.at,
                "actor": e.actor,
                "action": e.action,
                "decision": e.decision,
                "reason": if private { Value::Null } else { json!(e.reason.as_deref().map(|r| one_line(r, 300))) },
                "plugin": e.plugin_name,
            })
        })
        .collect();
    Ok(Ok(
        json!({"subject": subject, "entries_newest_first": entries}),
    ))
}

async fn changes_since(tx: &mut Tx, viewer: &Viewer, since: DateTime<Utc>) -> Lookup {
    let tasks = tx
        .conversations()
        .tasks_added_since(since, 200)
        .await
        .map_err(store_error)?;
    let runs = tx
        .conversations()
        .runs_changed_since(since, 200)
        .await
        .map_err(store_error)?;
    let mut finished = Vec::new();
    let mut ended = Vec::new();
    let mut started = Vec::new();
    let mut held = Vec::new();
    for run in &runs {
        let task = tx
            .tasks()
            .task_by_gid(&run.task_gid)
            .await
            .map_err(store_error)?;
        let entry = json!({
            "run": run.id,
            "task": task.as_ref().map(|t| t.id),
            "title": task.as_ref().map(|t| title(viewer, t)),
            "state": run.state.as_str(),
            "pr": run.pr_url,
        });
        match run.state.as_str() {
            "complete" if run.completed_at.is_some_and(|at| at >= since) => finished.push(entry),
            "abandoned" | "cancelled" => ended.push(entry),
            _ if run.held => held.push(entry),
            _ if run.started_at.is_some_and(|at| at >= since) => started.push(entry),
            _ => {}
        }
    }
    Ok(Ok(json!({
        "since": since,
        "tasks_added": tasks.iter().map(|t| json!({"task": t.id, "title": title(viewer, t), "status": t.status.as_str()})).collect::<Vec<_>>(),
        "runs_completed": finished,
        "runs_started": started,
        "runs_held": held,
        "runs_abandoned_or_cancelled": ended,
    })))
}

/// `since` as a time: RFC 3339, `today` (midnight UTC), or a span back from `now`.
pub fn parse_since(text: &str, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("today") {
        return now.date_naive().and_hms_opt(0, 0, 0).map(|t| t.and_utc());
    }
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Some(at.with_timezone(&Utc));
    }
    let span = humantime::parse_duration(text).ok()?;
    Some(now - chrono::TimeDelta::from_std(span).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_reads_today_times_and_spans() {
        let now = DateTime::parse_from_rfc3339("2026-12-02T15:30:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(
            parse_since("today", now).unwrap().to_rfc3339(),
            "2026-12-02T00:00:00+00:00"
        );
        assert_eq!(
            parse_since("2h", now).unwrap().to_rfc3339(),
            "2026-12-02T13:30:00+00:00"
        );
        assert!(parse_since("2026-12-01T00:00:00Z", now).is_some());
        assert!(parse_since("yesterday-ish", now).is_none());
    }
}
