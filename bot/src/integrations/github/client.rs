//! The HTTP side of the GitHub client: one [`GitHub`] per credential
//! ([`GitHubAuth`]: a token, or a GitHub App's installation tokens), cheap to
//! clone. It sends the headers GitHub asks for, makes every GET conditional
//! through the [`EtagCache`], follows `link` pages, paces writes, and sits
//! out rate limits as [`crate::integrations::github::ratelimit`] rules, within a
//! [`RetryPolicy`]. The calls themselves are in `rest.rs` and `graphql.rs`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use reqwest::header::{ETAG, HeaderMap, IF_NONE_MATCH, LINK};
use reqwest::{Method, StatusCode};
use secrecy::{ExposeSecret, SecretString};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::time::Instant;
use url::Url;

use crate::integrations::github::Error;
use crate::integrations::github::auth::GitHubAuth;
use crate::integrations::github::cache::{CachedResponse, EtagCache, MemoryEtagCache};
use crate::integrations::github::error::{error_chain, parse, status_error};
pub use crate::integrations::github::http::{API_VERSION, MEDIA_TYPE};
pub(crate) use crate::integrations::github::http::{http_client, what};
use crate::integrations::github::ratelimit::{
    Api, BudgetView, LimitHeaders, Limits, RetryPolicy, limit_wait_parsed,
};

/// The public API.
pub const DEFAULT_API_URL: &str = "https://api.github.com";
/// A list is read to at most this many pages (10,000 items at 100 a page);
/// GitHub itself caps check runs at 1,000 suites and filtered workflow runs
/// at 1,000 results.
pub const MAX_PAGES: usize = 100;

/// What a [`GitHub`] client needs.
#[derive(Debug, Clone)]
pub struct GitHubConfig {
    /// The REST base, `https://api.github.com` (GitHub Enterprise:
    /// `https://HOST/api/v3`); GraphQL is derived from it.
    pub api_url: Url,
    /// Who Eagle is: a token (a fine-grained PAT) or a GitHub App; the
    /// token of the moment is sent only as `Authorization: Bearer`.
    pub auth: GitHubAuth,
    /// `User-Agent`, which GitHub requires.
    pub user_agent: String,
    /// The longest any one request may take.
    pub timeout: Duration,
    /// How rate limits are sat out.
    pub retry: RetryPolicy,
    /// The least time between two writes (GitHub: "pause at least one
    /// second between mutating requests", against secondary limits).
    pub write_spacing: Duration,
}

impl GitHubConfig {
    /// The public API with this token and the defaults: `eagle/<version>`,
    /// 30 s per request, [`RetryPolicy::default`], one second between writes.
    pub fn new(token: SecretString) -> GitHubConfig {
        GitHubConfig::with_auth(GitHubAuth::token(token))
    }

    /// The public API with this credential and the defaults of
    /// [`GitHubConfig::new`].
    pub fn with_auth(auth: GitHubAuth) -> GitHubConfig {
        GitHubConfig {
            // A literal that parses: not input from anywhere.
            api_url: Url::parse(DEFAULT_API_URL).expect("the default API URL parses"),
            auth,
            user_agent: concat!("eagle/", env!("CARGO_PKG_VERSION")).to_owned(),
            timeout: Duration::from_secs(30),
            retry: RetryPolicy::default(),
            write_spacing: Duration::from_secs(1),
        }
    }
}

/// Counters of what a client did, for the notes and for tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Requests sent.
    pub requests: u64,
    /// Of those, 304 answers (free of quota).
    pub not_modified: u64,
    /// Answers that were rate limits.
    pub rate_limited: u64,
    /// Waits sat out before sending.
    pub waits: u64,
    /// Their total length.
    pub waited: Duration,
}

#[derive(Debug, Default)]
struct Counters {
    requests: AtomicU64,
    not_modified: AtomicU64,
    rate_limited: AtomicU64,
    waits: AtomicU64,
    waited_ms: AtomicU64,
}

/// A connection to GitHub for one credential. Cloning shares the connection
/// pool, the cache and the rate-limit memory.
#[derive(Clone)]
pub struct GitHub {
    inner: Arc<Inner>,
    retry: RetryPolicy,
}

struct Inner {
    http: reqwest::Client,
    api_url: Url,
    graphql_url: Url,
    auth: GitHubAuth,
    write_spacing: Duration,
    cache: Arc<dyn EtagCache>,
    limits: Limits,
    last_write: tokio::sync::Mutex<Option<Instant>>,
    counters: Counters,
    /// The token's own login (`GET /user`), asked once.
    login: tokio::sync::OnceCell<String>,
}

impl GitHub {
    /// The login the token belongs to: Eagle's own account. Asked of
    /// GitHub once (`GET /user`, or a GitHub App's `GET /app`), then kept.
    pub async fn own_login(&self) -> Result<String, Error> {
        self.inner
            .login
            .get_or_try_init(|| self.fetch_own_login())
            .await
            .cloned()
    }
}

impl std::fmt::Debug for GitHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitHub")
            .field("api_url", &self.inner.api_url.as_str())
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

/// One answer, read in full.
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

/// A GET's body, fresh or from the cache.
struct Fetched {
    body: Vec<u8>,
    next_page: Option<String>,
}

impl GitHub {
    /// A client with an in-memory ETag cache.
    pub fn new(config: GitHubConfig) -> Result<GitHub, Error> {
        GitHub::with_etag_cache(config, Arc::new(MemoryEtagCache::default()))
    }

    /// A client whose ETags and bodies live in `cache` (the PR loop's,
    /// over the database).
    pub fn with_etag_cache(
        config: GitHubConfig,
        cache: Arc<dyn EtagCache>,
    ) -> Result<GitHub, Error> {
        let api_url = config.api_url;
        if !matches!(api_url.scheme(), "http" | "https") || api_url.cannot_be_a_base() {
            return Err(Error::InvalidInput(format!(
                "the GitHub API URL {api_url} is not an http(s) base URL"
            )));
        }
        if config.auth.is_blank() {
            return Err(Error::InvalidInput("the GitHub token is empty".into()));
        }
        let http = http_client(&config.user_agent, config.timeout)?;
        let graphql_url = graphql_url(&api_url);
        Ok(GitHub {
            inner: Arc::new(Inner {
                http,
                api_url,
                graphql_url,
                auth: config.auth,
                write_spacing: config.write_spacing,
                cache,
                limits: Limits::default(),
                last_write: tokio::sync::Mutex::new(None),
                counters: Counters::default(),
                login: tokio::sync::OnceCell::new(),
            }),
            retry: config.retry,
        })
    }

    /// The same client (pool, cache, limits) with another retry policy, e.g.
    /// [`RetryPolicy::no_wait`] for a loop that schedules retries itself.
    pub fn with_retry_policy(&self, retry: RetryPolicy) -> GitHub {
        GitHub {
            inner: Arc::clone(&self.inner),
            retry,
        }
    }

    /// The credential this client sends: a GitHub App's installation
    /// tokens are also what git may push with (`token_for(Some(repo))`).
    pub fn auth(&self) -> &GitHubAuth {
        &self.inner.auth
    }

    /// The retry policy in use.
    pub fn retry_policy(&self) -> RetryPolicy {
        self.retry
    }

    /// What the client did so far.
    pub fn stats(&self) -> ClientStats {
        let c = &self.inner.counters;
        ClientStats {
            requests: c.requests.load(Ordering::Relaxed),
            not_modified: c.not_modified.load(Ordering::Relaxed),
            rate_limited: c.rate_limited.load(Ordering::Relaxed),
            waits: c.waits.load(Ordering::Relaxed),
            waited: Duration::from_millis(c.waited_ms.load(Ordering::Relaxed)),
        }
    }

    /// A resource's budget (`core`, `graphql`) as GitHub last reported it.
    pub fn budget(&self, resource: &str) -> Option<BudgetView> {
        self.inner.limits.budget(resource, Instant::now())
    }

    /// A REST URL from path segments (each percent-encoded, so a `/` in a
    /// branch name stays inside its segment) and query pairs.
    pub(crate) fn rest_url(
        &self,
        segments: &[&str],
        query: &[(&str, String)],
    ) -> Result<Url, Error> {
        let mut url = self.inner.api_url.clone();
        url.path_segments_mut()
            .map_err(|()| Error::InvalidInput(format!("{} cannot hold paths", self.inner.api_url)))?
            .pop_if_empty()
            .extend(segments);
        if !query.is_empty() {
            url.query_pairs_mut()
                .extend_pairs(query.iter().map(|(k, v)| (*k, v.as_str())));
        }
        Ok(url)
    }

    /// A conditional GET of one JSON document.
    pub(crate) async fn get_json<T: DeserializeOwned>(
        &self,
        url: Url,
        permission: &'static str,
    ) -> Result<T, Error> {
        let what = what(&Method::GET, &url);
        let fetched = self.get_cached(url, &what, permission).await?;
        parse(&what, &fetched.body)
    }

    /// Conditional GETs of every page of a list, following `rel="next"`;
    /// each page is parsed as `T`.
    pub(crate) async fn get_pages<T: DeserializeOwned>(
        &self,
        url: Url,
        permission: &'static str,
    ) -> Result<Vec<T>, Error> {
        let first = what(&Method::GET, &url);
        let mut pages = Vec::new();
        let mut next = Some(url);
        while let Some(url) = next.take() {
            if pages.len() >= MAX_PAGES {
                return Err(Error::Malformed {
                    what: first,
                    detail: format!("more than {MAX_PAGES} pages"),
                });
            }
            let what = what(&Method::GET, &url);
            let fetched = self.get_cached(url, &what, permission).await?;
            pages.push(parse(&what, &fetched.body)?);
            next = match fetched.next_page {
                Some(link) => Some(self.same_origin(&what, &link)?),
                None => None,
            };
        }
        Ok(pages)
    }

    /// A page link must stay on the API's origin: the token goes with it.
    fn same_origin(&self, what: &str, link: &str) -> Result<Url, Error> {
        let url = Url::parse(link).map_err(|e| Error::Malformed {
            what: what.to_owned(),
            detail: format!("a next-page link that is not a URL ({e})"),
        })?;
        if url.origin() != self.inner.api_url.origin() {
            return Err(Error::Malformed {
                what: what.to_owned(),
                detail: format!(
                    "a next-page link to another host ({})",
                    url.origin().ascii_serialization()
                ),
            });
        }
        Ok(url)
    }

    async fn get_cached(
        &self,
        url: Url,
        what: &str,
        permission: &'static str,
    ) -> Result<Fetched, Error> {
        let key = url.as_str().to_owned();
        let cached = self.inner.cache.get(&key).await;
        let etag = cached.as_ref().map(|c| c.etag.as_str());
        let answer = self
            .execute(Api::Rest, Method::GET, url, None, etag, what)
            .await?;
        match answer.status.as_u16() {
            304 => {
                self.inner
                    .counters
                    .not_modified
                    .fetch_add(1, Ordering::Relaxed);
                match cached {
                    Some(c) => Ok(Fetched {
                        body: c.body,
                        next_page: c.next_page,
                    }),
                    None => Err(Error::Malformed {
                        what: what.to_owned(),
                        detail: "304 Not Modified to a request without If-None-Match".into(),
                    }),
                }
            }
            200 => {
                let next_page = answer
                    .headers
                    .get(LINK)
                    .and_then(|v| v.to_str().ok())
                    .and_then(next_link);
                if let Some(etag) = answer.headers.get(ETAG).and_then(|v| v.to_str().ok()) {
                    let entry = CachedResponse {
                        etag: etag.to_owned(),
                        body: answer.body.clone(),
                        next_page: next_page.clone(),
                    };
                    self.inner.cache.put(&key, entry).await;
                }
                Ok(Fetched {
                    body: answer.body,
                    next_page,
                })
            }
            status => Err(status_error(what, status, &answer.body, permission)),
        }
    }

    /// A request without a cache (writes, and GETs answered with a bare
    /// status) with an optional JSON body; the caller reads the status.
    pub(crate) async fn send(
        &self,
        method: Method,
        url: Url,
        body: Option<&Value>,
    ) -> Result<(String, Answer), Error> {
        let what = what(&method, &url);
        let answer = self
            .execute(Api::Rest, method, url, body, None, &what)
            .await?;
        Ok((what, answer))
    }

    /// A GraphQL request; `label` says what it is for in errors.
    pub(crate) async fn graphql_post(
        &self,
        label: &str,
        body: &Value,
    ) -> Result<(String, Answer), Error> {
        let url = self.inner.graphql_url.clone();
        let what = format!("POST {} ({label})", url.path());
        let answer = self
            .execute(Api::GraphQl, Method::POST, url, Some(body), None, &what)
            .await?;
        Ok((what, answer))
    }

    /// Sends a request, sitting out rate limits within the retry policy.
    async fn execute(
        &self,
        api: Api,
        method: Method,
        url: Url,
        body: Option<&Value>,
        etag: Option<&str>,
        what: &str,
    ) -> Result<Answer, Error> {
        let resource = api.resource();
        let limits = &self.inner.limits;
        let mut attempts = 0u32;
        loop {
            if let Some(limit) = limits.wait_before(resource, Instant::now()) {
                if limit.wait > self.retry.max_wait {
                    return Err(Error::RateLimited {
                        what: what.to_owned(),
                        kind: limit.kind,
                        retry_after: limit.wait,
                        attempts,
                    });
                }
                tracing::warn!(
                    request = what,
                    kind = %limit.kind,
                    wait_ms = limit.wait.as_millis() as u64,
                    "github rate limit: waiting before sending"
                );
                let c = &self.inner.counters;
                c.waits.fetch_add(1, Ordering::Relaxed);
                c.waited_ms
                    .fetch_add(limit.wait.as_millis() as u64, Ordering::Relaxed);
                tokio::time::sleep(limit.wait).await;
                // Look again: another request may have met a limit meanwhile.
                continue;
            }
            attempts += 1;
            let mutating = match api {
                Api::Rest => method != Method::GET,
                Api::GraphQl => body
                    .and_then(|b| b.get("query"))
                    .and_then(Value::as_str)
                    .is_some_and(|q| q.trim_start().starts_with("mutation")),
            };
            let answer = if mutating {
                let mut last = self.inner.last_write.lock().await;
                if let Some(at) = *last {
                    tokio::time::sleep_until(at + self.inner.write_spacing).await;
                }
                let answer = self.send_once(&method, &url, body, etag, what).await;
                *last = Some(Instant::now());
                answer?
            } else {
                self.send_once(&method, &url, body, etag, what).await?
            };
            let headers = LimitHeaders::parse(&answer.headers, SystemTime::now());
            limits.observe(resource, &headers, Instant::now());
            let attempt = limits.streak().saturating_add(1);
            let status = answer.status.as_u16();
            let Some(limit) = limit_wait_parsed(api, status, &headers, &answer.body, attempt)
            else {
                limits.answered();
                return Ok(answer);
            };
            self.inner
                .counters
                .rate_limited
                .fetch_add(1, Ordering::Relaxed);
            limits.limited(resource, limit, Instant::now());
            tracing::warn!(
                request = what,
                status,
                kind = %limit.kind,
                wait_ms = limit.wait.as_millis() as u64,
                attempts,
                "github rate limit"
            );
            if attempts >= self.retry.max_attempts || limit.wait > self.retry.max_wait {
                return Err(Error::RateLimited {
                    what: what.to_owned(),
                    kind: limit.kind,
                    retry_after: limit.wait,
                    attempts,
                });
            }
        }
    }

    /// Sends once with the credential's token of the moment. A 401 to a
    /// GitHub App's installation token (revoked, or expired before its
    /// `expires_at`) renews the token and sends once more.
    async fn send_once(
        &self,
        method: &Method,
        url: &Url,
        body: Option<&Value>,
        etag: Option<&str>,
        what: &str,
    ) -> Result<Answer, Error> {
        let auth = &self.inner.auth;
        let token = auth.token_for(None).await?;
        let answer = self
            .send_with(&token, method, url, body, etag, what)
            .await?;
        if answer.status != StatusCode::UNAUTHORIZED || !auth.refused(&token).await {
            return Ok(answer);
        }
        tracing::info!(
            request = what,
            "github refused the installation token: renewing it"
        );
        let token = auth.token_for(None).await?;
        self.send_with(&token, method, url, body, etag, what).await
    }

    async fn send_with(
        &self,
        token: &SecretString,
        method: &Method,
        url: &Url,
        body: Option<&Value>,
        etag: Option<&str>,
        what: &str,
    ) -> Result<Answer, Error> {
        let mut request = self
            .inner
            .http
            .request(method.clone(), url.clone())
            // bearer_auth marks the header sensitive: no log or Debug shows it.
            .bearer_auth(token.expose_secret());
        if let Some(tag) = etag {
            request = request.header(IF_NONE_MATCH, tag);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        self.inner.counters.requests.fetch_add(1, Ordering::Relaxed);
        let transport = |e: reqwest::Error| Error::Transport {
            what: what.to_owned(),
            detail: if e.is_timeout() {
                "timed out".to_owned()
            } else {
                // Without the URL, which `what` already names.
                error_chain(&e.without_url())
            },
        };
        let metrics = crate::ground::metrics::get();
        let count = |outcome| crate::ground::metrics::count(&metrics.github_calls, outcome);
        let response = match request.send().await {
            Ok(response) => response,
            Err(error) => {
                count("transport");
                return Err(transport(error));
            }
        };
        let status = response.status();
        count(crate::ground::metrics::http_outcome(status.as_u16()));
        let headers = response.headers().clone();
        let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        if let Some(remaining) = text("x-ratelimit-remaining").and_then(|v| v.trim().parse().ok()) {
            metrics
                .github_remaining
                .get_or_create(&crate::ground::metrics::NameLabels {
                    // The server's word, kept to a short plain name: a
                    // label set stays small whatever a proxy sends.
                    name: text("x-ratelimit-resource")
                        .filter(|r| {
                            r.len() <= 32
                                && r.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                        })
                        .unwrap_or("core")
                        .to_string(),
                })
                .set(remaining);
        }
        let body = response.bytes().await.map_err(transport)?.to_vec();
        tracing::debug!(
            request = what,
            status = status.as_u16(),
            remaining = headers
                .get("x-ratelimit-remaining")
                .and_then(|v| v.to_str().ok())
                .unwrap_or(""),
            "github answer"
        );
        Ok(Answer {
            status,
            headers,
            body,
        })
    }
}

/// The `rel="next"` URL of a `link` header.
pub(crate) fn next_link(header: &str) -> Option<String> {
    header.split(',').find_map(|part| {
        let (url, params) = part.trim().strip_prefix('<')?.split_once('>')?;
        let next = params.split(';').any(|p| {
            let p = p.trim();
            p.strip_prefix("rel=").is_some_and(|rel| {
                rel.trim_matches('"')
                    .split_whitespace()
                    .any(|r| r == "next")
            })
        });
        next.then(|| url.to_owned())
    })
}

/// GraphQL's URL: `/graphql` at the root, or `/api/graphql` beside
/// GitHub Enterprise's `/api/v3`.
fn graphql_url(api: &Url) -> Url {
    let mut url = api.clone();
    let path = api.path().trim_end_matches('/');
    let graphql = match path.strip_suffix("/v3") {
        Some(prefix) => format!("{prefix}/graphql"),
        None => format!("{path}/graphql"),
    };
    url.set_path(&graphql);
    url.set_query(None);
    url
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(api: &str) -> GitHub {
        let mut config = GitHubConfig::new(SecretString::from("github_pat_secret"));
        config.api_url = Url::parse(api).unwrap();
        GitHub::new(config).unwrap()
    }

    #[test]
    fn urls_keep_segments_whole() {
        let gh = client("http://127.0.0.1:9/");
        let url = gh
            .rest_url(
                &["repos", "o", "r", "commits", "heads/fix a", "check-runs"],
                &[("per_page", "100".into())],
            )
            .unwrap();
        assert_eq!(
            url.as_str(),
            "http://127.0.0.1:9/repos/o/r/commits/heads%2Ffix%20a/check-runs?per_page=100"
        );
        let ghes = client("https://ghe.example/api/v3");
        let url = ghes.rest_url(&["repos", "o", "r"], &[]).unwrap();
        assert_eq!(url.as_str(), "https://ghe.example/api/v3/repos/o/r");
        assert_eq!(
            ghes.inner.graphql_url.as_str(),
            "https://ghe.example/api/graphql"
        );
        assert_eq!(gh.inner.graphql_url.as_str(), "http://127.0.0.1:9/graphql");
    }

    #[test]
    fn next_links_are_found() {
        let header = r#"<https://api.github.com/x?page=1>; rel="prev", <https://api.github.com/x?page=3>; rel="next", <https://api.github.com/x?page=5>; rel="last""#;
        assert_eq!(
            next_link(header).as_deref(),
            Some("https://api.github.com/x?page=3")
        );
        assert_eq!(next_link(r#"<https://a/x?page=1>; rel="first""#), None);
        assert_eq!(next_link("garbage"), None);
    }

    #[test]
    fn bad_configurations_are_refused_without_the_token() {
        let mut config = GitHubConfig::new(SecretString::from("github_pat_secret"));
        config.api_url = Url::parse("mailto:x@example.com").unwrap();
        let e = GitHub::new(config.clone()).unwrap_err();
        assert!(matches!(e, Error::InvalidInput(_)), "{e}");
        assert!(!format!("{e} {e:?} {config:?}").contains("github_pat_secret"));
        config.api_url = Url::parse(DEFAULT_API_URL).unwrap();
        config.auth = GitHubAuth::token(SecretString::from(" "));
        assert!(GitHub::new(config).is_err());
        let gh = client(DEFAULT_API_URL);
        assert!(!format!("{gh:?}").contains("secret"));
    }
}
