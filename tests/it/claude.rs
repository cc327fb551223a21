//! The real Claude Code CLI as a worker (the pinned npm release), with its
//! model API answered by a scripted fake of the Anthropic Messages API on
//! 127.0.0.1 (`ANTHROPIC_BASE_URL`). What is checked: the PreToolUse hook
//! reaches Eagle and denies an edit outside the run, an escalated request
//! stops the worker, an ordinary session asks nobody, stream-json
//! progress reaches the work log, cost and turns are recorded, and the
//! session is resumed after the owner's `!approve`; confined, the worker
//! holds only a placeholder of the model key, over TLS too.

mod confined;
mod escalations;
mod model_key;
mod ordinary;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::support::Home;

/// The pinned release (`../shared/claude/NOTES.md` describes it).
const CLAUDE_CODE: &str = "@anthropic-ai/claude-code@2.1.332";

/// What the resumed prompt says (`runner/supervise/launch.rs`, decisions_text).
const RESUME_MARKER: &str = "Eagle's answers to your earlier requests";

/// The pinned CLI, installed under `target/` on first use (the check script
/// installs it before the tests run).
pub(crate) fn claude_bin() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("claude-code");
    let bin = dir.join("node_modules/.bin/claude");
    if bin.exists() {
        return bin;
    }
    std::fs::create_dir_all(&dir).unwrap();
    let out = std::process::Command::new("npm")
        .args([
            "install",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            CLAUDE_CODE,
        ])
        .current_dir(&dir)
        .output()
        .unwrap_or_else(|e| panic!("npm is needed to install {CLAUDE_CODE}: {e}"));
    assert!(
        out.status.success() && bin.exists(),
        "npm install {CLAUDE_CODE} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    bin
}

/// What the fake model saw.
#[derive(Default)]
pub(crate) struct Seen {
    pub(crate) requests: Vec<Value>,
    sessions: Vec<String>,
    pub(crate) unknown: Vec<String>,
    /// The key each call carried (`x-api-key`, or `authorization`).
    pub(crate) keys: Vec<String>,
    next_id: u64,
}

#[derive(Clone)]
pub(crate) struct FakeModel {
    pub(crate) seen: Arc<Mutex<Seen>>,
    /// The file the model tries to write outside the run's directory.
    outside: PathBuf,
    /// A scripted session instead of the story: one tool call per turn, in
    /// order, then the last text.
    script: Arc<Vec<Value>>,
}

/// How many tool results the conversation carries so far.
pub(crate) fn tool_results(body: &Value) -> usize {
    body["messages"]
        .as_array()
        .map(|messages| {
            messages
                .iter()
                .filter_map(|m| m["content"].as_array())
                .flatten()
                .filter(|b| b["type"] == "tool_result")
                .count()
        })
        .unwrap_or(0)
}

/// The text of the last message if it is the user's prompt (not a tool result).
fn last_prompt(body: &Value) -> Option<String> {
    let last = body["messages"]
        .as_array()?
        .iter()
        .rev()
        .find(|m| m["role"] == "user")?;
    match &last["content"] {
        Value::String(text) => Some(text.clone()),
        Value::Array(blocks) => {
            if blocks.iter().any(|b| b["type"] == "tool_result") {
                None
            } else {
                Some(
                    blocks
                        .iter()
                        .filter_map(|b| b["text"].as_str())
                        .collect::<Vec<_>>()
                        .join("\n"),
                )
            }
        }
        _ => None,
    }
}

/// The last tool result: (tool use id, whether it was an error).
fn last_tool_result(body: &Value) -> Option<(String, bool)> {
    let last = body["messages"]
        .as_array()?
        .iter()
        .rev()
        .find(|m| m["role"] == "user")?;
    last["content"].as_array()?.iter().find_map(|b| {
        (b["type"] == "tool_result").then(|| {
            (
                b["tool_use_id"].as_str().unwrap_or_default().to_string(),
                b["is_error"].as_bool().unwrap_or(false),
            )
        })
    })
}

impl FakeModel {
    /// The scripted turn for a request: the story of one worker.
    fn turn(&self, body: &Value) -> Vec<Value> {
        let mut seen = self.seen.lock().unwrap();
        seen.next_id += 1;
        let n = seen.next_id;
        let text = |t: &str| json!({"type": "text", "text": t});
        if !self.script.is_empty() {
            let done = tool_results(body);
            return match self.script.get(done) {
                Some(call) => {
                    let mut call = call.clone();
                    call["id"] = json!(format!("toolu_s{done:03}_{n:04}"));
                    vec![call]
                }
                None => vec![text("[DONE: pr_ready] the fix is committed")],
            };
        }
        let bash = |kind: &str, command: &str| json!({"type": "tool_use", "id": format!("toolu_{kind}_{n:04}"), "name": "Bash", "input": {"command": command}});
        match (last_prompt(body), last_tool_result(body)) {
            (Some(prompt), _) if prompt.contains(RESUME_MARKER) => {
                vec![
                    text("Merging as approved."),
                    bash("merge", "gh-merge pr merge 1 --squash"),
                ]
            }
            (Some(_), _) => vec![
                text("[STATUS: investigation] reading the code"),
                json!({"type": "tool_use", "id": format!("toolu_write_{n:04}"), "name": "Write",
                       "input": {"file_path": self.outside.display().to_string(), "content": "outside\n"}}),
            ],
            (None, Some((id, _))) if id.starts_with("toolu_write") => {
                vec![bash("merge", "gh-merge pr merge 1 --squash")]
            }
            (None, Some((id, true))) if id.starts_with("toolu_merge") => {
                vec![text(
                    "[STATUS: waiting] a human decides on merging; ending my turn",
                )]
            }
            (None, Some((id, false))) if id.starts_with("toolu_merge") => {
                vec![text("[DONE: pr_ready] PR #1 merged after approval")]
            }
            _ => vec![text("I do not know what to do.")],
        }
    }
}

fn sse(content: &[Value]) -> String {
    let stop = if content.iter().any(|b| b["type"] == "tool_use") {
        "tool_use"
    } else {
        "end_turn"
    };
    let mut events = vec![(
        "message_start",
        json!({"type": "message_start", "message": {"id": format!("msg_{:08x}", fastrand::u32(..)),
            "type": "message", "role": "assistant", "model": "claude-opus-5-5", "content": [],
            "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 1000, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}}),
    )];
    for (index, block) in content.iter().enumerate() {
        let (start, delta) = if block["type"] == "tool_use" {
            (
                json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
            )
        } else {
            (
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": block["text"]}),
            )
        };
        events.push((
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        events.push((
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index, "delta": delta}),
        ));
        events.push((
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
    }
    events.push((
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 100}}),
    ));
    events.push(("message_stop", json!({"type": "message_stop"})));
    events
        .into_iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect()
}

async fn messages(State(model): State<FakeModel>, headers: HeaderMap, body: String) -> Response {
    let Ok(body) = serde_json::from_str::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "not JSON").into_response();
    };
    let key = ["x-api-key", "authorization"]
        .iter()
        .find_map(|name| headers.get(*name)?.to_str().ok())
        .unwrap_or_default()
        .to_string();
    model.seen.lock().unwrap().keys.push(key);
    if let Some(session) = headers
        .get("x-claude-code-session-id")
        .and_then(|v| v.to_str().ok())
    {
        model
            .seen
            .lock()
            .unwrap()
            .sessions
            .push(session.to_string());
    }
    let content = model.turn(&body);
    model.seen.lock().unwrap().requests.push(body.clone());
    if body["stream"] == true {
        ([("content-type", "text/event-stream")], sse(&content)).into_response()
    } else {
        let stop = if content.iter().any(|b| b["type"] == "tool_use") {
            "tool_use"
        } else {
            "end_turn"
        };
        axum::Json(json!({"id": "msg_plain", "type": "message", "role": "assistant", "model": "claude-opus-5-5",
            "content": content, "stop_reason": stop, "stop_sequence": null,
            "usage": {"input_tokens": 1000, "output_tokens": 100}}))
        .into_response()
    }
}

async fn unknown(State(model): State<FakeModel>, uri: axum::http::Uri) -> StatusCode {
    model.seen.lock().unwrap().unknown.push(uri.to_string());
    StatusCode::NOT_FOUND
}

async fn start_fake(outside: PathBuf) -> (String, FakeModel) {
    start_scripted(outside, Vec::new()).await
}

pub(crate) async fn start_scripted(outside: PathBuf, script: Vec<Value>) -> (String, FakeModel) {
    let (model, app) = fake_model(outside, script);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, model)
}

/// The scripted fake over TLS, as `https://localhost:PORT`, its
/// certificate from `ca` (a test authority of its own).
pub(crate) async fn start_scripted_tls(
    outside: PathBuf,
    script: Vec<Value>,
    ca: &crate::support::tls::TestCa,
) -> (String, FakeModel) {
    let (model, app) = fake_model(outside, script);
    let listener = crate::support::tls::TlsListener::bind(ca.server(&["localhost"])).await;
    let url = format!("https://localhost:{}", listener.port());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, model)
}

fn fake_model(outside: PathBuf, script: Vec<Value>) -> (FakeModel, axum::Router) {
    let model = FakeModel {
        seen: Arc::default(),
        outside,
        script: Arc::new(script),
    };
    let app = axum::Router::new()
        .route("/v1/messages", axum::routing::post(messages))
        .fallback(unknown)
        .with_state(model.clone());
    (model, app)
}

/// Makes the pinned CLI at `claude` the home's worker, its model API at
/// `model_url` with a test key: what every test of the real CLI sets
/// (each adds its own settings).
pub(crate) fn as_worker<'h>(home: &'h mut Home, claude: &Path, model_url: &str) -> &'h mut Home {
    home.set(
        "EAGLE_RUNNER__WORKER_COMMAND",
        &format!(
            "{} -p {{prompt}} --output-format stream-json --verbose",
            claude.display()
        ),
    )
    .set(
        "EAGLE_RUNNER__WORKER_ENV",
        "ANTHROPIC_BASE_URL,ANTHROPIC_API_KEY",
    )
    .set("ANTHROPIC_BASE_URL", model_url)
    .set("ANTHROPIC_API_KEY", "test-key-not-a-secret")
}

/// Runs the shell in a blocking thread (the fake model answers meanwhile).
async fn shell(home: &Home, input: &str) -> (String, String, bool) {
    crate::support::shell_in_thread(home, input).await
}

/// A small Python project with a bug (`add` subtracts), a Makefile and tests.
fn project(dir: &Path) {
    let files = [
        (
            "src/calc.py",
            "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n",
        ),
        (
            "tests/test_calc.py",
            "import sys\nimport unittest\n\nsys.path.insert(0, 'src')\nimport calc\n\n\nclass T(unittest.TestCase):\n    def test_mul(self):\n        self.assertEqual(calc.mul(2, 3), 6)\n",
        ),
        (
            "Makefile",
            "build:\n\tmkdir -p build && python3 -c 'print(\"built\")' > build/out.txt\n\ntest:\n\tpython3 -m unittest discover -s tests -q\n\n.PHONY: build test\n",
        ),
        (".gitignore", "build/\n__pycache__/\n"),
    ];
    for (path, content) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "-A"],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "commit",
            "-q",
            "-m",
            "init",
        ],
    ] {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// An ordinary bug-fix session: reading, searching, editing, building,
/// testing, local commits, loops, pipes, heredocs and `$(…)`.
fn ordinary_session(work: &Path) -> Vec<Value> {
    let w = |p: &str| work.join(p).display().to_string();
    let bash = |command: &str| json!({"type": "tool_use", "name": "Bash", "input": {"command": command, "description": "work"}});
    let tool = |name: &str, input: Value| json!({"type": "tool_use", "name": name, "input": input});
    vec![
        bash("ls -la"),
        tool("Read", json!({"file_path": w("src/calc.py")})),
        // (Glob and Grep are not offered in a `-p` session of this release.)
        bash("ls src tests"),
        bash("grep -rn 'def add' --include='*.py' ."),
        bash("find . -name '*.py' -not -path './.git/*' | sort"),
        bash("sed -n '1,3p' src/calc.py"),
        bash("awk '/def /{print FILENAME\": \"$0}' src/*.py"),
        bash("for f in src/*.py tests/*.py; do wc -l \"$f\"; done"),
        bash(
            "python3 -c 'import sys; sys.path.insert(0, \"src\"); import calc; print(calc.add(2, 2))'",
        ),
        bash("git log --oneline | head -5"),
        bash("git status --short"),
        bash("grep -n test Makefile | cut -d: -f1"),
        tool(
            "Edit",
            json!({"file_path": w("src/calc.py"), "old_string": "return a - b", "new_string": "return a + b"}),
        ),
        tool(
            "Write",
            json!({"file_path": w("tests/test_add.py"), "content": "import sys\nimport unittest\n\nsys.path.insert(0, 'src')\nimport calc\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(calc.add(2, 2), 4)\n"}),
        ),
        bash("make test 2>&1 | tail -3"),
        bash("python3 -m unittest discover -s tests -q 2>&1 | tail -1"),
        bash("git diff --stat"),
        bash(
            "git add -A && git -c user.name=w -c user.email=w@example.com commit -q -F - <<'EOF'\nfix: add() adds\n\nIt subtracted.\nEOF",
        ),
        bash("echo \"head: $(git rev-parse --short HEAD) on $(git branch --show-current)\""),
        bash("git log -1 --format=%s | tr a-z A-Z"),
        bash("grep -rn TODO src tests || true"),
        bash("n=$(ls src | wc -l); echo \"$n file(s)\""),
        bash(
            "cat > notes.txt <<'EOF'\nadd was wrong\nmul was right\nEOF\nsort notes.txt | head -1",
        ),
        bash("python3 - <<'EOF'\nprint(sum(range(10)))\nEOF"),
        bash("make build && cat build/out.txt"),
        tool("Read", json!({"file_path": w("Makefile")})),
        bash("while read -r line; do echo \"> $line\"; done < notes.txt"),
        bash("rm -f notes.txt && git status --short | wc -l"),
        bash(
            "git -c user.name=w -c user.email=w@example.com commit --allow-empty -q -m 'chore: mark' && git log --oneline | wc -l",
        ),
        bash("if [ -f src/calc.py ]; then echo present; fi; test -d build && echo built"),
        bash("xargs -n1 echo < /dev/null; printf '%s\\n' a b c | paste -sd, -"),
        bash("env | grep -c '^EAGLE_RUN_' || true"),
    ]
}
