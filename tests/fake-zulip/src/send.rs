//! Sending messages: `POST /messages` (with every form of `to`, the legacy
//! `subject`, content normalisation and truncation) and the shared core that
//! the test-control API uses too.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use crate::deliver::deliver_message;
use crate::error::ApiError;
use crate::mentions::{mention_flags, scan};
use crate::params::Params;
use crate::state::{Destination, Message, State, unix_now};

/// Zulip's `MAX_TOPIC_NAME_LENGTH`.
pub(crate) const MAX_TOPIC_LENGTH: usize = 60;

/// A message about to be sent.
pub(crate) struct Outgoing {
    pub sender: u64,
    pub destination: Destination,
    pub content: String,
    pub client: String,
    pub read_by_sender: bool,
}

/// Cuts `text` to `max` code points, ending with `marker` (`truncate_content`).
pub(crate) fn truncate(text: &str, max: usize, marker: &str) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let keep = max.saturating_sub(marker.chars().count());
    let mut out: String = text.chars().take(keep).collect();
    out.push_str(marker);
    out
}

/// `normalize_body`: strips, rejects empty content and NUL bytes, truncates.
pub(crate) fn normalize_body(body: &str, max: usize) -> Result<String, ApiError> {
    let body = body.trim_end().trim_start_matches('\n');
    if body.is_empty() {
        return Err(ApiError::bad_request("Message must not be empty".into()));
    }
    if body.contains('\0') {
        return Err(ApiError::bad_request(
            "Message must not contain null bytes".into(),
        ));
    }
    Ok(truncate(body, max, "\n[message truncated]"))
}

/// Checks and truncates a topic.
pub(crate) fn normalize_topic(topic: &str) -> Result<String, ApiError> {
    let topic = topic.trim();
    if topic.is_empty() {
        return Err(ApiError::bad_request("Topic can't be empty!".into()));
    }
    if topic.chars().any(|c| c == '\0' || c.is_control()) {
        return Err(ApiError::bad_request(
            "Invalid character in topic, at position 1!".into(),
        ));
    }
    Ok(truncate(topic, MAX_TOPIC_LENGTH, "..."))
}

/// Stores a message, computes every recipient's flags and queues the events.
pub(crate) fn send(state: &mut State, max_len: usize, out: Outgoing) -> Result<u64, ApiError> {
    let content = normalize_body(&out.content, max_len)?;
    let (destination, recipients, recipient_id) = match out.destination {
        Destination::Channel { channel_id, topic } => {
            let topic = normalize_topic(&topic)?;
            let channel = state.channels.get(&channel_id).ok_or_else(|| {
                ApiError::new(
                    400,
                    "STREAM_DOES_NOT_EXIST",
                    format!("Channel with ID '{channel_id}' does not exist"),
                )
                .with("stream_id", json!(channel_id))
            })?;
            if !channel.public && !channel.subscribers.contains(&out.sender) {
                return Err(ApiError::bad_request(format!(
                    "Not authorized to send to channel '{}'",
                    channel.name
                )));
            }
            let mut recipients: BTreeSet<u64> = channel.subscribers.clone();
            recipients.insert(out.sender);
            (
                Destination::Channel { channel_id, topic },
                recipients,
                channel.recipient_id,
            )
        }
        Destination::Direct { mut participants } => {
            participants.push(out.sender);
            participants.sort_unstable();
            participants.dedup();
            let recipient_id = state.direct_recipient_id(out.sender, &participants);
            let recipients = participants.iter().copied().collect();
            (
                Destination::Direct { participants },
                recipients,
                recipient_id,
            )
        }
    };
    let mentions = scan(state, &content);
    let mut flags = BTreeMap::new();
    for user in recipients {
        let mut set: BTreeSet<String> =
            mention_flags(state, &mentions, &destination, out.sender, user)
                .into_iter()
                .map(str::to_owned)
                .collect();
        if user == out.sender && out.read_by_sender {
            set.insert("read".into());
        }
        flags.insert(user, set);
    }
    let id = state.new_message_id();
    state.messages.insert(
        id,
        Message {
            id,
            sender_id: out.sender,
            destination,
            recipient_id,
            content,
            timestamp: unix_now(),
            client: out.client,
            reactions: Vec::new(),
            last_edit_timestamp: None,
            flags,
        },
    );
    deliver_message(state, id);
    Ok(id)
}

/// `POST /messages`.
pub(crate) fn post_messages(
    state: &mut State,
    max_len: usize,
    sender: u64,
    client: &str,
    p: &Params<'_>,
) -> Result<Map<String, Value>, ApiError> {
    let kind = p.required("type")?;
    let to = p.required("to")?;
    let content = p.required("content")?;
    let read_by_sender = p.bool("read_by_sender")?.unwrap_or(true);
    let destination = match kind {
        "stream" | "channel" => {
            let topic = p.get("topic").or_else(|| p.get("subject")).ok_or_else(|| {
                ApiError::malformed(
                    "Missing topic".into(),
                    "a channel message without topic".into(),
                )
            })?;
            let channel_id = channel_from_to(state, to)?;
            Destination::Channel {
                channel_id,
                topic: topic.to_owned(),
            }
        }
        "private" | "direct" => Destination::Direct {
            participants: users_from_to(state, to)?,
        },
        other => {
            return Err(ApiError::malformed(
                "Invalid type".into(),
                format!("type {other:?} is not one of direct, channel, stream, private"),
            ));
        }
    };
    let id = send(
        state,
        max_len,
        Outgoing {
            sender,
            destination,
            content: content.to_owned(),
            client: client.to_owned(),
            read_by_sender,
        },
    )?;
    let mut data = Map::new();
    data.insert("id".into(), json!(id));
    Ok(data)
}

/// `extract_stream_indicator`: a raw name, a JSON string, a one-element
/// list, or an integer id.
fn channel_from_to(state: &State, to: &str) -> Result<u64, ApiError> {
    let by_name = |name: &str| {
        state.channel_by_name(name).map(|c| c.id).ok_or_else(|| {
            ApiError::new(
                400,
                "STREAM_DOES_NOT_EXIST",
                format!("Channel '{name}' does not exist"),
            )
            .with("stream", json!(name))
        })
    };
    let mut data = match serde_json::from_str::<Value>(to) {
        Ok(value) => value,
        Err(_) => return by_name(to),
    };
    if let Value::Array(items) = &data {
        if items.len() != 1 {
            return Err(ApiError::bad_request("Expected exactly one channel".into()));
        }
        data = items[0].clone();
    }
    match data {
        Value::String(name) => by_name(&name),
        Value::Number(n) => {
            let id = n
                .as_u64()
                .ok_or_else(|| ApiError::bad_request("Invalid data type for channel".into()))?;
            if state.channels.contains_key(&id) {
                Ok(id)
            } else {
                Err(ApiError::new(
                    400,
                    "STREAM_DOES_NOT_EXIST",
                    format!("Channel with ID '{id}' does not exist"),
                )
                .with("stream_id", json!(id)))
            }
        }
        _ => Err(ApiError::malformed(
            "Invalid data type for channel".into(),
            format!("to {to:?} is not a channel name or id"),
        )),
    }
}

/// `extract_private_recipients`: a JSON list of ids or emails, or a
/// comma-separated string of emails.
fn users_from_to(state: &State, to: &str) -> Result<Vec<u64>, ApiError> {
    let data = serde_json::from_str::<Value>(to).unwrap_or_else(|_| Value::String(to.to_owned()));
    let items: Vec<Value> = match data {
        Value::String(s) => s.split(',').map(|e| json!(e)).collect(),
        Value::Array(items) => items,
        _ => {
            return Err(ApiError::malformed(
                "Invalid data type for recipients".into(),
                format!("to {to:?} is not a list of recipients"),
            ));
        }
    };
    let mut ids = Vec::new();
    match items.first() {
        None => {}
        Some(Value::String(_)) => {
            for item in &items {
                let Value::String(email) = item else {
                    return Err(ApiError::malformed(
                        "Recipient lists may contain emails or user IDs, but not both.".into(),
                        format!("to {to:?} mixes emails and ids"),
                    ));
                };
                let email = email.trim();
                if email.is_empty() {
                    continue;
                }
                let user = state
                    .user_by_email(email)
                    .ok_or_else(|| ApiError::bad_request(format!("Invalid email '{email}'")))?;
                ids.push(user.id);
            }
        }
        Some(Value::Number(_)) => {
            for item in &items {
                let Some(id) = item.as_u64() else {
                    return Err(ApiError::malformed(
                        "Recipient lists may contain emails or user IDs, but not both.".into(),
                        format!("to {to:?} mixes emails and ids"),
                    ));
                };
                if !state.users.contains_key(&id) {
                    return Err(ApiError::bad_request(format!("Invalid user ID {id}")));
                }
                ids.push(id);
            }
        }
        Some(_) => {
            return Err(ApiError::malformed(
                "Invalid data type for recipients".into(),
                format!("to {to:?} is not a list of recipients"),
            ));
        }
    }
    if ids.is_empty() {
        return Err(ApiError::bad_request("Message must have recipients".into()));
    }
    if let Some(user) = ids
        .iter()
        .filter_map(|id| state.users.get(id))
        .find(|u| !u.active)
    {
        return Err(ApiError::bad_request(format!(
            "'{}' is no longer using Zulip.",
            user.email
        )));
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_is_normalised_and_truncated() {
        assert_eq!(normalize_body("\n\nhi  \n", 100).unwrap(), "hi");
        assert_eq!(normalize_body("  hi", 100).unwrap(), "  hi");
        assert!(normalize_body(" \n ", 100).is_err());
        assert!(normalize_body("a\0b", 100).is_err());
        let long = "é".repeat(30);
        let cut = normalize_body(&long, 25).unwrap();
        assert_eq!(cut.chars().count(), 25);
        assert!(cut.ends_with("\n[message truncated]"));
        assert_eq!(
            normalize_topic(&"t".repeat(70)).unwrap().chars().count(),
            60
        );
    }
}
