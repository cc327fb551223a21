//! The record of every request and of every strictness problem, and the
//! guard that fails a test whose fake saw violations nobody looked at.

use std::sync::Arc;
use tokio::time::Instant;

use crate::common::hub::Hub;

/// One HTTP request a fake received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRequest {
    /// `GET`, `POST`, …
    pub method: String,
    /// The path without the query string, e.g. `/repos/o/r/pulls/1`.
    pub path: String,
    /// The query-string pairs, decoded, in order.
    pub query: Vec<(String, String)>,
    /// Who the credentials belong to (a GitHub login or an Asana user gid),
    /// once authentication succeeded.
    pub user: Option<String>,
    /// The status sent, or 0 while none has been (a hung request).
    pub status: u16,
    /// Whether the answer was a 304 for a matching `If-None-Match`.
    pub etag_hit: bool,
    /// When the request arrived, on the runtime's clock: under paused time
    /// the gaps between requests are the waits the client made, skipped.
    pub at: Instant,
}

/// Requests and violations of one fake.
#[derive(Debug, Default)]
pub(crate) struct Journal {
    pub requests: Vec<RecordedRequest>,
    pub violations: Vec<String>,
}

impl Journal {
    /// Records a request as it arrives; returns its index for [`Journal::finish`].
    pub fn begin(&mut self, method: &str, path: &str, query: &[(String, String)]) -> usize {
        self.requests.push(RecordedRequest {
            method: method.to_owned(),
            path: path.to_owned(),
            query: query.to_vec(),
            user: None,
            status: 0,
            etag_hit: false,
            at: Instant::now(),
        });
        self.requests.len() - 1
    }

    /// Names the authenticated user of a recorded request.
    pub fn set_user(&mut self, index: usize, user: &str) {
        if let Some(r) = self.requests.get_mut(index) {
            r.user = Some(user.to_owned());
        }
    }

    /// Records the status sent.
    pub fn finish(&mut self, index: usize, status: u16, etag_hit: bool) {
        if let Some(r) = self.requests.get_mut(index) {
            r.status = status;
            r.etag_hit = etag_hit;
        }
    }

    /// Records a violation of the client's contract with the API.
    pub fn violation(&mut self, text: String) {
        self.violations.push(text);
    }
}

/// A state that carries a journal.
pub(crate) trait Journaled {
    /// The journal.
    fn journal(&self) -> &Journal;
}

/// Panics with every violation listed, if there is any.
pub(crate) fn assert_no_violations(fake: &str, violations: &[String]) {
    if !violations.is_empty() {
        panic!(
            "the fake {fake} saw {} violation(s):\n{}",
            violations.len(),
            list(violations)
        );
    }
}

fn list(violations: &[String]) -> String {
    let lines: Vec<String> = violations.iter().map(|v| format!("  - {v}")).collect();
    lines.join("\n")
}

/// Fails the test if violations are left when the last handle of a fake
/// goes: a test that provokes violations on purpose must clear or check
/// them, so none can pass unnoticed.
pub(crate) struct CheckOnDrop<S: Journaled> {
    pub hub: Arc<Hub<S>>,
    pub fake: &'static str,
}

impl<S: Journaled> Drop for CheckOnDrop<S> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        let violations = self.hub.read().journal().violations.clone();
        if !violations.is_empty() {
            panic!(
                "the fake {} saw {} violation(s) that the test never checked:\n{}",
                self.fake,
                violations.len(),
                list(&violations)
            );
        }
    }
}
