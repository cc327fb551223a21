//! Loops that run once per deployment (the analyzer, the PR loop, Asana
//! intake, what Eagle carries out) or once per identity (the outbox sender),
//! elected by a lease in the database. [`Lease`] is the one place that takes
//! a lease over from a holder that died on this host.
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
    name: String,
    instance: String,
    ttl: Duration,
    /// How long a held lease goes without renewal (a third of `ttl` unless
    /// told otherwise).
    every: Duration,
    /// What the log calls the holder when a dead one is taken over from.
    role: &'static str,
    /// When it was last taken or renewed by this instance.
    renewed: Option<Instant>,
}

impl Lease {
    /// The lease `name` for this process (`instance`, see
    /// [`crate::ground::host::instance_name`]), lasting `ttl` without renewal.
    pub fn new(name: impl Into<String>, instance: String, ttl: Duration) -> Lease {
        Lease {
            name: name.into(),
            instance,
            ttl,
            every: ttl / 3,
            role: "holder",
            renewed: None,
        }
    }

    /// Renews a held lease once `every` has passed rather than a third of
    /// its time (a loop that must keep more of it left, like the outbox
    /// sender's).
    pub fn renewing_every(mut self, every: Duration) -> Lease {
        self.every = every;
        self
    }

    /// Names the holder in the log line of a take-over: `the previous
    /// <role> died; taking over its lease`.
    pub fn holder_called(mut self, role: &'static str) -> Lease {
        self.role = role;
        self
    }

    /// Whether this instance holds the lease: renewed when its renewal is
    /// due, taken when free, expired, or held by a process of this host
    /// that has died (a restart after `kill -9` does not wait).
    pub async fn hold(&mut self, store: &Store) -> Result<bool> {
        if self.renewed.is_some_and(|at| at.elapsed() < self.every) {
            return Ok(true);
        }
        let mut held = store
            .leases()
            .acquire_lease(&self.name, &self.instance, self.ttl)
            .await?;
        // Lease owners are named by host (boot id and PID namespace), pid
        // and start time: a holder in another container, even with the
        // same pid, is not taken for dead.
        if !held
            && let Some(owner) = store.leases().lease_owner(&self.name).await?
            && owner != self.instance
            && crate::ground::host::holder_is_dead(&owner)
        {
            tracing::info!(
                owner,
                lease = %self.name,
                "the previous {} died; taking over its lease",
                self.role
            );
            store.leases().release_lease(&self.name, &owner).await?;
            held = store
                .leases()
                .acquire_lease(&self.name, &self.instance, self.ttl)
                .await?;
        }
        self.renewed = held.then(Instant::now);
        Ok(held)
    }

    /// Renews the lease now if nobody else holds it, without taking it over
    /// from a dead holder: for a loop in the middle of its work, which
    /// stops if the lease went elsewhere meanwhile.
    pub async fn renew(&mut self, store: &Store) -> Result<bool> {
        let held = store
            .leases()
            .acquire_lease(&self.name, &self.instance, self.ttl)
            .await?;
        self.renewed = held.then(Instant::now);
        Ok(held)
    }

    /// How long the lease has left by this instance's count, from its last
    /// renewal (zero when it does not hold it). The database's clock is the
    /// judge; this only says whether to renew before going on.
    pub fn left(&self) -> Duration {
        self.renewed
            .map_or(Duration::ZERO, |at| self.ttl.saturating_sub(at.elapsed()))
    }

    /// Forgets that this instance holds the lease (it may have been lost):
    /// the next [`Lease::hold`] asks the database.
    pub fn forget(&mut self) {
        self.renewed = None;
    }

    /// How long until the lease wants renewing (a loop's longest sleep).
    pub fn renew_in(&self) -> Duration {
        match self.renewed {
            Some(at) => self.every.saturating_sub(at.elapsed()),
            None => self.every,
        }
    }

    /// Gives the lease up (at shutdown, or after a one-off pass).
    pub async fn release(&mut self, store: &Store) {
        self.renewed = None;
        if let Err(error) = store
            .leases()
            .release_lease(&self.name, &self.instance)
            .await
        {
            tracing::warn!(%error, lease = %self.name, "cannot give a lease up; it expires by itself");
        }
    }

    /// This instance's name.
    pub fn instance(&self) -> &str {
        &self.instance
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ground::database_url::DatabaseUrl;

    const TTL: Duration = Duration::from_secs(30);

    async fn store(dir: &tempfile::TempDir) -> Store {
        let url = format!("sqlite://{}", dir.path().join("eagle.db").display());
        Store::open(&DatabaseUrl::new(url)).await.unwrap()
    }

    #[tokio::test]
    async fn one_instance_holds_it_until_it_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir).await;
        let mut a = Lease::new("loop", "a".into(), TTL);
        let mut b = Lease::new(String::from("loop"), "b".into(), TTL);
        assert_eq!((a.left(), a.renew_in()), (Duration::ZERO, TTL / 3));
        assert!(a.hold(&store).await.unwrap());
        assert!(a.left() > TTL - Duration::from_secs(5));
        assert!(!b.hold(&store).await.unwrap());
        assert!(!b.renew(&store).await.unwrap());
        assert_eq!(b.left(), Duration::ZERO);
        a.forget();
        assert_eq!(a.left(), Duration::ZERO);
        assert!(a.renew(&store).await.unwrap());
        a.release(&store).await;
        assert!(b.hold(&store).await.unwrap());
    }

    #[tokio::test]
    async fn a_dead_holder_of_this_host_is_taken_over_by_hold_only() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir).await;
        let dead = format!("{}#{}#1", crate::ground::host::host_id(), i32::MAX - 1);
        assert!(
            store
                .leases()
                .acquire_lease("loop", &dead, TTL)
                .await
                .unwrap()
        );
        let mut lease = Lease::new("loop", crate::ground::host::instance_name(), TTL)
            .renewing_every(Duration::from_secs(5))
            .holder_called("sender");
        assert_eq!(lease.renew_in(), Duration::from_secs(5));
        assert!(!lease.renew(&store).await.unwrap());
        assert!(lease.hold(&store).await.unwrap());
        assert_eq!(
            store.leases().lease_owner("loop").await.unwrap(),
            Some(crate::ground::host::instance_name())
        );
        // Another host's holder is never taken for dead.
        store
            .leases()
            .release_lease("loop", &crate::ground::host::instance_name())
            .await
            .unwrap();
        assert!(
            store
                .leases()
                .acquire_lease("loop", "other-host/1#12#34", TTL)
                .await
                .unwrap()
        );
        let mut lease = Lease::new("loop", crate::ground::host::instance_name(), TTL);
        assert!(!lease.hold(&store).await.unwrap());
    }
}
