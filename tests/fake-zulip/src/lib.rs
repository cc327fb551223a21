//! A strict, faithful fake Zulip server for Eagle's tests.
//!
//! It serves the part of Zulip 10.2's REST API that Eagle uses (see
//! `shared/zulip/API-NOTES.md` §5.2) on 127.0.0.1, in-process, and behaves
//! like the real server down to error codes, event-id gaps and long-poll
//! timing. It is strict: a request the real server would reject or ignore
//! (an unknown route or parameter, a malformed value, the wrong method) is
//! answered as Zulip would *and* recorded as a violation, so that
//! [`FakeZulip::assert_clean`] fails the test. Every 2xx body is checked
//! against the official OpenAPI spec with openapi-core, as Zulip's own tests
//! do ([`validate_response`]).
//!
//! ```ignore
//! let zulip = FakeZulip::start(FakeConfig::default()).await;
//! let bot = zulip.add_user("eagle-bot@example.com", "Eagle", true);
//! zulip.add_channel("executor", true);
//! zulip.subscribe(bot, "executor");
//! // … run Eagle against zulip.url() with zulip.api_key(bot) …
//! zulip.assert_clean();
//! ```
//!
//! Where the real server's code and the spec's examples disagree, the fake
//! follows the code of Zulip 10.2:
//! * a deactivated user gets 401 `UNAUTHORIZED` "Account is deactivated"
//!   (`authenticated_rest_api_view` re-raises every auth error as
//!   `UnauthorizedError`), not `USER_DEACTIVATED`;
//! * a parameter that is not valid JSON gets 400 `BAD_REQUEST`
//!   "`{name}` is not valid JSON" (`typed_endpoint`); `INVALID_JSON` is only
//!   for JSON request bodies, which the API does not use.
//!
//! Choices of the fake itself: rate limits are off (and the `X-RateLimit-*`
//! headers absent) until [`FakeZulip::set_rate_limit`]; the sender always
//! receives its own message; a poll parked on a queue that is expired or
//! deleted ends at once with `BAD_EVENT_QUEUE_ID`; `message_ids` in
//! `GET /messages` and moving messages between channels are not supported
//! (a 400 and a violation); unknown `/api/v1` paths get 404
//! `{"result":"error","msg":"Not Found","code":"BAD_REQUEST"}`.
//!
//! The schema check needs `python3` and PyPI the first time (about 13 s to
//! build `target/openapi-venv`); `FAKE_ZULIP_SPEC` overrides the spec path
//! (default `shared/zulip/zulip.yaml` beside the workspace). The self-tests
//! run with `cargo test -p fake-zulip`.

mod auth;
mod control;
mod deliver;
mod edit;
mod error;
mod events;
mod faults;
mod fetch;
mod mentions;
mod messages;
mod model;
mod narrow;
mod params;
mod queues;
mod ratelimit;
mod reactions;
mod render;
mod routes;
mod send;
mod server;
mod state;
mod users;
mod validate;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;

pub use model::{FakeConfig, Fault, QueueInfo, RecordedRequest, Route, StoredMessage};
pub use validate::validate_response;

use state::Shared;

/// A running fake server. Cheap to clone; every clone is the same server.
///
/// When the last clone is dropped, a violation nobody looked at fails the
/// test: a test that provokes violations on purpose clears them
/// ([`FakeZulip::clear_violations`]) or checks them ([`FakeZulip::assert_clean`]).
#[derive(Clone)]
pub struct FakeZulip {
    shared: Arc<Shared>,
    _check: Arc<CheckOnDrop>,
}

/// Fails the test if violations are left when the last handle goes.
struct CheckOnDrop {
    shared: Arc<Shared>,
}

impl Drop for CheckOnDrop {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        let violations = self.shared.read().violations.clone();
        if !violations.is_empty() {
            let list: Vec<String> = violations.iter().map(|v| format!("  - {v}")).collect();
            panic!(
                "the fake Zulip saw {} violation(s) that the test never checked:\n{}",
                violations.len(),
                list.join("\n")
            );
        }
    }
}

impl FakeZulip {
    /// Binds 127.0.0.1 on a random port and serves on the current tokio
    /// runtime until that runtime shuts down.
    pub async fn start(config: FakeConfig) -> FakeZulip {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("the fake Zulip cannot bind 127.0.0.1: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("the fake Zulip has no local address: {e}"));
        let shared = Arc::new(Shared::new(config, addr));
        let app = Router::new()
            .fallback(server::handle)
            .with_state(Arc::clone(&shared));
        tokio::spawn(async move {
            // Serving only ends with the runtime; an accept error ends it early
            // and the tests then fail on connection errors.
            let _ = axum::serve(listener, app).await;
        });
        tokio::spawn(queues::gc_task(Arc::clone(&shared)));
        if shared.config.validate_responses {
            // Pay for starting Python (and, once per machine, for building its
            // virtualenv) here rather than in a client's first request. A
            // validator that cannot run fails the test here, loudly: an
            // unchecked fake would let wrong answers pass.
            let verdict = tokio::task::spawn_blocking(validate::warm_up)
                .await
                .unwrap_or_else(|e| validate::Verdict::Unavailable(e.to_string()));
            if let validate::Verdict::Unavailable(reason) = &verdict {
                panic!("the fake Zulip cannot check its answers against the spec: {reason}");
            }
            server::record_verdict(&shared, "the warm-up check", verdict);
        }
        FakeZulip {
            _check: Arc::new(CheckOnDrop {
                shared: Arc::clone(&shared),
            }),
            shared,
        }
    }

    /// The base URL, `http://127.0.0.1:PORT` (the API is under `/api/v1`).
    pub fn url(&self) -> String {
        format!("http://{}", self.shared.addr)
    }

    /// Waits until `check` holds, re-evaluating it after every change of
    /// the fake's state (a request, a response, a message, a queue change);
    /// false if `timeout` passes first.
    pub async fn wait_until(
        &self,
        timeout: Duration,
        mut check: impl FnMut(&FakeZulip) -> bool,
    ) -> bool {
        let mut changes = self.shared.subscribe();
        let wait = async {
            loop {
                changes.borrow_and_update();
                if check(self) {
                    return;
                }
                if changes.changed().await.is_err() {
                    // The sender lives as long as `self`; this cannot happen.
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::time::timeout(timeout, wait).await.is_ok()
    }
}
