//! A git remote over HTTP that demands credentials, as GitHub's does: git's
//! own `git http-backend` (a CGI) behind a small server on 127.0.0.1, so
//! that tests see real clones, fetches and pushes carry (or lack) a token.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::body::{Body, Bytes, to_bytes};
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use base64::Engine as _;
use tokio::io::AsyncWriteExt as _;
use tokio::sync::oneshot;

/// Request bodies larger than this are refused: the tests' repositories are
/// small, and a whole pack is buffered before the CGI sees it.
const MAX_BODY: usize = 64 * 1024 * 1024;

/// A running git remote; serving stops when it is dropped.
pub struct GitHttp {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    /// Dropping it shuts the server down (its receiver then resolves).
    _stop: oneshot::Sender<()>,
    /// The CGI's `HOME`: empty, so no user's configuration reaches it.
    _home: tempfile::TempDir,
}

/// Which passwords the server takes.
enum Accept {
    /// This one.
    Token(String),
    /// Those the check takes for the repository (its name, without `.git`).
    Check(Arc<Check>),
}

/// A password check: (password, repository name) → accepted.
pub type Check = dyn Fn(&str, &str) -> bool + Send + Sync;

/// What the server accepts and what it has seen.
struct State {
    accept: Accept,
    refused: usize,
    served: usize,
    /// Each password presented, once, in the order first seen.
    passwords: Vec<String>,
}

/// What every request needs, shared by the handlers.
struct Context {
    state: Arc<Mutex<State>>,
    root: PathBuf,
    home: PathBuf,
}

impl GitHttp {
    /// Serves the bare repositories under `root` at
    /// `http://127.0.0.1:PORT/<name>.git`, to Basic auth whose password is
    /// `token` (any username, as GitHub takes `x-access-token:<token>`);
    /// pushes are allowed. Bound before it returns, so it answers at once.
    pub async fn start(root: &Path, token: &str) -> GitHttp {
        GitHttp::serve(root, Accept::Token(token.to_owned())).await
    }

    /// As [`GitHttp::start`], taking the passwords `check` takes for each
    /// repository (a GitHub App's installation tokens, say).
    pub async fn start_checked(root: &Path, check: Arc<Check>) -> GitHttp {
        GitHttp::serve(root, Accept::Check(check)).await
    }

    async fn serve(root: &Path, accept: Accept) -> GitHttp {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("the git server cannot bind 127.0.0.1");
        let addr = listener.local_addr().expect("the git server's address");
        let home = tempfile::tempdir().expect("a home for git http-backend");
        let state = Arc::new(Mutex::new(State {
            accept,
            refused: 0,
            served: 0,
            passwords: Vec::new(),
        }));
        let context = Arc::new(Context {
            state: Arc::clone(&state),
            root: root.to_path_buf(),
            home: home.path().to_path_buf(),
        });
        let app = Router::new().fallback(move |request: Request| {
            let context = Arc::clone(&context);
            async move { handle(&context, request).await }
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
        GitHttp {
            addr,
            state,
            _stop: stop,
            _home: home,
        }
    }

    /// The URL of repository `repo` (`<root>/<repo>.git`).
    pub fn url(&self, repo: &str) -> String {
        format!("http://{}/{repo}.git", self.addr)
    }

    /// Accepts `token` from now on, and no longer the one before.
    pub fn set_token(&self, token: &str) {
        self.lock().accept = Accept::Token(token.to_owned());
    }

    /// How many requests were answered 401 (no or wrong credentials).
    pub fn refused(&self) -> usize {
        self.lock().refused
    }

    /// How many requests passed authentication.
    pub fn served(&self) -> usize {
        self.lock().served
    }

    /// Each distinct password presented (right or wrong), first seen first.
    pub fn authorizations(&self) -> Vec<String> {
        self.lock().passwords.clone()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

/// The password of a Basic `Authorization` header.
fn basic_password(headers: &HeaderMap) -> Option<String> {
    let value = headers.get("authorization")?.to_str().ok()?.trim();
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (_user, password) = text.split_once(':')?;
    Some(password.to_owned())
}

async fn handle(context: &Context, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let password = basic_password(&parts.headers);
    let allowed = {
        let mut state = lock(&context.state);
        if let Some(p) = &password
            && !state.passwords.contains(p)
        {
            state.passwords.push(p.clone());
        }
        let repo = parts
            .uri
            .path()
            .trim_start_matches('/')
            .split_once(".git")
            .map(|(name, _)| name)
            .unwrap_or_default();
        let allowed = match (&state.accept, password.as_deref()) {
            (Accept::Token(token), Some(p)) => p == token,
            (Accept::Check(check), Some(p)) => check(p, repo),
            (_, None) => false,
        };
        if allowed {
            state.served += 1;
        } else {
            state.refused += 1;
        }
        allowed
    };
    if !allowed {
        return unauthorized();
    }
    let body = match to_bytes(body, MAX_BODY).await {
        Ok(body) => body,
        Err(_) => {
            return plain(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body too large or unreadable",
            );
        }
    };
    let header = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let cgi = Cgi {
        method: parts.method.as_str().to_owned(),
        path: parts.uri.path().to_owned(),
        query: parts.uri.query().unwrap_or("").to_owned(),
        content_type: header("content-type"),
        content_encoding: header("content-encoding"),
        protocol: header("git-protocol"),
        body,
    };
    match run_backend(context, cgi).await {
        Ok(response) => response,
        Err(error) => plain(StatusCode::INTERNAL_SERVER_ERROR, &error),
    }
}

/// GitHub's answer to a request without (valid) credentials.
fn unauthorized() -> Response {
    let mut response = plain(StatusCode::UNAUTHORIZED, "Authentication required\n");
    response.headers_mut().insert(
        "www-authenticate",
        HeaderValue::from_static("Basic realm=\"GitHub\""),
    );
    response
}

fn plain(status: StatusCode, text: &str) -> Response {
    let mut response = Response::new(Body::from(text.to_owned()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert("content-type", HeaderValue::from_static("text/plain"));
    response
}

/// One request as the CGI sees it.
struct Cgi {
    method: String,
    path: String,
    query: String,
    content_type: Option<String>,
    content_encoding: Option<String>,
    protocol: Option<String>,
    body: Bytes,
}

/// Runs `git http-backend` for one request, with a clean environment, and
/// turns what it prints into the response.
async fn run_backend(context: &Context, cgi: Cgi) -> Result<Response, String> {
    let mut env: HashMap<&str, String> = HashMap::from([
        ("GIT_PROJECT_ROOT", context.root.display().to_string()),
        ("GIT_HTTP_EXPORT_ALL", "1".to_owned()),
        ("PATH_INFO", cgi.path),
        ("REQUEST_METHOD", cgi.method),
        ("QUERY_STRING", cgi.query),
        ("CONTENT_LENGTH", cgi.body.len().to_string()),
        // Authenticated: http-backend then allows receive-pack (push).
        ("REMOTE_USER", "git".to_owned()),
        ("REMOTE_ADDR", "127.0.0.1".to_owned()),
        ("HOME", context.home.display().to_string()),
        // http-backend runs git's other commands through its exec path, but
        // hooks and helpers may want the usual tools.
        ("PATH", std::env::var("PATH").unwrap_or_default()),
        ("GIT_CONFIG_NOSYSTEM", "1".to_owned()),
        // The repositories may belong to another user (a worker's).
        ("GIT_CONFIG_COUNT", "1".to_owned()),
        ("GIT_CONFIG_KEY_0", "safe.directory".to_owned()),
        ("GIT_CONFIG_VALUE_0", "*".to_owned()),
    ]);
    let optional = [
        ("CONTENT_TYPE", cgi.content_type),
        ("HTTP_CONTENT_ENCODING", cgi.content_encoding),
        ("GIT_PROTOCOL", cgi.protocol),
    ];
    for (name, value) in optional {
        if let Some(value) = value {
            env.insert(name, value);
        }
    }
    let mut child = tokio::process::Command::new("git")
        .arg("http-backend")
        .env_clear()
        .envs(&env)
        .current_dir(&context.home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot run git http-backend: {e}"))?;
    let mut stdin = child.stdin.take().ok_or("no stdin for the CGI")?;
    let body = cgi.body;
    // Written beside the read: a CGI that answers before reading its whole
    // input must not deadlock against a full pipe.
    let writer = tokio::spawn(async move {
        let _ = stdin.write_all(&body).await;
    });
    let output = child
        .wait_with_output()
        .await
        .map_err(|e| format!("git http-backend: {e}"))?;
    let _ = writer.await;
    if output.stdout.is_empty() {
        return Err(format!(
            "git http-backend printed nothing ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    parse_cgi(&output.stdout)
}

/// A CGI's output: headers (with an optional `Status:`), a blank line, the body.
fn parse_cgi(output: &[u8]) -> Result<Response, String> {
    let (head, body) = split_head(output).ok_or("the CGI's headers never end")?;
    let head = std::str::from_utf8(head).map_err(|_| "the CGI's headers are not text")?;
    let mut status = StatusCode::OK;
    let mut headers = HeaderMap::new();
    for line in head.lines().map(str::trim_end).filter(|l| !l.is_empty()) {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| format!("a CGI header without a colon: {line}"))?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            let code = value.split(' ').next().unwrap_or_default();
            status = code
                .parse::<u16>()
                .ok()
                .and_then(|c| StatusCode::from_u16(c).ok())
                .ok_or_else(|| format!("a CGI status that is no status: {value}"))?;
            continue;
        }
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("a CGI header name that is no name: {name}"))?;
        let value = HeaderValue::from_str(value)
            .map_err(|_| format!("a CGI header value that is no value: {value}"))?;
        headers.append(name, value);
    }
    let mut response = Response::new(Body::from(body.to_vec()));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    Ok(response)
}

/// Splits at the first blank line (`\r\n\r\n` or `\n\n`).
fn split_head(output: &[u8]) -> Option<(&[u8], &[u8])> {
    let crlf = output.windows(4).position(|w| w == b"\r\n\r\n");
    let lf = output.windows(2).position(|w| w == b"\n\n");
    match (crlf, lf) {
        (Some(c), Some(l)) if l < c => Some((&output[..l], &output[l + 2..])),
        (Some(c), _) => Some((&output[..c], &output[c + 4..])),
        (None, Some(l)) => Some((&output[..l], &output[l + 2..])),
        (None, None) => None,
    }
}
