//! Profiles: one bot identity each (`profiles/eagle.toml`, `profiles/executor.toml`).
//!
//! A profile is read once at start-up: the TOML file, then `EAGLE_<KEY>`
//! environment overrides ([`raw`]), then validated ([`validate`]) into a
//! [`Profile`] whose fields cannot be wrong later. Every error names the file
//! (or the environment variable), the key and what is wrong.
//!
//! Zulip credentials live in a separate zuliprc file ([`zuliprc`]) and are only
//! read by the commands that talk to Zulip, so `eagle shell` and
//! `eagle profile show` work without them.

pub mod care;
mod conversation;
mod field;
mod integrations;
pub mod locate;
mod model_key;
mod ops;
mod plugin_spec;
mod pool;
mod raw;
mod repos;
mod review;
mod sandbox;
#[cfg(test)]
mod tests;
mod validate;
mod worker_command;
mod worker_env;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use secrecy::SecretString;

pub use conversation::{BackendKind, ConversationSettings, DigestSettings};
pub use locate::{BUILT_IN, BuiltIn, ChosenBy, ProfilesDir};
pub use model_key::{ModelAccess, PLACEHOLDER_KEY};
pub use ops::{LogFormat, OpsSettings};
pub use pool::{DEFAULT_MAX_CONNECTIONS, StoreSettings};
pub use raw::{ENV_PREFIX, RESERVED_ENV};
pub use repos::{DEFAULT_REPO, GitCredential, RepoSettings, RepoUrl};
pub use sandbox::{HostPattern, SandboxMode, SandboxSettings};
pub use worker_env::WorkerEnv;

/// The environment variable that overrides the profiles directory.
pub const PROFILES_DIR_ENV: &str = "EAGLE_PROFILES_DIR";

/// What a profile's bot does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Eagle: talks with humans, keeps the inbox, decides on workers' requests.
    Orchestrator,
    /// Исполнитель: runs the workers and relays their structured lines.
    Executor,
}

impl Role {
    /// The word used in profile files.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Orchestrator => "orchestrator",
            Role::Executor => "executor",
        }
    }
}

/// A person or bot named in a profile: by Zulip user id, or by email.
///
/// Organisations that hide emails give bots a dummy `sender_email`, so an id is
/// the robust choice; emails compare case-insensitively, as Zulip does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserRef {
    Id(u64),
    Email(String),
}

impl UserRef {
    /// Whether a sender with this id and email is the user named here.
    pub fn matches(&self, id: u64, email: &str) -> bool {
        match self {
            UserRef::Id(wanted) => *wanted == id,
            UserRef::Email(wanted) => wanted.eq_ignore_ascii_case(email),
        }
    }
}

impl fmt::Display for UserRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UserRef::Id(id) => write!(f, "user id {id}"),
            UserRef::Email(email) => f.write_str(email),
        }
    }
}

pub use crate::ground::database_url::DatabaseUrl;

/// Zulip transport settings.
#[derive(Debug, Clone)]
pub struct ZulipSettings {
    /// Commands older than this, found by back-fill after a gap, are reported
    /// as seen late instead of being executed.
    pub late_command_age: Duration,
    /// Register the event queue with `all_public_streams`.
    pub all_public_streams: bool,
}

/// What one person may ask of Eagle at once (`[chat]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChatSettings {
    /// Commands one message may carry; the rest are not run (one line says so).
    pub max_commands: usize,
    /// Messages one reply may take; a longer answer is cut, pointing to the paged command.
    pub max_reply_parts: usize,
    /// Messages one sender may send a minute (approvers are exempt); 0: no limit.
    pub sender_rate: u32,
}

impl Default for ChatSettings {
    fn default() -> Self {
        ChatSettings {
            max_commands: 10,
            max_reply_parts: 4,
            sender_rate: 30,
        }
    }
}

/// The most linear memory a plugin may be given (`memory_mib`).
pub const MAX_PLUGIN_MEMORY_BYTES: usize = 4 << 30;

/// Resource limits for one plugin call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PluginLimits {
    /// Wasmtime fuel per call (roughly one unit per instruction).
    pub fuel: u64,
    /// The most linear memory the plugin may grow to, in bytes.
    pub memory_bytes: usize,
    /// Wall-clock bound of one call.
    pub timeout: Duration,
}

impl Default for PluginLimits {
    fn default() -> Self {
        PluginLimits {
            fuel: 100_000_000,
            memory_bytes: 32 << 20,
            timeout: Duration::from_millis(500),
        }
    }
}

/// Where a plugin comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginSource {
    /// One of the plugins compiled into the binary (`default-approval`, `default-filter`).
    Builtin(String),
    /// A `.wasm` component file, resolved against the plugin directory.
    File(PathBuf),
}

impl fmt::Display for PluginSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PluginSource::Builtin(name) => write!(f, "builtin:{name}"),
            PluginSource::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// One configured policy plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginSpec {
    pub source: PluginSource,
    /// The plugin's configuration, as JSON text (the profile writes it as a TOML table).
    pub config_json: String,
    pub limits: PluginLimits,
}

/// Policy plugin settings.
#[derive(Debug, Clone)]
pub struct PolicySettings {
    /// The drop-in directory for `.wasm` plugins.
    pub dir: PathBuf,
    /// Also load every `.wasm` in `dir` (drop-ins), in name order, with
    /// empty configuration and default limits (default on).
    pub load_all: bool,
    /// Files of `dir` (by name or stem) that are not loaded as drop-ins.
    pub exclude: Vec<String>,
    /// How often the plugin files are checked for changes.
    pub reload_interval: Duration,
    /// The plugins, in the order their votes are composed.
    pub plugins: Vec<PluginSpec>,
}

/// How a worker program is driven.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerKind {
    /// Claude Code: the runner chooses the session, resumes it, routes tool
    /// permissions through Eagle with a PreToolUse hook, and reads cost and
    /// turns from its stream-json output.
    Claude,
    /// Any other program: the prompt in, protocol lines out.
    Generic,
}

/// The worker command of a profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerCommand {
    /// As written, for messages.
    pub template: String,
    /// Split like a shell command line (no shell runs it); each word may
    /// hold `{prompt}`, `{workdir}`, `{run}`, `{task}`, `{attempt}`.
    pub argv: Vec<String>,
    pub kind: WorkerKind,
}

/// The watchdog limits of one prompt kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindLimits {
    /// No output for this long: the worker's process group is killed.
    pub no_output: Duration,
    /// Running for this long: the worker is asked to wrap up, then killed.
    pub hard: Duration,
}

/// The executor's runner settings (`[runner]`).
#[derive(Debug, Clone)]
pub struct RunnerSettings {
    /// `None`: not configured (the shell then uses the demo worker; `eagle
    /// run` refuses to start).
    pub worker_command: Option<WorkerCommand>,
    /// Workers at once, across every runner sharing the database.
    pub max_workers: i64,
    /// Failed attempts before a run is held for its owner.
    pub max_attempts: i64,
    /// Every run this executor claims is a dry run: nothing it asks for is
    /// carried out, each effect is described instead (an owner's first days).
    pub dry_run: bool,
    /// Attempts that end waiting for decisions before a run is held for
    /// its owner (a worker is not resumed for ever).
    pub max_waits: i64,
    /// The most a run may cost (as the worker reports it), in USD.
    pub max_cost_usd: Option<f64>,
    /// Requests one attempt may make before it is stopped as flooding.
    pub max_requests: usize,
    /// The Unix user workers run as (Eagle must be able to switch to it).
    pub worker_user: Option<String>,
    /// What a worker gets of Eagle's environment: the variables the
    /// profile names (its API key, say) and its `PATH` (`worker_path`, by
    /// default Eagle's), resolved at start-up.
    pub worker_env: WorkerEnv,
    pub limits: KindLimits,
    /// Per prompt kind (`investigation`, `continue`, `fix_ci`, `fix_comments`, `pr_review`).
    pub kind_limits: BTreeMap<String, KindLimits>,
    /// Between asking a worker to wrap up (and stopping a held one) and killing it.
    pub wrap_up_grace: Duration,
    /// How long `eagle request` waits for a decision before telling the worker to stop.
    pub request_wait: Duration,
    /// Claude Code's hook timeout; Eagle answers well before it.
    pub hook_timeout: Duration,
    /// Status lines of one run are posted at most this often (the newest wins).
    pub status_interval: Duration,
    /// Prompt templates overriding the built-in ones.
    pub prompts_dir: Option<PathBuf>,
    /// Where runs' working directories go (default: `<data dir>/<profile>/runs`).
    pub runs_dir: Option<PathBuf>,
    /// The repositories runs work in (`[[runner.repos]]`; `runner.repo`
    /// is one named `default`). A task names one; without a name, the first.
    pub repos: Vec<RepoSettings>,
    /// Extra rules for Claude Code's tool calls: a command prefix and its action.
    pub hook_rules: Vec<(String, String)>,
    /// How workers are confined and what they may reach.
    pub sandbox: SandboxSettings,
    /// The model API and key of a confined Claude Code worker, which holds
    /// a placeholder instead (its egress proxy sets the key); `None`: no
    /// key is set, or the worker is another kind or unconfined.
    pub model: Option<ModelAccess>,
    /// What the pr-review worker reviews by (`review_rules`, `review_checks`).
    pub review: ReviewSettings,
}

/// What a pr-review worker is given to review by.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReviewSettings {
    /// Files of the run's checkout (relative; `*` and `?` in the last part)
    /// whose text goes into the prompt, size-capped.
    pub rules: Vec<String>,
    /// The checks that must be green: `review_checks` (default: the macOS
    /// UI tests) and `github.required_checks`.
    pub checks: Vec<String>,
}

impl RunnerSettings {
    /// The limits of a prompt kind.
    pub fn limits_for(&self, kind: &str) -> KindLimits {
        self.kind_limits.get(kind).copied().unwrap_or(self.limits)
    }
}

/// The analyzer (`[analyzer]`): the filter plugins, then an optional
/// analysis command for kept tasks, run like a worker (its own session, its
/// own user, an allow-listed environment, watchdogs).
#[derive(Debug, Clone)]
pub struct AnalyzerSettings {
    /// `None`: filters only; kept tasks go to for_review.
    pub command: Option<WorkerCommand>,
    pub no_output_timeout: Duration,
    pub hard_timeout: Duration,
    /// What the command gets of Eagle's environment (`env` names,
    /// `path`), resolved at start-up.
    pub env: WorkerEnv,
    /// The model key a confined Claude Code analysis does not hold (its
    /// `env` has the placeholder): its egress proxy sets it.
    pub model: Option<ModelAccess>,
    /// The Unix user the command runs as.
    pub worker_user: Option<String>,
    /// Where the conclusions about tasks from other sources (Asana) go.
    pub inbox_channel: String,
    pub inbox_topic: String,
    /// Where a confined analysis command may connect through its egress
    /// proxy (`analyzer.allow_hosts`; default: a Claude command's model API).
    pub allow_hosts: Vec<HostPattern>,
}

/// GitHub (`[github]`): the PR loop (executor) and merges (Eagle).
#[derive(Debug, Clone)]
pub struct GithubSettings {
    pub api_url: url::Url,
    /// `owner/name`: where runs open their PRs.
    pub repo: crate::ground::repo::Repo,
    /// The branch runs' PRs go into (`github.base`, default `main`): Eagle
    /// opens each run's draft PR against it and merges only a PR into it.
    pub base: String,
    /// A token (`token_env`, `token_file`) or a GitHub App (`app_id`,
    /// `private_key_file`, `installation_id`).
    pub credential: GitHubCredential,
    /// Checks that must be green (by name); other failing checks fail CI too.
    pub required_checks: Vec<String>,
    /// Labels a draft PR must carry; missing ones are added.
    pub required_labels: Vec<String>,
    /// A workflow (file name or id) dispatched on the PR's branch when CI never ran.
    pub ci_workflow: Option<String>,
    /// How long after a push CI may take to appear before it counts as never ran.
    pub ci_grace: Duration,
    pub poll_interval: Duration,
    /// `merge`, `squash` or `rebase`.
    pub merge_method: String,
    /// `github.drafts = "keep"`: an approved merge of a draft PR is refused
    /// (the escalation says so); by default (`"ready"`) Eagle marks the PR
    /// ready for review at the approved head, then merges it.
    pub keep_drafts: bool,
    /// fix-ci workers per run before its owner is asked.
    pub ci_attempts: i64,
    /// PR workers of every kind per run before its owner is asked.
    pub max_rounds: i64,
    /// GitHub logins (lower-case) whose comments are not a human's: the
    /// workers' and Eagle's own accounts. Accounts of type Bot never count.
    pub bot_logins: Vec<String>,
    /// Whose reviews and comments count (`github.trusted_logins`): people
    /// with write access (`author_association` OWNER, MEMBER, COLLABORATOR)
    /// and these logins; everyone else's are ignored.
    pub trusted: crate::ground::repo::Trusted,
}

/// How Eagle authenticates to GitHub. `Debug` shows no secret.
#[derive(Debug, Clone)]
pub enum GitHubCredential {
    /// A token from the environment variable `token_env` or the file
    /// `token_file` (a fine-grained personal access token).
    Token(SecretString),
    /// A GitHub App: its id, the installation if given (else found for the
    /// repository), and its private key (PEM) read from `private_key_file`
    /// at start-up.
    App {
        app_id: u64,
        installation_id: Option<u64>,
        private_key: SecretString,
    },
}

/// Asana intake (`[asana]`).
#[derive(Debug, Clone)]
pub struct AsanaSettings {
    pub api_url: url::Url,
    pub token: SecretString,
    pub workspace: String,
    /// (project gid, source name).
    pub projects: Vec<(String, String)>,
    /// (section gid, source name).
    pub sections: Vec<(String, String)>,
    /// (My Tasks section name, source name).
    pub my_tasks: Vec<(String, String)>,
    /// The source of followed tasks (premium workspaces), if imported.
    pub followed_source: Option<String>,
    /// The executor's repository each source's tasks belong to, where a
    /// place names one (`repo`); a task of another source goes to the
    /// executor's first.
    pub repos: std::collections::BTreeMap<String, String>,
    /// A custom field that names the platform.
    pub platform_field: Option<String>,
    /// Tags that name a platform.
    pub platform_tags: Vec<String>,
    pub poll_interval: Duration,
}

/// When Eagle reminds and expires escalations (`[decisions]`).
#[derive(Debug, Clone, Copy)]
pub struct DecisionSettings {
    pub reminder_after: Duration,
    pub approval_ttl: Duration,
}

/// Where a profile was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Its file, [`Profile::path`].
    File,
    /// The binary's own ([`locate::BUILT_IN`]): no file was there.
    BuiltIn,
}

/// A profile's persona: a file, or the built-in profile's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Persona {
    File(PathBuf),
    BuiltIn {
        name: &'static str,
        text: &'static str,
    },
}

impl fmt::Display for Persona {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Persona::File(path) => write!(f, "{}", path.display()),
            Persona::BuiltIn { name, .. } => write!(f, "built-in {name}"),
        }
    }
}

/// A validated profile.
#[derive(Debug, Clone)]
pub struct Profile {
    /// The profile's name: its file stem (`eagle`, `executor`).
    pub name: String,
    /// The profile file (for a built-in profile, where its file would be:
    /// its relative paths resolve against that directory).
    pub path: PathBuf,
    /// Whether it was read from that file or is built in.
    pub origin: Origin,
    pub role: Role,
    /// The bot's name as people see it (Zulip's `full_name` wins once connected).
    pub display_name: String,
    /// The zuliprc file, resolved against the profile's directory.
    pub zuliprc: PathBuf,
    pub database_url: DatabaseUrl,
    /// `[store]`: this process's share of the database's connections.
    pub store: StoreSettings,
    /// Eagle's data directory, shared by the profiles.
    pub data_dir: PathBuf,
    /// Who may use the commands that change what runs. Empty means nobody.
    pub approvers: Vec<UserRef>,
    /// The human escalations go to.
    pub owner: Option<UserRef>,
    /// Channels the bot listens in; empty means every channel it is
    /// subscribed to. Commands also work in direct messages.
    pub channels: Vec<String>,
    /// The channel where the executor posts its runs, one topic per run.
    pub executor_channel: String,
    /// The persona (the notes' SOUL.md), if the profile has one.
    pub persona: Option<Persona>,
    pub zulip: ZulipSettings,
    pub chat: ChatSettings,
    pub github: Option<GithubSettings>,
    /// The files this profile names that hold secrets (token files, the
    /// App's private key, deploy keys): never in a worker's view.
    pub secret_files: Vec<PathBuf>,
    /// How long `eagle shell` from a pipe waits for running workers at the end.
    pub shell_wait: Duration,
    /// `[ops]`: the metrics and health listener, the log format.
    pub ops: OpsSettings,
    /// Eagle's part (the orchestrator's): what its loops read. Present in
    /// every profile, with defaults, and validated the same way.
    pub eagle: EagleSettings,
    /// The executor's part: what the runner and its workers read.
    pub executor: ExecutorSettings,
}

/// The settings only Eagle's loops read (the decider, the analyzer, Asana
/// intake, the carrier, the conversations, the digest, the pruner).
#[derive(Debug, Clone)]
pub struct EagleSettings {
    /// For the orchestrator: the executor bot whose protocol lines it trusts.
    pub executor_bot: Option<UserRef>,
    pub policy: PolicySettings,
    pub decisions: DecisionSettings,
    pub analyzer: AnalyzerSettings,
    pub asana: Option<AsanaSettings>,
    /// The language backend Eagle answers questions with, if any (Eagle's).
    pub conversation: Option<ConversationSettings>,
    /// The owner's daily digest, if configured (Eagle's).
    pub digest: Option<DigestSettings>,
    /// How long what may be pruned is kept (`[store] prune_after`).
    pub prune_after: Duration,
}

/// The settings only the executor reads (the runner and what its workers
/// get).
#[derive(Debug, Clone)]
pub struct ExecutorSettings {
    pub runner: RunnerSettings,
}

impl Profile {
    /// Loads and validates `<dir>/<name>.toml` with overrides from `env`.
    pub fn load(
        dir: &Path,
        name: &str,
        env: &BTreeMap<String, String>,
    ) -> Result<Self, ProfileError> {
        validate_name(name).map_err(|why| ProfileError::new(name, None, why))?;
        let path = dir.join(format!("{name}.toml"));
        let raw = raw::load(&path, env)?;
        validate::validate(name, &path, raw, env, None)
    }

    /// Validates a built-in profile as if its file were in `dir`, with
    /// overrides from `env`.
    pub fn built_in(
        dir: &Path,
        builtin: &BuiltIn,
        env: &BTreeMap<String, String>,
    ) -> Result<Self, ProfileError> {
        let path = dir.join(format!("{}.toml", builtin.name));
        let raw = raw::load_text(
            &format!("built-in profile {}", builtin.name),
            builtin.toml,
            env,
        )?;
        validate::validate(builtin.name, &path, raw, env, Some(builtin))
    }

    /// Where the profile came from, for people: its file, or "built-in".
    pub fn source(&self) -> String {
        match self.origin {
            Origin::File => self.path.display().to_string(),
            Origin::BuiltIn => format!(
                "built-in; no file {}: `eagle profile init` writes one",
                self.path.display()
            ),
        }
    }

    /// This profile's own directory under the data directory: logs, plugin cache.
    pub fn state_dir(&self) -> PathBuf {
        self.data_dir.join(&self.name)
    }

    /// Where compiled plugins are cached (native code: only Eagle writes here).
    pub fn plugin_cache_dir(&self) -> PathBuf {
        self.state_dir().join("plugin-cache")
    }

    /// Where worker logs go.
    pub fn logs_dir(&self) -> PathBuf {
        self.state_dir().join("logs")
    }

    /// Where runs' working directories go.
    pub fn runs_dir(&self) -> PathBuf {
        self.executor
            .runner
            .runs_dir
            .clone()
            .unwrap_or_else(|| self.state_dir().join("runs"))
    }

    /// Whether the bot listens in `channel` (Unicode case-insensitive).
    pub fn listens_in(&self, channel: &str) -> bool {
        self.channels.is_empty()
            || self
                .channels
                .iter()
                .any(|c| crate::ground::text::eq_fold(c, channel))
            || crate::ground::text::eq_fold(&self.executor_channel, channel)
    }

    /// Every channel the bot must be subscribed to.
    pub fn required_channels(&self) -> Vec<String> {
        let mut all = vec![self.executor_channel.clone()];
        for channel in &self.channels {
            if !all.iter().any(|c| crate::ground::text::eq_fold(c, channel)) {
                all.push(channel.clone());
            }
        }
        all
    }

    /// Whether the user with this id and email may use approver commands.
    pub fn is_approver(&self, id: u64, email: &str) -> bool {
        self.approvers.iter().any(|who| who.matches(id, email))
    }
}

/// A profile name is a file stem: letters, digits, `-` and `_`.
pub fn validate_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a valid profile name (use letters, digits, '-' and '_')"
        ))
    }
}

/// Lists the profiles (file stems of `*.toml`) in `dir`, sorted.
pub fn list(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|ext| ext == "toml")
            && let Some(stem) = path.file_stem().and_then(|s| s.to_str())
            && validate_name(stem).is_ok()
        {
            names.push(stem.to_string());
        }
    }
    names.sort();
    Ok(names)
}

/// Eagle's default data directory: `$XDG_DATA_HOME/eagle`, else `~/.local/share/eagle`.
pub fn default_data_dir(env: &BTreeMap<String, String>) -> Result<PathBuf, String> {
    if let Some(xdg) = env
        .get("XDG_DATA_HOME")
        .filter(|v| Path::new(v).is_absolute())
    {
        return Ok(Path::new(xdg).join("eagle"));
    }
    match env.get("HOME").filter(|v| !v.is_empty()) {
        Some(home) => Ok(Path::new(home).join(".local/share/eagle")),
        None => Err("neither XDG_DATA_HOME nor HOME is set; set data_dir in the profile".into()),
    }
}

/// A profile that cannot be used, with where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: {}{message}", key.as_ref().map(|k| format!("{k}: ")).unwrap_or_default())]
pub struct ProfileError {
    /// The file or environment variable the bad value came from.
    pub origin: String,
    /// The key, e.g. `approvers[1]`.
    pub key: Option<String>,
    pub message: String,
}

impl ProfileError {
    pub fn new(origin: impl Into<String>, key: Option<String>, message: impl Into<String>) -> Self {
        ProfileError {
            origin: origin.into(),
            key,
            message: message.into(),
        }
    }
}
