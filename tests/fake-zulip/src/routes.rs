//! The `/api/v1` routes the fake serves, the parameters each accepts
//! (from `zulip.yaml`), and their fault-injection route.

use crate::model::Route;

/// One served endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Endpoint {
    UsersMe,
    /// `GET /users/{user_id}` or `GET /users/{email}`.
    User(String),
    Subscriptions,
    ServerSettings,
    Register,
    GetEvents,
    DeleteEvents,
    SendMessage,
    GetMessages,
    EditMessage(u64),
    AddReaction(u64),
    RemoveReaction(u64),
}

/// Why a request matched no endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NoRoute {
    NotFound,
    MethodNotAllowed(Vec<&'static str>),
}

/// Finds the endpoint for a method and path.
pub(crate) fn resolve(method: &str, path: &str) -> Result<Endpoint, NoRoute> {
    let rest = path.strip_prefix("/api/v1/").ok_or(NoRoute::NotFound)?;
    let segments: Vec<&str> = rest.split('/').collect();
    let id = |s: &str| s.parse::<u64>().ok();
    let (allowed, endpoint): (&[&'static str], Option<Endpoint>) = match segments.as_slice() {
        ["users", "me"] => (&["GET"], (method == "GET").then_some(Endpoint::UsersMe)),
        ["users", "me", "subscriptions"] => (
            &["GET"],
            (method == "GET").then_some(Endpoint::Subscriptions),
        ),
        ["users", user] if !user.is_empty() => (
            &["GET"],
            (method == "GET").then(|| Endpoint::User(percent_decode(user))),
        ),
        ["server_settings"] => (
            &["GET"],
            (method == "GET").then_some(Endpoint::ServerSettings),
        ),
        ["register"] => (&["POST"], (method == "POST").then_some(Endpoint::Register)),
        ["events"] => (
            &["GET", "DELETE"],
            match method {
                "GET" => Some(Endpoint::GetEvents),
                "DELETE" => Some(Endpoint::DeleteEvents),
                _ => None,
            },
        ),
        ["messages"] => (
            &["GET", "POST"],
            match method {
                "GET" => Some(Endpoint::GetMessages),
                "POST" => Some(Endpoint::SendMessage),
                _ => None,
            },
        ),
        ["messages", m] if id(m).is_some() => (
            &["PATCH"],
            id(m)
                .filter(|_| method == "PATCH")
                .map(Endpoint::EditMessage),
        ),
        ["messages", m, "reactions"] if id(m).is_some() => (
            &["POST", "DELETE"],
            match method {
                "POST" => id(m).map(Endpoint::AddReaction),
                "DELETE" => id(m).map(Endpoint::RemoveReaction),
                _ => None,
            },
        ),
        _ => return Err(NoRoute::NotFound),
    };
    endpoint.ok_or_else(|| NoRoute::MethodNotAllowed(allowed.to_vec()))
}

/// Decodes `%XX` escapes in a path segment (e.g. `alex%40example.com`).
fn percent_decode(segment: &str) -> String {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
            .and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Endpoint {
    /// The fault-injection route of this endpoint, if it has one.
    pub fn route(&self) -> Option<Route> {
        match self {
            Endpoint::GetEvents => Some(Route::Events),
            Endpoint::Register => Some(Route::Register),
            Endpoint::SendMessage => Some(Route::SendMessage),
            Endpoint::GetMessages => Some(Route::GetMessages),
            Endpoint::AddReaction(_) | Endpoint::RemoveReaction(_) => Some(Route::Reactions),
            Endpoint::UsersMe => Some(Route::UsersMe),
            Endpoint::DeleteEvents => Some(Route::DeleteQueue),
            Endpoint::User(_) => Some(Route::GetUser),
            _ => None,
        }
    }

    /// Whether the endpoint needs Basic auth.
    pub fn authenticated(&self) -> bool {
        *self != Endpoint::ServerSettings
    }

    /// The parameters the endpoint accepts; anything else is reported in
    /// `ignored_parameters_unsupported` (and is a violation).
    pub fn known_params(&self) -> &'static [&'static str] {
        match self {
            Endpoint::UsersMe | Endpoint::ServerSettings => &[],
            Endpoint::User(_) => &["client_gravatar", "include_custom_profile_fields"],
            Endpoint::Subscriptions => &["include_subscribers"],
            Endpoint::Register => &[
                "apply_markdown",
                "client_gravatar",
                "include_subscribers",
                "slim_presence",
                "presence_history_limit_days",
                "event_types",
                "all_public_streams",
                "client_capabilities",
                "fetch_event_types",
                "narrow",
                "queue_lifespan_secs",
            ],
            Endpoint::GetEvents => &["queue_id", "last_event_id", "dont_block"],
            Endpoint::DeleteEvents => &["queue_id"],
            Endpoint::SendMessage => &[
                "type",
                "to",
                "content",
                "topic",
                "subject",
                "queue_id",
                "local_id",
                "read_by_sender",
            ],
            Endpoint::GetMessages => &[
                "anchor",
                "include_anchor",
                "num_before",
                "num_after",
                "narrow",
                "client_gravatar",
                "apply_markdown",
                "use_first_unread_anchor",
                "message_ids",
                "allow_empty_topic_name",
            ],
            Endpoint::EditMessage(_) => &[
                "topic",
                "subject",
                "propagate_mode",
                "send_notification_to_old_thread",
                "send_notification_to_new_thread",
                "content",
                "stream_id",
            ],
            Endpoint::AddReaction(_) | Endpoint::RemoveReaction(_) => {
                &["emoji_name", "emoji_code", "reaction_type"]
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_resolve() {
        let table = [
            ("GET", "/api/v1/users/me", Ok(Endpoint::UsersMe)),
            ("GET", "/api/v1/users/12", Ok(Endpoint::User("12".into()))),
            (
                "GET",
                "/api/v1/users/a%40b.c",
                Ok(Endpoint::User("a@b.c".into())),
            ),
            (
                "GET",
                "/api/v1/users/me/subscriptions",
                Ok(Endpoint::Subscriptions),
            ),
            ("POST", "/api/v1/register", Ok(Endpoint::Register)),
            ("DELETE", "/api/v1/events", Ok(Endpoint::DeleteEvents)),
            ("PATCH", "/api/v1/messages/7", Ok(Endpoint::EditMessage(7))),
            (
                "DELETE",
                "/api/v1/messages/7/reactions",
                Ok(Endpoint::RemoveReaction(7)),
            ),
            (
                "GET",
                "/api/v1/messages/x/reactions",
                Err(NoRoute::NotFound),
            ),
            ("GET", "/api/v1/nope", Err(NoRoute::NotFound)),
            ("GET", "/elsewhere", Err(NoRoute::NotFound)),
            (
                "PUT",
                "/api/v1/messages",
                Err(NoRoute::MethodNotAllowed(vec!["GET", "POST"])),
            ),
            (
                "POST",
                "/api/v1/users/me",
                Err(NoRoute::MethodNotAllowed(vec!["GET"])),
            ),
        ];
        for (method, path, expected) in table {
            assert_eq!(resolve(method, path), expected, "{method} {path}");
        }
    }
}
