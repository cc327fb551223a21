//! Policy plugins through the real host: the default plugins' tables, the
//! hostile-plugin suite, composition, the cache, hot reload, the audit
//! trail, and `eagle policy`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use eagle::policy::{
    FilterVerdict, Outcome, PluginError, PolicyHost, PolicyRequest, PolicyTask, RequestKind,
    Verdict, content_hash,
};
use eagle::profile::{PluginLimits, PluginSource, PluginSpec, PolicySettings};

use crate::support::{
    Db, Home, TestDb, WAIT, builtin_file, fixture, shared_plugin_cache, text, within,
};

fn spec(source: PluginSource, config: &str, limits: PluginLimits) -> PluginSpec {
    PluginSpec {
        source,
        config_json: config.into(),
        limits,
    }
}

fn builtin(name: &str, config: &str) -> PluginSpec {
    spec(
        PluginSource::Builtin(name.into()),
        config,
        PluginLimits::default(),
    )
}

fn file(path: &Path, limits: PluginLimits) -> PluginSpec {
    spec(PluginSource::File(path.to_path_buf()), "{}", limits)
}

fn settings(dir: &Path, plugins: Vec<PluginSpec>) -> PolicySettings {
    PolicySettings {
        dir: dir.to_path_buf(),
        load_all: false,
        exclude: Vec::new(),
        reload_interval: Duration::from_secs(3600),
        plugins,
    }
}

async fn host(plugins: Vec<PluginSpec>) -> PolicyHost {
    PolicyHost::load(
        &settings(Path::new("."), plugins),
        Some(shared_plugin_cache()),
    )
    .await
    .expect("policy host")
}

fn request(kind: RequestKind, action: &str) -> PolicyRequest {
    PolicyRequest {
        kind,
        action: action.into(),
        run_id: 42,
        request_id: 7,
        body: "details".into(),
        task: None,
        requested_by: "worker-1".into(),
    }
}

fn task() -> PolicyTask {
    PolicyTask {
        gid: "1200001".into(),
        source: "my_tasks_inbox".into(),
        title: "Tab preview sticks".into(),
        description: "The preview stays after the tab closes.".into(),
        platform: Some("macOS".into()),
        ..PolicyTask::default()
    }
}

#[tokio::test]
async fn default_approval_implements_the_table() {
    use RequestKind::{Escalate, Request};
    let host = host(vec![builtin("default-approval", "{}")]).await;
    let table: &[(RequestKind, &str, Outcome, bool, &str)] = &[
        (Request, "create_worktree", Outcome::Approve, false, ""),
        (Request, "run_build", Outcome::Approve, false, ""),
        (Request, "run_tests", Outcome::Approve, false, ""),
        (Request, "open_draft_pr", Outcome::Approve, false, ""),
        (Request, "push_branch", Outcome::Approve, false, ""),
        (Request, "comment_on_pr", Outcome::Approve, false, ""),
        (Request, "reply_thread", Outcome::Approve, false, ""),
        (
            Request,
            "run_command",
            Outcome::Escalate,
            true,
            "the operator's rules",
        ),
        (
            Request,
            "post_asana_comment",
            Outcome::Escalate,
            true,
            "Asana comment",
        ),
        (
            Request,
            "merge_pr",
            Outcome::Escalate,
            true,
            "always needs a human",
        ),
        (
            Request,
            "modify_unrelated_file",
            Outcome::Deny,
            true,
            "unrelated to the task",
        ),
        (
            Escalate,
            "scope_expansion",
            Outcome::Deny,
            true,
            "scope expansion is denied",
        ),
        (
            Escalate,
            "need_credentials",
            Outcome::Escalate,
            true,
            "escalated need_credentials",
        ),
        (
            Escalate,
            "run_tests",
            Outcome::Escalate,
            true,
            "escalated run_tests",
        ),
        (
            Request,
            "delete_repository",
            Outcome::Escalate,
            true,
            "unknown request delete_repository",
        ),
    ];
    for (kind, action, outcome, notify, reason) in table {
        let decision = host.decide(&request(*kind, action)).await;
        assert_eq!(
            decision.outcome, *outcome,
            "{kind:?} {action}: {decision:?}"
        );
        assert_eq!(decision.notify_owner, *notify, "{kind:?} {action}");
        assert!(
            decision.reason.contains(reason),
            "{kind:?} {action}: {}",
            decision.reason
        );
        let by = decision.decided_by.expect("a plugin decided");
        assert_eq!(by.name, "default-approval");
        assert_eq!(
            by.sha256,
            content_hash(&std::fs::read(builtin_file("default-approval")).unwrap())
        );
        assert!(decision.votes[0].failure.is_none());
    }
    // Configuration may approve more routine actions, never the fixed ones.
    let host = host_with(
        "default-approval",
        r#"{"also_approve": ["run_lint", "merge_pr", "post_asana_comment", "run_command"]}"#,
    )
    .await;
    assert_eq!(
        host.decide(&request(Request, "run_lint")).await.outcome,
        Outcome::Approve
    );
    for fixed in ["merge_pr", "post_asana_comment", "run_command"] {
        assert_eq!(
            host.decide(&request(Request, fixed)).await.outcome,
            Outcome::Escalate,
            "{fixed}"
        );
    }
}

async fn host_with(name: &str, config: &str) -> PolicyHost {
    host(vec![builtin(name, config)]).await
}

#[tokio::test]
async fn default_filter_implements_each_filter_and_source() {
    let host = host_with("default-filter", r#"{"owner": "alex@example.com"}"#).await;
    let check = |want: Option<&'static str>, task: PolicyTask| {
        let host = host.clone();
        async move {
            let decision = host.filter(&task).await;
            match want {
                None => assert!(decision.keep, "{task:?} was skipped: {}", decision.reason()),
                Some(reason) => {
                    assert!(!decision.keep, "{task:?} was kept");
                    assert!(
                        decision.reason().contains(reason),
                        "{task:?}: {}",
                        decision.reason()
                    );
                }
            }
        }
    };
    check(None, task()).await;
    for source in [
        "O-L Backlog (Desktop Browsers)",
        "user_reports",
        "watched",
        "hack_days",
        "my_tasks_inbox",
        "my_tasks_backlog",
        "chat",
    ] {
        check(
            None,
            PolicyTask {
                source: source.into(),
                ..task()
            },
        )
        .await;
    }
    check(
        Some("source user_feedback_raw is never taken"),
        PolicyTask {
            source: "user_feedback_raw".into(),
            ..task()
        },
    )
    .await;
    check(
        Some("source random_inbox is not a qualifying source"),
        PolicyTask {
            source: "random_inbox".into(),
            ..task()
        },
    )
    .await;
    check(
        Some("for iOS, not a macos task"),
        PolicyTask {
            platform: Some("iOS".into()),
            ..task()
        },
    )
    .await;
    check(
        None,
        PolicyTask {
            platform: None,
            tags: vec!["MacOS".into()],
            ..task()
        },
    )
    .await;
    check(
        None,
        PolicyTask {
            platform: Some("windows".into()),
            tags: vec!["macos".into()],
            ..task()
        },
    )
    .await;
    // The platform comes from the fields, never from the text.
    check(
        Some("neither its platform nor its tags"),
        PolicyTask {
            platform: None,
            description: "Only on macOS".into(),
            ..task()
        },
    )
    .await;
    check(
        None,
        PolicyTask {
            platform: None,
            source: "chat".into(),
            ..task()
        },
    )
    .await;
    check(
        Some("project template"),
        PolicyTask {
            description: "Timeline: Q3\nProject Advisor: Kim".into(),
            ..task()
        },
    )
    .await;
    check(
        None,
        PolicyTask {
            description: "Timeline slips".into(),
            ..task()
        },
    )
    .await;
    check(
        Some("design file (https://www.figma.com/file/abc)"),
        PolicyTask {
            links: vec!["https://www.figma.com/file/abc".into()],
            ..task()
        },
    )
    .await;
    check(
        Some("design file"),
        PolicyTask {
            description: "See (https://figma.com/design/x).".into(),
            ..task()
        },
    )
    .await;
    // Anywhere in the task: its title, its notes, with or without a scheme.
    for (title, notes, link) in [
        (
            "Redo the toolbar per https://www.figma.com/file/abc/Toolbar",
            "",
            "https://www.figma.com/file/abc/Toolbar",
        ),
        (
            "Redo the toolbar",
            "spec: www.figma.com/file/q",
            "www.figma.com/file/q",
        ),
        ("Toolbar per figma.com/file/z", "", "figma.com/file/z"),
        (
            "Toolbar per <HTTPS://Figma.com/file/Y>",
            "",
            "HTTPS://Figma.com/file/Y",
        ),
    ] {
        check(
            Some(Box::leak(format!("design file ({link})").into_boxed_str())),
            PolicyTask {
                title: title.into(),
                notes: notes.into(),
                ..task()
            },
        )
        .await;
    }
    // A word that only names the site is no link.
    check(
        None,
        PolicyTask {
            title: "Sign-in to figma.com fails in the toolbar".into(),
            ..task()
        },
    )
    .await;
    check(
        Some("the task is closed"),
        PolicyTask {
            closed: true,
            ..task()
        },
    )
    .await;
    check(
        Some("assigned to bob@example.com, not to the owner"),
        PolicyTask {
            assignee: Some("bob@example.com".into()),
            ..task()
        },
    )
    .await;
    check(
        None,
        PolicyTask {
            assignee: Some("Alex@Example.com".into()),
            ..task()
        },
    )
    .await;

    // Platform, sources and patterns come from the configuration.
    let ios = host_with(
        "default-filter",
        r#"{"platform": "ios", "sources": ["triage"], "link_patterns": ["sketch.com"]}"#,
    )
    .await;
    let ios_task = PolicyTask {
        platform: Some("iOS".into()),
        source: "triage".into(),
        ..task()
    };
    assert!(ios.filter(&ios_task).await.keep);
    assert!(!ios.filter(&task()).await.keep);
    let sketch = PolicyTask {
        links: vec!["https://sketch.com/s/1".into()],
        ..ios_task.clone()
    };
    assert!(!ios.filter(&sketch).await.keep);
    let figma = PolicyTask {
        links: vec!["https://figma.com/x".into()],
        ..ios_task
    };
    assert!(ios.filter(&figma).await.keep);
}

/// What a hostile plugin must fail with.
#[derive(Debug)]
enum Expect {
    Timeout,
    OutOfFuel,
    Memory,
    Stack,
    Panic,
    Forbidden,
    Incompatible,
    NotComponent,
    Garbage,
}

fn matches(expect: &Expect, error: &PluginError) -> bool {
    match (expect, error) {
        (Expect::Timeout, PluginError::Timeout { timeout_ms }) => *timeout_ms == 100,
        (Expect::OutOfFuel, PluginError::OutOfFuel { fuel }) => *fuel == 5_000_000,
        (Expect::Memory, PluginError::Memory { limit_mib, asked }) => {
            *limit_mib == 16 && *asked > 16 << 20
        }
        (Expect::Stack, PluginError::StackOverflow) => true,
        (Expect::Panic, PluginError::Panic(message)) => message.contains("boom on run_tests"),
        (Expect::Forbidden, PluginError::ForbiddenImport { import, .. }) => {
            import.starts_with("wasi:filesystem/")
        }
        (
            Expect::Incompatible,
            PluginError::Incompatible {
                found,
                supported,
                plugin,
            },
        ) => found == "0.2.0" && supported == ">=0.1.0, <0.2.0" && plugin.contains("wrong_version"),
        (Expect::NotComponent, PluginError::NotComponent(_)) => true,
        (Expect::Garbage, PluginError::Garbage(message)) => message.contains("16777216 bytes"),
        _ => false,
    }
}

fn scratch_file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_plugins_are_contained_and_fail_closed() {
    let dir = tempfile::tempdir().unwrap();
    let limits = PluginLimits::default();
    let garbage = scratch_file(
        dir.path(),
        "garbage.wasm",
        b"\x7fELF\x02\x01\x01 definitely not wasm",
    );
    let core_module = scratch_file(dir.path(), "core.wasm", b"\0asm\x01\0\0\0");
    let cases: Vec<(PathBuf, PluginLimits, Expect)> = vec![
        (
            fixture("spin"),
            PluginLimits {
                fuel: u64::MAX / 4,
                timeout: Duration::from_millis(100),
                ..limits
            },
            Expect::Timeout,
        ),
        (
            fixture("spin"),
            PluginLimits {
                fuel: 5_000_000,
                timeout: Duration::from_secs(30),
                ..limits
            },
            Expect::OutOfFuel,
        ),
        (
            fixture("memory-bomb"),
            PluginLimits {
                memory_bytes: 16 << 20,
                ..limits
            },
            Expect::Memory,
        ),
        (
            fixture("recursion"),
            PluginLimits {
                fuel: u64::MAX / 4,
                timeout: Duration::from_secs(30),
                ..limits
            },
            Expect::Stack,
        ),
        (fixture("panic"), limits, Expect::Panic),
        (fixture("wasi-fs"), limits, Expect::Forbidden),
        (fixture("wrong-version"), limits, Expect::Incompatible),
        (garbage, limits, Expect::NotComponent),
        (core_module, limits, Expect::NotComponent),
        (fixture("huge-string"), limits, Expect::Garbage),
    ];
    for (path, limits, expect) in cases {
        let host = host(vec![file(&path, limits), builtin("default-approval", "{}")]).await;
        let decision = host
            .decide(&request(RequestKind::Request, "run_tests"))
            .await;
        let hostile = &decision.votes[0];
        let failure = hostile
            .failure
            .as_ref()
            .unwrap_or_else(|| panic!("{expect:?}: no failure recorded: {decision:?}"));
        assert!(matches(&expect, failure), "{expect:?}: got {failure:?}");
        assert!(
            matches!(hostile.verdict, Verdict::Escalate(_)),
            "{expect:?} voted {:?}",
            hostile.verdict
        );
        assert_eq!(
            decision.outcome,
            Outcome::Escalate,
            "{expect:?}: a failing plugin must never let a request through"
        );
        assert!(
            decision.reason.contains(&failure.to_string()),
            "{expect:?}: {}",
            decision.reason
        );
        // The good plugin beside it still votes correctly, now and next time.
        assert_eq!(decision.votes[1].verdict, Verdict::Approve, "{expect:?}");
        let next = host
            .decide(&request(RequestKind::Request, "merge_pr"))
            .await;
        assert!(
            matches!(next.votes[1].verdict, Verdict::Escalate(ref r) if r.contains("needs a human"))
        );
        // A failing filter keeps the task.
        let filtered = host.filter(&task()).await;
        assert!(filtered.keep, "{expect:?}: a failing filter dropped a task");
    }
}

#[tokio::test]
async fn repeated_failures_switch_a_plugin_off_but_it_still_votes_escalate() {
    let host = host(vec![file(&fixture("panic"), PluginLimits::default())]).await;
    for _ in 0..3 {
        let decision = host
            .decide(&request(RequestKind::Request, "run_tests"))
            .await;
        assert!(matches!(
            decision.votes[0].failure,
            Some(PluginError::Panic(_))
        ));
    }
    let decision = host
        .decide(&request(RequestKind::Request, "run_tests"))
        .await;
    assert!(
        matches!(
            decision.votes[0].failure,
            Some(PluginError::CircuitOpen { failures: 3, .. })
        ),
        "{:?}",
        decision.votes[0].failure
    );
    assert_eq!(decision.outcome, Outcome::Escalate);
    assert_eq!(
        host.plugins()[0].state,
        "switched off after repeated failures"
    );
}

#[tokio::test]
async fn an_impostor_is_told_apart_by_its_hash_in_the_audit_log() {
    let host = host(vec![
        file(&fixture("impostor"), PluginLimits::default()),
        builtin("default-approval", "{}"),
    ])
    .await;
    let request = request(RequestKind::Request, "merge_pr");
    let decision = host.decide(&request).await;
    // The impostor approves, the real default escalates: escalate wins.
    assert_eq!(decision.outcome, Outcome::Escalate);
    let impostor = &decision.votes[0].plugin;
    let genuine = &decision.votes[1].plugin;
    assert_eq!(impostor.name, genuine.name, "both claim the same name");
    assert_ne!(impostor.sha256, genuine.sha256);
    assert_eq!(
        impostor.sha256,
        content_hash(&std::fs::read(fixture("impostor")).unwrap())
    );

    let db = TestDb::new(Db::Sqlite).await;
    let store = db.open().await;
    let entry = decision.audit_entry("request:7", &request.params_hash(), Some(99));
    store.audit(&entry).await.unwrap();
    let trail = store.audit_trail("request:7").await.unwrap();
    assert_eq!(trail[0].decision.as_deref(), Some("escalate"));
    assert_eq!(
        trail[0].plugin_hash.as_deref(),
        Some(genuine.sha256.as_str())
    );
    assert_eq!(trail[0].plugin_version.as_deref(), Some("0.1.0"));
    let detail: serde_json::Value = serde_json::from_str(&trail[0].detail).unwrap();
    assert_eq!(detail["votes"][0]["sha256"], impostor.sha256.as_str());
    assert_eq!(detail["votes"][0]["verdict"], "approve");
    // The decision binds to the request's parameters.
    let other = PolicyRequest {
        body: "other".into(),
        ..request.clone()
    };
    assert_ne!(other.params_hash(), request.params_hash());
}

#[tokio::test]
async fn compiled_plugins_are_cached_in_the_profile_not_beside_the_plugin() {
    let plugins = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let path = plugins.path().join("probe.wasm");
    std::fs::copy(fixture("reload-v1"), &path).unwrap();
    let settings = settings(
        plugins.path(),
        vec![file(Path::new("probe.wasm"), PluginLimits::default())],
    );
    let first = PolicyHost::load(&settings, Some(cache.path().to_path_buf()))
        .await
        .unwrap();
    assert_eq!(first.plugins()[0].state, "ready");
    let second = PolicyHost::load(&settings, Some(cache.path().to_path_buf()))
        .await
        .unwrap();
    assert_eq!(second.plugins()[0].state, "ready (cached)");
    let cached: Vec<String> = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".cwasm"))
        .collect();
    let sha = content_hash(&std::fs::read(&path).unwrap());
    assert_eq!(cached.len(), 1, "{cached:?}");
    assert!(
        cached[0].starts_with(&sha) && cached[0].ends_with(".cwasm"),
        "{cached:?}"
    );
    let beside: Vec<_> = std::fs::read_dir(plugins.path()).unwrap().collect();
    assert_eq!(
        beside.len(),
        1,
        "nothing is written into the plugin directory"
    );
    assert_eq!(
        second
            .decide(&request(RequestKind::Request, "x"))
            .await
            .outcome,
        Outcome::Approve
    );
}

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

#[test]
fn policy_commands_print_votes_and_exit_codes() {
    let home = Home::new();
    let out = home.run(&["policy", "list"], "");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("1. default-approval 0.1.0"), "{stdout}");
    assert!(stdout.contains("2. default-filter 0.1.0"), "{stdout}");
    assert!(stdout.contains("interface: eagle:policy@0.1.0"), "{stdout}");
    let sha = content_hash(&std::fs::read(builtin_file("default-approval")).unwrap());
    assert!(stdout.contains(&sha), "{stdout}");

    for (line, word) in [
        ("[REQUEST: merge_pr] run:42 PR #1234", "decision: escalate"),
        (
            "[REQUEST: run_tests] run:42 all of them",
            "decision: approve",
        ),
        (
            "[REQUEST: modify_unrelated_file] run:42 TabBar.swift",
            "decision: deny",
        ),
    ] {
        let out = home.run(&["policy", "test", "--request", line], "");
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(0), "{line}: {stderr}");
        assert!(stdout.contains(word), "{line}:\n{stdout}");
        assert!(
            stdout.contains("default-approval 0.1.0 (builtin:default-approval, sha256:"),
            "{stdout}"
        );
    }

    let task_file = home.dir.path().join("task.json");
    std::fs::write(
        &task_file,
        r#"{"gid": "1", "source": "user_feedback_raw", "title": "t"}"#,
    )
    .unwrap();
    let out = home.run(
        &["policy", "test", "--task", task_file.to_str().unwrap()],
        "",
    );
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout.contains("decision: skip"), "{stdout}");
    assert!(
        stdout.contains("source user_feedback_raw is never taken"),
        "{stdout}"
    );

    let v2 = fixture("reload-v2");
    let out = home.run(
        &[
            "policy",
            "test",
            "--plugin",
            v2.to_str().unwrap(),
            "--config",
            r#"{"why": "configured"}"#,
            "--request",
            "[REQUEST: run_tests] run:1",
        ],
        "",
    );
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stdout.contains("decision: deny") && stdout.contains("reason: configured"),
        "{stdout}"
    );

    // Load errors exit non-zero, after showing the fail-closed vote.
    let garbage = home.dir.path().join("garbage.wasm");
    std::fs::write(&garbage, b"garbage").unwrap();
    let out = home.run(
        &[
            "policy",
            "test",
            "--plugin",
            garbage.to_str().unwrap(),
            "--request",
            "[REQUEST: run_tests] run:1",
        ],
        "",
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout.contains("decision: escalate"), "{stdout}");
    assert!(stderr.contains("not a WebAssembly component"), "{stderr}");

    // Usage errors exit 2.
    for bad in [
        &["policy", "test", "--request", "run the tests please"][..],
        &[
            "policy",
            "test",
            "--request",
            "[STATUS: investigation] run:1",
        ],
        &["policy", "test", "--task", "/nonexistent/task.json"],
        &["policy", "test"],
    ] {
        let out = home.run(bad, "");
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", text(&out).1);
    }
}

/// The one cached artefact (`.cwasm`) in a cache directory whose name starts with `sha`.
fn cached_artefact(cache: &Path, sha: &str) -> PathBuf {
    std::fs::read_dir(cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with(sha) && name.ends_with(".cwasm")
        })
        .unwrap_or_else(|| panic!("no cached artefact for {sha} in {}", cache.display()))
}

#[tokio::test]
async fn a_tampered_plugin_cache_is_compiled_again_never_loaded() {
    let cache = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let genuine = vec![builtin("default-approval", "{}")];
    let load = |plugins: Vec<eagle::profile::PluginSpec>, dir: &Path| {
        let dir = dir.to_path_buf();
        async move {
            PolicyHost::load(&settings(Path::new("."), plugins), Some(dir))
                .await
                .unwrap()
        }
    };
    let first = load(genuine.clone(), cache.path()).await;
    let sha = first.plugins()[0].identity.sha256.clone();
    assert_eq!(
        load(genuine.clone(), cache.path()).await.plugins()[0].state,
        "ready (cached)"
    );
    let artefact = cached_artefact(cache.path(), &sha);

    // Swapped: an approve-everything plugin's artefact under the default's name.
    let impostor = load(
        vec![file(&fixture("impostor"), PluginLimits::default())],
        other.path(),
    )
    .await;
    let impostor_artefact = cached_artefact(other.path(), &impostor.plugins()[0].identity.sha256);
    std::fs::copy(&impostor_artefact, &artefact).unwrap();
    let host = load(genuine.clone(), cache.path()).await;
    assert_eq!(
        host.plugins()[0].state,
        "ready",
        "a swapped artefact was loaded"
    );
    let merge = host
        .decide(&request(RequestKind::Request, "merge_pr"))
        .await;
    assert_eq!(merge.outcome, Outcome::Escalate, "the impostor's code ran");

    // Truncated: compiled again, too.
    let bytes = std::fs::read(&artefact).unwrap();
    std::fs::write(&artefact, &bytes[..bytes.len() / 2]).unwrap();
    assert_eq!(
        load(genuine.clone(), cache.path()).await.plugins()[0].state,
        "ready"
    );
    assert_eq!(
        load(genuine.clone(), cache.path()).await.plugins()[0].state,
        "ready (cached)"
    );

    // A cache directory open to others is private again before it is used.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(cache.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    load(genuine, cache.path()).await;
    let mode = std::fs::metadata(cache.path())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o700);
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

#[tokio::test]
async fn an_oversized_plugin_is_refused_before_it_is_compiled() {
    let plugins = tempfile::tempdir().unwrap();
    let path = plugins.path().join("huge.wasm");
    let mut bytes = std::fs::read(fixture("reload-v1")).unwrap();
    bytes.resize(eagle::policy::MAX_PLUGIN_BYTES + 1, 0);
    std::fs::write(&path, bytes).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let host = PolicyHost::load(
        &settings(
            plugins.path(),
            vec![file(Path::new("huge.wasm"), PluginLimits::default())],
        ),
        Some(cache.path().to_path_buf()),
    )
    .await
    .unwrap();
    assert!(
        host.plugins()[0].state.contains("plugins may be at most"),
        "{}",
        host.plugins()[0].state
    );
    let compiled = std::fs::read_dir(cache.path())
        .map(|d| {
            d.filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "cwasm")
            })
            .count()
        })
        .unwrap_or(0);
    assert_eq!(compiled, 0, "an oversized plugin was compiled");
}

#[test]
fn a_plugin_cannot_forge_lines_in_what_eagle_prints() {
    let home = Home::new();
    let forger = fixture("forger");
    let out = home.run(
        &[
            "policy",
            "test",
            "--plugin",
            forger.to_str().unwrap(),
            "--request",
            "[REQUEST: run_tests] run:1 all",
        ],
        "",
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    for line in stdout.lines().chain(stderr.lines()) {
        assert!(
            !line.trim_start().starts_with("[APPROVED"),
            "a forged line: {line:?}\n{stdout}"
        );
        assert!(!line.contains('\u{1b}'), "an ANSI escape: {line:?}");
    }
    assert!(!stdout.contains("@**all**"), "{stdout}");
    assert!(stdout.contains("decision: deny"), "{stdout}");
    // The source and the full hash name the plugin, whatever it claims.
    let sha = content_hash(&std::fs::read(&forger).unwrap());
    assert!(stdout.contains(&format!("sha256:{sha}")), "{stdout}");
}

/// Runs `eagle policy compile-into-cache` with `bytes` on its stdin.
fn compile_into_cache(home: &Home, sha: &str, dir: &Path, bytes: &[u8]) -> std::process::Output {
    let child = home
        .command(&["policy", "compile-into-cache", "--sha256", sha, "--dir"])
        .arg(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    crate::support::finish(child, bytes, "eagle policy compile-into-cache")
}

#[test]
fn plugins_are_compiled_by_a_child_process_into_the_verified_cache() {
    // A fresh profile: nothing compiled yet, whatever other homes get.
    let home = Home::without_compiled_plugins();
    let wasm = std::fs::read(builtin_file("default-approval")).unwrap();
    let sha = content_hash(&wasm);
    let cache = tempfile::tempdir().unwrap();
    let artefacts = |dir: &Path| {
        std::fs::read_dir(dir)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "cwasm")
            })
            .count()
    };
    // Bytes that are not what the hash names are refused, and nothing is stored.
    let out = compile_into_cache(&home, &"0".repeat(64), cache.path(), &wasm);
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(stderr.contains("does not have the hash given"), "{stderr}");
    assert_eq!(artefacts(cache.path()), 0);
    // The right hash: one artefact, with its keyed record.
    let out = compile_into_cache(&home, &sha, cache.path(), &wasm);
    assert!(out.status.success(), "{}", text(&out).1);
    assert_eq!(artefacts(cache.path()), 1);
    // A library user (no child processes) loads what the child compiled.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let host = runtime
        .block_on(PolicyHost::load(
            &settings(Path::new("."), vec![builtin("default-approval", "{}")]),
            Some(cache.path().to_path_buf()),
        ))
        .unwrap();
    assert_eq!(host.plugins()[0].state, "ready (cached)");
    // `eagle policy list` on a fresh profile compiles (in a child) and the
    // next run finds the verified artefacts.
    home.run(&["policy", "list"], "");
    let out = home.run(&["policy", "list"], "");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stdout.matches("ready (cached)").count(), 2, "{stdout}");
}
