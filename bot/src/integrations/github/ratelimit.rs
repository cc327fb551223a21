//! GitHub's rate limits: reading `x-ratelimit-*` on every answer, deciding
//! whether an answer is a limit and how long to wait ([`limit_wait`], pure,
//! so the "at least a minute, doubling" rule is tested without waiting),
//! and the client's shared memory of budgets and pauses ([`Limits`]).
//!
//! Rules (GitHub's "rate limits for the REST API" and "best practices"):
//! * primary: 403 or 429 with `x-ratelimit-remaining: 0` (GraphQL: 200 with
//!   a `RATE_LIMITED` error): wait until `x-ratelimit-reset`;
//! * secondary: 403 or 429 whose message names a secondary rate limit, or a
//!   429 otherwise: `retry-after` when given, else until the reset when the
//!   budget is spent, else at least a minute, doubling on repeats;
//! * any other 403 is a permission error: not a limit, not retried.
//!
//! Waits are relative: the reset (epoch seconds) is turned into a duration
//! against the answer's own `Date` header, so a skewed local clock does not
//! stretch or shrink them, and every wait is bounded.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::header::HeaderMap;
use serde_json::Value;
use tokio::time::Instant;

/// The shortest wait after a secondary limit without `retry-after`.
pub const SECONDARY_FLOOR: Duration = Duration::from_secs(60);
/// The longest wait after repeated secondary limits.
pub const SECONDARY_CAP: Duration = Duration::from_secs(16 * 60);
/// The longest wait for a primary reset (the window is an hour).
pub const RESET_CAP: Duration = Duration::from_secs(3_600 + 60);
/// Added to waits for a reset: the reset and the `Date` header are whole
/// seconds, so the window may turn up to a second later than computed.
const RESET_MARGIN: Duration = Duration::from_secs(1);

/// Which limit was hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitKind {
    /// The hourly budget of a resource is spent.
    Primary,
    /// Too many requests too fast (or too much CPU, or content creation).
    Secondary,
}

impl std::fmt::Display for LimitKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LimitKind::Primary => "primary",
            LimitKind::Secondary => "secondary",
        })
    }
}

/// An answer that was a rate limit, and the wait before asking again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitWait {
    /// Which limit.
    pub kind: LimitKind,
    /// How long to wait.
    pub wait: Duration,
}

/// Which API an answer came from: GraphQL reports limits in a 200 body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// REST (`x-ratelimit-resource: core` for the calls Eagle makes).
    Rest,
    /// GraphQL (`x-ratelimit-resource: graphql`, counted in points).
    GraphQl,
}

impl Api {
    /// The resource whose budget a request of this API spends.
    pub fn resource(self) -> &'static str {
        match self {
            Api::Rest => "core",
            Api::GraphQl => "graphql",
        }
    }
}

/// How the client copes with rate limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// How many times one request may be sent while it meets rate limits
    /// (1: never re-sent).
    pub max_attempts: u32,
    /// The longest single wait the client sits out itself; a longer one
    /// returns [`crate::integrations::github::Error::RateLimited`] at once, so that a
    /// loop can schedule the retry instead of blocking.
    pub max_wait: Duration,
}

impl Default for RetryPolicy {
    /// Four tries; waits up to a full primary window.
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 4,
            max_wait: RESET_CAP,
        }
    }
}

impl RetryPolicy {
    /// Never waits and never re-sends: every limit is an error at once.
    pub fn no_wait() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 1,
            max_wait: Duration::ZERO,
        }
    }
}

/// The rate-limit headers of one answer, with the reset made relative.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LimitHeaders {
    /// `x-ratelimit-resource`.
    pub resource: Option<String>,
    /// `x-ratelimit-remaining`.
    pub remaining: Option<u64>,
    /// `x-ratelimit-reset` minus the answer's `Date` (or `now` without one).
    pub reset_in: Option<Duration>,
    /// `retry-after`, in seconds or as an HTTP date.
    pub retry_after: Option<Duration>,
}

impl LimitHeaders {
    /// Reads the headers; `now` stands in for a missing `Date`.
    pub fn parse(headers: &HeaderMap, now: SystemTime) -> LimitHeaders {
        let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let server_now = text("date")
            .and_then(parse_http_date)
            .unwrap_or_else(|| epoch_seconds(now));
        let reset_in = text("x-ratelimit-reset")
            .and_then(|v| v.trim().parse::<i64>().ok())
            .map(|reset| seconds(reset.saturating_sub(server_now)).min(RESET_CAP));
        let retry_after = text("retry-after").and_then(|v| {
            let v = v.trim();
            match v.parse::<u64>() {
                Ok(secs) => Some(Duration::from_secs(secs)),
                Err(_) => parse_http_date(v).map(|at| seconds(at.saturating_sub(server_now))),
            }
        });
        LimitHeaders {
            resource: text("x-ratelimit-resource").map(str::to_owned),
            remaining: text("x-ratelimit-remaining").and_then(|v| v.trim().parse().ok()),
            reset_in,
            retry_after: retry_after.map(|d| d.min(RESET_CAP)),
        }
    }
}

fn seconds(secs: i64) -> Duration {
    Duration::from_secs(u64::try_from(secs).unwrap_or(0))
}

fn epoch_seconds(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// An HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT`) as epoch seconds.
fn parse_http_date(text: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc2822(text.trim())
        .ok()
        .map(|t| t.timestamp())
}

/// Whether an answer is a rate limit, and how long to wait (pure).
///
/// `attempt` counts the secondary limits met in a row, this one included
/// (1 for the first): without `retry-after` the wait is 60 s, 120 s, 240 s,
/// … up to [`SECONDARY_CAP`]. `now` stands in for a missing `Date` header.
pub fn limit_wait(
    api: Api,
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    attempt: u32,
    now: SystemTime,
) -> Option<LimitWait> {
    limit_wait_parsed(
        api,
        status,
        &LimitHeaders::parse(headers, now),
        body,
        attempt,
    )
}

/// [`limit_wait`] over headers already read.
pub fn limit_wait_parsed(
    api: Api,
    status: u16,
    headers: &LimitHeaders,
    body: &[u8],
    attempt: u32,
) -> Option<LimitWait> {
    let graphql_answer = api == Api::GraphQl && status == 200;
    if !(status == 403 || status == 429 || graphql_answer) {
        return None;
    }
    let said = BodySays::read(body);
    if graphql_answer && !said.graphql_rate_limited {
        return None;
    }
    let spent = headers.remaining == Some(0);
    let kind = if said.secondary {
        LimitKind::Secondary
    } else if spent || said.primary || said.graphql_rate_limited {
        LimitKind::Primary
    } else if status == 429 || headers.retry_after.is_some() {
        // A 429 is always a limit; a 403 is one when a header says so.
        LimitKind::Secondary
    } else {
        // A 403 without any sign of a limit: a permission error.
        return None;
    };
    let until_reset = headers.reset_in.map(|d| d + RESET_MARGIN);
    let wait = match (kind, headers.retry_after) {
        (_, Some(after)) => after.max(Duration::from_secs(1)),
        (LimitKind::Primary, None) => until_reset.unwrap_or(SECONDARY_FLOOR),
        (LimitKind::Secondary, None) => match until_reset {
            Some(reset) if spent => reset,
            _ => secondary_backoff(attempt),
        },
    };
    Some(LimitWait { kind, wait })
}

/// 60 s doubled for each repeat, capped.
pub fn secondary_backoff(attempt: u32) -> Duration {
    let doublings = attempt.saturating_sub(1).min(10);
    (SECONDARY_FLOOR * 2u32.pow(doublings)).min(SECONDARY_CAP)
}

/// What an error body says about limits.
#[derive(Debug, Default)]
struct BodySays {
    secondary: bool,
    primary: bool,
    graphql_rate_limited: bool,
}

impl BodySays {
    fn read(body: &[u8]) -> BodySays {
        let Ok(value) = serde_json::from_slice::<Value>(body) else {
            return BodySays::default();
        };
        let mut messages: Vec<String> = Vec::new();
        if let Some(m) = value.get("message").and_then(Value::as_str) {
            messages.push(m.to_lowercase());
        }
        let mut graphql_rate_limited = false;
        for e in value
            .get("errors")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if e.get("type").and_then(Value::as_str) == Some("RATE_LIMITED") {
                graphql_rate_limited = true;
            }
            if let Some(m) = e.get("message").and_then(Value::as_str) {
                messages.push(m.to_lowercase());
            }
        }
        BodySays {
            secondary: messages.iter().any(|m| m.contains("secondary rate limit")),
            primary: messages
                .iter()
                .any(|m| m.contains("api rate limit exceeded")),
            graphql_rate_limited,
        }
    }
}

/// What the client knows of one resource's budget.
#[derive(Debug, Clone, Copy)]
struct Budget {
    remaining: u64,
    resets_at: Instant,
}

/// A resource's budget as last reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetView {
    /// Requests (REST) or points (GraphQL) left in the window.
    pub remaining: u64,
    /// Until the window resets.
    pub resets_in: Duration,
}

#[derive(Debug, Default)]
struct State {
    budgets: HashMap<String, Budget>,
    /// A secondary limit pauses every request: GitHub counts them per user
    /// across REST and GraphQL.
    paused_until: Option<Instant>,
    /// Secondary limits in a row, for the doubling.
    streak: u32,
}

/// The client's shared memory of budgets and pauses.
#[derive(Debug, Default)]
pub(crate) struct Limits {
    state: Mutex<State>,
}

impl Limits {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock leaves plain numbers behind;
        // they are still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How long a request to `resource` must wait before it may be sent.
    pub fn wait_before(&self, resource: &str, now: Instant) -> Option<LimitWait> {
        let state = self.lock();
        let paused = state
            .paused_until
            .map(|until| until.saturating_duration_since(now))
            .filter(|d| !d.is_zero())
            .map(|wait| LimitWait {
                kind: LimitKind::Secondary,
                wait,
            });
        let spent = state
            .budgets
            .get(resource)
            .filter(|b| b.remaining == 0)
            .map(|b| b.resets_at.saturating_duration_since(now))
            .filter(|d| !d.is_zero())
            .map(|wait| LimitWait {
                kind: LimitKind::Primary,
                wait,
            });
        match (paused, spent) {
            (Some(a), Some(b)) => Some(if a.wait >= b.wait { a } else { b }),
            (a, b) => a.or(b),
        }
    }

    /// Records an answer's budget headers (`resource` when it names none).
    pub fn observe(&self, resource: &str, headers: &LimitHeaders, now: Instant) {
        let (Some(remaining), Some(reset_in)) = (headers.remaining, headers.reset_in) else {
            return;
        };
        let name = headers.resource.as_deref().unwrap_or(resource);
        let resets_at = now
            + reset_in
            + if remaining == 0 {
                RESET_MARGIN
            } else {
                Duration::ZERO
            };
        self.lock().budgets.insert(
            name.to_owned(),
            Budget {
                remaining,
                resets_at,
            },
        );
    }

    /// Secondary limits met in a row so far.
    pub fn streak(&self) -> u32 {
        self.lock().streak
    }

    /// Records a limit: a secondary one pauses everything, a primary one
    /// marks its resource spent, both until the wait is over.
    pub fn limited(&self, resource: &str, limit: LimitWait, now: Instant) {
        let until = now + limit.wait;
        let mut state = self.lock();
        match limit.kind {
            LimitKind::Secondary => {
                state.streak = state.streak.saturating_add(1);
                state.paused_until = Some(state.paused_until.map_or(until, |p| p.max(until)));
            }
            LimitKind::Primary => {
                state.budgets.insert(
                    resource.to_owned(),
                    Budget {
                        remaining: 0,
                        resets_at: until,
                    },
                );
            }
        }
    }

    /// An answer that was not a limit ends a streak of secondary limits.
    pub fn answered(&self) {
        self.lock().streak = 0;
    }

    /// A resource's budget as last reported.
    pub fn budget(&self, resource: &str, now: Instant) -> Option<BudgetView> {
        self.lock().budgets.get(resource).map(|b| BudgetView {
            remaining: b.remaining,
            resets_in: b.resets_at.saturating_duration_since(now),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    const SECONDARY: &str = r#"{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits","status":"403"}"#;
    const PRIMARY: &str = r#"{"message":"API rate limit exceeded for user ID 1.","status":"403"}"#;
    const PERMISSION: &str = r#"{"message":"Resource not accessible by personal access token","documentation_url":"https://docs.github.com/rest","status":"403"}"#;
    const GRAPHQL_LIMITED: &str = r#"{"errors":[{"type":"RATE_LIMITED","message":"API rate limit exceeded for user ID 1."}]}"#;
    const GRAPHQL_SECONDARY: &str = r#"{"errors":[{"type":"RATE_LIMITED","message":"You have exceeded a secondary rate limit."}]}"#;
    const GRAPHQL_OTHER: &str =
        r#"{"errors":[{"type":"NOT_FOUND","message":"Could not resolve"}]}"#;

    /// `Date` is fixed at epoch 1_000_000; `reset` is relative to it.
    fn headers(
        remaining: Option<u64>,
        reset_in: Option<i64>,
        retry_after: Option<&str>,
    ) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            "date",
            HeaderValue::from_static("Mon, 12 Jan 1970 13:46:40 GMT"),
        );
        if let Some(r) = remaining {
            h.insert("x-ratelimit-remaining", HeaderValue::from(r));
        }
        if let Some(r) = reset_in {
            h.insert("x-ratelimit-reset", HeaderValue::from(1_000_000 + r));
        }
        if let Some(r) = retry_after {
            h.insert("retry-after", HeaderValue::from_str(r).unwrap());
        }
        h
    }

    #[test]
    fn the_date_header_makes_the_reset_relative() {
        // A local clock a day off does not change the wait.
        let skewed = UNIX_EPOCH + Duration::from_secs(1_000_000 + 86_400);
        let parsed = LimitHeaders::parse(&headers(Some(0), Some(120), None), skewed);
        assert_eq!(parsed.reset_in, Some(Duration::from_secs(120)));
        let mut no_date = headers(Some(0), Some(120), None);
        no_date.remove("date");
        let now = UNIX_EPOCH + Duration::from_secs(1_000_100);
        let parsed = LimitHeaders::parse(&no_date, now);
        assert_eq!(parsed.reset_in, Some(Duration::from_secs(20)));
        // A reset in the past waits nothing; one absurdly far is capped.
        let parsed = LimitHeaders::parse(&headers(Some(0), Some(-5), None), skewed);
        assert_eq!(parsed.reset_in, Some(Duration::ZERO));
        let parsed = LimitHeaders::parse(&headers(Some(0), Some(999_999), None), skewed);
        assert_eq!(parsed.reset_in, Some(RESET_CAP));
        let date = headers(None, None, Some("Mon, 12 Jan 1970 13:47:10 GMT"));
        assert_eq!(
            LimitHeaders::parse(&date, skewed).retry_after,
            Some(Duration::from_secs(30))
        );
    }

    #[test]
    fn waits_follow_githubs_rules() {
        use LimitKind::*;
        let secs = Duration::from_secs;
        let now = UNIX_EPOCH;
        #[allow(clippy::type_complexity)]
        let cases: &[(
            &str,
            Api,
            u16,
            HeaderMap,
            &str,
            u32,
            Option<(LimitKind, Duration)>,
        )] = &[
            (
                "ok",
                Api::Rest,
                200,
                headers(Some(10), Some(60), None),
                "{}",
                1,
                None,
            ),
            (
                "not found",
                Api::Rest,
                404,
                headers(Some(0), Some(60), None),
                "{}",
                1,
                None,
            ),
            (
                "403 permission is not a limit",
                Api::Rest,
                403,
                headers(Some(4_000), Some(60), None),
                PERMISSION,
                1,
                None,
            ),
            (
                "403 primary: until reset",
                Api::Rest,
                403,
                headers(Some(0), Some(120), None),
                PRIMARY,
                1,
                Some((Primary, secs(121))),
            ),
            (
                "429 primary: until reset",
                Api::Rest,
                429,
                headers(Some(0), Some(30), None),
                PRIMARY,
                3,
                Some((Primary, secs(31))),
            ),
            (
                "403 remaining 0 is primary whatever the text",
                Api::Rest,
                403,
                headers(Some(0), Some(10), None),
                "{}",
                1,
                Some((Primary, secs(11))),
            ),
            (
                "secondary with retry-after",
                Api::Rest,
                403,
                headers(Some(4_000), Some(60), Some("7")),
                SECONDARY,
                5,
                Some((Secondary, secs(7))),
            ),
            (
                "secondary retry-after 0 still waits a second",
                Api::Rest,
                403,
                headers(Some(4_000), Some(60), Some("0")),
                SECONDARY,
                1,
                Some((Secondary, secs(1))),
            ),
            (
                "secondary without retry-after: at least a minute",
                Api::Rest,
                403,
                headers(Some(4_000), Some(3_000), None),
                SECONDARY,
                1,
                Some((Secondary, secs(60))),
            ),
            (
                "secondary repeated: doubled",
                Api::Rest,
                403,
                headers(Some(4_000), Some(3_000), None),
                SECONDARY,
                2,
                Some((Secondary, secs(120))),
            ),
            (
                "secondary third time",
                Api::Rest,
                429,
                headers(Some(4_000), Some(3_000), None),
                SECONDARY,
                3,
                Some((Secondary, secs(240))),
            ),
            (
                "secondary many times: capped",
                Api::Rest,
                429,
                headers(None, None, None),
                SECONDARY,
                40,
                Some((Secondary, SECONDARY_CAP)),
            ),
            (
                "secondary with a spent budget: until reset",
                Api::Rest,
                403,
                headers(Some(0), Some(300), None),
                SECONDARY,
                1,
                Some((Secondary, secs(301))),
            ),
            (
                "a bare 429 is secondary",
                Api::Rest,
                429,
                headers(Some(4_000), Some(60), None),
                "not json",
                1,
                Some((Secondary, secs(60))),
            ),
            (
                "a 403 with retry-after is a limit",
                Api::Rest,
                403,
                headers(None, None, Some("3")),
                "{}",
                1,
                Some((Secondary, secs(3))),
            ),
            (
                "graphql primary in a 200",
                Api::GraphQl,
                200,
                headers(Some(0), Some(50), None),
                GRAPHQL_LIMITED,
                1,
                Some((Primary, secs(51))),
            ),
            (
                "graphql secondary in a 200",
                Api::GraphQl,
                200,
                headers(Some(4_000), Some(50), None),
                GRAPHQL_SECONDARY,
                1,
                Some((Secondary, secs(60))),
            ),
            (
                "graphql other errors are not limits",
                Api::GraphQl,
                200,
                headers(Some(4_000), Some(50), None),
                GRAPHQL_OTHER,
                1,
                None,
            ),
            (
                "a REST 200 body is never read as a limit",
                Api::Rest,
                200,
                headers(Some(0), Some(50), None),
                GRAPHQL_LIMITED,
                1,
                None,
            ),
        ];
        for (name, api, status, h, body, attempt, expected) in cases {
            let got = limit_wait(*api, *status, h, body.as_bytes(), *attempt, now);
            let expected = expected.map(|(kind, wait)| LimitWait { kind, wait });
            assert_eq!(got, expected, "{name}");
        }
    }

    #[test]
    fn the_shared_memory_pauses_and_forgets() {
        let limits = Limits::default();
        let t0 = Instant::now();
        assert_eq!(limits.wait_before("core", t0), None);
        let spent = LimitHeaders {
            resource: Some("core".into()),
            remaining: Some(0),
            reset_in: Some(Duration::from_secs(10)),
            retry_after: None,
        };
        limits.observe("core", &spent, t0);
        let wait = limits.wait_before("core", t0).unwrap();
        assert_eq!(wait.kind, LimitKind::Primary);
        assert_eq!(wait.wait, Duration::from_secs(11));
        assert_eq!(limits.wait_before("graphql", t0), None, "per resource");
        assert_eq!(
            limits.wait_before("core", t0 + Duration::from_secs(12)),
            None
        );

        limits.limited(
            "graphql",
            LimitWait {
                kind: LimitKind::Secondary,
                wait: Duration::from_secs(60),
            },
            t0,
        );
        assert_eq!(limits.streak(), 1);
        let wait = limits.wait_before("graphql", t0).unwrap();
        assert_eq!(
            (wait.kind, wait.wait),
            (LimitKind::Secondary, Duration::from_secs(60))
        );
        assert!(
            limits.wait_before("core", t0).is_some(),
            "secondary pauses all"
        );
        limits.answered();
        assert_eq!(limits.streak(), 0);
        assert_eq!(
            limits.wait_before("core", t0 + Duration::from_secs(61)),
            None
        );
    }
}
