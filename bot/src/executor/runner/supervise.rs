//! One worker, from start (or re-adoption) to its end: [`start`] and
//! [`adopt`], the entry points, and the [`Worker`] they follow.
//!
//! * [`launch`] prepares a claimed run (its directory, prompt, socket and
//!   token), starts the worker shim and records it; or finds a re-adopted
//!   worker from its run's row.
//! * [`follow`] is the loop while it runs: ticks, the claim's heartbeat,
//!   holds and cancels, the watchdogs, the work log.
//! * [`record`] records and relays what it wrote, in one fenced transaction.
//! * [`judge`] reads how it ended and records what that means for the run.

mod follow;
mod judge;
mod launch;
mod record;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::output::{LogLine, LogReader};
use super::{PromptKind, Shared};
use crate::ground::host;
use crate::profile::{KindLimits, WorkerKind};
use crate::store::{Claim, Fence, Run, StoreError, Task};

/// Between SIGTERM and SIGKILL when a worker is killed.
const KILL_GRACE: Duration = Duration::from_secs(5);

/// The socket records the requests it is sent the way the log's are.
pub(super) use record::record_request;

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

/// Starts a worker for a claimed run and follows it to its end.
pub(super) async fn start(shared: &Arc<Shared>, claim: Claim, shutdown: CancellationToken) {
    let fence = claim.fence.clone();
    match launch::launch(shared, &claim).await {
        Ok(worker) => worker.follow(shutdown).await,
        Err(launch::Failure::Store(StoreError::Fenced(_))) => {}
        Err(launch::Failure::Setup(why)) => {
            tracing::warn!(run = fence.run, "the repository's setup failed");
            let why = format!("the repository's setup failed, so no worker started: {why}");
            judge::held_at_start(shared, &fence, "setup_failed", &why).await;
        }
        Err(launch::Failure::NoRepository(why)) => {
            tracing::warn!(run = fence.run, %why, "the run's repository is unknown");
            judge::held_at_start(shared, &fence, "no_repository", &why).await;
        }
        Err(failure) => {
            let reason = failure.to_string();
            tracing::error!(run = fence.run, %reason, "cannot start a worker");
            judge::start_failed(shared, &fence, &reason).await;
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
        let dir = super::spawn::RunDir::of(shared, run.id).base;
        for pgid in host::groups_with_env(crate::ground::wire::ENV_RUN, &run.id.to_string(), &dir) {
            tracing::warn!(run = run.id, pgid, "ending an unrecorded worker of the run");
            let _ = host::signal_group(pgid, libc::SIGKILL);
        }
        judge::unrecorded(shared, &fence, task.as_ref(), &shutdown).await;
        return;
    }
    let mut worker = launch::adopted(shared, &run, fence, task);
    let pid = run.worker_pid.unwrap_or(0) as i32;
    if worker.pid.is_some() {
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

/// The run's task; `None` when it cannot be read (the worker is told less).
async fn task_of(shared: &Shared, run: &Run) -> Option<Task> {
    let mut tx = shared.store.begin_read().await.ok()?;
    tx.tasks().task_by_gid(&run.task_gid).await.ok().flatten()
}

/// One worker followed by this runner: its process, its log, and what it
/// has said and been told.
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
    /// The worker's way to the network, while it runs.
    egress: Option<crate::confine::egress::EgressProxy>,
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

/// What differs between a worker this runner started and one it re-adopted:
/// each is the [`Worker`] field of the same name, but `log` (its reader, at
/// the offset already recorded) and `elapsed` (how long it has run already:
/// the hard limit counts from its start).
struct Handle {
    pid: Option<i32>,
    child: Option<tokio::process::Child>,
    pidfd: Option<std::os::fd::OwnedFd>,
    log: LogReader,
    exit_path: PathBuf,
    socket_path: PathBuf,
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
            egress: None,
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
}
