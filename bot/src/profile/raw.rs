//! The profile as written: a TOML file plus `EAGLE_*` environment overrides,
//! deserialized without judgement. [`super::validate`] turns it into a
//! [`super::Profile`] that cannot be wrong later.

use std::collections::BTreeMap;
use std::path::Path;

use config::{Config, File, FileFormat};
use serde::Deserialize;

use super::ProfileError;

/// The environment prefix of profile overrides: `EAGLE_APPROVERS`, `EAGLE_ZULIP__LATE_COMMAND_AGE`.
pub const ENV_PREFIX: &str = "EAGLE_";

/// Variables that share the prefix but are not profile keys: the profiles
/// directory, and what a runner hands its workers (`eagle request` reads them).
pub const RESERVED_ENV: &[&str] = &[
    "EAGLE_PROFILES_DIR",
    "EAGLE_LOG_FORMAT",
    "EAGLE_RUN_ID",
    "EAGLE_RUN_SOCKET",
    "EAGLE_RUN_TOKEN",
];

/// Keys whose environment value is a comma-separated list.
const LIST_KEYS: &[&str] = &[
    "approvers",
    "channels",
    "runner.worker_env",
    "runner.sandbox.allow_hosts",
    "runner.sandbox.read_only",
    "analyzer.env",
    "analyzer.allow_hosts",
    "github.required_checks",
    "github.required_labels",
    "github.bot_logins",
    "github.trusted_logins",
    "asana.platform_tags",
    "policy.exclude",
    "runner.review_rules",
    "runner.review_checks",
];

/// Every key an environment variable may override, as a dotted path.
const ENV_KEYS: &[&str] = &[
    "role",
    "display_name",
    "zuliprc",
    "database_url",
    "store.max_connections",
    "data_dir",
    "approvers",
    "owner",
    "channels",
    "executor_channel",
    "executor_bot",
    "persona",
    "shell_wait",
    "zulip.late_command_age",
    "zulip.all_public_streams",
    "zulip.retention",
    "store.prune_after",
    "chat.max_commands",
    "chat.max_reply_parts",
    "chat.sender_rate",
    "policy.dir",
    "policy.load_all",
    "policy.exclude",
    "policy.reload_interval",
    "runner.worker_command",
    "runner.worker_kind",
    "runner.max_workers",
    "runner.max_attempts",
    "runner.dry_run",
    "runner.max_waits",
    "runner.max_cost_usd",
    "runner.max_requests",
    "runner.worker_user",
    "runner.worker_env",
    "runner.worker_path",
    "runner.no_output_timeout",
    "runner.hard_timeout",
    "runner.wrap_up_grace",
    "runner.request_wait",
    "runner.hook_timeout",
    "runner.status_interval",
    "runner.prompts_dir",
    "runner.review_rules",
    "runner.review_checks",
    "runner.runs_dir",
    "runner.repo",
    "runner.sandbox.mode",
    "runner.sandbox.allow_hosts",
    "runner.sandbox.max_processes",
    "runner.sandbox.max_file_size",
    "runner.sandbox.max_open_files",
    "runner.sandbox.max_disk",
    "runner.sandbox.read_only",
    "runner.sandbox.model_ca_file",
    "decisions.reminder_after",
    "decisions.approval_ttl",
    "analyzer.command",
    "analyzer.command_kind",
    "analyzer.no_output_timeout",
    "analyzer.hard_timeout",
    "analyzer.env",
    "analyzer.worker_user",
    "analyzer.path",
    "analyzer.inbox_channel",
    "analyzer.inbox_topic",
    "analyzer.allow_hosts",
    "github.api_url",
    "github.repo",
    "github.base",
    "github.token_env",
    "github.token_file",
    "github.app_id",
    "github.private_key_file",
    "github.installation_id",
    "github.required_checks",
    "github.required_labels",
    "github.ci_workflow",
    "github.ci_grace",
    "github.poll_interval",
    "github.merge_method",
    "github.drafts",
    "github.ci_attempts",
    "github.max_rounds",
    "github.bot_logins",
    "github.trusted_logins",
    "asana.api_url",
    "asana.token_env",
    "asana.token_file",
    "asana.workspace",
    "asana.followed_source",
    "asana.followed_repo",
    "asana.platform_field",
    "asana.platform_tags",
    "asana.poll_interval",
    "conversation.backend",
    "conversation.url",
    "conversation.model",
    "conversation.api_key_env",
    "conversation.timeout",
    "conversation.max_tokens",
    "conversation.max_answer_chars",
    "conversation.max_tool_rounds",
    "conversation.user_tokens_per_day",
    "conversation.tokens_per_day",
    "conversation.cost_per_day_usd",
    "conversation.input_usd_per_mtok",
    "conversation.output_usd_per_mtok",
    "conversation.confirm_within",
    "digest.at",
    "digest.utc_offset",
    "digest.channel",
    "digest.topic",
    "ops.listen",
    "ops.beyond_loopback",
    "ops.log_format",
];

/// A user named in a profile: a Zulip user id or an email address.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum RawUserRef {
    Id(i64),
    Text(String),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawProfile {
    pub role: Option<String>,
    pub display_name: Option<String>,
    pub zuliprc: Option<String>,
    pub database_url: Option<String>,
    #[serde(default)]
    pub store: super::pool::RawStore,
    pub data_dir: Option<String>,
    #[serde(default)]
    pub approvers: Vec<RawUserRef>,
    pub owner: Option<RawUserRef>,
    #[serde(default)]
    pub channels: Vec<String>,
    pub executor_channel: Option<String>,
    pub executor_bot: Option<RawUserRef>,
    pub persona: Option<String>,
    pub shell_wait: Option<String>,
    #[serde(default)]
    pub zulip: RawZulip,
    #[serde(default)]
    pub chat: RawChat,
    #[serde(default)]
    pub policy: RawPolicy,
    pub runner: Option<RawRunner>,
    pub decisions: Option<RawDecisions>,
    pub analyzer: Option<RawAnalyzer>,
    pub github: Option<RawGithub>,
    pub asana: Option<RawAsana>,
    #[serde(default)]
    pub conversation: super::conversation::RawConversation,
    pub digest: Option<super::conversation::RawDigest>,
    #[serde(default)]
    pub ops: super::ops::RawOps,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAnalyzer {
    pub command: Option<String>,
    pub command_kind: Option<String>,
    pub no_output_timeout: Option<String>,
    pub hard_timeout: Option<String>,
    pub env: Option<Vec<String>>,
    pub worker_user: Option<String>,
    pub path: Option<String>,
    pub inbox_channel: Option<String>,
    pub inbox_topic: Option<String>,
    pub allow_hosts: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawGithub {
    pub api_url: Option<String>,
    pub repo: Option<String>,
    pub base: Option<String>,
    pub token_env: Option<String>,
    pub token_file: Option<String>,
    pub app_id: Option<i64>,
    pub private_key_file: Option<String>,
    pub installation_id: Option<i64>,
    pub required_checks: Option<Vec<String>>,
    pub required_labels: Option<Vec<String>>,
    pub ci_workflow: Option<String>,
    pub ci_grace: Option<String>,
    pub poll_interval: Option<String>,
    pub merge_method: Option<String>,
    pub drafts: Option<String>,
    pub ci_attempts: Option<i64>,
    pub max_rounds: Option<i64>,
    pub bot_logins: Option<Vec<String>>,
    pub trusted_logins: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAsana {
    pub api_url: Option<String>,
    pub token_env: Option<String>,
    pub token_file: Option<String>,
    pub workspace: Option<String>,
    pub projects: Option<Vec<RawAsanaPlace>>,
    pub sections: Option<Vec<RawAsanaPlace>>,
    pub my_tasks: Option<Vec<RawAsanaMyTasks>>,
    pub followed_source: Option<String>,
    pub followed_repo: Option<String>,
    pub platform_field: Option<String>,
    pub platform_tags: Option<Vec<String>>,
    pub poll_interval: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAsanaPlace {
    pub gid: String,
    pub source: String,
    pub repo: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAsanaMyTasks {
    pub section: String,
    pub source: String,
    pub repo: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRunner {
    pub worker_command: Option<String>,
    pub worker_kind: Option<String>,
    pub max_workers: Option<i64>,
    pub max_attempts: Option<i64>,
    pub max_waits: Option<i64>,
    pub dry_run: Option<bool>,
    pub max_cost_usd: Option<f64>,
    pub max_requests: Option<i64>,
    pub worker_user: Option<String>,
    pub worker_env: Option<Vec<String>>,
    pub worker_path: Option<String>,
    pub no_output_timeout: Option<String>,
    pub hard_timeout: Option<String>,
    pub wrap_up_grace: Option<String>,
    pub request_wait: Option<String>,
    pub hook_timeout: Option<String>,
    pub status_interval: Option<String>,
    pub prompts_dir: Option<String>,
    pub review_rules: Option<Vec<String>>,
    pub review_checks: Option<Vec<String>>,
    pub runs_dir: Option<String>,
    pub repo: Option<String>,
    /// `[[runner.repos]]`: the repositories runs work in.
    pub repos: Option<Vec<super::repos::RawRepo>>,
    /// Per prompt kind: `[runner.kinds.fix_ci] hard_timeout = "1h"`.
    pub kinds: Option<std::collections::BTreeMap<String, RawKindLimits>>,
    /// Extra rules for Claude Code's tool calls: command prefix → action.
    pub hook_rules: Option<std::collections::BTreeMap<String, String>>,
    /// How workers are confined (`[runner.sandbox]`).
    pub sandbox: Option<super::sandbox::RawSandbox>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawKindLimits {
    pub no_output_timeout: Option<String>,
    pub hard_timeout: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDecisions {
    pub reminder_after: Option<String>,
    pub approval_ttl: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawZulip {
    pub late_command_age: Option<String>,
    pub all_public_streams: Option<bool>,
    pub retention: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawChat {
    pub max_commands: Option<i64>,
    pub max_reply_parts: Option<i64>,
    pub sender_rate: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPolicy {
    pub dir: Option<String>,
    pub load_all: Option<bool>,
    pub exclude: Option<Vec<String>>,
    pub reload_interval: Option<String>,
    pub plugins: Option<Vec<RawPlugin>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPlugin {
    pub builtin: Option<String>,
    pub file: Option<String>,
    pub fuel: Option<u64>,
    pub memory_mib: Option<u64>,
    pub timeout_ms: Option<u64>,
    pub config: Option<serde_json::Value>,
}

/// Reads `path` and applies the `EAGLE_*` overrides found in `env`.
///
/// `env` is passed in rather than read here so that tests never touch the
/// process environment.
pub fn load(path: &Path, env: &BTreeMap<String, String>) -> Result<RawProfile, ProfileError> {
    let file = path.display().to_string();
    if !path.is_file() {
        return Err(ProfileError::new(&file, None, "no such profile file"));
    }
    with_overrides(
        &file,
        Config::builder().add_source(File::from(path).format(FileFormat::Toml).required(true)),
        env,
    )
}

/// A built-in profile's text (named `label` in errors), with the same
/// `EAGLE_*` overrides as a file.
pub fn load_text(
    label: &str,
    text: &str,
    env: &BTreeMap<String, String>,
) -> Result<RawProfile, ProfileError> {
    with_overrides(
        label,
        Config::builder().add_source(File::from_str(text, FileFormat::Toml)),
        env,
    )
}

fn with_overrides(
    file: &str,
    mut builder: config::ConfigBuilder<config::builder::DefaultState>,
    env: &BTreeMap<String, String>,
) -> Result<RawProfile, ProfileError> {
    for (var, value) in env {
        let Some(rest) = var.strip_prefix(ENV_PREFIX) else {
            continue;
        };
        if RESERVED_ENV.contains(&var.as_str()) {
            continue;
        }
        let key = rest.to_lowercase().replace("__", ".");
        if !ENV_KEYS.contains(&key.as_str()) {
            return Err(ProfileError::new(
                var,
                None,
                format!(
                    "not a profile key; the environment may override: {}",
                    env_names()
                ),
            ));
        }
        let result = if LIST_KEYS.contains(&key.as_str()) {
            let items: Vec<String> = value
                .split(',')
                .map(str::trim)
                .filter(|item| !item.is_empty())
                .map(String::from)
                .collect();
            builder.set_override(key, items)
        } else {
            builder.set_override(key, value.clone())
        };
        builder = result.map_err(|e| ProfileError::new(var, None, e.to_string()))?;
    }
    let config = builder
        .build()
        .map_err(|e| ProfileError::new(file, None, clean_config_error(&e)))?;
    config
        .try_deserialize()
        .map_err(|e| ProfileError::new(file, None, clean_config_error(&e)))
}

fn env_names() -> String {
    ENV_KEYS
        .iter()
        .map(|key| format!("{ENV_PREFIX}{}", key.replace('.', "__").to_uppercase()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The config crate appends "in <file>" to its messages; the caller already
/// names the file, so say it once.
fn clean_config_error(error: &config::ConfigError) -> String {
    let text = error.to_string();
    match text.rfind(" in ") {
        Some(at) if text[at..].contains('/') || text[at..].contains(".toml") => {
            text[..at].to_string()
        }
        _ => text,
    }
}
