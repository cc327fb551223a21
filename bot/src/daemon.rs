//! The daemon: one context, one supervisor.
//!
//! `eagle run` (one identity on Zulip), `eagle shell` (both identities in a
//! terminal) and the one-off passes of `eagle analyze` and `eagle import`
//! all start here. A [`Context`] is built once from validated profiles
//! ([`context`]); [`Daemon::start`] runs the loops of the roles it holds in
//! one task set, each driven by [`crate::background::drive`]; a
//! [`Transport`] (Zulip in [`crate::zulip::bot`], the terminal in
//! [`crate::shell`]) carries chat beside them. [`run`] shuts them down in
//! order: the transport stops taking messages, the loops finish what they
//! hold and stop, then the transport delivers what they left.
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

use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::background::{BackgroundLoop, drive};
use crate::profile::Profile;

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

/// No chat: posts wait in the outbox under each profile's own identity,
/// naming people as `eagle run` does on Zulip, which delivers them (the
/// one-off passes of `eagle analyze` and `eagle import`, benchmarks).
#[derive(Debug, Clone, Copy, Default)]
pub struct Offline;

impl Transport for Offline {
    async fn voice(&mut self, profile: &Profile) -> Voice {
        Voice {
            history: None,
            poster: crate::mirror::Poster {
                identity: profile.name.clone(),
                channel: profile.executor_channel.clone(),
            },
            people: crate::mirror::People {
                owner_fallback: profile
                    .owner
                    .as_ref()
                    .map(crate::zulip::bot::fallback_mention),
                approvers: profile.approvers.clone(),
                naming: std::sync::Arc::new(crate::zulip::ZulipNaming),
            },
        }
    }

    /// Nothing to listen to: waits until stopped.
    async fn listen(&mut self, _: &Daemon, stop: &CancellationToken) -> anyhow::Result<()> {
        stop.cancelled().await;
        Ok(())
    }

    async fn finish(self, _: &Daemon) -> anyhow::Result<()> {
        Ok(())
    }
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
            daemon.spawn(reload);
            daemon.spawn(decider);
            daemon.spawn(analyzer);
            daemon.spawn(carrier);
            if let Some(intake) = intake {
                daemon.spawn(intake);
            }
            if let Some(conversations) = conversations {
                daemon.spawn(conversations);
            }
            daemon.spawn(milestones);
            if let Some(digest) = digest {
                daemon.spawn(digest);
            }
            daemon.spawn(pruner);
        }
        if let Some((runner, prs)) = executor {
            daemon.spawn(runner);
            daemon.spawn(prs);
        }
        Ok(daemon)
    }

    fn spawn<L: BackgroundLoop + 'static>(&mut self, work: L) {
        let store = self.ctx.store.clone();
        let instance = self.ctx.instance.clone();
        self.loops
            .spawn(drive(work, store, instance, self.stop.clone()));
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
        let quiet = store.work_in_sight().await? == 0
            && store.pending_count().await? == 0
            && store.open_analyzer_jobs().await?.is_empty()
            && store.prs_to_look_at().await? == 0
            && store.requests_to_carry_out(1).await?.is_empty()
            && (self
                .ctx
                .eagle
                .as_ref()
                .is_none_or(|s| s.profile.conversation.is_none())
                || store.pending_conversations().await? == 0);
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

/// Runs `ctx`'s loops beside `transport` until `stop` (or until the
/// transport is done), then shuts them down in order.
pub async fn run<T: Transport>(
    ctx: Context,
    mut transport: T,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let mut daemon = Daemon::start(ctx)?;
    let listened = transport.listen(&daemon, &stop).await;
    daemon.drain().await;
    let finished = transport.finish(&daemon).await;
    listened.and(finished)
}
