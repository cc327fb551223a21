//! `eagle repo`: an executor's repositories (`[[runner.repos]]`) from the
//! command line: `eagle repo setup NAME` runs a repository's setup ahead
//! of its runs.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use crate::daemon::{Context, Setup};
use crate::profile::Profile;
use crate::store::Store;
use crate::transport::offline::Offline;

/// What `eagle repo` does.
#[derive(Debug, Subcommand)]
pub enum RepoCommand {
    /// Run a repository's setup now, in a fresh checkout of its base branch
    /// confined as a run's would be, and keep what it leaves at its `cache`
    /// paths, so that the next run starts without running it. A setup
    /// already kept for the current cache key is not run again.
    Setup {
        /// The executor profile whose `[[runner.repos]]` names it.
        #[arg(long, short = 'p', default_value = "executor", value_name = "NAME")]
        profile: String,
        /// The repository's `name` (`default` for `runner.repo`).
        name: String,
        /// Run it even if a setup is kept for the current cache key (its
        /// caches are replaced when it succeeds).
        #[arg(long)]
        force: bool,
    },
}

/// `eagle repo setup NAME`.
pub(super) async fn setup(
    profile: Profile,
    store: &Store,
    exe: PathBuf,
    name: &str,
    force: bool,
) -> anyhow::Result<ExitCode> {
    let repos = &profile.executor.runner.repos;
    let Some(repo) = repos.iter().find(|r| r.name == name).cloned() else {
        let known: Vec<&str> = repos.iter().map(|r| r.name.as_str()).collect();
        anyhow::bail!(
            "profile {} has no repository named {name:?}; its repositories: {}",
            profile.name,
            if known.is_empty() {
                "none (set [[runner.repos]] or runner.repo)".to_string()
            } else {
                known.join(", ")
            }
        );
    };
    if repo.setup.is_none() {
        println!("Repository {name} has no setup: nothing to run.");
        return Ok(ExitCode::SUCCESS);
    }
    let setup = Setup {
        store: store.clone(),
        exe,
        eagle: None,
        executor: Some(profile),
        demo_worker: true,
    };
    let ctx = Context::build(setup, &mut Offline).await?;
    let runner = ctx.runner()?;
    match crate::executor::runner::setup::ahead(runner.shared(), &repo, force).await {
        Ok(Some(outcome)) => {
            println!("Repository {name}: setup {}.", outcome.describe());
            Ok(ExitCode::SUCCESS)
        }
        Ok(None) => {
            println!("Repository {name} has no setup: nothing to run.");
            Ok(ExitCode::SUCCESS)
        }
        Err(why) => {
            eprintln!("Repository {name}: the setup failed: {why}");
            Ok(ExitCode::FAILURE)
        }
    }
}
