//! A run's checkout, made from Eagle's cache of its repository in
//! seconds: `git clone --shared` as the worker's user (the cache's objects
//! are borrowed, nothing is copied), `origin` the plain URL, the run's
//! branch checked out.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Stdio;

use crate::ground::host::{self, UnixUser};

/// What a run's checkout is made from.
pub struct Checkout<'a> {
    /// Eagle's bare cache of the repository (its objects are borrowed).
    pub cache: &'a Path,
    /// The repository's plain URL, the checkout's `origin`.
    pub origin: &'a str,
    pub branch: &'a str,
    /// The run's directory (the clone's parent), its working directory
    /// (empty), the worker's HOME, Eagle's files of the run.
    pub base: &'a Path,
    pub work: &'a Path,
    pub home: &'a Path,
    pub eagle: &'a Path,
    /// The worker's `PATH`.
    pub path: &'a str,
}

/// Clones Eagle's cache of the run's repository into the fresh, empty
/// working directory, as the worker's user, borrowing the cache's objects
/// (`--shared`: nothing is copied), with nothing of Eagle's environment and
/// no git configuration or hooks but git's own; points `origin` at the
/// repository's plain URL and checks out the run's branch (the remote's if
/// it has one, else a new one from the base) with `origin` as its
/// upstream, so that a plain `git push` means "this run's branch" (Eagle
/// pushes nothing else).
pub async fn clone(checkout: &Checkout<'_>, user: Option<&UnixUser>) -> std::io::Result<()> {
    let (repo, branch) = (checkout.cache, checkout.branch);
    // The repository is usually another user's (Eagle's, the operator's):
    // a global configuration of Eagle's, naming only it as safe, lets the
    // worker's user clone it without git calling it dubious (`-c
    // safe.directory` does not reach the local upload-pack).
    // (A bare repository is checked at its path, another at its `.git`.)
    let global = checkout.eagle.join("clone.gitconfig");
    let _ = std::fs::remove_file(&global);
    for safe in [repo.to_path_buf(), repo.join(".git")] {
        let wrote = tokio::process::Command::new("git")
            .args(["config", "--file"])
            .arg(&global)
            .args(["--add", "safe.directory"])
            .arg(&safe)
            .env_clear()
            .env("PATH", checkout.path)
            .stdin(Stdio::null())
            .output()
            .await?;
        if !wrote.status.success() {
            return Err(std::io::Error::other(format!(
                "cannot write {}: {}",
                global.display(),
                String::from_utf8_lossy(&wrote.stderr).trim()
            )));
        }
    }
    host::chmod(&global, 0o644)?;
    let git = |cwd: &Path, args: &[&OsStr]| {
        let mut git = tokio::process::Command::new("git");
        // Files are written by as many workers as there are cores: a large
        // checkout is the kernel's work of creating them.
        git.args(["-c", "core.hooksPath=/dev/null", "-c", "checkout.workers=0"])
            .args(args)
            .env_clear()
            .env("PATH", checkout.path)
            .env("HOME", checkout.home)
            .env("GIT_CONFIG_GLOBAL", &global)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(user) = user {
            git.uid(user.uid).gid(user.gid);
        }
        git.output()
    };
    let failed = |what: String, out: &std::process::Output| {
        std::io::Error::other(format!(
            "{what} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    };
    let out = git(
        checkout.base,
        &[
            OsStr::new("clone"),
            OsStr::new("--quiet"),
            OsStr::new("--shared"),
            OsStr::new("--template="),
            // Pushes go through Eagle (`git-remote-eagle`, on the worker's PATH).
            OsStr::new("--config"),
            OsStr::new("remote.origin.pushurl=eagle::origin"),
            repo.as_os_str(),
            checkout.work.as_os_str(),
        ],
    )
    .await?;
    if !out.status.success() {
        return Err(failed(format!("git clone {}", repo.display()), &out));
    }
    let out = git(
        checkout.work,
        &[
            OsStr::new("remote"),
            OsStr::new("set-url"),
            OsStr::new("origin"),
            OsStr::new(checkout.origin),
        ],
    )
    .await?;
    if !out.status.success() {
        return Err(failed("git remote set-url origin".into(), &out));
    }
    let remote_branch = format!("refs/remotes/origin/{branch}");
    let has_remote = git(
        checkout.work,
        &[
            OsStr::new("rev-parse"),
            OsStr::new("--verify"),
            OsStr::new("--quiet"),
            OsStr::new(&remote_branch),
        ],
    )
    .await?
    .status
    .success();
    let mut args: Vec<&OsStr> = vec![OsStr::new("checkout"), OsStr::new("--quiet")];
    args.extend([OsStr::new("-B"), OsStr::new(branch)]);
    if has_remote {
        args.push(OsStr::new(&remote_branch));
    }
    let upstream = [
        (format!("branch.{branch}.remote"), "origin".to_string()),
        (
            format!("branch.{branch}.merge"),
            format!("refs/heads/{branch}"),
        ),
    ];
    let out = git(checkout.work, &args).await?;
    if !out.status.success() {
        return Err(failed(format!("git checkout -B {branch}"), &out));
    }
    for (key, value) in &upstream {
        let out = git(
            checkout.work,
            &[OsStr::new("config"), OsStr::new(key), OsStr::new(value)],
        )
        .await?;
        if !out.status.success() {
            return Err(failed(format!("git config {key}"), &out));
        }
    }
    Ok(())
}
