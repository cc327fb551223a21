//! Zulip: the only code that knows Zulip's HTTP API and JSON.
//!
//! * [`client`]: the REST calls Eagle needs, on reqwest, with requests paced
//!   by the server's `X-RateLimit-*` headers ([`pacer`]) and errors typed by
//!   Zulip's `code` (never its translated `msg`).
//! * [`listener`]: one event loop per identity that loses nothing: it
//!   re-registers when the queue expires, back-fills from the persisted
//!   bookmark, and hands each message to [`crate::chat::handle_message`].
//! * [`sender`]: delivers the outbox, in order, through rate limits and
//!   server errors, without posting a reply twice after a crash.
//! * [`bot`]: `eagle run` and `eagle check` for one profile.

pub mod bot;
pub mod client;
mod listener;
pub mod pacer;
mod sender;
pub mod types;
pub mod zuliprc;

use std::time::Duration;

pub use client::Client;

/// What can go wrong talking to Zulip, typed by what the caller does about it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// HTTP 429: wait this long, then try again.
    #[error("rate limited by the server; retry after {retry_after:.1?}")]
    RateLimited { retry_after: Duration },
    /// The event queue expired or was never ours: register again.
    #[error("the event queue is gone (BAD_EVENT_QUEUE_ID)")]
    BadEventQueue,
    /// HTTP 401: a wrong key, or a deactivated bot or organisation. Fatal.
    #[error("the server refused the bot's credentials ({code}: {message})")]
    Unauthorized { code: String, message: String },
    /// Any other error the server reports, by its `code`.
    #[error("the server refused the request ({code}: {message})")]
    Api {
        status: u16,
        code: String,
        message: String,
    },
    /// HTTP 5xx.
    #[error("the server failed (HTTP {status})")]
    Server { status: u16 },
    /// A body that is not the JSON Zulip sends.
    #[error("the server sent something other than Zulip JSON (HTTP {status}): {detail}")]
    NotJson { status: u16, detail: String },
    /// No answer in time.
    #[error("no answer from the server in time")]
    Timeout,
    /// Connection refused, reset, DNS, TLS.
    #[error("cannot reach the server: {0}")]
    Transport(String),
    /// Not sent: this instance no longer holds the outbox lease (another
    /// instance delivers now).
    #[error("not sent: another instance took over the deliveries")]
    LeaseLost,
}

impl Error {
    /// Worth trying again later (after a backoff or the server's `Retry-After`).
    pub fn is_transient(&self) -> bool {
        match self {
            Error::RateLimited { .. }
            | Error::Server { .. }
            | Error::Timeout
            | Error::Transport(_) => true,
            // A proxy's HTML page: a 2xx or 5xx may pass, a 4xx says this
            // request will never be taken (too large, forbidden by a filter).
            Error::NotJson { status, .. } => !(400..500).contains(status),
            _ => false,
        }
    }

    /// The code of an API error, if it is one.
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::Api { code, .. } | Error::Unauthorized { code, .. } => Some(code),
            Error::BadEventQueue => Some("BAD_EVENT_QUEUE_ID"),
            Error::RateLimited { .. } => Some("RATE_LIMIT_HIT"),
            _ => None,
        }
    }
}

/// How Eagle mentions a person so that they are notified: `@**Name|id**`.
/// The id disambiguates people who share a name; a name with `*` or `|`
/// cannot break the syntax because Zulip matches the id.
pub fn mention(full_name: &str, user_id: i64) -> String {
    let name: String = full_name
        .chars()
        .filter(|c| *c != '*' && *c != '|')
        .collect();
    format!("@**{}|{user_id}**", name.trim())
}

/// A mention that does not notify: `@_**Name|id**`.
pub fn silent_mention(full_name: &str, user_id: i64) -> String {
    format!("@_{}", &mention(full_name, user_id)[1..])
}

/// A topic's last messages, read from the server (`GET /messages`).
#[derive(Debug)]
pub struct ZulipHistory {
    pub client: std::sync::Arc<Client>,
}

impl crate::runtime::posts::History for ZulipHistory {
    fn topic_window<'a>(
        &'a self,
        channel: &'a str,
        topic: &'a str,
        n: u32,
    ) -> crate::runtime::posts::BoxFuture<'a, Option<Vec<crate::runtime::posts::Said>>> {
        Box::pin(async move {
            match self.client.topic_window(channel, topic, n).await {
                Ok(messages) => Some(
                    messages
                        .into_iter()
                        .map(|m| crate::runtime::posts::Said {
                            sender: m.sender_full_name,
                            at: chrono::DateTime::from_timestamp(m.timestamp, 0)
                                .unwrap_or_default(),
                            content: m.content,
                        })
                        .collect(),
                ),
                Err(error) => {
                    tracing::warn!(%error, "cannot read a topic's messages; using Eagle's own posts");
                    None
                }
            }
        })
    }
}

/// How posts name people on Zulip: by name and user id, so that the right
/// person is notified; someone without an id cannot be mentioned.
#[derive(Debug, Clone, Copy, Default)]
pub struct ZulipNaming;

impl crate::runtime::posts::Naming for ZulipNaming {
    fn mention(&self, full_name: &str, user_id: Option<i64>) -> Option<String> {
        user_id
            .filter(|id| *id > 0)
            .map(|id| mention(full_name, id))
    }

    fn silent_mention(&self, full_name: &str, user_id: Option<i64>) -> Option<String> {
        user_id
            .filter(|id| *id > 0)
            .map(|id| silent_mention(full_name, id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_use_name_and_id() {
        assert_eq!(mention("Alex", 26), "@**Alex|26**");
        assert_eq!(mention("Bad*Name|x", 3), "@**BadNamex|3**");
        assert_eq!(silent_mention("Alex", 26), "@_**Alex|26**");
        let bot = crate::chat::commands::BotNames {
            full_name: "Alex".into(),
            user_id: Some(26),
        };
        assert!(crate::chat::commands::mentions_bot(
            &format!("hi {}", mention("Alex", 26)),
            &bot
        ));
        assert!(!crate::chat::commands::mentions_bot(
            &silent_mention("Alex", 26),
            &bot
        ));
    }
}
