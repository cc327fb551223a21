//! Posting an approved comment exactly once. Asana has no idempotency key
//! (NOTES §5), so a retried POST can make a second comment: the comment
//! carries a marker, and before every POST (the first, and each after a
//! timeout, a 5xx or a lost answer) every page of the task's stories is read
//! and the POST skipped if a comment by the token's user already holds the
//! marker. This survives a crash too: the caller runs it again with the
//! same marker.
//!
//! Limits: a person who edits Eagle's comment and removes the marker makes
//! it look absent (NOTES: a missing marker means "unknown"); and a POST that
//! timed out may still land after the re-check, which the backoff before
//! re-checking makes unlikely, not impossible.

use serde_json::json;

use super::client::{Asana, Call};
use super::error::Error;
use super::types::{Envelope, RawStory, STORY_FIELDS};

/// The longest marker accepted; markers are short tags like
/// `[eagle:run-12-req-7]`.
const MAX_MARKER_CHARS: usize = 200;

/// What [`Asana::post_comment_once`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommentOutcome {
    /// This call posted the comment; the new story's gid.
    Posted {
        /// The story's gid.
        story_gid: String,
    },
    /// A comment by the token's user with the marker was already there (an
    /// earlier call, one before a crash, or this call's own POST whose
    /// answer was lost); nothing more was posted.
    Found {
        /// The existing story's gid.
        story_gid: String,
    },
}

/// Why a marker cannot be searched for reliably, if it cannot.
fn check_marker(marker: &str) -> Result<(), Error> {
    let reason = if marker.trim().is_empty() {
        "it is empty"
    } else if marker.chars().any(char::is_control) {
        "it holds a line break or control character"
    } else if marker.chars().count() > MAX_MARKER_CHARS {
        "it is longer than 200 characters"
    } else {
        return Ok(());
    };
    Err(Error::InvalidMarker {
        marker: marker.to_owned(),
        reason,
    })
}

/// The comment's text: `text` if it holds the marker, else the marker, a
/// space and `text`.
fn with_marker(marker: &str, text: &str) -> String {
    if text.contains(marker) {
        text.to_owned()
    } else {
        format!("{marker} {text}")
    }
}

/// The first comment by `author` whose text holds `marker`.
fn find_marked<'s>(stories: &'s [RawStory], author: &str, marker: &str) -> Option<&'s RawStory> {
    stories.iter().find(|s| {
        s.resource_subtype == "comment_added"
            && s.created_by.as_ref().is_some_and(|by| by.gid == author)
            && s.text.contains(marker)
    })
}

impl Asana {
    /// Posts `text` as a comment on a task unless a comment by the token's
    /// user holding `marker` is already there. The marker is put in front
    /// of the text unless the text holds it already. Returns whether the
    /// comment was posted now or found.
    ///
    /// A POST that fails without a clear answer (a timeout, a 5xx, a lost
    /// connection) is followed by a wait and a fresh look at the stories,
    /// and is repeated only if the marker is still absent, at most
    /// `retry.attempts` times in all. Any other error is returned at once.
    pub async fn post_comment_once(
        &self,
        task_gid: &str,
        marker: &str,
        text: &str,
    ) -> Result<CommentOutcome, Error> {
        check_marker(marker)?;
        let body = json!({"data": {"text": with_marker(marker, text)}});
        let mut failures = 0;
        loop {
            if let Some(story_gid) = self.find_comment(task_gid, marker).await? {
                return Ok(CommentOutcome::Found { story_gid });
            }
            let call = Call {
                method: reqwest::Method::POST,
                path: vec!["tasks", task_gid, "stories"],
                query: vec![("opt_fields", "gid".to_owned())],
                body: Some(&body),
            };
            let error = match self.send::<Envelope<RawStory>>(&call, false).await {
                Ok(story) => {
                    tracing::info!(task = task_gid, marker, story = %story.data.gid, "asana comment posted");
                    return Ok(CommentOutcome::Posted {
                        story_gid: story.data.gid,
                    });
                }
                Err(error) if error.is_ambiguous() => error,
                Err(error) => return Err(error),
            };
            failures += 1;
            if failures >= self.config.retry.attempts.max(1) {
                // One last look: the POST may have landed after all.
                return match self.find_comment(task_gid, marker).await? {
                    Some(story_gid) => Ok(CommentOutcome::Found { story_gid }),
                    None => Err(error),
                };
            }
            let wait = self.config.retry.backoff(failures);
            tracing::warn!(
                task = task_gid,
                marker,
                %error,
                wait_ms = wait.as_millis() as u64,
                "asana comment may or may not have been posted; looking again"
            );
            tokio::time::sleep(wait).await;
        }
    }

    /// The gid of a comment by the token's user on the task that holds
    /// `marker`, reading every page of its stories.
    pub async fn find_comment(
        &self,
        task_gid: &str,
        marker: &str,
    ) -> Result<Option<String>, Error> {
        check_marker(marker)?;
        let me = self.me().await?;
        let call = Call::get(vec!["tasks", task_gid, "stories"]).query("opt_fields", STORY_FIELDS);
        let stories: Vec<RawStory> = self.get_all(&call).await?;
        Ok(find_marked(&stories, &me.gid, marker).map(|s| s.gid.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::integrations::asana::types::Ref;

    fn story(subtype: &str, author: Option<&str>, text: &str) -> RawStory {
        RawStory {
            gid: format!("{subtype}-{author:?}-{text}"),
            resource_subtype: subtype.into(),
            created_by: author.map(|a| Ref {
                gid: a.into(),
                name: String::new(),
            }),
            text: text.into(),
        }
    }

    #[test]
    fn only_own_comments_with_the_marker_count() {
        let m = "[eagle:run-12-req-7]";
        let cases: Vec<(Vec<RawStory>, bool)> = vec![
            (vec![], false),
            (
                vec![story(
                    "comment_added",
                    Some("me"),
                    "[eagle:run-12-req-7] done",
                )],
                true,
            ),
            // Someone else quoting the marker does not count.
            (
                vec![story(
                    "comment_added",
                    Some("alex"),
                    "re [eagle:run-12-req-7]",
                )],
                false,
            ),
            // A system story mentioning it does not count.
            (
                vec![story("name_changed", Some("me"), "[eagle:run-12-req-7]")],
                false,
            ),
            (
                vec![story("comment_added", None, "[eagle:run-12-req-7]")],
                false,
            ),
            // Another marker, even a longer one sharing a prefix, does not.
            (
                vec![story(
                    "comment_added",
                    Some("me"),
                    "[eagle:run-12-req-70] x",
                )],
                false,
            ),
            (
                vec![
                    story("comment_added", Some("alex"), "hello"),
                    story(
                        "comment_added",
                        Some("me"),
                        "text then [eagle:run-12-req-7]",
                    ),
                ],
                true,
            ),
        ];
        for (stories, found) in cases {
            assert_eq!(
                find_marked(&stories, "me", m).is_some(),
                found,
                "{stories:?}"
            );
        }
    }

    #[test]
    fn markers_and_text() {
        assert!(check_marker("[eagle:1]").is_ok());
        for bad in ["", "  ", "a\nb", &"x".repeat(201)] {
            assert!(
                matches!(check_marker(bad), Err(Error::InvalidMarker { .. })),
                "{bad:?}"
            );
        }
        assert_eq!(with_marker("[m]", "hello"), "[m] hello");
        assert_eq!(with_marker("[m]", "done [m]"), "done [m]");
    }
}
