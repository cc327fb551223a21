//! The state of one fake behind a mutex, with a version counter that every
//! change bumps so that `wait_until` re-evaluates its check at once instead
//! of polling.

use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::watch;

/// The state shared by the server task and the test's handles.
pub(crate) struct Hub<S> {
    /// Where the fake listens.
    pub addr: SocketAddr,
    state: Mutex<S>,
    version: watch::Sender<u64>,
}

impl<S> Hub<S> {
    /// Wraps a fresh state.
    pub fn new(state: S, addr: SocketAddr) -> Hub<S> {
        Hub {
            addr,
            state: Mutex::new(state),
            version: watch::channel(0).0,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Reads the state. A poisoned lock (a test's closure panicked) is
    /// recovered: every change is made in one closure that either finishes
    /// or panics before touching anything a later reader relies on.
    pub fn read(&self) -> MutexGuard<'_, S> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Changes the state, then wakes everyone waiting on a change.
    pub fn mutate<R>(&self, f: impl FnOnce(&mut S) -> R) -> R {
        let result = {
            let mut state = self.read();
            f(&mut state)
        };
        self.version.send_modify(|v| *v = v.wrapping_add(1));
        result
    }

    /// Waits until `check` holds, re-evaluating it after every change;
    /// false if `timeout` passes first.
    pub async fn wait_until(&self, timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
        let mut changes = self.version.subscribe();
        let wait = async {
            loop {
                changes.borrow_and_update();
                if check() {
                    return;
                }
                if changes.changed().await.is_err() {
                    // The sender lives in `self`, which outlives this call.
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::time::timeout(timeout, wait).await.is_ok()
    }
}
