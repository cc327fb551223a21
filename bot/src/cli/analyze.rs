//! `eagle analyze [--reanalyze-skipped [--dry-run]]`: the analyzer, once,
//! from the command line.

use std::collections::BTreeMap;
use std::process::ExitCode;

use tokio_util::sync::CancellationToken;

use crate::analyzer::Analyzer;
use crate::mirror::Poster;
use crate::policy::PolicyHost;
use crate::profile::Profile;
use crate::store::Store;

pub async fn run(
    profile: &Profile,
    store: &Store,
    env: &BTreeMap<String, String>,
    reanalyze: bool,
    dry_run: bool,
) -> anyhow::Result<ExitCode> {
    let policy = PolicyHost::for_profile(profile).await?;
    for plugin in policy.plugins().iter().filter(|p| !p.loaded) {
        eprintln!(
            "warning: plugin {} did not load: {}",
            plugin.identity, plugin.state
        );
    }
    // What it concludes is told in chat by the profile's own identity (the
    // messages go out when `eagle run` delivers its outbox).
    let poster = Poster {
        identity: profile.name.clone(),
        channel: profile.executor_channel.clone(),
    };
    let analyzer = Analyzer::for_profile(profile, store.clone(), policy, poster, true, env)?;
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
    let pending = store.pending_count().await?;
    if pending == 0 {
        println!("Nothing is pending analysis.");
        return Ok(ExitCode::SUCCESS);
    }
    // One analyzer per deployment: if `eagle run` has it, it does the work.
    if !analyzer.try_lead().await? {
        println!(
            "{pending} task(s) pending analysis: the analyzer of a running Eagle has them (it posts the summary)."
        );
        return Ok(ExitCode::SUCCESS);
    }
    let shutdown = CancellationToken::new();
    super::spawn_signal_handler(shutdown.clone())?;
    let summary = analyzer.work(&shutdown).await;
    analyzer.step_down().await;
    let summary = summary?;
    println!("{}", summary.text("tasks"));
    Ok(ExitCode::SUCCESS)
}
