//! Asana's error body, `{"errors":[{"message","help"}]}` (`phrase` only on
//! 500s), as a value the handlers return, plus whether the request broke
//! Eagle's contract (then it is also recorded as a violation).

use serde_json::{Value, json};

const HELP: &str = "For more information on API status codes and how to handle them, read the docs on errors: https://developers.asana.com/docs/errors";

/// An error answer.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    pub status: u16,
    pub message: String,
    pub headers: Vec<(&'static str, String)>,
    /// Set when the request itself was malformed: a client bug.
    pub violation: Option<String>,
}

impl ApiError {
    /// An error with this status and message.
    pub fn new(status: u16, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            headers: Vec::new(),
            violation: None,
        }
    }

    /// A 400 for a malformed request: also a violation.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        let message = message.into();
        ApiError::new(400, message.clone()).violating(message)
    }

    /// 404 for an unknown object.
    pub fn unknown(gid: &str) -> ApiError {
        ApiError::new(404, format!("Unknown object: {gid}"))
    }

    /// 403 for an object in a workspace the caller is not in.
    pub fn forbidden() -> ApiError {
        ApiError::new(403, "Forbidden")
    }

    /// Marks the error as a client contract violation.
    pub fn violating(mut self, why: impl Into<String>) -> ApiError {
        self.violation = Some(why.into());
        self
    }

    /// The JSON body.
    pub fn body(&self) -> Value {
        body(self.status, &self.message)
    }
}

/// The error body for a status and message.
pub(crate) fn body(status: u16, message: &str) -> Value {
    let mut error = json!({"message": message, "help": HELP});
    if status == 500 {
        error["phrase"] = json!("6 sad squid snuggle softly");
    }
    json!({"errors": [error]})
}
