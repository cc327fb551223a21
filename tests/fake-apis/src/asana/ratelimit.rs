//! Asana's per-minute request limit per token: a sliding window of 60 s in
//! which rejected requests count too (Asana: "rejected requests still count
//! against the quota"), answered with 429 and `Retry-After`.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use tokio::time::Instant;

const WINDOW: Duration = Duration::from_secs(60);

/// Request times per token, and the limit (off when `None`).
#[derive(Debug, Default)]
pub(crate) struct Limiter {
    per_minute: Option<u32>,
    hits: BTreeMap<String, VecDeque<Instant>>,
}

impl Limiter {
    /// Sets the limit and forgets past requests.
    pub fn set(&mut self, per_minute: Option<u32>) {
        self.per_minute = per_minute;
        self.hits.clear();
    }

    /// Counts a request; `Err(seconds)` to wait when over the limit.
    pub fn check(&mut self, token: &str, now: Instant) -> Result<(), u64> {
        let Some(limit) = self.per_minute else {
            return Ok(());
        };
        let hits = self.hits.entry(token.to_owned()).or_default();
        while hits
            .front()
            .is_some_and(|t| now.duration_since(*t) >= WINDOW)
        {
            hits.pop_front();
        }
        let over = hits.len() >= limit as usize;
        hits.push_back(now);
        if !over {
            return Ok(());
        }
        // The window frees a slot once enough old requests have left it;
        // counting this one too, that is the (len - limit)-th oldest.
        let index = hits.len() - limit as usize - 1;
        let frees = hits.get(index).map_or(now, |t| *t + WINDOW);
        let wait = frees.saturating_duration_since(now);
        Err(wait.as_secs() + u64::from(wait.subsec_nanos() > 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn window_counts_rejections_and_frees() {
        let mut limiter = Limiter::default();
        let start = Instant::now();
        assert_eq!(limiter.check("t", start), Ok(()));
        limiter.set(Some(2));
        assert_eq!(limiter.check("t", start), Ok(()));
        assert_eq!(limiter.check("t", start + Duration::from_secs(10)), Ok(()));
        assert_eq!(limiter.check("t", start + Duration::from_secs(20)), Err(40));
        // Another token has its own window.
        assert_eq!(limiter.check("u", start + Duration::from_secs(20)), Ok(()));
        // The rejected request counted: at 60 s the first left, but two remain.
        assert_eq!(limiter.check("t", start + Duration::from_secs(60)), Err(10));
        assert_eq!(limiter.check("t", start + Duration::from_secs(200)), Ok(()));
    }
}
