//! Raw profile → [`Profile`]: every check happens here, once, at start-up.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::field::BUILTIN_PLUGINS;
use super::field::{Origins, duration, unix_user};
use super::locate::BuiltIn;
use super::raw::{RawDecisions, RawProfile, RawRunner, RawUserRef};
pub use super::worker_command::worker_command;
use super::worker_env::env_names;
use super::{
    ChatSettings, DatabaseUrl, DecisionSettings, EagleSettings, ExecutorSettings, KindLimits,
    Origin, Persona, PluginLimits, PluginSource, PluginSpec, PolicySettings, Profile, ProfileError,
    Role, RunnerSettings, UserRef, WorkerEnv, WorkerKind, ZulipSettings, default_data_dir,
};

const DEFAULT_LATE_COMMAND_AGE: Duration = Duration::from_secs(24 * 60 * 60);
const DEFAULT_RELOAD_INTERVAL: Duration = Duration::from_secs(2);
const MAX_TOPIC_CHARS: usize = 60;
const DEFAULT_SHELL_WAIT: Duration = Duration::from_secs(60);

/// The prompt kinds, as `[runner.kinds.<kind>]` names them.
pub const PROMPT_KINDS: &[&str] = &[
    "investigation",
    "continue",
    "fix_ci",
    "fix_comments",
    "pr_review",
];
/// The actions the hook table may map a command to (`read` needs no request).
const HOOK_ACTIONS_HINT: &str =
    "the action of the request it becomes, such as run_command (or read, which asks nothing)";

/// `builtin`: the profile is built in (`path` is where its file would be,
/// what its relative paths resolve against).
pub fn validate(
    name: &str,
    path: &Path,
    raw: RawProfile,
    env: &BTreeMap<String, String>,
    builtin: Option<&BuiltIn>,
) -> Result<Profile, ProfileError> {
    let origins = Origins {
        file: match builtin {
            Some(b) => format!("built-in profile {}", b.name),
            None => path.display().to_string(),
        },
        env,
    };
    let base = path.parent().unwrap_or(Path::new("."));

    let role = match raw.role.as_deref().map(str::trim) {
        Some("orchestrator") => Role::Orchestrator,
        Some("executor") => Role::Executor,
        Some(other) => {
            return Err(origins.error(
                "role",
                None,
                format!("{other:?} is not a role (use \"orchestrator\" or \"executor\")"),
            ));
        }
        None => {
            return Err(origins.error(
                "role",
                None,
                "missing (use \"orchestrator\" or \"executor\")",
            ));
        }
    };

    let display_name = match raw.display_name.map(|n| n.trim().to_string()) {
        Some(n) if n.is_empty() => return Err(origins.error("display_name", None, "is empty")),
        Some(n) => n,
        None => match role {
            Role::Orchestrator => "Eagle".to_string(),
            Role::Executor => "Исполнитель".to_string(),
        },
    };

    let zuliprc = match raw.zuliprc.as_deref() {
        Some("") => return Err(origins.error("zuliprc", None, "is empty")),
        Some(file) => origins.resolve("zuliprc", base, file),
        None => base.join(format!("{name}.zuliprc")),
    };

    let data_dir = match raw.data_dir.as_deref() {
        Some("") => return Err(origins.error("data_dir", None, "is empty")),
        Some(dir) => origins.resolve("data_dir", base, dir),
        None => default_data_dir(env).map_err(|why| origins.error("data_dir", None, why))?,
    };

    let database_url = match raw.database_url {
        None => default_database_url(&data_dir),
        Some(url) => {
            let url = DatabaseUrl::new(url.trim());
            let scheme_ok = url.expose().starts_with("sqlite:") || url.is_postgres();
            if !scheme_ok {
                // Never echo the URL itself: it may carry a password.
                let what = match url.expose().split_once("://") {
                    Some((scheme, _)) if !scheme.contains(char::is_whitespace) => {
                        format!("unsupported scheme {scheme:?}")
                    }
                    _ => "not a URL".to_string(),
                };
                return Err(origins.error(
                    "database_url",
                    None,
                    format!("{what} (use sqlite:PATH or postgres://USER@HOST/DB)"),
                ));
            }
            url
        }
    };

    let store = super::pool::store(&raw.store, &origins)?;
    let approvers = raw
        .approvers
        .iter()
        .enumerate()
        .map(|(i, who)| user_ref(who).map_err(|why| origins.error("approvers", Some(i), why)))
        .collect::<Result<Vec<_>, _>>()?;

    let owner = raw
        .owner
        .as_ref()
        .map(|who| user_ref(who).map_err(|why| origins.error("owner", None, why)))
        .transpose()?;

    let channels = validate_channels(&raw.channels, &origins)?;
    let executor_channel = match raw.executor_channel.as_deref().map(str::trim) {
        None => "executor".to_string(),
        Some("") => return Err(origins.error("executor_channel", None, "is empty")),
        Some(name) if name.chars().count() > MAX_TOPIC_CHARS => {
            return Err(origins.error(
                "executor_channel",
                None,
                format!("{name:?} is longer than {MAX_TOPIC_CHARS} characters"),
            ));
        }
        Some(name) => name.to_string(),
    };

    // Read by the orchestrator only (the executor ignores it), so that one
    // environment can serve both profiles.
    let executor_bot = match &raw.executor_bot {
        None => None,
        Some(who) => Some(user_ref(who).map_err(|why| origins.error("executor_bot", None, why))?),
    };

    let persona = match raw.persona.as_deref() {
        Some(file) => {
            let path = origins.resolve("persona", base, file);
            // A built-in profile's own persona is built in too, unless a
            // file of that name is beside where the profile would be.
            let own = builtin.filter(|b| file == b.soul.0 && origins.of("persona") == origins.file);
            match own {
                _ if path.is_file() => Some(Persona::File(path)),
                Some(b) => Some(Persona::BuiltIn {
                    name: b.soul.0,
                    text: b.soul.1,
                }),
                None => {
                    return Err(origins.error(
                        "persona",
                        None,
                        format!("{} does not exist", path.display()),
                    ));
                }
            }
        }
        None => Some(base.join(format!("{name}.soul.md")))
            .filter(|p| p.is_file())
            .map(Persona::File),
    };

    let zulip = ZulipSettings {
        late_command_age: duration(
            raw.zulip.late_command_age.as_deref(),
            DEFAULT_LATE_COMMAND_AGE,
        )
        .map_err(|why| origins.error("zulip.late_command_age", None, why))?,
        all_public_streams: raw.zulip.all_public_streams.unwrap_or(false),
    };
    let prune_after =
        super::care::prune_after(&raw.store, raw.zulip.retention.as_deref(), &origins)?;

    let bounded =
        |key: &str, value: Option<i64>, default: usize, range: std::ops::RangeInclusive<i64>| {
            let value = value.unwrap_or(default as i64);
            if range.contains(&value) {
                Ok(value as usize)
            } else {
                Err(origins.error(
                    key,
                    None,
                    format!("{value} is outside {}..={}", range.start(), range.end()),
                ))
            }
        };
    let defaults = ChatSettings::default();
    let chat = ChatSettings {
        max_commands: bounded(
            "chat.max_commands",
            raw.chat.max_commands,
            defaults.max_commands,
            1..=100,
        )?,
        max_reply_parts: bounded(
            "chat.max_reply_parts",
            raw.chat.max_reply_parts,
            defaults.max_reply_parts,
            1..=50,
        )?,
        sender_rate: bounded(
            "chat.sender_rate",
            raw.chat.sender_rate,
            defaults.sender_rate as usize,
            0..=10_000,
        )? as u32,
    };

    let policy = PolicySettings {
        dir: match raw.policy.dir.as_deref() {
            Some("") => return Err(origins.error("policy.dir", None, "is empty")),
            Some(dir) => origins.resolve("policy.dir", base, dir),
            None => base.join("../plugins"),
        },
        load_all: raw.policy.load_all.unwrap_or(true),
        exclude: match raw.policy.exclude {
            Some(names) if names.iter().any(|n| n.trim().is_empty() || n.contains('/')) => {
                return Err(origins.error(
                    "policy.exclude",
                    None,
                    "names files of policy.dir: no empty names, no paths",
                ));
            }
            Some(names) => names,
            None => Vec::new(),
        },
        reload_interval: duration(
            raw.policy.reload_interval.as_deref(),
            DEFAULT_RELOAD_INTERVAL,
        )
        .map_err(|why| origins.error("policy.reload_interval", None, why))?,
        plugins: match raw.policy.plugins {
            None => BUILTIN_PLUGINS
                .iter()
                .map(|name| PluginSpec {
                    source: PluginSource::Builtin(name.to_string()),
                    config_json: "{}".into(),
                    limits: PluginLimits::default(),
                })
                .collect(),
            Some(list) => list
                .into_iter()
                .enumerate()
                .map(|(i, plugin)| {
                    super::plugin_spec::plugin_spec(plugin)
                        .map_err(|why| origins.error("policy.plugins", Some(i), why))
                })
                .collect::<Result<Vec<_>, _>>()?,
        },
    };

    let mut policy = policy;
    // The default filter's owner is the owner Eagle knows, the Asana
    // token's user (by gid: `asana:me`, as the intake records that user),
    // unless its configuration names one. Never the chat owner: a chat
    // address is not who a task is assigned to.
    for spec in &mut policy.plugins {
        if spec.source == PluginSource::Builtin("default-filter".into()) {
            spec.config_json = with_default_owner(&spec.config_json, DEFAULT_FILTER_OWNER);
        }
    }

    // [runner] is the executor's (and the shell's, without an executor
    // profile); [decisions] is Eagle's. Both are read for every profile, so
    // one environment can serve both processes.
    let mut raw_runner = raw.runner.unwrap_or_default();
    let review_rules = raw_runner.review_rules.take();
    let review_checks = raw_runner.review_checks.take();
    let raw_repos = raw_runner.repos.take();
    let raw_repo = raw_runner.repo.take();
    let mut runner = runner_settings(raw_runner, &origins, base)?;
    let decisions = decision_settings(raw.decisions.unwrap_or_default(), &origins)?;
    let shell_wait = duration(raw.shell_wait.as_deref(), DEFAULT_SHELL_WAIT)
        .map_err(|why| origins.error("shell_wait", None, why))?;
    let analyzer = super::integrations::analyzer(
        raw.analyzer.unwrap_or_default(),
        &origins,
        &executor_channel,
        runner.sandbox.mode == super::SandboxMode::On,
    )?;
    super::worker_env::refuse_token_envs(
        [
            (
                "github.token_env",
                raw.github.as_ref().and_then(|g| g.token_env.as_deref()),
            ),
            (
                "asana.token_env",
                raw.asana.as_ref().and_then(|a| a.token_env.as_deref()),
            ),
        ],
        &runner,
        &analyzer,
        &origins,
    )?;
    let secret_files = secret_files(
        raw.github.as_ref(),
        raw.asana.as_ref(),
        raw_repos.as_deref().unwrap_or_default(),
        &origins,
        base,
    );
    let github = raw
        .github
        .map(|raw| super::integrations::github(raw, &origins, base, env))
        .transpose()?;
    runner.repos = super::repos::repos(
        raw_repos,
        raw_repo.as_deref(),
        &super::repos::RepoDefaults {
            github_repo: github.as_ref().map(|g| &g.repo),
            base: github.as_ref().map_or("main", |g| g.base.as_str()),
            has_github: github.is_some(),
        },
        &origins,
        base,
        env,
    )?;
    runner.review = super::review::settings(
        review_rules,
        review_checks,
        github.as_ref().map_or(&[][..], |g| &g.required_checks),
        &origins,
    )?;
    let asana = raw
        .asana
        .map(|raw| super::integrations::asana(raw, &origins, base, env))
        .transpose()?;

    let conversation =
        super::conversation::conversation(raw.conversation, &origins, persona.as_ref(), env)?;
    let digest = super::conversation::digest(raw.digest, &origins, &executor_channel)?;
    let ops = super::ops::ops(raw.ops, &origins)?;
    // An escalation must reach someone: Eagle with approvers names its owner.
    if role == Role::Orchestrator && !approvers.is_empty() && owner.is_none() {
        return Err(origins.error(
            "owner",
            None,
            "is missing: Eagle has approvers, so it escalates, and an escalation @-mentions \
             the owner; name one of the approvers (a Zulip user id or email)",
        ));
    }

    Ok(Profile {
        name: name.to_string(),
        path: path.to_path_buf(),
        origin: if builtin.is_some() {
            Origin::BuiltIn
        } else {
            Origin::File
        },
        role,
        display_name,
        zuliprc,
        database_url,
        store,
        data_dir,
        approvers,
        owner,
        channels,
        executor_channel,
        persona,
        zulip,
        chat,
        github,
        shell_wait,
        ops,
        secret_files,
        eagle: EagleSettings {
            executor_bot,
            policy,
            decisions,
            analyzer,
            asana,
            conversation,
            digest,
            prune_after,
        },
        executor: ExecutorSettings { runner },
    })
}

/// The files the profile names that hold secrets (token files, private
/// keys, deploy keys), resolved: kept from every worker's view.
fn secret_files(
    github: Option<&super::raw::RawGithub>,
    asana: Option<&super::raw::RawAsana>,
    repos: &[super::repos::RawRepo],
    origins: &Origins<'_>,
    base: &Path,
) -> Vec<PathBuf> {
    let named = [
        (
            "github.token_file",
            github.and_then(|g| g.token_file.as_deref()),
        ),
        (
            "github.private_key_file",
            github.and_then(|g| g.private_key_file.as_deref()),
        ),
        (
            "asana.token_file",
            asana.and_then(|a| a.token_file.as_deref()),
        ),
    ]
    .into_iter()
    .chain(repos.iter().flat_map(|r| {
        [
            ("runner.repos", r.token_file.as_deref()),
            ("runner.repos", r.ssh_key_file.as_deref()),
        ]
    }));
    named
        .filter_map(|(key, value)| {
            let value = value?.trim();
            (!value.is_empty()).then(|| origins.resolve(key, base, value))
        })
        .collect()
}

fn runner_settings(
    raw: RawRunner,
    origins: &Origins<'_>,
    base: &Path,
) -> Result<RunnerSettings, ProfileError> {
    let dur = |key: &str, value: Option<&str>, default: Duration| {
        let d = duration(value, default).map_err(|why| origins.error(key, None, why))?;
        if d.is_zero() {
            return Err(origins.error(key, None, "must be longer than zero"));
        }
        Ok(d)
    };
    let worker_command = match raw.worker_command.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(text) => Some(
            worker_command(text, raw.worker_kind.as_deref())
                .map_err(|why| origins.error("runner.worker_command", None, why))?,
        ),
    };
    if raw.worker_kind.is_some() && worker_command.is_none() {
        return Err(origins.error(
            "runner.worker_kind",
            None,
            "is set but runner.worker_command is not",
        ));
    }
    let max_workers = raw.max_workers.unwrap_or(2);
    if !(1..=256).contains(&max_workers) {
        return Err(origins.error(
            "runner.max_workers",
            None,
            format!("{max_workers} is outside 1..=256"),
        ));
    }
    let max_attempts = raw.max_attempts.unwrap_or(3);
    if !(1..=100).contains(&max_attempts) {
        return Err(origins.error(
            "runner.max_attempts",
            None,
            format!("{max_attempts} is outside 1..=100"),
        ));
    }
    let max_waits = raw.max_waits.unwrap_or(20);
    if !(1..=1000).contains(&max_waits) {
        return Err(origins.error(
            "runner.max_waits",
            None,
            format!("{max_waits} is outside 1..=1000"),
        ));
    }
    if let Some(cost) = raw.max_cost_usd
        && !(cost.is_finite() && cost > 0.0)
    {
        return Err(origins.error(
            "runner.max_cost_usd",
            None,
            format!("{cost} is not a positive amount of dollars"),
        ));
    }
    let max_requests = raw.max_requests.unwrap_or(500);
    if !(1..=1_000_000).contains(&max_requests) {
        return Err(origins.error(
            "runner.max_requests",
            None,
            format!("{max_requests} is outside 1..=1000000"),
        ));
    }
    let worker_user = unix_user("runner.worker_user", raw.worker_user.as_deref(), origins)?;
    let worker_names = env_names(
        "runner.worker_env",
        raw.worker_env.unwrap_or_default(),
        origins,
    )?;
    let model_url = super::sandbox::model_url(&worker_names, origins.env);
    let kind = worker_command.as_ref().map(|c| c.kind);
    let sandbox = super::sandbox::sandbox_settings(
        raw.sandbox.unwrap_or_default(),
        kind,
        model_url,
        origins,
        base,
    )?;
    let mut worker_env = WorkerEnv::resolve(
        worker_names,
        raw.worker_path.filter(|p| !p.trim().is_empty()),
        origins.env,
    );
    let model = match (kind, sandbox.mode) {
        (Some(WorkerKind::Claude), super::SandboxMode::On) => {
            super::model_key::hold_back(model_url, origins.env, &mut worker_env)
                .map_err(|why| origins.error("runner.worker_env", None, why))?
        }
        _ => None,
    };
    let limits = KindLimits {
        no_output: dur(
            "runner.no_output_timeout",
            raw.no_output_timeout.as_deref(),
            Duration::from_secs(30 * 60),
        )?,
        hard: dur(
            "runner.hard_timeout",
            raw.hard_timeout.as_deref(),
            Duration::from_secs(3 * 3600),
        )?,
    };
    let mut kind_limits = BTreeMap::new();
    for (kind, raw_kind) in raw.kinds.unwrap_or_default() {
        if !PROMPT_KINDS.contains(&kind.as_str()) {
            return Err(origins.error(
                "runner.kinds",
                None,
                format!(
                    "{kind:?} is not a prompt kind ({})",
                    PROMPT_KINDS.join(", ")
                ),
            ));
        }
        let key = format!("runner.kinds.{kind}");
        kind_limits.insert(
            kind,
            KindLimits {
                no_output: dur(
                    &format!("{key}.no_output_timeout"),
                    raw_kind.no_output_timeout.as_deref(),
                    limits.no_output,
                )?,
                hard: dur(
                    &format!("{key}.hard_timeout"),
                    raw_kind.hard_timeout.as_deref(),
                    limits.hard,
                )?,
            },
        );
    }
    let path = |key: &str, value: Option<&str>| -> Result<Option<PathBuf>, ProfileError> {
        match value.map(str::trim) {
            None => Ok(None),
            Some("") => Err(origins.error(key, None, "is empty")),
            Some(value) => Ok(Some(origins.resolve(key, base, value))),
        }
    };
    let mut hook_rules = Vec::new();
    for (prefix, action) in raw.hook_rules.unwrap_or_default() {
        let action = action.trim();
        let ok = !prefix.trim().is_empty()
            && !action.is_empty()
            && action
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !ok {
            return Err(origins.error(
                "runner.hook_rules",
                None,
                format!("{prefix:?} = {action:?}: give a command prefix and {HOOK_ACTIONS_HINT}"),
            ));
        }
        hook_rules.push((prefix.trim().to_string(), action.to_string()));
    }
    Ok(RunnerSettings {
        worker_command,
        max_workers,
        max_attempts,
        dry_run: raw.dry_run.unwrap_or(false),
        max_waits,
        max_cost_usd: raw.max_cost_usd,
        max_requests: max_requests as usize,
        worker_user,
        worker_env,
        limits,
        kind_limits,
        wrap_up_grace: dur(
            "runner.wrap_up_grace",
            raw.wrap_up_grace.as_deref(),
            Duration::from_secs(120),
        )?,
        request_wait: dur(
            "runner.request_wait",
            raw.request_wait.as_deref(),
            Duration::from_secs(600),
        )?,
        hook_timeout: dur(
            "runner.hook_timeout",
            raw.hook_timeout.as_deref(),
            Duration::from_secs(120),
        )?,
        // Zero posts every status line; anything else coalesces bursts.
        status_interval: duration(raw.status_interval.as_deref(), Duration::from_secs(10))
            .map_err(|why| origins.error("runner.status_interval", None, why))?,
        prompts_dir: path("runner.prompts_dir", raw.prompts_dir.as_deref())?,
        runs_dir: path("runner.runs_dir", raw.runs_dir.as_deref())?,
        repos: Vec::new(),
        hook_rules,
        sandbox,
        model,
        review: super::ReviewSettings::default(),
    })
}

fn decision_settings(
    raw: RawDecisions,
    origins: &Origins<'_>,
) -> Result<DecisionSettings, ProfileError> {
    let reminder_after = duration(raw.reminder_after.as_deref(), Duration::from_secs(2 * 3600))
        .map_err(|why| origins.error("decisions.reminder_after", None, why))?;
    let approval_ttl = duration(raw.approval_ttl.as_deref(), Duration::from_secs(24 * 3600))
        .map_err(|why| origins.error("decisions.approval_ttl", None, why))?;
    if approval_ttl.is_zero() {
        return Err(origins.error("decisions.approval_ttl", None, "must be longer than zero"));
    }
    Ok(DecisionSettings {
        reminder_after,
        approval_ttl,
    })
}

/// `sqlite:<data_dir>/eagle.db`, created on first use.
pub fn default_database_url(data_dir: &Path) -> DatabaseUrl {
    DatabaseUrl::new(format!(
        "sqlite://{}?mode=rwc",
        data_dir.join("eagle.db").display()
    ))
}

fn user_ref(raw: &RawUserRef) -> Result<UserRef, String> {
    match raw {
        RawUserRef::Id(id) => u64::try_from(*id)
            .ok()
            .filter(|id| *id > 0)
            .map(UserRef::Id)
            .ok_or_else(|| format!("{id} is not a valid user id")),
        RawUserRef::Text(text) => {
            let text = text.trim();
            if let Ok(id) = text.parse::<u64>() {
                return if id > 0 {
                    Ok(UserRef::Id(id))
                } else {
                    Err(format!("{text} is not a valid user id"))
                };
            }
            if looks_like_email(text) {
                Ok(UserRef::Email(text.to_string()))
            } else {
                Err(format!("{text:?} is neither an email nor a user id"))
            }
        }
    }
}

fn looks_like_email(text: &str) -> bool {
    match text.split_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && !domain.is_empty()
                && !domain.contains('@')
                && !text.chars().any(char::is_whitespace)
        }
        None => false,
    }
}

fn validate_channels(
    channels: &[String],
    origins: &Origins<'_>,
) -> Result<Vec<String>, ProfileError> {
    let mut seen: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for (i, channel) in channels.iter().enumerate() {
        let name = channel.trim();
        if name.is_empty() {
            return Err(origins.error("channels", Some(i), "is empty"));
        }
        if name.chars().count() > MAX_TOPIC_CHARS {
            return Err(origins.error(
                "channels",
                Some(i),
                format!("{name:?} is longer than {MAX_TOPIC_CHARS} characters"),
            ));
        }
        if seen.iter().any(|s| crate::ground::text::eq_fold(s, name)) {
            return Err(origins.error(
                "channels",
                Some(i),
                format!("{name:?} is listed twice (channel names ignore case)"),
            ));
        }
        seen.push(name);
        out.push(name.to_string());
    }
    Ok(out)
}

/// The default filter's owner when the profile names none: the Asana
/// token's user, as the intake records it (`Alex <asana:me>`).
const DEFAULT_FILTER_OWNER: &str = "asana:me";

/// `config_json` with `owner` set to `owner` if it has none (or an empty
/// one: a blank string or an empty list).
fn with_default_owner(config_json: &str, owner: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(config_json) {
        Ok(serde_json::Value::Object(mut map)) => {
            let unset = match map.get("owner") {
                None | Some(serde_json::Value::Null) => true,
                Some(serde_json::Value::String(o)) => o.trim().is_empty(),
                Some(serde_json::Value::Array(list)) => list
                    .iter()
                    .all(|o| o.as_str().is_none_or(|o| o.trim().is_empty())),
                Some(_) => false,
            };
            if unset {
                map.insert("owner".into(), serde_json::Value::String(owner.to_string()));
            }
            serde_json::Value::Object(map).to_string()
        }
        _ => config_json.to_string(),
    }
}
