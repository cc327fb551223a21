//! The compiled-plugin cache: kept in the profile, verified before it is
//! loaded, never fed an oversized plugin, and filled by a child process.

use std::path::{Path, PathBuf};

use eagle::policy::{Outcome, PolicyHost, RequestKind, content_hash};
use eagle::profile::PluginLimits;

use super::{builtin, file, request, settings};
use crate::support::{Home, builtin_file, fixture, text};

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
