//! Starting a worker: a claimed run's directory, prompt, session, socket and
//! token, the worker shim started with them and recorded on the run; and a
//! re-adopted worker found from what its run recorded.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::{Handle, Worker, task_of};
use crate::executor::runner::output::LogReader;
use crate::executor::runner::spawn::{self, Launch, RunDir};
use crate::executor::runner::{PromptKind, Shared, shim_deadline, socket};
use crate::ground::host;
use crate::ground::text::one_line;
use crate::profile::WorkerKind;
use crate::store::{
    Claim, Fence, PrWork, Request, RequestStatus, Run, RunState, StoreError, Task, WorkerMirror,
};

/// Why a worker could not be started.
#[derive(Debug, thiserror::Error)]
pub(super) enum Failure {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The repository's setup failed: the run is held for its owner.
    #[error("the repository's setup failed: {0}")]
    Setup(String),
    /// The task names a repository this executor does not have: held.
    #[error("{0}")]
    NoRepository(String),
}

/// Prepares a claimed run, starts its worker and records it on the run with
/// a post; a worker whose record fails is killed at once.
pub(super) async fn launch(shared: &Arc<Shared>, claim: &Claim) -> Result<Worker, Failure> {
    let run = &claim.run;
    let fence = &claim.fence;
    let task = task_of(shared, run).await;
    let undelivered: Vec<Request> = shared
        .store
        .requests()
        .requests_of_run(run.id)
        .await?
        .into_iter()
        .filter(unlearnt)
        .collect();
    let kind = prompt_kind(claim);
    let repo = crate::executor::repos::of_task(&shared.settings.repos, task.as_ref())
        .map_err(|why| Failure::NoRepository(format!("{why}: no worker started")))?;
    let prepared = spawn::prepare_run(shared, run, task.as_ref(), repo).await?;
    let dir = prepared.dir;
    if prepared.fresh
        && let Some(repo) = repo
    {
        crate::executor::runner::setup::before_the_agent(shared, repo, &dir, run)
            .await
            .map_err(Failure::Setup)?;
    }
    let session = session(shared, run, kind, &dir)?;
    if shared.command.kind == WorkerKind::Claude {
        let settings = spawn::claude_settings(shared);
        let path = dir.eagle.join("settings.json");
        std::fs::write(
            &path,
            serde_json::to_vec_pretty(&settings).unwrap_or_default(),
        )?;
        host::chmod(&path, 0o644)?;
    }
    let branch = run
        .branch_name
        .clone()
        .unwrap_or_else(|| format!("eagle/run-{}", run.id));
    let mut values = prompt_values(run, task.as_ref(), fence, &dir, &branch, &undelivered);
    // What the review goes by; the checkout's rule files only for a review.
    let review = &shared.settings.review;
    if kind == PromptKind::PrReview {
        values.insert(
            "review_rules",
            crate::executor::runner::review::rules_text(&dir.work, &review.rules),
        );
    }
    values.insert(
        "required_checks",
        crate::executor::runner::review::checks_text(&review.checks),
    );
    values.insert(
        "acceptance",
        crate::executor::runner::review::acceptance_text(task.as_ref()),
    );
    let prompt = shared.prompts.render(kind, &values);
    let token = spawn::new_token()?;
    let token_sha256 = crate::policy::content_hash(token.as_bytes());
    let socket_path = dir.socket_path(shared, run.id, fence.attempt)?;
    let listener = socket::bind(&socket_path, shared)?;
    let egress = crate::confine::egress::bind(
        &spawn::egress_socket_path(&socket_path),
        shared.worker_user.as_ref(),
    )?;
    let log_path = spawn::log_path(shared, &run.task_gid, kind);
    let exit_path = dir.eagle.join(format!("exit-{}", fence.attempt));
    let limits = shared.settings.limits_for(kind.as_str());
    let deadline = shim_deadline(limits.hard, shared.settings.wrap_up_grace);
    let launch = Launch {
        prompt,
        session: session.clone(),
        remaining_budget: run
            .cost_cap_usd
            .or(shared.settings.max_cost_usd)
            .map(|cap| cap - run.cost_usd),
        run: run.id,
        task_id: task.as_ref().map_or(0, |t| t.id),
        attempt: fence.attempt,
    };
    let argv = spawn::argv(shared, &dir, &launch);
    let mut env = spawn::environment(shared, &dir, run.id, &socket_path, &token)?;
    super::super::effects::put_shims_first(&mut env, &dir.eagle, &shared.exe)?;
    drop(token);
    let sandbox = spawn::sandbox_spec(shared, &dir, &socket_path, fence.attempt, repo)?;
    let started = spawn::start(
        shared,
        &argv,
        &dir.eagle.join("rules.md"),
        &env,
        &dir.work,
        &log_path,
        &exit_path,
        deadline,
        sandbox.as_deref(),
        spawn::prompt_input(
            &dir.eagle,
            &format!("prompt-{}", fence.attempt),
            &launch.prompt,
        )?,
    )?;
    let mirror = WorkerMirror {
        pid: i64::from(started.pid),
        pgid: i64::from(started.pid),
        host: shared.host.clone(),
        start_ticks: started.start_ticks as i64,
        prompt_kind: kind.as_str().into(),
        session_id: session.map(|(s, _)| s),
        log_path: log_path.display().to_string(),
        exit_file: exit_path.display().to_string(),
        socket_path: socket_path.display().to_string(),
        token_sha256: token_sha256.clone(),
        workdir: dir.work.display().to_string(),
        branch: Some(branch),
        alive_for: deadline + Duration::from_secs(60),
    };
    let mut worker = Worker::new(
        shared,
        fence.clone(),
        task,
        kind,
        Handle {
            pid: Some(started.pid),
            child: Some(started.child),
            pidfd: None,
            log: LogReader::new(log_path, 0),
            exit_path,
            socket_path,
            elapsed: Duration::ZERO,
        },
    );
    let recorded = async {
        let mut tx = shared.store.begin_write().await?;
        tx.workers().record_worker(fence, &mirror).await?;
        let ids: Vec<i64> = undelivered.iter().map(|r| r.id).collect();
        tx.requests().mark_delivered(&ids).await?;
        let text = format!(
            "[STATUS: started] run:{} attempt {}: {} worker (pid {})",
            run.id,
            fence.attempt,
            kind.as_str(),
            started.pid
        );
        shared.poster.post(&mut tx, &run.topic(), &text).await?;
        tx.commit().await
    };
    if let Err(error) = recorded.await {
        // Without its record the worker must not run.
        worker.terminate(libc::SIGKILL);
        return Err(error.into());
    }
    worker.serve_listener(listener, token_sha256);
    worker.serve_egress(egress);
    tracing::info!(
        run = run.id,
        attempt = fence.attempt,
        kind = kind.as_str(),
        pid = started.pid,
        "worker started"
    );
    Ok(worker)
}

/// The worker of a run whose runner is gone, from what the run recorded:
/// read on from the recorded log offset, its limits those of the prompt it
/// was started with, its hard limit counted from its start. Its `pid` is
/// `None` when it is not alive any more.
pub(super) fn adopted(shared: &Arc<Shared>, run: &Run, fence: Fence, task: Option<Task>) -> Worker {
    let pid = run.worker_pid.unwrap_or(0) as i32;
    let ticks = run.worker_start_ticks.unwrap_or(0) as u64;
    // The pidfd first, then the check: the descriptor names the process
    // that was checked, whatever happens to its pid afterwards.
    let pidfd = host::pidfd(pid).ok();
    let alive = pidfd.is_some() && pid > 0 && host::is_alive(pid, ticks);
    let kind = run
        .prompt_kind
        .as_deref()
        .and_then(|k| PromptKind::ALL.into_iter().find(|p| p.as_str() == k))
        .unwrap_or(PromptKind::Continue);
    let elapsed = run
        .worker_started_at
        .map(|at| (crate::store::now() - at).to_std().unwrap_or_default())
        .unwrap_or_default();
    Worker::new(
        shared,
        fence,
        task,
        kind,
        Handle {
            pid: alive.then_some(pid),
            child: None,
            pidfd: if alive { pidfd } else { None },
            log: LogReader::new(
                PathBuf::from(run.log_path.clone().unwrap_or_default()),
                run.log_offset.max(0) as u64,
            ),
            exit_path: PathBuf::from(run.worker_exit_file.clone().unwrap_or_default()),
            socket_path: PathBuf::from(run.socket_path.clone().unwrap_or_default()),
            elapsed,
        },
    )
}

/// A decision the worker has not learnt yet: its next prompt tells it, or
/// it is resumed to learn it.
pub(super) fn unlearnt(request: &Request) -> bool {
    request.delivered_at.is_none()
        && matches!(
            request.status,
            RequestStatus::Approved | RequestStatus::Denied | RequestStatus::Expired
        )
}

/// What the worker is asked to do, by the state the run was claimed from
/// and the PR work asked for.
fn prompt_kind(claim: &Claim) -> PromptKind {
    match (claim.from, claim.run.pr_work.0) {
        (RunState::Queued, _) => PromptKind::Investigation,
        (RunState::Pr, Some(PrWork::FixCi)) => PromptKind::FixCi,
        (RunState::Pr, Some(PrWork::FixComments)) => PromptKind::FixComments,
        (RunState::Pr, Some(PrWork::PrReview)) => PromptKind::PrReview,
        _ => PromptKind::Continue,
    }
}

/// Claude Code's session and whether it is resumed: the run's own when its
/// transcript is kept (never for a new investigation), else a new one.
/// `None` for other workers.
fn session(
    shared: &Shared,
    run: &Run,
    kind: PromptKind,
    dir: &RunDir,
) -> std::io::Result<Option<(String, bool)>> {
    if shared.command.kind != WorkerKind::Claude {
        return Ok(None);
    }
    Ok(Some(match run.worker_session_id.as_deref() {
        Some(s) if kind != PromptKind::Investigation && transcript_exists(dir, s) => {
            (s.to_string(), true)
        }
        _ => (spawn::new_uuid()?, false),
    }))
}

/// Whether Claude Code kept a transcript of this session (so it can be resumed).
fn transcript_exists(dir: &RunDir, session: &str) -> bool {
    let projects = dir.home.join(".claude").join("projects");
    let Ok(entries) = std::fs::read_dir(projects) else {
        return false;
    };
    entries
        .flatten()
        .any(|e| e.path().join(format!("{session}.jsonl")).is_file())
}

/// The prompt's placeholders (`prompts/README.md` lists them).
fn prompt_values(
    run: &Run,
    task: Option<&Task>,
    fence: &Fence,
    dir: &RunDir,
    branch: &str,
    undelivered: &[Request],
) -> BTreeMap<&'static str, String> {
    [
        ("run_id", run.id.to_string()),
        ("task_id", task.map_or(0, |t| t.id).to_string()),
        ("attempt", fence.attempt.to_string()),
        ("title", task.map(|t| t.title.clone()).unwrap_or_default()),
        (
            "description",
            task.map(|t| t.description.clone()).unwrap_or_default(),
        ),
        ("workdir", dir.work.display().to_string()),
        ("branch", branch.to_string()),
        ("pr_url", pr_url(run)),
        ("pr_status", run.pr_status.clone().unwrap_or_default()),
        ("pr_threads", threads_text(run)),
        ("decisions", decisions_text(undelivered)),
    ]
    .into_iter()
    .collect()
}

/// The PR's open review threads as the PR loop last read them, one line
/// each with the id `eagle request reply_thread` takes (the worker cannot
/// read GitHub itself). The excerpts are the reviewers' words: data.
fn threads_text(run: &Run) -> String {
    let Some(memo) = run
        .pr_poll
        .as_deref()
        .and_then(|m| serde_json::from_str::<crate::executor::pr_loop::Memo>(m).ok())
    else {
        return "(none read yet)".into();
    };
    if memo.open_threads.is_empty() {
        return "(none)".into();
    }
    memo.open_threads
        .iter()
        .map(|t| {
            let at = match t.line {
                Some(line) => format!("{}:{line}", t.path),
                None => t.path.clone(),
            };
            format!(
                "- thread {} at {at}{} by {}: {}",
                t.id,
                if t.outdated { " (outdated)" } else { "" },
                t.last_author.as_deref().unwrap_or("(deleted user)"),
                crate::ground::text::one_line(&t.excerpt, 300)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The decisions a worker has not learnt yet, as lines for its prompt.
fn decisions_text(requests: &[Request]) -> String {
    if requests.is_empty() {
        return String::new();
    }
    let mut out = String::from("Eagle's answers to your earlier requests (follow them):\n");
    for r in requests {
        let (tag, extra) = match r.status {
            RequestStatus::Approved => (
                "APPROVED",
                format!(
                    "{}{}",
                    r.note
                        .as_ref()
                        .map(|n| format!(" note: {}", one_line(n, 500)))
                        .unwrap_or_default(),
                    match (r.action.as_str(), &r.carried_out) {
                        (_, Some(done)) => format!(" (Eagle: {})", one_line(done, 300)),
                        ("merge_pr", None) => " (Eagle merges it: do not merge yourself)".into(),
                        ("post_asana_comment", None) => {
                            " (Eagle posts it: do not post it yourself)".into()
                        }
                        _ => String::new(),
                    }
                ),
            ),
            RequestStatus::Denied => (
                "DENIED",
                format!(
                    " reason: {}",
                    one_line(r.decision_reason.as_deref().unwrap_or(""), 500)
                ),
            ),
            _ => (
                "EXPIRED",
                format!(
                    " {}",
                    one_line(r.decision_reason.as_deref().unwrap_or(""), 500)
                ),
            ),
        };
        out.push_str(&format!(
            "- [{tag}: {}] run:{} req:{}{extra} (you asked: {})\n",
            r.action,
            r.run_id,
            r.id,
            one_line(&r.body, 300)
        ));
    }
    out
}

/// The run's PR as a prompt shows it: its URL, else `#<number>`.
fn pr_url(run: &Run) -> String {
    match (&run.pr_url, run.pr_number) {
        (Some(url), _) => url.clone(),
        (None, Some(n)) => format!("#{n}"),
        (None, None) => String::new(),
    }
}
