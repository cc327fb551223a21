//! One skeleton for every background loop: wake on a change of the
//! database (or a timer), hold the loop's lease if it runs once per
//! deployment, look at the work once ([`BackgroundLoop::tick`]), back off
//! after a failure, and stop when told.
//!
//! The decider, the analyzer, the carrier, Asana intake, the PR loop, the
//! runner and the plugin reloader are each their `tick` and a few constants;
//! [`drive`] is the only code that owns the wake-ups, the lease, the backoff
//! and shutdown. A change is a hint, never the data: every tick re-reads
//! what is pending, so a spurious wake-up costs one look and a missed one is
//! made up by the next.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::ground::backoff::Backoff;
use crate::runtime::lease::Lease;
use crate::store::{Result as StoreResult, Store};

/// How long a loop woken by a change waits before it looks
/// ([`Wake::ChangesSettled`]): the chat reply or decision that made the
/// change goes out first, and a burst of changes is read once.
pub const SETTLE: Duration = Duration::from_millis(50);

/// How long a loop that has nothing to do sleeps when no change, timer or
/// lease renewal wakes it sooner.
const IDLE: Duration = Duration::from_secs(3600);

/// What wakes a loop besides the time its last tick asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// Every change of the database, at once (the decider, the runner: a
    /// worker waits on them).
    Changes,
    /// Every change of the database, after [`SETTLE`] (background work).
    ChangesSettled,
    /// Only the time the tick asked for (a poll of an outside API).
    Timer,
}

/// A lease that makes a loop run once per deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseSpec {
    pub name: &'static str,
    /// How long the lease lasts without renewal (after a crash on another
    /// host, how long until this instance takes over).
    pub ttl: Duration,
}

/// When a loop wants to look again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// There is more to do right now.
    Again,
    /// After this long (or sooner, when woken).
    After(Duration),
    /// Only when woken (a change, the lease's renewal).
    Idle,
}

/// What a tick may ask of the driver while it works.
#[derive(Debug)]
pub struct Tick<'a> {
    store: &'a Store,
    lease: Option<&'a mut Lease>,
    stop: &'a CancellationToken,
}

impl Tick<'_> {
    /// Whether this instance still leads, renewing the lease when due. A
    /// loop whose tick makes slow calls asks before each unit of work, so a
    /// lease lost in the middle ends the tick instead of two instances
    /// acting on one thing. A loop without a lease always leads.
    pub async fn leads(&mut self) -> StoreResult<bool> {
        match self.lease.as_deref_mut() {
            Some(lease) => lease.hold(self.store).await,
            None => Ok(true),
        }
    }

    /// Resolves when the daemon stops: a long tick ends early.
    pub fn stop(&self) -> &CancellationToken {
        self.stop
    }
}

/// A background loop: a name, what wakes it, an optional lease, and one
/// look at the work.
pub trait BackgroundLoop: Send {
    /// The loop's name in logs.
    const NAME: &'static str;

    /// What wakes the loop besides its own timer.
    const WAKE: Wake = Wake::ChangesSettled;

    /// Whether a tick in flight is dropped when the daemon stops (a poll of
    /// an outside API that can be made again) instead of finished.
    const ABANDON_ON_STOP: bool = false;

    /// The shortest wait after a failed tick (an outside API that must not
    /// be asked again at once).
    const MIN_BACKOFF: Duration = Duration::ZERO;

    /// The lease the loop must hold to tick, if it runs once per deployment.
    fn lease(&self) -> Option<LeaseSpec> {
        None
    }

    /// Looks at the work once; says when to look again.
    fn tick(&mut self, tick: &mut Tick<'_>) -> impl Future<Output = anyhow::Result<Next>> + Send;

    /// Another event that wakes the loop (the runner: a worker ended).
    /// Never resolves by default.
    fn woken(&mut self) -> impl Future<Output = ()> + Send {
        std::future::pending()
    }

    /// Called once when the loop stops, before its lease is given up (the
    /// runner waits for its supervisors here).
    fn stopped(&mut self) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// Runs a loop until `stop`, as this `instance` (the lease's owner name).
pub async fn drive<L: BackgroundLoop>(
    mut work: L,
    store: Store,
    instance: String,
    stop: CancellationToken,
) {
    // A loop woken only by its timer never watches the database.
    let mut changes = (L::WAKE != Wake::Timer).then(|| store.changes());
    let mut backoff = Backoff::new();
    let mut lease = work
        .lease()
        .map(|spec| Lease::new(spec.name, instance, spec.ttl));
    loop {
        if let Some(changes) = &mut changes {
            changes.mark_seen();
        }
        let wait = match look(&mut work, &store, lease.as_mut(), &stop).await {
            Looked::Stopped => break,
            Looked::Ticked(Ok(Next::Again)) => {
                backoff.succeeded();
                continue;
            }
            Looked::Ticked(Ok(next)) => {
                backoff.succeeded();
                match next {
                    Next::After(wait) => wait,
                    _ => IDLE,
                }
            }
            Looked::Ticked(Err(error)) => {
                // The failure may be the database losing its rows (a
                // restore, a schema dropped): the lease is taken again at
                // the next look, not assumed.
                if let Some(lease) = lease.as_mut() {
                    lease.forget();
                }
                let wait = backoff.failed().max(L::MIN_BACKOFF);
                tracing::error!(
                    error = format!("{error:#}"),
                    wait_ms = wait.as_millis() as u64,
                    "the {} failed; retrying",
                    L::NAME
                );
                wait
            }
            Looked::NotLeading => IDLE,
            Looked::NoLease(error) => {
                let wait = backoff.failed();
                tracing::error!(%error, "cannot take the {}'s lease", L::NAME);
                wait
            }
        };
        // A lease held is renewed in time, however long the loop sleeps.
        let wait = lease.as_ref().map_or(wait, |l| wait.min(l.renew_in()));
        let settle = L::WAKE == Wake::ChangesSettled;
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = changed(changes.as_mut()) => {
                if settle {
                    tokio::time::sleep(SETTLE).await;
                }
            }
            _ = work.woken() => {}
            _ = tokio::time::sleep(wait) => {}
        }
    }
    work.stopped().await;
    if let Some(lease) = &mut lease {
        lease.release(&store).await;
    }
}

/// Takes the loop's lease for one tick (`eagle analyze`, `eagle import`),
/// ticks until there is nothing more to do right now, and gives the lease
/// up. `Ok(false)`: another instance leads, and nothing was done.
pub async fn once<L: BackgroundLoop>(
    work: &mut L,
    store: &Store,
    instance: String,
    stop: &CancellationToken,
) -> anyhow::Result<bool> {
    let mut lease = work
        .lease()
        .map(|spec| Lease::new(spec.name, instance, spec.ttl));
    if let Some(lease) = &mut lease
        && !lease.hold(store).await?
    {
        return Ok(false);
    }
    let result = loop {
        let mut tick = Tick {
            store,
            lease: lease.as_mut(),
            stop,
        };
        match work.tick(&mut tick).await {
            Ok(Next::Again) if !stop.is_cancelled() => continue,
            Ok(_) => break Ok(true),
            Err(error) => break Err(error),
        }
    };
    if let Some(lease) = &mut lease {
        lease.release(store).await;
    }
    result
}

/// The next change, if the loop watches for changes; otherwise never.
async fn changed(changes: Option<&mut crate::store::Changes>) {
    match changes {
        Some(changes) => changes.changed().await,
        None => std::future::pending().await,
    }
}

/// What one look at the work came to.
enum Looked {
    Ticked(anyhow::Result<Next>),
    /// Another instance holds the lease.
    NotLeading,
    NoLease(crate::store::StoreError),
    Stopped,
}

async fn look<L: BackgroundLoop>(
    work: &mut L,
    store: &Store,
    mut lease: Option<&mut Lease>,
    stop: &CancellationToken,
) -> Looked {
    if let Some(lease) = lease.as_deref_mut() {
        match lease.hold(store).await {
            Ok(true) => {}
            Ok(false) => return Looked::NotLeading,
            Err(error) => return Looked::NoLease(error),
        }
    }
    let mut tick = Tick { store, lease, stop };
    if L::ABANDON_ON_STOP {
        tokio::select! {
            result = work.tick(&mut tick) => Looked::Ticked(result),
            _ = stop.cancelled() => Looked::Stopped,
        }
    } else {
        Looked::Ticked(work.tick(&mut tick).await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts its ticks; fails the first `fail` of them.
    struct Counter {
        ticks: std::sync::Arc<std::sync::atomic::AtomicUsize>,
        fail: usize,
        again: usize,
    }

    impl BackgroundLoop for Counter {
        const NAME: &'static str = "counter";
        const WAKE: Wake = Wake::Timer;

        async fn tick(&mut self, _: &mut Tick<'_>) -> anyhow::Result<Next> {
            let n = self.ticks.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if n < self.fail {
                anyhow::bail!("tick {n} fails");
            }
            if n < self.fail + self.again {
                return Ok(Next::Again);
            }
            Ok(Next::After(Duration::from_secs(60)))
        }
    }

    async fn memory_store() -> Store {
        let url = crate::ground::database_url::DatabaseUrl::new("sqlite::memory:");
        Store::open(&url).await.expect("an in-memory store")
    }

    #[tokio::test]
    async fn failures_back_off_and_again_loops_at_once() {
        let store = memory_store().await;
        // Paused once the store is open (its pool must not time out): a
        // loop woken by its timer never touches the store.
        tokio::time::pause();
        let ticks = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let stop = CancellationToken::new();
        let work = Counter {
            ticks: ticks.clone(),
            fail: 2,
            again: 3,
        };
        let task = tokio::spawn(drive(work, store, "test".into(), stop.clone()));
        // Two failures back off (at most the cap each), then three ticks
        // that ask for more run at once, then one that waits a minute.
        let count = || ticks.load(std::sync::atomic::Ordering::SeqCst);
        let mut waited = Duration::ZERO;
        while count() < 6 {
            assert!(
                waited < crate::ground::backoff::CAP * 3,
                "only {} ticks",
                count()
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
            waited += Duration::from_secs(1);
        }
        assert_eq!(count(), 6, "the ticks that ask for more ran at once");
        tokio::time::sleep(Duration::from_secs(58)).await;
        assert_eq!(
            count(),
            6,
            "the seventh waits the minute the sixth asked for"
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(count(), 7);
        stop.cancel();
        task.await.expect("the loop stops");
    }

    #[tokio::test]
    async fn once_ticks_until_nothing_is_left() {
        let store = memory_store().await;
        let ticks = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut work = Counter {
            ticks: ticks.clone(),
            fail: 0,
            again: 2,
        };
        let stop = CancellationToken::new();
        assert!(
            once(&mut work, &store, "test".into(), &stop)
                .await
                .expect("no failure")
        );
        assert_eq!(ticks.load(std::sync::atomic::Ordering::SeqCst), 3);
    }
}
