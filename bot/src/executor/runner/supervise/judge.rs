//! How a worker ended and what that means for its run: the exit status the
//! shim wrote, the worker's `[DONE: …]`, the runner's own reason to stop it
//! (a watchdog, a hold, a cancel, the cost cap), its open and answered
//! requests; recorded once, with its post, in one fenced transaction.

use tokio_util::sync::CancellationToken;

use super::launch::unlearnt;
use super::record::quote;
use super::{Ending, Worker};
use crate::executor::runner::Shared;
use crate::ground::host;
use crate::ground::text::one_line;
use crate::store::{Fence, PrLink, PrOutcome, PrWork, Request, RunEnd, RunState, StoreError, Task};

impl Worker {
    /// After the process is gone: the rest of the log, the exit status, and
    /// what it means for the run, recorded once.
    pub(super) async fn end(mut self, shutdown: &CancellationToken) {
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
        self.stop_egress().await;
        if self.ending == Some(Ending::LostClaim) {
            return;
        }
        self.read_rest_of_log().await;
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
        let requests = self.shared.store.requests().requests_of_run(run_id).await?;
        let run = {
            let mut tx = self.shared.store.begin_read().await?;
            tx.tasks().run(run_id).await?
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
                cost_cap_text(run_id, reason, &owner),
            ));
        }
        // An attempt that stops to wait counts: past `max_waits` the run is
        // held for its owner instead of being resumed once more.
        let waits = run.as_ref().map_or(0, |r| r.waits) + 1;
        let max_waits = self.shared.settings.max_waits;
        let waiting = |text: String| {
            if waits < max_waits {
                return (RunEnd::Waiting, text);
            }
            let reason =
                format!("{waits} attempts stopped to wait for decisions (runner.max_waits)");
            let text = format!("[STATUS: held] run:{run_id} {reason}; held for {shown_owner}");
            (
                RunEnd::WaitedTooOften {
                    reason,
                    owner: owner.clone(),
                },
                text,
            )
        };
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
        if let Some(limit) = exit.limit_hit() {
            return Ok(failed(limit));
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
            return Ok(waiting(format!(
                "[STATUS: waiting] run:{run_id} the worker stopped to wait for: {list}"
            )));
        }
        if requests.iter().any(unlearnt) {
            return Ok(waiting(format!(
                "[STATUS: resuming] run:{run_id} the worker is resumed with Eagle's answers"
            )));
        }
        Ok(failed("it stopped without reporting [DONE: …]".into()))
    }
}

/// The post of a run held at its cost cap: the owner named with mentions
/// inert (the notice that follows is the one that pings).
fn cost_cap_text(run_id: i64, reason: &str, owner: &str) -> String {
    format!(
        "[STATUS: held] run:{run_id} cost cap reached ({}); held for {}",
        quote(reason),
        quote(owner)
    )
}

/// Records a start that failed for `reason` as a failed attempt.
pub(super) async fn start_failed(shared: &Shared, fence: &Fence, reason: &str) {
    let end = RunEnd::Failed {
        reason: reason.to_string(),
        max_attempts: shared.settings.max_attempts,
        owner: owner_label(shared, fence.run).await,
    };
    let text = format!("[STATUS: start_failed] run:{} {}", fence.run, quote(reason));
    if let Err(error) = finish(shared, fence, None, &end, &text).await {
        tracing::error!(%error, run = fence.run, "cannot record a failed start");
    }
}

/// Records a run that cannot start a worker for a reason another attempt
/// would meet again (its repository's setup failed, its task's repository
/// is unknown): held for its owner at once, `why` in its topic under
/// `[STATUS: <status>]`.
pub(super) async fn held_at_start(shared: &Shared, fence: &Fence, status: &str, why: &str) {
    let end = RunEnd::Failed {
        reason: one_line(why, 300),
        max_attempts: 1,
        owner: owner_label(shared, fence.run).await,
    };
    let text = format!(
        "[STATUS: {status}] run:{} {}",
        fence.run,
        crate::ground::text::neutralize_mentions(why)
    );
    if let Err(error) = finish(shared, fence, None, &end, &text).await {
        tracing::error!(%error, run = fence.run, "cannot record a run held at its start");
    }
}

/// Records an attempt whose runner stopped before its worker was recorded
/// as failed: the run goes back to the queue.
pub(super) async fn unrecorded(
    shared: &Shared,
    fence: &Fence,
    task: Option<&Task>,
    shutdown: &CancellationToken,
) {
    let end = RunEnd::Failed {
        reason: "its runner stopped before the worker was recorded".into(),
        max_attempts: shared.settings.max_attempts,
        owner: shared.people.owner_label(task),
    };
    let text = format!(
        "[STATUS: retry] run:{} its runner stopped while starting a worker; it goes back to the queue",
        fence.run
    );
    finish_reliably(shared, fence, None, &end, &text, shutdown).await;
}

/// Who is asked about the run: its task's owner, as chat names them.
async fn owner_label(shared: &Shared, run_id: i64) -> String {
    let task = async {
        let mut tx = shared.store.begin_read().await.ok()?;
        let run = tx.tasks().run(run_id).await.ok()??;
        tx.tasks().task_by_gid(&run.task_gid).await.ok()?
    };
    shared.people.owner_label(task.await.as_ref())
}

/// Records the end of an attempt and posts about it, in one transaction.
pub(super) async fn finish(
    shared: &Shared,
    fence: &Fence,
    exit_code: Option<i64>,
    end: &RunEnd,
    text: &str,
) -> Result<(), StoreError> {
    let mut tx = shared.store.begin_write().await?;
    let run = tx.workers().finish_attempt(fence, exit_code, end).await?;
    shared.poster.post(&mut tx, &run.topic(), text).await?;
    tx.commit().await
}

/// Records the end of an attempt, trying again through database trouble
/// until it is recorded, the claim is lost (someone else has the run), or
/// the runner shuts down (the next runner on this host adopts the run).
pub(super) async fn finish_reliably(
    shared: &Shared,
    fence: &Fence,
    exit_code: Option<i64>,
    end: &RunEnd,
    text: &str,
    shutdown: &CancellationToken,
) {
    let mut backoff = crate::ground::backoff::Backoff::new();
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
pub(super) async fn wait_for_exit(
    child: Option<tokio::process::Child>,
    pidfd: Option<std::os::fd::OwnedFd>,
) {
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
    /// The sandbox stopped the worker at a limit (`limit <what>`).
    limit: Option<String>,
}

impl ExitStatus {
    /// A sandbox limit the worker hit, in words: one the init stopped it
    /// at, or the file size (the kernel's SIGXFSZ).
    fn limit_hit(&self) -> Option<String> {
        if let Some(what) = &self.limit {
            return Some(format!(
                "it hit a limit of its sandbox and was stopped ({})",
                one_line(what, 300)
            ));
        }
        (self.signal == Some(i64::from(libc::SIGXFSZ))).then(|| {
            "it hit a limit of its sandbox: a file reached max_file_size (killed by SIGXFSZ)"
                .to_string()
        })
    }

    fn describe(&self) -> String {
        match (self.code, self.signal, &self.error) {
            (_, _, Some(error)) => format!("the worker could not start: {}", one_line(error, 300)),
            _ if self.limit.is_some() => self.limit_hit().unwrap_or_default(),
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
        limit: None,
    };
    let text = text.trim();
    if let Some(code) = text.strip_prefix("exit ") {
        status.code = code.trim().parse().ok();
    } else if let Some(signal) = text.strip_prefix("signal ") {
        status.signal = signal.trim().parse().ok();
    } else if let Some(error) = text.strip_prefix("error ") {
        status.error = Some(error.to_string());
    } else if let Some(what) = text.strip_prefix("limit ") {
        status.limit = Some(what.to_string());
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

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
        std::fs::write(&path, "limit disk: 12 MiB\n").unwrap();
        assert!(
            read_exit(&path)
                .limit_hit()
                .unwrap()
                .contains("disk: 12 MiB")
        );
        std::fs::write(&path, format!("signal {}\n", libc::SIGXFSZ)).unwrap();
        assert!(
            read_exit(&path)
                .limit_hit()
                .unwrap()
                .contains("max_file_size")
        );
        std::fs::write(&path, "signal 9\n").unwrap();
        assert_eq!(read_exit(&path).limit_hit(), None);
    }

    #[test]
    fn the_cost_cap_post_pings_nobody() {
        let text = cost_cap_text(4, "$10.00 spent of a $10.00 cap", "@**all** @_**Alex|7**");
        assert!(!text.contains("@**"), "{text}");
        assert!(text.contains("held for @\u{200B}**all**"), "{text}");
    }
}
