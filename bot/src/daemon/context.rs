//! The daemon's context: everything its loops share, built once at start
//! from validated profiles, and the constructors of each loop from it.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::watch;

use super::Transport;
use crate::eagle::analyzer::Analyzer;
use crate::eagle::decider::{Decider, DeciderSettings};
use crate::eagle::intake::Intake;
use crate::executor::carrier::Carrier;
use crate::executor::pr_loop::PrLoop;
use crate::executor::runner::{Runner, RunnerOptions};
use crate::integrations::asana::Asana;
use crate::integrations::github::GitHub;
use crate::policy::PolicyHost;
use crate::profile::Profile;
use crate::runtime::posts::{People, Poster};
use crate::store::Store;

/// What the daemon is started with: the validated profiles of the roles it
/// runs, an open store, and the `eagle` binary (read by `main`).
#[derive(Debug)]
pub struct Setup {
    pub store: Store,
    /// The `eagle` binary: the worker shim, `eagle request`, the hook.
    pub exe: PathBuf,
    /// Eagle's profile, if Eagle's loops run here (chat, decisions, the
    /// analyzer, what Eagle carries out, Asana intake).
    pub eagle: Option<Profile>,
    /// The executor's profile, if its loops run here (the runner, the PR loop).
    pub executor: Option<Profile>,
    /// Use the built-in demo worker when no worker command is configured
    /// (the shell); otherwise the executor refuses to start without one.
    pub demo_worker: bool,
}

/// How a transport speaks for one profile: the poster its posts about runs
/// go out under, and how they name people.
#[derive(Debug, Clone)]
pub struct Voice {
    pub poster: Poster,
    pub people: People,
    /// What was said in a topic, if the transport can tell (Zulip).
    pub history: Option<Arc<dyn crate::runtime::posts::History>>,
}

/// One identity's share of the context.
#[derive(Debug)]
pub struct Side {
    pub profile: Profile,
    pub voice: Voice,
    /// The client of the profile's `[github]`, if any.
    pub github: Option<GitHub>,
    /// The client of the profile's `[asana]`, if any.
    pub asana: Option<Arc<Asana>>,
}

impl Side {
    async fn build<T: Transport>(
        profile: Profile,
        store: &Store,
        transport: &mut T,
    ) -> anyhow::Result<Side> {
        let github = super::clients::github(&profile, store)?;
        let asana = super::clients::asana(&profile)?;
        let voice = transport.voice(&profile).await;
        Ok(Side {
            profile,
            voice,
            github,
            asana,
        })
    }

    /// The client and settings of `[github]`, together.
    fn github(&self) -> Option<(GitHub, crate::profile::GithubSettings)> {
        let client = self.github.clone()?;
        Some((client, self.profile.github.clone()?))
    }
}

/// Everything the daemon's loops share, built once.
#[derive(Debug)]
pub struct Context {
    pub store: Store,
    /// This process's name in leases and claims ([`crate::ground::host::instance_name`]).
    pub instance: String,
    pub exe: PathBuf,
    pub eagle: Option<Side>,
    pub executor: Option<Side>,
    /// Eagle's policy plugins (loaded when Eagle's side runs here).
    pub policy: Option<PolicyHost>,
    /// The work the runner has in hand (claims, adoptions, workers).
    pub busy: watch::Sender<usize>,
    /// What `/readyz` depends on ([`crate::ops`]).
    pub health: Arc<crate::ops::Health>,
    demo_worker: bool,
}

impl Context {
    /// Builds the context: the clients of each profile, how `transport`
    /// speaks for it, and Eagle's plugins (each one that fails to load is
    /// reported and votes escalate).
    pub async fn build<T: Transport>(setup: Setup, transport: &mut T) -> anyhow::Result<Context> {
        let store = setup.store;
        let eagle = match setup.eagle {
            Some(profile) => Some(Side::build(profile, &store, transport).await?),
            None => None,
        };
        let executor = match setup.executor {
            Some(profile) => Some(Side::build(profile, &store, transport).await?),
            None => None,
        };
        let policy = match &eagle {
            Some(side) => {
                let host = PolicyHost::for_profile(&side.profile).await?;
                for plugin in host.plugins() {
                    tracing::info!(plugin = %plugin.identity, state = %plugin.state, "policy plugin");
                }
                Some(host)
            }
            None => None,
        };
        let identities = [&eagle, &executor]
            .into_iter()
            .flatten()
            .map(|side| side.profile.name.clone())
            .collect();
        let health = crate::ops::Health::new(store.clone(), identities);
        Ok(Context {
            store,
            health,
            instance: crate::ground::host::instance_name(),
            exe: setup.exe,
            eagle,
            executor,
            policy,
            busy: watch::Sender::new(0),
            demo_worker: setup.demo_worker,
        })
    }

    /// The distinct addresses the profiles ask metrics and health to be
    /// served on (`[ops] listen`).
    pub fn ops_addresses(&self) -> Vec<std::net::SocketAddr> {
        let mut addrs: Vec<_> = [&self.eagle, &self.executor]
            .into_iter()
            .flatten()
            .filter_map(|side| side.profile.ops.listen)
            .collect();
        addrs.dedup();
        addrs
    }

    /// Eagle's side and its plugins, for the loops that need both.
    fn eagle(&self) -> anyhow::Result<(&Side, &PolicyHost)> {
        match (&self.eagle, &self.policy) {
            (Some(side), Some(policy)) => Ok((side, policy)),
            _ => anyhow::bail!("Eagle's profile is not part of this daemon"),
        }
    }

    /// Eagle's decider.
    pub fn decider(&self) -> anyhow::Result<Decider> {
        let (side, policy) = self.eagle()?;
        Ok(Decider {
            store: self.store.clone(),
            policy: policy.clone(),
            poster: side.voice.poster.clone(),
            people: side.voice.people.clone(),
            settings: DeciderSettings {
                reminder_after: side.profile.eagle.decisions.reminder_after,
                approval_ttl: side.profile.eagle.decisions.approval_ttl,
                keep_drafts: side.profile.github.as_ref().is_some_and(|g| g.keep_drafts),
            },
        })
    }

    /// Eagle's analyzer.
    pub fn analyzer(&self) -> anyhow::Result<Analyzer> {
        let (side, policy) = self.eagle()?;
        Analyzer::new(
            &side.profile,
            self.store.clone(),
            policy.clone(),
            side.voice.poster.clone(),
            side.voice.people.clone(),
            &self.exe,
        )
    }

    /// What Eagle carries out for approved requests.
    pub fn carrier(&self) -> anyhow::Result<Carrier> {
        let (side, _) = self.eagle()?;
        Ok(Carrier::new(
            self.store.clone(),
            side.voice.poster.clone(),
            side.github(),
            side.asana.clone(),
            self.instance.clone(),
        ))
    }

    /// Asana intake, if Eagle's profile has `[asana]`.
    pub fn intake(&self) -> anyhow::Result<Option<Intake>> {
        let side = self
            .eagle
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("Eagle's profile is not part of this daemon"))?;
        let (Some(asana), Some(settings)) = (&side.asana, &side.profile.eagle.asana) else {
            return Ok(None);
        };
        Ok(Some(Intake::new(
            self.store.clone(),
            Arc::clone(asana),
            settings.clone(),
        )))
    }

    /// Eagle's conversation loop, when the profile names a language backend.
    pub fn conversations(
        &self,
    ) -> anyhow::Result<Option<crate::chat::conversation::Conversations>> {
        let (side, _) = self.eagle()?;
        let Some(settings) = &side.profile.eagle.conversation else {
            return Ok(None);
        };
        crate::chat::conversation::Conversations::new(
            self.store.clone(),
            settings.clone(),
            side.profile.display_name.clone(),
            side.profile.executor_channel.clone(),
            self.instance.clone(),
            side.voice.history.clone(),
        )
        .map(Some)
        .map_err(|why| anyhow::anyhow!("profile {}: conversation: {why}", side.profile.name))
    }

    /// Eagle's milestone lines in each task's own conversation.
    pub fn milestones(&self) -> anyhow::Result<crate::chat::milestones::Milestones> {
        let (side, _) = self.eagle()?;
        Ok(crate::chat::milestones::Milestones::new(
            self.store.clone(),
            side.voice.poster.clone(),
            side.profile.executor_channel.clone(),
        ))
    }

    /// Eagle's daily digest for its owner, when the profile asks for one.
    pub fn digest(&self) -> anyhow::Result<Option<crate::chat::digest::Digest>> {
        let (side, _) = self.eagle()?;
        Ok(side.profile.eagle.digest.as_ref().map(|settings| {
            crate::chat::digest::Digest::new(
                self.store.clone(),
                side.voice.poster.clone(),
                settings.clone(),
                side.voice.people.owner_fallback.clone(),
            )
        }))
    }

    /// Eagle's daily pruner, with the profile's `[store] prune_after`.
    pub fn pruner(&self) -> anyhow::Result<crate::eagle::pruner::Pruner> {
        let (side, _) = self.eagle()?;
        Ok(crate::eagle::pruner::Pruner::new(
            self.store.clone(),
            side.profile.eagle.prune_after,
        ))
    }

    /// The executor's side.
    fn executor(&self) -> anyhow::Result<&Side> {
        self.executor
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("the executor's profile is not part of this daemon"))
    }

    /// The executor's runner.
    pub fn runner(&self) -> anyhow::Result<Runner> {
        let side = self.executor()?;
        Runner::new(
            &side.profile,
            self.store.clone(),
            RunnerOptions {
                poster: side.voice.poster.clone(),
                people: side.voice.people.clone(),
                demo_if_unset: self.demo_worker,
                exe: self.exe.clone(),
                busy: self.busy.clone(),
            },
        )
    }

    /// The executor's PR loop.
    pub fn pr_loop(&self) -> anyhow::Result<PrLoop> {
        let side = self.executor()?;
        Ok(PrLoop::new(
            self.store.clone(),
            side.voice.poster.clone(),
            side.voice.people.clone(),
            side.github(),
        ))
    }
}
