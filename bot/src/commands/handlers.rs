//! What each command does, inside the caller's transaction.
//!
//! Handlers read and write through the [`Tx`] they are given, so a command's
//! effect, its reply in the outbox and the mark that the message was handled
//! commit together or not at all.

use chrono::{DateTime, Utc};

use super::{Access, Command, StatusQuery, WhyTarget, help_text};
use crate::chat::{InboundMessage, Place};
use crate::profile::Profile;
use crate::store::{NewAuditEntry, NewTask, Origin, Run, StoreError, Task, Tx};

/// Open tasks and runs shown per `!status` page.
const PAGE_SIZE: i64 = 15;
/// The longest description shown by `!status <task>`.
const DESCRIPTION_PREVIEW_CHARS: usize = 600;

/// A command's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandReply {
    pub text: String,
    /// Whether the command did what was asked (✅) or not (❌).
    pub ok: bool,
}

impl CommandReply {
    fn ok(text: impl Into<String>) -> Self {
        CommandReply {
            text: text.into(),
            ok: true,
        }
    }

    fn refused(text: impl Into<String>) -> Self {
        CommandReply {
            text: text.into(),
            ok: false,
        }
    }
}

/// Carries out one command of `message`. `ordinal` numbers the `!queue`
/// commands of one message, so that each gets its own task id.
pub async fn execute(
    tx: &mut Tx,
    profile: &Profile,
    message: &InboundMessage,
    command: &Command,
    ordinal: usize,
) -> Result<CommandReply, StoreError> {
    let spec = command.spec();
    if spec.access == Access::Approvers
        && !profile.is_approver(message.sender.user_id as u64, &message.sender.email)
    {
        let why = if profile.approvers.is_empty() {
            "this profile has no approvers configured"
        } else {
            "you are not in this profile's approvers"
        };
        return Ok(CommandReply::refused(format!(
            "You may not use `!{}`: {why}. It changes what runs, so only approvers may.",
            spec.name
        )));
    }
    if !spec.available {
        return Ok(CommandReply::refused(format!(
            "`!{}` is not available yet in this version of Eagle. Nothing was changed.",
            spec.name
        )));
    }
    match command {
        Command::Help { command } => Ok(CommandReply::ok(help_text(*command))),
        Command::Queue { title: None, .. } => overview(tx, 1, false).await,
        Command::Queue {
            title: Some(title),
            description,
        } => queue(tx, message, title, description, ordinal).await,
        Command::Status(StatusQuery::Overview { page }) => overview(tx, *page, true).await,
        Command::Status(StatusQuery::Task(id)) => task_status(tx, *id).await,
        Command::Status(StatusQuery::Run(id)) => run_status(tx, *id).await,
        Command::Why(target) => why(tx, *target).await,
        Command::Approve { .. }
        | Command::Deny { .. }
        | Command::Go { .. }
        | Command::Cancel { .. }
        | Command::Hold { .. }
        | Command::Unhold { .. }
        | Command::Retry { .. }
        | Command::Pause
        | Command::Resume => Ok(CommandReply::refused(format!(
            "`!{}` is not available yet in this version of Eagle. Nothing was changed.",
            spec.name
        ))),
    }
}

/// The task id a captured message gets: `zulip:<message id>`, with `#n` for
/// the second and later `!queue` lines of one message.
pub fn task_gid(message: &InboundMessage, ordinal: usize) -> String {
    let base = format!("{}:{}", message.transport, message.message_id);
    if ordinal <= 1 {
        base
    } else {
        format!("{base}#{ordinal}")
    }
}

/// Captures a task into the inbox (from `!queue` or an @-mention).
pub async fn queue(
    tx: &mut Tx,
    message: &InboundMessage,
    title: &str,
    description: &str,
    ordinal: usize,
) -> Result<CommandReply, StoreError> {
    let (channel, topic) = match &message.place {
        Place::Channel { channel, topic } => (Some(channel.clone()), Some(topic.clone())),
        Place::Direct { .. } => (None, None),
    };
    let gid = task_gid(message, ordinal);
    let new = NewTask {
        task_gid: gid.clone(),
        source: "chat".into(),
        title: title.to_string(),
        description: description.to_string(),
        requested_by: Some(message.sender.full_name.clone()),
        requested_by_id: Some(message.sender.user_id),
        origin: Origin {
            transport: message.transport.to_string(),
            channel,
            topic,
            message_id: Some(message.message_id),
            private: message.private,
        },
    };
    match tx.insert_task(&new).await? {
        Some(id) => {
            tx.audit(&NewAuditEntry {
                actor: message.sender_actor(),
                action: "task.queued".into(),
                subject: format!("task:{id}"),
                reason: Some(format!("captured from {}", message.place)),
                source_message_id: Some(message.message_id),
                ..NewAuditEntry::default()
            })
            .await?;
            Ok(CommandReply::ok(format!("Queued task #{id}: {title}")))
        }
        None => {
            let existing = tx.task_by_gid(&gid).await?;
            let id = existing.map(|t| t.id).unwrap_or_default();
            Ok(CommandReply::ok(format!(
                "This message was queued already as task #{id}."
            )))
        }
    }
}

async fn overview(tx: &mut Tx, page: u32, with_counts: bool) -> Result<CommandReply, StoreError> {
    let offset = i64::from(page - 1) * PAGE_SIZE;
    let mut out = String::new();
    if with_counts {
        let counts = tx.status_counts().await?;
        if counts.tasks.is_empty() && counts.runs.is_empty() {
            return Ok(CommandReply::ok(
                "Nothing queued or running. `!queue <title>` adds a task.",
            ));
        }
        let tasks = join_counts(counts.tasks.iter().map(|(s, n)| (s.as_str(), *n)));
        let runs = join_counts(counts.runs.iter().map(|(s, n)| (s.as_str(), *n)));
        out.push_str(&format!("**Tasks**: {tasks} · **Runs**: {runs}\n"));
    }
    let task_total = tx.open_task_count().await?;
    let run_total = tx.open_run_count().await?;
    let tasks = tx.open_tasks(offset, PAGE_SIZE).await?;
    let runs = if with_counts {
        tx.open_runs(offset, PAGE_SIZE).await?
    } else {
        Vec::new()
    };
    if task_total == 0 {
        out.push_str("The inbox is empty.");
    } else {
        out.push_str(&format!("**Open tasks** ({task_total}):\n"));
        for task in &tasks {
            out.push_str(&format!("* {}\n", task_line(task)));
        }
        if tasks.is_empty() {
            out.push_str("* (none on this page)\n");
        }
    }
    if with_counts && run_total > 0 {
        out.push_str(&format!("\n**Open runs** ({run_total}):\n"));
        for run in &runs {
            out.push_str(&format!("* {}\n", run_line(run)));
        }
        if runs.is_empty() {
            out.push_str("* (none on this page)\n");
        }
    }
    let shown_total = if with_counts {
        task_total.max(run_total)
    } else {
        task_total
    };
    let pages = (shown_total + PAGE_SIZE - 1) / PAGE_SIZE;
    if i64::from(page) < pages {
        let command = if with_counts { "!status" } else { "!queue" };
        let hint = if with_counts {
            format!("`{command} page {}` shows more.", page + 1)
        } else {
            format!("`!status page {}` shows more.", page + 1)
        };
        out.push_str(&format!("Page {page} of {pages}: {hint}"));
    }
    Ok(CommandReply::ok(out.trim_end().to_string()))
}

fn join_counts<'a>(counts: impl Iterator<Item = (&'a str, i64)>) -> String {
    let parts: Vec<String> = counts.map(|(s, n)| format!("{n} {s}")).collect();
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(", ")
    }
}

fn task_line(task: &Task) -> String {
    let who = task
        .requested_by
        .as_deref()
        .map(|w| format!(", from {w}"))
        .unwrap_or_default();
    format!(
        "#{} {} ({}{who})",
        task.id,
        task.title,
        task.status.as_str()
    )
}

fn run_line(run: &Run) -> String {
    let mut line = format!(
        "run {} · task {} · {}",
        run.id,
        run.task_gid,
        run.state.as_str()
    );
    if let Some(pr) = run.pr_number {
        line.push_str(&format!(" · PR #{pr}"));
    }
    if run.held {
        line.push_str(" · held");
    }
    if let Some(who) = &run.waiting_on {
        line.push_str(&format!(" · waiting on {who}"));
    }
    line
}

fn when(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M UTC").to_string()
}

async fn task_status(tx: &mut Tx, id: i64) -> Result<CommandReply, StoreError> {
    let Some(task) = tx.task(id).await? else {
        return Ok(CommandReply::refused(format!(
            "There is no task #{id}. `!status` lists the open ones."
        )));
    };
    let mut out = format!("**Task #{}**: {}\n", task.id, task.title);
    out.push_str(&format!(
        "status: {} · source: {} · added {}",
        task.status.as_str(),
        task.source,
        when(task.added_at)
    ));
    if let Some(who) = &task.requested_by {
        out.push_str(&format!(" by {who}"));
    }
    if let (Some(channel), Some(topic)) = (&task.origin_channel, &task.origin_topic) {
        out.push_str(&format!(" in #{channel} > {topic}"));
    }
    out.push('\n');
    if let Some(reason) = &task.status_reason {
        out.push_str(&format!("reason: {reason}\n"));
    }
    if let Some(summary) = &task.analysis_summary {
        out.push_str(&format!("analysis: {summary}\n"));
    }
    if !task.description.is_empty() {
        let preview: String = task
            .description
            .chars()
            .take(DESCRIPTION_PREVIEW_CHARS)
            .collect();
        let more = if preview.len() < task.description.len() {
            " …"
        } else {
            ""
        };
        out.push_str(&format!("```quote\n{preview}{more}\n```\n"));
    }
    let runs = tx.runs_of_task(&task.task_gid).await?;
    if runs.is_empty() {
        out.push_str("Runs: none yet.");
    } else {
        out.push_str("Runs:\n");
        for run in &runs {
            out.push_str(&format!("* {}\n", run_line(run)));
        }
    }
    Ok(CommandReply::ok(out.trim_end().to_string()))
}

async fn run_status(tx: &mut Tx, id: i64) -> Result<CommandReply, StoreError> {
    let Some(run) = tx.run(id).await? else {
        return Ok(CommandReply::refused(format!(
            "There is no run {id}. `!status` lists the open ones."
        )));
    };
    let task = tx.task_by_gid(&run.task_gid).await?;
    let title = task
        .as_ref()
        .map(|t| format!("task #{} ({})", t.id, t.title))
        .unwrap_or_else(|| format!("task {}", run.task_gid));
    let mut out = format!("**Run {}** of {title}: {}\n", run.id, run.state.as_str());
    out.push_str(&format!("created {}", when(run.created_at)));
    if let Some(at) = run.started_at {
        out.push_str(&format!(" · started {}", when(at)));
    }
    if let Some(at) = run.completed_at {
        out.push_str(&format!(" · ended {}", when(at)));
    }
    out.push('\n');
    if let Some(reason) = &run.state_reason {
        out.push_str(&format!("reason: {reason}\n"));
    }
    if let Some(branch) = &run.branch_name {
        out.push_str(&format!("branch: {branch}\n"));
    }
    if let Some(url) = &run.pr_url {
        out.push_str(&format!("PR: {url}\n"));
    }
    if run.ci_attempts > 0 {
        out.push_str(&format!("CI attempts: {}\n", run.ci_attempts));
    }
    if let Some(pid) = run.worker_pid {
        let seen = run
            .worker_last_update
            .map(when)
            .unwrap_or_else(|| "never".into());
        out.push_str(&format!("worker pid {pid}, last output {seen}\n"));
    }
    if run.held {
        out.push_str("held: yes (`!unhold` releases it)\n");
    }
    if let Some(who) = &run.waiting_on {
        out.push_str(&format!("waiting on: {who}\n"));
    }
    Ok(CommandReply::ok(out.trim_end().to_string()))
}

async fn why(tx: &mut Tx, target: WhyTarget) -> Result<CommandReply, StoreError> {
    let subject = target.subject();
    let entries = tx.audit_trail(&subject).await?;
    if entries.is_empty() {
        return Ok(CommandReply::refused(format!(
            "The audit log has nothing about {}.",
            subject.replace(':', " ")
        )));
    }
    let mut out = format!("**Audit trail of {}**:\n", subject.replace(':', " "));
    for entry in entries {
        out.push_str(&format!(
            "* {} · {} · {}",
            when(entry.at),
            entry.actor,
            entry.action
        ));
        if let Some(decision) = &entry.decision {
            out.push_str(&format!(" → {decision}"));
        }
        if let Some(name) = &entry.plugin_name {
            let version = entry.plugin_version.as_deref().unwrap_or("?");
            let hash = entry
                .plugin_hash
                .as_deref()
                .map(short_hash)
                .unwrap_or_default();
            out.push_str(&format!(" (plugin {name} {version} sha256:{hash})"));
        }
        if let Some(reason) = &entry.reason {
            out.push_str(&format!(": {reason}"));
        }
        out.push('\n');
    }
    Ok(CommandReply::ok(out.trim_end().to_string()))
}

fn short_hash(hash: &str) -> String {
    hash.chars().take(12).collect()
}
