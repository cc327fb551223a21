//! Review threads and the rule that says which are still open (pure).
//!
//! A thread is open while it is not resolved and its last comment does not
//! acknowledge it: a worker that dealt with a comment answers
//! `[ACKNOWLEDGED: …]` (the protocol's word) instead of resolving threads
//! that belong to the reviewer. Outdated threads stay open: GitHub shows
//! them unresolved too, and a push does not answer a question.

use serde::{Deserialize, Serialize};

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
}

/// A comment in a review thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadComment {
    /// The author's login; `None` for a deleted user.
    pub author: Option<String>,
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
    /// Not resolved, and not acknowledged by its last comment.
    pub fn is_open(&self) -> bool {
        if self.resolved {
            return false;
        }
        match &self.last_comment {
            Some(c) => !c.body.trim_start().starts_with(ACKNOWLEDGED),
            // No comment to read (all deleted): nothing acknowledged it.
            None => true,
        }
    }
}

/// The open threads, in the order given.
pub fn open_threads(threads: &[ReviewThread]) -> Vec<OpenThread> {
    threads
        .iter()
        .filter(|t| t.is_open())
        .map(|t| OpenThread {
            id: t.id.clone(),
            path: t.path.clone(),
            line: t.line,
            outdated: t.outdated,
            last_author: t.last_comment.as_ref().and_then(|c| c.author.clone()),
            excerpt: t
                .last_comment
                .as_ref()
                .map(|c| excerpt(&c.body, EXCERPT_CHARS))
                .unwrap_or_default(),
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

    fn thread(resolved: bool, last: Option<(Option<&str>, &str)>) -> ReviewThread {
        ReviewThread {
            id: "PRRT_1".into(),
            resolved,
            outdated: false,
            path: "src/a.rs".into(),
            line: Some(3),
            comment_count: u64::from(last.is_some()),
            last_comment: last.map(|(author, body)| ThreadComment {
                author: author.map(str::to_owned),
                body: body.to_owned(),
                created_at: "2024-01-01T00:00:00Z".into(),
            }),
        }
    }

    #[test]
    fn which_threads_are_open() {
        type Case<'a> = (&'a str, bool, Option<(Option<&'a str>, &'a str)>, bool);
        let cases: &[Case] = &[
            ("a question", false, Some((Some("alex"), "why?")), true),
            ("resolved", true, Some((Some("alex"), "why?")), false),
            (
                "acknowledged",
                false,
                Some((Some("eagle"), "[ACKNOWLEDGED: renamed]")),
                false,
            ),
            (
                "acknowledged after whitespace",
                false,
                Some((Some("eagle"), "\n  [ACKNOWLEDGED] done")),
                false,
            ),
            (
                "acknowledged inside, not first",
                false,
                Some((Some("eagle"), "ok [ACKNOWLEDGED: x]")),
                true,
            ),
            (
                "lower case is not the protocol",
                false,
                Some((Some("eagle"), "[acknowledged: x]")),
                true,
            ),
            ("deleted author", false, Some((None, "please fix")), true),
            (
                "resolved and acknowledged",
                true,
                Some((None, "[ACKNOWLEDGED]")),
                false,
            ),
            ("no comment left", false, None, true),
        ];
        for (name, resolved, last, open) in cases {
            assert_eq!(thread(*resolved, *last).is_open(), *open, "{name}");
        }
    }

    #[test]
    fn open_threads_carry_the_last_comment() {
        let long = format!("line one\n\n{}", "x".repeat(300));
        let threads = vec![
            thread(false, Some((None, &long))),
            thread(true, Some((Some("alex"), "done"))),
        ];
        let open = open_threads(&threads);
        assert_eq!(open.len(), 1);
        assert_eq!(open[0].last_author, None);
        assert_eq!(open[0].path, "src/a.rs");
        assert_eq!(open[0].line, Some(3));
        assert!(open[0].excerpt.starts_with("line one xxx"));
        assert_eq!(open[0].excerpt.chars().count(), EXCERPT_CHARS + 1);
        assert!(open[0].excerpt.ends_with('…'));
        assert_eq!(excerpt("  é  ü ", 10), "é ü");
    }
}
