//! The public data types of the fake: what tests read back (messages,
//! requests, queues) and what they use to inject faults.

use std::collections::BTreeMap;
use std::time::Duration;

/// Settings of one fake server.
#[derive(Debug, Clone)]
pub struct FakeConfig {
    /// Check every 2xx JSON body against `zulip.yaml` with openapi-core, as
    /// Zulip's own test suite does; a failure becomes a violation.
    pub validate_responses: bool,
    /// How long a long-poll stays parked before a heartbeat event ends it.
    pub heartbeat: Duration,
    /// Reported by `/register` as `event_queue_longpoll_timeout_seconds`.
    pub longpoll_timeout_secs: u64,
    /// An event queue with no poll parked for this long is garbage-collected.
    pub idle_queue_timeout: Duration,
    /// Longest message content in Unicode code points; longer content is
    /// truncated and ends with `"\n[message truncated]"`.
    pub max_message_length: usize,
}

impl Default for FakeConfig {
    fn default() -> Self {
        FakeConfig {
            validate_responses: true,
            heartbeat: Duration::from_secs(1),
            longpoll_timeout_secs: 2,
            idle_queue_timeout: Duration::from_secs(600),
            max_message_length: 10_000,
        }
    }
}

/// A message as the fake stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMessage {
    /// Global message id.
    pub id: u64,
    /// Who sent it.
    pub sender_id: u64,
    /// The channel name for a channel message, `None` for a direct message.
    pub channel: Option<String>,
    /// The topic; empty for direct messages.
    pub topic: String,
    /// For a direct message, the recipients other than the sender, ascending
    /// (just the sender for a message to oneself); empty for channel messages.
    pub dm_recipients: Vec<u64>,
    /// The Markdown source after Zulip's normalisation and truncation.
    pub content: String,
    /// UNIX seconds.
    pub timestamp: i64,
    /// The users whose `mentioned` flag the message set, ascending.
    pub mentioned_user_ids: Vec<u64>,
    /// Whether a wildcard (`@**all**`, `@**topic**`, …) notified anyone.
    pub wildcard_mentioned: bool,
}

/// One HTTP request the fake received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRequest {
    /// `GET`, `POST`, …
    pub method: String,
    /// The path without the query string, e.g. `/api/v1/messages`.
    pub path: String,
    /// The authenticated user, if authentication succeeded.
    pub user_id: Option<u64>,
    /// Query-string and form-body parameters, merged (the body wins).
    pub params: BTreeMap<String, String>,
    /// The status sent, or 0 while none has been sent (a hung request).
    pub status: u16,
    /// When the request arrived.
    pub at: std::time::Instant,
}

/// A snapshot of one event queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueInfo {
    /// The `queue_id` the client got from `/register`.
    pub id: String,
    /// Its owner.
    pub user_id: u64,
    /// Whether a `GET /events` is parked on it right now.
    pub parked: bool,
    /// The `event_types` it was registered with (empty: all types).
    pub event_types: Vec<String>,
}

/// Which requests an injected fault applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `GET /api/v1/events`.
    Events,
    /// `POST /api/v1/register`.
    Register,
    /// `POST /api/v1/messages`.
    SendMessage,
    /// `GET /api/v1/messages`.
    GetMessages,
    /// `POST` and `DELETE /api/v1/messages/{id}/reactions`.
    Reactions,
    /// `GET /api/v1/users/me`.
    UsersMe,
    /// `DELETE /api/v1/events`.
    DeleteQueue,
    /// `GET /api/v1/users/{id or email}`.
    GetUser,
    /// Every request.
    Any,
}

/// What an injected fault does to a matching request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fault {
    /// 502 with an HTML body, as a proxy in front of a restarting server.
    Status502Html,
    /// 503 with an HTML body.
    Status503,
    /// 200 with a body that is not JSON.
    NotJson,
    /// Never answer, and do nothing: the client must time out.
    Hang,
    /// Do the work (store and deliver the message, …) but never answer.
    AcceptThenHang,
    /// A real 429 `RATE_LIMIT_HIT` with `Retry-After` set to these seconds.
    RateLimit(f64),
    /// 413 with an HTML body, as a proxy refusing a body it finds too large.
    Status413Html,
    /// 400 `BAD_EVENT_QUEUE_ID`, as for a queue the server has forgotten.
    BadEventQueue,
    /// 400 `BAD_REQUEST`: a refusal that asking again does not change.
    BadRequest,
}
