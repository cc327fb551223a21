//! Loops that run once per deployment (the analyzer, the PR loop, Asana
//! intake, what Eagle carries out), elected by a lease in the database.
//!
//! [`Lease::hold`] is called on every wake-up of its loop, and wake-ups come
//! with every write to the database. Renewing is itself a write, which would
//! wake every loop again (on SQLite, this process's own watcher too), so a
//! lease held is renewed only once a third of its time has passed.

use std::time::Duration;

use tokio::time::Instant;

use crate::store::{Result, Store};

/// One instance's claim on a singleton.
#[derive(Debug)]
pub struct Lease {
    name: &'static str,
    instance: String,
    ttl: Duration,
    /// When it was last taken or renewed by this instance.
    renewed: Option<Instant>,
}

impl Lease {
    /// The lease `name` for this process (`instance`, see
    /// [`crate::host::instance_name`]), lasting `ttl` without renewal.
    pub fn new(name: &'static str, instance: String, ttl: Duration) -> Lease {
        Lease {
            name,
            instance,
            ttl,
            renewed: None,
        }
    }

    /// Whether this instance holds the lease: renewed when a third of its
    /// time has passed, taken when free, expired, or held by a process of
    /// this host that has died (a restart after `kill -9` does not wait).
    pub async fn hold(&mut self, store: &Store) -> Result<bool> {
        if self.renewed.is_some_and(|at| at.elapsed() < self.ttl / 3) {
            return Ok(true);
        }
        let mut held = store
            .acquire_lease(self.name, &self.instance, self.ttl)
            .await?;
        if !held
            && let Some(owner) = store.lease_owner(self.name).await?
            && owner != self.instance
            && crate::host::holder_is_dead(&owner)
        {
            store.release_lease(self.name, &owner).await?;
            held = store
                .acquire_lease(self.name, &self.instance, self.ttl)
                .await?;
        }
        self.renewed = held.then(Instant::now);
        Ok(held)
    }

    /// How long until the lease wants renewing (a loop's longest sleep).
    pub fn renew_in(&self) -> Duration {
        match self.renewed {
            Some(at) => (self.ttl / 3).saturating_sub(at.elapsed()),
            None => self.ttl / 3,
        }
    }

    /// Gives the lease up (at shutdown, or after a one-off pass).
    pub async fn release(&mut self, store: &Store) {
        self.renewed = None;
        if let Err(error) = store.release_lease(self.name, &self.instance).await {
            tracing::warn!(%error, lease = self.name, "cannot give a lease up; it expires by itself");
        }
    }

    /// This instance's name.
    pub fn instance(&self) -> &str {
        &self.instance
    }
}
