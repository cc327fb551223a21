//! Eagle's pruner: a background loop of Eagle's profile, once per
//! deployment by its lease, woken by its timer. Once a day it forgets what
//! is older than the profile's `[store] prune_after`, with the same store
//! function as `eagle db prune` (`Store::prune_older_than`, the tables of
//! `store::PRUNE_RULES`). When it last pruned is a cursor in the database,
//! so a restart does not prune again before the day is over.

use std::time::Duration;

use crate::runtime::background::{BackgroundLoop, LeaseSpec, Next, Tick, Wake};
use crate::store::Store;

const LEASE: &str = "pruner";
const LEASE_TTL: Duration = Duration::from_secs(120);
/// The cursor of the last prune.
const CURSOR: &str = "pruner";
/// How often it prunes.
pub const EVERY: Duration = Duration::from_secs(24 * 3600);

/// The daily pruner.
#[derive(Debug)]
pub struct Pruner {
    store: Store,
    keep: Duration,
}

impl Pruner {
    /// Prunes what is older than `keep`, once a day.
    pub fn new(store: Store, keep: Duration) -> Pruner {
        Pruner { store, keep }
    }
}

impl BackgroundLoop for Pruner {
    const NAME: &'static str = "pruner";
    const WAKE: Wake = Wake::Timer;

    fn lease(&self) -> Option<LeaseSpec> {
        Some(LeaseSpec {
            name: LEASE,
            ttl: LEASE_TTL,
        })
    }

    async fn tick(&mut self, tick: &mut Tick<'_>) -> anyhow::Result<Next> {
        let now = crate::store::now();
        let every = chrono::TimeDelta::from_std(EVERY).unwrap_or(chrono::TimeDelta::days(1));
        let mut tx = self.store.begin_read().await?;
        let last = tx.conversations().cursor(CURSOR).await?;
        drop(tx);
        if let Some(last) = last
            && last + every > now
        {
            return Ok(Next::After((last + every - now).to_std().unwrap_or(EVERY)));
        }
        if !tick.leads().await? {
            return Ok(Next::After(EVERY));
        }
        let cut =
            now - chrono::TimeDelta::from_std(self.keep).unwrap_or(chrono::TimeDelta::days(90));
        let pruned = self.store.prune_older_than(cut, false).await?;
        let mut tx = self.store.begin_write().await?;
        tx.conversations().set_cursor(CURSOR, now).await?;
        tx.commit().await?;
        for table in pruned.iter().filter(|p| p.rows > 0) {
            tracing::info!(
                table = table.table,
                rows = table.rows,
                "pruned {}",
                table.what
            );
        }
        Ok(Next::After(EVERY))
    }
}
