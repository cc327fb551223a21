//! The REST client: the calls Eagle needs, nothing more.
//!
//! Requests are HTTP Basic authenticated (the key goes in the
//! `Authorization` header only, marked sensitive so that no log shows it),
//! `application/x-www-form-urlencoded` for POST, PATCH and DELETE, query
//! parameters for GET, with the JSON-encoded values the spec asks for.

use std::time::Duration;

use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};
use secrecy::{ExposeSecret, SecretString};
use serde::de::DeserializeOwned;
use url::Url;

use super::Error;
use super::pacer::{Pacer, unix_now};
use super::types::{
    Anchor, Event, EventsEnvelope, MessagesPage, NarrowTerm, Registration, Sent, Subscription,
    SubscriptionsEnvelope, User, UserEnvelope,
};
use crate::store::Destination;
use crate::transport::zulip::zuliprc::ZulipCredentials;

/// Timeout of an ordinary request. The outbox lease outlives it, so a send
/// in flight is over before another instance may take over.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
/// How long to wait for a TCP connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What `POST /register` asks for.
#[derive(Debug, Clone)]
pub struct RegisterParams {
    pub event_types: Vec<&'static str>,
    pub all_public_streams: bool,
}

/// One bot identity's connection to its server.
pub struct Client {
    http: reqwest::Client,
    base: Url,
    email: String,
    key: SecretString,
    api: Pacer,
    events: Pacer,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.base.as_str())
            .field("email", &self.email)
            .finish_non_exhaustive()
    }
}

/// Which rate-limit bucket a request counts against (the real server keeps
/// `GET /events` apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bucket {
    Api,
    Events,
}

impl Client {
    /// A client for these credentials (TLS settings included).
    pub fn new(creds: &ZulipCredentials) -> anyhow::Result<Client> {
        // reqwest is built without a default crypto provider; ring is ours.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("Eagle/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(CONNECT_TIMEOUT)
            .pool_idle_timeout(Duration::from_secs(60));
        if creds.tls.insecure {
            builder = builder.danger_accept_invalid_certs(true);
        }
        if let Some(bundle) = &creds.tls.ca_bundle {
            let pem = std::fs::read(bundle)?;
            for cert in reqwest::Certificate::from_pem_bundle(&pem)? {
                builder = builder.add_root_certificate(cert);
            }
        }
        if let Some(cert) = &creds.tls.client_cert {
            let mut pem = std::fs::read(cert)?;
            if let Some(key) = &creds.tls.client_cert_key {
                pem.push(b'\n');
                pem.extend(std::fs::read(key)?);
            }
            builder = builder.identity(reqwest::Identity::from_pem(&pem)?);
        }
        Ok(Client {
            http: builder.build()?,
            base: creds.api_base(),
            email: creds.email.clone(),
            key: creds.api_key.clone(),
            api: Pacer::new(),
            events: Pacer::new(),
        })
    }

    /// Waits until the rate limit lets a request through, without spending it.
    pub async fn wait_for_budget(&self) {
        self.api.wait_for_budget().await;
    }

    /// The bot's own account.
    pub async fn me(&self) -> Result<User, Error> {
        self.call(Method::GET, "users/me", &[], Bucket::Api, REQUEST_TIMEOUT)
            .await
    }

    /// Another user's account (to tell bots from people).
    pub async fn user(&self, user_id: i64) -> Result<User, Error> {
        let envelope: UserEnvelope = self
            .call(
                Method::GET,
                &format!("users/{user_id}"),
                &[],
                Bucket::Api,
                REQUEST_TIMEOUT,
            )
            .await?;
        Ok(envelope.user)
    }

    /// One user by email (`GET /users/{email}`).
    pub async fn user_by_email(&self, email: &str) -> Result<User, Error> {
        let path: String = url::form_urlencoded::byte_serialize(email.as_bytes()).collect();
        let envelope: UserEnvelope = self
            .call(
                Method::GET,
                &format!("users/{path}"),
                &[],
                Bucket::Api,
                REQUEST_TIMEOUT,
            )
            .await?;
        Ok(envelope.user)
    }

    /// The channels the bot is subscribed to.
    pub async fn subscriptions(&self) -> Result<Vec<Subscription>, Error> {
        let envelope: SubscriptionsEnvelope = self
            .call(
                Method::GET,
                "users/me/subscriptions",
                &[],
                Bucket::Api,
                REQUEST_TIMEOUT,
            )
            .await?;
        Ok(envelope.subscriptions)
    }

    /// Creates an event queue. Every field is sent explicitly, so that the
    /// server's per-bot defaults never change what Eagle receives.
    pub async fn register(&self, params: &RegisterParams) -> Result<Registration, Error> {
        let form = [
            ("event_types", json(&params.event_types)),
            ("narrow", "[]".to_string()),
            ("all_public_streams", json(&params.all_public_streams)),
            ("fetch_event_types", json(&["realm"])),
            ("apply_markdown", "false".into()),
        ];
        self.call(
            Method::POST,
            "register",
            &form,
            Bucket::Api,
            REQUEST_TIMEOUT,
        )
        .await
    }

    /// Long-polls a queue for events after `last_event_id`. `timeout` should
    /// be a little above the server's long-poll timeout.
    pub async fn events(
        &self,
        queue_id: &str,
        last_event_id: i64,
        dont_block: bool,
        timeout: Duration,
    ) -> Result<Vec<Event>, Error> {
        let mut query = vec![
            ("queue_id", queue_id.to_string()),
            ("last_event_id", last_event_id.to_string()),
        ];
        if dont_block {
            query.push(("dont_block", "true".into()));
        }
        let envelope: EventsEnvelope = self
            .call(Method::GET, "events", &query, Bucket::Events, timeout)
            .await?;
        Ok(envelope.events)
    }

    /// Deletes a queue (on clean shutdown).
    pub async fn delete_queue(&self, queue_id: &str) -> Result<(), Error> {
        let _: serde_json::Value = self
            .call(
                Method::DELETE,
                "events",
                &[("queue_id", queue_id.into())],
                Bucket::Api,
                REQUEST_TIMEOUT,
            )
            .await?;
        Ok(())
    }

    /// Requests left in the current rate-limit window, if known.
    pub fn budget_left(&self) -> Option<u64> {
        self.api.remaining(unix_now())
    }

    /// Posts a message; returns its id.
    pub async fn send(&self, to: &Destination, content: &str) -> Result<i64, Error> {
        self.send_gated(to, content, async || Ok(())).await
    }

    /// Posts a message, calling `gate` right before the request goes out
    /// (after any wait for the rate limit): the request is sent only if the
    /// gate says yes. The outbox sender records the attempt there, under
    /// its lease, so that no other instance can send the same reply.
    pub async fn send_gated(
        &self,
        to: &Destination,
        content: &str,
        gate: impl AsyncFnOnce() -> Result<(), Error>,
    ) -> Result<i64, Error> {
        let form = match to {
            // The name goes as a JSON string: a channel named "123" is not channel 123.
            Destination::Channel { channel, topic } => vec![
                ("type", "stream".to_string()),
                ("to", json(channel)),
                ("topic", topic.clone()),
                ("content", content.to_string()),
            ],
            Destination::Direct { user_ids } => vec![
                ("type", "direct".to_string()),
                ("to", json(user_ids)),
                ("content", content.to_string()),
            ],
        };
        let sent: Sent = self
            .call_gated(
                Method::POST,
                "messages",
                &form,
                Bucket::Api,
                REQUEST_TIMEOUT,
                gate,
            )
            .await?;
        Ok(sent.id)
    }

    /// Messages around an anchor, oldest first, as raw Markdown.
    pub async fn messages(
        &self,
        anchor: Anchor,
        num_before: u32,
        num_after: u32,
        include_anchor: bool,
        narrow: &[NarrowTerm],
    ) -> Result<MessagesPage, Error> {
        let query = [
            ("anchor", anchor.as_param()),
            ("num_before", num_before.to_string()),
            ("num_after", num_after.to_string()),
            ("include_anchor", json(&include_anchor)),
            ("narrow", json(&narrow)),
            ("apply_markdown", "false".into()),
        ];
        self.call(
            Method::GET,
            "messages",
            &query,
            Bucket::Api,
            REQUEST_TIMEOUT,
        )
        .await
    }

    /// The last `n` messages of a channel topic: the executor protocol's sliding window.
    pub async fn topic_window(
        &self,
        channel: &str,
        topic: &str,
        n: u32,
    ) -> Result<Vec<super::types::Message>, Error> {
        let narrow = [NarrowTerm::channel(channel), NarrowTerm::topic(topic)];
        Ok(self
            .messages(Anchor::Newest, n, 0, true, &narrow)
            .await?
            .messages)
    }

    /// Adds a reaction; one that exists already counts as success.
    pub async fn add_reaction(&self, message_id: i64, emoji: &str) -> Result<(), Error> {
        self.reaction(Method::POST, message_id, emoji, "REACTION_ALREADY_EXISTS")
            .await
    }

    /// Removes a reaction; one that is gone already counts as success.
    pub async fn remove_reaction(&self, message_id: i64, emoji: &str) -> Result<(), Error> {
        self.reaction(Method::DELETE, message_id, emoji, "REACTION_DOES_NOT_EXIST")
            .await
    }

    /// A reaction call, idempotent: `done_already` (the state asked for
    /// holds already) counts as success, so replays are harmless.
    async fn reaction(
        &self,
        method: Method,
        message_id: i64,
        emoji: &str,
        done_already: &str,
    ) -> Result<(), Error> {
        let path = format!("messages/{message_id}/reactions");
        let params = [("emoji_name", emoji.to_string())];
        match self
            .call::<serde_json::Value>(method, &path, &params, Bucket::Api, REQUEST_TIMEOUT)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.code() == Some(done_already) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Replaces the content of one of the bot's messages (after `gate`, as
    /// in [`Client::send_gated`]).
    pub async fn edit_gated(
        &self,
        message_id: i64,
        content: &str,
        gate: impl AsyncFnOnce() -> Result<(), Error>,
    ) -> Result<(), Error> {
        let path = format!("messages/{message_id}");
        let _: serde_json::Value = self
            .call_gated(
                Method::PATCH,
                &path,
                &[("content", content.into())],
                Bucket::Api,
                REQUEST_TIMEOUT,
                gate,
            )
            .await?;
        Ok(())
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        params: &[(&str, String)],
        bucket: Bucket,
        timeout: Duration,
    ) -> Result<T, Error> {
        self.call_gated(method, path, params, bucket, timeout, async || Ok(()))
            .await
    }

    async fn call_gated<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        params: &[(&str, String)],
        bucket: Bucket,
        timeout: Duration,
        gate: impl AsyncFnOnce() -> Result<(), Error>,
    ) -> Result<T, Error> {
        let pacer = match bucket {
            Bucket::Api => &self.api,
            Bucket::Events => &self.events,
        };
        let waited = std::time::Instant::now();
        pacer.ready().await;
        let metrics = crate::ground::metrics::get();
        let waited = waited.elapsed();
        if waited >= Duration::from_millis(1) {
            metrics.pacer_wait_seconds.inc_by(waited.as_secs_f64());
        }
        gate().await?;
        let endpoint = endpoint_label(path);
        let url = self
            .base
            .join(path)
            .map_err(|e| Error::Transport(format!("bad request path {path:?}: {e}")))?;
        let mut request = self
            .http
            .request(method.clone(), url)
            .basic_auth(&self.email, Some(self.key.expose_secret()))
            .timeout(timeout);
        request = if method == Method::GET {
            request.query(params)
        } else {
            request.form(params)
        };
        tracing::trace!(%method, path, "zulip request");
        let response = match request.send().await {
            Ok(response) => response,
            Err(error) => {
                let error = transport_error(error);
                let outcome = if matches!(error, Error::Timeout) {
                    "timeout"
                } else {
                    "transport"
                };
                metrics.zulip_call(&endpoint, outcome);
                return Err(error);
            }
        };
        let status = response.status();
        metrics.zulip_call(
            &endpoint,
            crate::ground::metrics::http_outcome(status.as_u16()),
        );
        let headers = response.headers().clone();
        observe_rate_limit(pacer, &headers);
        let body = response.bytes().await.map_err(transport_error)?;
        let result = interpret(status, &headers, &body);
        if let Err(Error::RateLimited { retry_after }) = &result {
            pacer.retry_after(unix_now(), *retry_after);
        }
        tracing::trace!(%method, path, status = status.as_u16(), "zulip response");
        let value = result?;
        serde_json::from_value(value).map_err(|e| Error::NotJson {
            status: status.as_u16(),
            detail: format!("unexpected response shape: {e}"),
        })
    }
}

/// A path as a metric label: whatever is not a fixed name (an id, an
/// email in `users/{email}`) becomes `:id`, so no label names a person and
/// the labels stay few (`messages/:id/reactions`).
fn endpoint_label(path: &str) -> String {
    path.split('/')
        .map(|part| {
            if !part.is_empty() && part.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
                part
            } else {
                ":id"
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

fn json<T: serde::Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

fn transport_error(error: reqwest::Error) -> Error {
    if error.is_timeout() {
        Error::Timeout
    } else {
        // The URL carries no secret (the key is in a header); drop it anyway
        // to keep messages short.
        Error::Transport(error.without_url().to_string())
    }
}

fn header<T: std::str::FromStr>(headers: &HeaderMap, name: &str) -> Option<T> {
    headers.get(name)?.to_str().ok()?.trim().parse().ok()
}

fn observe_rate_limit(pacer: &Pacer, headers: &HeaderMap) {
    let remaining = header::<u64>(headers, "x-ratelimit-remaining");
    let reset = header::<f64>(headers, "x-ratelimit-reset");
    pacer.observe(remaining, reset);
}

/// Turns a response into the JSON of a success, or the error it stands for.
/// Errors are recognised by status and `code`, never by `msg`.
fn interpret(
    status: StatusCode,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<serde_json::Value, Error> {
    let parsed: Option<serde_json::Value> = serde_json::from_slice(body)
        .ok()
        .filter(|v: &serde_json::Value| v.is_object());
    let field = |name: &str| {
        parsed
            .as_ref()
            .and_then(|v| v.get(name))
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string()
    };
    let (result, code, message) = (field("result"), field("code"), field("msg"));
    if status == StatusCode::TOO_MANY_REQUESTS {
        // Both the header and the body carry a float number of seconds.
        let seconds = header::<f64>(headers, "retry-after")
            .or_else(|| parsed.as_ref()?.get("retry-after")?.as_f64())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .unwrap_or(1.0)
            .min(3600.0);
        return Err(Error::RateLimited {
            retry_after: Duration::from_secs_f64(seconds),
        });
    }
    if status == StatusCode::UNAUTHORIZED {
        return Err(Error::Unauthorized { code, message });
    }
    if status.is_server_error() {
        return Err(Error::Server {
            status: status.as_u16(),
        });
    }
    let Some(value) = parsed else {
        let preview: String = String::from_utf8_lossy(body).chars().take(80).collect();
        return Err(Error::NotJson {
            status: status.as_u16(),
            detail: format!("{preview:?}"),
        });
    };
    if status.is_success() && result == "success" {
        if let Some(ignored) = value.get("ignored_parameters_unsupported") {
            tracing::warn!(%ignored, "the server ignored parameters Eagle sent");
        }
        return Ok(value);
    }
    let code = if code.is_empty() {
        "BAD_REQUEST".to_string()
    } else {
        code
    };
    if code == "BAD_EVENT_QUEUE_ID" {
        return Err(Error::BadEventQueue);
    }
    Err(Error::Api {
        status: status.as_u16(),
        code,
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_labels_name_no_person_and_no_id() {
        assert_eq!(
            endpoint_label("messages/42/reactions"),
            "messages/:id/reactions"
        );
        assert_eq!(endpoint_label("users/alex%40example.com"), "users/:id");
        assert_eq!(
            endpoint_label("users/me/subscriptions"),
            "users/me/subscriptions"
        );
        assert_eq!(endpoint_label("register"), "register");
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(*k, v.parse().unwrap());
        }
        map
    }

    #[test]
    fn errors_are_typed_by_status_and_code() {
        let none = HeaderMap::new();
        let cases: Vec<(u16, HeaderMap, &str, Result<(), Error>)> = vec![
            (
                200,
                none.clone(),
                r#"{"result":"success","msg":""}"#,
                Ok(()),
            ),
            (
                429,
                headers(&[("retry-after", "1.5")]),
                r#"{"result":"error","msg":"API usage exceeded rate limit","code":"RATE_LIMIT_HIT","retry-after":1.5}"#,
                Err(Error::RateLimited {
                    retry_after: Duration::from_millis(1500),
                }),
            ),
            (
                429,
                none.clone(),
                r#"{"result":"error","msg":"x","code":"RATE_LIMIT_HIT","retry-after":28.706807374954224}"#,
                Err(Error::RateLimited {
                    retry_after: Duration::from_secs_f64(28.706807374954224),
                }),
            ),
            (
                400,
                none.clone(),
                r#"{"result":"error","msg":"Bad event queue ID: abc","code":"BAD_EVENT_QUEUE_ID","queue_id":"abc"}"#,
                Err(Error::BadEventQueue),
            ),
            (
                400,
                none.clone(),
                r#"{"result":"error","msg":"Nom de file invalide","code":"BAD_EVENT_QUEUE_ID"}"#,
                Err(Error::BadEventQueue),
            ),
            (
                401,
                none.clone(),
                r#"{"result":"error","msg":"Invalid API key","code":"UNAUTHORIZED"}"#,
                Err(Error::Unauthorized {
                    code: "UNAUTHORIZED".into(),
                    message: "Invalid API key".into(),
                }),
            ),
            (
                502,
                none.clone(),
                "<html>Bad Gateway</html>",
                Err(Error::Server { status: 502 }),
            ),
            (
                200,
                none.clone(),
                "<html>oops</html>",
                Err(Error::NotJson {
                    status: 200,
                    detail: "\"<html>oops</html>\"".into(),
                }),
            ),
            (
                400,
                none.clone(),
                r#"{"result":"error","msg":"Reaction already exists.","code":"REACTION_ALREADY_EXISTS"}"#,
                Err(Error::Api {
                    status: 400,
                    code: "REACTION_ALREADY_EXISTS".into(),
                    message: "Reaction already exists.".into(),
                }),
            ),
            (
                400,
                none,
                r#"{"result":"error","msg":"Something"}"#,
                Err(Error::Api {
                    status: 400,
                    code: "BAD_REQUEST".into(),
                    message: "Something".into(),
                }),
            ),
        ];
        for (status, headers, body, want) in cases {
            let got = interpret(
                StatusCode::from_u16(status).unwrap(),
                &headers,
                body.as_bytes(),
            )
            .map(|_| ());
            assert_eq!(got, want, "{status} {body}");
        }
    }
}
