//! Self-tests of the fake: a real HTTP client (reqwest) against a started
//! server, one module per area. Every test ends with `assert_clean`, so every
//! 2xx body the tests provoke is also checked against the spec.

mod auth;
mod events;
mod faults;
mod messages;
mod strictness;

use std::time::Duration;

use reqwest::Method;
use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::{FakeConfig, FakeZulip};

/// A long enough wait for anything that should happen at once.
pub(crate) const SOON: Duration = Duration::from_secs(10);

/// A realm with two bots, two humans and two channels.
pub(crate) struct Realm {
    pub zulip: FakeZulip,
    pub eagle: u64,
    pub runner: u64,
    pub alex: u64,
    pub sam: u64,
}

impl Realm {
    /// Starts a fake with `config` and fills it: `#executor` (public, all
    /// four subscribed but `runner`), `#lobby` (public, nobody subscribed)
    /// and `#secret` (private, only `alex`).
    pub async fn start(config: FakeConfig) -> Realm {
        let zulip = FakeZulip::start(config).await;
        let eagle = zulip.add_user("eagle-bot@example.com", "Eagle", true);
        let runner = zulip.add_user("runner-bot@example.com", "Runner", true);
        let alex = zulip.add_user("alex@example.com", "Alex Doe", false);
        let sam = zulip.add_user("sam@example.com", "Sam Roe", false);
        zulip.add_channel("executor", true);
        zulip.add_channel("lobby", true);
        zulip.add_channel("secret", false);
        for user in [eagle, alex, sam] {
            zulip.subscribe(user, "executor");
        }
        zulip.subscribe(alex, "secret");
        Realm {
            zulip,
            eagle,
            runner,
            alex,
            sam,
        }
    }

    /// Starts with the default configuration.
    pub async fn default() -> Realm {
        Realm::start(FakeConfig::default()).await
    }

    /// An API client acting as `user`.
    pub fn client(&self, user: u64) -> Client {
        let email = self.zulip.shared.read().users[&user].email.clone();
        Client::new(&self.zulip, &email, &self.zulip.api_key(user))
    }
}

/// A response: status, headers and the body (JSON, or a string if not).
pub(crate) struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Answer {
    /// A header as text, or "".
    pub fn header(&self, name: &str) -> String {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    }

    /// The `code` of an error body.
    pub fn code(&self) -> &str {
        self.body["code"].as_str().unwrap_or("")
    }

    /// The `msg` of the body.
    pub fn msg(&self) -> &str {
        self.body["msg"].as_str().unwrap_or("")
    }
}

/// A minimal Zulip client speaking form-encoded requests.
pub(crate) struct Client {
    http: reqwest::Client,
    base: String,
    auth: Option<(String, String)>,
}

impl Client {
    /// A plain-HTTP reqwest client. In a workspace build reqwest may carry
    /// Eagle's `rustls-no-provider` feature, which wants a provider installed.
    fn http() -> reqwest::Client {
        let _ = rustls::crypto::ring::default_provider().install_default();
        reqwest::Client::new()
    }

    /// A client with Basic credentials.
    pub fn new(zulip: &FakeZulip, email: &str, key: &str) -> Client {
        Client {
            http: Client::http(),
            base: zulip.url(),
            auth: Some((email.to_owned(), key.to_owned())),
        }
    }

    /// A client without credentials.
    pub fn anonymous(zulip: &FakeZulip) -> Client {
        Client {
            http: Client::http(),
            base: zulip.url(),
            auth: None,
        }
    }

    /// Sends a request; GET and DELETE-with-no-form use the query string.
    pub async fn call(&self, method: Method, path: &str, params: &[(&str, &str)]) -> Answer {
        self.call_with(method, path, params, None)
            .await
            .unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// Like [`Client::call`], with an optional timeout; errors are returned.
    pub async fn call_with(
        &self,
        method: Method,
        path: &str,
        params: &[(&str, &str)],
        timeout: Option<Duration>,
    ) -> Result<Answer, reqwest::Error> {
        let url = format!("{}/api/v1{path}", self.base);
        let mut request = self
            .http
            .request(method.clone(), url)
            .header("user-agent", "EagleTest/0.1");
        request = if method == Method::GET {
            request.query(params)
        } else {
            request.form(params)
        };
        if let Some((email, key)) = &self.auth {
            request = request.basic_auth(email, Some(key));
        }
        if let Some(timeout) = timeout {
            request = request.timeout(timeout);
        }
        let response = request.send().await?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await?;
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Ok(Answer {
            status,
            headers,
            body,
        })
    }

    /// `GET`.
    pub async fn get(&self, path: &str, params: &[(&str, &str)]) -> Answer {
        self.call(Method::GET, path, params).await
    }

    /// `POST`.
    pub async fn post(&self, path: &str, params: &[(&str, &str)]) -> Answer {
        self.call(Method::POST, path, params).await
    }

    /// `POST /register` for message events; returns the queue id.
    pub async fn register(&self, extra: &[(&str, &str)]) -> String {
        let mut params = vec![("event_types", r#"["message"]"#)];
        params.extend_from_slice(extra);
        let answer = self.post("/register", &params).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert_eq!(answer.body["last_event_id"], -1);
        answer.body["queue_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// `GET /events`.
    pub async fn events(&self, queue: &str, last: i64, dont_block: bool) -> Answer {
        let last = last.to_string();
        let block = if dont_block { "true" } else { "false" };
        self.get(
            "/events",
            &[
                ("queue_id", queue),
                ("last_event_id", &last),
                ("dont_block", block),
            ],
        )
        .await
    }
}
