//! The bare cache of a repository under Eagle's data directory: made once,
//! fetched (never cloned again) when a run starts, with Eagle's own
//! credential. Runs' checkouts borrow its objects (`git clone --shared`),
//! so a run's start costs a fetch and a checkout, not a clone of the whole
//! history. Its objects are readable by the workers' group and writable by
//! Eagle only; nothing prunes them (`gc.auto = 0`), so a checkout never
//! loses an object it borrows.

use std::os::fd::AsRawFd as _;
use std::path::{Path, PathBuf};

use super::git::{self, GitAuth};
use crate::ground::host::{self, UnixUser};
use crate::profile::RepoSettings;

/// How the cache was brought up to date.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refreshed {
    /// It did not exist: the whole history was fetched (a cold start).
    Created,
    /// It existed: only what is new was fetched.
    Fetched,
}

/// Makes the cache of `repo` if needed and fetches it; returns its path.
/// One fetch per repository at a time (a lock file beside it, which also
/// holds between executors sharing the data directory).
pub async fn refresh(
    data_dir: &Path,
    repo: &RepoSettings,
    auth: &GitAuth,
    worker: Option<&UnixUser>,
) -> Result<(PathBuf, Refreshed), String> {
    let dir = super::repos_dir(data_dir);
    passable(data_dir, &dir, worker.is_some())?;
    let path = super::cache_path(data_dir, &repo.name);
    let _lock = lock(&dir.join(format!("{}.lock", repo.name))).await?;
    let created = if path.join("objects").is_dir() {
        Refreshed::Fetched
    } else {
        create(&path, repo, worker).await?;
        Refreshed::Created
    };
    // The URL and refspec are Eagle's (the profile may have changed since).
    let url = repo.url.as_git();
    let none = GitAuth::default();
    git::run(&path, &["config", "remote.origin.url", &url], &none).await?;
    git::run(
        &path,
        &["fetch", "--quiet", "--prune", "--no-tags", "origin"],
        auth,
    )
    .await
    .map_err(|e| format!("cannot fetch {} into Eagle's cache: {e}", repo.name))?;
    // Clones check out the base unless told otherwise.
    let base = format!("refs/heads/{}", repo.base);
    git::run(&path, &["symbolic-ref", "HEAD", &base], &none).await?;
    Ok((path, created))
}

/// A bare repository of Eagle's, shared with the workers' group.
async fn create(path: &Path, repo: &RepoSettings, worker: Option<&UnixUser>) -> Result<(), String> {
    let _ = std::fs::remove_dir_all(path);
    let parent = path.parent().unwrap_or(Path::new("/"));
    let shown = path.display().to_string();
    let none = GitAuth::default();
    // Readable by the group only when workers run as a user of their own.
    let shared = if worker.is_some() { "0640" } else { "0600" };
    git::run(
        parent,
        &[
            "init",
            "--quiet",
            "--bare",
            "--template=",
            &format!("--shared={shared}"),
            "--",
            &shown,
        ],
        &none,
    )
    .await
    .map_err(|e| format!("cannot create Eagle's cache of {}: {e}", repo.name))?;
    for (key, value) in [
        ("gc.auto", "0"),
        ("remote.origin.url", repo.url.as_git().as_str()),
        ("remote.origin.fetch", "+refs/heads/*:refs/heads/*"),
    ] {
        git::run(path, &["config", key, value], &none).await?;
    }
    if let Some(user) = worker {
        give_group(path, user.gid).map_err(|e| format!("cannot share {shown}: {e}"))?;
    }
    Ok(())
}

/// Hands every directory and file of the new cache to `gid`, directories
/// set-group-id (so what git adds later belongs to it too).
fn give_group(path: &Path, gid: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let mut stack = vec![path.to_path_buf()];
    while let Some(p) = stack.pop() {
        let meta = std::fs::symlink_metadata(&p)?;
        std::os::unix::fs::lchown(&p, None, Some(gid))?;
        if meta.is_dir() {
            host::chmod(&p, 0o2750)?;
            for entry in std::fs::read_dir(&p)? {
                stack.push(entry?.path());
            }
        } else if meta.is_file() {
            let mode = meta.permissions().mode() & 0o7777;
            host::chmod(&p, (mode | 0o040) & !0o007)?;
        }
    }
    Ok(())
}

/// The workers' user may pass through Eagle's directories down to the
/// caches (never list them).
fn passable(data_dir: &Path, dir: &Path, other_user: bool) -> Result<(), String> {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    if !other_user {
        return Ok(());
    }
    for d in [data_dir, dir] {
        let meta = std::fs::metadata(d).map_err(|e| format!("cannot read {}: {e}", d.display()))?;
        if meta.uid() == host::euid() {
            host::chmod(d, (meta.permissions().mode() & 0o7777) | 0o011)
                .map_err(|e| format!("cannot open {} to workers: {e}", d.display()))?;
        }
    }
    Ok(())
}

/// An exclusive lock on `path`, held until the guard drops.
async fn lock(path: &Path) -> Result<std::fs::File, String> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let shown = path.display().to_string();
    tokio::task::spawn_blocking(move || {
        // SAFETY: flock(2) on a descriptor this closure owns.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
        if rc == 0 {
            Ok(file)
        } else {
            Err(format!(
                "cannot lock {shown}: {}",
                std::io::Error::last_os_error()
            ))
        }
    })
    .await
    .map_err(|e| format!("cannot lock {}: {e}", path.display()))?
}
