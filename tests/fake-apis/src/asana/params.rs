//! The query parameters every list shares: `limit` (1..=100), `offset`
//! (only tokens this fake issued, for the same listing), `opt_fields`, and
//! `completed_since`; and the `next_page` object, present only when `limit`
//! was sent and `null` on the last page.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use crate::asana::errors::ApiError;
use crate::asana::fields::{Kind, valid};
use crate::asana::state::{Offset, State, Task};
use crate::common::clock::parse_iso;
use crate::common::http::Incoming;
use crate::common::query::{encode_query, last};

/// What a list request asked for.
#[derive(Debug, Clone)]
pub(crate) struct ListParams {
    pub limit: Option<usize>,
    pub start: usize,
    /// The listing an offset must belong to.
    pub listing: String,
}

/// The listing a request pages through: its path and filters.
fn listing(req: &Incoming) -> String {
    let mut filters: Vec<(String, String)> = req
        .query
        .iter()
        .filter(|(k, _)| !["limit", "offset", "opt_fields", "opt_pretty"].contains(&k.as_str()))
        .cloned()
        .collect();
    filters.sort();
    format!("{}?{}", req.path, encode_query(&filters))
}

/// Reads `limit` and `offset`.
pub(crate) fn list_params(state: &State, req: &Incoming) -> Result<ListParams, ApiError> {
    let limit = match last(&req.query, "limit") {
        None => None,
        Some(raw) => match raw.parse::<usize>() {
            Ok(n) if (1..=100).contains(&n) => Some(n),
            _ => {
                return Err(ApiError::bad_request(format!(
                    "limit: Must be an integer between 1 and 100, got {raw:?}"
                )));
            }
        },
    };
    let listing = listing(req);
    let start = match last(&req.query, "offset") {
        None => 0,
        Some(token) => match state.offsets.get(token) {
            Some(o) if o.listing == listing => o.position,
            _ => {
                return Err(ApiError::bad_request(format!(
                    "offset: Your pagination token is invalid or was not issued for this request: {token}"
                )));
            }
        },
    };
    Ok(ListParams {
        limit,
        start,
        listing,
    })
}

/// The requested page of `items`, and `next_page` if `limit` was sent.
pub(crate) fn page<T: Clone>(
    state: &mut State,
    base: &str,
    req: &Incoming,
    p: &ListParams,
    items: &[T],
) -> (Vec<T>, Option<Value>) {
    let start = p.start.min(items.len());
    let Some(limit) = p.limit else {
        return (items[start..].to_vec(), None);
    };
    let end = (start + limit).min(items.len());
    let next = if end < items.len() {
        let raw: String = std::iter::repeat_with(|| state.rng.alphanumeric())
            .take(24)
            .collect();
        let token = URL_SAFE_NO_PAD.encode(format!("{{\"o\":\"{raw}\"}}"));
        state.offsets.insert(
            token.clone(),
            Offset {
                listing: p.listing.clone(),
                position: end,
            },
        );
        let mut query: Vec<(String, String)> = req
            .query
            .iter()
            .filter(|(k, _)| k != "offset")
            .cloned()
            .collect();
        query.push(("offset".to_owned(), token.clone()));
        let path = format!("{}?{}", req.path, encode_query(&query));
        json!({"offset": token, "path": path, "uri": format!("{base}{path}")})
    } else {
        Value::Null
    };
    (items[start..end].to_vec(), Some(next))
}

/// Reads `opt_fields`: `None` when absent. A path the description does not
/// list gets a 400 and is a violation.
pub(crate) fn opt_fields(
    req: &Incoming,
    kind: Kind,
    list: bool,
) -> Result<Option<Vec<String>>, ApiError> {
    let Some(raw) = last(&req.query, "opt_fields") else {
        return Ok(None);
    };
    let paths: Vec<String> = raw
        .split(',')
        .map(|p| p.trim().to_owned())
        .filter(|p| !p.is_empty())
        .collect();
    if let Some(bad) = paths.iter().find(|p| !valid(kind, list, p)) {
        return Err(ApiError::bad_request(format!(
            "opt_fields: Unknown field \"{bad}\" for this resource"
        )));
    }
    Ok(Some(paths))
}

/// Keeps the tasks that are incomplete or were completed since
/// `completed_since` (a date-time, or `now`: incomplete only).
pub(crate) fn completed_since(req: &Incoming, tasks: Vec<Task>) -> Result<Vec<Task>, ApiError> {
    let Some(raw) = last(&req.query, "completed_since") else {
        return Ok(tasks);
    };
    let since = if raw == "now" {
        None
    } else {
        Some(parse_iso(raw).ok_or_else(|| {
            ApiError::bad_request(format!(
                "completed_since: Not a valid date-time or \"now\": {raw:?}"
            ))
        })?)
    };
    Ok(tasks
        .into_iter()
        .filter(|t| !t.completed || since.is_some_and(|s| t.completed_at.is_some_and(|c| c >= s)))
        .collect())
}
