//! Checks response bodies against Zulip's OpenAPI spec with openapi-core,
//! exactly as Zulip's own test suite does, through `validate.py` in one
//! Python child process per test process.
//!
//! The interpreter is `<workspace>/target/openapi-venv/bin/python`; if that
//! virtualenv is missing it is created on first use (under a file lock, so
//! parallel test processes build it once).

use std::fs::{self, File};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;

use serde_json::{Value, json};

/// The openapi-core version Zulip 10.2 pins.
const OPENAPI_CORE: &str = "openapi-core==0.19.5";

enum Slot {
    Empty,
    Running(Validator),
    /// Starting failed; every later call reports the same reason.
    Failed(String),
}

static VALIDATOR: Mutex<Slot> = Mutex::new(Slot::Empty);

struct Validator {
    _child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

/// The workspace root (the directory of the top `Cargo.toml`).
fn workspace_root() -> PathBuf {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = crate_dir.join("../..");
    root.canonicalize().unwrap_or(root)
}

/// The spec the fake follows: `zerver/openapi/zulip.yaml` of Zulip Server
/// 10.2 (commit c65cc482…), by its SHA-256.
const SPEC_URL: &str = "https://raw.githubusercontent.com/zulip/zulip/c65cc48215dc42ae4726ab22debf4018eb899bbe/zerver/openapi/zulip.yaml";
const SPEC_SHA256: &str = "35bf1502c46fa36fbeceb887dd956cdfbd95878180e876c46c325a5f6e2896e6";

/// Finds the spec, in order: `$FAKE_ZULIP_SPEC`; `shared/zulip/zulip.yaml`
/// beside the workspace; a copy cached under `target/`; else the pinned
/// release's file, downloaded once and checked against its SHA-256. Says
/// exactly what to do when none is there.
fn spec_path(root: &Path) -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("FAKE_ZULIP_SPEC") {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "FAKE_ZULIP_SPEC names {}, which does not exist",
                path.display()
            ))
        };
    }
    let shared = root.join("../shared/zulip/zulip.yaml");
    if shared.is_file() {
        return Ok(shared);
    }
    let cached = root.join("target/zulip-spec/zulip-10.2.yaml");
    if cached.is_file() && sha256_of(&cached).as_deref() == Some(SPEC_SHA256) {
        return Ok(cached);
    }
    download(&cached).map_err(|why| {
        format!(
            "the Zulip OpenAPI spec is needed to check the fake's answers, and none was found: {why}. \
             Put Zulip 10.2's zerver/openapi/zulip.yaml (SHA-256 {SPEC_SHA256}) at {} or set \
             FAKE_ZULIP_SPEC to its path, or let the tests download it from {SPEC_URL}",
            cached.display()
        )
    })?;
    Ok(cached)
}

/// The SHA-256 of a file, in hex (by Python's hashlib: the fake has no hasher of its own).
fn sha256_of(path: &Path) -> Option<String> {
    let out = Command::new("python3")
        .args([
            "-c",
            "import hashlib,sys;print(hashlib.sha256(open(sys.argv[1],'rb').read()).hexdigest())",
        ])
        .arg(path)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Downloads the pinned spec to `to`, keeping it only if its checksum matches.
fn download(to: &Path) -> Result<(), String> {
    let dir = to.parent().ok_or("no directory for the spec")?;
    fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let tmp = dir.join(format!(".zulip-{}.yaml", std::process::id()));
    let script = "import urllib.request,sys;urllib.request.urlretrieve(sys.argv[1],sys.argv[2])";
    run(
        "downloading the spec",
        Command::new("python3")
            .args(["-c", script, SPEC_URL])
            .arg(&tmp),
    )?;
    match sha256_of(&tmp) {
        Some(sum) if sum == SPEC_SHA256 => {
            fs::rename(&tmp, to).map_err(|e| format!("cannot keep the spec: {e}"))
        }
        other => {
            let _ = fs::remove_file(&tmp);
            Err(format!(
                "the downloaded spec's SHA-256 is {}, not {SPEC_SHA256}",
                other.unwrap_or_else(|| "unknown".into())
            ))
        }
    }
}

/// The validator's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    Valid,
    /// The body does not match the spec; the reason names the field.
    Invalid(String),
    /// No check was possible (no Python, no spec, the child died).
    Unavailable(String),
}

/// Validates one response body against `zulip.yaml`. Only 2xx responses are
/// checked, as Zulip does; `path` is relative to `/api/v1`, e.g.
/// `/users/me`. Blocks: from async code, call it in `spawn_blocking`.
pub fn validate_response(
    method: &str,
    path: &str,
    status: u16,
    body: &Value,
) -> Result<(), String> {
    match check(method, path, status, body) {
        Verdict::Valid => Ok(()),
        Verdict::Invalid(reason) | Verdict::Unavailable(reason) => Err(reason),
    }
}

/// Starts the validator now, so that the first response is not delayed by
/// it (or by building the virtualenv).
pub(crate) fn warm_up() -> Verdict {
    let body = json!({"result": "success", "msg": "", "id": 1});
    check("post", "/messages", 200, &body)
}

/// [`validate_response`], telling a failed check from an impossible one.
pub(crate) fn check(method: &str, path: &str, status: u16, body: &Value) -> Verdict {
    let line = json!({"method": method, "path": path, "status": status, "body": body}).to_string();
    let mut slot = VALIDATOR.lock().unwrap_or_else(|e| e.into_inner());
    for attempt in 0..2 {
        if let Slot::Empty = *slot {
            *slot = match Validator::start() {
                Ok(v) => Slot::Running(v),
                Err(e) => Slot::Failed(e),
            };
        }
        let validator = match &mut *slot {
            Slot::Running(v) => v,
            Slot::Failed(e) => {
                return Verdict::Unavailable(format!("the response validator is unavailable: {e}"));
            }
            Slot::Empty => continue,
        };
        match validator.ask(&line) {
            Ok(answer) if answer == "ok" => return Verdict::Valid,
            Ok(answer) => {
                return Verdict::Invalid(
                    answer.strip_prefix("error: ").unwrap_or(&answer).to_owned(),
                );
            }
            Err(e) => {
                // The child died; start a new one once.
                *slot = Slot::Empty;
                if attempt == 1 {
                    return Verdict::Unavailable(format!("the response validator died: {e}"));
                }
            }
        }
    }
    Verdict::Unavailable("the response validator could not be started".into())
}

impl Validator {
    fn start() -> Result<Validator, String> {
        let root = workspace_root();
        let spec = spec_path(&root)?;
        let python = ensure_venv(&root)?;
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("validate.py");
        let log = File::create(root.join("target/openapi-validator.log"))
            .map(Stdio::from)
            .unwrap_or_else(|_| Stdio::null());
        let mut child = Command::new(&python)
            .arg(&script)
            .arg(&spec)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("the validator has no pipes".into());
        };
        let mut validator = Validator {
            _child: child,
            stdin,
            stdout: BufReader::new(stdout),
        };
        let mut first = String::new();
        validator
            .stdout
            .read_line(&mut first)
            .map_err(|e| format!("reading from the validator: {e}"))?;
        match first.trim() {
            "ready" => Ok(validator),
            "" => Err("the validator exited at start (see target/openapi-validator.log)".into()),
            other => Err(format!("the validator failed to load the spec: {other}")),
        }
    }

    fn ask(&mut self, line: &str) -> std::io::Result<String> {
        self.stdin.write_all(line.as_bytes())?;
        self.stdin.write_all(b"\n")?;
        self.stdin.flush()?;
        let mut answer = String::new();
        if self.stdout.read_line(&mut answer)? == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "validator exited",
            ));
        }
        Ok(answer.trim_end().to_owned())
    }
}

/// Runs a command, returning its combined output tail on failure.
fn run(what: &str, command: &mut Command) -> Result<(), String> {
    let output = command
        .output()
        .map_err(|e| format!("{what}: cannot start: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    let tail: String = text
        .lines()
        .rev()
        .take(8)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join("\n");
    Err(format!("{what} failed ({}):\n{tail}", output.status))
}

fn has_packages(python: &Path) -> bool {
    Command::new(python)
        .args([
            "-c",
            "import yaml, openapi_core; assert openapi_core.__version__ == '0.19.5'",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Makes sure the virtualenv exists, creating it once across processes.
fn ensure_venv(root: &Path) -> Result<PathBuf, String> {
    let target = root.join("target");
    let venv = target.join("openapi-venv");
    let python = venv.join("bin/python");
    let marker = venv.join(".fake-zulip-ready");
    if marker.exists() {
        return Ok(python);
    }
    fs::create_dir_all(&target).map_err(|e| format!("cannot create {}: {e}", target.display()))?;
    let lock_path = target.join("openapi-venv.lock");
    let lock = File::create(&lock_path)
        .map_err(|e| format!("cannot create {}: {e}", lock_path.display()))?;
    lock.lock()
        .map_err(|e| format!("cannot lock {}: {e}", lock_path.display()))?;
    if marker.exists() {
        return Ok(python);
    }
    if !(python.exists() && has_packages(&python)) {
        let _ = fs::remove_dir_all(&venv);
        run(
            "python3 -m venv",
            Command::new("python3").arg("-m").arg("venv").arg(&venv),
        )?;
        run(
            "pip install openapi-core",
            Command::new(&python).args(["-m", "pip", "install", "-q", OPENAPI_CORE, "pyyaml"]),
        )?;
        if !has_packages(&python) {
            return Err(format!(
                "{OPENAPI_CORE} is not importable in {}",
                venv.display()
            ));
        }
    }
    fs::write(&marker, "openapi-core 0.19.5 and pyyaml are installed\n")
        .map_err(|e| format!("cannot write {}: {e}", marker.display()))?;
    Ok(python)
}
