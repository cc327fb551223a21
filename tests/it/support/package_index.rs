//! A tiny package index on 127.0.0.1: it serves fixed files (a tarball, as
//! a registry would) and counts what it was asked, so that tests see a
//! package fetched once and never uploaded.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::Response;
use tokio::sync::oneshot;

/// A running index; serving stops when it is dropped.
pub struct PackageIndex {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    /// Dropping it shuts the server down (its receiver then resolves).
    _stop: oneshot::Sender<()>,
}

struct State {
    /// Each served path (with its leading `/`) and its bytes.
    files: HashMap<String, Vec<u8>>,
    /// GETs per path, served or not.
    fetches: HashMap<String, usize>,
    /// Requests with a method other than GET or HEAD.
    uploads: usize,
}

impl PackageIndex {
    /// Serves each `(path, bytes)` at `http://127.0.0.1:PORT/<path>` (e.g.
    /// `pkg/demo.tar`); any other path is 404, any method but GET and HEAD
    /// 405. Bound before it returns, so it answers at once.
    pub async fn start(files: &[(&str, Vec<u8>)]) -> PackageIndex {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("the package index cannot bind 127.0.0.1");
        let addr = listener.local_addr().expect("the package index's address");
        let state = Arc::new(Mutex::new(State {
            files: files
                .iter()
                .map(|(path, bytes)| (rooted(path), bytes.clone()))
                .collect(),
            fetches: HashMap::new(),
            uploads: 0,
        }));
        let shared = Arc::clone(&state);
        let app = Router::new().fallback(move |request: Request| {
            let state = Arc::clone(&shared);
            async move { handle(&state, &request) }
        });
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            // An accept error ends serving early; the tests then fail on
            // connection errors, which say enough.
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await;
        });
        PackageIndex {
            addr,
            state,
            _stop: stop,
        }
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// How many GETs asked for `path` (with or without its leading `/`).
    pub fn fetches(&self, path: &str) -> usize {
        self.lock().fetches.get(&rooted(path)).copied().unwrap_or(0)
    }

    /// How many requests tried to change the index (any method but GET and
    /// HEAD); each was answered 405.
    pub fn uploads(&self) -> usize {
        self.lock().uploads
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

/// `path` with exactly one leading `/`, as request paths come.
fn rooted(path: &str) -> String {
    format!("/{}", path.trim_start_matches('/'))
}

fn handle(state: &Mutex<State>, request: &Request) -> Response {
    let path = request.uri().path().to_owned();
    let method = request.method();
    let mut state = lock(state);
    if method != Method::GET && method != Method::HEAD {
        state.uploads += 1;
        let mut response = status(StatusCode::METHOD_NOT_ALLOWED, Body::from("read-only\n"));
        response
            .headers_mut()
            .insert("allow", HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    if method == Method::GET {
        *state.fetches.entry(path.clone()).or_default() += 1;
    }
    let Some(bytes) = state.files.get(&path) else {
        return status(StatusCode::NOT_FOUND, Body::from("no such package\n"));
    };
    let kind = if path.ends_with(".tar") {
        "application/x-tar"
    } else {
        "application/octet-stream"
    };
    // hyper sends HEAD's headers (its length too) without the body.
    let mut response = status(StatusCode::OK, Body::from(bytes.clone()));
    response
        .headers_mut()
        .insert("content-type", HeaderValue::from_static(kind));
    response
}

fn status(code: StatusCode, body: Body) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() = code;
    response
}

/// A tar archive (made by the `tar` command) of `(path, contents)` entries,
/// owned by root and in the order given, for an index to serve.
pub fn tarball(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let dir = tempfile::tempdir().expect("a directory for the tarball's files");
    for (path, contents) in entries {
        let file = dir.path().join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent).expect("the tarball's directories");
        }
        std::fs::write(&file, contents).expect("a tarball's file");
    }
    let output = Command::new("tar")
        .args([
            "--create",
            "--file=-",
            "--owner=0",
            "--group=0",
            "--numeric-owner",
        ])
        .arg("--directory")
        .arg(dir.path())
        .arg("--")
        .args(entries.iter().map(|(path, _)| Path::new(path)))
        .output()
        .expect("the tar command");
    assert!(
        output.status.success(),
        "tar failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}
