//! Loading and hot reload: the plugin directory read in name order, a swap
//! while decisions run, the watcher's interval, and a deleted plugin.

use std::path::Path;
use std::time::Duration;

use eagle::policy::{
    FilterVerdict, Outcome, PluginError, PolicyHost, RequestKind, Verdict, content_hash,
};
use eagle::profile::{PluginLimits, PolicySettings};

use super::{builtin, file, request, settings, task};
use crate::support::{WAIT, fixture, shared_plugin_cache, within};

#[tokio::test]
async fn load_all_appends_every_wasm_in_name_order() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(fixture("reload-v2"), dir.path().join("b.wasm")).unwrap();
    std::fs::copy(fixture("reload-v1"), dir.path().join("a.wasm")).unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not a plugin").unwrap();
    let mut settings = settings(dir.path(), vec![builtin("default-approval", "{}")]);
    settings.load_all = true;
    let host = PolicyHost::load(&settings, Some(shared_plugin_cache()))
        .await
        .unwrap();
    let sources: Vec<String> = host
        .plugins()
        .iter()
        .map(|p| p.identity.source.clone())
        .collect();
    assert_eq!(sources.len(), 3, "{sources:?}");
    assert_eq!(sources[0], "builtin:default-approval");
    assert!(
        sources[1].ends_with("a.wasm") && sources[2].ends_with("b.wasm"),
        "{sources:?}"
    );
    // b.wasm (version 2) denies, with its default reason: empty configuration.
    let decision = host
        .decide(&request(RequestKind::Request, "run_tests"))
        .await;
    assert_eq!(decision.outcome, Outcome::Deny);
    assert_eq!(decision.reason, "version 2 denies");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_reload_swaps_atomically_while_decisions_run() {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("probe.wasm");
    let v1 = std::fs::read(fixture("reload-v1")).unwrap();
    let v2 = std::fs::read(fixture("reload-v2")).unwrap();
    let (h1, h2) = (content_hash(&v1), content_hash(&v2));
    std::fs::write(&live, &v1).unwrap();
    let settings = settings(
        dir.path(),
        vec![file(Path::new("probe.wasm"), PluginLimits::default())],
    );
    let host = PolicyHost::load(&settings, Some(shared_plugin_cache()))
        .await
        .unwrap();
    assert_eq!(
        host.decide(&request(RequestKind::Request, "x"))
            .await
            .outcome,
        Outcome::Approve
    );

    let (results_tx, mut results) = tokio::sync::mpsc::unbounded_channel();
    let stop = tokio_util::sync::CancellationToken::new();
    let mut workers = Vec::new();
    for _ in 0..3 {
        let host = host.clone();
        let results_tx = results_tx.clone();
        let stop = stop.clone();
        workers.push(tokio::spawn(async move {
            while !stop.is_cancelled() {
                let decision = host
                    .decide(&request(RequestKind::Request, "run_tests"))
                    .await;
                let vote = &decision.votes[0];
                if results_tx
                    .send((
                        vote.plugin.sha256.clone(),
                        vote.verdict.clone(),
                        vote.failure.clone(),
                    ))
                    .is_err()
                {
                    return;
                }
            }
        }));
    }
    drop(results_tx);
    let mut seen = Vec::new();
    within(WAIT, "30 decisions before the swap", async {
        while seen.len() < 30 {
            seen.push(results.recv().await.expect("decisions keep coming"));
        }
    })
    .await;
    // Replace the file the way an editor or deploy does: write beside, rename over.
    let staged = dir.path().join(".probe.wasm.new");
    std::fs::write(&staged, &v2).unwrap();
    std::fs::rename(&staged, &live).unwrap();
    let changes = host.reload().await;
    assert!(
        changes
            .iter()
            .any(|c| c.contains("loaded reload-probe 2.0.0")),
        "{changes:?}"
    );
    let after = host
        .decide(&request(RequestKind::Request, "run_tests"))
        .await;
    assert_eq!(after.votes[0].plugin.sha256, h2);
    within(WAIT, "30 decisions by version 2 after the swap", async {
        let mut since_swap = 0;
        while since_swap < 30 {
            let result = results.recv().await.expect("decisions keep coming");
            if result.0 == h2 {
                since_swap += 1;
            }
            seen.push(result);
        }
    })
    .await;
    stop.cancel();
    within(WAIT, "the deciding tasks to stop", async {
        while let Some(result) = results.recv().await {
            seen.push(result);
        }
        for worker in workers {
            worker.await.unwrap();
        }
    })
    .await;
    let mut per_version = (0, 0);
    for (sha, verdict, failure) in &seen {
        assert!(
            failure.is_none(),
            "a decision failed during the swap: {failure:?}"
        );
        if *sha == h1 {
            assert_eq!(*verdict, Verdict::Approve);
            per_version.0 += 1;
        } else if *sha == h2 {
            assert_eq!(*verdict, Verdict::Deny("version 2 denies".into()));
            per_version.1 += 1;
        } else {
            panic!("a decision came from an unknown plugin hash {sha}");
        }
    }
    assert!(
        per_version.0 >= 30 && per_version.1 >= 30,
        "{per_version:?}"
    );

    // A broken new file leaves the working version in place, and says so.
    std::fs::write(&live, b"\0asm broken upload").unwrap();
    let changes = host.reload().await;
    assert!(
        changes
            .iter()
            .any(|c| c.contains("the previous version stays")),
        "{changes:?}"
    );
    let status = &host.plugins()[0];
    assert_eq!(status.identity.sha256, h2);
    assert!(
        status
            .rejected
            .as_deref()
            .is_some_and(|r| r.contains("not a WebAssembly component")),
        "{status:?}"
    );
    assert_eq!(
        host.decide(&request(RequestKind::Request, "x"))
            .await
            .outcome,
        Outcome::Deny
    );

    // A plugin whose file is missing votes escalate until the file appears.
    let empty = tempfile::tempdir().unwrap();
    let settings2 = settings_for(empty.path());
    let waiting = PolicyHost::load(&settings2, Some(shared_plugin_cache()))
        .await
        .unwrap();
    let decision = waiting
        .decide(&request(RequestKind::Request, "run_tests"))
        .await;
    assert!(matches!(
        decision.votes[0].failure,
        Some(PluginError::Missing { .. })
    ));
    assert_eq!(decision.outcome, Outcome::Escalate);
    assert_eq!(
        waiting.filter(&task()).await.votes[0].verdict,
        FilterVerdict::Keep
    );
    std::fs::write(empty.path().join("probe.wasm"), &v1).unwrap();
    waiting.reload().await;
    assert_eq!(
        waiting
            .decide(&request(RequestKind::Request, "run_tests"))
            .await
            .outcome,
        Outcome::Approve
    );
}

fn settings_for(dir: &Path) -> PolicySettings {
    settings(
        dir,
        vec![file(Path::new("probe.wasm"), PluginLimits::default())],
    )
}

#[tokio::test]
async fn the_watcher_reloads_on_its_interval() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("probe.wasm"),
        std::fs::read(fixture("reload-v1")).unwrap(),
    )
    .unwrap();
    let mut settings = settings_for(dir.path());
    settings.reload_interval = Duration::from_secs(2);
    let host = PolicyHost::load(&settings, Some(shared_plugin_cache()))
        .await
        .unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let store = eagle::store::Store::open(&eagle::profile::DatabaseUrl::new("sqlite::memory:"))
        .await
        .unwrap();
    // Paused from here (the store's pool must not time out while it
    // opens): the reloader is woken by its timer only.
    tokio::time::pause();
    let watcher = tokio::spawn(eagle::runtime::background::drive(
        eagle::daemon::plugins::PluginReload {
            host: host.clone(),
            announce: None,
        },
        store,
        "test".into(),
        stop.clone(),
    ));
    std::fs::write(
        dir.path().join("probe.wasm"),
        std::fs::read(fixture("reload-v2")).unwrap(),
    )
    .unwrap();
    // Paused time: advancing the clock fires the watcher's ticks at once.
    let mut outcome = Outcome::Approve;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        outcome = host
            .decide(&request(RequestKind::Request, "x"))
            .await
            .outcome;
        if outcome == Outcome::Deny {
            break;
        }
    }
    assert_eq!(
        outcome,
        Outcome::Deny,
        "the watcher never picked up version 2"
    );
    stop.cancel();
    watcher.await.unwrap();
}

#[tokio::test]
async fn a_deleted_plugin_votes_missing_not_its_old_code() {
    let plugins = tempfile::tempdir().unwrap();
    let path = plugins.path().join("probe.wasm");
    std::fs::copy(fixture("reload-v1"), &path).unwrap();
    let host = PolicyHost::load(
        &settings(
            plugins.path(),
            vec![file(Path::new("probe.wasm"), PluginLimits::default())],
        ),
        Some(shared_plugin_cache()),
    )
    .await
    .unwrap();
    assert_eq!(
        host.decide(&request(RequestKind::Request, "x"))
            .await
            .outcome,
        Outcome::Approve
    );
    std::fs::remove_file(&path).unwrap();
    host.reload().await;
    let decision = host.decide(&request(RequestKind::Request, "x")).await;
    assert_eq!(decision.outcome, Outcome::Escalate);
    assert!(
        matches!(decision.votes[0].failure, Some(PluginError::Missing { .. })),
        "{:?}",
        decision.votes[0].failure
    );
}
