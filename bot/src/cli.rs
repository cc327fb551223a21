//! The command line: what `eagle` accepts (the clap definitions) and the
//! dispatch of each subcommand to the code behind it: the daemon for `run`
//! and `shell`, `check`, `profile`, `policy`, `migrate` and `db` (data
//! care), the one-off passes of `analyze` and `import`, `completions`,
//! `man` and `service`, and the worker-side commands.

mod backup;
mod check;
mod db;
mod docs;
mod once;
mod policy;
mod profiles;
mod repo;
mod service;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use clap::{Args, Parser, Subcommand};

use crate::daemon::Setup;
use crate::profile::{Profile, ProfilesDir, UserRef};
use crate::store::Store;

/// Eagle runs AI coding agents as a supervised team on Zulip.
#[derive(Debug, Parser)]
#[command(name = "eagle", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// Where the profiles (`<name>.toml`) are; else `EAGLE_PROFILES_DIR`,
    /// else `./profiles` if it exists, else `$XDG_CONFIG_HOME/eagle/profiles`
    /// (`~/.config/eagle/profiles`). With no file there, `eagle` and
    /// `executor` are built in.
    #[arg(long, global = true, value_name = "DIR")]
    pub profiles_dir: Option<PathBuf>,

    /// How log lines are written: `text` for a person, `json` (one object
    /// per line, with the span fields) for a log shipper. Without it, the
    /// profile's `[ops] log_format`, else text.
    #[arg(long, global = true, env = "EAGLE_LOG_FORMAT", value_name = "text|json", value_parser = parse_log_format)]
    pub log_format: Option<crate::profile::LogFormat>,

    #[command(subcommand)]
    pub command: Command,
}

/// Which profile a subcommand works with.
#[derive(Debug, Clone, Args)]
pub struct ProfileArg {
    /// The profile to use: a file `<DIR>/<NAME>.toml` (`eagle` and
    /// `executor` are built in).
    #[arg(long, short = 'p', default_value = "eagle", value_name = "NAME")]
    pub profile: String,
}

/// Where `eagle import` brings data in from, besides Asana.
#[derive(Debug, Subcommand)]
pub enum ImportFrom {
    /// The old executor's PostgreSQL database (seed 003's executor_queue and
    /// executor_runs), read-only: tasks and runs mapped into Eagle's inbox,
    /// idempotently (a second import adds nothing).
    #[command(name = "executor-v2")]
    ExecutorV2 {
        #[command(flatten)]
        profile: ProfileArg,
        /// postgres://user@host/database of the old executor (a password in
        /// it is never printed).
        url: String,
        /// Print what would be imported, per status and state, and what
        /// cannot be mapped; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Rows read and written per transaction.
        #[arg(long, default_value_t = crate::eagle::moving_in::DEFAULT_BATCH, value_parser = clap::value_parser!(i64).range(1..=10_000))]
        batch: i64,
    },
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one bot identity on Zulip (Eagle, or the executor).
    Run(ProfileArg),
    /// Talk to Eagle locally: each line you type is a chat message (no Zulip needed).
    Shell {
        #[command(flatten)]
        profile: ProfileArg,
        /// The topic your messages are posted in; `"#executor > run 1"` posts
        /// in that run's own topic.
        #[arg(long, default_value = "general")]
        topic: String,
        /// Who you are (an email or a Zulip user id); by default the profile's owner.
        #[arg(long, value_name = "EMAIL|ID")]
        user: Option<String>,
    },
    /// Create or upgrade the database (`--check`: only say whether an
    /// upgrade would migrate). A database a newer Eagle migrated is refused.
    Migrate(db::MigrateArgs),
    /// Back up the database, prune what may be pruned.
    #[command(subcommand)]
    Db(db::DbCommand),
    /// List, show and create profiles.
    #[command(subcommand)]
    Profile(ProfileCommand),
    /// Check that a profile is ready to run: settings, database, Zulip.
    Check(ProfileArg),
    /// An executor's repositories: run one's setup ahead of its runs.
    #[command(subcommand)]
    Repo(repo::RepoCommand),
    /// Analyse the tasks pending analysis now, and print a summary (the
    /// analyzer of `eagle run` does this continuously).
    Analyze {
        #[command(flatten)]
        profile: ProfileArg,
        /// First put back the skipped tasks the current filters would keep.
        #[arg(long)]
        reanalyze_skipped: bool,
        /// With --reanalyze-skipped: only count them; change nothing.
        #[arg(long, requires = "reanalyze_skipped")]
        dry_run: bool,
    },
    /// Post the owner's digest now (what finished, what waits on them, what
    /// is stuck, what it cost since the last one), and print it; the loop of
    /// `eagle run` posts it daily at `[digest] at`.
    Digest(ProfileArg),
    /// Import the tasks of the profile's [asana] places once, and print
    /// what changed (the intake of `eagle run` does this continuously); or,
    /// with `executor-v2 <url>`, move in the old executor's tasks and runs.
    #[command(args_conflicts_with_subcommands = true)]
    Import {
        #[command(flatten)]
        profile: ProfileArg,
        #[command(subcommand)]
        from: Option<ImportFrom>,
    },
    /// Inspect and try the policy plugins.
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// Print the shell completion script for `eagle` (bash, zsh, fish, …).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), or write one page per subcommand; or
    /// the chat commands' reference.
    Man {
        /// Write `eagle.1` and `eagle-<subcommand>.1` into this directory
        /// instead of printing `eagle.1`.
        #[arg(long, value_name = "DIR", conflicts_with = "chat")]
        out: Option<PathBuf>,
        /// Print the chat commands' reference in Markdown instead
        /// (`docs/commands.md`, from the same definitions as `!help`).
        #[arg(long)]
        chat: bool,
    },
    /// Run Eagle as a systemd service, one instance per profile.
    #[command(subcommand)]
    Service(ServiceCommand),
    /// (For workers) ask the run's runner for permission and wait for the
    /// decision: exit 0 approved, 1 denied (reason on stderr), 3 a human
    /// decides or the run is held (stop now; you will be resumed), 4 could not ask.
    Request {
        /// Raise a question instead of asking permission ([ESCALATE: <topic>]).
        #[arg(long)]
        escalate: bool,
        /// How long to wait for the answer at most, in seconds: a runner
        /// that has not answered by then (gone, or hung) exits 4.
        #[arg(long, default_value_t = 3600)]
        timeout: u64,
        /// The action: run_tests, create_worktree, push_branch, open_draft_pr, merge_pr, …
        action: String,
        /// What exactly (the suite, the PR); for the effects Eagle carries
        /// out, their options: push_branch [--sha <sha>], open_draft_pr
        /// --title <t> --body-file <f>, comment_on_pr --body-file <f>,
        /// reply_thread <id> --body-file <f>, merge_pr [--sha <sha>],
        /// post_asana_comment --body-file <f>.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        details: Vec<String>,
    },
    /// (For workers) hooks of coding agents that route tool permissions through Eagle.
    #[command(subcommand)]
    Hook(HookCommand),
    /// A demo worker that walks the seed story (create_worktree and run_tests
    /// approved, merge_pr escalated, then [DONE: pr_ready]); the shell uses it
    /// when no worker command is configured.
    DemoWorker {
        /// The prompt (the demo only reads whether it is a resume); default: stdin.
        prompt: Option<String>,
    },
    /// (Internal) starts a worker and records its exit status for the runner.
    #[command(hide = true)]
    WorkerShim {
        /// After this many seconds the shim ends the worker's group itself.
        #[arg(long)]
        deadline: u64,
        /// The run's rules, written into the working directory as AGENTS.md.
        #[arg(long)]
        rules: Option<PathBuf>,
        /// Confine the worker as this sandbox spec (JSON, written by the runner) says.
        #[arg(long)]
        sandbox: Option<PathBuf>,
        /// Only check that this kernel can confine workers, and say how.
        #[arg(long)]
        probe: bool,
        /// The worker's command line.
        #[arg(last = true, required = true)]
        argv: Vec<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum HookCommand {
    /// Claude Code's PreToolUse hook: reads the hook input on stdin and prints
    /// Eagle's decision as the hook's JSON.
    ClaudePretool {
        /// Claude Code's timeout for this hook, in seconds; Eagle answers before it.
        #[arg(long, default_value_t = 120)]
        timeout: u64,
    },
}

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// List a profile's plugins: versions, content hashes, state.
    List(ProfileArg),
    /// Run plugins on a sample request or task and show each vote and the decision.
    Test {
        /// Use this profile's plugins (the default: eagle).
        #[arg(long, short = 'p', value_name = "NAME", conflicts_with = "plugin")]
        profile: Option<String>,
        /// Use only this plugin file, with default limits.
        #[arg(long, value_name = "PATH")]
        plugin: Option<PathBuf>,
        /// The plugin's configuration, as JSON (with --plugin).
        #[arg(long, value_name = "JSON", requires = "plugin")]
        config: Option<String>,
        /// A protocol line: '[REQUEST: merge_pr] run:42 PR #1234'.
        #[arg(
            long,
            value_name = "LINE",
            required_unless_present = "task",
            conflicts_with = "task"
        )]
        request: Option<String>,
        /// A task as a JSON file (fields: gid, source, title, description,
        /// notes, links, tags, platform, assignee, closed).
        #[arg(long, value_name = "FILE")]
        task: Option<PathBuf>,
    },
    /// Compiles the plugin on stdin into a compiled-plugin cache (Eagle runs
    /// this itself, in a child process, so that the compiler's memory is
    /// never the long-running process's).
    #[command(hide = true)]
    CompileIntoCache {
        /// The plugin's content hash (hex SHA-256).
        #[arg(long)]
        sha256: String,
        /// The cache directory.
        #[arg(long)]
        dir: PathBuf,
    },
}

/// `eagle service …`.
#[derive(Debug, Subcommand)]
pub enum ServiceCommand {
    /// Write the templated unit `eagle@.service` (`eagle@eagle`,
    /// `eagle@executor`: one instance per profile) with this binary's path
    /// and the data directory filled in.
    Install(service::InstallArgs),
}

#[derive(Debug, Subcommand)]
pub enum ProfileCommand {
    /// List the profiles in the profiles directory (and the built-in ones).
    List,
    /// Write the documented profiles (eagle, executor) and their personas
    /// into the user's configuration directory, to edit.
    Init {
        /// Write them here instead (default: `$XDG_CONFIG_HOME/eagle/profiles`).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Overwrite files that are there.
        #[arg(long)]
        force: bool,
    },
    /// Show a profile's settings as Eagle understands them (no secrets).
    Show {
        /// The profile's name.
        name: String,
    },
    /// Create a profile as a copy of another.
    Create {
        /// The new profile's name.
        name: String,
        /// The profile to copy.
        #[arg(long = "clone", value_name = "FROM")]
        clone_from: String,
    },
}

impl Command {
    /// The log level when `RUST_LOG` is not set: the long-running bot says
    /// what it does, the interactive commands stay quiet.
    pub fn default_log_filter(&self) -> &'static str {
        match self {
            Command::Run(_) => "warn,eagle=info",
            // Plugin failures are part of `policy` output; do not repeat them as logs.
            Command::Policy(_) => "off",
            _ => "warn",
        }
    }

    /// Whether this command only prints or writes files from the command
    /// line's own definitions or the binary's: no profile, no database.
    pub fn is_standalone(&self) -> bool {
        matches!(
            self,
            Command::Completions { .. } | Command::Man { .. } | Command::Service(_)
        )
    }

    /// Whether this is a command a worker runs: no profile, no database, no runtime.
    pub fn is_worker_side(&self) -> bool {
        matches!(
            self,
            Command::Request { .. }
                | Command::Hook(_)
                | Command::DemoWorker { .. }
                | Command::WorkerShim { .. }
        )
    }
}

/// Runs a worker-side command (synchronously: no runtime, no profile).
pub fn run_worker_side(cli: Cli, env: BTreeMap<String, String>) -> ExitCode {
    match cli.command {
        Command::Request {
            escalate,
            timeout,
            action,
            details,
        } => crate::worker::asks::request(
            &env,
            &action,
            &details,
            escalate,
            std::time::Duration::from_secs(timeout.max(1)),
        ),
        Command::Hook(HookCommand::ClaudePretool { timeout }) => {
            let (output, code) = crate::worker::hook_pretool(
                &env,
                std::time::Duration::from_secs(timeout.max(1)),
                std::io::stdin().lock(),
            );
            println!("{output}");
            code
        }
        Command::DemoWorker { prompt } => {
            // The runner hands the prompt over on stdin.
            let prompt = prompt.unwrap_or_else(|| {
                let mut text = String::new();
                let _ = std::io::Read::read_to_string(
                    &mut std::io::Read::take(std::io::stdin().lock(), 1 << 20),
                    &mut text,
                );
                text
            });
            crate::worker::demo(&env, &prompt)
        }
        Command::WorkerShim { probe: true, .. } => match crate::confine::sandbox::probe_here() {
            Ok(what) => {
                println!("{what}");
                ExitCode::SUCCESS
            }
            Err(why) => {
                eprintln!("{why}");
                ExitCode::from(1)
            }
        },
        Command::WorkerShim {
            deadline,
            rules,
            sandbox,
            argv,
            ..
        } => crate::worker::shim(
            &env,
            std::time::Duration::from_secs(deadline),
            rules.as_deref(),
            sandbox.as_deref(),
            &argv,
        ),
        _ => ExitCode::from(2),
    }
}

/// Keeps what Eagle holds private to its user: files it creates are not
/// readable by others, and its memory and environment are not readable by
/// other processes of its own user (a worker running as Eagle's user cannot
/// read `/proc/<eagle>/environ`).
fn harden() {
    crate::ground::host::private_umask();
    if let Err(error) = crate::ground::host::make_non_dumpable() {
        tracing::warn!(%error, "cannot make the process non-dumpable");
    }
}

/// A zuliprc holds a bot's key: whatever its mode, Eagle keeps it private
/// to its own user before anything (a worker of another user) starts.
fn keep_zuliprc_private(profile: &Profile) {
    match crate::ground::host::make_private(&profile.zuliprc) {
        Ok(None) => {}
        Ok(Some(mode)) => tracing::warn!(
            path = %profile.zuliprc.display(),
            mode = format!("{mode:o}"),
            "the zuliprc was readable by other users: it is private to Eagle's user now (600)"
        ),
        Err(error) => tracing::warn!(
            %error,
            path = %profile.zuliprc.display(),
            "cannot make the zuliprc private"
        ),
    }
}

/// What `main` read of the process, once: nothing else reads the
/// environment.
#[derive(Debug, Clone, Default)]
pub struct Process {
    /// The environment variables (the profile's `EAGLE_*` overrides, the
    /// workers' allowed names, `USER`).
    pub env: BTreeMap<String, String>,
    /// The running `eagle` binary: workers' shim, `eagle request`, the
    /// plugin compiler.
    pub exe: Option<PathBuf>,
    /// Whether standard input is a terminal (the shell shows prompts).
    pub interactive: bool,
}

impl Process {
    fn exe(&self) -> anyhow::Result<PathBuf> {
        self.exe
            .clone()
            .ok_or_else(|| anyhow::anyhow!("cannot tell where the eagle binary is"))
    }
}

/// Runs the parsed command line.
pub async fn run(cli: Cli, process: Process) -> anyhow::Result<ExitCode> {
    let env = &process.env;
    if cli.command.is_worker_side() {
        return Ok(run_worker_side(cli, process.env));
    }
    if cli.command.is_standalone() {
        // Files for people and for systemd: the usual umask, no profile.
        return match cli.command {
            Command::Completions { shell } => docs::completions(shell),
            Command::Man { chat: true, .. } => docs::chat_commands(),
            Command::Man { out, .. } => docs::man(out.as_deref()),
            Command::Service(ServiceCommand::Install(args)) => {
                service::install(&args, cli.profiles_dir.as_deref(), &process)
            }
            _ => Ok(ExitCode::from(2)),
        };
    }
    // Whichever command runs first may create the data directory, the
    // database or a profile: each is private to Eagle's user from the start.
    crate::ground::host::private_umask();
    // Plugins are compiled by a short-lived `eagle` of their own: the
    // compiler's memory never stays with the long-running process.
    if let Some(exe) = &process.exe {
        crate::policy::compile_in_child_processes(exe.clone());
    }
    let dir = &Profiles(ProfilesDir::find(
        cli.profiles_dir.as_deref(),
        env,
        Path::new("."),
    ));
    match cli.command {
        Command::Completions { .. } | Command::Man { .. } | Command::Service(_) => {
            Ok(ExitCode::from(2))
        }
        Command::Shell {
            profile,
            topic,
            user,
        } => {
            let profile = load(dir, &profile.profile, env)?;
            let user = user.map(|u| parse_user(&u)).transpose().context("--user")?;
            // The executor's settings, if there is an executor profile
            // beside Eagle's (built in when Eagle's is).
            let beside = match profile.origin {
                crate::profile::Origin::File => dir.dir()?.has_file("executor"),
                crate::profile::Origin::BuiltIn => true,
            };
            let executor = if beside && profile.name != "executor" {
                Some(load(dir, "executor", env)?)
            } else {
                None
            };
            harden();
            keep_zuliprc_private(&profile);
            if let Some(executor) = &executor {
                keep_zuliprc_private(executor);
            }
            let store = open_store(&profile).await?;
            let options = crate::transport::shell::ShellOptions {
                topic,
                user,
                login: env.get("USER").cloned().unwrap_or_else(|| "local".into()),
                interactive: process.interactive,
            };
            let setup = Setup {
                store: store.clone(),
                exe: process.exe()?,
                executor: Some(executor.unwrap_or_else(|| profile.clone())),
                eagle: Some(profile),
                demo_worker: true,
            };
            let stdin = tokio::io::BufReader::new(tokio::io::stdin());
            // SIGINT / SIGTERM end the shell as they end `eagle run`: what
            // is in flight is finished or handed back, nothing outlives it.
            let shutdown = tokio_util::sync::CancellationToken::new();
            spawn_signal_handler(shutdown.clone())?;
            let result =
                crate::transport::shell::run(setup, options, stdin, tokio::io::stdout(), shutdown)
                    .await;
            store.close().await;
            result?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Migrate(args) => db::migrate(dir, args, env).await,
        Command::Db(command) => {
            harden();
            db::run(dir, command, env).await
        }
        Command::Profile(ProfileCommand::List) => profiles::list(dir.dir()?, env),
        Command::Profile(ProfileCommand::Init { dir: to, force }) => {
            let to = match to {
                Some(to) => to,
                None => crate::profile::locate::config_profiles_dir(env).ok_or_else(|| {
                    anyhow::anyhow!("neither XDG_CONFIG_HOME nor HOME is set; use --dir")
                })?,
            };
            profiles::init(&to, force)
        }
        Command::Profile(ProfileCommand::Show { name }) => {
            let profile = load(dir, &name, env)?;
            print!("{}", profiles::show_profile(&profile, env));
            Ok(ExitCode::SUCCESS)
        }
        Command::Profile(ProfileCommand::Create { name, clone_from }) => {
            profiles::create_profile(dir.dir()?, &name, &clone_from)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Run(profile) => {
            // First of all: a SIGTERM while Eagle starts (systemd stopping
            // it early) is a clean stop too, not the default action.
            let shutdown = tokio_util::sync::CancellationToken::new();
            spawn_signal_handler(shutdown.clone())?;
            let profile = load(dir, &profile.profile, env)?;
            // Everything is validated before anything starts.
            let creds = crate::transport::zulip::zuliprc::credentials(&profile, env)?;
            if profile.role == crate::profile::Role::Executor
                && profile.executor.runner.worker_command.is_none()
            {
                bail!(
                    "profile {}: {}",
                    profile.name,
                    crate::executor::runner::NO_WORKER_COMMAND
                );
            }
            harden();
            keep_zuliprc_private(&profile);
            let store = tokio::select! {
                store = open_store(&profile) => store?,
                () = shutdown.cancelled() => return Ok(ExitCode::SUCCESS),
            };
            let mut transport = crate::transport::zulip::bot::ZulipTransport::new(&profile, creds)?;
            let name = profile.name.clone();
            let setup = match profile.role {
                crate::profile::Role::Orchestrator => Setup {
                    store: store.clone(),
                    exe: process.exe()?,
                    eagle: Some(profile),
                    executor: None,
                    demo_worker: false,
                },
                crate::profile::Role::Executor => Setup {
                    store: store.clone(),
                    exe: process.exe()?,
                    eagle: None,
                    executor: Some(profile),
                    demo_worker: false,
                },
            };
            let result = async {
                // Stopped while it sets up: nothing has started yet.
                let ctx = tokio::select! {
                    ctx = crate::daemon::Context::build(setup, &mut transport) => ctx?,
                    () = shutdown.cancelled() => return Ok(()),
                };
                crate::daemon::run(ctx, transport, shutdown).await
            }
            .await;
            store.close().await;
            result?;
            tracing::info!(profile = %name, "stopped cleanly");
            Ok(ExitCode::SUCCESS)
        }
        Command::Check(profile) => {
            let profile = load(dir, &profile.profile, env)?;
            check::check(&profile, env, process.exe.as_deref()).await
        }
        Command::Policy(command) => policy::run(dir, command, env).await,
        Command::Repo(repo::RepoCommand::Setup {
            profile,
            name,
            force,
        }) => {
            let profile = load(dir, &profile, env)?;
            harden();
            let store = open_store(&profile).await?;
            let result = repo::setup(profile, &store, process.exe()?, &name, force).await;
            store.close().await;
            result
        }
        Command::Digest(profile) => {
            let profile = load(dir, &profile.profile, env)?;
            harden();
            let store = open_store(&profile).await?;
            let result = once::digest(profile, &store, process.exe()?).await;
            store.close().await;
            result
        }
        Command::Import {
            from:
                Some(ImportFrom::ExecutorV2 {
                    profile,
                    url,
                    dry_run,
                    batch,
                }),
            ..
        } => {
            let profile = load(dir, &profile.profile, env)?;
            harden();
            let store = open_store(&profile).await?;
            let result = once::import_executor_v2(&store, &url, dry_run, batch).await;
            store.close().await;
            result
        }
        Command::Import {
            profile,
            from: None,
        } => {
            let profile = load(dir, &profile.profile, env)?;
            harden();
            let store = open_store(&profile).await?;
            let result = once::import(profile, &store, process.exe()?).await;
            store.close().await;
            result
        }
        Command::Analyze {
            profile,
            reanalyze_skipped,
            dry_run,
        } => {
            let profile = load(dir, &profile.profile, env)?;
            harden();
            let store = open_store(&profile).await?;
            let result =
                once::analyze(profile, &store, process.exe()?, reanalyze_skipped, dry_run).await;
            store.close().await;
            result
        }
        Command::Request { .. }
        | Command::Hook(_)
        | Command::DemoWorker { .. }
        | Command::WorkerShim { .. } => Ok(ExitCode::from(2)),
    }
}

/// The profiles directory, chosen once; an error only for the commands
/// that read a profile.
pub(crate) struct Profiles(Result<ProfilesDir, String>);

impl Profiles {
    pub(crate) fn dir(&self) -> anyhow::Result<&ProfilesDir> {
        self.0.as_ref().map_err(|why| anyhow::anyhow!("{why}"))
    }
}

pub(crate) fn load(
    dir: &Profiles,
    name: &str,
    env: &BTreeMap<String, String>,
) -> anyhow::Result<Profile> {
    let profile = dir.dir()?.load(name, env)?;
    crate::ops::logging::use_profile_format(profile.ops.log_format);
    Ok(profile)
}

fn parse_log_format(text: &str) -> Result<crate::profile::LogFormat, String> {
    crate::profile::LogFormat::parse(text)
        .ok_or_else(|| format!("{text:?} is not a log format: text or json"))
}

async fn open_store(profile: &Profile) -> anyhow::Result<Store> {
    Store::open_pooled(&profile.database_url, profile.store.max_connections)
        .await
        .with_context(|| format!("profile {}", profile.name))
}

fn parse_user(text: &str) -> anyhow::Result<UserRef> {
    let text = text.trim();
    if let Ok(id) = text.parse::<u64>() {
        return Ok(UserRef::Id(id));
    }
    if text.contains('@') && !text.contains(char::is_whitespace) {
        return Ok(UserRef::Email(text.to_string()));
    }
    bail!("{text:?} is neither an email nor a user id")
}

/// Cancels `shutdown` on SIGINT or SIGTERM.
fn spawn_signal_handler(shutdown: tokio_util::sync::CancellationToken) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
    tokio::spawn(async move {
        tokio::select! {
            _ = interrupt.recv() => tracing::info!("SIGINT: finishing what is in flight"),
            _ = terminate.recv() => tracing::info!("SIGTERM: finishing what is in flight"),
        }
        shutdown.cancel();
    });
    Ok(())
}
