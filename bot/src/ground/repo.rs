//! A GitHub repository's name, `owner/name`, and whose words count on it
//! ([`Trusted`]): plain types below both the configuration that names them
//! and the client that calls GitHub (`integrations::github::trust` says
//! what Eagle does with them).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Why a text is not a repository name (the message says what was wrong).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidRepo(pub String);

/// Whether `name` can name one of an executor's repositories
/// (`[[runner.repos]] name`, `!queue --repo`, an Asana place's `repo`):
/// 1 to 40 letters, digits, `-` and `_`, so that it is safe in a path.
pub fn is_checkout_name(name: &str) -> bool {
    (1..=40).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// A repository, `owner/name`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Repo {
    owner: String,
    name: String,
}

impl Repo {
    /// A repository from its owner and name: letters, digits, `-`, `_`
    /// and `.` only (what GitHub allows), so that no path can be smuggled in.
    pub fn new(owner: &str, name: &str) -> Result<Repo, InvalidRepo> {
        let valid = |s: &str| {
            !s.is_empty()
                && s != "."
                && s != ".."
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        };
        if !valid(owner) || !valid(name) {
            return Err(InvalidRepo(format!(
                "{owner:?}/{name:?} is not a repository name (owner/name)"
            )));
        }
        Ok(Repo {
            owner: owner.to_owned(),
            name: name.to_owned(),
        })
    }

    /// The owner (user or organisation).
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The repository's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether `text` names this repository (`owner/name`; GitHub's names
    /// are not case-sensitive).
    pub fn is_named(&self, text: &str) -> bool {
        text.split_once('/').is_some_and(|(owner, name)| {
            owner.eq_ignore_ascii_case(&self.owner) && name.eq_ignore_ascii_case(&self.name)
        })
    }
}

impl FromStr for Repo {
    type Err = InvalidRepo;

    /// Parses `owner/name`.
    fn from_str(s: &str) -> Result<Repo, InvalidRepo> {
        match s.split_once('/') {
            Some((owner, name)) => Repo::new(owner, name),
            None => Err(InvalidRepo(format!(
                "{s:?} is not a repository name (owner/name)"
            ))),
        }
    }
}

impl TryFrom<String> for Repo {
    type Error = InvalidRepo;

    fn try_from(s: String) -> Result<Repo, InvalidRepo> {
        s.parse()
    }
}

impl From<Repo> for String {
    fn from(repo: Repo) -> String {
        repo.to_string()
    }
}

impl fmt::Display for Repo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.owner, self.name)
    }
}

/// Relations to a repository that carry write access.
const WRITERS: &[&str] = &["OWNER", "MEMBER", "COLLABORATOR"];

/// Whether an `author_association` carries write access.
pub fn can_write(association: Option<&str>) -> bool {
    association.is_some_and(|a| WRITERS.iter().any(|w| w.eq_ignore_ascii_case(a)))
}

/// Whose reviews and comments count: writers, and the logins a profile
/// names (`github.trusted_logins`, compared without case).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trusted {
    logins: Vec<String>,
}

impl Trusted {
    /// Writers and `logins`.
    pub fn new<S: AsRef<str>>(logins: impl IntoIterator<Item = S>) -> Trusted {
        Trusted {
            logins: logins
                .into_iter()
                .map(|l| l.as_ref().trim().to_lowercase())
                .filter(|l| !l.is_empty())
                .collect(),
        }
    }

    /// Whether what `login` (related to the repository as `association`)
    /// wrote counts. A deleted user (`None`) counts only by association.
    pub fn counts(&self, login: Option<&str>, association: Option<&str>) -> bool {
        can_write(association)
            || login.is_some_and(|l| self.logins.iter().any(|t| t.eq_ignore_ascii_case(l)))
    }
}
