//! Zulip's error envelope, `{"result":"error","msg":…,"code":…}`, as a
//! value the handlers return, and the success envelope around their data.

use serde_json::{Map, Value, json};

/// An error answer, plus whether the request broke the client's contract
/// (then it is also recorded as a violation).
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    pub status: u16,
    pub code: &'static str,
    pub msg: String,
    /// Extra fields of the body, e.g. `queue_id` or `var_name`.
    pub extra: Map<String, Value>,
    /// Extra headers, e.g. `WWW-Authenticate`.
    pub headers: Vec<(&'static str, String)>,
    /// Set when the request itself was malformed: a client bug.
    pub violation: Option<String>,
}

impl ApiError {
    /// An error with this status, code and message.
    pub fn new(status: u16, code: &'static str, msg: String) -> ApiError {
        ApiError {
            status,
            code,
            msg,
            extra: Map::new(),
            headers: Vec::new(),
            violation: None,
        }
    }

    /// A 400 `BAD_REQUEST`: a legitimate outcome the client must handle.
    pub fn bad_request(msg: String) -> ApiError {
        ApiError::new(400, "BAD_REQUEST", msg)
    }

    /// A 400 `BAD_REQUEST` for a malformed request: also a violation.
    pub fn malformed(msg: String, violation: String) -> ApiError {
        ApiError::bad_request(msg).violating(violation)
    }

    /// 400 `REQUEST_VARIABLE_MISSING` for a required parameter: a violation.
    pub fn missing(name: &str) -> ApiError {
        ApiError::new(
            400,
            "REQUEST_VARIABLE_MISSING",
            format!("Missing '{name}' argument"),
        )
        .with("var_name", json!(name))
        .violating(format!("required parameter {name:?} is missing"))
    }

    /// 401 `UNAUTHORIZED` with the Basic challenge.
    pub fn unauthorized(msg: &str) -> ApiError {
        let mut e = ApiError::new(401, "UNAUTHORIZED", msg.to_owned());
        e.headers
            .push(("www-authenticate", "Basic realm=\"zulip\"".to_owned()));
        e
    }

    /// 400 `BAD_EVENT_QUEUE_ID`.
    pub fn bad_queue(queue_id: &str) -> ApiError {
        ApiError::new(
            400,
            "BAD_EVENT_QUEUE_ID",
            format!("Bad event queue ID: {queue_id}"),
        )
        .with("queue_id", json!(queue_id))
    }

    /// 400 "Invalid message(s)" for a message that is missing or hidden.
    pub fn invalid_message() -> ApiError {
        ApiError::bad_request("Invalid message(s)".into())
    }

    /// Adds a field to the body.
    pub fn with(mut self, key: &str, value: Value) -> ApiError {
        self.extra.insert(key.to_owned(), value);
        self
    }

    /// Marks the error as a client contract violation.
    pub fn violating(mut self, why: String) -> ApiError {
        self.violation = Some(why);
        self
    }

    /// The JSON body.
    pub fn body(&self) -> Value {
        let mut body = self.extra.clone();
        body.insert("result".into(), json!("error"));
        body.insert("msg".into(), json!(self.msg));
        body.insert("code".into(), json!(self.code));
        Value::Object(body)
    }
}

/// Wraps handler data in the success envelope, reporting parameters the
/// endpoint does not know as Zulip does since feature level 167.
pub(crate) fn success(mut data: Map<String, Value>, ignored: &[String]) -> Value {
    data.insert("result".into(), json!("success"));
    data.insert("msg".into(), json!(""));
    if !ignored.is_empty() {
        data.insert("ignored_parameters_unsupported".into(), json!(ignored));
    }
    Value::Object(data)
}
