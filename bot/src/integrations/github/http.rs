//! What every request to GitHub carries (its headers, the client that
//! sends them) and how a request is named in messages: shared by the
//! client and the App's token exchange.

use std::time::Duration;

use reqwest::Method;
use reqwest::header::{ACCEPT, HeaderMap, HeaderValue};
use url::Url;

use crate::integrations::github::Error;

/// The REST API version every request asks for.
pub const API_VERSION: &str = "2022-11-28";
/// GitHub's REST media type.
pub const MEDIA_TYPE: &str = "application/vnd.github+json";

/// `METHOD /path?query`, for messages: the URL holds no credentials.
pub(crate) fn what(method: &Method, url: &Url) -> String {
    match url.query() {
        Some(q) => format!("{method} {}?{q}", url.path()),
        None => format!("{method} {}", url.path()),
    }
}

/// A client with the headers GitHub asks of every request.
pub(crate) fn http_client(user_agent: &str, timeout: Duration) -> Result<reqwest::Client, Error> {
    // reqwest is built without a default crypto provider; ring is ours.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut headers = HeaderMap::new();
    headers.insert(ACCEPT, HeaderValue::from_static(MEDIA_TYPE));
    headers.insert(
        "x-github-api-version",
        HeaderValue::from_static(API_VERSION),
    );
    reqwest::Client::builder()
        .user_agent(user_agent)
        .default_headers(headers)
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .build()
        .map_err(|e| Error::InvalidInput(format!("cannot build the HTTP client: {e}")))
}
