//! GitHub's error bodies, `{"message", "documentation_url", "status"}`, as a
//! value the handlers return, plus whether the request broke Eagle's contract
//! (then it is also recorded as a violation).

use serde_json::{Value, json};

/// Where GitHub's REST errors point.
pub(crate) const DOCS: &str = "https://docs.github.com/rest";

/// An error answer.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    pub status: u16,
    pub message: String,
    pub documentation_url: String,
    /// `errors[]` of a 422.
    pub errors: Option<Value>,
    /// Set when the request itself was malformed: a client bug.
    pub violation: Option<String>,
}

impl ApiError {
    /// An error with this status and message.
    pub fn new(status: u16, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            documentation_url: DOCS.to_owned(),
            errors: None,
            violation: None,
        }
    }

    /// 404 `Not Found`.
    pub fn not_found() -> ApiError {
        ApiError::new(404, "Not Found")
    }

    /// 422 `Validation Failed` with one `errors[]` entry.
    pub fn validation(resource: &str, field: &str, code: &str) -> ApiError {
        let mut e = ApiError::new(422, "Validation Failed");
        e.errors = Some(json!([{"resource": resource, "field": field, "code": code}]));
        e
    }

    /// Points `documentation_url` at an endpoint's page.
    pub fn docs(mut self, url: &str) -> ApiError {
        self.documentation_url = url.to_owned();
        self
    }

    /// Marks the error as a client contract violation.
    pub fn violating(mut self, why: impl Into<String>) -> ApiError {
        self.violation = Some(why.into());
        self
    }

    /// The JSON body.
    pub fn body(&self) -> Value {
        let mut body = json!({
            "message": self.message,
            "documentation_url": self.documentation_url,
            "status": self.status.to_string(),
        });
        if let Some(errors) = &self.errors {
            body["errors"] = errors.clone();
        }
        body
    }
}
