//! How the client is set up: where Asana is, the token, timeouts, the retry
//! policy (a pure decision, tested here without a network) and how a task's
//! platform is read.

use std::time::Duration;

use secrecy::SecretString;
use url::Url;

use super::error::Error;
use super::platform::PlatformRule;

/// Asana's REST base URL (OAS `servers`).
pub const DEFAULT_API_URL: &str = "https://app.asana.com/api/1.0";

/// Everything the client needs. `Debug` shows the token as `[REDACTED]`
/// (that is `SecretString`'s own `Debug`).
#[derive(Debug, Clone)]
pub struct AsanaConfig {
    /// The REST base, [`DEFAULT_API_URL`] in production; paths are appended
    /// to it (`{api_url}/tasks/{gid}`).
    pub api_url: Url,
    /// The personal access token, sent only as `Authorization: Bearer`.
    pub token: SecretString,
    /// How long one HTTP request may take, answer included. A write whose
    /// answer does not come in time is treated as "maybe done".
    pub request_timeout: Duration,
    /// When to try a failed call again.
    pub retry: RetryPolicy,
    /// How a task's platform is read (a custom field, else tags).
    pub platform: PlatformRule,
}

impl AsanaConfig {
    /// A configuration with the default timeout (30 s), retry policy and no
    /// platform rule.
    pub fn new(api_url: Url, token: SecretString) -> AsanaConfig {
        AsanaConfig {
            api_url,
            token,
            request_timeout: Duration::from_secs(30),
            retry: RetryPolicy::default(),
            platform: PlatformRule::default(),
        }
    }
}

/// When a failed call is tried again. Waits are relative (a `Retry-After`
/// in seconds, or a jittered exponential backoff) and bounded, so a call
/// ends in bounded time whatever the server does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts of a call that gets a 5xx or no answer, the first included.
    /// Writes are never repeated blindly: see `post_comment_once`.
    pub attempts: u32,
    /// The wait after the first such failure; it doubles after each one,
    /// scaled by a random factor in `[0.5, 1)` so that clients spread out.
    pub first_backoff: Duration,
    /// The longest backoff wait.
    pub max_backoff: Duration,
    /// How many 429 answers in a row one call waits out.
    pub rate_limit_waits: u32,
    /// The longest `Retry-After` the client sleeps through; a longer one
    /// ends the call with [`Error::RateLimited`] so the caller can plan.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            attempts: 4,
            first_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
            rate_limit_waits: 5,
            // Asana's window is a minute: a wait up to that is normal.
            max_retry_after: Duration::from_secs(65),
        }
    }
}

/// The failures of one call so far.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct RetryState {
    failures: u32,
    rate_limited: u32,
}

impl RetryPolicy {
    /// Whether to try again after `error`, and how long to wait first.
    /// `repeatable` says whether the request may be sent again after a
    /// failure that may have been carried out (true for reads).
    pub(crate) fn next_wait(
        &self,
        state: &mut RetryState,
        error: &Error,
        repeatable: bool,
    ) -> Option<Duration> {
        match error {
            // A 429 is a refusal, so even a write may be sent again.
            Error::RateLimited { retry_after, .. } => {
                state.rate_limited += 1;
                if state.rate_limited > self.rate_limit_waits {
                    return None;
                }
                let wait = match retry_after {
                    Some(after) => *after,
                    None => self.backoff(state.rate_limited),
                };
                if wait > self.max_retry_after {
                    return None;
                }
                // Retry-After counts whole seconds from when the server
                // wrote it: a little more never hurts, a little less does.
                Some(wait + Duration::from_millis(fastrand::u64(50..250)))
            }
            Error::Server { .. } | Error::Transport { .. } if repeatable => {
                state.failures += 1;
                (state.failures < self.attempts).then(|| self.backoff(state.failures))
            }
            _ => None,
        }
    }

    /// The jittered wait after the `n`-th failure (n ≥ 1).
    pub(crate) fn backoff(&self, n: u32) -> Duration {
        let factor = 2u32.saturating_pow(n.saturating_sub(1).min(16));
        let base = self
            .first_backoff
            .saturating_mul(factor)
            .min(self.max_backoff);
        base.mul_f64(0.5 + fastrand::f64() / 2.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limited(after: Option<u64>) -> Error {
        Error::RateLimited {
            what: "GET /tasks".into(),
            retry_after: after.map(Duration::from_secs),
        }
    }

    fn server() -> Error {
        Error::Server {
            what: "GET /tasks".into(),
            status: 503,
            message: "x".into(),
        }
    }

    fn transport() -> Error {
        Error::Transport {
            what: "GET /tasks".into(),
            reason: "reset".into(),
            timed_out: false,
        }
    }

    #[test]
    fn retry_decisions() {
        let policy = RetryPolicy::default();
        let secs = |d: Option<Duration>| d.map(|d| d.as_secs_f64());
        // A Retry-After is honoured (plus a little), up to the bound.
        let mut s = RetryState::default();
        let wait = secs(policy.next_wait(&mut s, &limited(Some(1)), false)).unwrap_or(0.0);
        assert!((1.05..1.25).contains(&wait), "{wait}");
        let mut s = RetryState::default();
        assert_eq!(policy.next_wait(&mut s, &limited(Some(3600)), true), None);
        // Without Retry-After, a backoff.
        let mut s = RetryState::default();
        assert!(policy.next_wait(&mut s, &limited(None), true).is_some());
        // At most `rate_limit_waits` 429s in a row.
        let mut s = RetryState::default();
        for _ in 0..policy.rate_limit_waits {
            assert!(policy.next_wait(&mut s, &limited(Some(0)), true).is_some());
        }
        assert_eq!(policy.next_wait(&mut s, &limited(Some(0)), true), None);
        // 5xx and transport: `attempts` in all for reads, never for writes.
        for error in [server(), transport()] {
            let mut s = RetryState::default();
            let waits: Vec<_> = (0..policy.attempts)
                .map(|_| policy.next_wait(&mut s, &error, true))
                .collect();
            assert!(waits[..3].iter().all(Option::is_some), "{waits:?}");
            assert_eq!(waits[3], None);
            let mut s = RetryState::default();
            assert_eq!(policy.next_wait(&mut s, &error, false), None);
        }
        // Everything else is final.
        let final_errors = [
            Error::Unauthorized { what: "w".into() },
            Error::NotFound {
                what: "w".into(),
                message: "m".into(),
            },
            Error::PaymentRequired {
                what: "w".into(),
                message: "m".into(),
            },
            Error::BadRequest {
                what: "w".into(),
                status: 400,
                message: "m".into(),
            },
            Error::Malformed {
                what: "w".into(),
                reason: "r".into(),
            },
        ];
        for error in final_errors {
            let mut s = RetryState::default();
            assert_eq!(policy.next_wait(&mut s, &error, true), None, "{error}");
        }
    }

    #[test]
    fn backoff_doubles_jittered_and_capped() {
        let policy = RetryPolicy {
            first_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(5),
            ..RetryPolicy::default()
        };
        for (n, base) in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 5.0), (40, 5.0)] {
            let wait = policy.backoff(n).as_secs_f64();
            assert!(wait >= base / 2.0 && wait < base, "failure {n}: {wait}");
        }
    }
}
