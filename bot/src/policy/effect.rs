//! The effects Eagle carries out for a worker, as the exact parameters a
//! request names: the one place where a request's body is defined for
//! `push_branch`, `open_draft_pr`, `comment_on_pr`, `reply_thread`,
//! `merge_pr` and `post_asana_comment`.
//!
//! The body of such a request is one JSON object ([`Effect::to_body`]): what
//! a policy or a human approves is these bytes, and what Eagle carries out is
//! parsed back from them ([`Effect::parse`]), so an approval covers exactly
//! what is done. Older free-text bodies of `merge_pr` and
//! `post_asana_comment` (a protocol line, `eagle request merge_pr "PR #4"`)
//! keep their meaning: the run's PR at the head Eagle saw, the text as the
//! comment.

mod words;

pub use words::{Kind, describe, describe_for, describe_merge, text_summary};

use serde::{Deserialize, Serialize};

/// One effect with its exact parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "effect", rename_all = "snake_case", deny_unknown_fields)]
pub enum Effect {
    /// Push `sha` to the run's own branch (`branch`, when the worker named
    /// one, must be it).
    PushBranch {
        sha: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        branch: Option<String>,
    },
    /// Open the run's draft PR from its branch to the run's base.
    OpenDraftPr { title: String, body: String },
    /// A conversation comment on the run's PR.
    CommentOnPr { body: String },
    /// A reply in one review thread of the run's PR (its GraphQL id).
    ReplyThread { thread: String, body: String },
    /// Merge the run's PR, at `sha` (else at the head Eagle saw when the
    /// request was made).
    MergePr {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sha: Option<String>,
    },
    /// A comment on the run's Asana task.
    PostAsanaComment { body: String },
}

/// The actions whose approved requests Eagle carries out itself.
pub const CARRIED: &[&str] = &[
    "push_branch",
    "open_draft_pr",
    "comment_on_pr",
    "reply_thread",
    "merge_pr",
    "post_asana_comment",
];

/// The longest text (a PR body, a comment) Eagle carries out: GitHub's
/// limit for a comment or a PR body is 65,536 characters.
pub const MAX_TEXT: usize = 65_536;

impl Effect {
    /// Its action's name.
    pub fn action(&self) -> &'static str {
        match self {
            Effect::PushBranch { .. } => "push_branch",
            Effect::OpenDraftPr { .. } => "open_draft_pr",
            Effect::CommentOnPr { .. } => "comment_on_pr",
            Effect::ReplyThread { .. } => "reply_thread",
            Effect::MergePr { .. } => "merge_pr",
            Effect::PostAsanaComment { .. } => "post_asana_comment",
        }
    }

    /// The request body: one JSON object, its fields in a fixed order.
    pub fn to_body(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The effect a request's body names: `Ok(None)` for a body of the old
    /// free-text form (only `merge_pr` and `post_asana_comment` have one),
    /// `Err` with what is wrong otherwise.
    pub fn parse(action: &str, body: &str) -> Result<Option<Effect>, String> {
        if !CARRIED.contains(&action) {
            return Ok(None);
        }
        if !body.trim_start().starts_with('{') {
            return match action {
                "merge_pr" | "post_asana_comment" => Ok(None),
                _ => Err(format!(
                    "{action} names its parameters now (Eagle carries it out): {}",
                    usage(action)
                )),
            };
        }
        let effect: Effect = serde_json::from_str(body)
            .map_err(|e| format!("the {action} request's parameters cannot be read: {e}"))?;
        if effect.action() != action {
            return Err(format!(
                "the request is {action} but its parameters are {}'s",
                effect.action()
            ));
        }
        effect.check()?;
        Ok(Some(effect))
    }

    /// Whether the parameters are usable: a full commit id, no empty text,
    /// nothing over the limit.
    pub fn check(&self) -> Result<(), String> {
        let text = |what: &str, t: &str| {
            if t.trim().is_empty() {
                Err(format!("{} needs a {what}", self.action()))
            } else if t.chars().count() > MAX_TEXT {
                Err(format!(
                    "the {what} is over {MAX_TEXT} characters: shorten it (Eagle never cuts it)"
                ))
            } else {
                Ok(())
            }
        };
        match self {
            Effect::PushBranch { sha, .. } => full_sha(sha),
            Effect::MergePr { sha } => sha.as_deref().map_or(Ok(()), full_sha),
            Effect::OpenDraftPr { title, body } => {
                text("title", title)?;
                if title.chars().count() > 256 {
                    return Err("the title is over 256 characters".into());
                }
                if body.chars().count() > MAX_TEXT {
                    return Err(format!("the body is over {MAX_TEXT} characters"));
                }
                Ok(())
            }
            Effect::CommentOnPr { body } | Effect::PostAsanaComment { body } => text("body", body),
            Effect::ReplyThread { thread, body } => {
                if thread.is_empty()
                    || thread.len() > 200
                    || !thread
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "_-=".contains(c))
                {
                    return Err(format!("{thread:?} is not a review thread's id"));
                }
                text("body", body)
            }
        }
    }
}

/// A commit id as Eagle pushes and merges it: 40 (SHA-1) or 64 (SHA-256)
/// lower-case hex digits.
pub fn full_sha(sha: &str) -> Result<(), String> {
    if matches!(sha.len(), 40 | 64) && sha.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')) {
        Ok(())
    } else {
        Err(format!(
            "{:?} is not a full commit id (40 hex digits)",
            crate::ground::text::one_line(sha, 80)
        ))
    }
}

/// How a worker asks for `action`.
pub fn usage(action: &str) -> &'static str {
    match action {
        "push_branch" => "eagle request push_branch [--sha <sha>] (default: HEAD), or git push",
        "open_draft_pr" => {
            "eagle request open_draft_pr --title <title> --body-file <file>, or gh pr create"
        }
        "comment_on_pr" => "eagle request comment_on_pr --body-file <file>, or gh pr comment",
        "reply_thread" => "eagle request reply_thread <thread id> --body-file <file>",
        "merge_pr" => "eagle request merge_pr [--sha <sha>], or gh pr merge",
        "post_asana_comment" => "eagle request post_asana_comment --body-file <file>",
        _ => "eagle request <action> [details]",
    }
}

pub use crate::ground::wire::Carried;

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

    #[test]
    fn bodies_round_trip_and_old_forms_are_told_what_changed() {
        for effect in [
            Effect::PushBranch {
                sha: SHA.into(),
                branch: None,
            },
            Effect::OpenDraftPr {
                title: "Fix".into(),
                body: "line\n\nline ".into(),
            },
            Effect::ReplyThread {
                thread: "PRRT_kw1".into(),
                body: "done".into(),
            },
            Effect::MergePr { sha: None },
        ] {
            let body = effect.to_body();
            assert_eq!(
                Effect::parse(effect.action(), &body),
                Ok(Some(effect.clone()))
            );
        }
        assert_eq!(Effect::parse("merge_pr", "PR #4"), Ok(None));
        assert_eq!(Effect::parse("post_asana_comment", "Fixed"), Ok(None));
        assert_eq!(Effect::parse("run_tests", "{}"), Ok(None));
        let old = Effect::parse("push_branch", "git push origin HEAD").unwrap_err();
        assert!(old.contains("--sha"), "{old}");
        let wrong = Effect::parse(
            "merge_pr",
            &Effect::CommentOnPr { body: "x".into() }.to_body(),
        )
        .unwrap_err();
        assert!(wrong.contains("comment_on_pr"), "{wrong}");
        let short = Effect::parse("push_branch", r#"{"effect":"push_branch","sha":"abc"}"#);
        assert!(short.unwrap_err().contains("full commit id"));
        let long = Effect::CommentOnPr {
            body: "x".repeat(MAX_TEXT + 1),
        };
        assert!(long.check().unwrap_err().contains("never cuts"));
    }
}
