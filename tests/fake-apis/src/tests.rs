//! Self-tests of the fakes: a real HTTP client (reqwest) against started
//! servers, one module per area. Each test ends with `assert_clean`, or
//! checks and clears the violations it provoked on purpose.

mod asana;
mod asana_lists;
mod asana_rules;
mod asana_stories;
mod github;
mod github_apps;
mod github_ci;
mod github_graphql;
mod github_pulls;
mod github_rules;
mod github_trust;

use std::time::Duration;

use reqwest::Method;
use reqwest::header::HeaderMap;
use serde_json::Value;

/// A long enough wait for anything that should happen at once.
pub(crate) const SOON: Duration = Duration::from_secs(10);

/// A response: status, headers and the body (JSON, or a string if not).
#[derive(Debug)]
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

    /// A header as a number, or panics.
    pub fn number(&self, name: &str) -> u64 {
        self.header(name)
            .parse()
            .unwrap_or_else(|_| panic!("header {name} is {:?}", self.header(name)))
    }
}

/// A plain-HTTP reqwest client. In a workspace build reqwest may carry
/// Eagle's `rustls-no-provider` feature, which wants a provider installed.
pub(crate) fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// One request: headers as given, a JSON body if any, an optional timeout.
pub(crate) async fn send(
    http: &reqwest::Client,
    method: Method,
    url: &str,
    headers: &[(&str, String)],
    body: Option<&Value>,
    timeout: Option<Duration>,
) -> Result<Answer, reqwest::Error> {
    let mut request = http.request(method, url);
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    if let Some(body) = body {
        request = request.json(body);
    }
    if let Some(timeout) = timeout {
        request = request.timeout(timeout);
    }
    let response = request.send().await?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await?;
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    Ok(Answer {
        status,
        headers,
        body,
    })
}

/// Runs `f`, expecting it to panic; returns the panic message.
pub(crate) fn panics(f: impl FnOnce()) -> String {
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    match result {
        Ok(()) => panic!("expected a panic"),
        Err(payload) => payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_default(),
    }
}
