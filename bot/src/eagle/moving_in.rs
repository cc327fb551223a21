//! `eagle import executor-v2 <database url>`: moving in from the old
//! executor (seed 003, "Phase 1"). Its `executor_queue` and
//! `executor_runs` are read page by page over a read-only connection
//! ([`crate::store::LegacyDb`]), mapped by the pure rules below, and
//! written in one transaction per page; `--dry-run` reads and maps the
//! same way and writes nothing.
//!
//! Mapping, as the owner would expect it:
//! * tasks keep their gid (a bare Asana gid becomes `asana:<gid>`, the key
//!   Eagle's Asana intake uses, so intake updates the same task later),
//!   their status (`in_progress` there is `approved` here: a run works on
//!   it), priority, complexity, feasibility, summary and times; the first
//!   line of the description is the title; `notes` and `user_context`
//!   become the notes.
//! * runs keep their branch, worktree path, PR number and address, worker
//!   session, CI attempts and times; `ci_running` (and `awaiting_review`)
//!   become `pr` with no PR work asked, so they wait on the PR loop and hold
//!   no worker slot; a worker's pid is not kept (it is the old host's).
//! * what cannot be mapped (an unknown status or state, a run whose task is
//!   not imported) is counted and listed, never guessed.
//!
//! Importing twice adds nothing: tasks are keyed by gid, runs by
//! `executor-v2:<id>`.

use std::collections::{BTreeMap, HashMap};

use chrono::Utc;

use crate::ground::text::one_line;
use crate::store::{
    ImportedRun, ImportedTask, LegacyDb, LegacyRun, LegacyTask, NewAuditEntry, PrLink, RunState,
    Store, TaskStatus,
};

/// The system name in `imported_from` and the audit log.
pub const SYSTEM: &str = "executor-v2";
/// Rows read and written per transaction.
pub const DEFAULT_BATCH: i64 = 200;
/// At most this many ids are listed per thing that cannot be mapped.
const LISTED: usize = 10;

/// What an import found and did (or, dry, would do).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// Tasks by their status there.
    pub task_statuses: BTreeMap<String, usize>,
    /// Tasks by the status they get here.
    pub task_mapped: BTreeMap<&'static str, usize>,
    /// Runs by their state there.
    pub run_states: BTreeMap<String, usize>,
    /// Runs by the state they get here.
    pub run_mapped: BTreeMap<&'static str, usize>,
    /// What cannot be mapped: a description and the old ids.
    pub unmapped: BTreeMap<String, Vec<i64>>,
    /// Written now (0 on a dry run).
    pub tasks_new: usize,
    pub runs_new: usize,
    /// Found here already.
    pub tasks_there: usize,
    pub runs_there: usize,
}

/// The old status of a task, as Eagle's.
pub fn task_status(old: Option<&str>) -> Option<TaskStatus> {
    Some(match old.map(str::trim).unwrap_or("") {
        "" | "pending" | "null" => TaskStatus::Pending,
        "for_review" => TaskStatus::ForReview,
        "awaiting_go" => TaskStatus::AwaitingGo,
        "approved" | "in_progress" => TaskStatus::Approved,
        "skip" | "skipped" => TaskStatus::Skip,
        "done" | "complete" => TaskStatus::Done,
        "cancelled" | "canceled" => TaskStatus::Cancelled,
        _ => return None,
    })
}

/// The old state of a run, as Eagle's.
pub fn run_state(old: Option<&str>) -> Option<RunState> {
    Some(match old.map(str::trim).unwrap_or("") {
        "queued" => RunState::Queued,
        "in_progress" => RunState::InProgress,
        "pr" | "ci_running" | "awaiting_review" => RunState::Pr,
        "complete" => RunState::Complete,
        "abandoned" => RunState::Abandoned,
        "cancelled" | "canceled" => RunState::Cancelled,
        _ => return None,
    })
}

/// The task's key here: a bare Asana gid (digits) gets intake's prefix.
pub fn task_gid(old: &str) -> String {
    let old = old.trim();
    if !old.is_empty() && old.bytes().all(|b| b.is_ascii_digit()) {
        format!("asana:{old}")
    } else {
        old.to_string()
    }
}

/// The first non-empty line of the description (capped), else the gid.
pub fn title_of(description: &str, gid: &str) -> String {
    description
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(|l| one_line(l, 200))
        .unwrap_or_else(|| format!("task {gid}"))
}

/// The notes: the old `notes`, then `user_context` (seed 003: "user_context
/// → notes"), each once.
fn notes_of(task: &LegacyTask) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in [task.notes.as_deref(), task.user_context.as_deref()]
        .into_iter()
        .flatten()
    {
        let part = part.trim();
        if !part.is_empty() && !parts.contains(&part) {
            parts.push(part);
        }
    }
    parts.join("\n\n")
}

fn label(old: Option<&str>) -> String {
    match old.map(str::trim) {
        None | Some("") => "(none)".into(),
        Some(s) => one_line(s, 40),
    }
}

/// Maps one task, or says why it cannot be.
pub fn map_task(task: &LegacyTask) -> Result<ImportedTask, String> {
    let status = task_status(task.status.as_deref())
        .ok_or_else(|| format!("task status {:?}", label(task.status.as_deref())))?;
    if task.task_gid.trim().is_empty() {
        return Err("task without a task_gid".into());
    }
    let gid = task_gid(&task.task_gid);
    let description = task.description.clone().unwrap_or_default();
    let now = Utc::now();
    let added_at = task.added_at.unwrap_or(now);
    Ok(ImportedTask {
        title: title_of(&description, &task.task_gid),
        task_gid: gid,
        source: task
            .source
            .clone()
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| SYSTEM.into()),
        description,
        notes: notes_of(task),
        status,
        status_reason: Some(match task.status.as_deref().map(str::trim) {
            Some("skip") | Some("skipped") => "skipped by the old executor".into(),
            Some(old) if !old.is_empty() => format!("imported from {SYSTEM} ({old})"),
            _ => format!("imported from {SYSTEM}"),
        }),
        priority: task.priority,
        complexity: task.complexity.clone(),
        feasibility: task.feasibility.clone(),
        analysis_summary: task.analysis_summary.clone(),
        added_at,
        updated_at: task.updated_at.unwrap_or(added_at),
    })
}

/// Maps one run, or says why it cannot be.
pub fn map_run(run: &LegacyRun) -> Result<ImportedRun, String> {
    let state = run_state(run.state.as_deref())
        .ok_or_else(|| format!("run state {:?}", label(run.state.as_deref())))?;
    let Some(gid) = run.task_gid.as_deref().filter(|g| !g.trim().is_empty()) else {
        return Err("run without a task_gid".into());
    };
    let old = label(run.state.as_deref());
    let link = run.pr_url.as_deref().and_then(PrLink::find);
    let now = Utc::now();
    let updated_at = run.updated_at.or(run.started_at).unwrap_or(now);
    Ok(ImportedRun {
        imported_from: format!("{SYSTEM}:{}", run.id),
        task_gid: task_gid(gid),
        state,
        state_reason: format!("imported from {SYSTEM} run {} ({old})", run.id),
        worktree_path: run.worktree_path.clone(),
        branch_name: run.branch_name.clone().filter(|b| !b.trim().is_empty()),
        pr_url: run.pr_url.clone(),
        pr_number: run
            .pr_number
            .or_else(|| link.as_ref().map(|l| l.number))
            .filter(|n| *n > 0),
        pr_repo: link.and_then(|l| l.repo),
        ci_attempts: run.ci_attempts.unwrap_or(0).max(0),
        worker_session_id: run.worker_session_id.clone(),
        worker_stuck_count: run.worker_stuck_count.unwrap_or(0).max(0),
        created_at: run.started_at.unwrap_or(updated_at),
        started_at: run.started_at,
        updated_at,
        completed_at: run.completed_at,
    })
}

/// Reads the old database page by page and brings in what maps (unless
/// `dry_run`). Tasks first, so every run finds its task.
pub async fn import(
    store: &Store,
    old: &LegacyDb,
    dry_run: bool,
    batch: i64,
) -> anyhow::Result<Report> {
    let batch = batch.clamp(1, 10_000);
    let mut report = Report::default();
    // The gids brought in (or there already), for the runs' check.
    let mut gids: HashMap<String, ()> = HashMap::new();
    let mut after = 0;
    loop {
        let page = old.tasks(after, batch).await?;
        let Some(last) = page.last() else { break };
        after = last.id;
        let mut tx = if dry_run {
            store.begin_read().await?
        } else {
            store.begin_write().await?
        };
        for task in &page {
            *report
                .task_statuses
                .entry(label(task.status.as_deref()))
                .or_default() += 1;
            let mapped = match map_task(task) {
                Ok(mapped) => mapped,
                Err(why) => {
                    report.unmapped.entry(why).or_default().push(task.id);
                    continue;
                }
            };
            *report
                .task_mapped
                .entry(mapped.status.as_str())
                .or_default() += 1;
            let there = tx.imports().has_task(&mapped.task_gid).await?;
            if there {
                report.tasks_there += 1;
            } else if !dry_run {
                match tx.imports().import_task(&mapped).await? {
                    Some(_) => report.tasks_new += 1,
                    None => report.tasks_there += 1,
                }
            }
            gids.insert(mapped.task_gid, ());
        }
        if !dry_run {
            tx.notify().await?;
            tx.commit().await?;
        }
    }
    let mut after = 0;
    loop {
        let page = old.runs(after, batch).await?;
        let Some(last) = page.last() else { break };
        after = last.id;
        let mut tx = if dry_run {
            store.begin_read().await?
        } else {
            store.begin_write().await?
        };
        for run in &page {
            *report
                .run_states
                .entry(label(run.state.as_deref()))
                .or_default() += 1;
            let mapped = match map_run(run) {
                Ok(mapped) => mapped,
                Err(why) => {
                    report.unmapped.entry(why).or_default().push(run.id);
                    continue;
                }
            };
            if !gids.contains_key(&mapped.task_gid)
                && !tx.imports().has_task(&mapped.task_gid).await?
            {
                report
                    .unmapped
                    .entry("run whose task is not imported".into())
                    .or_default()
                    .push(run.id);
                continue;
            }
            *report.run_mapped.entry(mapped.state.as_str()).or_default() += 1;
            if dry_run {
                continue;
            }
            match tx.imports().import_run(&mapped).await? {
                Some(_) => report.runs_new += 1,
                None => report.runs_there += 1,
            }
        }
        if !dry_run {
            tx.notify().await?;
            tx.commit().await?;
        }
    }
    if !dry_run && (report.tasks_new > 0 || report.runs_new > 0) {
        let mut tx = store.begin_write().await?;
        tx.audit_log()
            .audit(&NewAuditEntry {
                actor: "eagle import".into(),
                action: format!("import.{SYSTEM}"),
                subject: format!("import:{SYSTEM}"),
                decision: Some(format!(
                    "{} task(s), {} run(s) imported",
                    report.tasks_new, report.runs_new
                )),
                reason: Some(format!("from {}", old.shown())),
                ..NewAuditEntry::default()
            })
            .await?;
        tx.commit().await?;
    }
    Ok(report)
}

impl Report {
    /// What an operator reads: counts per status and state, as they were
    /// there and as they become here, and what cannot be mapped.
    pub fn text(&self, dry_run: bool) -> String {
        let counts = |map: &BTreeMap<String, usize>| {
            let mut pairs: Vec<(&String, &usize)> = map.iter().collect();
            pairs.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            pairs
                .iter()
                .map(|(k, n)| format!("{n} {k}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mapped = |map: &BTreeMap<&'static str, usize>| {
            map.iter()
                .map(|(k, n)| format!("{n} {k}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let total = |map: &BTreeMap<String, usize>| map.values().sum::<usize>();
        let mut out = String::new();
        out.push_str(&format!(
            "executor_queue: {} task(s): {}\n",
            total(&self.task_statuses),
            counts(&self.task_statuses)
        ));
        out.push_str(&format!(
            "executor_runs: {} run(s): {}\n",
            total(&self.run_states),
            counts(&self.run_states)
        ));
        let verb = if dry_run { "would become" } else { "became" };
        out.push_str(&format!("tasks {verb}: {}\n", mapped(&self.task_mapped)));
        out.push_str(&format!("runs {verb}: {}\n", mapped(&self.run_mapped)));
        if self.unmapped.is_empty() {
            out.push_str("cannot map: nothing\n");
        } else {
            for (what, ids) in &self.unmapped {
                let shown: Vec<String> = ids.iter().take(LISTED).map(i64::to_string).collect();
                let more = if ids.len() > LISTED { ", …" } else { "" };
                out.push_str(&format!(
                    "cannot map: {} {what} (id {}{more})\n",
                    ids.len(),
                    shown.join(", ")
                ));
            }
        }
        if dry_run {
            out.push_str(&format!(
                "dry run: nothing written; {} task(s) are here already\n",
                self.tasks_there
            ));
        } else {
            out.push_str(&format!(
                "imported {} task(s) and {} run(s); {} task(s) and {} run(s) were here already\n",
                self.tasks_new, self.runs_new, self.tasks_there, self.runs_there
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_and_states_map_as_the_seed_says() {
        for (old, new) in [
            (None, Some(TaskStatus::Pending)),
            (Some("for_review"), Some(TaskStatus::ForReview)),
            (Some("awaiting_go"), Some(TaskStatus::AwaitingGo)),
            (Some("in_progress"), Some(TaskStatus::Approved)),
            (Some("skip"), Some(TaskStatus::Skip)),
            (Some("done"), Some(TaskStatus::Done)),
            (Some("weird"), None),
        ] {
            assert_eq!(task_status(old), new, "{old:?}");
        }
        for (old, new) in [
            (Some("ci_running"), Some(RunState::Pr)),
            (Some("awaiting_review"), Some(RunState::Pr)),
            (Some("queued"), Some(RunState::Queued)),
            (Some("in_progress"), Some(RunState::InProgress)),
            (Some("complete"), Some(RunState::Complete)),
            (Some("abandoned"), Some(RunState::Abandoned)),
            (Some("recording"), None),
            (None, None),
        ] {
            assert_eq!(run_state(old), new, "{old:?}");
        }
    }

    #[test]
    fn gids_titles_and_notes() {
        assert_eq!(task_gid("1200000000000123"), "asana:1200000000000123");
        assert_eq!(task_gid("asana:12"), "asana:12");
        assert_eq!(task_gid("zulip:5"), "zulip:5");
        assert_eq!(title_of("\n  Fix the tab\nmore", "1"), "Fix the tab");
        assert_eq!(title_of("", "7"), "task 7");
        let task = LegacyTask {
            id: 1,
            task_gid: "1".into(),
            added_at: None,
            updated_at: None,
            source: None,
            description: Some("Fix it".into()),
            notes: Some("a".into()),
            user_context: Some("Alex: only on macOS 15".into()),
            status: Some("awaiting_go".into()),
            priority: Some(2),
            complexity: None,
            feasibility: None,
            analysis_summary: None,
            executor_run_id: None,
        };
        let mapped = map_task(&task).unwrap();
        assert_eq!(mapped.notes, "a\n\nAlex: only on macOS 15");
        assert_eq!(mapped.source, SYSTEM);
        assert_eq!(mapped.priority, Some(2));
    }

    #[test]
    fn a_run_keeps_its_pr_and_branch() {
        let run = LegacyRun {
            id: 10,
            task_gid: Some("42".into()),
            worktree_path: Some("/w/42".into()),
            branch_name: Some("fix/42".into()),
            pr_url: Some("https://github.com/acme/app/pull/77".into()),
            pr_number: None,
            thread_id: None,
            started_at: None,
            updated_at: None,
            completed_at: None,
            state: Some("ci_running".into()),
            ci_attempts: Some(1),
            worker_session_id: Some("s-1".into()),
            worker_stuck_count: None,
        };
        let mapped = map_run(&run).unwrap();
        assert_eq!(mapped.state, RunState::Pr);
        assert_eq!(mapped.pr_number, Some(77));
        assert_eq!(mapped.pr_repo.as_deref(), Some("acme/app"));
        assert_eq!(mapped.task_gid, "asana:42");
        assert_eq!(mapped.imported_from, "executor-v2:10");
        assert!(mapped.state_reason.contains("ci_running"));
    }
}
