//! The executor loop end to end, through the real binary: `eagle shell`
//! (both sides in one process) and the two profiles as separate `eagle run`
//! processes against the fake Zulip, with the real policy plugins and a fake
//! worker program (`fake-worker.sh`) that speaks the protocol and can be
//! told to hang, crash, go silent, flood or spoof.

mod controls;
mod failures;
mod isolation;
mod story;

use std::path::{Path, PathBuf};

use eagle::profile::DatabaseUrl;
use eagle::store::{Run, Store};

use crate::support::Home;
use crate::zulip::{Realm, Running, WAIT};

/// The fake worker script.
pub(crate) fn fake_worker() -> PathBuf {
    crate::support::reachable(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/it/fake-worker.sh"),
    )
}

/// The worker command that runs the fake worker.
pub(crate) fn fake_worker_command() -> String {
    format!("bash {} {{prompt}}", fake_worker().display())
}

/// A home whose executor runs the fake worker.
fn fake_home() -> Home {
    let mut home = Home::new();
    home.set("EAGLE_RUNNER__WORKER_COMMAND", &fake_worker_command());
    home
}

/// The home's SQLite store (what the shell wrote).
pub(crate) async fn home_store(home: &Home) -> Store {
    let url = format!(
        "sqlite://{}?mode=rwc",
        home.dir.path().join("data/eagle.db").display()
    );
    Store::open(&DatabaseUrl::new(url))
        .await
        .expect("the home's database")
}

async fn run_of(store: &Store, id: i64) -> Run {
    let mut tx = store.begin_read().await.unwrap();
    tx.tasks().run(id).await.unwrap().expect("the run exists")
}

/// Posts the shell printed about a run, in order.
fn posts(stdout: &str, run: i64) -> Vec<&str> {
    let prefix = format!("#executor > run {run} · ");
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix(prefix.as_str()))
        .collect()
}

/// Waits for a message from `sender` whose content contains `needle`.
pub(crate) async fn wait_post(
    realm: &Realm,
    sender: u64,
    needle: &str,
) -> fake_zulip::StoredMessage {
    let wanted = needle.to_string();
    let ok = realm
        .fake
        .wait_until(WAIT, |f| {
            f.messages_from(sender)
                .iter()
                .any(|m| m.content.contains(&wanted))
        })
        .await;
    let from: Vec<String> = realm
        .fake
        .messages_from(sender)
        .into_iter()
        .map(|m| {
            format!(
                "{} > {}: {}",
                m.channel.clone().unwrap_or_default(),
                m.topic,
                m.content
            )
        })
        .collect();
    assert!(
        ok,
        "no message with {needle:?}; the sender posted:\n{}",
        from.join("\n")
    );
    realm
        .fake
        .messages_from(sender)
        .into_iter()
        .find(|m| m.content.contains(needle))
        .unwrap()
}

/// Waits until a condition on the database holds (at most `WAIT`), woken
/// by the store's change notifications.
pub(crate) async fn wait_for<F, Fut>(store: &Store, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut changes = store.changes();
    // Not listening by the deadline: the loop below still checks once.
    let _ = tokio::time::timeout_at(deadline, changes.ready()).await;
    loop {
        changes.mark_seen();
        if check().await {
            return true;
        }
        tokio::select! {
            _ = changes.changed() => {}
            _ = tokio::time::sleep_until(deadline) => return check().await,
        }
    }
}

/// Starts both profiles and waits until both listen (their logs on failure).
pub(crate) async fn start_both(realm: &Realm, home: &Home) -> (Running, Running) {
    let eagle = Running::start(home, "eagle");
    let executor = Running::start(home, "executor");
    for (user, running, name) in [
        (realm.eagle, &eagle, "eagle"),
        (realm.executor, &executor, "executor"),
    ] {
        let listening = realm
            .fake
            .wait_until(WAIT, |f| {
                f.queues().iter().any(|q| q.user_id == user && q.parked)
            })
            .await;
        assert!(
            listening,
            "{name} did not start listening:\n{}",
            running.log()
        );
    }
    (eagle, executor)
}
