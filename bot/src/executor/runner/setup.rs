//! A repository's setup phase: its `setup` command, run in the run's fresh
//! checkout before the agent, confined like a worker (the worker's user,
//! the sandbox), but with `setup_allow_hosts` as its only network (the
//! package registries), and with no model key and no credential in its
//! environment. What it leaves at the repository's `cache` paths is kept
//! per cache key (a hash of the setup command and the `cache_key` files)
//! and copied into later runs' checkouts without running it again; a
//! change of a lock file makes a new key. The agent that follows keeps its
//! own network (the model API only), so it works offline with what the
//! setup installed, and nothing it does can upload anywhere.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sha2::Digest as _;

use super::Shared;
use super::spawn::{self, RunDir};
use crate::ground::host;
use crate::profile::RepoSettings;

/// How the setup phase went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetupOutcome {
    /// It ran and succeeded; its caches are kept under this key.
    Ran { key: String },
    /// Its caches for this key were copied in; it did not run.
    Cached { key: String },
}

impl SetupOutcome {
    /// What `!status run N` and the run's topic say.
    pub fn describe(&self) -> String {
        match self {
            SetupOutcome::Ran { key } => format!("ran (cache {})", short(key)),
            SetupOutcome::Cached { key } => {
                format!("cached (cache {}: the setup did not run)", short(key))
            }
        }
    }
}

/// Runs (or restores) the setup of the run's repository in its fresh
/// checkout, records the outcome on the run and says it in the run's
/// topic. `Err` says why it failed (the checkout is removed: the next
/// attempt starts from a fresh one).
pub(super) async fn before_the_agent(
    shared: &Shared,
    repo: &RepoSettings,
    dir: &RunDir,
    run: &crate::store::Run,
) -> Result<(), String> {
    let result = prepare(shared, repo, dir, Some(run.id), false).await;
    let outcome = match &result {
        Ok(Some(done)) => done.describe(),
        Ok(None) => return Ok(()),
        Err(why) => format!("failed: {why}"),
    };
    if let Err(error) = shared
        .store
        .repos()
        .set_setup_outcome(run.id, &outcome)
        .await
    {
        tracing::warn!(%error, run = run.id, "cannot record the setup's outcome");
    }
    match result {
        Ok(_) => {
            spawn::say(
                shared,
                run,
                &format!("[STATUS: setup] run:{} {}: {outcome}", run.id, repo.name),
            )
            .await;
            Ok(())
        }
        Err(why) => {
            let _ = std::fs::remove_dir_all(&dir.work);
            Err(why)
        }
    }
}

/// Where the caches of a repository's setups are kept.
pub fn env_dir(data_dir: &Path, repo: &str) -> PathBuf {
    crate::executor::repos::repos_dir(data_dir).join(format!("{repo}.env"))
}

/// The cache key of `repo` in `checkout`: the setup command and the
/// content of each `cache_key` file (a missing one counts as missing).
pub fn cache_key(repo: &RepoSettings, checkout: &Path) -> String {
    let mut hash = sha2::Sha256::new();
    hash.update(repo.setup.as_deref().unwrap_or_default().as_bytes());
    hash.update([0]);
    for file in &repo.cache_key {
        hash.update(file.as_bytes());
        hash.update([0]);
        // Read without following a link the checkout may hold.
        let path = checkout.join(file);
        let plain = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_file());
        match plain.then(|| std::fs::read(&path)).transpose() {
            Ok(Some(bytes)) => {
                hash.update(b"file");
                hash.update((bytes.len() as u64).to_le_bytes());
                hash.update(&bytes);
            }
            _ => hash.update(b"missing"),
        }
    }
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// `eagle repo setup NAME`: runs the setup of `repo` now, in a fresh
/// checkout of its base branch made as a run's would be (from Eagle's
/// cache, fetched first), confined as a run's, and keeps its caches under
/// the current key, so that the next run starts without running it. A
/// setup already kept for that key is not run again unless `force`. The
/// checkout is removed afterwards; `Err` says why it failed (the log's
/// tail).
pub async fn ahead(
    shared: &Shared,
    repo: &RepoSettings,
    force: bool,
) -> Result<Option<SetupOutcome>, String> {
    if repo.setup.is_none() {
        return Ok(None);
    }
    let base = shared.runs_dir.join(format!("setup-{}", repo.name));
    let dir = RunDir {
        work: base.join("work"),
        home: base.join("home"),
        eagle: base.join("eagle"),
        base,
    };
    let result = async {
        let io = |what: &str, e: std::io::Error| {
            format!(
                "cannot prepare {} for the setup: {what}: {e}",
                dir.base.display()
            )
        };
        spawn::prepare_dirs(shared).map_err(|e| io("the runs directory", e))?;
        // What an earlier, interrupted setup left goes first (a directory
        // of Eagle's: removing it follows no link).
        if std::fs::symlink_metadata(&dir.base).is_ok() {
            std::fs::remove_dir_all(&dir.base).map_err(|e| io("removing the last one", e))?;
        }
        for (path, mode) in [(&dir.base, 0o711), (&dir.eagle, 0o755)] {
            std::fs::create_dir_all(path).map_err(|e| io("creating it", e))?;
            host::chmod(path, mode).map_err(|e| io("its mode", e))?;
        }
        let user = shared.worker_user.as_ref();
        spawn::create_worker_dir(&dir.home, user).map_err(|e| io("its home", e))?;
        spawn::create_worker_dir(&dir.work, user).map_err(|e| io("its checkout", e))?;
        spawn::check_out(shared, repo, &dir, &format!("eagle/setup-{}", repo.name)).await?;
        std::fs::write(dir.eagle.join("rules.md"), "").map_err(|e| io("the rules file", e))?;
        prepare(shared, repo, &dir, None, force).await
    }
    .await;
    let _ = std::fs::remove_dir_all(&dir.base);
    result
}

/// Runs the setup of `repo` in the run's fresh checkout (`run`; `None`:
/// ahead of any run), or copies in the caches a setup with the same key
/// left, unless `force`. `Err` holds what to tell the run's owner (the
/// log's tail).
async fn prepare(
    shared: &Shared,
    repo: &RepoSettings,
    dir: &RunDir,
    run: Option<i64>,
    force: bool,
) -> Result<Option<SetupOutcome>, String> {
    let Some(command) = &repo.setup else {
        return Ok(None);
    };
    let key = cache_key(repo, &dir.work);
    let kept = env_dir(&shared.data_dir, &repo.name).join(&key);
    if kept.join(COMPLETE).is_file() && !force {
        if run.is_none() {
            return Ok(Some(SetupOutcome::Cached { key }));
        }
        restore(shared, &kept, &dir.work, &repo.cache).await?;
        return Ok(Some(SetupOutcome::Cached { key }));
    }
    run_confined(shared, repo, command, dir, run).await?;
    save(shared, &dir.work, &kept, &repo.cache).await?;
    Ok(Some(SetupOutcome::Ran { key }))
}

/// Marks a cache whose every path was copied.
const COMPLETE: &str = ".complete";

async fn run_confined(
    shared: &Shared,
    repo: &RepoSettings,
    command: &str,
    dir: &RunDir,
    run: Option<i64>,
) -> Result<(), String> {
    let io = |e: std::io::Error| format!("the setup could not start: {e}");
    // Beside the work logs, which only Eagle opens (the setup writes to it
    // through the descriptor it inherits).
    let log = shared.logs_dir.join("setup").join(match run {
        Some(run) => format!("run-{run}.log"),
        None => format!("{}.log", repo.name),
    });
    let _ = std::fs::remove_file(&log);
    let exit_file = dir.eagle.join("setup.exit");
    // No model key, no credential: only what a shell needs.
    let user = shared.worker_user.as_ref();
    let mut env = BTreeMap::new();
    env.insert("PATH".to_string(), shared.settings.worker_env.path.clone());
    env.insert("HOME".to_string(), dir.home.display().to_string());
    env.insert(
        "TMPDIR".to_string(),
        dir.home.join("tmp").display().to_string(),
    );
    if let Some(user) = user {
        env.insert("USER".to_string(), user.name.clone());
        env.insert("LOGNAME".to_string(), user.name.clone());
    }
    // Served while the setup runs; stopped when this returns.
    let mut _egress = None;
    let mut sandbox = None;
    if let Some(confinement) = &shared.sandbox {
        let socket = dir.eagle.join("setup.egress");
        let _ = std::fs::remove_file(&socket);
        let listener = crate::confine::egress::bind(&socket, user).map_err(io)?;
        _egress = Some(listener.serve(crate::confine::egress::Egress {
            client: match run {
                Some(run) => crate::confine::egress::Client::Run(run),
                None => crate::confine::egress::Client::SetupAhead,
            },
            store: shared.store.clone(),
            allow: Arc::new(repo.setup_allow_hosts.clone()),
            limits: crate::confine::egress::EgressLimits::default(),
            // The setup reads hosts limited to some methods; it has no model key.
            interception: shared.interception.clone(),
            model: None,
        }));
        let cache_objects =
            crate::executor::repos::cache_path(&shared.data_dir, &repo.name).join("objects");
        let spec = confinement.spec(
            vec![dir.work.clone(), dir.home.clone()],
            vec![dir.eagle.clone(), cache_objects],
            &[],
            None,
            Some(socket),
        );
        let path = dir.eagle.join("sandbox-setup.json");
        spec.write_to(&path).map_err(io)?;
        sandbox = Some(path);
    }
    let argv = ["/bin/sh".to_string(), "-c".to_string(), command.to_string()];
    let started = spawn::start(
        shared,
        &argv,
        &dir.eagle.join("rules.md"),
        &env,
        &dir.work,
        &log,
        &exit_file,
        repo.setup_timeout + Duration::from_secs(30),
        sandbox.as_deref(),
        spawn::prompt_input(&dir.eagle, "setup-input", "").map_err(io)?,
    )
    .map_err(io)?;
    let mut child = started.child;
    let pgid = started.pid;
    let waited = tokio::time::timeout(repo.setup_timeout, child.wait()).await;
    let status = match waited {
        Ok(status) => status.map_err(io)?,
        Err(_) => {
            let _ = host::signal_group(pgid, libc::SIGKILL);
            let _ = child.wait().await;
            return Err(format!(
                "the setup ran past its limit of {} and was stopped{}",
                humantime::format_duration(repo.setup_timeout),
                tail(&log)
            ));
        }
    };
    // Nothing the setup started outlives it.
    let _ = host::signal_group(pgid, libc::SIGKILL);
    let recorded = std::fs::read_to_string(&exit_file).unwrap_or_default();
    match recorded.split_whitespace().collect::<Vec<_>>().as_slice() {
        ["exit", "0"] => Ok(()),
        ["exit", code] => Err(format!("the setup exited with {code}{}", tail(&log))),
        ["signal", n] => Err(format!("the setup was killed by signal {n}{}", tail(&log))),
        _ if status.success() => Ok(()),
        _ => Err(format!("the setup failed ({status}){}", tail(&log))),
    }
}

/// Copies the setup's cache paths out of the checkout into Eagle's keeping
/// (owned by Eagle, readable by the workers' group), then marks it complete.
async fn save(
    shared: &Shared,
    checkout: &Path,
    kept: &Path,
    paths: &[String],
) -> Result<(), String> {
    let fail = |e: String| format!("the setup ran, but its caches could not be kept: {e}");
    let parent = kept.parent().unwrap_or(kept);
    std::fs::create_dir_all(parent).map_err(|e| fail(e.to_string()))?;
    let staging = parent.join(format!(".staging-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir(&staging).map_err(|e| fail(e.to_string()))?;
    for path in paths {
        let from = checkout.join(path);
        if std::fs::symlink_metadata(&from).is_err() {
            continue;
        }
        if !plain_parents(checkout, path) {
            return Err(fail(format!(
                "{path} lies under a symbolic link in the checkout: Eagle keeps only what is inside it"
            )));
        }
        let to = staging.join(path);
        if let Some(p) = to.parent() {
            std::fs::create_dir_all(p).map_err(|e| fail(e.to_string()))?;
        }
        // Links are copied as links (never followed): what the setup made
        // cannot make Eagle read elsewhere.
        copy(&from, &to, None, &["--no-preserve=ownership"])
            .await
            .map_err(fail)?;
    }
    if let Some(user) = shared.worker_user.as_ref() {
        // Readable by the workers' group, by nobody else.
        tool("chmod", &["-R", "g+rX,o-rwx"], &staging)
            .await
            .map_err(fail)?;
        tool("chgrp", &["-R", "-h", &user.gid.to_string()], &staging)
            .await
            .map_err(fail)?;
        host::chmod(parent, 0o711).map_err(|e| fail(e.to_string()))?;
    }
    std::fs::write(staging.join(COMPLETE), b"").map_err(|e| fail(e.to_string()))?;
    let _ = std::fs::remove_dir_all(kept);
    std::fs::rename(&staging, kept).map_err(|e| fail(e.to_string()))
}

/// Runs a coreutils `program` with `args` and `path`; `Err` is its complaint.
async fn tool(program: &str, args: &[&str], path: &Path) -> Result<(), String> {
    let out = tokio::process::Command::new(program)
        .args(args)
        .arg(path)
        .output()
        .await
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// Copies a kept cache into a fresh checkout, as the worker's user (what
/// it copies is then the worker's own).
async fn restore(
    shared: &Shared,
    kept: &Path,
    checkout: &Path,
    paths: &[String],
) -> Result<(), String> {
    let fail = |e: String| format!("the setup's cache could not be copied in: {e}");
    for path in paths {
        let from = kept.join(path);
        if std::fs::symlink_metadata(&from).is_err() {
            continue;
        }
        let to = checkout.join(path);
        copy(
            &from,
            &to,
            shared.worker_user.as_ref(),
            &["--no-preserve=ownership"],
        )
        .await
        .map_err(fail)?;
    }
    Ok(())
}

/// Whether every directory between `root` and `root/path` is a real
/// directory, not a link (which would make Eagle copy from elsewhere).
fn plain_parents(root: &Path, path: &str) -> bool {
    let mut at = root.to_path_buf();
    let parts: Vec<&str> = path.split('/').collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        at.push(part);
        if !std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_dir()) {
            return false;
        }
    }
    true
}

/// `cp -a` (links as links, copy-on-write where the filesystem can), as
/// `user` when given; parents of `to` are made as that user too.
async fn copy(
    from: &Path,
    to: &Path,
    user: Option<&host::UnixUser>,
    extra: &[&str],
) -> Result<(), String> {
    if let Some(parent) = to.parent() {
        let mut mkdir = tokio::process::Command::new("mkdir");
        mkdir.arg("-p").arg(parent).env_clear();
        if let Some(user) = user {
            mkdir.uid(user.uid).gid(user.gid);
        }
        let out = mkdir.output().await.map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
        }
    }
    let mut cp = tokio::process::Command::new("cp");
    cp.args(["-a", "-T", "--reflink=auto"])
        .args(extra)
        .arg("--")
        .arg(from)
        .arg(to)
        .env_clear()
        .env("PATH", "/usr/bin:/bin");
    if let Some(user) = user {
        cp.uid(user.uid).gid(user.gid);
    }
    let out = cp.output().await.map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(crate::ground::text::one_line(
            String::from_utf8_lossy(&out.stderr).trim(),
            300,
        ))
    }
}

/// The end of the setup's log, for the run's topic.
fn tail(log: &Path) -> String {
    let text = std::fs::read(log).unwrap_or_default();
    let start = text.len().saturating_sub(1500);
    let text = String::from_utf8_lossy(&text[start..]);
    let lines: Vec<&str> = text.lines().rev().take(15).collect();
    if lines.is_empty() {
        return String::new();
    }
    let lines: Vec<&str> = lines.into_iter().rev().collect();
    format!("; the end of its log:\n```text\n{}\n```", lines.join("\n"))
}

fn short(key: &str) -> &str {
    key.get(..12).unwrap_or(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_key_follows_the_lock_file_and_the_command() {
        let dir = tempfile::tempdir().unwrap();
        let mut repo = crate::profile::RepoSettings {
            name: "web".into(),
            url: crate::profile::RepoUrl::Local("/srv/web".into()),
            base: "main".into(),
            github: None,
            credential: crate::profile::GitCredential::None,
            setup: Some("npm ci".into()),
            setup_allow_hosts: Vec::new(),
            setup_timeout: Duration::from_secs(60),
            cache: vec!["node_modules".into()],
            cache_key: vec!["package-lock.json".into()],
        };
        let missing = cache_key(&repo, dir.path());
        std::fs::write(dir.path().join("package-lock.json"), "a").unwrap();
        let a = cache_key(&repo, dir.path());
        assert_ne!(missing, a);
        assert_eq!(a, cache_key(&repo, dir.path()));
        std::fs::write(dir.path().join("package-lock.json"), "b").unwrap();
        assert_ne!(a, cache_key(&repo, dir.path()));
        repo.setup = Some("npm install".into());
        assert_ne!(cache_key(&repo, dir.path()), a);
    }
}
