//! The errors of the GitHub client, typed by what the caller does about
//! them: wait (rate limits), fix the token (401, 403), stop asking (404), or
//! read why a merge was refused. Every message names the request
//! (`METHOD /path`) and what went wrong; none holds the token, which never
//! leaves the `Authorization` header. Also here: how an answer becomes one
//! of them (its status, GitHub's `message`, a body that does not parse).

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::integrations::github::ratelimit::LimitKind;

/// The longest error message kept from a body.
const MESSAGE_CHARS: usize = 300;

/// What can go wrong talking to GitHub.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A configuration or argument the client cannot use (a base URL that
    /// cannot hold paths, a repository name with a slash, …).
    #[error("invalid github input: {0}")]
    InvalidInput(String),
    /// 404: the object does not exist, or the token may not see it (GitHub
    /// hides private objects behind 404).
    #[error("{what}: not found (HTTP 404)")]
    NotFound {
        /// The request, `METHOD /path`.
        what: String,
    },
    /// 401: the token is wrong, expired or revoked. Fatal until fixed.
    #[error("{what}: github refused the token (HTTP 401: {message})")]
    Unauthorized {
        /// The request.
        what: String,
        /// GitHub's message.
        message: String,
    },
    /// 403 that is not a rate limit: the token lacks a permission
    /// (`Resource not accessible by personal access token`) or GitHub
    /// forbids the action. Never retried.
    #[error(
        "{what}: forbidden (HTTP 403; the call needs the token's {permission} permission): {message}"
    )]
    Forbidden {
        /// The request.
        what: String,
        /// The fine-grained token permission the call needs, e.g.
        /// `Contents: write`.
        permission: &'static str,
        /// GitHub's message.
        message: String,
    },
    /// A rate limit that outlasted the retry policy: the caller should not
    /// ask again before `retry_after`.
    #[error("{what}: {kind} rate limit; retry after {retry_after:?} ({attempts} request(s) sent)")]
    RateLimited {
        /// The request.
        what: String,
        /// Primary (budget spent) or secondary (too fast).
        kind: LimitKind,
        /// How long to wait before the next request.
        retry_after: Duration,
        /// How many times this request was sent (0: the client waited for
        /// a spent budget and did not send it at all).
        attempts: u32,
    },
    /// A merge GitHub refused (405 or 409), classified from its message.
    #[error("{what}: merge refused: {reason}")]
    MergeRefused {
        /// The request.
        what: String,
        /// Why.
        reason: MergeRefusal,
    },
    /// Another 4xx (422 validation, 410 gone, …).
    #[error("{what}: refused (HTTP {status}): {message}")]
    Rejected {
        /// The request.
        what: String,
        /// The status.
        status: u16,
        /// GitHub's message.
        message: String,
    },
    /// GraphQL answered 200 with `errors[]` that are not "not found",
    /// "forbidden" or a rate limit.
    #[error("{what}: graphql error(s): {}", messages.join("; "))]
    GraphQl {
        /// The request.
        what: String,
        /// Each error's message.
        messages: Vec<String>,
    },
    /// 5xx: GitHub (or the load balancer in front of it) failed.
    #[error("{what}: github failed (HTTP {status})")]
    Server {
        /// The request.
        what: String,
        /// The status.
        status: u16,
    },
    /// No answer: connection refused or reset, TLS, or the timeout.
    #[error("{what}: cannot reach github: {detail}")]
    Transport {
        /// The request.
        what: String,
        /// What the HTTP library said (it never sees the token's value in
        /// anything it prints: URLs carry no credentials here).
        detail: String,
    },
    /// An answer that is not what the API description promises.
    #[error("{what}: unexpected response: {detail}")]
    Malformed {
        /// The request.
        what: String,
        /// What was wrong.
        detail: String,
    },
}

impl Error {
    /// Worth asking again later: rate limits, server failures, transport.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Error::RateLimited { .. } | Error::Server { .. } | Error::Transport { .. }
        )
    }

    /// The wait GitHub asked for, if this is a rate limit.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::RateLimited { retry_after, .. } => Some(*retry_after),
            _ => None,
        }
    }
}

/// Why GitHub refused a merge. The 405 has many causes that only its message
/// tells apart (see `shared/github/NOTES.md`, Pitfalls); a caller branches
/// on these and does not retry blindly.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeRefusal {
    /// 405 `Pull Request is still a draft`: mark it ready first (GraphQL).
    #[error("the pull request is still a draft")]
    Draft,
    /// 405 `Pull Request is not mergeable`: a conflict, or GitHub has not
    /// computed `mergeable` yet; poll again.
    #[error("the pull request is not mergeable")]
    NotMergeable,
    /// 405 `Merge commits are not allowed on this repository.` (or squash,
    /// rebase): choose another merge method.
    #[error("the repository does not allow this merge method")]
    MethodNotAllowed,
    /// 409 `Head branch was modified.`: the `sha` sent is no longer the
    /// head; what was approved is not what would be merged.
    #[error("the head branch moved past the sha given")]
    HeadChanged,
    /// 405 `Required status check "X" is expected.` (or failing): branch
    /// protection wants a check; the name when the message gives one.
    #[error("a required status check is missing or failing{}", .0.as_deref().map(|c| format!(" ({c})")).unwrap_or_default())]
    RequiredCheck(Option<String>),
    /// 405 `At least 1 approving review is required by reviewers with
    /// write access.`: branch protection wants reviews Eagle cannot give.
    #[error("branch protection requires approving reviews by people with write access")]
    RequiredReviews,
    /// 405 `This branch must not contain merge commits.`: linear history is
    /// required.
    #[error("the branch must not contain merge commits")]
    LinearHistory,
    /// 405 `You're not authorized to push to this branch.`: branch
    /// protection restricts who may push.
    #[error("the token may not push to the base branch")]
    NotAuthorized,
    /// Any other message, kept as GitHub sent it.
    #[error("{0}")]
    Other(String),
}

/// Classifies a refused merge by its status and message text (pure).
pub fn classify_merge_refusal(status: u16, message: &str) -> MergeRefusal {
    if status == 409 {
        return MergeRefusal::HeadChanged;
    }
    let lower = message.to_lowercase();
    if lower.contains("draft") {
        MergeRefusal::Draft
    } else if lower.contains("merges are not allowed") || lower.contains("commits are not allowed")
    {
        MergeRefusal::MethodNotAllowed
    } else if lower.contains("must not contain merge commits") {
        MergeRefusal::LinearHistory
    } else if lower.contains("required status check") {
        MergeRefusal::RequiredCheck(quoted(message))
    } else if lower.contains("approving review") || lower.contains("review is required") {
        MergeRefusal::RequiredReviews
    } else if lower.contains("not authorized to push") {
        MergeRefusal::NotAuthorized
    } else if lower.contains("not mergeable") {
        MergeRefusal::NotMergeable
    } else {
        MergeRefusal::Other(message.to_owned())
    }
}

/// The first `"…"` in a message.
fn quoted(message: &str) -> Option<String> {
    let (_, rest) = message.split_once('"')?;
    let (inside, _) = rest.split_once('"')?;
    (!inside.is_empty()).then(|| inside.to_owned())
}

impl From<crate::ground::repo::InvalidRepo> for Error {
    fn from(e: crate::ground::repo::InvalidRepo) -> Error {
        Error::InvalidInput(e.0)
    }
}

/// An error and its sources, one line.
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// Parses a JSON body as `T`.
pub(crate) fn parse<T: DeserializeOwned>(what: &str, body: &[u8]) -> Result<T, Error> {
    serde_json::from_slice(body).map_err(|e| Error::Malformed {
        what: what.to_owned(),
        detail: format!("not the JSON expected: {e}"),
    })
}

/// Parses a JSON body that may hold a secret as `T`: on failure the
/// message says what was expected, never what serde saw.
pub(crate) fn parse_untold<T: DeserializeOwned>(
    what: &str,
    body: &[u8],
    expected: &str,
) -> Result<T, Error> {
    serde_json::from_slice(body).map_err(|_| Error::Malformed {
        what: what.to_owned(),
        detail: format!("not {expected}"),
    })
}

/// The error for a status that is not success (rate limits are handled
/// before this).
pub(crate) fn status_error(
    what: &str,
    status: u16,
    body: &[u8],
    permission: &'static str,
) -> Error {
    let what = what.to_owned();
    let message = message_of(body);
    match status {
        401 => Error::Unauthorized { what, message },
        403 => Error::Forbidden {
            what,
            permission,
            message,
        },
        404 => Error::NotFound { what },
        500..=599 => Error::Server { what, status },
        _ => Error::Rejected {
            what,
            status,
            message,
        },
    }
}

/// GitHub's `message` (or GraphQL's `errors[].message`), cut short.
pub(crate) fn message_of(body: &[u8]) -> String {
    let text = match serde_json::from_slice::<Value>(body) {
        Ok(v) => match v.get("message").and_then(Value::as_str) {
            Some(m) => m.to_owned(),
            None => v
                .get("errors")
                .and_then(Value::as_array)
                .map(|errors| {
                    errors
                        .iter()
                        .filter_map(|e| e.get("message").and_then(Value::as_str))
                        .collect::<Vec<_>>()
                        .join("; ")
                })
                .unwrap_or_default(),
        },
        Err(_) => String::new(),
    };
    if text.is_empty() {
        return "(no message)".to_owned();
    }
    crate::integrations::github::threads::excerpt(&text, MESSAGE_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_refusals_are_classified_by_their_text() {
        use MergeRefusal::*;
        let cases: &[(u16, &str, MergeRefusal)] = &[
            (405, "Pull Request is still a draft", Draft),
            (405, "Pull Request is not mergeable", NotMergeable),
            (
                405,
                "Merge commits are not allowed on this repository.",
                MethodNotAllowed,
            ),
            (
                405,
                "Squash merges are not allowed on this repository.",
                MethodNotAllowed,
            ),
            (
                405,
                "Rebase merges are not allowed on this repository.",
                MethodNotAllowed,
            ),
            (
                405,
                "This branch must not contain merge commits.",
                LinearHistory,
            ),
            (
                405,
                "Required status check \"macOS UI Tests\" is expected.",
                RequiredCheck(Some("macOS UI Tests".into())),
            ),
            (
                405,
                "2 of 3 required status checks are expected.",
                RequiredCheck(None),
            ),
            (
                405,
                "You're not authorized to push to this branch. Visit https://docs.github.com/ for more information.",
                NotAuthorized,
            ),
            (
                409,
                "Head branch was modified. Review and try the merge again.",
                HeadChanged,
            ),
            (
                405,
                "At least 1 approving review is required by reviewers with write access.",
                RequiredReviews,
            ),
            (
                405,
                "At least 2 approving reviews are required by reviewers with write access.",
                RequiredReviews,
            ),
            (405, "Something new.", Other("Something new.".into())),
        ];
        for (status, message, expected) in cases {
            assert_eq!(
                &classify_merge_refusal(*status, message),
                expected,
                "{status} {message}"
            );
        }
    }

    #[test]
    fn messages_name_the_request() {
        let e = Error::MergeRefused {
            what: "PUT /repos/o/r/pulls/1/merge".into(),
            reason: MergeRefusal::RequiredCheck(Some("ci".into())),
        };
        assert_eq!(
            e.to_string(),
            "PUT /repos/o/r/pulls/1/merge: merge refused: a required status check is missing or failing (ci)"
        );
        let e = Error::Forbidden {
            what: "PUT /repos/o/r/pulls/1/merge".into(),
            permission: "Contents: write",
            message: "Resource not accessible by personal access token".into(),
        };
        assert!(e.to_string().contains("Contents: write"), "{e}");
        assert!(!e.is_transient());
    }

    #[test]
    fn status_errors_say_what_and_why() {
        let body = br#"{"message":"Resource not accessible by personal access token"}"#;
        let e = status_error("POST /x", 403, body, "Actions: write");
        assert_eq!(
            e,
            Error::Forbidden {
                what: "POST /x".into(),
                permission: "Actions: write",
                message: "Resource not accessible by personal access token".into()
            }
        );
        assert_eq!(message_of(b"<html>"), "(no message)");
        assert!(matches!(
            status_error("GET /x", 502, b"<html>", "x"),
            Error::Server { status: 502, .. }
        ));
        assert!(matches!(
            status_error("GET /x", 422, b"{}", "x"),
            Error::Rejected { status: 422, .. }
        ));
    }
}
