//! The HTTP side: one `reqwest` client, the token in a sensitive header,
//! errors typed from the status and Asana's error body, reads retried by the
//! [`RetryPolicy`](super::RetryPolicy), writes never repeated blindly, and
//! lists read page by page to the end.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue, RETRY_AFTER};
use reqwest::{Method, StatusCode};
use secrecy::ExposeSecret;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::OnceCell;
use url::Url;

use super::config::{AsanaConfig, RetryState};
use super::error::Error;
use super::task::User;
use super::types::{Envelope, ErrorBody, Page};

/// Asana's largest page (OAS `limit`: 1–100). Always sent: without it
/// `next_page` is absent and a large answer may be cut short.
pub(crate) const PAGE_SIZE: usize = 100;

/// How long to wait for a TCP connection, within the request timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A client of Asana's REST API acting as the token's user.
pub struct Asana {
    http: reqwest::Client,
    base: Url,
    /// `Bearer <token>`, marked sensitive so no log or `Debug` shows it.
    auth: HeaderValue,
    pub(crate) config: AsanaConfig,
    me: OnceCell<User>,
}

impl std::fmt::Debug for Asana {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Asana")
            .field("api_url", &self.base.as_str())
            .finish_non_exhaustive()
    }
}

/// One request: method, path segments under the base, query and body.
pub(crate) struct Call<'a> {
    pub method: Method,
    pub path: Vec<&'a str>,
    pub query: Vec<(&'static str, String)>,
    pub body: Option<&'a Value>,
}

impl<'a> Call<'a> {
    /// A GET of these path segments.
    pub fn get(path: Vec<&'a str>) -> Call<'a> {
        Call {
            method: Method::GET,
            path,
            query: Vec::new(),
            body: None,
        }
    }

    /// Adds a query parameter.
    pub fn query(mut self, name: &'static str, value: impl Into<String>) -> Call<'a> {
        self.query.push((name, value.into()));
        self
    }

    /// `METHOD /path`, naming the call in errors and logs (never the query,
    /// which is harmless but long, and never a header).
    pub fn what(&self) -> String {
        format!("{} /{}", self.method, self.path.join("/"))
    }
}

impl Asana {
    /// A client for this configuration. Fails only on a base URL that
    /// cannot take paths, a token that cannot be a header value, or TLS
    /// set-up; nothing is sent.
    pub fn new(config: AsanaConfig) -> Result<Asana, Error> {
        // reqwest is built without a default crypto provider; ring is ours.
        let _ = rustls::crypto::ring::default_provider().install_default();
        if config.api_url.cannot_be_a_base() {
            return Err(Error::Setup {
                reason: format!("the api url {} cannot take paths", config.api_url),
            });
        }
        let mut auth = HeaderValue::from_str(&format!("Bearer {}", config.token.expose_secret()))
            .map_err(|_| Error::Setup {
            reason: "the token has characters a header cannot carry".to_owned(),
        })?;
        auth.set_sensitive(true);
        let http = reqwest::Client::builder()
            .user_agent(concat!("Eagle/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(CONNECT_TIMEOUT.min(config.request_timeout))
            .pool_idle_timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| Error::Setup {
                reason: e.without_url().to_string(),
            })?;
        Ok(Asana {
            http,
            base: config.api_url.clone(),
            auth,
            config,
            me: OnceCell::new(),
        })
    }

    /// The token's user (`GET /users/me`), asked once and remembered: the
    /// default filter's owner, and the author of Eagle's comments.
    pub async fn me(&self) -> Result<User, Error> {
        let user = self
            .me
            .get_or_try_init(|| async {
                let call = Call::get(vec!["users", "me"]).query("opt_fields", "name");
                let user: Envelope<super::types::Ref> = self.send(&call, true).await?;
                Ok::<User, Error>(User {
                    gid: user.data.gid,
                    name: user.data.name,
                })
            })
            .await?;
        Ok(user.clone())
    }

    /// One record (`{"data": {…}}`), a read retried by the policy.
    pub(crate) async fn get_one<T: DeserializeOwned>(&self, call: &Call<'_>) -> Result<T, Error> {
        let envelope: Envelope<T> = self.send(call, true).await?;
        Ok(envelope.data)
    }

    /// Every page of a list: `limit=100`, then each `next_page.offset` until
    /// it is `null`. A page that fails after its retries fails the listing
    /// (a partial list would look like tasks that disappeared).
    pub(crate) async fn get_all<T: DeserializeOwned>(
        &self,
        call: &Call<'_>,
    ) -> Result<Vec<T>, Error> {
        let mut items = Vec::new();
        let mut seen_offsets = HashSet::new();
        let mut offset: Option<String> = None;
        loop {
            let mut page_call = Call {
                method: call.method.clone(),
                path: call.path.clone(),
                query: call.query.clone(),
                body: call.body,
            }
            .query("limit", PAGE_SIZE.to_string());
            if let Some(offset) = &offset {
                page_call = page_call.query("offset", offset.clone());
            }
            let page: Page<T> = self.send(&page_call, true).await?;
            items.extend(page.data);
            match page.next_page {
                None => return Ok(items),
                Some(next) => {
                    // An offset handed out twice would page forever.
                    if !seen_offsets.insert(next.offset.clone()) {
                        return Err(Error::Malformed {
                            what: call.what(),
                            reason: "next_page repeats an offset".to_owned(),
                        });
                    }
                    offset = Some(next.offset);
                }
            }
        }
    }

    /// Sends a call, trying again as the policy says: a 429 always (it is
    /// a refusal), a 5xx or a lost answer only when `repeatable`.
    pub(crate) async fn send<T: DeserializeOwned>(
        &self,
        call: &Call<'_>,
        repeatable: bool,
    ) -> Result<T, Error> {
        let mut state = RetryState::default();
        loop {
            match self.attempt(call).await {
                Ok(value) => return Ok(value),
                Err(error) => {
                    let Some(wait) = self.config.retry.next_wait(&mut state, &error, repeatable)
                    else {
                        return Err(error);
                    };
                    tracing::warn!(
                        call = %call.what(),
                        %error,
                        wait_ms = wait.as_millis() as u64,
                        "asana call failed; trying again"
                    );
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    /// One HTTP exchange, its answer typed.
    async fn attempt<T: DeserializeOwned>(&self, call: &Call<'_>) -> Result<T, Error> {
        let what = call.what();
        let mut url = self.base.clone();
        url.path_segments_mut()
            .map_err(|()| Error::Setup {
                reason: "the api url cannot take paths".to_owned(),
            })?
            .pop_if_empty()
            .extend(&call.path);
        let mut request = self
            .http
            .request(call.method.clone(), url)
            .header(AUTHORIZATION, self.auth.clone())
            .timeout(self.config.request_timeout);
        if !call.query.is_empty() {
            request = request.query(&call.query);
        }
        if let Some(body) = call.body {
            request = request.json(body);
        }
        let started = Instant::now();
        let count = |outcome| {
            crate::ground::metrics::count(&crate::ground::metrics::get().asana_calls, outcome)
        };
        let response = match request.send().await {
            Ok(response) => response,
            Err(error) => {
                count("transport");
                return Err(self.transport(&what, error));
            }
        };
        let status = response.status();
        count(crate::ground::metrics::http_outcome(status.as_u16()));
        let headers = response.headers().clone();
        let body = response
            .bytes()
            .await
            .map_err(|e| self.transport(&what, e))?;
        tracing::debug!(
            call = %what,
            status = status.as_u16(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "asana request"
        );
        if status.is_success() {
            return serde_json::from_slice(&body).map_err(|e| Error::Malformed {
                what,
                reason: e.to_string(),
            });
        }
        Err(status_error(what, status, &headers, &body))
    }

    /// A transport failure, described without the URL (which holds no
    /// secret, but the call is named already).
    fn transport(&self, what: &str, error: reqwest::Error) -> Error {
        let timed_out = error.is_timeout();
        let reason = if timed_out {
            format!("no answer within {:?}", self.config.request_timeout)
        } else {
            let error = error.without_url();
            let mut reason = error.to_string();
            let mut source = std::error::Error::source(&error);
            while let Some(cause) = source {
                reason.push_str(": ");
                reason.push_str(&cause.to_string());
                source = cause.source();
            }
            reason
        };
        Error::Transport {
            what: what.to_owned(),
            reason,
            timed_out,
        }
    }
}

/// The typed error of a non-2xx answer.
fn status_error(what: String, status: StatusCode, headers: &HeaderMap, body: &[u8]) -> Error {
    let parsed: ErrorBody = serde_json::from_slice(body).unwrap_or_default();
    let message = parsed
        .errors
        .into_iter()
        .find_map(|e| e.message)
        .unwrap_or_else(|| status.canonical_reason().unwrap_or("").to_owned());
    match status.as_u16() {
        401 => Error::Unauthorized { what },
        402 => Error::PaymentRequired { what, message },
        403 => Error::Forbidden { what, message },
        404 => Error::NotFound { what, message },
        429 => Error::RateLimited {
            what,
            retry_after: retry_after(headers),
        },
        500..=599 => Error::Server {
            what,
            status: status.as_u16(),
            message,
        },
        other => Error::BadRequest {
            what,
            status: other,
            message,
        },
    }
}

/// `Retry-After` in seconds (Asana sends seconds; an HTTP date is not used
/// and counts as absent, so the backoff applies).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get(RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_become_typed_errors() {
        let body =
            br#"{"errors":[{"message":"project: Unknown object: 12","help":"see the docs"}]}"#;
        let none = HeaderMap::new();
        let mut later = HeaderMap::new();
        later.insert(RETRY_AFTER, HeaderValue::from_static("7"));
        let w = || "GET /projects/12/tasks".to_owned();
        let cases: Vec<(u16, &HeaderMap, &[u8], Error)> = vec![
            (401, &none, body, Error::Unauthorized { what: w() }),
            (
                400,
                &none,
                body,
                Error::BadRequest {
                    what: w(),
                    status: 400,
                    message: "project: Unknown object: 12".into(),
                },
            ),
            (
                402,
                &none,
                body,
                Error::PaymentRequired {
                    what: w(),
                    message: "project: Unknown object: 12".into(),
                },
            ),
            (
                404,
                &none,
                b"not json",
                Error::NotFound {
                    what: w(),
                    message: "Not Found".into(),
                },
            ),
            (
                429,
                &later,
                b"",
                Error::RateLimited {
                    what: w(),
                    retry_after: Some(Duration::from_secs(7)),
                },
            ),
            (
                429,
                &none,
                b"",
                Error::RateLimited {
                    what: w(),
                    retry_after: None,
                },
            ),
            (
                502,
                &none,
                b"<html>bad gateway</html>",
                Error::Server {
                    what: w(),
                    status: 502,
                    message: "Bad Gateway".into(),
                },
            ),
            (
                412,
                &none,
                br#"{"errors":[]}"#,
                Error::BadRequest {
                    what: w(),
                    status: 412,
                    message: "Precondition Failed".into(),
                },
            ),
        ];
        for (status, headers, body, expected) in cases {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::IM_A_TEAPOT);
            assert_eq!(status_error(w(), status, headers, body), expected);
        }
    }
}
