//! `!status`, `!queue` (the listing) and `!why`: what is queued and running,
//! what each run's worker is doing, what it waits on, and who decided what.
//!
//! Text that people or workers wrote (titles, descriptions, reasons) is
//! echoed with its mentions made inert, and a private task's text is shown
//! only where its origin is visible: its own direct conversation, or an
//! approver's direct messages.

use chrono::{DateTime, Utc};

use super::CommandReply;
use super::WhyTarget;
use crate::chat::message::{InboundMessage, Place};
use crate::ground::text::{neutralize_mentions, one_line};
use crate::store::{
    Control, EgressRefusal, RUNNER_PRESENCE_PREFIX, Request, Run, StoreError, Task, Tx,
};

/// Open tasks and runs shown per `!status` page.
const PAGE_SIZE: i64 = 15;
/// The longest description shown by `!status <task>`.
const DESCRIPTION_PREVIEW_CHARS: usize = 600;

/// Text people wrote, safe to echo: mentions inert.
fn echo(text: &str) -> String {
    neutralize_mentions(text)
}

/// Whether a task's text may be shown in reply to `message`: anywhere for a
/// public task; for a private one, in its own channel, in its requester's
/// direct messages, or in an approver's.
pub(super) fn visible(task: &Task, message: &InboundMessage, approver: bool) -> bool {
    if !task.origin_private {
        return true;
    }
    match &message.place {
        Place::Direct { .. } => approver || task.requested_by_id == Some(message.sender.user_id),
        // Its own private channel: the same people see it there.
        Place::Channel { channel, .. } => task
            .origin_channel
            .as_deref()
            .is_some_and(|c| crate::ground::text::eq_fold(c, channel)),
    }
}

pub(super) async fn overview(
    tx: &mut Tx,
    message: &InboundMessage,
    approver: bool,
    page: u32,
    with_counts: bool,
) -> Result<CommandReply, StoreError> {
    let offset = i64::from(page - 1) * PAGE_SIZE;
    let mut out = String::new();
    if with_counts {
        let counts = tx.tasks().status_counts().await?;
        if counts.tasks.is_empty() && counts.runs.is_empty() {
            return Ok(CommandReply::ok(
                "Nothing queued or running. `!queue <title>` adds a task.",
            ));
        }
        let tasks = join_counts(counts.tasks.iter().map(|(s, n)| (s.as_str(), *n)));
        let runs = join_counts(counts.runs.iter().map(|(s, n)| (s.as_str(), *n)));
        out.push_str(&format!("**Tasks**: {tasks} · **Runs**: {runs}\n"));
        out.push_str(&executors_line(tx).await?);
    }
    let task_total = tx.tasks().open_task_count().await?;
    let run_total = tx.tasks().open_run_count().await?;
    let tasks = tx.tasks().open_tasks(offset, PAGE_SIZE).await?;
    let runs = if with_counts {
        tx.tasks().open_runs(offset, PAGE_SIZE).await?
    } else {
        Vec::new()
    };
    if task_total == 0 {
        out.push_str("The inbox is empty.");
    } else {
        out.push_str(&format!("**Open tasks** ({task_total}):\n"));
        for task in &tasks {
            out.push_str(&format!("* {}\n", task_line(task, message, approver)));
        }
        if tasks.is_empty() {
            out.push_str("* (none on this page)\n");
        }
    }
    if with_counts && run_total > 0 {
        out.push_str(&format!("\n**Open runs** ({run_total}):\n"));
        for run in &runs {
            let requests = tx.requests().requests_of_run(run.id).await?;
            out.push_str(&format!("* {}\n", run_line(run, &requests)));
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
        out.push_str(&format!(
            "Page {page} of {pages}: `!status page {}` shows more.",
            page + 1
        ));
    }
    Ok(CommandReply::ok(out.trim_end().to_string()))
}

/// Who is there to run the work: live runners, busy slots, the switches.
async fn executors_line(tx: &mut Tx) -> Result<String, StoreError> {
    let runners = tx.leases().live_leases(RUNNER_PRESENCE_PREFIX).await?;
    let busy = tx.claims().busy_slots().await?;
    let mut line = match runners {
        0 => "**Executors**: none running (start one: `eagle run --profile executor`)".to_string(),
        n => format!("**Executors**: {n} running, {busy} worker(s) busy"),
    };
    let unconfined = tx
        .leases()
        .live_leases(crate::confine::sandbox::UNCONFINED_PRESENCE)
        .await?;
    if unconfined > 0 {
        line.push_str(&format!(
            " · **workers run unconfined** on {unconfined} of them (`[runner.sandbox] mode = \"off\"`: no sandbox)"
        ));
    }
    if tx.controls().control(Control::Paused).await? {
        line.push_str(" · **paused** (`!resume` starts new work again)");
    }
    if tx.controls().control(Control::HoldAll).await? {
        line.push_str(" · **every run held** (`!unhold all` lets them go on)");
    }
    line.push('\n');
    Ok(line)
}

fn join_counts<'a>(counts: impl Iterator<Item = (&'a str, i64)>) -> String {
    let parts: Vec<String> = counts.map(|(s, n)| format!("{n} {s}")).collect();
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(", ")
    }
}

fn task_line(task: &Task, message: &InboundMessage, approver: bool) -> String {
    if !visible(task, message, approver) {
        return format!("#{} (a private task) ({})", task.id, task.status.as_str());
    }
    let who = task
        .requested_by
        .as_deref()
        .map(|w| format!(", from {}", echo(w)))
        .unwrap_or_default();
    format!(
        "#{} {} ({}{who})",
        task.id,
        echo(&task.title),
        task.status.as_str()
    )
}

/// One line about a run: its state, its worker, what it waits on.
fn run_line(run: &Run, requests: &[Request]) -> String {
    let mut line = format!(
        "run {} · task {} · {}",
        run.id,
        run.task_gid,
        run.state.as_str()
    );
    if let Some(pr) = run.pr_number {
        line.push_str(&format!(" · PR #{pr}"));
    }
    if let (false, Some(status)) = (run.has_worker(), &run.pr_status) {
        line.push_str(&format!(" · {}", echo(&one_line(status, 120))));
    }
    if run.has_worker() {
        line.push_str(&format!(
            " · worker pid {} ({}, attempt {})",
            run.worker_pid.unwrap_or_default(),
            run.prompt_kind.as_deref().unwrap_or("?"),
            run.attempt
        ));
    }
    if run.held {
        line.push_str(" · held");
    }
    let open: Vec<Request> = requests
        .iter()
        .filter(|r| r.status.is_open())
        .cloned()
        .collect();
    if !open.is_empty() {
        line.push_str(&format!(" · {}", crate::store::requests_summary(&open)));
    }
    if let Some(who) = &run.waiting_on {
        line.push_str(&format!(" · waiting on {}", echo(who)));
    }
    line
}

fn when(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M UTC").to_string()
}

/// The destinations shown per run by `!status run N`.
const REFUSALS_SHOWN: usize = 3;

/// What the egress proxy refused the run, in one line (`None`: nothing):
/// "network: refused 3 requests to `evil.example:443` (last …: why)". A
/// request is a connection the worker asked for, or one request on a
/// connection whose requests the proxy reads (the model API's, a host
/// limited to some methods).
fn network_line(refusals: &[EgressRefusal]) -> Option<String> {
    let total: i64 = refusals.iter().map(|r| r.count).sum();
    let plural = |n: i64| if n == 1 { "request" } else { "requests" };
    let place = |r: &EgressRefusal| match r.host.as_str() {
        crate::store::OTHER_HOSTS => "other hosts".to_string(),
        host if host.contains(':') => format!("`[{host}]:{}`", r.port),
        host => format!("`{host}:{}`", r.port),
    };
    let last = |r: &EgressRefusal| {
        let why = neutralize_mentions(&one_line(&r.reason, 160));
        if why.is_empty() {
            format!("last {}", when(r.last_at))
        } else {
            format!("last {}: {why}", when(r.last_at))
        }
    };
    match refusals {
        [] => None,
        [only] => Some(format!(
            "network: refused {} {} to {} ({})",
            only.count,
            plural(only.count),
            place(only),
            last(only)
        )),
        many => {
            let mut parts: Vec<String> = many
                .iter()
                .take(REFUSALS_SHOWN)
                .map(|r| format!("{} to {} ({})", r.count, place(r), last(r)))
                .collect();
            if many.len() > REFUSALS_SHOWN {
                parts.push(format!(
                    "and {} more destinations",
                    many.len() - REFUSALS_SHOWN
                ));
            }
            Some(format!(
                "network: refused {total} {}: {}",
                plural(total),
                parts.join(", ")
            ))
        }
    }
}

pub(super) async fn task_status(
    tx: &mut Tx,
    message: &InboundMessage,
    approver: bool,
    id: i64,
) -> Result<CommandReply, StoreError> {
    let Some(task) = tx.tasks().task(id).await? else {
        return Ok(CommandReply::refused(format!(
            "There is no task #{id}. `!status` lists the open ones."
        )));
    };
    let runs = tx.tasks().runs_of_task(&task.task_gid).await?;
    let mut out;
    if visible(&task, message, approver) {
        out = format!("**Task #{}**: {}\n", task.id, echo(&task.title));
        out.push_str(&format!(
            "status: {} · source: {} · added {}",
            task.status.as_str(),
            task.source,
            when(task.added_at)
        ));
        if let Some(who) = &task.requested_by {
            out.push_str(&format!(" by {}", echo(who)));
        }
        if let (Some(channel), Some(topic)) = (&task.origin_channel, &task.origin_topic) {
            out.push_str(&format!(" in #{channel} > {}", echo(topic)));
        }
        if let Some(repo) = &task.repo {
            out.push_str(&format!(" · repository: {}", echo(repo)));
        }
        out.push('\n');
        if let Some(reason) = &task.status_reason {
            out.push_str(&format!("reason: {}\n", echo(&one_line(reason, 500))));
        }
        if task.status == crate::store::TaskStatus::Skip {
            out.push_str(&skip_lines(&task));
        }
        if let Some(summary) = &task.analysis_summary {
            out.push_str(&format!("analysis: {}\n", echo(summary)));
        }
        let facts: Vec<String> = [
            task.complexity
                .as_ref()
                .map(|c| format!("complexity {}", echo(c))),
            task.feasibility
                .as_ref()
                .map(|f| format!("feasibility {}", echo(f))),
            task.priority.map(|p| format!("priority {p}")),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !facts.is_empty() {
            out.push_str(&format!("{}\n", facts.join(" · ")));
        }
        if task.analysis_raw.is_some() {
            out.push_str("(the analysis answer could not be read; it is kept as it was)\n");
        }
        if let Some(url) = &task.external_url {
            out.push_str(&format!("in {}: {}\n", task.source, echo(url)));
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
            out.push_str(&format!("```quote\n{}{more}\n```\n", echo(&preview)));
        }
    } else {
        out = format!(
            "**Task #{}** (a private task: its text is shown only where it was asked)\nstatus: {}\n",
            task.id,
            task.status.as_str()
        );
    }
    if runs.is_empty() {
        out.push_str("Runs: none yet.");
    } else {
        out.push_str("Runs:\n");
        for run in &runs {
            let requests = tx.requests().requests_of_run(run.id).await?;
            out.push_str(&format!("* {}\n", run_line(run, &requests)));
        }
    }
    Ok(CommandReply::ok(out.trim_end().to_string()))
}

pub(super) async fn run_status(
    tx: &mut Tx,
    message: &InboundMessage,
    approver: bool,
    id: i64,
) -> Result<CommandReply, StoreError> {
    let Some(run) = tx.tasks().run(id).await? else {
        return Ok(CommandReply::refused(format!(
            "There is no run {id}. `!status` lists the open ones."
        )));
    };
    let task = tx.tasks().task_by_gid(&run.task_gid).await?;
    let title = match &task {
        Some(t) if visible(t, message, approver) => format!("task #{} ({})", t.id, echo(&t.title)),
        Some(t) => format!("task #{} (private)", t.id),
        None => format!("task {}", run.task_gid),
    };
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
        out.push_str(&format!("last: {}\n", echo(&one_line(reason, 300))));
    }
    if let Some(repo) = task.as_ref().and_then(|t| t.repo.as_deref()) {
        out.push_str(&format!("repository: {}\n", echo(repo)));
    }
    if let Some(branch) = &run.branch_name {
        out.push_str(&format!("branch: {branch}\n"));
    }
    if let Some(setup) = &run.setup_outcome {
        out.push_str(&format!("setup: {}\n", echo(&one_line(setup, 300))));
    }
    if run.dry_run {
        out.push_str("dry run: yes (nothing it asks for is carried out; its topic says what would have been)\n");
    }
    match (&run.pr_url, run.pr_number) {
        (Some(url), _) => out.push_str(&format!("PR: {}\n", echo(url))),
        (None, Some(n)) => out.push_str(&format!("PR: #{n}\n")),
        (None, None) => {}
    }
    if let Some(head) = &run.head_sha {
        out.push_str(&format!("head: {}\n", echo(crate::store::short_sha(head))));
    }
    if let Some(status) = &run.pr_status {
        let work = run
            .pr_work
            .0
            .map(|w| format!(" (next: a {} worker)", w.as_str()))
            .unwrap_or_default();
        out.push_str(&format!(
            "PR loop: {}{work}\n",
            echo(&one_line(status, 300))
        ));
    } else if run.state == crate::store::RunState::Pr {
        out.push_str("PR loop: not looked at yet\n");
    }
    if run.ci_attempts > 0 {
        out.push_str(&format!("CI attempts: {}\n", run.ci_attempts));
    }
    if run.has_worker() {
        let seen = run
            .worker_last_update
            .map(when)
            .unwrap_or_else(|| "never".into());
        out.push_str(&format!(
            "worker: pid {}, {} (attempt {}), started {}, last output {seen}\n",
            run.worker_pid.unwrap_or_default(),
            run.prompt_kind.as_deref().unwrap_or("?"),
            run.attempt,
            run.worker_started_at
                .map(when)
                .unwrap_or_else(|| "?".into()),
        ));
    } else if run.attempt > 0 && !run.state.is_final() {
        out.push_str(&format!(
            "worker: none now ({} attempt(s) so far, {} failed)\n",
            run.attempt, run.failures
        ));
    }
    if run.cost_usd > 0.0 || run.turns > 0 {
        let cap = run
            .cost_cap_usd
            .map(|c| format!(" of a ${c:.2} cap"))
            .unwrap_or_default();
        out.push_str(&format!(
            "cost: ${:.4}{cap} · turns: {}\n",
            run.cost_usd, run.turns
        ));
    }
    if run.held {
        out.push_str(&format!(
            "held: yes (`!unhold {}` or `!retry {}` releases it)\n",
            run.id, run.id
        ));
    }
    if let Some(who) = &run.waiting_on {
        out.push_str(&format!("waiting on: {}\n", echo(who)));
    }
    let said = tx.conversations().status_lines(run.id).await?;
    if !said.is_empty() {
        out.push_str("the worker said last:\n");
        for line in &said {
            out.push_str(&format!(
                "* {} — {}\n",
                when(line.at),
                echo(&one_line(&line.text, 300))
            ));
        }
    }
    if let Some(line) = network_line(&tx.egress().egress_refusals(run.id).await?) {
        out.push_str(&line);
        out.push('\n');
    }
    let requests = tx.requests().requests_of_run(run.id).await?;
    if !requests.is_empty() {
        out.push_str("requests:\n");
        // The newest matter most; the audit log keeps the rest.
        for r in requests.iter().rev().take(10).rev() {
            let by = r
                .decided_by
                .as_deref()
                .map(|b| format!(" by {}", echo(b)))
                .unwrap_or_default();
            let answer = if r.status.is_open() {
                format!(
                    " — `!approve {} {}` or `!deny {} {} <reason>`",
                    run.id, r.id, run.id, r.id
                )
            } else {
                String::new()
            };
            let carried = r
                .carried_out
                .as_deref()
                .map(|c| format!(" · {}", echo(&one_line(c, 200))))
                .unwrap_or_default();
            out.push_str(&format!(
                "* req {} {} ({}{by}){answer}{carried}\n",
                r.id,
                r.action,
                r.status.as_str()
            ));
        }
        if requests.len() > 10 {
            out.push_str(&format!(
                "* … and {} earlier (`!why run {}`)\n",
                requests.len() - 10,
                run.id
            ));
        }
    }
    Ok(CommandReply::ok(out.trim_end().to_string()))
}

/// The task `!why` is asked about, directly or through its run or request.
async fn task_of_target(tx: &mut Tx, target: WhyTarget) -> Result<Option<Task>, StoreError> {
    let run_id = match target {
        WhyTarget::Task(id) => return tx.tasks().task(id).await,
        WhyTarget::Run(id) => Some(id),
        WhyTarget::Request(id) => tx.requests().request(id).await?.map(|r| r.run_id),
    };
    let Some(run) = (match run_id {
        Some(id) => tx.tasks().run(id).await?,
        None => None,
    }) else {
        return Ok(None);
    };
    tx.tasks().task_by_gid(&run.task_gid).await
}

pub(super) async fn why(
    tx: &mut Tx,
    message: &InboundMessage,
    approver: bool,
    target: WhyTarget,
) -> Result<CommandReply, StoreError> {
    // A private task's trail quotes its text (skip reasons, the analysis,
    // requests): shown only where `!status` would show the task.
    let hidden = task_of_target(tx, target)
        .await?
        .is_some_and(|task| !visible(&task, message, approver));
    let subject = target.subject();
    let mut entries = tx.audit_log().audit_trail(&subject).await?;
    if let WhyTarget::Run(run) = target {
        // A run's story includes the decisions on its requests.
        for request in tx.requests().requests_of_run(run).await? {
            entries.extend(
                tx.audit_log()
                    .audit_trail(&format!("request:{}", request.id))
                    .await?,
            );
        }
        entries.sort_by_key(|e| e.id);
    }
    if entries.is_empty() {
        return Ok(CommandReply::refused(format!(
            "The audit log has nothing about {}.",
            subject.replace(':', " ")
        )));
    }
    let mut out = format!("**Audit trail of {}**:\n", subject.replace(':', " "));
    if hidden {
        out.push_str("(a private task: what it says, and why, is shown only where it was asked)\n");
    }
    let total = entries.len();
    let skip = total.saturating_sub(40);
    if skip > 0 {
        out.push_str(&format!("* … {skip} earlier entries\n"));
    }
    for entry in entries.into_iter().skip(skip) {
        out.push_str(&format!(
            "* {} · {} · {}",
            when(entry.at),
            echo(&one_line(&entry.actor, 120)),
            entry.action
        ));
        if entry.subject != subject {
            out.push_str(&format!(" ({})", entry.subject.replace(':', " ")));
        }
        if let Some(decision) = &entry.decision {
            out.push_str(&format!(" → {}", one_line(decision, 60)));
        }
        if let Some(name) = &entry.plugin_name {
            let version = entry.plugin_version.as_deref().unwrap_or("?");
            let hash = entry
                .plugin_hash
                .as_deref()
                .map(short_hash)
                .unwrap_or_default();
            out.push_str(&format!(
                " (plugin {} {} sha256:{hash})",
                echo(&one_line(name, 64)),
                echo(&one_line(version, 32))
            ));
        }
        if let Some(reason) = entry.reason.as_ref().filter(|_| !hidden) {
            out.push_str(&format!(": {}", echo(&one_line(reason, 300))));
        }
        out.push('\n');
    }
    Ok(CommandReply::ok(out.trim_end().to_string()))
}

fn short_hash(hash: &str) -> String {
    hash.chars().take(12).collect()
}

/// Who skipped a task and why: each filter with its reason, or the analysis.
fn skip_lines(task: &crate::store::Task) -> String {
    match task.skipped_by.as_deref() {
        Some("filter") => {
            let reasons: Vec<crate::store::SkipReason> = task
                .skip_reasons
                .as_deref()
                .and_then(|json| serde_json::from_str(json).ok())
                .unwrap_or_default();
            let mut out = String::from("skipped by a filter:\n");
            for r in reasons {
                out.push_str(&format!(
                    "* {}: {}\n",
                    echo(&r.plugin),
                    echo(&one_line(&r.reason, 300))
                ));
            }
            out.push_str(&format!(
                "An approver's `!go {}` takes it anyway.\n",
                task.id
            ));
            out
        }
        Some("analysis") => format!(
            "skipped by the analysis. An approver's `!go {}` takes it anyway.\n",
            task.id
        ),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(host: &str, port: i64, count: i64, reason: &str) -> EgressRefusal {
        let at = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        EgressRefusal {
            run_id: 1,
            host: host.into(),
            port,
            reason: reason.into(),
            first_at: at,
            last_at: at,
            count,
        }
    }

    #[test]
    fn the_network_line_says_where_and_why() {
        assert_eq!(network_line(&[]), None);
        assert_eq!(
            network_line(&[refusal(
                "evil.example",
                443,
                1,
                "evil.example:443 is not in runner.sandbox.allow_hosts"
            )])
            .unwrap(),
            "network: refused 1 request to `evil.example:443` (last 2027-01-15 08:00 UTC: \
             evil.example:443 is not in runner.sandbox.allow_hosts)"
        );
        let line = network_line(&[
            refusal(
                "api.anthropic.com",
                443,
                2,
                "a call of the model API carries a key\nother than @**all**",
            ),
            refusal("::1", 80, 1, ""),
        ])
        .unwrap();
        assert_eq!(
            line,
            "network: refused 3 requests: 2 to `api.anthropic.com:443` (last 2027-01-15 08:00 UTC: \
             a call of the model API carries a key other than @\u{200B}**all**), \
             1 to `[::1]:80` (last 2027-01-15 08:00 UTC)"
        );
    }
}
