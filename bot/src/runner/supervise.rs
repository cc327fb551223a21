//! One worker, from start (or re-adoption) to its end: the work log, the
//! process, the watchdogs, holds and cancels, the claim's heartbeat, and
//! what its end means for the run.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::output::{Event, LogLine, LogReader, events};
use super::socket::SocketCtx;
use super::spawn::{self, Launch, RunDir};
use super::{PromptKind, Shared};
use crate::host;
use crate::profile::{KindLimits, WorkerKind};
use crate::protocol::{Line, Tag};
use crate::store::{
    Claim, Control, Fence, NewRequest, PrLink, PrOutcome, PrWork, Request, RequestStatus,
    RequestVia, Run, RunEnd, RunState, StoreError, Task, WorkerMirror,
};
use crate::text::{neutralize_mentions, one_line};

/// How often the log is read and the watchdogs are checked.
const TICK: Duration = Duration::from_millis(200);
/// Between SIGTERM and SIGKILL when a worker is killed.
const KILL_GRACE: Duration = Duration::from_secs(5);
/// The longest worker text relayed in one post.
const RELAY_CHARS: usize = 500;

/// Why the runner ended a worker itself.
#[derive(Debug, Clone, PartialEq)]
enum Ending {
    Watchdog(String),
    Hold(String),
    Cancel,
    CostCap(String),
    Flood,
    /// Another runner holds the run now: hands off, not ours to record.
    LostClaim,
}

/// `[REQUEST: run_tests] run:42 req:7 Scheme: macOS UI Tests CI`.
pub(super) fn relay_request(request: &Request, private: bool) -> String {
    let body = if private || request.body.is_empty() {
        String::new()
    } else {
        format!(" {}", quote(&request.body))
    };
    format!(
        "[{}: {}] run:{} req:{}{body}",
        request.tag(),
        request.action,
        request.run_id,
        request.id
    )
}

/// A worker's line, stamped with the run's own id whatever the worker wrote.
fn relay(line: &Line, run: i64, private: bool) -> String {
    let body = if private || line.body.is_empty() {
        String::new()
    } else {
        format!(" {}", quote(&line.body))
    };
    format!("[{}: {}] run:{run}{body}", line.tag.as_str(), line.action)
}

fn quote(text: &str) -> String {
    neutralize_mentions(&one_line(text, RELAY_CHARS))
}

/// Starts a worker for a claimed run and follows it to its end.
pub(super) async fn start(shared: &Arc<Shared>, claim: Claim, shutdown: CancellationToken) {
    let fence = claim.fence.clone();
    match launch(shared, &claim).await {
        Ok(worker) => worker.follow(shutdown).await,
        Err(Failure::Store(StoreError::Fenced(_))) => {}
        Err(failure) => {
            let reason = failure.to_string();
            tracing::error!(run = fence.run, %reason, "cannot start a worker");
            let end = RunEnd::Failed {
                reason: reason.clone(),
                max_attempts: shared.settings.max_attempts,
                owner: owner_label(shared, fence.run).await,
            };
            let text = format!(
                "[STATUS: start_failed] run:{} {}",
                fence.run,
                quote(&reason)
            );
            if let Err(error) = finish(shared, &fence, None, &end, &text).await {
                tracing::error!(%error, run = fence.run, "cannot record a failed start");
            }
        }
    }
}

/// Re-adopts (or rescues) a worker a previous runner on this host started.
pub(super) async fn adopt(
    shared: &Arc<Shared>,
    run: Run,
    fence: Fence,
    shutdown: CancellationToken,
) {
    let task = task_of(shared, &run).await;
    if run.worker_pid.is_none() {
        // The runner died between the claim and the worker's record: a
        // worker may have started unrecorded. Any process of this run is
        // ended before the run goes back to the queue.
        for pgid in host::groups_with_env(super::wire::ENV_RUN, &run.id.to_string()) {
            tracing::warn!(run = run.id, pgid, "ending an unrecorded worker of the run");
            let _ = host::signal_group(pgid, libc::SIGKILL);
        }
        let end = RunEnd::Failed {
            reason: "its runner stopped before the worker was recorded".into(),
            max_attempts: shared.settings.max_attempts,
            owner: shared.people.owner_label(task.as_ref()),
        };
        let text = format!(
            "[STATUS: retry] run:{} its runner stopped while starting a worker; it goes back to the queue",
            run.id
        );
        finish_reliably(shared, &fence, None, &end, &text, &shutdown).await;
        return;
    }
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
    let mut worker = Worker::new(
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
    );
    if alive {
        if let Some(hash) = run.token_sha256.clone() {
            worker.serve_socket(hash);
        }
        tracing::info!(run = run.id, pid, "re-adopted a live worker");
        worker.follow(shutdown).await;
    } else {
        tracing::info!(
            run = run.id,
            pid,
            "the worker died while no runner watched it; rescuing the run"
        );
        worker.end(&shutdown).await;
    }
}

#[derive(Debug, thiserror::Error)]
enum Failure {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

async fn task_of(shared: &Shared, run: &Run) -> Option<Task> {
    let mut tx = shared.store.begin_read().await.ok()?;
    tx.task_by_gid(&run.task_gid).await.ok().flatten()
}

async fn owner_label(shared: &Shared, run_id: i64) -> String {
    let task = async {
        let mut tx = shared.store.begin_read().await.ok()?;
        let run = tx.run(run_id).await.ok()??;
        tx.task_by_gid(&run.task_gid).await.ok()?
    };
    shared.people.owner_label(task.await.as_ref())
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

async fn launch(shared: &Arc<Shared>, claim: &Claim) -> Result<Worker, Failure> {
    let run = &claim.run;
    let fence = &claim.fence;
    let task = task_of(shared, run).await;
    let undelivered: Vec<Request> = shared
        .store
        .requests_of_run(run.id)
        .await?
        .into_iter()
        .filter(|r| {
            r.delivered_at.is_none()
                && matches!(
                    r.status,
                    RequestStatus::Approved | RequestStatus::Denied | RequestStatus::Expired
                )
        })
        .collect();
    let kind = match (claim.from, run.pr_work.0) {
        (RunState::Queued, _) => PromptKind::Investigation,
        (RunState::Pr, Some(PrWork::FixCi)) => PromptKind::FixCi,
        (RunState::Pr, Some(PrWork::FixComments)) => PromptKind::FixComments,
        (RunState::Pr, Some(PrWork::PrReview)) => PromptKind::PrReview,
        _ => PromptKind::Continue,
    };
    let dir = spawn::prepare_run(shared, run, task.as_ref()).await?;
    let session = (shared.command.kind == WorkerKind::Claude).then(|| {
        match run.worker_session_id.as_deref() {
            Some(s) if kind != PromptKind::Investigation && transcript_exists(&dir, s) => {
                (s.to_string(), true)
            }
            _ => (spawn::new_uuid(), false),
        }
    });
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
    let values: BTreeMap<&str, String> = [
        ("run_id", run.id.to_string()),
        ("task_id", task.as_ref().map_or(0, |t| t.id).to_string()),
        ("attempt", fence.attempt.to_string()),
        (
            "title",
            task.as_ref().map(|t| t.title.clone()).unwrap_or_default(),
        ),
        (
            "description",
            task.as_ref()
                .map(|t| t.description.clone())
                .unwrap_or_default(),
        ),
        ("workdir", dir.work.display().to_string()),
        ("branch", branch.clone()),
        ("pr_url", pr_url(run)),
        ("pr_status", run.pr_status.clone().unwrap_or_default()),
        ("decisions", decisions_text(&undelivered)),
    ]
    .into_iter()
    .collect();
    let prompt = shared.prompts.render(kind, &values);
    let token = spawn::new_token();
    let token_sha256 = crate::policy::content_hash(token.as_bytes());
    let socket_path = dir.socket_path(shared, run.id, fence.attempt);
    let listener = super::socket::bind(&socket_path, shared)?;
    let log_path = spawn::log_path(shared, &run.task_gid, kind);
    let exit_path = dir.eagle.join(format!("exit-{}", fence.attempt));
    let limits = shared.settings.limits_for(kind.as_str());
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
    let env = spawn::environment(shared, &dir, run.id, &socket_path, &token);
    drop(token);
    let started = spawn::start(
        shared,
        &argv,
        &dir.eagle.join("rules.md"),
        &env,
        &dir.work,
        &log_path,
        &exit_path,
        super::shim_deadline(limits.hard, shared.settings.wrap_up_grace),
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
        alive_for: super::shim_deadline(limits.hard, shared.settings.wrap_up_grace)
            + Duration::from_secs(60),
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
        tx.record_worker(fence, &mirror).await?;
        let ids: Vec<i64> = undelivered.iter().map(|r| r.id).collect();
        tx.mark_delivered(&ids).await?;
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
    tracing::info!(
        run = run.id,
        attempt = fence.attempt,
        kind = kind.as_str(),
        pid = started.pid,
        "worker started"
    );
    Ok(worker)
}

struct Worker {
    shared: Arc<Shared>,
    fence: Fence,
    task: Option<Task>,
    private: bool,
    /// The shim's pid, which is also the group's id; `None`: already gone.
    pid: Option<i32>,
    /// Ours to reap when this runner started it.
    child: Option<tokio::process::Child>,
    /// A re-adopted worker's pidfd, opened before it was found alive.
    pidfd: Option<std::os::fd::OwnedFd>,
    reader: LogReader,
    kind: WorkerKind,
    limits: KindLimits,
    started: Instant,
    last_output: Instant,
    exit_path: PathBuf,
    socket_path: PathBuf,
    stop_tx: watch::Sender<Option<String>>,
    socket_stop: CancellationToken,
    requests: Arc<AtomicUsize>,
    /// Lines read but not yet recorded (a database error is retried).
    unprocessed: Vec<LogLine>,
    /// The worker's `[DONE: …]`: its action and its words.
    done: Option<(String, String)>,
    ending: Option<Ending>,
    kill_at: Option<Instant>,
    wrap_up_at: Option<Instant>,
    pending_status: Option<String>,
    last_status_post: Option<Instant>,
    session: Option<String>,
    /// Re-read the run (cancel, hold) at the next tick.
    check_run: bool,
    /// The socket's requests to read the log now.
    flush_rx: tokio::sync::mpsc::Receiver<tokio::sync::oneshot::Sender<()>>,
    flush_tx: tokio::sync::mpsc::Sender<tokio::sync::oneshot::Sender<()>>,
}

/// What differs between a worker this runner started and one it re-adopted.
struct Handle {
    /// The shim's pid, which is also the group's id; `None`: already gone.
    pid: Option<i32>,
    /// Ours to reap when this runner started it.
    child: Option<tokio::process::Child>,
    /// A re-adopted worker's pidfd, opened before it was found alive.
    pidfd: Option<std::os::fd::OwnedFd>,
    /// The work log, read on from the offset already recorded.
    log: LogReader,
    exit_path: PathBuf,
    socket_path: PathBuf,
    /// How long the worker has run already (the hard limit counts from its start).
    elapsed: Duration,
}

impl Worker {
    /// A worker to follow, for an attempt of `kind`, nothing read or decided yet.
    fn new(
        shared: &Arc<Shared>,
        fence: Fence,
        task: Option<Task>,
        kind: PromptKind,
        handle: Handle,
    ) -> Worker {
        let (stop_tx, _) = watch::channel(None);
        let (flush_tx, flush_rx) = tokio::sync::mpsc::channel(16);
        let now = Instant::now();
        Worker {
            shared: Arc::clone(shared),
            fence,
            private: task.as_ref().is_some_and(|t| t.origin_private),
            task,
            pid: handle.pid,
            child: handle.child,
            pidfd: handle.pidfd,
            reader: handle.log,
            kind: shared.command.kind,
            limits: shared.settings.limits_for(kind.as_str()),
            started: now.checked_sub(handle.elapsed).unwrap_or(now),
            last_output: now,
            exit_path: handle.exit_path,
            socket_path: handle.socket_path,
            stop_tx,
            socket_stop: CancellationToken::new(),
            requests: Arc::new(AtomicUsize::new(0)),
            unprocessed: Vec::new(),
            done: None,
            ending: None,
            kill_at: None,
            wrap_up_at: None,
            pending_status: None,
            last_status_post: None,
            session: None,
            check_run: true,
            flush_rx,
            flush_tx,
        }
    }

    fn topic(&self) -> String {
        format!("run {}", self.fence.run)
    }

    fn serve_socket(&mut self, token_sha256: String) {
        match super::socket::bind(&self.socket_path, &self.shared) {
            Ok(listener) => self.serve_listener(listener, token_sha256),
            Err(error) => {
                tracing::error!(%error, run = self.fence.run, "cannot listen on the run's socket again");
            }
        }
    }

    fn serve_listener(&mut self, listener: tokio::net::UnixListener, token_sha256: String) {
        let ctx = Arc::new(SocketCtx {
            shared: Arc::clone(&self.shared),
            fence: self.fence.clone(),
            token_sha256,
            workdir: RunDir::of(&self.shared, self.fence.run).work,
            private: self.private,
            stop: self.stop_tx.subscribe(),
            requests: Arc::clone(&self.requests),
            flush: self.flush_tx.clone(),
        });
        let stop = self.socket_stop.clone();
        tokio::spawn(super::socket::serve(listener, ctx, stop));
    }

    fn terminate(&mut self, signal: i32) {
        if let Some(pgid) = self.pid
            && let Err(error) = host::signal_group(pgid, signal)
        {
            tracing::warn!(%error, run = self.fence.run, pgid, signal, "cannot signal the worker's group");
        }
    }

    /// Ends the worker for `why`: stops its questions, asks it to stop, and
    /// kills its group after `grace`.
    fn end_worker(&mut self, why: Ending, signal: i32, grace: Duration, tell: &str) {
        if self.ending.is_none() || why == Ending::Cancel || why == Ending::LostClaim {
            self.ending = Some(why);
        }
        self.stop_tx.send_replace(Some(tell.to_string()));
        self.terminate(signal);
        let at = Instant::now() + grace;
        self.kill_at = Some(self.kill_at.map_or(at, |k| k.min(at)));
    }

    /// Follows the worker until it exits (or this runner shuts down, leaving
    /// it to the next runner).
    async fn follow(mut self, shutdown: CancellationToken) {
        let mut exit = std::pin::pin!(wait_for_exit(self.child.take(), self.pidfd.take()));
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut heartbeat = tokio::time::interval(super::LEASE / 3);
        heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut changes = self.shared.store.changes();
        loop {
            tokio::select! {
                _ = &mut exit => break,
                _ = shutdown.cancelled() => {
                    // The worker runs on in its own group; the next runner
                    // on this host re-adopts it.
                    self.read_log().await;
                    self.socket_stop.cancel();
                    return;
                }
                _ = tick.tick() => self.on_tick().await,
                Some(done) = self.flush_rx.recv() => {
                    self.read_log().await;
                    let _ = done.send(());
                }
                _ = heartbeat.tick() => self.on_heartbeat().await,
                _ = changes.changed() => self.check_run = true,
            }
        }
        self.end(&shutdown).await;
    }

    async fn on_tick(&mut self) {
        self.read_log().await;
        self.flush_status(false).await;
        let now = Instant::now();
        if let Some(at) = self.kill_at
            && now >= at
        {
            self.terminate(libc::SIGKILL);
            self.kill_at = None;
        }
        if self.ending.is_none() && now.duration_since(self.last_output) >= self.limits.no_output {
            let reason = format!(
                "no output for {}",
                humantime::format_duration(self.limits.no_output)
            );
            tracing::warn!(run = self.fence.run, %reason, "watchdog: killing the worker's group");
            self.end_worker(
                Ending::Watchdog(reason),
                libc::SIGTERM,
                KILL_GRACE,
                "stop now",
            );
        }
        if now.duration_since(self.started) >= self.limits.hard {
            match self.wrap_up_at {
                None if self.ending.is_none() => {
                    let grace = self.shared.settings.wrap_up_grace;
                    self.wrap_up_at = Some(now + grace);
                    tracing::warn!(
                        run = self.fence.run,
                        "watchdog: past the hard limit; asking the worker to wrap up"
                    );
                    // SIGINT closes Claude Code's turn; a script may trap it to finish.
                    self.terminate(libc::SIGINT);
                    let text = format!(
                        "[STATUS: wrap_up] run:{} past its hard limit of {}: asked to wrap up within {}",
                        self.fence.run,
                        humantime::format_duration(self.limits.hard),
                        humantime::format_duration(grace)
                    );
                    self.post(&text).await;
                }
                Some(at) if now >= at && self.ending.is_none() => {
                    let reason = format!(
                        "past its hard limit of {} and did not wrap up",
                        humantime::format_duration(self.limits.hard)
                    );
                    self.end_worker(
                        Ending::Watchdog(reason),
                        libc::SIGKILL,
                        KILL_GRACE,
                        "stop now",
                    );
                }
                _ => {}
            }
        }
        if self.check_run {
            self.check_run = false;
            self.check_controls().await;
        }
    }

    async fn on_heartbeat(&mut self) {
        match self
            .shared
            .store
            .heartbeat(&self.fence, &self.shared.limits())
            .await
        {
            Ok(_) => self.check_run = true,
            Err(StoreError::Fenced(_)) => {
                tracing::error!(
                    run = self.fence.run,
                    "this runner lost its claim on the run; stopping its worker"
                );
                self.end_worker(
                    Ending::LostClaim,
                    libc::SIGTERM,
                    KILL_GRACE,
                    "this attempt is over: stop now",
                );
            }
            Err(error) => {
                tracing::warn!(%error, run = self.fence.run, "cannot renew the claim; retrying")
            }
        }
    }

    async fn check_controls(&mut self) {
        let state = async {
            let mut tx = self.shared.store.begin_read().await?;
            let run = tx.run(self.fence.run).await?;
            let hold_all = tx.control(Control::HoldAll).await?;
            Ok::<_, StoreError>((run, hold_all))
        };
        let Ok((Some(run), hold_all)) = state.await else {
            return;
        };
        if run.state == RunState::Cancelled {
            if self.ending != Some(Ending::Cancel) {
                self.end_worker(
                    Ending::Cancel,
                    libc::SIGTERM,
                    KILL_GRACE,
                    "the run was cancelled: stop now",
                );
            }
        } else if (run.held || hold_all) && self.ending.is_none() {
            let why = if run.held {
                "the run is held: stop now"
            } else {
                "every run is held (!hold all): stop now"
            };
            let grace = self.shared.settings.wrap_up_grace;
            self.end_worker(
                Ending::Hold(why.trim_end_matches(": stop now").into()),
                libc::SIGINT,
                grace,
                why,
            );
        }
    }

    /// Reads what the worker wrote and records it.
    async fn read_log(&mut self) {
        loop {
            match self.reader.read_new() {
                Ok((lines, grew)) => {
                    if grew {
                        self.last_output = Instant::now();
                    }
                    let more = !lines.is_empty();
                    self.unprocessed.extend(lines);
                    if !more {
                        break;
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, run = self.fence.run, "cannot read the work log");
                    break;
                }
            }
            if self.unprocessed.len() > 10_000 {
                break;
            }
        }
        if self.unprocessed.is_empty() {
            return;
        }
        match self.record_lines().await {
            Ok(()) => self.unprocessed.clear(),
            Err(StoreError::Fenced(_)) => {
                self.unprocessed.clear();
                self.end_worker(
                    Ending::LostClaim,
                    libc::SIGTERM,
                    KILL_GRACE,
                    "this attempt is over: stop now",
                );
            }
            Err(error) => {
                tracing::warn!(%error, run = self.fence.run, "cannot record the worker's output; retrying")
            }
        }
    }

    async fn record_lines(&mut self) -> Result<(), StoreError> {
        let run = self.fence.run;
        let topic = self.topic();
        let mut tx = self.shared.store.begin_write().await?;
        let mut session_cost = None;
        let mut turns = 0;
        let mut done = None;
        let mut status = None;
        let mut flooded = false;
        let mut session = None;
        let mut posted_status = false;
        for line in &self.unprocessed {
            for event in events(&line.text, self.kind) {
                match event {
                    Event::Protocol { index, line: p } => match p.tag {
                        Tag::Request | Tag::Escalate => {
                            if self.requests.load(Ordering::Relaxed)
                                >= self.shared.settings.max_requests
                            {
                                flooded = true;
                                continue;
                            }
                            let new = NewRequest {
                                run_id: run,
                                attempt: self.fence.attempt,
                                key: format!("line:{}:{index}", line.start),
                                via: RequestVia::Line,
                                escalate: p.tag == Tag::Escalate,
                                action: p.action.clone(),
                                body: crate::mirror::cap(&one_line(&p.body, 2_000), 2_000),
                            };
                            let recorded = tx.record_request(&new, &self.fence).await?;
                            if recorded.new {
                                self.requests.fetch_add(1, Ordering::Relaxed);
                                let text = relay_request(&recorded.request, self.private);
                                self.shared.poster.post(&mut tx, &topic, &text).await?;
                            }
                        }
                        Tag::Status => {
                            let text = relay(&p, run, self.private);
                            // The first status after a quiet spell goes out at
                            // once; a burst after it is coalesced (the newest wins).
                            let interval = self.shared.settings.status_interval;
                            let quiet = self
                                .last_status_post
                                .is_none_or(|at| at.elapsed() >= interval);
                            if interval.is_zero() || (quiet && !posted_status) {
                                self.shared.poster.post(&mut tx, &topic, &text).await?;
                                posted_status = true;
                            } else {
                                status = Some(text);
                            }
                        }
                        Tag::Done => {
                            done = Some((p.action.clone(), p.body.clone()));
                            if let Some(before) =
                                status.take().or_else(|| self.pending_status.take())
                            {
                                self.shared.poster.post(&mut tx, &topic, &before).await?;
                            }
                            let text = relay(&p, run, self.private);
                            self.shared.poster.post(&mut tx, &topic, &text).await?;
                        }
                        _ => {
                            let text = relay(&p, run, self.private);
                            self.shared.poster.post(&mut tx, &topic, &text).await?;
                        }
                    },
                    Event::Forged(p) => {
                        tracing::warn!(
                            run,
                            tag = p.tag.as_str(),
                            "the worker wrote one of Eagle's answer tags; ignored"
                        );
                    }
                    Event::Malformed => tracing::debug!(run, "a malformed protocol line; ignored"),
                    Event::Session(s) => session = Some(s),
                    Event::Result {
                        session_cost: cost,
                        turns: t,
                        ..
                    } => {
                        session_cost = cost.or(session_cost);
                        turns += t;
                    }
                }
            }
        }
        let offset = self.unprocessed.last().map_or(0, |l| l.end) as i64;
        tx.record_progress(
            &self.fence,
            offset,
            Some(crate::store::now()),
            session_cost,
            turns,
            session.as_deref(),
        )
        .await?;
        let over_cap = if session_cost.is_some() {
            tx.run(run).await?.and_then(|r| {
                r.cost_cap_usd
                    .filter(|cap| r.cost_usd >= *cap)
                    .map(|cap| format!("${:.2} spent of a ${cap:.2} cap", r.cost_usd))
            })
        } else {
            None
        };
        tx.commit().await?;
        if let Some(done) = done {
            self.done = Some(done);
        }
        if let Some(s) = session {
            self.session = Some(s);
        }
        if posted_status {
            self.last_status_post = Some(Instant::now());
            self.pending_status = None;
        }
        if status.is_some() {
            self.pending_status = status;
        }
        if flooded && self.ending.is_none() {
            tracing::warn!(run, "the worker floods requests; stopping it");
            self.end_worker(
                Ending::Flood,
                libc::SIGTERM,
                KILL_GRACE,
                "too many requests: stop now",
            );
        }
        if let Some(reason) = over_cap
            && !matches!(self.ending, Some(Ending::CostCap(_)))
        {
            tracing::warn!(run, %reason, "the run reached its cost cap; stopping the worker");
            self.end_worker(
                Ending::CostCap(reason),
                libc::SIGTERM,
                KILL_GRACE,
                "the cost cap is reached: stop now",
            );
        }
        Ok(())
    }

    /// Posts the newest status line, at most once per `status_interval`
    /// (or now, with `force`).
    async fn flush_status(&mut self, force: bool) {
        let due = force
            || self
                .last_status_post
                .is_none_or(|at| at.elapsed() >= self.shared.settings.status_interval);
        if !due {
            return;
        }
        let Some(text) = self.pending_status.take() else {
            return;
        };
        self.post(&text).await;
        self.last_status_post = Some(Instant::now());
    }

    async fn post(&self, text: &str) {
        let posted = async {
            let mut tx = self.shared.store.begin_write().await?;
            self.shared
                .poster
                .post(&mut tx, &self.topic(), text)
                .await?;
            tx.commit().await
        };
        if let Err(error) = posted.await {
            tracing::warn!(%error, run = self.fence.run, "cannot post about the run");
        }
    }

    /// After the process is gone: the rest of the log, the exit status, and
    /// what it means for the run, recorded once.
    async fn end(mut self, shutdown: &CancellationToken) {
        let pgid = self.pid.take();
        let exit = read_exit(&self.exit_path);
        if let Some(pgid) = pgid
            && exit.code.is_none()
            && exit.signal.is_none()
        {
            // The shim did not get to end its group itself (it was killed):
            // leftovers (a background process) are ended here.
            let _ = host::signal_group(pgid, libc::SIGKILL);
        }
        self.socket_stop.cancel();
        if !self.socket_path.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.socket_path);
        }
        if self.ending == Some(Ending::LostClaim) {
            return;
        }
        self.read_log().await;
        self.flush_status(true).await;
        let (end, text) = match self.judge(&exit).await {
            Ok(judged) => judged,
            Err(error) => {
                tracing::error!(%error, run = self.fence.run, "cannot read the run to judge its worker's end");
                return;
            }
        };
        finish_reliably(&self.shared, &self.fence, exit.code, &end, &text, shutdown).await;
        tracing::info!(run = self.fence.run, attempt = self.fence.attempt, exit = %exit.describe(), end = ?end, "worker ended");
    }

    async fn judge(&self, exit: &ExitStatus) -> Result<(RunEnd, String), StoreError> {
        let run_id = self.fence.run;
        let requests = self.shared.store.requests_of_run(run_id).await?;
        let run = {
            let mut tx = self.shared.store.begin_read().await?;
            tx.run(run_id).await?
        };
        let owner = self.shared.people.owner_label(self.task.as_ref());
        let shown_owner = quote(&owner);
        let max_attempts = self.shared.settings.max_attempts;
        let failures = run.as_ref().map_or(0, |r| r.failures);
        let failed = |reason: String| {
            let held = failures + 1 >= max_attempts;
            let text = if held {
                format!(
                    "[STATUS: held] run:{run_id} attempt {} failed: {}; held for {shown_owner} after {} attempt(s)",
                    self.fence.attempt,
                    quote(&reason),
                    failures + 1
                )
            } else {
                format!(
                    "[STATUS: retry] run:{run_id} attempt {} failed: {}; it goes back to the queue ({} of {max_attempts} failed attempts)",
                    self.fence.attempt,
                    quote(&reason),
                    failures + 1
                )
            };
            (
                RunEnd::Failed {
                    reason,
                    max_attempts,
                    owner: owner.clone(),
                },
                text,
            )
        };
        if run.as_ref().is_some_and(|r| r.state.is_final()) {
            let reason = "the run was cancelled".to_string();
            return Ok((
                RunEnd::Stopped {
                    reason: reason.clone(),
                },
                format!("[STATUS: stopped] run:{run_id} {reason}; its worker is stopped"),
            ));
        }
        if let Some(Ending::CostCap(reason)) = &self.ending {
            return Ok((
                RunEnd::CostCap {
                    reason: reason.clone(),
                    owner: owner.clone(),
                },
                format!(
                    "[STATUS: held] run:{run_id} cost cap reached ({reason}); held for {owner}"
                ),
            ));
        }
        let in_pr = run.as_ref().is_some_and(|r| r.state == RunState::Pr);
        let (done, done_body) = match &self.done {
            Some((action, body)) => (Some(action.as_str()), body.as_str()),
            None => (None, ""),
        };
        match done {
            // A worker on a PR (fix-ci, fix-comments, pr-review) finished
            // its part: the PR loop looks at the PR again.
            Some(action) if in_pr && action != "abandoned" => {
                // Only the reviewer's verdict counts as one: a fix-ci worker
                // saying `review_green` does not complete its own run.
                let reviewing = run.as_ref().and_then(|r| r.pr_work.0) == Some(PrWork::PrReview);
                let outcome = match action {
                    "review_green" if reviewing => PrOutcome::ReviewGreen,
                    "changes_requested" if reviewing => PrOutcome::ChangesRequested,
                    _ => PrOutcome::Done,
                };
                return Ok((
                    RunEnd::PrWorkDone {
                        outcome,
                        reason: format!("the worker reported [DONE: {action}]"),
                    },
                    format!(
                        "[STATUS: pr] run:{run_id} the worker is done ({action}); the PR is looked at again"
                    ),
                ));
            }
            Some("pr_ready") => {
                let pr = PrLink::find(done_body);
                let text = match &pr {
                    Some(link) => format!(
                        "[STATUS: pr] run:{run_id} PR #{} waits for CI and review",
                        link.number
                    ),
                    None => format!(
                        "[STATUS: pr] run:{run_id} waits in pr: the worker named no PR number (`[DONE: pr_ready] PR #<n>`)"
                    ),
                };
                return Ok((
                    RunEnd::Moved {
                        to: RunState::Pr,
                        reason: "the worker reported [DONE: pr_ready]".into(),
                        pr,
                    },
                    text,
                ));
            }
            Some("abandoned") => {
                return Ok((
                    RunEnd::Moved {
                        to: RunState::Abandoned,
                        reason: "the worker reported [DONE: abandoned]".into(),
                        pr: None,
                    },
                    format!("[STATUS: abandoned] run:{run_id} the task goes back for review"),
                ));
            }
            _ => {}
        }
        match &self.ending {
            Some(Ending::Hold(reason)) => {
                return Ok((
                    RunEnd::Stopped {
                        reason: reason.clone(),
                    },
                    format!(
                        "[STATUS: held] run:{run_id} {reason}; its worker is stopped until !unhold"
                    ),
                ));
            }
            Some(Ending::Watchdog(reason)) => return Ok(failed(reason.clone())),
            Some(Ending::Flood) => {
                return Ok(failed(format!(
                    "more than {} requests in one attempt",
                    self.shared.settings.max_requests
                )));
            }
            _ => {}
        }
        // A worker that crashed counts as failed even if it asked something
        // first (it must not be resumed for ever); exit 3 is the documented
        // "stop, a human decides".
        if !matches!(exit.code, Some(0) | Some(3)) {
            return Ok(failed(exit.describe()));
        }
        let open: Vec<&Request> = requests.iter().filter(|r| r.status.is_open()).collect();
        if !open.is_empty() {
            let list =
                crate::store::requests_summary(&open.into_iter().cloned().collect::<Vec<_>>());
            return Ok((
                RunEnd::Waiting,
                format!("[STATUS: waiting] run:{run_id} the worker stopped to wait for: {list}"),
            ));
        }
        let answered = requests.iter().any(|r| {
            r.delivered_at.is_none()
                && matches!(
                    r.status,
                    RequestStatus::Approved | RequestStatus::Denied | RequestStatus::Expired
                )
        });
        if answered {
            return Ok((
                RunEnd::Waiting,
                format!(
                    "[STATUS: resuming] run:{run_id} the worker is resumed with Eagle's answers"
                ),
            ));
        }
        Ok(failed("it stopped without reporting [DONE: …]".into()))
    }
}

/// Records the end of an attempt and posts about it, in one transaction.
async fn finish(
    shared: &Shared,
    fence: &Fence,
    exit_code: Option<i64>,
    end: &RunEnd,
    text: &str,
) -> Result<(), StoreError> {
    let mut tx = shared.store.begin_write().await?;
    let run = tx.finish_attempt(fence, exit_code, end).await?;
    shared.poster.post(&mut tx, &run.topic(), text).await?;
    tx.commit().await
}

/// Records the end of an attempt, trying again through database trouble
/// until it is recorded, the claim is lost (someone else has the run), or
/// the runner shuts down (the next runner on this host adopts the run).
async fn finish_reliably(
    shared: &Shared,
    fence: &Fence,
    exit_code: Option<i64>,
    end: &RunEnd,
    text: &str,
    shutdown: &CancellationToken,
) {
    let mut backoff = crate::backoff::Backoff::new();
    loop {
        match finish(shared, fence, exit_code, end, text).await {
            Ok(()) | Err(StoreError::Fenced(_)) => return,
            Err(error) => {
                let wait = backoff.failed();
                tracing::error!(%error, run = fence.run, wait_ms = wait.as_millis() as u64, "cannot record a worker's end; retrying");
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(wait) => {}
                }
            }
        }
    }
}

/// Waits for the worker's process to end: our own child (reaped here), or,
/// for a re-adopted one, its pidfd.
async fn wait_for_exit(child: Option<tokio::process::Child>, pidfd: Option<std::os::fd::OwnedFd>) {
    if let Some(mut child) = child {
        let _ = child.wait().await;
        return;
    }
    if let Some(fd) = pidfd {
        let _ = host::wait_exit(fd).await;
    }
}

/// What the worker shim wrote about the worker's end.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ExitStatus {
    code: Option<i64>,
    signal: Option<i64>,
    error: Option<String>,
}

impl ExitStatus {
    fn describe(&self) -> String {
        match (self.code, self.signal, &self.error) {
            (_, _, Some(error)) => format!("the worker could not start: {}", one_line(error, 300)),
            (Some(code), _, _) => format!("exit code {code}"),
            (_, Some(signal), _) => format!("killed by signal {signal}"),
            _ => "it ended without a recorded exit status (killed with its group)".into(),
        }
    }
}

fn read_exit(path: &std::path::Path) -> ExitStatus {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut status = ExitStatus {
        code: None,
        signal: None,
        error: None,
    };
    let text = text.trim();
    if let Some(code) = text.strip_prefix("exit ") {
        status.code = code.trim().parse().ok();
    } else if let Some(signal) = text.strip_prefix("signal ") {
        status.signal = signal.trim().parse().ok();
    } else if let Some(error) = text.strip_prefix("error ") {
        status.error = Some(error.to_string());
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relayed_lines_carry_the_run_and_no_pings() {
        let line =
            crate::protocol::parse_line("[STATUS: investigation] run:999 ping @**all** now\nx")
                .unwrap()
                .unwrap();
        assert_eq!(
            relay(&line, 4, false),
            "[STATUS: investigation] run:4 ping @\u{200B}**all** now x"
        );
        assert_eq!(relay(&line, 4, true), "[STATUS: investigation] run:4");
    }

    #[test]
    fn exit_files_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("exit");
        assert_eq!(read_exit(&path).code, None);
        std::fs::write(&path, "exit 3\n").unwrap();
        assert_eq!(read_exit(&path).code, Some(3));
        std::fs::write(&path, "signal 9\n").unwrap();
        assert_eq!(read_exit(&path).describe(), "killed by signal 9");
        std::fs::write(&path, "error no such program\n").unwrap();
        assert!(read_exit(&path).describe().contains("could not start"));
    }
}
