//! The command line: what `eagle` accepts, and the code behind each subcommand.

mod analyze;
mod policy;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use clap::{Args, Parser, Subcommand};

use crate::profile::{self, Profile, UserRef};
use crate::store::Store;

/// Eagle runs AI coding agents as a supervised team on Zulip.
#[derive(Debug, Parser)]
#[command(name = "eagle", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// Where the profiles (`<name>.toml`) are.
    #[arg(long, global = true, env = profile::PROFILES_DIR_ENV, default_value = "profiles", value_name = "DIR")]
    pub profiles_dir: PathBuf,

    #[command(subcommand)]
    pub command: Command,
}

/// Which profile a subcommand works with.
#[derive(Debug, Clone, Args)]
pub struct ProfileArg {
    /// The profile to use: a file `<DIR>/<NAME>.toml`.
    #[arg(long, short = 'p', default_value = "eagle", value_name = "NAME")]
    pub profile: String,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one bot identity on Zulip (Eagle, or the executor).
    Run(ProfileArg),
    /// Talk to Eagle locally: each line you type is a chat message (no Zulip needed).
    Shell {
        #[command(flatten)]
        profile: ProfileArg,
        /// The topic your messages are posted in.
        #[arg(long, default_value = "general")]
        topic: String,
        /// Who you are (an email or a Zulip user id); by default the profile's owner.
        #[arg(long, value_name = "EMAIL|ID")]
        user: Option<String>,
    },
    /// Create or upgrade the database.
    Migrate(ProfileArg),
    /// List, show and create profiles.
    #[command(subcommand)]
    Profile(ProfileCommand),
    /// Check that a profile is ready to run: settings, database, Zulip.
    Check(ProfileArg),
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
    /// Import the tasks of the profile's [asana] places once, and print
    /// what changed (the intake of `eagle run` does this continuously).
    Import(ProfileArg),
    /// Inspect and try the policy plugins.
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// (For workers) ask the run's runner for permission and wait for the
    /// decision: exit 0 approved, 1 denied (reason on stderr), 3 a human
    /// decides or the run is held (stop now; you will be resumed), 4 could not ask.
    Request {
        /// Raise a question instead of asking permission ([ESCALATE: <topic>]).
        #[arg(long)]
        escalate: bool,
        /// The action: run_tests, create_worktree, push_branch, open_draft_pr, merge_pr, …
        action: String,
        /// What exactly (the branch, the suite, the PR).
        details: Vec<String>,
    },
    /// (For workers) hooks of coding agents that route tool permissions through Eagle.
    #[command(subcommand)]
    Hook(HookCommand),
    /// A demo worker that walks the seed story (create_worktree and run_tests
    /// approved, merge_pr escalated, then [DONE: pr_ready]); the shell uses it
    /// when no worker command is configured.
    DemoWorker {
        /// The prompt (the demo only reads whether it is a resume).
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

#[derive(Debug, Subcommand)]
pub enum ProfileCommand {
    /// List the profiles in the profiles directory.
    List,
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
            action,
            details,
        } => crate::worker::request(&env, &action, &details.join(" "), escalate),
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
            crate::worker::demo(&env, prompt.as_deref().unwrap_or_default())
        }
        Command::WorkerShim {
            deadline,
            rules,
            argv,
        } => crate::worker::shim(
            std::time::Duration::from_secs(deadline),
            rules.as_deref(),
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
    crate::host::private_umask();
    if let Err(error) = crate::host::make_non_dumpable() {
        tracing::warn!(%error, "cannot make the process non-dumpable");
    }
}

/// Runs the parsed command line. `env` is the process environment, read once.
pub async fn run(cli: Cli, env: BTreeMap<String, String>) -> anyhow::Result<ExitCode> {
    if cli.command.is_worker_side() {
        return Ok(run_worker_side(cli, env));
    }
    // Plugins are compiled by a short-lived `eagle` of their own: the
    // compiler's memory never stays with the long-running process.
    if let Ok(exe) = std::env::current_exe() {
        crate::policy::compile_in_child_processes(exe);
    }
    let dir = &cli.profiles_dir;
    match cli.command {
        Command::Shell {
            profile,
            topic,
            user,
        } => {
            let profile = load(dir, &profile.profile, &env)?;
            let user = user.map(|u| parse_user(&u)).transpose().context("--user")?;
            // The executor's settings, if there is an executor profile.
            let executor = if dir.join("executor.toml").is_file() && profile.name != "executor" {
                Some(load(dir, "executor", &env)?)
            } else {
                None
            };
            harden();
            let store = open_store(&profile).await?;
            let options = crate::shell::ShellOptions {
                topic,
                user,
                login: env.get("USER").cloned().unwrap_or_else(|| "local".into()),
                interactive: crate::shell::stdin_is_terminal(),
                executor,
                env: env.clone(),
            };
            let stdin = tokio::io::BufReader::new(tokio::io::stdin());
            crate::shell::run(&profile, &store, &options, stdin, tokio::io::stdout()).await?;
            store.close().await;
            Ok(ExitCode::SUCCESS)
        }
        Command::Migrate(profile) => {
            let profile = load(dir, &profile.profile, &env)?;
            let store = Store::connect(&profile.database_url).await?;
            let applied = store.migrate().await?;
            let total = store.applied_migrations().await?;
            println!(
                "{}: {applied} migration(s) applied now, {total} in all ({} backend)",
                store.url(),
                store.backend().as_str()
            );
            store.close().await;
            Ok(ExitCode::SUCCESS)
        }
        Command::Profile(ProfileCommand::List) => {
            let names = profile::list(dir)
                .with_context(|| format!("cannot read the profiles directory {}", dir.display()))?;
            if names.is_empty() {
                println!("no profiles in {}", dir.display());
            }
            for name in names {
                match Profile::load(dir, &name, &env) {
                    Ok(p) => println!("{name}\t{}\t{}", p.role.as_str(), p.display_name),
                    Err(e) => println!("{name}\tinvalid: {e}"),
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Profile(ProfileCommand::Show { name }) => {
            let profile = load(dir, &name, &env)?;
            print!("{}", show_profile(&profile, &env));
            Ok(ExitCode::SUCCESS)
        }
        Command::Profile(ProfileCommand::Create { name, clone_from }) => {
            create_profile(dir, &name, &clone_from)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Run(profile) => {
            let profile = load(dir, &profile.profile, &env)?;
            // Everything is validated before anything starts.
            let creds = profile.zulip_credentials(&env)?;
            if profile.role == crate::profile::Role::Executor
                && profile.runner.worker_command.is_none()
            {
                bail!(
                    "profile {}: {}",
                    profile.name,
                    crate::runner::NO_WORKER_COMMAND
                );
            }
            harden();
            let store = open_store(&profile).await?;
            let shutdown = tokio_util::sync::CancellationToken::new();
            spawn_signal_handler(shutdown.clone())?;
            let loops = start_role(&profile, &creds, &store, &env, &shutdown).await?;
            let result = crate::zulip::bot::run(&profile, &creds, &store, shutdown.clone()).await;
            shutdown.cancel();
            for task in loops {
                let _ = task.await;
            }
            store.close().await;
            result?;
            tracing::info!(profile = %profile.name, "stopped cleanly");
            Ok(ExitCode::SUCCESS)
        }
        Command::Check(profile) => {
            let profile = load(dir, &profile.profile, &env)?;
            check(&profile, &env).await
        }
        Command::Policy(command) => policy::run(dir, command, &env).await,
        Command::Import(profile) => {
            let profile = load(dir, &profile.profile, &env)?;
            harden();
            let store = open_store(&profile).await?;
            let result = import(&profile, &store).await;
            store.close().await;
            result
        }
        Command::Analyze {
            profile,
            reanalyze_skipped,
            dry_run,
        } => {
            let profile = load(dir, &profile.profile, &env)?;
            harden();
            let store = open_store(&profile).await?;
            let result = analyze::run(&profile, &store, &env, reanalyze_skipped, dry_run).await;
            store.close().await;
            result
        }
        Command::Request { .. }
        | Command::Hook(_)
        | Command::DemoWorker { .. }
        | Command::WorkerShim { .. } => Ok(ExitCode::from(2)),
    }
}

/// What `eagle check` says about the analyzer, GitHub and Asana.
fn integration_checks(profile: &Profile) -> Vec<(crate::runner::Severity, String)> {
    use crate::profile::Role;
    use crate::runner::Severity;
    let mut out = Vec::new();
    let human = |d: std::time::Duration| humantime::format_duration(d).to_string();
    match (&profile.github, profile.role) {
        (Some(g), role) => out.push((
            Severity::Ok,
            match role {
                Role::Executor => format!(
                    "github: the PRs of {} are followed every {} (CI grace {}, {} fix-ci worker(s) and {} PR worker(s) per run at most{})",
                    g.repo,
                    human(g.poll_interval),
                    human(g.ci_grace),
                    g.ci_attempts,
                    g.max_rounds,
                    if g.required_checks.is_empty() {
                        String::new()
                    } else {
                        format!("; required: {}", g.required_checks.join(", "))
                    }
                ),
                Role::Orchestrator => format!(
                    "github: Eagle merges approved merge_pr requests in {} ({})",
                    g.repo, g.merge_method
                ),
            },
        )),
        (None, Role::Executor) => out.push((
            Severity::Warn,
            "no [github]: runs that reach pr wait there, and nothing follows their PRs (profiles/executor.toml, [github])".into(),
        )),
        (None, Role::Orchestrator) => out.push((
            Severity::Ok,
            "no [github]: an approved merge_pr is recorded, and the merge is left to a human".into(),
        )),
    }
    if profile.role == Role::Orchestrator {
        match &profile.analyzer.command {
            Some(command) => out.push((
                Severity::Ok,
                format!(
                    "analyzer: filters, then `{}` (no output {}, at most {})",
                    command.template,
                    human(profile.analyzer.no_output_timeout),
                    human(profile.analyzer.hard_timeout)
                ),
            )),
            None => out.push((
                Severity::Ok,
                "analyzer: filters only (no analysis command): kept tasks go to for_review".into(),
            )),
        }
        if let Some(a) = &profile.asana {
            let mut places = Vec::new();
            places.extend(a.projects.iter().map(|(_, s)| s.clone()));
            places.extend(a.sections.iter().map(|(_, s)| s.clone()));
            places.extend(a.my_tasks.iter().map(|(_, s)| s.clone()));
            places.extend(a.followed_source.iter().cloned());
            out.push((
                Severity::Ok,
                format!(
                    "asana: imports {} every {} (workspace {})",
                    places.join(", "),
                    human(a.poll_interval),
                    a.workspace
                ),
            ));
        }
    }
    out
}

/// `eagle import`: one Asana import.
async fn import(profile: &Profile, store: &Store) -> anyhow::Result<ExitCode> {
    let Some(intake) = crate::intake::Intake::for_profile(profile, store.clone())? else {
        anyhow::bail!(
            "profile {} has no [asana] section: nothing to import (see profiles/eagle.toml)",
            profile.name
        );
    };
    let summary = intake.import().await?;
    println!("{}", summary.text());
    Ok(if summary.failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Starts what the profile's role does besides chat: Eagle's decider (with
/// its plugins, watched for changes), or the executor's runner.
async fn start_role(
    profile: &Profile,
    creds: &crate::profile::ZulipCredentials,
    store: &Store,
    env: &BTreeMap<String, String>,
    shutdown: &tokio_util::sync::CancellationToken,
) -> anyhow::Result<Vec<tokio::task::JoinHandle<()>>> {
    let poster = crate::mirror::Poster {
        identity: profile.name.clone(),
        channel: profile.executor_channel.clone(),
    };
    match profile.role {
        crate::profile::Role::Orchestrator => {
            // Eagle decides by its plugins: load them now (a plugin that
            // fails is reported and votes escalate) and watch for drop-ins.
            let host = crate::policy::PolicyHost::for_profile(profile).await?;
            for plugin in host.plugins() {
                tracing::info!(plugin = %plugin.identity, state = %plugin.state, "policy plugin");
            }
            let watcher = host.spawn_watcher(shutdown.clone());
            let people = crate::mirror::People {
                owner_fallback: crate::zulip::bot::owner_mention(creds, profile.owner.as_ref())
                    .await,
                zulip: true,
            };
            let analyzer = crate::analyzer::Analyzer::for_profile(
                profile,
                store.clone(),
                host.clone(),
                poster.clone(),
                true,
                env,
            )?;
            let carrier =
                crate::carry::Carrier::for_profile(profile, store.clone(), poster.clone())?;
            let intake = crate::intake::Intake::for_profile(profile, store.clone())?;
            let decider = crate::decisions::Decider {
                store: store.clone(),
                policy: host.clone(),
                poster,
                people,
                settings: crate::decisions::DeciderSettings {
                    reminder_after: profile.decisions.reminder_after,
                    approval_ttl: profile.decisions.approval_ttl,
                },
            };
            let stop = || shutdown.clone();
            let mut loops = vec![
                watcher,
                tokio::spawn({
                    let stop = stop();
                    async move { decider.run(stop).await }
                }),
                tokio::spawn({
                    let stop = stop();
                    async move { analyzer.run(stop).await }
                }),
                tokio::spawn({
                    let stop = stop();
                    async move { carrier.run(stop).await }
                }),
            ];
            if let Some(intake) = intake {
                let stop = stop();
                loops.push(tokio::spawn(async move { intake.run(stop).await }));
            }
            Ok(loops)
        }
        crate::profile::Role::Executor => {
            let people = crate::mirror::People {
                owner_fallback: profile.owner.as_ref().map(ToString::to_string),
                zulip: true,
            };
            let runner = crate::runner::Runner::new(
                profile,
                store.clone(),
                crate::runner::RunnerOptions {
                    identity: profile.name.clone(),
                    people: people.clone(),
                    demo_if_unset: false,
                    exe: None,
                },
                env.clone(),
            )?;
            let prs = crate::prloop::PrLoop::for_profile(profile, store.clone(), poster, people)?;
            let (stop, stop_prs) = (shutdown.clone(), shutdown.clone());
            Ok(vec![
                tokio::spawn(async move { runner.run(stop).await }),
                tokio::spawn(async move { prs.run(stop_prs).await }),
            ])
        }
    }
}

pub(crate) fn load(
    dir: &Path,
    name: &str,
    env: &BTreeMap<String, String>,
) -> anyhow::Result<Profile> {
    Ok(Profile::load(dir, name, env)?)
}

async fn open_store(profile: &Profile) -> anyhow::Result<Store> {
    Store::open(&profile.database_url)
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

/// The human-readable view of a profile. Never prints a secret: the API key
/// is reported as present or missing, the database URL without its password.
pub fn show_profile(profile: &Profile, env: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let list = |items: &[UserRef]| {
        if items.is_empty() {
            "(none)".to_string()
        } else {
            items
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    let _ = writeln!(
        out,
        "profile:       {} ({})",
        profile.name,
        profile.path.display()
    );
    let _ = writeln!(out, "role:          {}", profile.role.as_str());
    let _ = writeln!(out, "display name:  {}", profile.display_name);
    let zulip = match profile.zulip_credentials(env) {
        Ok(creds) => format!(
            "{} as {} (API key: present; from {})",
            creds.site, creds.email, creds.source
        ),
        Err(e) => format!("not usable: {e}"),
    };
    let _ = writeln!(out, "zuliprc:       {}", profile.zuliprc.display());
    let _ = writeln!(out, "zulip:         {zulip}");
    let _ = writeln!(out, "database:      {}", profile.database_url.redacted());
    let _ = writeln!(out, "data dir:      {}", profile.data_dir.display());
    let _ = writeln!(out, "profile state: {}", profile.state_dir().display());
    let _ = writeln!(out, "approvers:     {}", list(&profile.approvers));
    let _ = writeln!(
        out,
        "owner:         {}",
        profile
            .owner
            .as_ref()
            .map_or("(none)".into(), ToString::to_string)
    );
    let channels = if profile.channels.is_empty() {
        "(every channel the bot is subscribed to)".to_string()
    } else {
        profile.channels.join(", ")
    };
    let _ = writeln!(out, "channels:      {channels}");
    let _ = writeln!(out, "executor runs: #{}", profile.executor_channel);
    if let Some(bot) = &profile.executor_bot {
        let _ = writeln!(out, "executor bot:  {bot}");
    }
    let _ = writeln!(
        out,
        "persona:       {}",
        profile
            .persona
            .as_ref()
            .map_or("(none)".into(), |p| p.display().to_string())
    );
    let _ = writeln!(
        out,
        "late commands: older than {} are reported, not run",
        humantime::format_duration(profile.zulip.late_command_age)
    );
    let _ = writeln!(
        out,
        "plugins:       dir {}{}",
        profile.policy.dir.display(),
        if profile.policy.load_all {
            ", loading every .wasm in it"
        } else {
            ""
        }
    );
    for (i, plugin) in profile.policy.plugins.iter().enumerate() {
        let _ = writeln!(
            out,
            "  {}. {} (fuel {}, memory {} MiB, timeout {} ms, config {})",
            i + 1,
            plugin.source,
            plugin.limits.fuel,
            plugin.limits.memory_bytes >> 20,
            plugin.limits.timeout.as_millis(),
            plugin.config_json
        );
    }
    out
}

/// Copies profile `from` (and its persona) to `name`, pointing the copy at
/// its own zuliprc so that two profiles never share one bot identity.
pub fn create_profile(dir: &Path, name: &str, from: &str) -> anyhow::Result<()> {
    profile::validate_name(name).map_err(anyhow::Error::msg)?;
    profile::validate_name(from).map_err(anyhow::Error::msg)?;
    let source = dir.join(format!("{from}.toml"));
    let target = dir.join(format!("{name}.toml"));
    if target.exists() {
        bail!("{} exists already; pick another name", target.display());
    }
    let text = std::fs::read_to_string(&source)
        .with_context(|| format!("cannot read profile {}", source.display()))?;
    let text = text
        .replace(
            &format!("\"{from}.zuliprc\""),
            &format!("\"{name}.zuliprc\""),
        )
        .replace(
            &format!("\"{from}.soul.md\""),
            &format!("\"{name}.soul.md\""),
        );
    std::fs::write(&target, text).with_context(|| format!("cannot write {}", target.display()))?;
    let persona = dir.join(format!("{from}.soul.md"));
    if persona.is_file() {
        let copy = dir.join(format!("{name}.soul.md"));
        if !copy.exists() {
            std::fs::copy(&persona, &copy)
                .with_context(|| format!("cannot copy {}", persona.display()))?;
        }
    }
    println!(
        "created {} from {}; give it its own bot: put its zuliprc at {}",
        target.display(),
        source.display(),
        dir.join(format!("{name}.zuliprc")).display()
    );
    Ok(())
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

async fn check(profile: &Profile, env: &BTreeMap<String, String>) -> anyhow::Result<ExitCode> {
    println!(
        "ok    profile {}: settings are valid ({})",
        profile.name,
        profile.path.display()
    );
    let store = open_store(profile).await?;
    println!(
        "ok    database {}: reachable, {} migration(s) applied",
        store.url(),
        store.applied_migrations().await?
    );
    let week = std::time::Duration::from_secs(7 * 24 * 3600);
    match store.given_up(&profile.name, week).await? {
        (0, _) => println!("ok    outbox: nothing given up in the last 7 days"),
        (n, last) => println!(
            "WARN  outbox: {n} message(s) could not be delivered in the last 7 days and were given up (the last: {})",
            last.as_deref().unwrap_or("no error recorded")
        ),
    }
    store.close().await;
    let mut local_ok = true;
    for (severity, text) in crate::runner::checks(profile)
        .into_iter()
        .chain(integration_checks(profile))
    {
        use crate::runner::Severity;
        let label = match severity {
            Severity::Ok => "ok  ",
            Severity::Warn => "WARN",
            Severity::Fail => "FAIL",
        };
        local_ok &= severity != Severity::Fail;
        println!("{label}  {text}");
    }
    let creds = profile.zulip_credentials(env)?;
    println!(
        "ok    zuliprc {}: {} at {}",
        creds.source, creds.email, creds.site
    );
    let mut findings = crate::zulip::bot::check(profile, &creds).await;
    // Eagle decides by its plugins: each must load.
    if profile.role == crate::profile::Role::Orchestrator {
        let host = crate::policy::PolicyHost::for_profile(profile).await?;
        for plugin in host.plugins() {
            findings.push(crate::zulip::bot::Finding {
                ok: plugin.loaded,
                text: format!(
                    "policy plugin {} ({}): {}",
                    plugin.identity, plugin.identity.source, plugin.state
                ),
            });
        }
    }
    let mut ok = local_ok;
    for finding in &findings {
        println!(
            "{}  {}",
            if finding.ok { "ok  " } else { "FAIL" },
            finding.text
        );
        ok &= finding.ok;
    }
    if ok {
        println!(
            "profile {} is ready: `eagle run --profile {}`",
            profile.name, profile.name
        );
        Ok(ExitCode::SUCCESS)
    } else {
        println!(
            "profile {} is not ready: fix what FAIL says, then check again",
            profile.name
        );
        Ok(ExitCode::FAILURE)
    }
}
