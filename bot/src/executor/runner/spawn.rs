//! Starting a worker: its run directory, its rules, its command line, its
//! environment, and the process itself (in its own session and process
//! group, as its own user, through the worker shim that records its exit).
//!
//! A run's directory, kept across its attempts:
//!
//! ```text
//! <runs dir>/<run>/        Eagle's, 0711 (the worker may pass through, not list)
//!   work/                  the worker's: its working directory (a clone of runner.repo, if set)
//!   home/                  the worker's: HOME, CLAUDE_CONFIG_DIR (home/.claude), TMPDIR (home/tmp)
//!   eagle/                 Eagle's, 0755: rules.md, settings.json (Claude Code), the socket, exit files
//! ```
//!
//! The work log goes to `<logs dir>/<task>/<kind>_<timestamp>.md`, which
//! only Eagle can open: the worker writes to it through the descriptor it
//! inherits, and the runner follows the file.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use super::{PromptKind, Shared};
use crate::executor::repos::checkout::Checkout;
use crate::executor::repos::git::GitAuth;
use crate::ground::host::{self, UnixUser};
use crate::ground::wire::{ENV_RUN, ENV_SOCKET, ENV_TOKEN};
use crate::profile::WorkerKind;
use crate::store::{Run, Task};

/// A Unix socket path must fit in `sun_path` (108 bytes with its NUL),
/// with room for the [`egress_socket_path`] suffix.
const MAX_SOCKET_PATH: usize = 100 - EGRESS_SUFFIX.len();

/// What the egress socket's name adds to the request socket's.
const EGRESS_SUFFIX: &str = ".egress";

/// The run's egress socket: beside its request socket, one per attempt.
/// The egress proxy listens there (for the worker, outside the sandbox); the
/// sandbox's in-namespace bridge forwards `127.0.0.1:3128` to it.
pub(crate) fn egress_socket_path(request_socket: &Path) -> PathBuf {
    let mut name = request_socket.as_os_str().to_owned();
    name.push(EGRESS_SUFFIX);
    PathBuf::from(name)
}

/// Creates the runs and logs directories with their permissions. With a
/// separate worker user, the way down to the runs directory must be
/// passable (not listable) for it: Eagle opens up its own directories (the
/// data directory and below) for passing through, and refuses to start if a
/// directory above them is closed, saying which.
pub(super) fn prepare_dirs(shared: &Shared) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(&shared.runs_dir)?;
    std::fs::create_dir_all(&shared.logs_dir)?;
    host::chmod(&shared.logs_dir, 0o700)?;
    let Some(user) = shared.worker_user.as_ref() else {
        return Ok(());
    };
    if let Some(blocked) = blocking_dir(&shared.runs_dir, &shared.data_dir) {
        return Err(std::io::Error::other(
            blocked.message(&user.name, &shared.runs_dir),
        ));
    }
    // Eagle's own directories on the way are opened (search only).
    for dir in shared.runs_dir.ancestors() {
        if opens_itself(dir, &shared.runs_dir, &shared.data_dir) {
            let mode = std::fs::metadata(dir)?.permissions().mode() & 0o7777;
            if mode & 0o001 == 0 {
                host::chmod(dir, mode | 0o011)?;
            }
        }
    }
    Ok(())
}

/// A directory on the way to the runs that another user cannot pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    pub dir: PathBuf,
    pub mode: u32,
}

impl Blocked {
    /// What to tell the operator: the directory, and what to change.
    pub fn message(&self, worker: &str, runs: &Path) -> String {
        format!(
            "the worker user {worker} cannot pass through {} (mode {:o}) on the way to the runs \
             directory {}: set runner.runs_dir to a directory it can reach (e.g. /var/lib/eagle/runs), \
             or let it pass (chmod o+x {})",
            self.dir.display(),
            self.mode,
            runs.display(),
            self.dir.display()
        )
    }
}

/// Whether Eagle opens `dir` for the workers itself: a directory of its
/// own user inside its data or runs directory.
fn opens_itself(dir: &Path, runs: &Path, data: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    (dir.starts_with(data) || dir.starts_with(runs))
        && std::fs::metadata(dir).is_ok_and(|m| m.is_dir() && m.uid() == host::euid())
}

/// The first directory on the way to `runs` (from `/` down) that another
/// user cannot pass and that Eagle will not open itself; `None` when the
/// way is open. A directory not made yet is made by Eagle, so it passes.
pub fn blocking_dir(runs: &Path, data: &Path) -> Option<Blocked> {
    use std::os::unix::fs::PermissionsExt;
    let mut dirs: Vec<&Path> = runs.ancestors().collect();
    dirs.reverse();
    for dir in dirs {
        let Ok(meta) = std::fs::metadata(dir) else {
            continue;
        };
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o001 == 0 && !opens_itself(dir, runs, data) {
            return Some(Blocked {
                dir: dir.to_path_buf(),
                mode,
            });
        }
    }
    None
}

/// Where one run's files are.
#[derive(Debug, Clone)]
pub(super) struct RunDir {
    pub base: PathBuf,
    pub work: PathBuf,
    pub home: PathBuf,
    pub eagle: PathBuf,
}

impl RunDir {
    pub fn of(shared: &Shared, run_id: i64) -> RunDir {
        let base = shared.runs_dir.join(run_id.to_string());
        RunDir {
            work: base.join("work"),
            home: base.join("home"),
            eagle: base.join("eagle"),
            base,
        }
    }

    pub fn socket_path(
        &self,
        shared: &Shared,
        run_id: i64,
        attempt: i64,
    ) -> std::io::Result<PathBuf> {
        let path = self.eagle.join(format!("sock-{attempt}"));
        if path.as_os_str().len() <= MAX_SOCKET_PATH {
            return Ok(path);
        }
        // A deep runs directory: the socket goes to a short place of Eagle's own.
        let mode = if shared.worker_user.is_some() {
            0o711
        } else {
            0o700
        };
        let dir = private_dir(
            &std::env::temp_dir(),
            &format!("eagle-{}", host::euid()),
            mode,
        )?;
        Ok(dir.join(format!("r{run_id}-{attempt}-{:08x}", fastrand::u32(..))))
    }
}

/// `<parent>/<name>`, a directory of Eagle's own: created if missing, and
/// used only if it is a real directory (not a symlink), owned by Eagle's
/// user and writable by nobody else; otherwise refused (someone may have
/// planted it in a shared directory such as `/tmp`). Its mode is then set
/// to `mode`.
fn private_dir(parent: &Path, name: &str, mode: u32) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let dir = parent.join(name);
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = std::fs::symlink_metadata(&dir)?;
    let refuse = |why: &str| {
        Err(std::io::Error::other(format!(
            "{} {why}: refusing to put a run's socket there (remove it, or set runner.runs_dir \
             to a shorter path)",
            dir.display()
        )))
    };
    if !meta.file_type().is_dir() {
        return refuse("is not a directory (a symlink or a file)");
    }
    if meta.uid() != host::euid() {
        return refuse("belongs to another user");
    }
    if meta.permissions().mode() & 0o022 != 0 {
        return refuse("is writable by other users");
    }
    host::chmod(&dir, mode)?;
    Ok(dir)
}

/// Creates what a run needs before a worker starts (idempotent: later
/// attempts find it in place). Returns the paths.
///
/// Eagle (often root) creates the worker's `work` and `home` once, inside
/// its own run directory, before any worker can reach them, and never
/// touches what is inside them afterwards: a worker could have put a
/// symlink there. What goes inside them (the rules files, `.git/info/exclude`,
/// `home/.claude`) the worker shim writes, as the worker's own user.
pub(super) async fn prepare_run(
    shared: &Shared,
    run: &Run,
    task: Option<&Task>,
    repo: Option<&crate::profile::RepoSettings>,
) -> std::io::Result<Prepared> {
    let dir = RunDir::of(shared, run.id);
    let user = shared.worker_user.as_ref();
    for (path, mode) in [(&dir.base, 0o711), (&dir.eagle, 0o755)] {
        std::fs::create_dir_all(path)?;
        refuse_symlink(path)?;
        host::chmod(path, mode)?;
    }
    create_worker_dir(&dir.home, user)?;
    let fresh = create_worker_dir(&dir.work, user)?;
    if fresh && let Some(repo) = repo {
        let branch = run
            .branch_name
            .clone()
            .unwrap_or_else(|| format!("eagle/run-{}", run.id));
        check_out(shared, repo, &dir, &branch)
            .await
            .map_err(std::io::Error::other)?;
    }
    let rules = dir.eagle.join("rules.md");
    std::fs::write(&rules, rules_text(run, task))?;
    host::chmod(&rules, 0o644)?;
    Ok(Prepared { dir, fresh })
}

/// Makes the checkout of `repo` in `dir` on a new `branch` from its base:
/// Eagle's cache fetched first (with Eagle's credential, in Eagle's git
/// only), then cloned from it as the worker's user. `Err` says why not.
pub(super) async fn check_out(
    shared: &Shared,
    repo: &crate::profile::RepoSettings,
    dir: &RunDir,
    branch: &str,
) -> Result<(), String> {
    let user = shared.worker_user.as_ref();
    let auth = GitAuth::of(repo, shared.github_token.as_ref(), &shared.data_dir).await?;
    let (cache, _) =
        crate::executor::repos::cache::refresh(&shared.data_dir, repo, &auth, user).await?;
    drop(auth);
    let checkout = Checkout {
        cache: &cache,
        origin: &repo.url.as_git(),
        branch,
        base: &dir.base,
        work: &dir.work,
        home: &dir.home,
        eagle: &dir.eagle,
        path: &shared.settings.worker_env.path,
    };
    crate::executor::repos::checkout::clone(&checkout, user)
        .await
        .map_err(|e| format!("cannot check {} out: {e}", repo.name))
}

/// A run's directory, ready.
pub(super) struct Prepared {
    pub dir: RunDir,
    /// Its checkout was made just now (its repository's setup is due).
    pub fresh: bool,
}

/// A status line in the run's topic (best effort: a failure is logged).
pub(super) async fn say(shared: &Shared, run: &Run, line: &str) {
    let posted = async {
        let mut tx = shared.store.begin_write().await?;
        shared.poster.post(&mut tx, &run.topic(), line).await?;
        tx.commit().await
    };
    if let Err(error) = posted.await {
        tracing::warn!(%error, run = run.id, "cannot post a run's status");
    }
}

/// A path that is a symlink is refused: Eagle's own directories never are.
fn refuse_symlink(path: &Path) -> std::io::Result<()> {
    if std::fs::symlink_metadata(path)?.file_type().is_symlink() {
        return Err(std::io::Error::other(format!(
            "{} is a symlink: refusing to use it",
            path.display()
        )));
    }
    Ok(())
}

/// Creates one of the worker's directories if it does not exist (returns
/// whether it did), private to the worker's user.
pub(super) fn create_worker_dir(path: &Path, user: Option<&UnixUser>) -> std::io::Result<bool> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => Err(std::io::Error::other(format!(
            "{} is a symlink: refusing to use it",
            path.display()
        ))),
        Ok(_) => Ok(false),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir(path)?;
            host::chmod(path, 0o700)?;
            if let Some(user) = user {
                std::os::unix::fs::lchown(path, Some(user.uid), Some(user.gid))?;
            }
            Ok(true)
        }
        Err(e) => Err(e),
    }
}

/// The run's rules (seed 001's AGENTS.md), for every kind of worker.
fn rules_text(run: &Run, task: Option<&Task>) -> String {
    let task = task.map_or_else(|| run.task_gid.clone(), |t| format!("task #{}", t.id));
    format!(
        "# Rules of run {run} ({task}), from Eagle\n\n\
         Read these before anything else; they hold for the whole run.\n\n\
         1. Inside this directory nothing asks: read, edit, build, test and commit freely. Nothing outside it is yours to change.\n\
         2. You hold no credential and have no network but your model's. What leaves the run goes through Eagle, which carries it out and prints the outcome: \
`git push` (to this run's branch only), `gh pr create --draft --title <t> --body-file <f>`, `gh pr comment --body-file <f>`, `eagle request reply_thread <id> --body-file <f>`. \
A refusal says why: do not look for another way. Exit 3 from any of them: a human decides: print `[STATUS: waiting] <what you asked>` and stop at once; you will be resumed with the answer.\n\
         3. Report with lines of their own: `[STATUS: <phase>] <one line>`, `[DONE: pr_ready] PR <url> <summary>`, `[ESCALATE: <topic>] <question>`.\n\
         4. Never merge. Never post to chat. Never commit AGENTS.md or CLAUDE.md.\n\
         5. Something outside the task: `[ESCALATE: scope_expansion] <what>`, and leave it alone.\n",
        run = run.id
    )
}

/// Claude Code's settings for a worker: only Eagle's PreToolUse hook, with
/// an explicit timeout and `onFailure: block`, so that a hook that fails or
/// times out blocks the tool instead of letting it run.
pub(super) fn claude_settings(shared: &Shared) -> serde_json::Value {
    let timeout = shared.settings.hook_timeout.as_secs().max(10);
    let command = format!(
        "{} hook claude-pretool --timeout {}",
        shell_words::quote(&shared.exe.display().to_string()),
        timeout
    );
    serde_json::json!({
        "hooks": {
            "PreToolUse": [{
                "matcher": "*",
                "hooks": [{
                    "type": "command",
                    "command": command,
                    "timeout": timeout,
                    "onFailure": "block"
                }]
            }]
        }
    })
}

/// What to start.
#[derive(Debug, Clone)]
pub(super) struct Launch {
    pub prompt: String,
    /// Claude Code: the session to start (`--session-id`) or resume (`--resume`).
    pub session: Option<(String, bool)>,
    pub remaining_budget: Option<f64>,
    pub run: i64,
    pub task_id: i64,
    pub attempt: i64,
}

/// The worker's command line: the template with its placeholders filled,
/// plus what the runner adds for Claude Code.
pub(super) fn argv(shared: &Shared, dir: &RunDir, launch: &Launch) -> Vec<String> {
    let values: BTreeMap<&str, String> = [
        ("workdir", dir.work.display().to_string()),
        ("run", launch.run.to_string()),
        ("task", launch.task_id.to_string()),
        ("attempt", launch.attempt.to_string()),
    ]
    .into_iter()
    .collect();
    let mut argv = fill_argv(&shared.command.argv, &values);
    if shared.command.kind == WorkerKind::Claude {
        if let Some((session, resume)) = &launch.session {
            argv.push(if *resume { "--resume" } else { "--session-id" }.into());
            argv.push(session.clone());
        }
        if !argv.iter().any(|a| a == "--output-format") {
            argv.extend(["--output-format", "stream-json", "--verbose"].map(String::from));
        }
        argv.extend([
            "--settings".to_string(),
            dir.eagle.join("settings.json").display().to_string(),
            "--setting-sources".to_string(),
            String::new(),
            "--append-system-prompt-file".to_string(),
            dir.eagle.join("rules.md").display().to_string(),
        ]);
        if let Some(budget) = launch.remaining_budget {
            argv.push("--max-budget-usd".into());
            argv.push(format!("{:.4}", budget.max(0.0001)));
        }
    }
    argv
}

/// A command template's words filled with `values`, without the `{prompt}`
/// word: the prompt is handed over on standard input ([`prompt_input`]),
/// never on the command line, where `/proc/<pid>/cmdline` shows it to every
/// local user. (Validation makes `{prompt}` a word of its own.)
pub(crate) fn fill_argv(template: &[String], values: &BTreeMap<&str, String>) -> Vec<String> {
    template
        .iter()
        .filter(|word| word.as_str() != PROMPT_WORD)
        .map(|word| fill(word, values))
        .collect()
}

/// The template word that stands for the prompt.
const PROMPT_WORD: &str = "{prompt}";

/// The prompt as a standard input nobody else can read: written to
/// `<dir>/<name>` (created afresh, 0600, Eagle's), opened, and unlinked at
/// once, so only the descriptor handed to the child reads it.
pub(crate) fn prompt_input(dir: &Path, name: &str, prompt: &str) -> std::io::Result<File> {
    use std::io::{Seek, Write};
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(name);
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)?;
    std::fs::remove_file(&path)?;
    file.write_all(prompt.as_bytes())?;
    file.rewind()?;
    Ok(file)
}

/// Puts `values` into `{name}` placeholders of one word (unknown ones stay).
pub(crate) fn fill(word: &str, values: &BTreeMap<&str, String>) -> String {
    let mut out = String::with_capacity(word.len());
    let mut rest = word;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        match rest[open..].find('}') {
            Some(close) => {
                let name = &rest[open + 1..open + close];
                match values.get(name) {
                    Some(value) => out.push_str(value),
                    None => out.push_str(&rest[open..=open + close]),
                }
                rest = &rest[open + close + 1..];
            }
            None => {
                out.push_str(&rest[open..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// The worker's whole environment: nothing from Eagle's but what is
/// listed ([`crate::profile::WorkerEnv`]; the model key only as its
/// placeholder when confined), the run's socket and token, and, confined,
/// the files by which it trusts its egress proxy's authority (written
/// beside the run's other files of Eagle).
pub(super) fn environment(
    shared: &Shared,
    dir: &RunDir,
    run: i64,
    socket: &Path,
    token: &str,
) -> std::io::Result<BTreeMap<String, String>> {
    let worker_env = &shared.settings.worker_env;
    let user = shared
        .worker_user
        .as_ref()
        .map(|u| u.name.as_str())
        .or(worker_env.user.as_deref())
        .unwrap_or("worker");
    let mut env = crate::executor::child_env::child_env(
        worker_env,
        &shared.exe,
        &dir.home,
        Some(user),
        shared.command.kind,
    );
    env.insert(ENV_RUN.into(), run.to_string());
    env.insert(ENV_SOCKET.into(), socket.display().to_string());
    env.insert(ENV_TOKEN.into(), token.to_string());
    if let Some(interception) = &shared.interception {
        env.extend(super::interception::trust_files(interception, &dir.eagle)?);
    }
    Ok(env)
}

/// A started worker.
#[derive(Debug)]
pub(super) struct Started {
    pub child: tokio::process::Child,
    pub pid: i32,
    pub start_ticks: u64,
}

/// The work log's path for a task and kind: `<logs>/<task>/<kind>_<time>.md`.
pub(super) fn log_path(shared: &Shared, task_gid: &str, kind: PromptKind) -> PathBuf {
    let safe: String = task_gid
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(80)
        .collect();
    let stamp = chrono::Utc::now().format("%Y-%m-%d-%H-%M-%S%.3f");
    shared
        .logs_dir
        .join(if safe.is_empty() { "task".into() } else { safe })
        .join(format!("{}_{stamp}.md", kind.as_str()))
}

/// Starts the worker through the shim: a new session (its own process
/// group), the run's working directory, the given environment only, the
/// worker user, the prompt on stdin ([`prompt_input`]), stdout and stderr
/// into the work log, and the exit file on descriptor 3.
#[allow(clippy::too_many_arguments)]
pub(super) fn start(
    shared: &Shared,
    argv: &[String],
    rules: &Path,
    env: &BTreeMap<String, String>,
    workdir: &Path,
    log: &Path,
    exit_file: &Path,
    shim_deadline: std::time::Duration,
    sandbox: Option<&Path>,
    prompt: File,
) -> std::io::Result<Started> {
    if let Some(parent) = log.parent() {
        std::fs::create_dir_all(parent)?;
        host::chmod(parent, 0o700)?;
    }
    let log_file = OpenOptions::new().create(true).append(true).open(log)?;
    let log_err = log_file.try_clone()?;
    let exit = File::create(exit_file)?;
    let exit_fd = exit.as_raw_fd();
    let mut command = tokio::process::Command::new(&shared.exe);
    command
        .arg("worker-shim")
        .arg("--deadline")
        .arg(shim_deadline.as_secs().to_string())
        .arg("--rules")
        .arg(rules);
    if let Some(spec) = sandbox {
        command.arg("--sandbox").arg(spec);
    }
    command
        .arg("--")
        .args(argv)
        .env_clear()
        .envs(env)
        .current_dir(workdir)
        .stdin(Stdio::from(prompt))
        .stdout(Stdio::from(log_file))
        .stderr(Stdio::from(log_err))
        .kill_on_drop(false);
    host::own_session(&mut command, shared.worker_user.as_ref(), exit_fd);
    let child = command.spawn()?;
    drop(exit);
    let pid = child
        .id()
        .ok_or_else(|| std::io::Error::other("the worker exited before it could be watched"))?
        as i32;
    let start_ticks = host::start_ticks(pid).unwrap_or(0);
    Ok(Started {
        child,
        pid,
        start_ticks,
    })
}

/// Writes the sandbox spec of one attempt beside the run's other files of
/// Eagle (the worker may read it, not change it): its working directory
/// and HOME writable, the run's files of Eagle readable, its request
/// socket and egress socket bridged. `None` when workers run unconfined.
pub(super) fn sandbox_spec(
    shared: &Shared,
    dir: &RunDir,
    socket: &Path,
    attempt: i64,
    repo: Option<&crate::profile::RepoSettings>,
) -> std::io::Result<Option<PathBuf>> {
    let Some(confinement) = &shared.sandbox else {
        return Ok(None);
    };
    // The checkout borrows the objects of Eagle's cache of its repository.
    let mut read = vec![dir.eagle.clone()];
    if let Some(repo) = repo {
        read.push(crate::executor::repos::cache_path(&shared.data_dir, &repo.name).join("objects"));
    }
    let spec = confinement.spec(
        vec![dir.work.clone(), dir.home.clone()],
        read,
        &[],
        Some(socket.to_path_buf()),
        Some(egress_socket_path(socket)),
    );
    let path = dir.eagle.join(format!("sandbox-{attempt}.json"));
    spec.write_to(&path)?;
    Ok(Some(path))
}

/// A fresh secret for one attempt: 32 bytes from the kernel's CSPRNG, hex.
/// No weaker source stands in: without the kernel's randomness the worker
/// does not start.
pub(super) fn new_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|error| {
        std::io::Error::other(format!(
            "cannot draw a run token from the kernel's random source: {error}"
        ))
    })?;
    Ok(crate::ground::text::hex(&bytes))
}

/// A random version-4 UUID (Claude Code's session ids).
pub(super) fn new_uuid() -> std::io::Result<String> {
    let hex = new_token()?;
    let mut chars: Vec<char> = hex[..32].chars().collect();
    chars[12] = '4';
    chars[16] = ['8', '9', 'a', 'b'][usize::from(hex.as_bytes()[40] % 4)];
    let s: String = chars.into_iter().collect();
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &s[..8],
        &s[8..12],
        &s[12..16],
        &s[16..20],
        &s[20..32]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_fill_within_words() {
        let values: BTreeMap<&str, String> =
            [("prompt", "do {it}".to_string()), ("run", "4".into())]
                .into_iter()
                .collect();
        assert_eq!(fill("{prompt}", &values), "do {it}");
        assert_eq!(fill("--run={run}", &values), "--run=4");
        assert_eq!(fill("{unknown}x", &values), "{unknown}x");
        assert_eq!(fill("a{b", &values), "a{b");
    }

    #[test]
    fn the_short_socket_directory_is_eagles_own_or_refused() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let parent = tempfile::tempdir().unwrap();
        let made = private_dir(parent.path(), "fresh", 0o700).unwrap();
        let meta = std::fs::symlink_metadata(&made).unwrap();
        assert!(meta.is_dir());
        assert_eq!(meta.uid(), host::euid());
        assert_eq!(meta.permissions().mode() & 0o777, 0o700);
        // Found again: still fine.
        assert_eq!(private_dir(parent.path(), "fresh", 0o711).unwrap(), made);

        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), parent.path().join("planted")).unwrap();
        let error = private_dir(parent.path(), "planted", 0o700).unwrap_err();
        assert!(error.to_string().contains("is not a directory"), "{error}");

        let open = parent.path().join("open");
        std::fs::create_dir(&open).unwrap();
        host::chmod(&open, 0o777).unwrap();
        let error = private_dir(parent.path(), "open", 0o700).unwrap_err();
        assert!(
            error.to_string().contains("writable by other users"),
            "{error}"
        );

        if host::euid() == 0 {
            let theirs = parent.path().join("theirs");
            std::fs::create_dir(&theirs).unwrap();
            std::os::unix::fs::lchown(&theirs, Some(65534), Some(65534)).unwrap();
            let error = private_dir(parent.path(), "theirs", 0o700).unwrap_err();
            assert!(error.to_string().contains("another user"), "{error}");
        }
    }

    #[test]
    fn the_egress_socket_sits_beside_the_request_socket() {
        let path = egress_socket_path(Path::new("/runs/7/eagle/sock-2"));
        assert_eq!(path, Path::new("/runs/7/eagle/sock-2.egress"));
    }

    #[test]
    fn tokens_and_uuids_look_right() {
        let token = new_token().unwrap();
        assert_eq!(token.len(), 64);
        assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(token, new_token().unwrap());
        let uuid = new_uuid().unwrap();
        assert_eq!(uuid.len(), 36);
        assert_eq!(&uuid[14..15], "4");
    }
}
