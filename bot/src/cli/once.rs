//! The one-off passes: `eagle analyze [--reanalyze-skipped [--dry-run]]`,
//! `eagle import` and `eagle import executor-v2 <url>` (moving in, see
//! [`crate::eagle::moving_in`]); the first two are each one tick of the daemon's loop under its lease
//! (the loops of `eagle run` do the same continuously). What they post
//! waits in the outbox until `eagle run` delivers it.

use std::path::PathBuf;
use std::process::ExitCode;

use tokio_util::sync::CancellationToken;

use crate::daemon::{Context, Setup};
use crate::profile::Profile;
use crate::store::Store;
use crate::transport::offline::Offline;

async fn context(profile: Profile, store: &Store, exe: PathBuf) -> anyhow::Result<Context> {
    let setup = Setup {
        store: store.clone(),
        exe,
        eagle: Some(profile),
        executor: None,
        demo_worker: false,
    };
    Context::build(setup, &mut Offline).await
}

/// `eagle analyze`.
pub(super) async fn analyze(
    profile: Profile,
    store: &Store,
    exe: PathBuf,
    reanalyze: bool,
    dry_run: bool,
) -> anyhow::Result<ExitCode> {
    let ctx = context(profile, store, exe).await?;
    if let Some(policy) = &ctx.policy {
        for plugin in policy.plugins().iter().filter(|p| !p.loaded) {
            eprintln!(
                "warning: plugin {} did not load: {}",
                plugin.identity, plugin.state
            );
        }
    }
    let mut analyzer = ctx.analyzer()?;
    if reanalyze {
        let (ids, skipped) = analyzer.reanalysis_candidates().await?;
        println!(
            "{} of {skipped} skipped task(s) would be kept by the current filters.",
            ids.len()
        );
        if dry_run {
            return Ok(ExitCode::SUCCESS);
        }
        let reopened = analyzer.reopen(&ids, "eagle analyze").await?;
        println!("Put {reopened} task(s) back for analysis.");
    }
    let pending = store.analyses().pending_count().await?;
    if pending == 0 {
        println!("Nothing is pending analysis.");
        return Ok(ExitCode::SUCCESS);
    }
    let shutdown = CancellationToken::new();
    super::spawn_signal_handler(shutdown.clone())?;
    // One analyzer per deployment: if `eagle run` has it, it does the work.
    if !crate::runtime::background::once(&mut analyzer, store, ctx.instance.clone(), &shutdown)
        .await?
    {
        println!(
            "{pending} task(s) pending analysis: the analyzer of a running Eagle has them (it posts the summary)."
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!("{}", analyzer.last_pass.text("tasks"));
    Ok(ExitCode::SUCCESS)
}

/// `eagle digest`: the owner's digest, posted now (it waits in the outbox
/// for `eagle run`) and printed.
pub(super) async fn digest(
    profile: Profile,
    store: &Store,
    exe: PathBuf,
) -> anyhow::Result<ExitCode> {
    let name = profile.name.clone();
    let ctx = context(profile, store, exe).await?;
    let Some(digest) = ctx.digest()? else {
        anyhow::bail!(
            "profile {name} has no [digest]: set at (HH:MM) and, if you like, utc_offset, channel and topic"
        );
    };
    match digest.post_now().await? {
        Some(text) => println!("{text}"),
        None => println!("Nothing to say since the last digest: nothing was posted."),
    }
    Ok(ExitCode::SUCCESS)
}

/// `eagle import`: one Asana import.
pub(super) async fn import(
    profile: Profile,
    store: &Store,
    exe: PathBuf,
) -> anyhow::Result<ExitCode> {
    let name = profile.name.clone();
    let ctx = context(profile, store, exe).await?;
    let Some(intake) = ctx.intake()? else {
        anyhow::bail!(
            "profile {name} has no [asana] section: nothing to import (see profiles/eagle.toml)"
        );
    };
    let summary = intake.import().await?;
    println!("{}", summary.text());
    Ok(if summary.failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `eagle import executor-v2 <url> [--dry-run] [--batch n]`.
pub(super) async fn import_executor_v2(
    store: &Store,
    url: &str,
    dry_run: bool,
    batch: i64,
) -> anyhow::Result<ExitCode> {
    let url = crate::ground::database_url::DatabaseUrl::new(url);
    let old = crate::store::LegacyDb::open(&url).await?;
    println!(
        "{} the old executor at {} (read-only) into {}",
        if dry_run { "Reading" } else { "Importing" },
        old.shown(),
        store.url()
    );
    let report = crate::eagle::moving_in::import(store, &old, dry_run, batch).await;
    old.close().await;
    print!("{}", report?.text(dry_run));
    Ok(ExitCode::SUCCESS)
}
