//! Eagle's own git: the credential of a repository goes into the
//! environment of Eagle's git process only (an `Authorization` header for
//! HTTPS, a deploy key for SSH), never onto a command line, into a file,
//! a checkout's `.git/config` or a worker's environment; and nothing of
//! Eagle's user's git setup (its credential helpers, its SSH agent) is used.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::Arc;

use base64::Engine as _;
use secrecy::{ExposeSecret as _, SecretString};

use crate::ground::repo::Repo;
use crate::profile::{GitCredential, RepoSettings, RepoUrl};

/// `[github]`'s token for a repository, asked for when git runs (a GitHub
/// App's installation token is short-lived).
#[derive(Clone)]
pub struct GitHubToken(pub Arc<TokenFn>);

/// What a [`GitHubToken`] calls.
pub type TokenFn = dyn Fn(Option<Repo>) -> Pin<Box<dyn Future<Output = Result<SecretString, String>> + Send>>
    + Send
    + Sync;

impl std::fmt::Debug for GitHubToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GitHubToken")
    }
}

/// The environment that authenticates Eagle's git to one repository.
#[derive(Default)]
pub struct GitAuth {
    vars: Vec<(&'static str, SecretString)>,
}

impl std::fmt::Debug for GitAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.vars.iter().map(|(k, _)| *k).collect();
        f.debug_struct("GitAuth").field("vars", &names).finish()
    }
}

impl GitAuth {
    /// The credential of `repo`, resolved now, and Eagle's own git
    /// configuration (`<data dir>/repos/<name>.gitconfig`): nothing of its
    /// user's (credential helpers, `insteadOf`), and for a repository on
    /// this host, that it is safe to read though another user owns it.
    pub async fn of(
        repo: &RepoSettings,
        github: Option<&GitHubToken>,
        data_dir: &Path,
    ) -> Result<GitAuth, String> {
        let global = own_config(repo, data_dir)?;
        let mut auth = GitAuth::credential(repo, github).await?;
        auth.vars.push((
            "GIT_CONFIG_GLOBAL",
            SecretString::from(global.display().to_string()),
        ));
        auth.vars
            .push(("GIT_CONFIG_NOSYSTEM", SecretString::from("1")));
        Ok(auth)
    }

    async fn credential(
        repo: &RepoSettings,
        github: Option<&GitHubToken>,
    ) -> Result<GitAuth, String> {
        let token =
            match (&repo.credential, &repo.url) {
                (GitCredential::Token(token), RepoUrl::Https(_)) => Some(token.clone()),
                (GitCredential::GitHub, RepoUrl::Https(_)) => match github {
                    Some(get) => Some((get.0)(repo.github.clone()).await.map_err(|e| {
                        format!("cannot get [github]'s token for {}: {e}", repo.name)
                    })?),
                    None => None,
                },
                (GitCredential::SshKey { key, known_hosts }, RepoUrl::Ssh(_)) => {
                    let command = [
                        "ssh",
                        "-F",
                        "/dev/null",
                        "-o",
                        "IdentitiesOnly=yes",
                        "-o",
                        "IdentityAgent=none",
                        "-o",
                        "BatchMode=yes",
                        "-o",
                        "StrictHostKeyChecking=yes",
                        "-o",
                        &format!("UserKnownHostsFile={}", known_hosts.display()),
                        "-i",
                        &key.display().to_string(),
                    ]
                    .iter()
                    .map(|w| shell_words::quote(w).into_owned())
                    .collect::<Vec<_>>()
                    .join(" ");
                    return Ok(GitAuth {
                        vars: vec![("GIT_SSH_COMMAND", SecretString::from(command))],
                    });
                }
                _ => None,
            };
        let Some(token) = token else {
            return Ok(GitAuth::default());
        };
        let RepoUrl::Https(url) = &repo.url else {
            return Ok(GitAuth::default());
        };
        // Scoped to the repository's origin: a redirect elsewhere gets nothing.
        let origin = format!(
            "{}://{}/",
            url.scheme(),
            url.host_str().unwrap_or_default().to_owned()
                + &url.port().map(|p| format!(":{p}")).unwrap_or_default()
        );
        let basic = base64::engine::general_purpose::STANDARD
            .encode(format!("x-access-token:{}", token.expose_secret()));
        Ok(GitAuth {
            vars: vec![
                ("GIT_CONFIG_COUNT", SecretString::from("2")),
                (
                    "GIT_CONFIG_KEY_0",
                    SecretString::from(format!("http.{origin}.extraHeader")),
                ),
                (
                    "GIT_CONFIG_VALUE_0",
                    SecretString::from(format!("Authorization: Basic {basic}")),
                ),
                // Nothing of Eagle's user's credential helpers.
                ("GIT_CONFIG_KEY_1", SecretString::from("credential.helper")),
                ("GIT_CONFIG_VALUE_1", SecretString::from("")),
            ],
        })
    }
}

/// Writes Eagle's git configuration for `repo` and returns its path.
fn own_config(repo: &RepoSettings, data_dir: &Path) -> Result<std::path::PathBuf, String> {
    let dir = super::repos_dir(data_dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let path = dir.join(format!("{}.gitconfig", repo.name));
    let mut text = String::from("# Written by Eagle for its own git; rewritten at every use.\n");
    if let RepoUrl::Local(local) = &repo.url {
        text.push_str("[safe]\n");
        for safe in [local.clone(), local.join(".git")] {
            let quoted = safe
                .display()
                .to_string()
                .replace('\\', "\\\\")
                .replace('"', "\\\"");
            text.push_str(&format!("\tdirectory = \"{quoted}\"\n"));
        }
    }
    std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

/// Eagle's git in `dir` (a bare repository of Eagle's when it holds
/// `objects`, else just the working directory): no hooks, no prompt, no SSH
/// agent, nothing of the environment that would point git at another
/// repository or configuration, and `auth`'s credential.
pub fn command(dir: &Path, args: &[&str], auth: &GitAuth) -> tokio::process::Command {
    let mut git = tokio::process::Command::new("git");
    git.args([
        "-c",
        "core.hooksPath=/dev/null",
        "-c",
        "protocol.file.allow=always",
    ]);
    if dir.join("objects").is_dir() {
        git.arg("--git-dir").arg(dir);
    }
    git.args(args)
        .current_dir(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GCM_INTERACTIVE", "never")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for var in [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_INDEX_FILE",
        "GIT_CONFIG_PARAMETERS",
        "GIT_CONFIG_COUNT",
        "GIT_NAMESPACE",
        "GIT_ASKPASS",
        "SSH_ASKPASS",
        "SSH_AUTH_SOCK",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_TRACE",
        "GIT_TRACE_CURL",
        "GIT_TRACE_PACKET",
        "GIT_CURL_VERBOSE",
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_SYSTEM",
        "GIT_CONFIG_NOSYSTEM",
    ] {
        git.env_remove(var);
    }
    for (key, value) in &auth.vars {
        git.env(key, value.expose_secret());
    }
    git
}

/// Runs Eagle's git; stdout, or stderr (one line, cut) as the error.
pub async fn run(dir: &Path, args: &[&str], auth: &GitAuth) -> Result<String, String> {
    let out = command(dir, args, auth)
        .output()
        .await
        .map_err(|e| format!("cannot run git: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(crate::ground::text::one_line(
            String::from_utf8_lossy(&out.stderr).trim(),
            400,
        ))
    }
}

/// Whether Eagle's git succeeds.
pub async fn ok(dir: &Path, args: &[&str], auth: &GitAuth) -> bool {
    command(dir, args, auth)
        .status()
        .await
        .is_ok_and(|s| s.success())
}
