//! Following a running worker: every tick the work log is read and the
//! watchdogs are checked (no output, the hard limit and its wrap-up); the
//! heartbeat renews the claim and brings news of a cancel or a hold; a
//! status burst is posted at most once per `status_interval`.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::KILL_GRACE;
use super::judge::wait_for_exit;
use super::{Ending, Worker};
use crate::confine::egress;
use crate::executor::runner::LEASE;
use crate::executor::runner::attempt::SocketCtx;
use crate::executor::runner::socket;
use crate::executor::runner::spawn::{RunDir, egress_socket_path};
use crate::ground::host;
use crate::store::{Control, RunState, StoreError};

/// How often the log is read and the watchdogs are checked.
const TICK: Duration = Duration::from_millis(200);
/// The most of a work log read and held at once (in lines not yet
/// recorded): a worker that writes faster is read on at the next tick,
/// never held whole in memory.
pub(super) const MAX_UNPROCESSED_BYTES: usize = 8 << 20;

impl Worker {
    /// The run's topic in the executor channel.
    pub(super) fn topic(&self) -> String {
        format!("run {}", self.fence.run)
    }

    /// Answers the worker's requests again on its run's socket, and serves
    /// its egress proxy again (a re-adopted worker reconnects to the same
    /// paths).
    pub(super) fn serve_socket(&mut self, token_sha256: String) {
        match socket::bind(&self.socket_path, &self.shared) {
            Ok(listener) => self.serve_listener(listener, token_sha256),
            Err(error) => {
                tracing::error!(%error, run = self.fence.run, "cannot listen on the run's socket again");
            }
        }
        let path = egress_socket_path(&self.socket_path);
        match egress::bind(&path, self.shared.worker_user.as_ref()) {
            Ok(listener) => self.serve_egress(listener),
            Err(error) => {
                tracing::error!(%error, run = self.fence.run, "cannot listen on the run's egress socket again");
            }
        }
    }

    /// Serves the worker's egress proxy on `listener` (its only way to the
    /// network when it is confined), until it ends.
    pub(super) fn serve_egress(&mut self, listener: egress::EgressListener) {
        self.egress = Some(listener.serve(egress::Egress {
            client: egress::Client::Run(self.fence.run),
            store: self.shared.store.clone(),
            allow: Arc::new(self.shared.settings.sandbox.allow_hosts.clone()),
            limits: egress::EgressLimits::default(),
            interception: self.shared.interception.clone(),
            model: self.shared.model.clone(),
        }));
    }

    /// Stops the egress proxy: its connections are cut, its socket goes.
    pub(super) async fn stop_egress(&mut self) {
        if let Some(proxy) = self.egress.take() {
            proxy.stop().await;
        }
    }

    /// Answers the worker's requests on `listener`, until it ends.
    pub(super) fn serve_listener(
        &mut self,
        listener: tokio::net::UnixListener,
        token_sha256: String,
    ) {
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
        tokio::spawn(socket::serve(listener, ctx, stop));
    }

    /// Sends `signal` to the worker's process group, if it is still there.
    pub(super) fn terminate(&mut self, signal: i32) {
        if let Some(pgid) = self.pid
            && let Err(error) = host::signal_group(pgid, signal)
        {
            tracing::warn!(%error, run = self.fence.run, pgid, signal, "cannot signal the worker's group");
        }
    }

    /// Ends the worker for `why`: stops its questions, asks it to stop, and
    /// kills its group after `grace`.
    pub(super) fn end_worker(&mut self, why: Ending, signal: i32, grace: Duration, tell: &str) {
        if self.ending.is_none() || why == Ending::Cancel || why == Ending::LostClaim {
            self.ending = Some(why);
        }
        self.stop_tx.send_replace(Some(tell.to_string()));
        self.terminate(signal);
        let at = Instant::now() + grace;
        self.kill_at = Some(self.kill_at.map_or(at, |k| k.min(at)));
    }

    /// Another runner has the run now: the worker is stopped, and nothing
    /// more is recorded for this attempt.
    fn lost_claim(&mut self) {
        self.end_worker(
            Ending::LostClaim,
            libc::SIGTERM,
            KILL_GRACE,
            "this attempt is over: stop now",
        );
    }

    /// Follows the worker until it exits (or this runner shuts down, leaving
    /// it to the next runner).
    pub(super) async fn follow(mut self, shutdown: CancellationToken) {
        let mut exit = std::pin::pin!(wait_for_exit(self.child.take(), self.pidfd.take()));
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut heartbeat = tokio::time::interval(LEASE / 3);
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
                    self.stop_egress().await;
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
            .claims()
            .heartbeat(&self.fence, &self.shared.limits())
            .await
        {
            Ok(_) => self.check_run = true,
            Err(StoreError::Fenced(_)) => {
                tracing::error!(
                    run = self.fence.run,
                    "this runner lost its claim on the run; stopping its worker"
                );
                self.lost_claim();
            }
            Err(error) => {
                tracing::warn!(%error, run = self.fence.run, "cannot renew the claim; retrying")
            }
        }
    }

    async fn check_controls(&mut self) {
        let state = async {
            let mut tx = self.shared.store.begin_read().await?;
            let run = tx.tasks().run(self.fence.run).await?;
            let hold_all = tx.controls().control(Control::HoldAll).await?;
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
    pub(super) async fn read_log(&mut self) {
        loop {
            if self.unprocessed_bytes() >= MAX_UNPROCESSED_BYTES {
                break;
            }
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
                self.lost_claim();
            }
            Err(error) => {
                tracing::warn!(%error, run = self.fence.run, "cannot record the worker's output; retrying")
            }
        }
    }

    /// Reads and records the whole rest of the log, a bounded batch at a
    /// time (the worker has ended: its last lines decide its end).
    pub(super) async fn read_rest_of_log(&mut self) {
        loop {
            let before = self.reader.offset();
            self.read_log().await;
            if self.reader.offset() == before || !self.unprocessed.is_empty() {
                return;
            }
        }
    }

    /// What the lines read and not yet recorded hold.
    fn unprocessed_bytes(&self) -> usize {
        self.unprocessed.iter().map(|l| l.text.len()).sum()
    }

    /// Posts the newest status line, at most once per `status_interval`
    /// (or now, with `force`).
    pub(super) async fn flush_status(&mut self, force: bool) {
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

    /// Posts `text` in the run's topic; a failure is logged, not retried.
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
}
