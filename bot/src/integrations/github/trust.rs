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
//! Eagle's login alone ([`crate::integrations::github::threads`]).

use crate::integrations::github::types::{PullRequest, Repo};

pub use crate::ground::repo::{Trusted, can_write};

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
