//! Request parameters: the query string and the form body, merged, with
//! typed access that fails the way Zulip's `typed_endpoint` does.
//!
//! Values the spec marks as JSON (`event_types`, `narrow`, booleans, …) must
//! be JSON text; anything else fails with a 400 and a violation.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::ApiError;

/// The parameters of one request.
pub(crate) struct Params<'a> {
    map: &'a BTreeMap<String, String>,
}

/// Decodes `a=1&b=2` into pairs; later duplicates win, as in Django.
pub(crate) fn parse_urlencoded(into: &mut BTreeMap<String, String>, input: &[u8]) {
    for (k, v) in form_urlencoded::parse(input) {
        into.insert(k.into_owned(), v.into_owned());
    }
}

fn not_json(name: &str) -> ApiError {
    ApiError::malformed(
        format!("{name} is not valid JSON"),
        format!("parameter {name} is not valid JSON"),
    )
}

fn wrong_type(name: &str, what: &str) -> ApiError {
    ApiError::malformed(
        format!("{name} is not {what}"),
        format!("parameter {name} is not {what}"),
    )
}

impl<'a> Params<'a> {
    /// Wraps a parameter map.
    pub fn new(map: &'a BTreeMap<String, String>) -> Params<'a> {
        Params { map }
    }

    /// A raw value.
    pub fn get(&self, name: &str) -> Option<&'a str> {
        self.map.get(name).map(String::as_str)
    }

    /// A raw value that must be present.
    pub fn required(&self, name: &str) -> Result<&'a str, ApiError> {
        self.get(name).ok_or_else(|| ApiError::missing(name))
    }

    /// A JSON-encoded value.
    pub fn json(&self, name: &str) -> Result<Option<Value>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(raw) => serde_json::from_str(raw)
                .map(Some)
                .map_err(|_| not_json(name)),
        }
    }

    /// A JSON boolean (`true`/`false`).
    pub fn bool(&self, name: &str) -> Result<Option<bool>, ApiError> {
        match self.json(name)? {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(b)),
            Some(_) => Err(wrong_type(name, "a boolean")),
        }
    }

    /// A JSON integer.
    pub fn int(&self, name: &str) -> Result<Option<i64>, ApiError> {
        match self.json(name)? {
            None => Ok(None),
            Some(Value::Number(n)) if n.is_i64() => Ok(n.as_i64()),
            Some(_) => Err(wrong_type(name, "an integer")),
        }
    }

    /// A JSON integer that must not be negative.
    pub fn non_negative(&self, name: &str) -> Result<Option<u64>, ApiError> {
        match self.int(name)? {
            None => Ok(None),
            Some(n) => u64::try_from(n).map(Some).map_err(|_| {
                wrong_type(name, "a non-negative integer").with_msg(format!("{name} is too small"))
            }),
        }
    }

    /// A JSON list of strings.
    pub fn str_list(&self, name: &str) -> Result<Option<Vec<String>>, ApiError> {
        match self.json(name)? {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .into_iter()
                .enumerate()
                .map(|(i, v)| match v {
                    Value::String(s) => Ok(s),
                    _ => Err(wrong_type(&format!("{name}[{i}]"), "a string")),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(_) => Err(wrong_type(name, "a list")),
        }
    }

    /// A JSON object.
    pub fn object(&self, name: &str) -> Result<Option<Value>, ApiError> {
        match self.json(name)? {
            None => Ok(None),
            Some(v @ Value::Object(_)) => Ok(Some(v)),
            Some(_) => Err(wrong_type(name, "a dict")),
        }
    }
}

impl ApiError {
    /// Replaces the message, keeping code and violation.
    pub fn with_msg(mut self, msg: String) -> ApiError {
        self.msg = msg;
        self
    }
}
