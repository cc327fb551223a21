//! HTTP plumbing shared by both fakes: binding 127.0.0.1, reading a whole
//! request, and turning a reply into a response.

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes, to_bytes};
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::Value;
use tokio::net::TcpListener;

use crate::common::query::parse_query;

/// Bodies larger than this are refused (and are a violation).
pub(crate) const MAX_BODY: usize = 4 * 1024 * 1024;

/// Binds 127.0.0.1 on a random port.
pub(crate) async fn bind(fake: &str) -> TcpListener {
    TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("the fake {fake} cannot bind 127.0.0.1: {e}"))
}

/// Serves `handler` for every request on the current tokio runtime until it
/// shuts down.
pub(crate) fn serve<S, F, Fut>(listener: TcpListener, state: Arc<S>, handler: F)
where
    S: Send + Sync + 'static,
    F: Fn(Arc<S>, Request) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response> + Send + 'static,
{
    let app = Router::new().fallback(move |request: Request| {
        let state = Arc::clone(&state);
        handler(state, request)
    });
    tokio::spawn(async move {
        // Serving ends with the runtime; an accept error ends it early and
        // the tests then fail on connection errors.
        let _ = axum::serve(listener, app).await;
    });
}

/// One request, read whole.
pub(crate) struct Incoming {
    pub method: String,
    pub path: String,
    pub query: Vec<(String, String)>,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// The body could not be read or was over [`MAX_BODY`].
    pub unreadable: bool,
    /// Where the request is in the journal.
    pub index: usize,
}

impl Incoming {
    /// Reads the request; `index` is filled in once it is journaled.
    pub async fn read(request: Request) -> Incoming {
        let (parts, body) = request.into_parts();
        let (body, unreadable) = match to_bytes(body, MAX_BODY).await {
            Ok(bytes) => (bytes, false),
            Err(_) => (Bytes::new(), true),
        };
        Incoming {
            method: parts.method.as_str().to_owned(),
            path: parts.uri.path().to_owned(),
            query: parse_query(parts.uri.query().unwrap_or("")),
            headers: parts.headers,
            body,
            unreadable,
            index: 0,
        }
    }

    /// A header as text (`None` if absent or not visible ASCII).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// `METHOD /path`, for violation texts.
    pub fn what(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// What one request gets.
#[derive(Debug)]
pub(crate) enum Reply {
    /// A JSON body.
    Json {
        status: u16,
        body: Value,
        headers: Vec<(&'static str, String)>,
    },
    /// No body (204, 304).
    Empty {
        status: u16,
        headers: Vec<(&'static str, String)>,
    },
    /// A body that is not JSON (a proxy's error page).
    Text {
        status: u16,
        content_type: &'static str,
        body: String,
    },
    /// No answer at all; the connection stays open until the client gives up.
    Hang,
}

impl Reply {
    /// A JSON reply without extra headers.
    pub fn json(status: u16, body: Value) -> Reply {
        Reply::Json {
            status,
            body,
            headers: Vec::new(),
        }
    }

    /// The status, or 0 for a hang.
    pub fn status(&self) -> u16 {
        match self {
            Reply::Json { status, .. }
            | Reply::Empty { status, .. }
            | Reply::Text { status, .. } => *status,
            Reply::Hang => 0,
        }
    }

    /// Adds headers (to a reply that has headers).
    pub fn add_headers(&mut self, extra: Vec<(&'static str, String)>) {
        if let Reply::Json { headers, .. } | Reply::Empty { headers, .. } = self {
            headers.extend(extra);
        }
    }

    /// The response; a hang never returns.
    pub async fn into_response(self) -> Response {
        let (status, content_type, body, headers) = match self {
            Reply::Hang => std::future::pending().await,
            Reply::Json {
                status,
                body,
                headers,
            } => (
                status,
                Some("application/json; charset=utf-8"),
                body.to_string(),
                headers,
            ),
            Reply::Empty { status, headers } => (status, None, String::new(), headers),
            Reply::Text {
                status,
                content_type,
                body,
            } => (status, Some(content_type), body, Vec::new()),
        };
        let mut response = Response::new(Body::from(body));
        *response.status_mut() =
            StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let h = response.headers_mut();
        if let Some(content_type) = content_type {
            h.insert("content-type", HeaderValue::from_static(content_type));
        }
        for (name, value) in headers {
            if let Ok(value) = HeaderValue::from_str(&value) {
                h.insert(HeaderName::from_static(name), value);
            }
        }
        response
    }
}

/// The bearer token of an `Authorization` header, and the scheme used.
pub(crate) fn bearer(headers: &HeaderMap) -> Option<(String, String)> {
    let value = headers.get("authorization")?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    Some((scheme.to_owned(), token.trim().to_owned()))
}
