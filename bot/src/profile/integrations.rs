//! `[analyzer]`, `[github]` and `[asana]`: validated once, like the rest.
//! Tokens and keys are secrets: they come from an environment variable or a
//! file private to Eagle's user, never from the profile itself.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};

use super::field::{Origins, duration, unix_user};
use super::raw::{RawAnalyzer, RawAsana, RawGithub};
use super::worker_command::worker_command;
use super::worker_env::env_names;
use crate::ground::repo::Repo;

use super::{
    AnalyzerSettings, AsanaSettings, GitHubCredential, GithubSettings, ProfileError, WorkerEnv,
};

const GITHUB_API: &str = "https://api.github.com";
const ASANA_API: &str = "https://app.asana.com/api/1.0";
const MERGE_METHODS: &[&str] = &["merge", "squash", "rebase"];

pub(super) fn analyzer(
    raw: RawAnalyzer,
    origins: &Origins<'_>,
    executor_channel: &str,
    confined: bool,
) -> Result<AnalyzerSettings, ProfileError> {
    let command = match raw.command.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(text) => Some(
            worker_command(text, raw.command_kind.as_deref())
                .map_err(|why| origins.error("analyzer.command", None, why))?,
        ),
    };
    let dur =
        |key: &str, value: Option<&str>, default: Duration| positive(origins, key, value, default);
    let no_output_timeout = dur(
        "analyzer.no_output_timeout",
        raw.no_output_timeout.as_deref(),
        Duration::from_secs(5 * 60),
    )?;
    let hard_timeout = dur(
        "analyzer.hard_timeout",
        raw.hard_timeout.as_deref(),
        Duration::from_secs(15 * 60),
    )?;
    let name = |key: &str, value: Option<String>, default: &str| match value {
        None => Ok(default.to_string()),
        Some(v) if v.trim().is_empty() => Err(origins.error(key, None, "is empty")),
        Some(v) => Ok(v.trim().to_string()),
    };
    let env_names = env_names("analyzer.env", raw.env.unwrap_or_default(), origins)?;
    let model_url = super::sandbox::model_url(&env_names, origins.env);
    let allow_hosts = super::sandbox::allow_hosts(
        "analyzer.allow_hosts",
        raw.allow_hosts,
        command.as_ref().map(|c| c.kind),
        model_url,
        origins,
    )?;
    let mut env = WorkerEnv::resolve(
        env_names,
        raw.path.filter(|p| !p.trim().is_empty()),
        origins.env,
    );
    // A confined Claude Code analysis holds a placeholder, as a worker
    // does; its egress proxy sets the key.
    let model = match command.as_ref().map(|c| c.kind) {
        Some(super::WorkerKind::Claude) if confined => {
            super::model_key::hold_back(model_url, origins.env, &mut env)
                .map_err(|why| origins.error("analyzer.env", None, why))?
        }
        _ => None,
    };
    Ok(AnalyzerSettings {
        allow_hosts,
        command,
        no_output_timeout,
        hard_timeout,
        env,
        model,
        worker_user: unix_user("analyzer.worker_user", raw.worker_user.as_deref(), origins)?,
        inbox_channel: name(
            "analyzer.inbox_channel",
            raw.inbox_channel,
            executor_channel,
        )?,
        inbox_topic: name("analyzer.inbox_topic", raw.inbox_topic, "inbox")?,
    })
}

pub(super) fn github(
    raw: RawGithub,
    origins: &Origins<'_>,
    base: &Path,
    env: &BTreeMap<String, String>,
) -> Result<GithubSettings, ProfileError> {
    let api_url = api_url(
        origins,
        "github.api_url",
        raw.api_url.as_deref(),
        GITHUB_API,
    )?;
    let repo = match raw.repo.as_deref().map(str::trim) {
        Some(text) if let Ok(repo) = text.parse::<Repo>() => repo,
        Some(repo) => {
            return Err(origins.error(
                "github.repo",
                None,
                format!("{repo:?} is not a repository as owner/name"),
            ));
        }
        None => {
            return Err(origins.error(
                "github.repo",
                None,
                "is missing: the repository runs open their PRs in, as owner/name",
            ));
        }
    };
    let credential = github_credential(&raw, origins, base, env)?;
    let base_branch = raw
        .base
        .map(|b| b.trim().to_string())
        .filter(|b| !b.is_empty())
        .unwrap_or_else(|| "main".into());
    if base_branch.starts_with(['-', '/'])
        || base_branch.contains("..")
        || base_branch
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || "~^:?*[\\".contains(c))
    {
        return Err(origins.error(
            "github.base",
            None,
            format!("{base_branch:?} is not a branch name"),
        ));
    }
    let merge_method = raw.merge_method.unwrap_or_else(|| "squash".into());
    if !MERGE_METHODS.contains(&merge_method.as_str()) {
        return Err(origins.error(
            "github.merge_method",
            None,
            format!(
                "{merge_method:?} is not one of {}",
                MERGE_METHODS.join(", ")
            ),
        ));
    }
    let keep_drafts = match raw.drafts.as_deref().map(str::trim) {
        None | Some("ready") => false,
        Some("keep") => true,
        Some(other) => {
            return Err(origins.error(
                "github.drafts",
                None,
                format!("{other:?} is not \"ready\" (mark a draft ready, then merge) or \"keep\""),
            ));
        }
    };
    let max_rounds = raw.max_rounds.unwrap_or(12);
    if !(1..=200).contains(&max_rounds) {
        return Err(origins.error(
            "github.max_rounds",
            None,
            format!("{max_rounds} is outside 1..=200"),
        ));
    }
    let ci_attempts = raw.ci_attempts.unwrap_or(3);
    if !(1..=50).contains(&ci_attempts) {
        return Err(origins.error(
            "github.ci_attempts",
            None,
            format!("{ci_attempts} is outside 1..=50"),
        ));
    }
    Ok(GithubSettings {
        api_url,
        repo,
        base: base_branch,
        credential,
        required_checks: names(origins, "github.required_checks", raw.required_checks)?,
        required_labels: names(origins, "github.required_labels", raw.required_labels)?,
        ci_workflow: raw.ci_workflow.filter(|w| !w.trim().is_empty()),
        ci_grace: positive(
            origins,
            "github.ci_grace",
            raw.ci_grace.as_deref(),
            Duration::from_secs(10 * 60),
        )?,
        poll_interval: positive(
            origins,
            "github.poll_interval",
            raw.poll_interval.as_deref(),
            Duration::from_secs(2 * 60),
        )?,
        merge_method,
        keep_drafts,
        ci_attempts,
        max_rounds,
        bot_logins: names(origins, "github.bot_logins", raw.bot_logins)?
            .into_iter()
            .map(|l| l.to_lowercase())
            .collect(),
        trusted: crate::ground::repo::Trusted::new(names(
            origins,
            "github.trusted_logins",
            raw.trusted_logins,
        )?),
    })
}

pub(super) fn asana(
    raw: RawAsana,
    origins: &Origins<'_>,
    base: &Path,
    env: &BTreeMap<String, String>,
) -> Result<AsanaSettings, ProfileError> {
    let api_url = api_url(origins, "asana.api_url", raw.api_url.as_deref(), ASANA_API)?;
    let token = token(
        origins,
        "asana",
        raw.token_env.as_deref(),
        raw.token_file.as_deref(),
        "ASANA_TOKEN",
        base,
        env,
    )?;
    let workspace = match raw.workspace.as_deref().map(str::trim) {
        Some(gid) if is_gid(gid) => gid.to_string(),
        Some(gid) => {
            return Err(origins.error(
                "asana.workspace",
                None,
                format!("{gid:?} is not an Asana gid (digits)"),
            ));
        }
        None => {
            return Err(origins.error(
                "asana.workspace",
                None,
                "is missing: the workspace's gid (My Tasks and followed tasks are read in it)",
            ));
        }
    };
    // The repository of each source: a place may name one; two places of
    // one source must not name two.
    let mut repos: BTreeMap<String, String> = BTreeMap::new();
    let mut repo_of = |key: &str, i: Option<usize>, source: &str, repo: Option<String>| {
        let Some(repo) = repo.map(|r| r.trim().to_string()) else {
            return Ok(());
        };
        if !crate::ground::repo::is_checkout_name(&repo) {
            return Err(origins.error(
                key,
                i,
                format!(
                    "repo {repo:?} is not a repository's name as [[runner.repos]] gives it \
                     (1 to 40 letters, digits, `-`, `_`)"
                ),
            ));
        }
        match repos.get(source) {
            Some(other) if *other != repo => Err(origins.error(
                key,
                i,
                format!(
                    "source {source:?} is given repo {other:?} by another place and {repo:?} here"
                ),
            )),
            _ => {
                repos.insert(source.to_string(), repo);
                Ok(())
            }
        }
    };
    let mut places = |key: &str, list: Option<Vec<super::raw::RawAsanaPlace>>| {
        let mut out = Vec::new();
        for (i, place) in list.unwrap_or_default().into_iter().enumerate() {
            if !is_gid(place.gid.trim()) {
                return Err(origins.error(
                    key,
                    Some(i),
                    format!("gid {:?} is not an Asana gid (digits)", place.gid),
                ));
            }
            if place.source.trim().is_empty() {
                return Err(origins.error(key, Some(i), "source is empty"));
            }
            repo_of(key, Some(i), place.source.trim(), place.repo)?;
            out.push((
                place.gid.trim().to_string(),
                place.source.trim().to_string(),
            ));
        }
        Ok(out)
    };
    let projects = places("asana.projects", raw.projects)?;
    let sections = places("asana.sections", raw.sections)?;
    let mut my_tasks = Vec::new();
    for (i, entry) in raw.my_tasks.unwrap_or_default().into_iter().enumerate() {
        if entry.section.trim().is_empty() || entry.source.trim().is_empty() {
            return Err(origins.error("asana.my_tasks", Some(i), "give section and source"));
        }
        repo_of("asana.my_tasks", Some(i), entry.source.trim(), entry.repo)?;
        my_tasks.push((
            entry.section.trim().to_string(),
            entry.source.trim().to_string(),
        ));
    }
    let followed_source = raw.followed_source.filter(|s| !s.trim().is_empty());
    match (&followed_source, raw.followed_repo) {
        (Some(source), repo) => repo_of("asana.followed_repo", None, source.trim(), repo)?,
        (None, Some(_)) => {
            return Err(origins.error(
                "asana.followed_repo",
                None,
                "names the repository of followed tasks, but followed_source is not set",
            ));
        }
        (None, None) => {}
    }
    if projects.is_empty()
        && sections.is_empty()
        && my_tasks.is_empty()
        && followed_source.is_none()
    {
        return Err(origins.error(
            "asana",
            None,
            "names nothing to import: give projects, sections, my_tasks or followed_source",
        ));
    }
    Ok(AsanaSettings {
        api_url,
        token,
        workspace,
        projects,
        sections,
        my_tasks,
        followed_source,
        repos,
        platform_field: raw.platform_field.filter(|f| !f.trim().is_empty()),
        platform_tags: names(origins, "asana.platform_tags", raw.platform_tags)?
            .into_iter()
            .map(|t| t.to_lowercase())
            .collect(),
        poll_interval: positive(
            origins,
            "asana.poll_interval",
            raw.poll_interval.as_deref(),
            Duration::from_secs(5 * 60),
        )?,
    })
}

fn positive(
    origins: &Origins<'_>,
    key: &str,
    value: Option<&str>,
    default: Duration,
) -> Result<Duration, ProfileError> {
    let d = duration(value, default).map_err(|why| origins.error(key, None, why))?;
    if d.is_zero() {
        return Err(origins.error(key, None, "must be longer than zero"));
    }
    Ok(d)
}

fn api_url(
    origins: &Origins<'_>,
    key: &str,
    value: Option<&str>,
    default: &str,
) -> Result<url::Url, ProfileError> {
    let text = value.map(str::trim).unwrap_or(default);
    let url = url::Url::parse(text)
        .map_err(|e| origins.error(key, None, format!("{text:?} is not a URL ({e})")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(origins.error(key, None, format!("{text:?} is not an http(s) URL")));
    }
    if !url.username().is_empty() || url.password().is_some() {
        // Never echo it: it may hold a secret.
        return Err(origins.error(
            key,
            None,
            "holds credentials: give the token through token_env or token_file",
        ));
    }
    Ok(url)
}

/// The token from the environment variable `token_env` (default
/// `default_env`) or from `token_file`; never echoed.
fn token(
    origins: &Origins<'_>,
    section: &str,
    token_env: Option<&str>,
    token_file: Option<&str>,
    default_env: &str,
    base: &Path,
    env: &BTreeMap<String, String>,
) -> Result<SecretString, ProfileError> {
    let file_key = format!("{section}.token_file");
    let env_key = format!("{section}.token_env");
    if let Some(file) = token_file.map(str::trim).filter(|f| !f.is_empty()) {
        let path = origins.resolve(&file_key, base, file);
        return super::field::read_token_file(&path)
            .map_err(|why| origins.error(&file_key, None, why));
    }
    let var = token_env.map(str::trim).unwrap_or(default_env);
    if var.is_empty() {
        return Err(origins.error(&env_key, None, "is empty"));
    }
    match env.get(var).map(|v| v.trim()) {
        Some(value) if !value.is_empty() => Ok(SecretString::from(value.to_string())),
        _ => Err(origins.error(
            &env_key,
            None,
            format!(
                "the token is not set: put it in the environment variable {var}, or give {file_key}"
            ),
        )),
    }
}

/// `[github]`'s credential: a token, or a GitHub App (`app_id`,
/// `private_key_file`, `installation_id`), never both.
fn github_credential(
    raw: &RawGithub,
    origins: &Origins<'_>,
    base: &Path,
    env: &BTreeMap<String, String>,
) -> Result<GitHubCredential, ProfileError> {
    let given = |keys: &[(&'static str, bool)]| -> Vec<&'static str> {
        keys.iter()
            .filter_map(|(key, set)| set.then_some(*key))
            .collect()
    };
    let app_keys = given(&[
        ("github.app_id", raw.app_id.is_some()),
        ("github.private_key_file", raw.private_key_file.is_some()),
        ("github.installation_id", raw.installation_id.is_some()),
    ]);
    if app_keys.is_empty() {
        return token(
            origins,
            "github",
            raw.token_env.as_deref(),
            raw.token_file.as_deref(),
            "GITHUB_TOKEN",
            base,
            env,
        )
        .map(GitHubCredential::Token);
    }
    let token_keys = given(&[
        ("github.token_env", raw.token_env.is_some()),
        ("github.token_file", raw.token_file.is_some()),
    ]);
    if !token_keys.is_empty() {
        return Err(origins.error(
            "github",
            None,
            format!(
                "gives both a token ({}) and a GitHub App ({}): Eagle authenticates one way, keep one",
                token_keys.join(", "),
                app_keys.join(", ")
            ),
        ));
    }
    let id = |key: &str, value: i64| {
        u64::try_from(value)
            .ok()
            .filter(|id| *id > 0)
            .ok_or_else(|| {
                origins.error(
                    key,
                    None,
                    format!("{value} is not an id (a positive number)"),
                )
            })
    };
    let app_id = match raw.app_id {
        Some(value) => id("github.app_id", value)?,
        None => {
            return Err(origins.error(
                "github.app_id",
                None,
                "is missing: the GitHub App's id (\"App ID\" on its settings page)",
            ));
        }
    };
    let installation_id = raw
        .installation_id
        .map(|value| id("github.installation_id", value))
        .transpose()?;
    let key = "github.private_key_file";
    let private_key = match raw.private_key_file.as_deref().map(str::trim) {
        Some(file) if !file.is_empty() => {
            let path = origins.resolve(key, base, file);
            read_private_key(&path).map_err(|why| origins.error(key, None, why))?
        }
        _ => {
            return Err(origins.error(
                key,
                None,
                "is missing: the GitHub App's private key (the .pem GitHub generated), readable by Eagle's user only",
            ));
        }
    };
    Ok(GitHubCredential::App {
        app_id,
        installation_id,
        private_key,
    })
}

/// A GitHub App's private key: an RSA key in PEM that signs. The message
/// never holds the key, nor what the parser saw in it.
fn read_private_key(path: &Path) -> Result<SecretString, String> {
    let text = SecretString::from(super::field::read_private_file(path)?);
    let signs = jsonwebtoken::EncodingKey::from_rsa_pem(text.expose_secret().as_bytes())
        .and_then(|key| {
            jsonwebtoken::encode(
                &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256),
                &serde_json::json!({}),
                &key,
            )
        })
        .is_ok();
    if !signs {
        return Err(format!(
            "{} is not an RSA private key in PEM: give the .pem GitHub generated for the App",
            path.display()
        ));
    }
    Ok(text)
}

fn names(
    origins: &Origins<'_>,
    key: &str,
    list: Option<Vec<String>>,
) -> Result<Vec<String>, ProfileError> {
    let mut out = Vec::new();
    for (i, name) in list.unwrap_or_default().into_iter().enumerate() {
        let name = name.trim();
        if name.is_empty() {
            return Err(origins.error(key, Some(i), "is empty"));
        }
        out.push(name.to_string());
    }
    Ok(out)
}

fn is_gid(text: &str) -> bool {
    !text.is_empty() && text.len() <= 40 && text.bytes().all(|b| b.is_ascii_digit())
}
