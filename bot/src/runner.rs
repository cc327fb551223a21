//! The runner (the executor profile): claims runs, starts one worker each,
//! watches them, and relays what they say.
//!
//! * [`Runner::run`] re-adopts this host's workers that outlived a previous
//!   runner (or rescues the dead ones), then claims queued and resumable runs
//!   up to the global `max_workers` ([`crate::store::Store::claim_run`]) and
//!   starts a worker for each ([`spawn`]).
//! * [`supervise`] follows one worker: its work log (protocol lines relayed
//!   to the run's topic, requests recorded), its process (exit status through
//!   the worker shim), the watchdogs (no output, hard limit), holds and
//!   cancels, and the claim's heartbeat. Every write is fenced by the claim.
//! * [`socket`] answers the worker's `eagle request` and Claude Code hook
//!   calls on a per-run socket, with a per-attempt token; decisions come
//!   from Eagle through the database.
//!
//! Workers get an allow-listed environment, their own process group
//! (`setsid`), working directory and home, and, with `runner.worker_user`,
//! their own Unix user: never the database, a zuliprc or Eagle's keys.

pub mod hook;
pub mod output;
pub mod prompts;
mod socket;
mod spawn;
mod supervise;
pub mod wire;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::host;
use crate::mirror::{People, Poster};
use crate::profile::{Profile, RunnerSettings, WorkerCommand, WorkerKind};
use crate::store::{ClaimLimits, RUNNER_PRESENCE_PREFIX as PRESENCE_PREFIX, Store};

pub use prompts::{PromptKind, Prompts};
pub(crate) use spawn::fill;

/// How often the runner looks for work when nothing wakes it.
const PERIODIC: Duration = Duration::from_secs(5);
/// How long a claim lasts without a heartbeat.
const LEASE: Duration = Duration::from_secs(30);
/// How long the runner's presence lease (for `!status`) lasts.
const PRESENCE: Duration = Duration::from_secs(60);

/// What every part of the runner shares.
#[derive(Debug)]
pub struct Shared {
    pub store: Store,
    pub settings: RunnerSettings,
    /// The worker command in use (the configured one, or the demo worker).
    pub command: WorkerCommand,
    /// Posts under the executor's identity.
    pub poster: Poster,
    pub people: People,
    pub prompts: Prompts,
    /// This host ([`host::host_id`]) and this runner's lease name.
    pub host: String,
    pub instance: String,
    /// The `eagle` binary: the worker shim, `eagle request`, the hook.
    pub exe: PathBuf,
    pub worker_user: Option<host::UnixUser>,
    pub runs_dir: PathBuf,
    pub logs_dir: PathBuf,
    pub data_dir: PathBuf,
    /// Eagle's environment, for the variables workers may see.
    pub env: BTreeMap<String, String>,
    /// How many workers this runner supervises now.
    pub active: watch::Sender<usize>,
}

impl Shared {
    pub fn limits(&self) -> ClaimLimits {
        let longest_hard = self
            .settings
            .kind_limits
            .values()
            .map(|l| l.hard)
            .chain([self.settings.limits.hard])
            .max()
            .unwrap_or(self.settings.limits.hard);
        ClaimLimits {
            max_workers: self.settings.max_workers,
            lease: LEASE,
            alive_for: shim_deadline(longest_hard, self.settings.wrap_up_grace)
                + Duration::from_secs(60),
            cost_cap: self.settings.max_cost_usd,
        }
    }

    /// `runner:<instance>`: what this runner calls itself in the audit log.
    pub fn actor(&self) -> String {
        format!("runner:{}", self.instance)
    }
}

/// When the worker shim ends its worker by itself if the runner is gone:
/// past the hard limit and the wrap-up grace, with a margin.
pub fn shim_deadline(hard: Duration, grace: Duration) -> Duration {
    hard + grace + Duration::from_secs(30)
}

/// How the runner is set up.
#[derive(Debug, Clone)]
pub struct RunnerOptions {
    /// The outbox identity the executor posts under.
    pub identity: String,
    pub people: People,
    /// Use the built-in demo worker when no worker command is configured
    /// (the shell); otherwise that is an error.
    pub demo_if_unset: bool,
    /// The `eagle` binary workers use (the shim, `eagle request`); by
    /// default the running one. A program that embeds the runner names it.
    pub exe: Option<PathBuf>,
}

/// The runner of one executor process.
#[derive(Debug, Clone)]
pub struct Runner {
    shared: Arc<Shared>,
}

/// The demo worker's command: `eagle demo-worker {prompt}`.
pub fn demo_command(exe: &std::path::Path) -> WorkerCommand {
    WorkerCommand {
        template: "eagle demo-worker {prompt}".into(),
        argv: vec![
            exe.display().to_string(),
            "demo-worker".into(),
            "{prompt}".into(),
        ],
        kind: WorkerKind::Generic,
    }
}

/// What `eagle run` and `eagle check` say when no worker command is set.
pub const NO_WORKER_COMMAND: &str = "no worker command: set runner.worker_command in the executor profile \
     (e.g. worker_command = \"claude -p {prompt} --output-format stream-json --verbose\"), \
     or EAGLE_RUNNER__WORKER_COMMAND";

impl Runner {
    /// Sets a runner up from the executor profile: the worker command, the
    /// prompts, the worker user, the directories. Fails with what to fix.
    pub fn new(
        profile: &Profile,
        store: Store,
        options: RunnerOptions,
        env: BTreeMap<String, String>,
    ) -> anyhow::Result<Runner> {
        let exe = match options.exe {
            Some(exe) => exe,
            None => std::env::current_exe().context("cannot tell where the eagle binary is")?,
        };
        let command = match (&profile.runner.worker_command, options.demo_if_unset) {
            (Some(command), _) => command.clone(),
            (None, true) => demo_command(&exe),
            (None, false) => anyhow::bail!("profile {}: {NO_WORKER_COMMAND}", profile.name),
        };
        let prompts = Prompts::load(profile.runner.prompts_dir.as_deref())
            .map_err(|e| anyhow::anyhow!("profile {}: {e}", profile.name))?;
        let worker_user = match &profile.runner.worker_user {
            None => None,
            Some(name) => {
                let user = host::lookup_user(name)
                    .with_context(|| format!("cannot look up runner.worker_user {name:?}"))?
                    .ok_or_else(|| {
                        anyhow::anyhow!(
                            "profile {}: runner.worker_user {name:?} does not exist \
                             (create it: useradd --system --create-home {name})",
                            profile.name
                        )
                    })?;
                if user.uid == host::euid() {
                    None
                } else {
                    if host::euid() != 0 {
                        anyhow::bail!(
                            "profile {}: runner.worker_user {name:?} is another user, so Eagle must run as root \
                             (or with CAP_SETUID and CAP_SETGID) to start workers as it",
                            profile.name
                        );
                    }
                    Some(user)
                }
            }
        };
        let shared = Shared {
            store,
            settings: profile.runner.clone(),
            command,
            poster: Poster {
                identity: options.identity,
                channel: profile.executor_channel.clone(),
            },
            people: options.people,
            prompts,
            host: host::host_id(),
            instance: host::instance_name(),
            exe,
            worker_user,
            runs_dir: profile.runs_dir(),
            logs_dir: profile.logs_dir(),
            data_dir: profile.data_dir.clone(),
            env,
            active: watch::Sender::new(0),
        };
        Ok(Runner {
            shared: Arc::new(shared),
        })
    }

    /// How many workers this runner supervises now, as it changes.
    pub fn active(&self) -> watch::Receiver<usize> {
        self.shared.active.subscribe()
    }

    /// The shared state (for tests and the shell).
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Runs until `shutdown`. Workers keep running after it (in their own
    /// process groups): the next runner on this host re-adopts them.
    pub async fn run(&self, shutdown: CancellationToken) {
        let shared = &self.shared;
        if let Err(error) = spawn::prepare_dirs(shared) {
            tracing::error!(%error, "cannot prepare the runs and logs directories");
        }
        let mut workers = tokio::task::JoinSet::new();
        let mut changes = shared.store.changes();
        for (run, fence) in self.adoptable().await {
            let shared = Arc::clone(shared);
            let stop = shutdown.clone();
            shared.active.send_modify(|n| *n += 1);
            workers.spawn(async move {
                supervise::adopt(&shared, run, fence, stop).await;
                shared.active.send_modify(|n| *n = n.saturating_sub(1));
            });
        }
        let mut backoff = crate::backoff::Backoff::new();
        let mut announced: Option<tokio::time::Instant> = None;
        loop {
            changes.mark_seen();
            // A write wakes every watcher: renew the presence only now and then.
            if announced.is_none_or(|at| at.elapsed() >= PRESENCE / 3) {
                self.announce().await;
                announced = Some(tokio::time::Instant::now());
            }
            let mut wait = PERIODIC;
            loop {
                match shared
                    .store
                    .claim_run(&shared.instance, &shared.limits())
                    .await
                {
                    Ok(Some(claim)) => {
                        backoff.succeeded();
                        let shared = Arc::clone(shared);
                        let stop = shutdown.clone();
                        shared.active.send_modify(|n| *n += 1);
                        workers.spawn(async move {
                            supervise::start(&shared, claim, stop).await;
                            shared.active.send_modify(|n| *n = n.saturating_sub(1));
                        });
                    }
                    Ok(None) => break,
                    Err(error) => {
                        wait = backoff.failed();
                        tracing::error!(%error, "cannot claim runs; retrying");
                        break;
                    }
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = changes.changed() => {}
                Some(_) = workers.join_next() => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
        while workers.join_next().await.is_some() {}
        let _ = shared
            .store
            .release_lease(
                &format!("{PRESENCE_PREFIX}{}", shared.instance),
                &shared.instance,
            )
            .await;
    }

    /// Keeps this runner's presence lease fresh (`!status` counts runners).
    async fn announce(&self) {
        let name = format!("{PRESENCE_PREFIX}{}", self.shared.instance);
        if let Err(error) = self
            .shared
            .store
            .acquire_lease(&name, &self.shared.instance, PRESENCE)
            .await
        {
            tracing::warn!(%error, "cannot record that this runner is alive");
        }
    }

    /// Runs claimed by a runner on this host that is gone: taken over, to
    /// follow their live workers again or to record how they ended.
    async fn adoptable(&self) -> Vec<(crate::store::Run, crate::store::Fence)> {
        let shared = &self.shared;
        let runs = match shared.store.runs_claimed_on(&shared.host).await {
            Ok(runs) => runs,
            Err(error) => {
                tracing::error!(%error, "cannot list the runs claimed on this host");
                return Vec::new();
            }
        };
        let mut adopted = Vec::new();
        for run in runs {
            let owner = run.lease_owner.clone().unwrap_or_default();
            if owner != shared.instance && !host::holder_is_dead(&owner) {
                // Another live runner on this host has it.
                continue;
            }
            let fence = async {
                let mut tx = shared.store.begin_write().await?;
                let fence = tx
                    .adopt_run(&run, &shared.instance, &shared.limits())
                    .await?;
                tx.commit().await?;
                Ok::<_, crate::store::StoreError>(fence)
            };
            match fence.await {
                Ok(Some(fence)) => {
                    tracing::info!(
                        run = run.id,
                        attempt = run.attempt,
                        "re-adopting a run whose runner is gone"
                    );
                    adopted.push((run, fence));
                }
                Ok(None) => {}
                Err(error) => tracing::error!(%error, run = run.id, "cannot adopt a run"),
            }
        }
        adopted
    }
}

/// How serious a finding of `eagle check` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Ok,
    Warn,
    Fail,
}

/// What `eagle check` says about running workers and keeping Eagle's
/// secrets from them: the worker command, the worker user, and who can read
/// the database, the profiles and the zuliprc.
pub fn checks(profile: &Profile) -> Vec<(Severity, String)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    if profile.role == crate::profile::Role::Executor {
        match &profile.runner.worker_command {
            Some(command) => out.push((
                Severity::Ok,
                format!("worker command: {} ({:?})", command.template, command.kind),
            )),
            None => out.push((Severity::Fail, NO_WORKER_COMMAND.to_string())),
        }
        match profile.runner.worker_user.as_deref().map(host::lookup_user) {
            None => out.push((
                Severity::Warn,
                "workers run as Eagle's own user: a worker could read what Eagle reads (the \
                 database, the zuliprc); set runner.worker_user (README.md, \"Workers\")"
                    .into(),
            )),
            Some(Ok(Some(user))) if user.uid == host::euid() => out.push((
                Severity::Warn,
                format!(
                    "runner.worker_user {} is Eagle's own user: workers could read what Eagle reads",
                    user.name
                ),
            )),
            Some(Ok(Some(user))) if host::euid() != 0 => out.push((
                Severity::Fail,
                format!(
                    "runner.worker_user {} is another user, but Eagle does not run as root: it cannot start workers as it",
                    user.name
                ),
            )),
            Some(Ok(Some(user))) => out.push((
                Severity::Ok,
                format!("workers run as {} (uid {})", user.name, user.uid),
            )),
            Some(Ok(None)) => out.push((
                Severity::Fail,
                format!(
                    "runner.worker_user {:?} does not exist (useradd --system --create-home {0})",
                    profile.runner.worker_user.as_deref().unwrap_or_default()
                ),
            )),
            Some(Err(error)) => out.push((Severity::Fail, format!("cannot look up runner.worker_user: {error}"))),
        }
        if let Err(error) = Prompts::load(profile.runner.prompts_dir.as_deref()) {
            out.push((Severity::Fail, error));
        }
    }
    let mut private = |what: &str, path: &std::path::Path| {
        if let Ok(meta) = std::fs::metadata(path) {
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o044 != 0 {
                out.push((
                    Severity::Warn,
                    format!(
                        "{what} {} is readable by other users (mode {mode:o}): chmod 600 it",
                        path.display()
                    ),
                ));
            }
        }
    };
    if !profile.database_url.is_postgres() {
        private("the database", &profile.data_dir.join("eagle.db"));
    }
    private("the zuliprc", &profile.zuliprc);
    private("the profile", &profile.path);
    out
}
