//! A run's refusals: noted as they happen, coalesced per destination in
//! memory, and written to the store at most once every [`FLUSH_EVERY`]
//! (and once more when the proxy stops). A worker that loops on a refused
//! host costs one counter in memory per attempt and one upsert a second;
//! one that tries ever new names is folded into one [`OTHER_HOSTS`] row
//! past [`MAX_DESTINATIONS`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::Client;
use crate::store::{NewRefusals, OTHER_HOSTS, Store};

/// The most writes a second, per proxy.
const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// Destinations recorded by name per attempt; the rest count as [`OTHER_HOSTS`].
pub const MAX_DESTINATIONS: usize = 32;
/// How long the last write may take when the proxy stops.
const LAST_WRITE: Duration = Duration::from_secs(5);

/// The refusals of one proxy (one attempt of a run).
pub struct Refusals {
    client: Client,
    store: Store,
    state: Mutex<State>,
    wake: Notify,
}

#[derive(Default)]
struct State {
    /// Not yet written, by destination.
    pending: BTreeMap<(String, u16), NewRefusals>,
    /// Destinations noted this attempt, at most [`MAX_DESTINATIONS`].
    seen: BTreeSet<(String, u16)>,
}

impl Refusals {
    pub fn new(client: Client, store: Store) -> Refusals {
        Refusals {
            client,
            store,
            state: Mutex::new(State::default()),
            wake: Notify::new(),
        }
    }

    /// Notes one refusal; true the first time this attempt for this
    /// destination (worth a log line; repeats are only counted).
    pub fn note(&self, host: &str, port: u16, reason: &str) -> bool {
        crate::ground::metrics::get().sandbox_refusals.inc();
        let now = crate::store::now();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let key = (host.to_string(), port);
        let first = !state.seen.contains(&key);
        let key = if !first || state.seen.len() < MAX_DESTINATIONS {
            state.seen.insert(key.clone());
            key
        } else {
            (OTHER_HOSTS.to_string(), 0)
        };
        let entry = state
            .pending
            .entry(key.clone())
            .or_insert_with(|| NewRefusals {
                host: key.0,
                port: key.1,
                reason: String::new(),
                first_at: now,
                last_at: now,
                count: 0,
            });
        entry.count += 1;
        entry.last_at = now;
        entry.reason = reason.chars().take(200).collect();
        drop(state);
        self.wake.notify_one();
        first
    }

    /// Writes what is pending; on failure keeps it for the next write.
    async fn flush(&self) {
        let batch: Vec<NewRefusals> = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            std::mem::take(&mut state.pending).into_values().collect()
        };
        // An analysis has no run to show them with: they were logged.
        let Client::Run(run_id) = self.client else {
            return;
        };
        if batch.is_empty() {
            return;
        }
        if let Err(error) = self.store.egress().record_refusals(run_id, &batch).await {
            tracing::warn!(%error, run = run_id, "cannot record egress refusals yet");
            self.put_back(batch);
        }
    }

    fn put_back(&self, batch: Vec<NewRefusals>) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        for old in batch {
            let key = (old.host.clone(), old.port);
            match state.pending.get_mut(&key) {
                Some(newer) => {
                    newer.count += old.count;
                    newer.first_at = newer.first_at.min(old.first_at);
                }
                None => {
                    state.pending.insert(key, old);
                }
            }
        }
    }

    /// Writes refusals as they come, at most once every [`FLUSH_EVERY`],
    /// until `stop`; then what is left, within [`LAST_WRITE`].
    pub async fn run(&self, stop: CancellationToken) {
        loop {
            tokio::select! {
                _ = self.wake.notified() => {}
                _ = stop.cancelled() => break,
            }
            self.flush().await;
            tokio::select! {
                _ = tokio::time::sleep(FLUSH_EVERY) => {}
                _ = stop.cancelled() => break,
            }
        }
        if tokio::time::timeout(LAST_WRITE, self.flush())
            .await
            .is_err()
        {
            tracing::warn!(
                client = %self.client,
                "egress refusals not recorded: the database did not answer"
            );
        }
    }
}
