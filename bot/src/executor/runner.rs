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

mod attempt;
mod checks;
mod effects;
pub mod hook;
pub mod interception;
pub mod output;
pub mod prompts;
pub mod review;
pub mod setup;
mod socket;
mod spawn;
mod supervise;

pub use checks::{Severity, checks, sandbox_check};
pub use interception::CLAUDE_CALLS;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::ground::host;
use crate::profile::{Profile, RunnerSettings, WorkerCommand, WorkerKind};
use crate::runtime::background::{BackgroundLoop, Next, Tick, Wake};
use crate::runtime::posts::{People, Poster};
use crate::store::{ClaimLimits, RUNNER_PRESENCE_PREFIX as PRESENCE_PREFIX, Store};

pub use prompts::{PromptKind, Prompts};
pub(crate) use spawn::{fill_argv, prompt_input};

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
    /// The work this runner has in hand (see [`RunnerOptions::busy`]).
    pub active: watch::Sender<usize>,
    /// How workers are confined; `None`: unconfined (`[runner.sandbox] mode = "off"`).
    pub sandbox: Option<crate::confine::sandbox::Confinement>,
    /// How confined workers' egress proxies read TLS (Eagle's authority,
    /// their own TLS); `None` when workers run unconfined.
    pub interception: Option<Arc<crate::confine::egress::Interception>>,
    /// The model API whose key the proxies set: the workers hold a
    /// placeholder ([`RunnerSettings::model`]).
    pub model: Option<Arc<crate::confine::egress::model::ModelGate>>,
    /// The executor's profile: what its repositories are announced under.
    pub profile_name: String,
    /// `[github]`'s credential, for Eagle's git over HTTPS.
    pub github_token: Option<crate::executor::repos::git::GitHubToken>,
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
    /// Posts under the executor's identity.
    pub poster: Poster,
    pub people: People,
    /// Use the built-in demo worker when no worker command is configured
    /// (the shell); otherwise that is an error.
    pub demo_if_unset: bool,
    /// The `eagle` binary workers use (the shim, `eagle request`).
    pub exe: PathBuf,
    /// Counts the work this runner has in hand: a claim from the moment it
    /// is taken, an adoption from the moment it is tried, each worker until
    /// its supervisor ends.
    pub busy: watch::Sender<usize>,
}

/// The runner of one executor process: a background loop that claims runs
/// and keeps one supervisor task per worker as its children.
#[derive(Debug)]
pub struct Runner {
    shared: Arc<Shared>,
    workers: tokio::task::JoinSet<()>,
    /// Whether this runner looked for workers left by a runner that is gone.
    adopted: bool,
    /// When the presence lease was last renewed.
    announced: Option<tokio::time::Instant>,
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

/// How this runner confines its workers: probed at start (fail closed:
/// where the kernel cannot confine, the runner does not start unless the
/// profile says `mode = "off"`).
fn confinement(
    profile: &Profile,
    exe: &std::path::Path,
    user: Option<&host::UnixUser>,
) -> anyhow::Result<Option<crate::confine::sandbox::Confinement>> {
    let Some(limits) = crate::confine::sandbox::limits_of(profile) else {
        tracing::warn!(
            profile = %profile.name,
            "workers run UNCONFINED: [runner.sandbox] mode = \"off\" (they can read and write what their user can, and reach the network)"
        );
        return Ok(None);
    };
    match crate::confine::sandbox::probe(exe, user) {
        Ok(what) => {
            tracing::info!(profile = %profile.name, sandbox = %what, "workers run confined");
            Ok(Some(crate::confine::sandbox::Confinement::of(
                profile, limits,
            )))
        }
        Err(why) => anyhow::bail!(
            "profile {}: workers cannot be confined on this host ({why}); \
             Eagle does not start them unconfined unless [runner.sandbox] says mode = \"off\"",
            profile.name
        ),
    }
}

/// What `eagle run` and `eagle check` say when no worker command is set.
pub const NO_WORKER_COMMAND: &str = "no worker command: set runner.worker_command in the executor profile \
     (e.g. worker_command = \"claude -p {prompt} --output-format stream-json --verbose\"), \
     or EAGLE_RUNNER__WORKER_COMMAND";

/// What Eagle says when it would start workers as root.
pub const WORKERS_AS_ROOT: &str = "workers would run as root (Eagle runs as root and runner.worker_user is \
     unset or root): set runner.worker_user to a user of their own (useradd --system --create-home \
     --shell /usr/sbin/nologin eagle-worker; README.md, \"Isolation\")";

impl Runner {
    /// Sets a runner up from the executor profile: the worker command, the
    /// prompts, the worker user, the directories. Fails with what to fix.
    pub fn new(profile: &Profile, store: Store, options: RunnerOptions) -> anyhow::Result<Runner> {
        let exe = options.exe;
        let (command, demo) = match (
            &profile.executor.runner.worker_command,
            options.demo_if_unset,
        ) {
            (Some(command), _) => (command.clone(), false),
            (None, true) => (demo_command(&exe), true),
            (None, false) => anyhow::bail!("profile {}: {NO_WORKER_COMMAND}", profile.name),
        };
        let prompts = Prompts::load(profile.executor.runner.prompts_dir.as_deref())
            .map_err(|e| anyhow::anyhow!("profile {}: {e}", profile.name))?;
        let worker_user = match &profile.executor.runner.worker_user {
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
        // The built-in demo worker is Eagle's own code; anything else is
        // driven by untrusted text and never runs as root.
        if worker_user.is_none() && host::euid() == 0 && !demo {
            anyhow::bail!("profile {}: {WORKERS_AS_ROOT}", profile.name);
        }
        // Runs live where the worker's user can reach them, or nothing starts.
        if let Some(user) = &worker_user
            && let Some(blocked) = spawn::blocking_dir(&profile.runs_dir(), &profile.data_dir)
        {
            anyhow::bail!(
                "profile {}: {}",
                profile.name,
                blocked.message(&user.name, &profile.runs_dir())
            );
        }
        let sandbox = confinement(profile, &exe, worker_user.as_ref())?;
        let (interception, model) = match &sandbox {
            None => (None, None),
            Some(_) => {
                let (interception, model) =
                    interception::of(&profile.executor.runner, command.kind, &profile.data_dir)
                        .with_context(|| {
                            format!("profile {}: the egress proxy's TLS", profile.name)
                        })?;
                (Some(interception), model)
            }
        };
        // Eagle's git over HTTPS uses [github]'s credential (a token, or the
        // App's installation token for the repository).
        let github_token = match &profile.github {
            None => None,
            Some(settings) => {
                let auth = crate::integrations::github::GitHubAuth::of_settings(settings)
                    .map_err(|e| anyhow::anyhow!("profile {}: [github]: {e}", profile.name))?;
                Some(crate::executor::repos::git::GitHubToken(Arc::new(
                    move |repo| {
                        let auth = auth.clone();
                        Box::pin(async move {
                            auth.token_for(repo.as_ref())
                                .await
                                .map_err(|e| e.to_string())
                        })
                    },
                )))
            }
        };
        let shared = Shared {
            sandbox,
            interception,
            model,
            store,
            settings: profile.executor.runner.clone(),
            command,
            poster: options.poster,
            people: options.people,
            prompts,
            host: host::host_id(),
            instance: host::instance_name(),
            exe,
            worker_user,
            runs_dir: profile.runs_dir(),
            logs_dir: profile.logs_dir(),
            data_dir: profile.data_dir.clone(),
            active: options.busy,
            profile_name: profile.name.clone(),
            github_token,
        };
        Ok(Runner {
            shared: Arc::new(shared),
            workers: tokio::task::JoinSet::new(),
            adopted: false,
            announced: None,
        })
    }

    /// The shared state (for tests and the shell).
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Starts a supervisor for `work`, counted as busy until it ends (the
    /// caller counted it already, from before the claim or adoption).
    fn supervise<F>(&mut self, work: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let shared = Arc::clone(&self.shared);
        self.workers.spawn(async move {
            work.await;
            shared.active.send_modify(|n| *n = n.saturating_sub(1));
        });
    }

    /// Counts work in hand from before it is taken, so that nobody watching
    /// the count sees a gap between a claim committing and its worker.
    fn reserve(&self) -> Reserved {
        self.shared.active.send_modify(|n| *n += 1);
        Reserved {
            shared: Arc::clone(&self.shared),
            kept: false,
        }
    }

    /// Claims runs while slots are free, a supervisor for each.
    async fn claim(&mut self, stop: &CancellationToken) -> anyhow::Result<()> {
        loop {
            let reserved = self.reserve();
            let claimed = self
                .shared
                .store
                .claims()
                .claim_run(&self.shared.instance, &self.shared.limits())
                .await
                .context("cannot claim runs")?;
            let Some(mut claim) = claimed else {
                return Ok(());
            };
            // A dry-run executor: marked before its worker can ask for anything.
            if self.shared.settings.dry_run && !claim.run.dry_run {
                let mut tx = self.shared.store.begin_write().await?;
                tx.tasks().set_dry_run(claim.run.id).await?;
                tx.commit().await?;
                claim.run.dry_run = true;
            }
            reserved.keep();
            let shared = Arc::clone(&self.shared);
            let stop = stop.clone();
            let span = tracing::info_span!("run", run = claim.run.id, task = %claim.run.task_gid);
            self.supervise(tracing::Instrument::instrument(
                async move { supervise::start(&shared, claim, stop).await },
                span,
            ));
        }
    }

    /// This runner's presence lease: `runner:<instance>`, or
    /// `runner:unconfined:<instance>` when its workers run unconfined
    /// (`!status` counts both, and says so of the second).
    fn presence(&self) -> String {
        match self.shared.sandbox {
            Some(_) => format!("{PRESENCE_PREFIX}{}", self.shared.instance),
            None => format!(
                "{}{}",
                crate::confine::sandbox::UNCONFINED_PRESENCE,
                self.shared.instance
            ),
        }
    }

    /// Keeps this runner's presence lease fresh (`!status` counts runners).
    async fn announce(&self) {
        let name = self.presence();
        if let Err(error) = self
            .shared
            .store
            .leases()
            .acquire_lease(&name, &self.shared.instance, PRESENCE)
            .await
        {
            tracing::warn!(%error, "cannot record that this runner is alive");
        }
    }

    /// Takes over the runs claimed by a runner on this host that is gone,
    /// to follow their live workers again or to record how they ended.
    async fn adopt(&mut self, stop: &CancellationToken) {
        let shared = Arc::clone(&self.shared);
        let runs = match shared.store.claims().runs_claimed_on(&shared.host).await {
            Ok(runs) => runs,
            Err(error) => {
                tracing::error!(%error, "cannot list the runs claimed on this host");
                return;
            }
        };
        for run in runs {
            let owner = run.lease_owner.clone().unwrap_or_default();
            if owner != shared.instance && !host::holder_is_dead(&owner) {
                // Another live runner on this host has it.
                continue;
            }
            let reserved = self.reserve();
            let fence = async {
                let mut tx = shared.store.begin_write().await?;
                let fence = tx
                    .claims()
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
                    reserved.keep();
                    let (shared, stop) = (Arc::clone(&shared), stop.clone());
                    let span = tracing::info_span!("run", run = run.id, task = %run.task_gid);
                    self.supervise(tracing::Instrument::instrument(
                        async move { supervise::adopt(&shared, run, fence, stop).await },
                        span,
                    ));
                }
                Ok(None) => {}
                Err(error) => tracing::error!(%error, run = run.id, "cannot adopt a run"),
            }
        }
    }
}

/// One unit of work counted before it is taken: given back when dropped,
/// unless it was kept (then its supervisor gives it back when it ends).
struct Reserved {
    shared: Arc<Shared>,
    kept: bool,
}

impl Reserved {
    fn keep(mut self) {
        self.kept = true;
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        if !self.kept {
            self.shared.active.send_modify(|n| *n = n.saturating_sub(1));
        }
    }
}

impl BackgroundLoop for Runner {
    const NAME: &'static str = "runner";
    /// A run approved or a decision made starts or resumes a worker at once.
    const WAKE: Wake = Wake::Changes;

    async fn tick(&mut self, tick: &mut Tick<'_>) -> anyhow::Result<Next> {
        let stop = tick.stop().clone();
        if !self.adopted {
            if let Err(error) = spawn::prepare_dirs(&self.shared) {
                tracing::error!(%error, "cannot prepare the runs and logs directories");
            }
            self.adopt(&stop).await;
            self.adopted = true;
            // What `!queue --repo` may name.
            let repos = crate::executor::repos::announced(&self.shared.settings.repos);
            if let Err(error) = self
                .shared
                .store
                .repos()
                .announce(&self.shared.profile_name, &repos)
                .await
            {
                tracing::warn!(%error, "cannot announce this executor's repositories");
            }
        }
        // A write wakes every watcher: renew the presence only now and then.
        if self.announced.is_none_or(|at| at.elapsed() >= PRESENCE / 3) {
            self.announce().await;
            self.announced = Some(tokio::time::Instant::now());
        }
        self.claim(&stop).await?;
        Ok(Next::After(PERIODIC))
    }

    /// A worker ended: its slot may be claimed again.
    async fn woken(&mut self) {
        if self.workers.join_next().await.is_none() {
            std::future::pending::<()>().await;
        }
    }

    /// Waits for the supervisors. Workers keep running after it (in their
    /// own process groups): the next runner on this host re-adopts them.
    async fn stopped(&mut self) {
        while self.workers.join_next().await.is_some() {}
        let _ = self
            .shared
            .store
            .leases()
            .release_lease(&self.presence(), &self.shared.instance)
            .await;
    }
}
