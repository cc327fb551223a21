//! Posting an approved comment exactly once, as approved: the text and
//! nothing else. Asana has no idempotency key (NOTES §5), so a retried POST
//! can make a second comment. Instead of a marker in the text (readers would
//! see it), the comment is known by who wrote it, what it says and when:
//! before every POST (the first, and each after a timeout, a 5xx or a lost
//! answer) every page of the task's stories is read, and the POST is skipped
//! if a comment by the token's user with exactly this text (ends trimmed)
//! was created since the caller's `since` (the approval), less
//! [`CLOCK_SKEW`]. This survives a crash too: the caller runs it again with
//! the same text and `since`, and the crash between the POST and recording
//! it is covered by the same look.
//!
//! Why not an invisible marker in `html_text`: Asana documents which tags it
//! returns, not which it keeps, so an element meant to be invisible may be
//! dropped, or shown (NOTES §5, AD `rich-text`); the approved text is what
//! was promised, so the text itself is the mark.
//!
//! Limits: the same words by the token's user (the owner, whose token it
//! is) in that window count as Eagle's comment, which is then not posted
//! again (the words are there); a person who edits the comment makes it
//! look absent; and a POST that timed out may still land after the
//! re-check, which the backoff before re-checking makes unlikely, not
//! impossible.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::json;

use super::client::{Asana, Call};
use super::error::Error;
use super::types::{Envelope, RawStory, STORY_FIELDS};

/// How far Asana's clock may be behind Eagle's: a comment created this long
/// before `since` still counts.
pub const CLOCK_SKEW: Duration = Duration::from_secs(5 * 60);

/// What [`Asana::post_comment_once`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommentOutcome {
    /// This call posted the comment; the new story's gid.
    Posted {
        /// The story's gid.
        story_gid: String,
    },
    /// A comment by the token's user with this text was already there (an
    /// earlier call, one before a crash, or this call's own POST whose
    /// answer was lost); nothing more was posted.
    Found {
        /// The existing story's gid.
        story_gid: String,
    },
}

/// The first comment by `author` that says `text` (ends trimmed), created
/// at or after `after`. A story without `created_at` counts: posting twice
/// is the worse mistake.
fn find_posted<'s>(
    stories: &'s [RawStory],
    author: &str,
    text: &str,
    after: DateTime<Utc>,
) -> Option<&'s RawStory> {
    stories.iter().find(|s| {
        s.resource_subtype == "comment_added"
            && s.created_by.as_ref().is_some_and(|by| by.gid == author)
            && s.text.trim() == text.trim()
            && s.created_at.is_none_or(|at| at >= after)
    })
}

impl Asana {
    /// Posts `text`, exactly, as a comment on a task unless a comment by the
    /// token's user saying it was created since `since` (less
    /// [`CLOCK_SKEW`]). Returns whether the comment was posted now or found.
    ///
    /// A POST that fails without a clear answer (a timeout, a 5xx, a lost
    /// connection) is followed by a wait and a fresh look at the stories,
    /// and is repeated only if the comment is still absent, at most
    /// `retry.attempts` times in all. Any other error is returned at once.
    pub async fn post_comment_once(
        &self,
        task_gid: &str,
        text: &str,
        since: DateTime<Utc>,
    ) -> Result<CommentOutcome, Error> {
        if text.trim().is_empty() {
            return Err(Error::EmptyComment);
        }
        let body = json!({"data": {"text": text}});
        let mut failures = 0;
        loop {
            if let Some(story_gid) = self.find_comment(task_gid, text, since).await? {
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
                    tracing::info!(task = task_gid, story = %story.data.gid, "asana comment posted");
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
                return match self.find_comment(task_gid, text, since).await? {
                    Some(story_gid) => Ok(CommentOutcome::Found { story_gid }),
                    None => Err(error),
                };
            }
            let wait = self.config.retry.backoff(failures);
            tracing::warn!(
                task = task_gid,
                %error,
                wait_ms = wait.as_millis() as u64,
                "asana comment may or may not have been posted; looking again"
            );
            tokio::time::sleep(wait).await;
        }
    }

    /// The gid of a comment by the token's user on the task that says
    /// `text`, created since `since` less [`CLOCK_SKEW`], reading every page
    /// of its stories.
    pub async fn find_comment(
        &self,
        task_gid: &str,
        text: &str,
        since: DateTime<Utc>,
    ) -> Result<Option<String>, Error> {
        let me = self.me().await?;
        let call = Call::get(vec!["tasks", task_gid, "stories"]).query("opt_fields", STORY_FIELDS);
        let stories: Vec<RawStory> = self.get_all(&call).await?;
        let after = since - CLOCK_SKEW;
        Ok(find_posted(&stories, &me.gid, text, after).map(|s| s.gid.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::integrations::asana::types::Ref;

    fn at(minute: u32) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(&format!("2026-06-11T10:{minute:02}:00Z"))
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_default()
    }

    fn story(subtype: &str, author: Option<&str>, text: &str, minute: Option<u32>) -> RawStory {
        RawStory {
            gid: format!("{subtype}-{author:?}-{text}"),
            resource_subtype: subtype.into(),
            created_by: author.map(|a| Ref {
                gid: a.into(),
                name: String::new(),
            }),
            text: text.into(),
            created_at: minute.map(at),
        }
    }

    #[test]
    fn only_own_comments_with_exactly_the_text_since_then_count() {
        let text = "PR ready";
        let c = |author, text, minute| story("comment_added", author, text, minute);
        let cases: Vec<(Vec<RawStory>, bool)> = vec![
            (vec![], false),
            (vec![c(Some("me"), "PR ready", Some(30))], true),
            // Asana may trim the ends.
            (vec![c(Some("me"), "PR ready\n", Some(30))], true),
            // Exactly at the bound counts; before it does not.
            (vec![c(Some("me"), "PR ready", Some(20))], true),
            (vec![c(Some("me"), "PR ready", Some(19))], false),
            // No created_at: counted, not posted twice.
            (vec![c(Some("me"), "PR ready", None)], true),
            // Someone else saying it does not count.
            (vec![c(Some("alex"), "PR ready", Some(30))], false),
            // A system story does not count.
            (
                vec![story("name_changed", Some("me"), "PR ready", Some(30))],
                false,
            ),
            (vec![c(None, "PR ready", Some(30))], false),
            // Other words, even sharing a prefix, do not.
            (vec![c(Some("me"), "PR ready for review", Some(30))], false),
            (
                vec![
                    c(Some("alex"), "hello", Some(31)),
                    c(Some("me"), "PR ready", Some(32)),
                ],
                true,
            ),
        ];
        for (stories, found) in cases {
            assert_eq!(
                find_posted(&stories, "me", text, at(20)).is_some(),
                found,
                "{stories:?}"
            );
        }
    }
}
