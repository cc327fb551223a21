//! Pacing requests from the server's rate-limit headers.
//!
//! Every authenticated Zulip response says how many requests are left in the
//! current window (`X-RateLimit-Remaining`) and when the window frees
//! (`X-RateLimit-Reset`, integer UNIX seconds). The pacer spends the budget
//! and, when it is used up, waits for the reset instead of being refused: a
//! burst of replies goes out in full and in order, with no 429 at all. A 429
//! that still happens (another client on the same bot) blocks the pacer for
//! the server's `Retry-After`.

use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Zulip truncates the reset time to whole seconds (`int(now + reset)`), so
/// the window frees up to a second after the header says; wait that second.
const SLACK: f64 = 1.0;
/// No single wait is longer than this, whatever a header or a skewed clock says.
const MAX_WAIT: Duration = Duration::from_secs(60);

async fn pause(wait: Duration) {
    tracing::debug!(
        wait_ms = wait.as_millis() as u64,
        "pacing to the server's rate limit"
    );
    tokio::time::sleep(wait).await;
}

/// A wait of `seconds`, clamped to `[0, MAX_WAIT]`: nothing for a time
/// past, `MAX_WAIT` for what cannot be read (NaN); never panics.
fn wait(seconds: f64) -> Duration {
    if seconds.is_nan() {
        return MAX_WAIT;
    }
    Duration::try_from_secs_f64(seconds.max(0.0)).map_or(MAX_WAIT, |d| d.min(MAX_WAIT))
}

#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct State {
    /// Requests left in the window, as last reported (and spent since).
    remaining: Option<u64>,
    /// When the window frees, by this process's clock: the server's reset
    /// time turned into a wait (at most `MAX_WAIT`) when it was reported, so
    /// a skewed clock or a bogus header costs one bounded wait, not many.
    free_at: Option<f64>,
    /// No request before this time (after a 429), by this process's clock.
    blocked_until: Option<f64>,
}

/// Paces one rate-limit bucket of one identity.
#[derive(Debug, Default)]
pub struct Pacer {
    state: Mutex<State>,
}

/// Seconds since the UNIX epoch, as a float.
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}

impl Pacer {
    pub fn new() -> Pacer {
        Pacer::default()
    }

    /// Takes one request from the budget, or says how long to wait first.
    pub fn reserve(&self, now: f64) -> Option<Duration> {
        self.check(now, true)
    }

    /// Says how long to wait before a request may go, without taking it.
    pub fn peek(&self, now: f64) -> Option<Duration> {
        self.check(now, false)
    }

    fn check(&self, now: f64, take: bool) -> Option<Duration> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(until) = state.blocked_until {
            if now < until {
                return Some(wait(until - now));
            }
            state.blocked_until = None;
        }
        match (state.remaining, state.free_at) {
            (Some(0), Some(free)) if now < free => Some(wait(free - now)),
            (Some(0), _) => {
                // The window has freed: the next response tells the new budget.
                state.remaining = None;
                None
            }
            (Some(left), _) => {
                if take {
                    state.remaining = Some(left - 1);
                }
                None
            }
            (None, _) => None,
        }
    }

    /// Requests left in the current window, if the server said.
    pub fn remaining(&self, now: f64) -> Option<u64> {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.blocked_until.is_some_and(|until| now < until) {
            return Some(0);
        }
        match (state.remaining, state.free_at) {
            (Some(0), Some(free)) if now >= free => None,
            (remaining, _) => remaining,
        }
    }

    /// Waits until a request may be sent, and takes it from the budget.
    pub async fn ready(&self) {
        while let Some(wait) = self.reserve(unix_now()) {
            pause(wait).await;
        }
    }

    /// Waits until a request may be sent, without taking it from the budget.
    pub async fn wait_for_budget(&self) {
        while let Some(wait) = self.peek(unix_now()) {
            pause(wait).await;
        }
    }

    /// Learns the budget from a response's headers.
    pub fn observe(&self, remaining: Option<u64>, reset_at: Option<f64>) {
        self.observe_at(unix_now(), remaining, reset_at);
    }

    /// [`Pacer::observe`] at a given time: the reset becomes a wait from now.
    pub fn observe_at(&self, now: f64, remaining: Option<u64>, reset_at: Option<f64>) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(remaining) = remaining {
            state.remaining = Some(remaining);
            state.free_at = reset_at.map(|reset| now + wait(reset + SLACK - now).as_secs_f64());
        }
    }

    /// After a 429: nothing before `retry_after` from `now`.
    pub fn retry_after(&self, now: f64, retry_after: Duration) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let until = now + retry_after.as_secs_f64();
        state.blocked_until = Some(state.blocked_until.map_or(until, |u| u.max(until)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spends_the_budget_then_waits_for_the_reset() {
        let pacer = Pacer::new();
        let now = 1_000.0;
        assert_eq!(pacer.reserve(now), None, "unknown budget: go");
        pacer.observe_at(now, Some(2), Some(1_010.0));
        assert_eq!(pacer.reserve(now), None);
        assert_eq!(pacer.reserve(now), None);
        let wait = pacer.reserve(now).expect("budget spent");
        assert!(
            (wait.as_secs_f64() - (10.0 + SLACK)).abs() < 1e-6,
            "{wait:?}"
        );
        assert_eq!(
            pacer.reserve(1_010.0 + SLACK + 0.01),
            None,
            "after the reset: go"
        );
    }

    #[test]
    fn the_server_count_wins() {
        let pacer = Pacer::new();
        pacer.observe_at(1_000.0, Some(0), Some(1_005.0));
        assert!(pacer.reserve(1_000.0).is_some());
        pacer.observe_at(1_000.0, Some(5), Some(1_006.0));
        assert_eq!(pacer.reserve(1_000.0), None);
    }

    #[test]
    fn absurd_headers_give_bounded_waits() {
        let pacer = Pacer::new();
        pacer.observe_at(1_000.0, Some(0), Some(f64::INFINITY));
        assert_eq!(pacer.reserve(1_000.0), Some(MAX_WAIT));
        pacer.observe_at(1_000.0, Some(0), Some(1e300));
        assert_eq!(pacer.reserve(1_000.0), Some(MAX_WAIT));
        // A server clock an hour ahead: one bounded wait, then requests go.
        let pacer = Pacer::new();
        pacer.observe_at(1_000.0, Some(0), Some(4_600.0));
        assert_eq!(pacer.reserve(1_000.0), Some(MAX_WAIT));
        assert_eq!(pacer.reserve(1_000.0 + MAX_WAIT.as_secs_f64() + 0.01), None);
        // NaN from a garbled header cannot freeze the pacer either.
        let pacer = Pacer::new();
        pacer.observe_at(1_000.0, Some(0), Some(f64::NAN));
        assert!(pacer.reserve(1_000.0).is_none_or(|w| w <= MAX_WAIT));
        assert_eq!(pacer.reserve(1_000.0 + 61.0), None);
        let pacer = Pacer::new();
        pacer.retry_after(1_000.0, Duration::from_secs(7200));
        assert_eq!(pacer.reserve(1_000.0), Some(MAX_WAIT));
    }

    #[test]
    fn a_429_blocks_for_retry_after() {
        let pacer = Pacer::new();
        pacer.retry_after(1_000.0, Duration::from_secs_f64(1.5));
        let wait = pacer.reserve(1_000.5).expect("blocked");
        assert!((wait.as_secs_f64() - 1.0).abs() < 1e-6);
        assert_eq!(pacer.reserve(1_001.6), None);
    }
}
