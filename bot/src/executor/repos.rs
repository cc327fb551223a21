//! The repositories runs work in: a bare cache of each under Eagle's data
//! directory, fetched with Eagle's own credentials when a run starts; each
//! run's checkout made from it in seconds (its objects shared read-only);
//! and the repository's setup, run confined before the agent, its caches
//! kept per key.
//!
//! ```text
//! <data dir>/repos/                 Eagle's, 0711
//!   <name>.git/                     the bare cache (group-readable by the worker's group)
//!   <name>.lock                     held while the cache is fetched
//!   <name>.env/<key>/<path>         what the setup left, per cache key
//! ```

pub mod cache;
pub mod git;

use std::path::{Path, PathBuf};

use crate::profile::{DEFAULT_REPO, RepoSettings};
use crate::store::Task;

/// The repository a task belongs to: the one it names, else the first.
/// `Err` says why there is none.
pub fn of_task<'r>(
    repos: &'r [RepoSettings],
    task: Option<&Task>,
) -> Result<Option<&'r RepoSettings>, String> {
    match task.and_then(|t| t.repo.as_deref()) {
        None => Ok(repos.first()),
        Some(name) => repos.iter().find(|r| r.name == name).map(Some).ok_or_else(|| {
            let known: Vec<&str> = repos.iter().map(|r| r.name.as_str()).collect();
            if known.is_empty() {
                format!("the task belongs to repository {name}, and this executor has none configured")
            } else {
                format!(
                    "the task belongs to repository {name}, which this executor does not know (it knows {})",
                    known.join(", ")
                )
            }
        }),
    }
}

/// Where the caches live.
pub fn repos_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("repos")
}

/// The bare cache of repository `name`.
pub fn cache_path(data_dir: &Path, name: &str) -> PathBuf {
    repos_dir(data_dir).join(format!("{name}.git"))
}

/// What the repositories announce: `(name, url, github)`.
pub fn announced(repos: &[RepoSettings]) -> Vec<(String, String, Option<String>)> {
    repos
        .iter()
        .map(|r| {
            (
                r.name.clone(),
                r.url.as_git(),
                r.github.as_ref().map(ToString::to_string),
            )
        })
        .collect()
}

/// The name a task without one means, for messages.
pub fn shown_name(task: Option<&Task>) -> &str {
    task.and_then(|t| t.repo.as_deref()).unwrap_or(DEFAULT_REPO)
}
