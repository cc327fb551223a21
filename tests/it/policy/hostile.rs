//! Hostile plugins: each way a plugin can misbehave is contained and fails
//! closed, repeated failures switch it off, and an impostor is told apart by
//! its hash.

use std::path::{Path, PathBuf};
use std::time::Duration;

use eagle::policy::{Outcome, PluginError, PolicyRequest, RequestKind, Verdict, content_hash};
use eagle::profile::PluginLimits;

use super::{builtin, file, host, request, task};
use crate::support::{Db, TestDb, fixture};

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
    store.audit_log().audit(&entry).await.unwrap();
    let trail = store.audit_log().audit_trail("request:7").await.unwrap();
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
