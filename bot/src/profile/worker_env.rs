//! What a worker (or the analysis command) gets of Eagle's environment:
//! resolved once, when the profile is validated, so that nothing downstream
//! reads Eagle's environment again.
//!
//! A child's environment is built from nothing (by
//! [`crate::executor::child_env`]): its `PATH` (the profile's
//! `worker_path`, else Eagle's, with the directory of the `eagle` binary
//! first so `eagle request` is found), its own `HOME` and `TMPDIR`, the
//! locale, and only the variables the profile lists by name.

use std::collections::BTreeMap;

use secrecy::SecretString;

use super::ProfileError;
use super::field::Origins;

/// Variables every child keeps from Eagle's environment, if set.
const PASSED_THROUGH: &[&str] = &["LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM"];
/// The `PATH` when neither the profile nor Eagle's environment has one.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// A child's share of Eagle's environment, validated and resolved.
#[derive(Clone, Default)]
pub struct WorkerEnv {
    /// The names the profile lists (shown by `eagle profile show`).
    pub names: Vec<String>,
    /// Their values in Eagle's environment; a name that is unset is left out.
    values: Vec<(String, SecretString)>,
    /// The child's `PATH`, before the `eagle` binary's directory.
    pub path: String,
    /// Eagle's own user name (`$USER`), for children that run as it.
    pub user: Option<String>,
    /// The locale and terminal variables that are set.
    passed: Vec<(String, String)>,
}

impl std::fmt::Debug for WorkerEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Values can be keys: only the names are shown.
        f.debug_struct("WorkerEnv")
            .field("names", &self.names)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl WorkerEnv {
    /// Resolves `names` and `path` (the profile's, if set) against Eagle's
    /// environment `env`.
    pub fn resolve(
        names: Vec<String>,
        path: Option<String>,
        env: &BTreeMap<String, String>,
    ) -> WorkerEnv {
        let values = names
            .iter()
            .filter_map(|name| {
                let value = env.get(name)?;
                Some((name.clone(), SecretString::from(value.clone())))
            })
            .collect();
        let passed = PASSED_THROUGH
            .iter()
            .filter_map(|name| Some(((*name).to_string(), env.get(*name)?.clone())))
            .collect();
        WorkerEnv {
            names,
            values,
            path: path
                .or_else(|| env.get("PATH").cloned())
                .unwrap_or_else(|| DEFAULT_PATH.into()),
            user: env.get("USER").cloned(),
            passed,
        }
    }

    /// The listed variables that are set, with their values (secrets).
    pub fn values(&self) -> &[(String, SecretString)] {
        &self.values
    }

    /// Drops the values of `names` and sets `name` to `value` instead
    /// (the model key's placeholder).
    pub(super) fn replace(&mut self, names: &[&str], name: &str, value: &str) {
        self.values.retain(|(n, _)| !names.contains(&n.as_str()));
        self.values
            .push((name.to_string(), SecretString::from(value.to_string())));
    }

    /// The locale and terminal variables that are set.
    pub fn passed(&self) -> &[(String, String)] {
        &self.passed
    }
}

/// Names a profile, git, `gh` or the database client read as a credential,
/// and why: none may reach a worker.
const CREDENTIALS: &[(&str, &str)] = &[
    ("GITHUB_TOKEN", "github.token_env's default, and gh's"),
    ("GH_TOKEN", "gh's token"),
    ("GH_ENTERPRISE_TOKEN", "gh's token"),
    ("GITHUB_ENTERPRISE_TOKEN", "gh's token"),
    ("ASANA_TOKEN", "asana.token_env's default"),
    ("PGPASSWORD", "the PostgreSQL password"),
    ("PGPASSFILE", "the PostgreSQL password file"),
    (
        "PGSERVICEFILE",
        "PostgreSQL connection settings, passwords included",
    ),
    ("GIT_ASKPASS", "git's credential prompt"),
    ("SSH_AUTH_SOCK", "the SSH agent's keys"),
];

/// Why `name` is a credential, if it is one of [`CREDENTIALS`].
pub(super) fn credential(name: &str) -> Option<&'static str> {
    CREDENTIALS
        .iter()
        .find(|(known, _)| *known == name)
        .map(|(_, why)| *why)
}

/// Names of environment variables a worker (or the analysis command) may
/// see: valid names, never one of Eagle's own, never a credential.
pub(super) fn env_names(
    key: &str,
    names: Vec<String>,
    origins: &Origins<'_>,
) -> Result<Vec<String>, ProfileError> {
    let mut out = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let name = name.trim();
        let valid = !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit());
        if !valid {
            return Err(origins.error(
                key,
                Some(i),
                format!("{name:?} is not an environment variable name"),
            ));
        }
        if name.starts_with(super::ENV_PREFIX)
            || name.starts_with("ZULIP_")
            || name == "DATABASE_URL"
        {
            return Err(origins.error(
                key,
                Some(i),
                format!("{name} is Eagle's own: a worker must never hold it"),
            ));
        }
        if let Some(why) = credential(name) {
            return Err(origins.error(
                key,
                Some(i),
                format!(
                    "{name} is a credential ({why}): a worker holds none; Eagle pushes, opens PRs, \
                     comments and merges for it (eagle request push_branch, open_draft_pr, …)"
                ),
            ));
        }
        out.push(name.to_string());
    }
    Ok(out)
}

/// The token variables this profile reads (`github.token_env`,
/// `asana.token_env`) are credentials too: no child gets them.
pub(super) fn refuse_token_envs(
    token_envs: [(&str, Option<&str>); 2],
    runner: &super::RunnerSettings,
    analyzer: &super::AnalyzerSettings,
    origins: &Origins<'_>,
) -> Result<(), ProfileError> {
    // The token variables this profile reads are credentials too.
    let token_envs: Vec<(&str, &str)> = token_envs
        .into_iter()
        .filter_map(|(key, name)| Some((key, name?.trim())))
        .collect();
    for (list, names) in [
        ("runner.worker_env", &runner.worker_env.names),
        ("analyzer.env", &analyzer.env.names),
    ] {
        for (i, name) in names.iter().enumerate() {
            if let Some((key, _)) = token_envs.iter().find(|(_, t)| t == name) {
                return Err(origins.error(
                    list,
                    Some(i),
                    format!("{name} is a credential (this profile's {key}): a worker holds none"),
                ));
            }
        }
    }
    Ok(())
}
