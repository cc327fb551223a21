//! Per-user sliding-window rate limits with Zulip's headers: the `api`
//! bucket for every authenticated request but `GET /events`, which has a
//! bucket of its own under the same rules.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use tokio::time::Instant;

use crate::state::unix_now_f64;

/// Which counter a request uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Bucket {
    Api,
    Events,
}

/// The outcome of one check, with what the headers say.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Decision {
    pub allowed: bool,
    /// `X-RateLimit-Limit`: the calls allowed by the widest rule.
    pub limit: u32,
    /// `X-RateLimit-Remaining`: the fewest calls left under any rule.
    pub remaining: u32,
    /// `X-RateLimit-Reset`: UNIX seconds at which every window is empty.
    pub reset: u64,
    /// Seconds until the request would be allowed (0 when allowed).
    pub retry_after: f64,
}

/// The rules and the request times per user and bucket.
#[derive(Debug, Default)]
pub(crate) struct RateLimiter {
    /// (window, calls), narrowest window first; empty means off.
    rules: Vec<(Duration, u32)>,
    hits: BTreeMap<(u64, Bucket), VecDeque<Instant>>,
}

impl RateLimiter {
    /// Replaces the rules and forgets past requests.
    pub fn set_rules(&mut self, rules: &[(Duration, u32)]) {
        let mut rules = rules.to_vec();
        rules.sort_by_key(|(window, _)| *window);
        self.rules = rules;
        self.hits.clear();
    }

    /// Counts a request if the rules allow it; `None` while limits are off.
    /// A refused request is not counted, as in Zulip.
    pub fn check(&mut self, user: u64, bucket: Bucket, now: Instant) -> Option<Decision> {
        let widest = self.rules.last().copied()?;
        let hits = self.hits.entry((user, bucket)).or_default();
        while hits
            .front()
            .is_some_and(|t| now.duration_since(*t) >= widest.0)
        {
            hits.pop_front();
        }
        let in_window = |hits: &VecDeque<Instant>, window: Duration| {
            hits.iter()
                .filter(|t| now.duration_since(**t) < window)
                .count()
        };
        let mut retry_after = Duration::ZERO;
        for (window, calls) in &self.rules {
            let count = in_window(hits, *window);
            let calls = *calls as usize;
            if count >= calls {
                // The request that must leave the window before one more fits.
                let times: Vec<&Instant> = hits
                    .iter()
                    .filter(|t| now.duration_since(**t) < *window)
                    .collect();
                let oldest = times.get(count - calls).copied().copied().unwrap_or(now);
                retry_after = retry_after.max((oldest + *window).saturating_duration_since(now));
            }
        }
        let allowed = retry_after.is_zero();
        if allowed {
            hits.push_back(now);
        }
        let remaining = self
            .rules
            .iter()
            .map(|(window, calls)| {
                calls.saturating_sub(u32::try_from(in_window(hits, *window)).unwrap_or(u32::MAX))
            })
            .min()
            .unwrap_or(0);
        let free_in = self
            .rules
            .iter()
            .filter_map(|(window, _)| {
                hits.back()
                    .map(|t| (*t + *window).saturating_duration_since(now))
            })
            .max()
            .unwrap_or(Duration::ZERO);
        Some(Decision {
            allowed,
            limit: widest.1,
            remaining,
            // Zulip sends `int(time.time() + reset)`: truncated, so the
            // window may free up to a second after the header says.
            reset: (unix_now_f64() + free_in.as_secs_f64()) as u64,
            retry_after: retry_after.as_secs_f64(),
        })
    }
}

/// Formats seconds as Zulip does (a Python float): always with a fraction.
pub(crate) fn format_secs(secs: f64) -> String {
    if secs.fract() == 0.0 {
        format!("{secs:.1}")
    } else {
        format!("{secs}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn sliding_window_counts_and_frees() {
        let mut limiter = RateLimiter::default();
        let start = Instant::now();
        assert_eq!(limiter.check(1, Bucket::Api, start), None);
        limiter.set_rules(&[(Duration::from_secs(10), 2)]);
        let first = limiter.check(1, Bucket::Api, start).unwrap();
        assert!(first.allowed);
        assert_eq!((first.limit, first.remaining), (2, 1));
        let later = start + Duration::from_millis(2500);
        assert!(limiter.check(1, Bucket::Api, later).unwrap().allowed);
        let refused = limiter.check(1, Bucket::Api, later).unwrap();
        assert!(!refused.allowed);
        assert_eq!(refused.remaining, 0);
        assert!(
            (refused.retry_after - 7.5).abs() < 1e-9,
            "{}",
            refused.retry_after
        );
        // Other users and the events bucket are counted apart.
        assert!(limiter.check(2, Bucket::Api, later).unwrap().allowed);
        assert!(limiter.check(1, Bucket::Events, later).unwrap().allowed);
        let freed = start + Duration::from_secs(10);
        assert!(limiter.check(1, Bucket::Api, freed).unwrap().allowed);
    }

    #[test]
    fn seconds_always_have_a_fraction() {
        assert_eq!(format_secs(2.0), "2.0");
        assert_eq!(format_secs(1.5), "1.5");
    }
}
