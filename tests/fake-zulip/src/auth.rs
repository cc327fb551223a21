//! HTTP Basic authentication as `zerver/decorator.py` does it for
//! `/api/v1`: `email:api_key`, the key's whitespace stripped, the email
//! compared case-insensitively, and every failure a 401 `UNAUTHORIZED` with
//! `WWW-Authenticate: Basic realm="zulip"`.

use axum::http::HeaderMap;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::error::ApiError;
use crate::state::State;

/// Authenticates a request, returning the user id.
pub(crate) fn authenticate(state: &State, headers: &HeaderMap) -> Result<u64, ApiError> {
    let (email, key) = credentials(headers)?;
    let key = key.trim();
    let email = email.trim();
    // `has_api_key_format`: 32 alphanumerics.
    if key.len() != 32 || !key.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(ApiError::unauthorized("Malformed API key"));
    }
    let user = state
        .users
        .values()
        .find(|u| u.api_key == key)
        .ok_or_else(|| ApiError::unauthorized("Invalid API key"))?;
    if !user.email.eq_ignore_ascii_case(email) {
        // The right key for another user.
        return Err(ApiError::unauthorized("Invalid API key"));
    }
    if !user.active {
        // `UserDeactivatedError` is re-raised by `authenticated_rest_api_view`
        // as `UnauthorizedError(e.msg)`, so the code is UNAUTHORIZED.
        return Err(ApiError::unauthorized("Account is deactivated"));
    }
    Ok(user.id)
}

/// `get_basic_credentials`: the role (email) and the API key.
fn credentials(headers: &HeaderMap) -> Result<(String, String), ApiError> {
    let Some(value) = headers.get("authorization") else {
        return Err(ApiError::unauthorized(
            "Missing authorization header for basic auth",
        ));
    };
    let invalid = || ApiError::unauthorized("Invalid authorization header for basic auth");
    let text = value.to_str().map_err(|_| invalid())?;
    let parts: Vec<&str> = text.split_whitespace().collect();
    let [scheme, encoded] = parts.as_slice() else {
        return Err(invalid());
    };
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err(ApiError::bad_request(
            "This endpoint requires HTTP basic authentication.".into(),
        ));
    }
    let decoded = STANDARD.decode(encoded).map_err(|_| invalid())?;
    let decoded = String::from_utf8(decoded).map_err(|_| invalid())?;
    let fields: Vec<&str> = decoded.split(':').collect();
    let [email, key] = fields.as_slice() else {
        return Err(invalid());
    };
    Ok(((*email).to_owned(), (*key).to_owned()))
}
