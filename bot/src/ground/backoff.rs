//! Jittered exponential backoff (used for Zulip, the database and workers),
//! as Zulip's web app does it: the n-th
//! consecutive failure waits `2^((n+1)/2)` seconds, capped at 90, scaled by
//! a random factor in `[0.5, 1)` so that many clients do not retry in step.

use std::time::Duration;

/// The longest wait between attempts.
pub const CAP: Duration = Duration::from_secs(90);

/// Counts consecutive failures and says how long to wait after each.
#[derive(Debug, Default, Clone)]
pub struct Backoff {
    failures: u32,
}

impl Backoff {
    pub fn new() -> Backoff {
        Backoff::default()
    }

    /// Records a failure and returns the wait before the next attempt.
    pub fn failed(&mut self) -> Duration {
        self.failures = self.failures.saturating_add(1);
        let base = 2f64
            .powf(f64::from(self.failures + 1) / 2.0)
            .min(CAP.as_secs_f64());
        Duration::from_secs_f64(base * (1.0 + fastrand::f64()) / 2.0)
    }

    /// Records a failure with a server-given minimum wait (`Retry-After`).
    pub fn failed_at_least(&mut self, at_least: Duration) -> Duration {
        self.failed()
            .max(at_least + Duration::from_millis(fastrand::u64(0..250)))
    }

    /// Forgets the failures after a success.
    pub fn succeeded(&mut self) {
        self.failures = 0;
    }

    /// Consecutive failures so far.
    pub fn failures(&self) -> u32 {
        self.failures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_jittered_and_capped() {
        let mut backoff = Backoff::new();
        let mut previous_max = 0.0;
        for n in 1..=20u32 {
            let wait = backoff.failed().as_secs_f64();
            let base = 2f64.powf(f64::from(n + 1) / 2.0).min(90.0);
            assert!(wait >= base / 2.0 && wait <= base, "failure {n}: {wait}");
            assert!(base >= previous_max);
            previous_max = base;
        }
        assert!(backoff.failed() <= CAP);
        backoff.succeeded();
        assert_eq!(backoff.failures(), 0);
        assert!(backoff.failed() <= Duration::from_secs(2));
    }

    #[test]
    fn retry_after_is_a_floor() {
        let mut backoff = Backoff::new();
        let wait = backoff.failed_at_least(Duration::from_secs_f64(1.5));
        assert!(wait >= Duration::from_secs_f64(1.5));
        assert!(wait < Duration::from_secs(2));
    }
}
