//! The worker's side of Eagle: commands a worker process runs.
//!
//! * `eagle request <action> [details]` asks the run's runner and waits for
//!   the decision (exit 0 approved, 1 denied, 3 a human decides or the run is
//!   held: stop now, 4 could not ask at all).
//! * `eagle hook claude-pretool` is Claude Code's PreToolUse hook: it always
//!   prints one valid JSON decision, well before Claude Code's timeout, and
//!   denies when it cannot reach the runner (it fails closed, never by silence).
//! * `eagle worker-shim` starts the worker and records its exit status on
//!   descriptor 3, so that a runner that re-adopts the worker learns how it ended.
//! * `eagle demo-worker` is a demo: it walks the seed story so the whole loop
//!   can be seen without an AI agent.
//!
//! None of them loads a profile: a worker holds no database URL, no zuliprc,
//! no key; it finds its run's socket and token in the environment.

pub mod asks;
pub mod shims;
mod workdir;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::ground::wire::{Answer, Ask, ENV_RUN, ENV_SOCKET, ENV_TOKEN, MAX_LINE, Status};

/// Exit codes of `eagle request`.
pub const EXIT_APPROVED: u8 = 0;
pub const EXIT_DENIED: u8 = 1;
pub const EXIT_STOP: u8 = 3;
pub const EXIT_UNREACHABLE: u8 = 4;

/// How long a worker keeps trying to reach a runner that is restarting.
const RECONNECT_FOR: Duration = Duration::from_secs(60);

/// Why a question got no answer.
#[derive(Debug)]
pub enum AskError {
    /// Not inside a run, or a broken environment.
    NotInRun(String),
    /// The runner could not be reached in time.
    Unreachable(String),
}

impl std::fmt::Display for AskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AskError::NotInRun(why) | AskError::Unreachable(why) => f.write_str(why),
        }
    }
}

fn run_env(env: &BTreeMap<String, String>) -> Result<(String, String), AskError> {
    let socket = env.get(ENV_SOCKET).filter(|s| !s.is_empty());
    let token = env.get(ENV_TOKEN).filter(|s| !s.is_empty());
    match (socket, token) {
        (Some(socket), Some(token)) => Ok((socket.clone(), token.clone())),
        _ => Err(AskError::NotInRun(format!(
            "not inside an Eagle run: {ENV_SOCKET} and {ENV_TOKEN} are not set (only workers started by Eagle's runner can ask)"
        ))),
    }
}

/// Sends one question and reads the answer, reconnecting (with the same
/// question, so it is the same request) while the runner restarts, for at
/// most `within`.
pub fn ask(
    env: &BTreeMap<String, String>,
    make: impl Fn(String) -> Ask,
    within: Option<Duration>,
) -> Result<Answer, AskError> {
    let (socket, token) = run_env(env)?;
    let started = Instant::now();
    let mut wait = Duration::from_millis(100);
    let mut last_error = String::new();
    loop {
        if let Some(limit) = within
            && started.elapsed() >= limit
        {
            return Err(AskError::Unreachable(format!(
                "no answer from the runner in time ({last_error})"
            )));
        }
        match exchange(
            &socket,
            &make(token.clone()),
            within.map(|w| w.saturating_sub(started.elapsed())),
        ) {
            Ok(answer) => return Ok(answer),
            Err(error) => last_error = error.to_string(),
        }
        if started.elapsed() >= RECONNECT_FOR {
            return Err(AskError::Unreachable(format!(
                "cannot reach the runner at {socket}: {last_error}"
            )));
        }
        std::thread::sleep(wait);
        wait = (wait * 2).min(Duration::from_secs(2));
    }
}

fn exchange(socket: &str, ask: &Ask, timeout: Option<Duration>) -> std::io::Result<Answer> {
    let mut stream = UnixStream::connect(socket)?;
    stream.set_read_timeout(timeout.filter(|t| !t.is_zero()))?;
    let mut line = serde_json::to_string(ask).map_err(std::io::Error::other)?;
    line.push('\n');
    stream.write_all(line.as_bytes())?;
    let mut reader = BufReader::new(stream.take(MAX_LINE as u64));
    let mut answer = String::new();
    reader.read_line(&mut answer)?;
    if answer.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the runner closed the connection",
        ));
    }
    serde_json::from_str(&answer).map_err(std::io::Error::other)
}

/// A key for one `eagle request` call: the same call retried keeps it.
fn request_key() -> String {
    format!("{}-{:016x}", std::process::id(), fastrand::u64(..))
}

/// `eagle request`: asks and exits with the documented code. `within`
/// bounds the whole wait: a runner that does not answer by then (gone,
/// or hung) is "could not ask" (4), never silence for ever.
pub fn request(
    env: &BTreeMap<String, String>,
    action: &str,
    details: &str,
    escalate: bool,
    within: Duration,
) -> ExitCode {
    let key = request_key();
    let answer = ask(
        env,
        |token| Ask::Request {
            token,
            key: key.clone(),
            action: action.to_string(),
            body: details.to_string(),
            escalate,
        },
        Some(within),
    );
    let run = env.get(ENV_RUN).cloned().unwrap_or_default();
    ExitCode::from(report(&answer, &run, action))
}

fn report(answer: &Result<Answer, AskError>, run: &str, action: &str) -> u8 {
    asks::print_answer(answer, run, action)
}

/// The JSON Claude Code reads from a PreToolUse hook.
pub fn hook_output(allow: bool, reason: &str) -> String {
    // Claude Code caps strings at 10 000 characters.
    let reason: String = reason.chars().take(2_000).collect();
    serde_json::json!({
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": if allow { "allow" } else { "deny" },
            "permissionDecisionReason": reason,
        }
    })
    .to_string()
}

/// `eagle hook claude-pretool`: the hook input on stdin, one JSON decision
/// on stdout, exit 0, always before `timeout`.
pub fn hook_pretool(
    env: &BTreeMap<String, String>,
    timeout: Duration,
    mut stdin: impl Read,
) -> (String, ExitCode) {
    let started = Instant::now();
    // Answer with a margin: Claude Code kills a hook at its timeout.
    let budget = timeout
        .saturating_sub(Duration::from_secs(3))
        .max(Duration::from_secs(1));
    let mut input = String::new();
    let read = stdin
        .by_ref()
        .take(MAX_LINE as u64)
        .read_to_string(&mut input);
    let deny = |reason: &str| (hook_output(false, reason), ExitCode::SUCCESS);
    if read.is_err() {
        return deny("Eagle could not read this tool call: not running it");
    }
    let Ok(value) = serde_json::from_str::<serde_json::Value>(&input) else {
        return deny("Eagle could not read this tool call: not running it");
    };
    let answer = ask(
        env,
        |token| Ask::Hook {
            token,
            input: value.clone(),
        },
        Some(budget.saturating_sub(started.elapsed())),
    );
    match answer {
        Ok(answer) => match answer.status {
            Status::Approved => (hook_output(true, "approved by Eagle"), ExitCode::SUCCESS),
            Status::Denied => deny(&format!("denied by Eagle: {}", answer.reason)),
            Status::Escalated | Status::Stop => deny(&format!(
                "{} (Eagle: do not try another way; end your turn now)",
                answer.reason
            )),
            Status::Invalid => deny(&format!("Eagle refused the question: {}", answer.reason)),
        },
        Err(error) => deny(&format!(
            "Eagle cannot be reached ({error}): stop and end your turn; you will be resumed"
        )),
    }
}

/// Marks every descriptor above 2 close-on-exec (`close_range`, Linux
/// 5.11; one by one where it is missing).
fn inherit_nothing_past_stderr() {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    // SAFETY: close_range with CLOEXEC only sets flags on our descriptors.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            CLOSE_RANGE_CLOEXEC,
        )
    };
    if rc == 0 {
        return;
    }
    let open: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .filter(|fd| *fd > 2)
                .collect()
        })
        .unwrap_or_default();
    for fd in open {
        // SAFETY: setting FD_CLOEXEC on a descriptor of ours (a stale
        // number from the listing fails harmlessly).
        unsafe {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
}

/// `eagle worker-shim`: runs `argv` in this process group and writes
/// `exit <code>`, `signal <n>` or `error <text>` to descriptor 3. Past
/// `deadline` (the runner is gone and cannot), it ends the group itself.
pub fn shim(
    env: &BTreeMap<String, String>,
    deadline: Duration,
    rules: Option<&std::path::Path>,
    sandbox: Option<&std::path::Path>,
    argv: &[String],
) -> ExitCode {
    use std::os::fd::FromRawFd;
    use std::os::unix::process::ExitStatusExt;
    // SAFETY: fcntl on a descriptor number; F_GETFD only reads flags.
    let has_fd3 = unsafe { libc::fcntl(3, libc::F_GETFD) } >= 0;
    if !has_fd3 {
        eprintln!(
            "eagle worker-shim: descriptor 3 (the exit file) is not open; only Eagle's runner starts the shim"
        );
        return ExitCode::from(EXIT_UNREACHABLE);
    }
    // SAFETY: descriptor 3 is open (checked above) and only this function uses it.
    let mut exit_file = unsafe { std::fs::File::from_raw_fd(3) };
    // The worker inherits its standard streams and nothing else: descriptor
    // 3 and whatever the process that started Eagle left open (a build
    // tool's jobserver pipe, say) are closed at its exec.
    inherit_nothing_past_stderr();
    // The runner asks the group to wrap up with SIGINT and stops it with
    // SIGTERM: the shim outlives both to record the end. A handler (unlike
    // ignoring) is reset in the worker by exec.
    extern "C" fn note_signal(_: libc::c_int) {}
    // SAFETY: installing an async-signal-safe no-op handler.
    unsafe {
        libc::signal(libc::SIGINT, note_signal as *const () as libc::sighandler_t);
        libc::signal(
            libc::SIGTERM,
            note_signal as *const () as libc::sighandler_t,
        );
    }
    let Some((program, args)) = argv.split_first() else {
        let _ = writeln!(exit_file, "error no worker command");
        return ExitCode::from(EXIT_UNREACHABLE);
    };
    // The worker's own files, written as the worker's own user, never
    // through a link an earlier attempt left.
    let home = env.get("HOME").map(std::path::Path::new);
    let work = std::env::current_dir().unwrap_or_else(|_| ".".into());
    for refused in workdir::prepare(home, &work, rules) {
        eprintln!("eagle worker-shim: {refused}");
    }
    if let Some(spec) = sandbox {
        let outcome = confined(env, deadline, spec, program, args);
        if let crate::confine::sandbox::Outcome::Failed(why) = &outcome {
            eprintln!("eagle worker-shim: the worker was not started: the sandbox failed: {why}");
        }
        if let crate::confine::sandbox::Outcome::Limit(what) = &outcome {
            eprintln!("eagle worker-shim: the worker was stopped at a limit: {what}");
        }
        let _ = writeln!(exit_file, "{}", outcome.exit_line());
        let _ = exit_file.sync_all();
        // SAFETY: kill(0, …) signals our own process group, this shim included.
        unsafe {
            libc::kill(0, libc::SIGKILL);
        }
        return ExitCode::SUCCESS;
    }
    let mut child = match std::process::Command::new(program).args(args).spawn() {
        Ok(child) => child,
        Err(error) => {
            eprintln!("eagle worker-shim: cannot start {program}: {error}");
            let _ = writeln!(exit_file, "error cannot start {program}: {error}");
            let _ = exit_file.sync_all();
            return ExitCode::from(EXIT_UNREACHABLE);
        }
    };
    end_group_after(deadline);
    let status = loop {
        match child.wait() {
            Ok(status) => break status,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => {
                let _ = writeln!(exit_file, "error cannot wait for the worker: {error}");
                return ExitCode::from(EXIT_UNREACHABLE);
            }
        }
    };
    let line = match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(signal)) => format!("signal {signal}"),
        _ => "error the worker's status is unknown".to_string(),
    };
    let _ = writeln!(exit_file, "{line}");
    let _ = exit_file.sync_all();
    // Leftovers of the worker (a background process) end with it.
    // SAFETY: kill(0, …) signals our own process group, this shim included.
    unsafe {
        libc::kill(0, libc::SIGKILL);
    }
    ExitCode::SUCCESS
}

/// Past `deadline` (the runner is gone and cannot), the shim ends its
/// group itself: SIGTERM, then SIGKILL.
fn end_group_after(deadline: Duration) {
    std::thread::spawn(move || {
        std::thread::sleep(deadline);
        // SAFETY: kill(0, …) signals our own process group.
        unsafe {
            libc::kill(0, libc::SIGTERM);
        }
        std::thread::sleep(Duration::from_secs(10));
        // SAFETY: as above.
        unsafe {
            libc::kill(0, libc::SIGKILL);
        }
    });
}

/// Runs the worker confined (see [`crate::confine::sandbox`]); any failure to set
/// the sandbox up ends here, before the worker's program runs.
fn confined(
    env: &BTreeMap<String, String>,
    deadline: Duration,
    spec: &std::path::Path,
    program: &str,
    args: &[String],
) -> crate::confine::sandbox::Outcome {
    let spec = match crate::confine::sandbox::Spec::read_from(spec) {
        Ok(spec) => spec,
        Err(why) => return crate::confine::sandbox::Outcome::Failed(why),
    };
    match crate::confine::sandbox::start(&spec, program, args, env) {
        Ok(tree) => {
            end_group_after(deadline);
            tree.wait()
        }
        Err(outcome) => outcome,
    }
}

/// `eagle demo-worker`: a scripted worker for demos and the shell. Fresh, it
/// reports its investigation and asks for create_worktree, run_tests and
/// open_draft_pr (approved silently by the default policy), then for
/// merge_pr (escalated: it stops and waits). Resumed, it asks for merge_pr
/// again (the human's answer binds to exactly that request) and reports
/// `[DONE: pr_ready]`.
pub fn demo(env: &BTreeMap<String, String>, prompt: &str) -> ExitCode {
    let run = env.get(ENV_RUN).cloned().unwrap_or_else(|| "?".into());
    let say = |line: String| {
        println!("{line}");
        let _ = std::io::stdout().flush();
    };
    let ask = |action: &str, details: &str| -> u8 {
        let key = request_key();
        let answer = self::ask(
            env,
            |token| Ask::Request {
                token,
                key: key.clone(),
                action: action.into(),
                body: details.into(),
                escalate: false,
            },
            None,
        );
        let code = match &answer {
            Ok(a) => match a.status {
                Status::Approved => 0,
                Status::Denied => 1,
                Status::Escalated | Status::Stop => 3,
                Status::Invalid => 4,
            },
            Err(_) => 4,
        };
        let what = match &answer {
            Ok(a) if a.reason.is_empty() => format!("{:?}", a.status).to_lowercase(),
            Ok(a) => format!("{:?}: {}", a.status, a.reason).to_lowercase(),
            Err(e) => e.to_string(),
        };
        println!("eagle request {action} → {what}");
        code
    };
    let resumed = prompt.contains("Eagle's answers to your earlier requests");
    if resumed && prompt.contains("[EXPIRED: merge_pr]") {
        say(format!(
            "[DONE: pr_ready] run:{run} demo PR #{run} ready; nobody answered on merging, so it is left to a human"
        ));
        return ExitCode::SUCCESS;
    }
    if !resumed {
        say(format!(
            "[STATUS: investigation] run:{run} (demo worker) reading the task and the code"
        ));
        for (action, details) in [
            ("create_worktree", format!("Branch: eagle/run-{run}")),
            ("run_tests", "Scheme: demo suite".to_string()),
            ("open_draft_pr", "Draft PR: demo".to_string()),
        ] {
            match ask(action, &details) {
                0 => {}
                1 => say(format!(
                    "[STATUS: blocked] run:{run} {action} was denied; trying without it"
                )),
                _ => {
                    say(format!(
                        "[STATUS: waiting] run:{run} waiting for a decision on {action}"
                    ));
                    return ExitCode::SUCCESS;
                }
            }
        }
        say(format!(
            "[STATUS: pr_open] run:{run} demo draft PR #{run} opened, CI green"
        ));
    }
    match ask("merge_pr", &format!("Merge the demo PR #{run} (squash)")) {
        0 => say(format!(
            "[DONE: pr_ready] run:{run} demo PR #{run} ready, merge approved by a human"
        )),
        1 => say(format!(
            "[DONE: pr_ready] run:{run} demo PR #{run} ready; merging was denied, so it is left to a human"
        )),
        3 => say(format!(
            "[STATUS: waiting] run:{run} a human decides on merge_pr; stopping until resumed"
        )),
        _ => return ExitCode::from(EXIT_UNREACHABLE),
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hook_output_is_the_documented_shape() {
        let allow: serde_json::Value = serde_json::from_str(&hook_output(true, "ok")).unwrap();
        assert_eq!(allow["hookSpecificOutput"]["hookEventName"], "PreToolUse");
        assert_eq!(allow["hookSpecificOutput"]["permissionDecision"], "allow");
        let long = "x".repeat(20_000);
        let deny: serde_json::Value = serde_json::from_str(&hook_output(false, &long)).unwrap();
        assert_eq!(deny["hookSpecificOutput"]["permissionDecision"], "deny");
        assert!(
            deny["hookSpecificOutput"]["permissionDecisionReason"]
                .as_str()
                .unwrap()
                .len()
                <= 2_000
        );
    }

    #[test]
    fn outside_a_run_the_hook_denies_and_request_says_why() {
        let env = BTreeMap::new();
        let (out, _) = hook_pretool(
            &env,
            Duration::from_secs(5),
            "{\"tool_name\":\"Bash\"}".as_bytes(),
        );
        let value: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(value["hookSpecificOutput"]["permissionDecision"], "deny");
        let (out, _) = hook_pretool(&env, Duration::from_secs(5), "not json".as_bytes());
        assert!(out.contains("\"deny\""));
        assert_eq!(
            report(&Err(AskError::NotInRun("x".into())), "1", "run_tests"),
            EXIT_UNREACHABLE
        );
    }
}
