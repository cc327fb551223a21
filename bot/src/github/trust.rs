//! Whom Eagle listens to on GitHub (pure). A public repository takes pull
//! requests, reviews and comments from anyone; Eagle takes them only from
//! the repository and its people:
//!
//! * a PR is a run's own only when its head is a branch *of the repository*
//!   (`head.repo.full_name`), never a fork's branch that borrows the run's
//!   branch name ([`head_is_in`]);
//! * a review or a comment counts (approves, asks for changes, steers a
//!   worker) only when its author has write access: `author_association`
//!   `OWNER`, `MEMBER` or `COLLABORATOR`, or a login the profile names in
//!   `github.trusted_logins` ([`Trusted`]). Anyone else's is read and
//!   ignored, as GitHub's coding agent answers only users with write access
//!   and Prow takes `/lgtm` only from OWNERS.
//!
//! Eagle's own `[ACKNOWLEDGED: …]` replies are a third matter, trusted from
//! Eagle's login alone ([`crate::github::threads`]).

use crate::github::types::{PullRequest, Repo};

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

/// Whether a PR's head is a branch of `repo` itself (not of a fork, and not
/// of a fork since deleted).
pub fn head_is_in(pull: &PullRequest, repo: &Repo) -> bool {
    pull.head_repo.as_deref().is_some_and(|r| repo.is_named(r))
}

/// Where a PR's head comes from, for what Eagle says: `owner/name:branch`,
/// or `a deleted repository:branch`.
pub fn head_label(pull: &PullRequest) -> String {
    format!(
        "{}:{}",
        pull.head_repo.as_deref().unwrap_or("a deleted repository"),
        pull.head_ref
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writers_and_named_logins_count_nobody_else() {
        let trusted = Trusted::new(["Outside-Reviewer", " "]);
        let cases: &[(Option<&str>, Option<&str>, bool)] = &[
            (Some("alex"), Some("OWNER"), true),
            (Some("alex"), Some("MEMBER"), true),
            (Some("sam"), Some("COLLABORATOR"), true),
            (Some("sam"), Some("collaborator"), true),
            (Some("mallory"), Some("CONTRIBUTOR"), false),
            (Some("mallory"), Some("FIRST_TIME_CONTRIBUTOR"), false),
            (Some("mallory"), Some("FIRST_TIMER"), false),
            (Some("mallory"), Some("NONE"), false),
            (Some("mallory"), Some("MANNEQUIN"), false),
            (Some("mallory"), None, false),
            (Some("outside-reviewer"), Some("NONE"), true),
            (Some("OUTSIDE-REVIEWER"), None, true),
            (None, Some("NONE"), false),
            (None, Some("MEMBER"), true),
            (Some(""), Some("NONE"), false),
        ];
        for (login, association, counts) in cases {
            assert_eq!(
                trusted.counts(*login, *association),
                *counts,
                "{login:?} {association:?}"
            );
        }
        assert!(!Trusted::default().counts(Some("anyone"), Some("NONE")));
    }

    #[test]
    fn only_a_branch_of_the_repository_itself_is_its_own() {
        let repo: Repo = "acme/app".parse().unwrap();
        let mut pull: PullRequest = serde_json::from_value(serde_json::json!({
            "number": 70, "state": "open", "node_id": "PR_1",
            "html_url": "https://github.com/acme/app/pull/70",
            "head": {"ref": "eagle/run-2", "sha": "abc", "repo": {"full_name": "attacker/app"}},
            "base": {"ref": "main", "sha": "def", "repo": {"full_name": "acme/app"}},
        }))
        .unwrap();
        assert!(!head_is_in(&pull, &repo));
        assert_eq!(head_label(&pull), "attacker/app:eagle/run-2");
        pull.head_repo = Some("ACME/App".into());
        assert!(head_is_in(&pull, &repo));
        pull.head_repo = None;
        assert!(!head_is_in(&pull, &repo));
        assert_eq!(head_label(&pull), "a deleted repository:eagle/run-2");
    }
}
