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
pub mod checkout;
pub mod git;

use std::path::{Path, PathBuf};

use crate::ground::repo::Repo;
use crate::profile::{DEFAULT_REPO, RepoSettings};
use crate::store::{AnnouncedRepo, Run, Store, Task};

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

/// What the repositories announce (the executor and time are the store's).
pub fn announced(repos: &[RepoSettings]) -> Vec<AnnouncedRepo> {
    repos
        .iter()
        .map(|r| AnnouncedRepo {
            name: r.name.clone(),
            url: r.url.as_git(),
            github: r.github.as_ref().map(ToString::to_string),
            base: r.base.clone(),
            executor: String::new(),
            announced_at: chrono::Utc::now(),
        })
        .collect()
}

/// Where a run's PR is on GitHub, and the branch it goes into: the
/// repository of the run's PR when Eagle recorded one (it must be
/// `github.repo` or one an executor announced: a worker's line never makes
/// Eagle act elsewhere), else its task's repository as announced, else
/// `github.repo` and `github.base`. `Err` says why none.
pub async fn github_of_run(
    store: &Store,
    default: (&Repo, &str),
    run: &Run,
) -> Result<(Repo, String), String> {
    let announced = store.repos().list().await.map_err(|e| e.to_string())?;
    let github = |a: &AnnouncedRepo| a.github.as_deref().and_then(|g| g.parse::<Repo>().ok());
    if let Some(named) = run.pr_repo.as_deref() {
        if default.0.is_named(named) {
            return Ok((default.0.clone(), default.1.to_string()));
        }
        return announced
            .iter()
            .find_map(|a| github(a).filter(|g| g.is_named(named)).map(|g| (g, a.base.clone())))
            .ok_or_else(|| {
                format!(
                    "its PR is in {}, not in github.repo {} nor in a repository an executor announced",
                    crate::ground::text::one_line(named, 100),
                    default.0
                )
            });
    }
    let task = {
        let mut tx = store.begin_read().await.map_err(|e| e.to_string())?;
        tx.tasks()
            .task_by_gid(&run.task_gid)
            .await
            .map_err(|e| e.to_string())?
    };
    match task.as_ref().and_then(|t| t.repo.as_deref()) {
        None => Ok((default.0.clone(), default.1.to_string())),
        Some(name) => match announced.iter().find(|a| a.name == name) {
            Some(a) => match github(a) {
                Some(g) => Ok((g, a.base.clone())),
                // `runner.repo` is github.repo's; another repository without
                // one has no PRs on GitHub (its branches are not there).
                None if name == DEFAULT_REPO => Ok((default.0.clone(), a.base.clone())),
                None => Err(format!(
                    "the run's repository {name} names no GitHub repository \
                     (its [[runner.repos]] entry may give github = \"owner/name\")"
                )),
            },
            None => Err(format!(
                "the run's task belongs to repository {name}, which no executor announced"
            )),
        },
    }
}

/// The name a task without one means, for messages.
pub fn shown_name(task: Option<&Task>) -> &str {
    task.and_then(|t| t.repo.as_deref()).unwrap_or(DEFAULT_REPO)
}
