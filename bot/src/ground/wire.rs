//! What a worker and its runner say over the run's socket: one JSON line
//! each way. The worker side (`eagle request`, `eagle hook claude-pretool`)
//! loads no profile: it finds the socket and its token in the environment.

use serde::{Deserialize, Serialize};

/// The name of the remote helper's link among the shims the runner puts
/// first on a worker's `PATH` (the worker side answers to it).
pub const REMOTE_HELPER: &str = "git-remote-eagle";
/// The name of the gh shim's link.
pub const GH: &str = "gh";
/// What the checkout's push URL is set to.
pub const PUSH_URL: &str = "eagle::origin";

/// The run's socket path.
pub const ENV_SOCKET: &str = "EAGLE_RUN_SOCKET";
/// The per-attempt token (a secret; the runner keeps only its hash).
pub const ENV_TOKEN: &str = "EAGLE_RUN_TOKEN";
/// The run's id, for messages.
pub const ENV_RUN: &str = "EAGLE_RUN_ID";

/// The longest line either side reads.
pub const MAX_LINE: usize = 1 << 20;

/// A worker's question. No `Debug`: it carries the token.
#[derive(Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Ask {
    /// `eagle request <action> [details]`.
    Request {
        token: String,
        /// The worker's own key: the same key asked again is the same request.
        key: String,
        action: String,
        body: String,
        escalate: bool,
    },
    /// A Claude Code PreToolUse input, as the hook received it.
    Hook {
        token: String,
        input: serde_json::Value,
    },
}

/// The runner's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    pub status: Status,
    /// Why (a denial's reason, what a human must decide, why to stop).
    #[serde(default)]
    pub reason: String,
    /// The request's id, when one was recorded.
    #[serde(default)]
    pub request: Option<i64>,
    /// An approver's note.
    #[serde(default)]
    pub note: Option<String>,
    /// What Eagle carried out for an approved effect (the pushed sha, the
    /// PR's number and address, the comment's address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Carried>,
}

/// How a question was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Go ahead.
    Approved,
    /// Do not; `reason` says why.
    Denied,
    /// A human decides (or no decision came in time): stop now; the runner
    /// resumes the worker with the answer.
    Escalated,
    /// The run is held or cancelled: stop now.
    Stop,
    /// The question itself was wrong (bad token, bad action).
    Invalid,
}

impl Answer {
    pub fn new(status: Status, reason: impl Into<String>) -> Answer {
        Answer {
            status,
            reason: reason.into(),
            request: None,
            note: None,
            outcome: None,
        }
    }
}

/// An action name as the protocol allows it: lower case letters, digits and `_`.
pub fn valid_action(action: &str) -> bool {
    !action.is_empty()
        && action.len() <= 64
        && action
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// What the worker learns when Eagle has carried an effect out (the
/// answer's `outcome`, and the `carried_result` kept with the request).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Carried {
    /// The commit now on the branch (a push), or merged at (a merge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha: Option<String>,
    /// The branch pushed to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The PR's number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pr_number: Option<u64>,
    /// The PR's or the comment's web address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Whether the PR opened (or found open) is a draft.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft: Option<bool>,
}
