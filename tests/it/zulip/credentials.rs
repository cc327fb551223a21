//! The bots' credentials: a wrong key stops Eagle with a clear message,
//! `eagle check` verifies them, and no key reaches a trace log.

use std::process::Stdio;

use super::{Realm, Running};
use crate::cli::encodings_of;
use crate::support::{Home, finish};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_key_stops_with_a_message_naming_the_profile() {
    let realm = Realm::start().await;
    let home = realm.home();
    let rc = home.profiles().join("eagle.zuliprc");
    let text = std::fs::read_to_string(&rc).unwrap();
    let key = realm.fake.api_key(realm.eagle);
    std::fs::write(&rc, text.replace(&key, "0000000000WRONGKEY000000000000AB")).unwrap();
    let (code, log) = Running::start(&home, "eagle").wait();
    assert_eq!(code, Some(1), "{log}");
    assert!(
        log.contains("profile eagle: the server refused the bot's credentials (UNAUTHORIZED: Invalid API key)"),
        "{log}"
    );
    let out = home.run(&["check"], "");
    let (stdout, _) = crate::support::text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout.contains("FAIL  profile eagle: the server refused"),
        "{stdout}"
    );
}

/// Runs `eagle check` off the runtime's threads (the fake serves on them).
async fn check(home: &Home, profile: &str) -> (Option<i32>, String) {
    let child = home
        .command(&["check", "--profile", profile])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn eagle check");
    let out = tokio::task::spawn_blocking(move || finish(child, b"", "eagle check"))
        .await
        .unwrap();
    let (stdout, stderr) = crate::support::text(&out);
    (out.status.code(), format!("{stdout}{stderr}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_verifies_credentials_subscriptions_and_plugins() {
    let realm = Realm::start().await;
    let mut home = realm.home();
    let (code, out) = check(&home, "executor").await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("signed in to"), "{out}");
    assert!(out.contains("subscribed to #executor"), "{out}");

    realm.fake.unsubscribe(realm.executor, "executor");
    let (code, out) = check(&home, "executor").await;
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("FAIL  not subscribed to #executor: subscribe Исполнитель to it"),
        "{out}"
    );

    // Eagle's plugins must load.
    let (code, out) = check(&home, "eagle").await;
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("ok    policy plugin default-approval 0.1.0"),
        "{out}"
    );
    let plugins = home.dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::write(plugins.join("broken.wasm"), b"not a component").unwrap();
    home.set("EAGLE_POLICY__LOAD_ALL", "true");
    let (code, out) = check(&home, "eagle").await;
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("FAIL  policy plugin") && out.contains("broken.wasm"),
        "{out}"
    );
    realm.fake.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_api_key_reaches_a_trace_log() {
    let realm = Realm::start().await;
    let mut home = realm.home();
    // The plugins compiled before trace logging is on (the home's copy of
    // the shared cache has them unless the binary's engine changed):
    // Cranelift logging every instruction would make a compile take minutes.
    let warm = home.run(&["policy", "list"], "");
    assert!(warm.status.success());
    home.set("RUST_LOG", "trace");
    let eagle = Running::start(&home, "eagle");
    realm.wait_listening(realm.eagle, 1).await;
    realm.fake.post(realm.alex, "general", "secret", "!status");
    realm
        .wait_replies("general", "secret", |r| !r.is_empty())
        .await;
    let (code, log) = eagle.stop();
    assert_eq!(code, Some(0));
    assert!(log.contains("TRACE"), "trace logging was not on");
    let key = realm.fake.api_key(realm.eagle);
    for form in encodings_of("eagle-bot@example.com", &key) {
        assert!(!log.contains(&form), "the log leaks the key as {form:?}");
    }
}
