//! Raw profile → [`Profile`]: every check happens here, once, at start-up.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::raw::{RawPlugin, RawProfile, RawUserRef};
use super::{
    DatabaseUrl, PluginLimits, PluginSource, PluginSpec, PolicySettings, Profile, ProfileError,
    Role, UserRef, ZulipSettings, default_data_dir,
};

/// The plugins compiled into the binary.
pub const BUILTIN_PLUGINS: &[&str] = &["default-approval", "default-filter"];

const DEFAULT_LATE_COMMAND_AGE: Duration = Duration::from_secs(24 * 60 * 60);
const DEFAULT_RELOAD_INTERVAL: Duration = Duration::from_secs(2);
const MAX_TOPIC_CHARS: usize = 60;

/// Names the origin of a key: the environment variable that overrode it, or the file.
struct Origins<'a> {
    file: String,
    env: &'a BTreeMap<String, String>,
}

impl Origins<'_> {
    fn of(&self, key: &str) -> String {
        let var = format!(
            "{}{}",
            super::ENV_PREFIX,
            key.replace('.', "__").to_uppercase()
        );
        if self.env.contains_key(&var) {
            format!("{var} (environment)")
        } else {
            self.file.clone()
        }
    }

    fn error(&self, key: &str, index: Option<usize>, message: impl Into<String>) -> ProfileError {
        let shown = match index {
            Some(i) => format!("{key}[{i}]"),
            None => key.to_string(),
        };
        ProfileError::new(self.of(key), Some(shown), message)
    }

    /// Relative paths from the file resolve against its directory; from the
    /// environment, against the working directory.
    fn resolve(&self, key: &str, base: &Path, value: &str) -> PathBuf {
        let path = Path::new(value);
        if path.is_absolute() || self.of(key) != self.file {
            path.to_path_buf()
        } else {
            base.join(path)
        }
    }
}

pub fn validate(
    name: &str,
    path: &Path,
    raw: RawProfile,
    env: &BTreeMap<String, String>,
) -> Result<Profile, ProfileError> {
    let origins = Origins {
        file: path.display().to_string(),
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

    let executor_bot = match (&raw.executor_bot, role) {
        (None, _) => None,
        (Some(_), Role::Executor) => {
            return Err(origins.error(
                "executor_bot",
                None,
                "only an orchestrator profile names the executor bot it trusts",
            ));
        }
        (Some(who), Role::Orchestrator) => {
            Some(user_ref(who).map_err(|why| origins.error("executor_bot", None, why))?)
        }
    };

    let persona = match raw.persona.as_deref() {
        Some(file) => {
            let path = origins.resolve("persona", base, file);
            if !path.is_file() {
                return Err(origins.error(
                    "persona",
                    None,
                    format!("{} does not exist", path.display()),
                ));
            }
            Some(path)
        }
        None => Some(base.join(format!("{name}.soul.md"))).filter(|p| p.is_file()),
    };

    let zulip = ZulipSettings {
        late_command_age: duration(
            raw.zulip.late_command_age.as_deref(),
            DEFAULT_LATE_COMMAND_AGE,
        )
        .map_err(|why| origins.error("zulip.late_command_age", None, why))?,
        all_public_streams: raw.zulip.all_public_streams.unwrap_or(false),
    };

    let policy = PolicySettings {
        dir: match raw.policy.dir.as_deref() {
            Some("") => return Err(origins.error("policy.dir", None, "is empty")),
            Some(dir) => origins.resolve("policy.dir", base, dir),
            None => base.join("../plugins"),
        },
        load_all: raw.policy.load_all.unwrap_or(false),
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
                    plugin_spec(plugin).map_err(|why| origins.error("policy.plugins", Some(i), why))
                })
                .collect::<Result<Vec<_>, _>>()?,
        },
    };

    Ok(Profile {
        name: name.to_string(),
        path: path.to_path_buf(),
        role,
        display_name,
        zuliprc,
        database_url,
        data_dir,
        approvers,
        owner,
        channels,
        executor_channel,
        executor_bot,
        persona,
        zulip,
        policy,
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
        if seen.iter().any(|s| crate::text::eq_fold(s, name)) {
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

fn duration(value: Option<&str>, default: Duration) -> Result<Duration, String> {
    match value {
        None => Ok(default),
        Some(text) => humantime::parse_duration(text.trim())
            .map_err(|e| format!("{text:?} is not a duration like \"90s\" or \"24h\" ({e})")),
    }
}

fn plugin_spec(raw: RawPlugin) -> Result<PluginSpec, String> {
    let source = match (raw.builtin, raw.file) {
        (Some(name), None) => {
            if !BUILTIN_PLUGINS.contains(&name.as_str()) {
                return Err(format!(
                    "builtin {name:?} does not exist (built in: {})",
                    BUILTIN_PLUGINS.join(", ")
                ));
            }
            PluginSource::Builtin(name)
        }
        (None, Some(file)) if file.trim().is_empty() => return Err("file is empty".into()),
        (None, Some(file)) => PluginSource::File(PathBuf::from(file.trim())),
        (Some(_), Some(_)) => return Err("give either builtin or file, not both".into()),
        (None, None) => return Err("give builtin = \"NAME\" or file = \"PATH.wasm\"".into()),
    };
    let defaults = PluginLimits::default();
    let memory_mib = raw
        .memory_mib
        .unwrap_or((defaults.memory_bytes >> 20) as u64);
    if !(1..=4096).contains(&memory_mib) {
        return Err(format!("memory_mib {memory_mib} is outside 1..=4096"));
    }
    let timeout_ms = raw
        .timeout_ms
        .unwrap_or(defaults.timeout.as_millis() as u64);
    if !(1..=60_000).contains(&timeout_ms) {
        return Err(format!("timeout_ms {timeout_ms} is outside 1..=60000"));
    }
    let fuel = raw.fuel.unwrap_or(defaults.fuel);
    if fuel == 0 {
        return Err("fuel must be above 0".into());
    }
    let config_json = match raw.config {
        None => "{}".to_string(),
        Some(value @ serde_json::Value::Object(_)) => value.to_string(),
        Some(_) => return Err("config must be a table".into()),
    };
    Ok(PluginSpec {
        source,
        config_json,
        limits: PluginLimits {
            fuel,
            memory_bytes: (memory_mib as usize) << 20,
            timeout: Duration::from_millis(timeout_ms),
        },
    })
}
