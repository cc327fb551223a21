//! What can go wrong talking to Asana, typed by what the caller does about
//! it. Every variant names the call (`GET /projects/{gid}/tasks`, without
//! its query) and never the token: the token lives only in a sensitive
//! header, and the server's own messages do not echo it.

use std::time::Duration;

/// An error of the Asana client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// 401: the token is missing, wrong or revoked. Retrying will not help;
    /// the operator must replace the token.
    #[error("asana refused the token (401) on {what}")]
    Unauthorized {
        /// The call, `METHOD /path`.
        what: String,
    },
    /// 402: the call needs a premium workspace (search, hence followed
    /// tasks). Retrying will not help until the workspace is upgraded.
    #[error("{what} needs a premium asana workspace (402): {message}")]
    PaymentRequired {
        /// The call, `METHOD /path`.
        what: String,
        /// Asana's `errors[0].message`.
        message: String,
    },
    /// 403: the token's user may not see or change the object.
    #[error("asana forbids {what} (403): {message}")]
    Forbidden {
        /// The call, `METHOD /path`.
        what: String,
        /// Asana's `errors[0].message`.
        message: String,
    },
    /// 404: the object does not exist (or was deleted).
    #[error("asana has no object for {what} (404): {message}")]
    NotFound {
        /// The call, `METHOD /path`.
        what: String,
        /// Asana's `errors[0].message`.
        message: String,
    },
    /// 429 that outlasted the retries, or asked for a longer wait than the
    /// client is willing to sleep: try again after `retry_after`.
    #[error("asana rate-limited {what} (429); retry after {retry_after:?}")]
    RateLimited {
        /// The call, `METHOD /path`.
        what: String,
        /// Asana's `Retry-After`, if it sent a usable one.
        retry_after: Option<Duration>,
    },
    /// 5xx that outlasted the retries. A write may or may not have happened.
    #[error("asana failed on {what} ({status}): {message}")]
    Server {
        /// The call, `METHOD /path`.
        what: String,
        /// The HTTP status.
        status: u16,
        /// Asana's `errors[0].message`, or the status text.
        message: String,
    },
    /// No answer (connection refused or reset, DNS, TLS, a timeout) after
    /// the retries. A write may or may not have happened.
    #[error("no answer from asana for {what}: {reason}")]
    Transport {
        /// The call, `METHOD /path`.
        what: String,
        /// What failed, without the URL.
        reason: String,
        /// Whether the request timed out (the server may still act on it).
        timed_out: bool,
    },
    /// A 2xx answer that is not the JSON Asana documents.
    #[error("asana's answer to {what} is malformed: {reason}")]
    Malformed {
        /// The call, `METHOD /path`.
        what: String,
        /// What was wrong with it.
        reason: String,
    },
    /// 400 or another 4xx: the request itself is wrong (a bad parameter, an
    /// expired pagination offset). A client bug or bad configuration.
    #[error("asana rejected {what} ({status}): {message}")]
    BadRequest {
        /// The call, `METHOD /path`.
        what: String,
        /// The HTTP status.
        status: u16,
        /// Asana's `errors[0].message`.
        message: String,
    },
    /// The client could not be built (TLS set-up, a token that cannot be a
    /// header value).
    #[error("cannot set up the asana client: {reason}")]
    Setup {
        /// What failed.
        reason: String,
    },
    /// `post_comment_once` was given a comment with no text.
    #[error("the comment has no text")]
    EmptyComment,
}

impl Error {
    /// Whether a write that failed with this error may nevertheless have
    /// been carried out by Asana (no answer, or a server error after the
    /// request arrived). Such a write must be checked before it is repeated.
    pub fn is_ambiguous(&self) -> bool {
        matches!(self, Error::Server { .. } | Error::Transport { .. })
    }
}
