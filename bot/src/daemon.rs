//! The daemon: one context, one supervisor.
//!
//! `eagle run` (one identity on Zulip), `eagle shell` (both identities in a
//! terminal) and the one-off passes of `eagle analyze` and `eagle import`
//! all start here. A [`Context`] is built once from validated profiles
//! ([`context`]); [`Daemon::start`] runs the loops of the roles it holds in
//! one task set, each driven by [`crate::runtime::background::drive`]; a
//! [`Transport`] (Zulip in [`crate::transport::zulip::bot`], the terminal in
//! [`crate::transport::shell`]) carries chat beside them. [`run`] shuts them down in
//! order: the transport stops taking messages, the loops finish what they
//! hold and stop (within [`DRAIN_BOUND`]), then the transport delivers what
//! they left (the Zulip sender for at most 15 s), and one log line says what
//! is left: the runs whose workers go on, the outbox entries not delivered.
//!
//! ```text
//!   transport.voice(profile)  →  Context::build  →  Daemon::start (loops)
//!   transport.listen(…)       ←  chat in, replies out, until stopped
//!   Daemon::drain             →  loops finish and stop
//!   transport.finish(…)       →  the outbox they left is delivered
//! ```

pub mod clients;
pub mod context;
pub mod plugins;

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::profile::Profile;
use crate::runtime::background::{BackgroundLoop, drive};

pub use context::{Context, Setup, Side, Voice};

/// What carries chat for the daemon: the Zulip bot or the terminal.
pub trait Transport {
    /// How this transport speaks for `profile`: under which outbox identity
    /// its posts about runs go out, and how they name people (on Zulip, the
    /// owner's @-mention is looked up here, before any loop starts).
    fn voice(&mut self, profile: &Profile) -> impl Future<Output = Voice>;

    /// Takes chat messages until `stop`, or until the transport has nothing
    /// more to listen to (the shell's input ended and the work in sight is
    /// done). An error is what restarting cannot fix (refused credentials).
    fn listen(
        &mut self,
        daemon: &Daemon,
        stop: &CancellationToken,
    ) -> impl Future<Output = anyhow::Result<()>>;

    /// After the loops stopped: delivers what they left, then ends.
    fn finish(self, daemon: &Daemon) -> impl Future<Output = anyhow::Result<()>>;
}

/// The loops of one process, running.
#[derive(Debug)]
pub struct Daemon {
    ctx: Context,
    loops: JoinSet<()>,
    /// Stops the loops (not the transport).
    stop: CancellationToken,
}

impl Daemon {
    /// Starts the loops of every role `ctx` holds: for Eagle, the plugin
    /// reloader, the decider, the analyzer, the carrier, (with `[asana]`)
    /// intake, the conversations, milestones, digest and the pruner; for
    /// the executor, the runner and the PR loop.
    pub fn start(ctx: Context) -> anyhow::Result<Daemon> {
        // Everything is built before anything starts: a setting that is
        // wrong stops the daemon before one loop ran.
        let eagle = match &ctx.policy {
            Some(policy) => Some((
                plugins::PluginReload {
                    host: policy.clone(),
                    announce: ctx.eagle.as_ref().map(|side| plugins::Announce {
                        store: ctx.store.clone(),
                        poster: side.voice.poster.clone(),
                        people: side.voice.people.clone(),
                    }),
                },
                ctx.decider()?,
                ctx.analyzer()?,
                ctx.carrier()?,
                ctx.intake()?,
                ctx.conversations()?,
                ctx.milestones()?,
                ctx.digest()?,
                ctx.pruner()?,
            )),
            None => None,
        };
        let executor = match &ctx.executor {
            Some(_) => Some((ctx.runner()?, ctx.pr_loop()?)),
            None => None,
        };
        let mut daemon = Daemon {
            ctx,
            loops: JoinSet::new(),
            stop: CancellationToken::new(),
        };
        let name = |side: &Option<context::Side>| {
            side.as_ref()
                .map_or_else(String::new, |s| s.profile.name.clone())
        };
        let (eagle_name, executor_name) = (name(&daemon.ctx.eagle), name(&daemon.ctx.executor));
        if let Some((
            reload,
            decider,
            analyzer,
            carrier,
            intake,
            conversations,
            milestones,
            digest,
            pruner,
        )) = eagle
        {
            daemon.spawn(&eagle_name, reload);
            daemon.spawn(&eagle_name, decider);
            daemon.spawn(&eagle_name, analyzer);
            daemon.spawn(&eagle_name, carrier);
            if let Some(intake) = intake {
                daemon.spawn(&eagle_name, intake);
            }
            if let Some(conversations) = conversations {
                daemon.spawn(&eagle_name, conversations);
            }
            daemon.spawn(&eagle_name, milestones);
            if let Some(digest) = digest {
                daemon.spawn(&eagle_name, digest);
            }
            daemon.spawn(&eagle_name, pruner);
        }
        if let Some((runner, prs)) = executor {
            daemon.spawn(&executor_name, runner);
            daemon.spawn(&executor_name, prs);
        }
        Ok(daemon)
    }

    /// Starts one loop of `profile`'s role.
    fn spawn<L: BackgroundLoop + 'static>(&mut self, profile: &str, work: L) {
        if let Some(lease) = work.lease() {
            self.ctx.health.expect_lease(lease.name);
        }
        let store = self.ctx.store.clone();
        let instance = self.ctx.instance.clone();
        let span = tracing::info_span!("loop", profile, name = L::NAME);
        self.loops.spawn(tracing::Instrument::instrument(
            drive(work, store, instance, self.stop.clone()),
            span,
        ));
    }

    /// The context the loops share.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The work the runner has in hand, as it changes.
    pub fn busy(&self) -> watch::Receiver<usize> {
        self.ctx.busy.subscribe()
    }

    /// Whether nothing is left that would happen without a human: no
    /// worker running or about to start, nothing for Eagle to decide,
    /// analyse, carry out or post, no PR not looked at. The store is read
    /// first and the runner's count after: a claim is counted from before
    /// it is taken, so no claim can slip between the two.
    pub async fn idle(&self) -> crate::store::Result<bool> {
        let store = &self.ctx.store;
        let quiet = store.claims().work_in_sight().await? == 0
            && store.analyses().pending_count().await? == 0
            && store.analyses().open_analyzer_jobs().await?.is_empty()
            && store.prs().prs_to_look_at().await? == 0
            && store.carried().requests_to_carry_out(1).await?.is_empty()
            && (self
                .ctx
                .eagle
                .as_ref()
                .is_none_or(|s| s.profile.eagle.conversation.is_none())
                || store.conversations().pending_conversations().await? == 0);
        Ok(quiet && *self.ctx.busy.borrow() == 0)
    }

    /// Stops taking work and waits until every loop has finished what it
    /// holds (workers go on in their own sessions; the next runner on the
    /// host re-adopts them).
    pub async fn drain(&mut self) {
        self.stop.cancel();
        while let Some(joined) = self.loops.join_next().await {
            if let Err(error) = joined {
                tracing::error!(%error, "a background loop failed");
            }
        }
    }
}

/// How long the loops get, once stopped, to finish what they hold. A loop
/// still busy then (a slow outside call) is dropped: what it did is in the
/// database, what it did not is taken up at the next start. With the
/// outbox's flush this bounds a clean stop; the systemd unit's
/// `TimeoutStopSec` (60 s) is above both.
pub const DRAIN_BOUND: Duration = Duration::from_secs(30);

/// Runs `ctx`'s loops beside `transport` until `stop` (or until the
/// transport is done), then shuts them down in order.
pub async fn run<T: Transport>(
    ctx: Context,
    mut transport: T,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    // Bound before anything starts: a port in use is a setting to fix.
    let mut listeners = Vec::new();
    for addr in ctx.ops_addresses() {
        listeners.push(crate::ops::Listener::bind(addr, ctx.health.clone()).await?);
    }
    let ops_stop = CancellationToken::new();
    let mut ops = JoinSet::new();
    if !listeners.is_empty() {
        ops.spawn(ctx.health.clone().keep_probing(ops_stop.clone()));
    }
    for listener in listeners {
        ops.spawn(listener.serve(ops_stop.clone()));
    }
    let mut daemon = Daemon::start(ctx)?;
    let listened = transport.listen(&daemon, &stop).await;
    if tokio::time::timeout(DRAIN_BOUND, daemon.drain())
        .await
        .is_err()
    {
        tracing::warn!(
            bound_secs = DRAIN_BOUND.as_secs(),
            "loops still busy at the stop bound: stopping without them"
        );
        daemon.abort().await;
    }
    let finished = transport.finish(&daemon).await;
    daemon.tell_what_is_left().await;
    ops_stop.cancel();
    while ops.join_next().await.is_some() {}
    listened.and(finished)
}

impl Daemon {
    /// Drops the loops that did not stop in time.
    async fn abort(&mut self) {
        self.loops.abort_all();
        while self.loops.join_next().await.is_some() {}
    }

    /// After the stop: the runs of this process whose workers go on (the
    /// next runner on this host re-adopts them) and the posts not delivered
    /// (the next start sends them), in one log line.
    async fn tell_what_is_left(&self) {
        let ctx = &self.ctx;
        let following = match &ctx.executor {
            None => 0,
            Some(_) => match ctx
                .store
                .claims()
                .runs_claimed_on(&crate::ground::host::host_id())
                .await
            {
                Ok(runs) => runs
                    .iter()
                    .filter(|r| {
                        r.lease_owner.as_deref() == Some(ctx.instance.as_str())
                            && r.worker_pid.is_some()
                            && r.worker_exit_code.is_none()
                    })
                    .count(),
                Err(error) => {
                    tracing::warn!(%error, "cannot count the runs left");
                    0
                }
            },
        };
        let mut identities: Vec<&str> = [&ctx.eagle, &ctx.executor]
            .into_iter()
            .flatten()
            .map(|side| side.voice.poster.identity.as_str())
            .collect();
        identities.dedup();
        let mut undelivered = 0;
        for identity in identities {
            match ctx.store.outbox().undelivered_count(identity).await {
                Ok(n) => undelivered += n,
                Err(error) => tracing::warn!(%error, identity, "cannot count the outbox"),
            }
        }
        tracing::info!(
            runs_following_on = following,
            outbox_undelivered = undelivered,
            "stopped; left: runs whose workers go on (re-adopted at the next start), \
             outbox entries undelivered (sent at the next start)"
        );
    }
}
