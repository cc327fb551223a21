//! Data care on the command line: `eagle migrate [--check]`, `eagle db
//! backup <file>` (see [`super::backup`]) and `eagle db prune`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Subcommand};

use super::{ProfileArg, load, open_store};
use crate::store::Store;

/// The exit code of `eagle migrate --check` when migrations are pending.
pub const PENDING: u8 = 2;

/// `eagle migrate`.
#[derive(Debug, Args)]
pub struct MigrateArgs {
    #[command(flatten)]
    pub profile: ProfileArg,
    /// Say whether an upgrade would migrate (the pending migrations by
    /// version and description) and apply nothing: exit 0 when the
    /// database is up to date, 2 when migrations are pending.
    #[arg(long)]
    pub check: bool,
}

/// `eagle db …`.
#[derive(Debug, Subcommand)]
pub enum DbCommand {
    /// Write a consistent copy of the database into FILE while Eagle runs:
    /// SQLite's own copy (`VACUUM INTO`), or `pg_dump --format=custom` for
    /// PostgreSQL. The file is private to Eagle's user (0600): it holds the
    /// tasks' texts.
    Backup {
        #[command(flatten)]
        profile: ProfileArg,
        /// Where the copy goes (refused if it exists, unless --force).
        file: PathBuf,
        /// Replace FILE if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Forget what may be pruned: delivered or given-up outbox entries,
    /// handled message ids, kept GitHub answers, finished analyzer jobs,
    /// posted notices, leases expired long ago. Never tasks, runs,
    /// requests, decisions or the audit log.
    Prune {
        #[command(flatten)]
        profile: ProfileArg,
        /// What is older than this goes (at least a day); by default the
        /// profile's `[store] prune_after` (90 days unless it says).
        #[arg(long, value_name = "AGE")]
        older_than: Option<String>,
        /// Say what would go; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

/// `eagle migrate [--check]`.
pub(super) async fn migrate(
    dir: &super::Profiles,
    args: MigrateArgs,
    env: &BTreeMap<String, String>,
) -> anyhow::Result<ExitCode> {
    let profile = load(dir, &args.profile.profile, env)?;
    let store = Store::connect(&profile.database_url).await?;
    let result = async {
        let state = store.schema_state().await?;
        if let Some(refusal) = state.refusal(store.url()) {
            return Err(anyhow::Error::new(refusal));
        }
        if args.check {
            if state.pending.is_empty() {
                println!(
                    "{}: up to date, {} migration(s) applied ({} backend)",
                    store.url(),
                    state.applied,
                    store.backend().as_str()
                );
                return Ok(ExitCode::SUCCESS);
            }
            println!(
                "{}: {} migration(s) pending ({} backend); `eagle migrate` applies them:",
                store.url(),
                state.pending.len(),
                store.backend().as_str()
            );
            for migration in &state.pending {
                println!("  {migration}");
            }
            return Ok(ExitCode::from(PENDING));
        }
        let applied = store.migrate().await?;
        let total = store.applied_migrations().await?;
        println!(
            "{}: {applied} migration(s) applied now, {total} in all ({} backend)",
            store.url(),
            store.backend().as_str()
        );
        Ok(ExitCode::SUCCESS)
    }
    .await;
    store.close().await;
    result.with_context(|| format!("profile {}", profile.name))
}

/// `eagle db …`.
pub(super) async fn run(
    dir: &super::Profiles,
    command: DbCommand,
    env: &BTreeMap<String, String>,
) -> anyhow::Result<ExitCode> {
    match command {
        DbCommand::Backup {
            profile,
            file,
            force,
        } => {
            let profile = load(dir, &profile.profile, env)?;
            super::backup::backup(&profile, &file, force, env).await
        }
        DbCommand::Prune {
            profile,
            older_than,
            dry_run,
        } => {
            let profile = load(dir, &profile.profile, env)?;
            let keep = match older_than.as_deref() {
                Some(text) => crate::profile::care::check_prune_after(text)
                    .map_err(|why| anyhow::anyhow!("--older-than: {why}"))?,
                None => profile.eagle.prune_after,
            };
            let store = open_store(&profile).await?;
            let result = prune(&store, keep, dry_run).await;
            store.close().await;
            result
        }
    }
}

async fn prune(
    store: &Store,
    keep: std::time::Duration,
    dry_run: bool,
) -> anyhow::Result<ExitCode> {
    let cut = crate::store::now()
        - chrono::TimeDelta::from_std(keep).context("--older-than is too long")?;
    let pruned = store.prune_older_than(cut, dry_run).await?;
    let total: u64 = pruned.iter().map(|p| p.rows).sum();
    let verb = if dry_run { "would remove" } else { "removed" };
    println!(
        "{}: older than {} ({}):",
        store.url(),
        age(keep),
        cut.format("%Y-%m-%d %H:%M UTC")
    );
    let width = pruned.iter().map(|p| p.table.len()).max().unwrap_or(0);
    for table in &pruned {
        println!(
            "  {:<width$}  {verb} {}: {}",
            table.table, table.rows, table.what
        );
    }
    println!(
        "{verb} {total} row(s) in all{}; kept whole: tasks, runs, requests and decisions, the audit log, conversations, milestones, egress refusals.",
        if dry_run { ", nothing changed" } else { "" }
    );
    Ok(ExitCode::SUCCESS)
}

/// An age as people write it: whole days in days.
fn age(keep: std::time::Duration) -> String {
    const DAY: u64 = 24 * 3600;
    match keep.as_secs() {
        secs if secs % DAY == 0 => format!("{} day(s)", secs / DAY),
        _ => humantime::format_duration(keep).to_string(),
    }
}
