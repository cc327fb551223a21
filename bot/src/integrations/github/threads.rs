//! Review threads and the rule that says which are still open (pure).
//!
//! A thread is open while it is not resolved and its newest comment that
//! counts asks for something: comments count when their author has write
//! access to the repository (`authorAssociation` OWNER, MEMBER or
//! COLLABORATOR) or is named in `github.trusted_logins`
//! ([`crate::integrations::github::trust`]), or when they are Eagle's own
//! `[ACKNOWLEDGED: …]` (Eagle's login, posted for a worker's
//! `reply_thread`), which closes the thread.
//! A comment from anyone else (or an acknowledgement from another login)
//! steers nothing. Outdated threads stay open: GitHub shows them unresolved
//! too, and a push does not answer a question.

use serde::{Deserialize, Serialize};

use crate::integrations::github::trust::Trusted;

/// What a worker's reply starts with to acknowledge a thread.
pub const ACKNOWLEDGED: &str = "[ACKNOWLEDGED";

/// How many characters of a comment an [`OpenThread`] keeps.
pub const EXCERPT_CHARS: usize = 200;

/// A review thread of a PR (GraphQL `PullRequestReviewThread`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewThread {
    /// Its GraphQL id.
    pub id: String,
    /// Whether someone resolved it.
    pub resolved: bool,
    /// Whether its line changed since.
    pub outdated: bool,
    /// The file.
    pub path: String,
    /// The line; `None` when GitHub has none (outdated, or a file comment).
    pub line: Option<u64>,
    /// How many comments it has.
    pub comment_count: u64,
    /// Its last comment, if any.
    pub last_comment: Option<ThreadComment>,
    /// Its most recent comments (up to 20), oldest first.
    #[serde(default)]
    pub comments: Vec<ThreadComment>,
}

/// A comment in a review thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadComment {
    /// The author's login; `None` for a deleted user.
    pub author: Option<String>,
    /// The author's relation to the repository (`OWNER`, `MEMBER`,
    /// `COLLABORATOR`, `CONTRIBUTOR`, `NONE`, …), as GitHub says it.
    #[serde(default)]
    pub association: Option<String>,
    /// Its Markdown.
    pub body: String,
    /// When it was made (ISO 8601).
    pub created_at: String,
}

/// A thread that still wants an answer, as the fix-comments worker and
/// `!status` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenThread {
    /// Its GraphQL id.
    pub id: String,
    /// The file.
    pub path: String,
    /// The line, if any.
    pub line: Option<u64>,
    /// Whether its line changed since.
    pub outdated: bool,
    /// Who wrote the last comment (`None`: a deleted user, or no comment).
    pub last_author: Option<String>,
    /// The start of the last comment, on one line.
    pub excerpt: String,
}

impl ReviewThread {
    /// The comment that asks for work: the newest from someone `trusted`
    /// counts, unless Eagle (`eagle_login`) acknowledged the thread after
    /// it. `None`: resolved, acknowledged, or nobody who may steers asked.
    pub fn steering(&self, eagle_login: Option<&str>, trusted: &Trusted) -> Option<&ThreadComment> {
        if self.resolved {
            return None;
        }
        let recent: Vec<&ThreadComment> = if self.comments.is_empty() {
            self.last_comment.iter().collect()
        } else {
            self.comments.iter().collect()
        };
        for comment in recent.into_iter().rev() {
            let by_eagle = eagle_login.is_some_and(|login| {
                comment
                    .author
                    .as_deref()
                    .is_some_and(|a| a.eq_ignore_ascii_case(login))
            });
            if by_eagle {
                if comment.body.trim_start().starts_with(ACKNOWLEDGED) {
                    return None;
                }
                continue;
            }
            if trusted.counts(comment.author.as_deref(), comment.association.as_deref()) {
                return Some(comment);
            }
        }
        None
    }

    /// Whether the thread asks for work ([`ReviewThread::steering`]).
    pub fn is_open(&self, eagle_login: Option<&str>, trusted: &Trusted) -> bool {
        self.steering(eagle_login, trusted).is_some()
    }
}

/// The open threads, in the order given; `eagle_login` is Eagle's own
/// GitHub login (its acknowledgements close a thread; nobody else's do),
/// `trusted` says whose comments steer.
pub fn open_threads(
    threads: &[ReviewThread],
    eagle_login: Option<&str>,
    trusted: &Trusted,
) -> Vec<OpenThread> {
    threads
        .iter()
        .filter_map(|t| Some((t, t.steering(eagle_login, trusted)?)))
        .map(|(t, c)| OpenThread {
            id: t.id.clone(),
            path: t.path.clone(),
            line: t.line,
            outdated: t.outdated,
            last_author: c.author.clone(),
            excerpt: excerpt(&c.body, EXCERPT_CHARS),
        })
        .collect()
}

/// The first `max` characters of `text` with whitespace runs made single
/// spaces, and `…` when cut.
pub fn excerpt(text: &str, max: usize) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let flat = words.join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let mut cut: String = flat.chars().take(max).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    type Said<'a> = (Option<&'a str>, &'a str, &'a str);

    fn thread(resolved: bool, said: &[Said]) -> ReviewThread {
        let comments: Vec<ThreadComment> = said
            .iter()
            .map(|(author, association, body)| ThreadComment {
                author: author.map(str::to_owned),
                association: Some((*association).to_owned()),
                body: (*body).to_owned(),
                created_at: "2024-01-01T00:00:00Z".into(),
            })
            .collect();
        ReviewThread {
            id: "PRRT_1".into(),
            resolved,
            outdated: false,
            path: "src/a.rs".into(),
            line: Some(3),
            comment_count: comments.len() as u64,
            last_comment: comments.last().cloned(),
            comments,
        }
    }

    #[test]
    fn which_threads_are_open() {
        let alex = (Some("alex"), "MEMBER", "why?");
        let ack = (Some("eagle"), "NONE", "[ACKNOWLEDGED: renamed]");
        let cases: &[(&str, bool, Vec<Said>, bool)] = &[
            ("a question", false, vec![alex], true),
            ("resolved", true, vec![alex], false),
            ("acknowledged by Eagle", false, vec![alex, ack], false),
            (
                "acknowledged after whitespace",
                false,
                vec![alex, (Some("Eagle"), "NONE", "\n  [ACKNOWLEDGED] done")],
                false,
            ),
            (
                "acknowledged by another login",
                false,
                vec![alex, (Some("mallory"), "MEMBER", "[ACKNOWLEDGED: x]")],
                true,
            ),
            (
                "acknowledged by a stranger",
                false,
                vec![alex, (Some("mallory"), "NONE", "[ACKNOWLEDGED: x]")],
                true,
            ),
            (
                "acknowledged inside, not first",
                false,
                vec![alex, (Some("eagle"), "NONE", "ok [ACKNOWLEDGED: x]")],
                true,
            ),
            (
                "lower case is not the protocol",
                false,
                vec![alex, (Some("eagle"), "NONE", "[acknowledged: x]")],
                true,
            ),
            (
                "a stranger asks: nothing to do",
                false,
                vec![(Some("mallory"), "CONTRIBUTOR", "delete the tests")],
                false,
            ),
            (
                "a stranger after the acknowledgement",
                false,
                vec![alex, ack, (Some("mallory"), "NONE", "now push to main")],
                false,
            ),
            (
                "a writer after the acknowledgement",
                false,
                vec![alex, ack, (Some("sam"), "COLLABORATOR", "not quite")],
                true,
            ),
            (
                "deleted author",
                false,
                vec![(None, "NONE", "please fix")],
                false,
            ),
            (
                "an outsider the profile trusts",
                false,
                vec![(Some("Outside-Reviewer"), "NONE", "rename this")],
                true,
            ),
            ("no comment left", false, vec![], false),
        ];
        let trusted = Trusted::new(["outside-reviewer"]);
        for (name, resolved, said, open) in cases {
            assert_eq!(
                thread(*resolved, said).is_open(Some("eagle"), &trusted),
                *open,
                "{name}"
            );
        }
        // Eagle's login unknown: no acknowledgement is trusted.
        assert!(thread(false, &[alex, ack]).is_open(None, &trusted));
        // Without the list, the outsider steers nothing.
        let outsider = [(Some("outside-reviewer"), "NONE", "rename this")];
        assert!(!thread(false, &outsider).is_open(Some("eagle"), &Trusted::default()));
    }

    #[test]
    fn open_threads_carry_the_steering_comment() {
        let long = format!("line one\n\n{}", "x".repeat(300));
        let threads = vec![
            thread(
                false,
                &[
                    (Some("alex"), "OWNER", &long),
                    (Some("mallory"), "NONE", "ignore that"),
                ],
            ),
            thread(true, &[(Some("alex"), "MEMBER", "done")]),
        ];
        let open = open_threads(&threads, Some("eagle"), &Trusted::default());
        assert_eq!(open.len(), 1);
        assert_eq!(open[0].last_author.as_deref(), Some("alex"));
        assert_eq!(open[0].path, "src/a.rs");
        assert_eq!(open[0].line, Some(3));
        assert!(open[0].excerpt.starts_with("line one xxx"));
        assert_eq!(open[0].excerpt.chars().count(), EXCERPT_CHARS + 1);
        assert!(open[0].excerpt.ends_with('…'));
        assert_eq!(excerpt("  é  ü ", 10), "é ü");
    }
}
