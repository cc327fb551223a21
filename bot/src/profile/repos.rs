//! `[[runner.repos]]`: the repositories an executor works in, each with
//! where it is, how Eagle authenticates to it (its own credential, never a
//! worker's), and the environment its runs get (a setup command run
//! confined before the agent, and the caches it leaves). `runner.repo`
//! stays as one repository named `default`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use secrecy::SecretString;
use serde::Deserialize;

use super::ProfileError;
use super::field::{Origins, duration};
use crate::ground::host_pattern::HostPattern;
use crate::ground::repo::Repo;

/// The name `runner.repo` gets, and what a task without one means when it is the only one.
pub const DEFAULT_REPO: &str = "default";

/// One `[[runner.repos]]` entry as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRepo {
    pub name: Option<String>,
    pub url: Option<String>,
    pub base: Option<String>,
    pub github: Option<String>,
    pub token_env: Option<String>,
    pub token_file: Option<String>,
    pub ssh_key_file: Option<String>,
    pub known_hosts: Option<String>,
    pub setup: Option<String>,
    pub setup_allow_hosts: Option<Vec<String>>,
    pub setup_timeout: Option<String>,
    pub cache: Option<Vec<String>>,
    pub cache_key: Option<Vec<String>>,
}

/// Where a repository is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RepoUrl {
    /// `https://…` (or `http://` to a loopback host, for tests).
    Https(url::Url),
    /// `git@host:owner/name.git` or `ssh://git@host/owner/name.git`.
    Ssh(String),
    /// A repository on this host.
    Local(PathBuf),
}

impl RepoUrl {
    /// What git is given (holds no credential: a URL with one is refused).
    pub fn as_git(&self) -> String {
        match self {
            RepoUrl::Https(url) => url.to_string(),
            RepoUrl::Ssh(text) => text.clone(),
            RepoUrl::Local(path) => path.display().to_string(),
        }
    }

    /// `owner/name` from a URL's last two path segments.
    fn github_repo(&self) -> Option<Repo> {
        let path = match self {
            RepoUrl::Https(url) => url.path().to_string(),
            RepoUrl::Ssh(text) => match text.strip_prefix("ssh://") {
                Some(rest) => rest.split_once('/')?.1.to_string(),
                None => text.split_once(':')?.1.to_string(),
            },
            RepoUrl::Local(_) => return None,
        };
        let path = path.trim_matches('/');
        let path = path.strip_suffix(".git").unwrap_or(path);
        let mut parts = path.rsplit('/');
        let name = parts.next()?;
        let owner = parts.next()?;
        Repo::new(owner, name).ok()
    }
}

/// How Eagle's own git authenticates to a repository.
#[derive(Clone)]
pub enum GitCredential {
    /// Nothing: a local path, or a public repository.
    None,
    /// `[github]`'s credential (a token, or the GitHub App's installation
    /// token for the repository), asked for when git runs.
    GitHub,
    /// The repository's own token (`token_env` or `token_file`).
    Token(SecretString),
    /// A deploy key and the known hosts it may talk to.
    SshKey { key: PathBuf, known_hosts: PathBuf },
}

impl GitCredential {
    /// What `eagle check` and `!status` say (never the secret).
    pub fn kind(&self) -> &'static str {
        match self {
            GitCredential::None => "none",
            GitCredential::GitHub => "[github]'s credential",
            GitCredential::Token(_) => "the repository's token",
            GitCredential::SshKey { .. } => "an SSH deploy key",
        }
    }
}

impl std::fmt::Debug for GitCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GitCredential::SshKey { key, known_hosts } => f
                .debug_struct("SshKey")
                .field("key", key)
                .field("known_hosts", known_hosts)
                .finish(),
            other => f.write_str(other.kind()),
        }
    }
}

/// A repository runs work in, validated.
#[derive(Debug, Clone)]
pub struct RepoSettings {
    /// What a task names (`!queue --repo NAME`).
    pub name: String,
    pub url: RepoUrl,
    /// The branch runs start from and their PRs go into.
    pub base: String,
    /// The PR loop's repository (default: from the URL; for `runner.repo`, `github.repo`).
    pub github: Option<Repo>,
    pub credential: GitCredential,
    /// Run confined in the run's checkout before the agent, once per cache key.
    pub setup: Option<String>,
    /// The only hosts the setup may reach.
    pub setup_allow_hosts: Vec<HostPattern>,
    pub setup_timeout: Duration,
    /// Paths of the checkout the setup leaves, kept per cache key.
    pub cache: Vec<String>,
    /// Files of the checkout whose content keys the cache.
    pub cache_key: Vec<String>,
}

/// What the repositories' validation needs of the rest of the profile.
pub(super) struct RepoDefaults<'a> {
    /// `github.repo`, for `runner.repo`.
    pub github_repo: Option<&'a Repo>,
    /// `github.base`, else `main`.
    pub base: &'a str,
    /// Whether `[github]` is configured (its credential is the HTTPS default).
    pub has_github: bool,
}

/// `[[runner.repos]]` and `runner.repo`, validated: names unique, URLs
/// without credentials, one credential each.
pub(super) fn repos(
    list: Option<Vec<RawRepo>>,
    legacy: Option<&str>,
    defaults: &RepoDefaults<'_>,
    origins: &Origins<'_>,
    base_dir: &Path,
    env: &BTreeMap<String, String>,
) -> Result<Vec<RepoSettings>, ProfileError> {
    let mut out: Vec<RepoSettings> = Vec::new();
    if let Some(path) = legacy.map(str::trim).filter(|p| !p.is_empty()) {
        let path = origins.resolve("runner.repo", base_dir, path);
        out.push(RepoSettings {
            name: DEFAULT_REPO.into(),
            url: RepoUrl::Local(path),
            base: defaults.base.to_string(),
            github: defaults.github_repo.cloned(),
            credential: GitCredential::None,
            setup: None,
            setup_allow_hosts: Vec::new(),
            setup_timeout: DEFAULT_SETUP_TIMEOUT,
            cache: Vec::new(),
            cache_key: Vec::new(),
        });
    }
    for (i, raw) in list.unwrap_or_default().into_iter().enumerate() {
        let repo = one(raw, i, defaults, origins, base_dir, env)?;
        if out.iter().any(|r| r.name == repo.name) {
            return Err(origins.error(
                "runner.repos",
                Some(i),
                format!(
                    "names {:?} twice (runner.repo is named \"default\")",
                    repo.name
                ),
            ));
        }
        out.push(repo);
    }
    Ok(out)
}

const DEFAULT_SETUP_TIMEOUT: Duration = Duration::from_secs(30 * 60);

fn one(
    raw: RawRepo,
    i: usize,
    defaults: &RepoDefaults<'_>,
    origins: &Origins<'_>,
    base_dir: &Path,
    env: &BTreeMap<String, String>,
) -> Result<RepoSettings, ProfileError> {
    let err = |why: String| origins.error("runner.repos", Some(i), why);
    let name = raw.name.as_deref().map(str::trim).unwrap_or_default();
    if !crate::ground::repo::is_checkout_name(name) {
        return Err(err(format!(
            "name {name:?} is not a repository name: 1 to 40 letters, digits, '-' or '_'"
        )));
    }
    let what = |field: &str| format!("{name}: {field}");
    let url = match raw.url.as_deref().map(str::trim) {
        None | Some("") => return Err(err(what("url is missing"))),
        Some(text) => parse_url(text, origins, base_dir).map_err(|why| err(what(&why)))?,
    };
    let base = match raw.base.as_deref().map(str::trim) {
        None | Some("") => defaults.base.to_string(),
        Some(b) if valid_branch(b) => b.to_string(),
        Some(b) => return Err(err(what(&format!("base {b:?} is not a branch name")))),
    };
    let github = match raw.github.as_deref().map(str::trim) {
        Some(text) => Some(
            text.parse::<Repo>()
                .map_err(|e| err(what(&format!("github: {e}"))))?,
        ),
        None => url.github_repo(),
    };
    let credential =
        credential(&raw, &url, defaults, origins, base_dir, env).map_err(|why| err(what(&why)))?;
    let setup = raw
        .setup
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    let setup_allow_hosts = raw
        .setup_allow_hosts
        .unwrap_or_default()
        .iter()
        .map(|h| {
            HostPattern::parse(h).map_err(|why| err(what(&format!("setup_allow_hosts: {why}"))))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let setup_timeout = duration(raw.setup_timeout.as_deref(), DEFAULT_SETUP_TIMEOUT)
        .map_err(|why| err(what(&format!("setup_timeout: {why}"))))?;
    let relative = |field: &str, list: Option<Vec<String>>| {
        list.unwrap_or_default()
            .into_iter()
            .map(|p| {
                let p = p.trim().trim_end_matches('/').to_string();
                if valid_relative(&p) {
                    Ok(p)
                } else {
                    Err(err(what(&format!(
                        "{field}: {p:?} is not a path inside the checkout"
                    ))))
                }
            })
            .collect::<Result<Vec<_>, _>>()
    };
    let cache = relative("cache", raw.cache)?;
    let cache_key = relative("cache_key", raw.cache_key)?;
    if !cache.is_empty() && setup.is_none() {
        return Err(err(what(
            "cache is set but setup is not: nothing would fill it",
        )));
    }
    Ok(RepoSettings {
        name: name.to_string(),
        url,
        base,
        github,
        credential,
        setup,
        setup_allow_hosts,
        setup_timeout,
        cache,
        cache_key,
    })
}

fn credential(
    raw: &RawRepo,
    url: &RepoUrl,
    defaults: &RepoDefaults<'_>,
    origins: &Origins<'_>,
    base_dir: &Path,
    env: &BTreeMap<String, String>,
) -> Result<GitCredential, String> {
    let token_given = raw.token_env.is_some() || raw.token_file.is_some();
    let ssh_given = raw.ssh_key_file.is_some() || raw.known_hosts.is_some();
    match url {
        RepoUrl::Local(_) if token_given || ssh_given => {
            Err("a local repository takes no credential".into())
        }
        RepoUrl::Local(_) => Ok(GitCredential::None),
        RepoUrl::Https(_) if ssh_given => {
            Err("ssh_key_file is for an ssh URL; this one is https".into())
        }
        RepoUrl::Https(_) => {
            if let Some(file) = raw.token_file.as_deref().map(str::trim) {
                let path = origins.resolve("runner.repos", base_dir, file);
                return super::field::read_token_file(&path).map(GitCredential::Token);
            }
            if let Some(var) = raw.token_env.as_deref().map(str::trim) {
                return match env.get(var).map(|v| v.trim()) {
                    Some(v) if !v.is_empty() => {
                        Ok(GitCredential::Token(SecretString::from(v.to_string())))
                    }
                    _ => Err(format!(
                        "token_env: the token is not set: put it in the environment variable {var}"
                    )),
                };
            }
            Ok(if defaults.has_github {
                GitCredential::GitHub
            } else {
                GitCredential::None
            })
        }
        RepoUrl::Ssh(_) if token_given => {
            Err("a token is for an https URL; this one is ssh".into())
        }
        RepoUrl::Ssh(_) => {
            let Some(key) = raw.ssh_key_file.as_deref().map(str::trim) else {
                return Err(
                    "an ssh URL needs ssh_key_file (a deploy key; Eagle never uses its user's SSH agent)"
                        .into(),
                );
            };
            let key = origins.resolve("runner.repos", base_dir, key);
            let known_hosts = match raw.known_hosts.as_deref().map(str::trim) {
                Some(k) => origins.resolve("runner.repos", base_dir, k),
                None => {
                    let mut k = key.clone().into_os_string();
                    k.push(".known_hosts");
                    PathBuf::from(k)
                }
            };
            super::field::private_file(&key)?;
            if !known_hosts.is_file() {
                return Err(format!(
                    "{} is missing: the known_hosts the deploy key may talk to (ssh-keyscan HOST > it, then check it)",
                    known_hosts.display()
                ));
            }
            Ok(GitCredential::SshKey { key, known_hosts })
        }
    }
}

fn parse_url(text: &str, origins: &Origins<'_>, base_dir: &Path) -> Result<RepoUrl, String> {
    if let Some(rest) = text.strip_prefix("ssh://") {
        if rest.contains(char::is_whitespace) || rest.split_once('/').is_none() {
            return Err(format!(
                "url {text:?} is not an ssh URL (ssh://user@host/path)"
            ));
        }
        return Ok(RepoUrl::Ssh(text.to_string()));
    }
    if text.starts_with("https://") || text.starts_with("http://") {
        let url = url::Url::parse(text).map_err(|e| format!("url is not a URL: {e}"))?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(
                "url holds credentials: give the token through token_env or token_file".into(),
            );
        }
        let loopback = matches!(url.host_str(), Some("127.0.0.1" | "localhost" | "[::1]"));
        if url.scheme() == "http" && !loopback {
            return Err(format!(
                "url {url} is plain http: use https (Eagle sends its token there)"
            ));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(format!("url {url} has a query or fragment"));
        }
        return Ok(RepoUrl::Https(url));
    }
    // scp-like `user@host:path`: a colon before any slash.
    if let Some((head, path)) = text.split_once(':')
        && !head.contains('/')
        && head.contains('@')
        && !path.is_empty()
    {
        if text.contains(char::is_whitespace) || head.starts_with('-') {
            return Err(format!("url {text:?} is not an ssh address"));
        }
        return Ok(RepoUrl::Ssh(text.to_string()));
    }
    if text.contains("://") {
        return Err(format!(
            "url {text:?}: only https, ssh and local paths are supported"
        ));
    }
    Ok(RepoUrl::Local(origins.resolve(
        "runner.repos",
        base_dir,
        text,
    )))
}

fn valid_branch(b: &str) -> bool {
    !b.starts_with(['-', '/'])
        && !b.contains("..")
        && !b
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || "~^:?*[\\".contains(c))
}

/// A relative path that stays inside the checkout (no `..`, not `.git`).
fn valid_relative(p: &str) -> bool {
    !p.is_empty()
        && !p.starts_with('/')
        && p.split('/')
            .all(|part| !part.is_empty() && part != ".." && part != ".")
        && p.split('/').next() != Some(".git")
        && !p.chars().any(char::is_control)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origins(env: &BTreeMap<String, String>) -> Origins<'_> {
        Origins {
            file: "p.toml".into(),
            env,
        }
    }

    fn defaults() -> RepoDefaults<'static> {
        RepoDefaults {
            github_repo: None,
            base: "main",
            has_github: true,
        }
    }

    fn parse(raw: RawRepo) -> Result<Vec<RepoSettings>, String> {
        let env = BTreeMap::from([("WEB_TOKEN".to_string(), "s3cret".to_string())]);
        repos(
            Some(vec![raw]),
            None,
            &defaults(),
            &origins(&env),
            Path::new("/etc/eagle"),
            &env,
        )
        .map_err(|e| e.to_string())
    }

    #[test]
    fn an_https_repository_takes_its_owner_and_name_from_the_url_and_its_token_from_the_environment()
     {
        let repos = parse(RawRepo {
            name: Some("web".into()),
            url: Some("https://github.com/acme/web.git".into()),
            token_env: Some("WEB_TOKEN".into()),
            ..RawRepo::default()
        })
        .unwrap();
        assert_eq!(repos[0].github.as_ref().unwrap().to_string(), "acme/web");
        assert!(matches!(repos[0].credential, GitCredential::Token(_)));
        assert!(!format!("{repos:?}").contains("s3cret"));
        assert_eq!(
            RepoUrl::Ssh("git@github.com:acme/app.git".into())
                .github_repo()
                .unwrap()
                .to_string(),
            "acme/app"
        );
    }

    #[test]
    fn bad_repositories_are_refused_with_what_was_wrong() {
        for (raw, want) in [
            (
                RawRepo {
                    name: Some("web".into()),
                    url: Some("https://x-access-token:s3cret@github.com/acme/web.git".into()),
                    ..RawRepo::default()
                },
                "holds credentials",
            ),
            (
                RawRepo {
                    name: Some("../web".into()),
                    url: Some("/srv/web".into()),
                    ..RawRepo::default()
                },
                "is not a repository name",
            ),
            (
                RawRepo {
                    name: Some("web".into()),
                    url: Some("git@github.com:acme/web.git".into()),
                    ..RawRepo::default()
                },
                "needs ssh_key_file",
            ),
            (
                RawRepo {
                    name: Some("web".into()),
                    url: Some("http://example.com/web.git".into()),
                    ..RawRepo::default()
                },
                "plain http",
            ),
            (
                RawRepo {
                    name: Some("web".into()),
                    url: Some("/srv/web".into()),
                    setup: Some("npm ci".into()),
                    cache: Some(vec!["../outside".into()]),
                    ..RawRepo::default()
                },
                "is not a path inside the checkout",
            ),
            (
                RawRepo {
                    name: Some("web".into()),
                    url: Some("ftp://example.com/web".into()),
                    ..RawRepo::default()
                },
                "only https, ssh and local paths",
            ),
        ] {
            let e = parse(raw).unwrap_err();
            assert!(e.contains(want), "{e}");
            assert!(!e.contains("s3cret"), "{e}");
        }
    }
}
