//! `PATCH /messages/{message_id}`: content and topic edits by the sender,
//! with the mention flags recomputed and `update_message` events.

use serde_json::{Map, Value, json};

use crate::deliver::deliver_to_recipients;
use crate::error::ApiError;
use crate::mentions::{mention_flags, scan};
use crate::params::Params;
use crate::render::render;
use crate::send::{normalize_body, normalize_topic};
use crate::state::{Destination, State, unix_now};

const MENTION_FLAGS: [&str; 4] = [
    "mentioned",
    "stream_wildcard_mentioned",
    "topic_wildcard_mentioned",
    "wildcard_mentioned",
];

/// An edit to apply.
pub(crate) struct Edit {
    pub editor: u64,
    pub message_id: u64,
    pub content: Option<String>,
    pub topic: Option<String>,
    pub propagate_mode: String,
}

/// `PATCH /messages/{message_id}`.
pub(crate) fn patch_message(
    state: &mut State,
    max_len: usize,
    user: u64,
    id: u64,
    p: &Params<'_>,
) -> Result<Map<String, Value>, ApiError> {
    let propagate_mode = p.get("propagate_mode").unwrap_or("change_one");
    if !matches!(propagate_mode, "change_one" | "change_later" | "change_all") {
        return Err(ApiError::malformed(
            "Invalid propagate_mode".into(),
            format!(
                "propagate_mode {propagate_mode:?} is not one of change_one, change_later, change_all"
            ),
        ));
    }
    p.bool("send_notification_to_old_thread")?;
    p.bool("send_notification_to_new_thread")?;
    let stream_id = p.int("stream_id")?;
    let content = p.get("content").map(str::to_owned);
    let topic = p
        .get("topic")
        .or_else(|| p.get("subject"))
        .map(str::to_owned);
    if stream_id.is_some() {
        return Err(ApiError::malformed(
            "Moving messages between channels is not supported by the fake".into(),
            "PATCH with stream_id: Eagle is not expected to move messages".into(),
        ));
    }
    apply_edit(
        state,
        max_len,
        Edit {
            editor: user,
            message_id: id,
            content,
            topic,
            propagate_mode: propagate_mode.to_owned(),
        },
    )?;
    Ok(Map::new())
}

/// Applies an edit and queues the `update_message` events.
pub(crate) fn apply_edit(state: &mut State, max_len: usize, edit: Edit) -> Result<(), ApiError> {
    let msg = state
        .messages
        .get(&edit.message_id)
        .filter(|m| state.can_access_message(edit.editor, m))
        .ok_or_else(ApiError::invalid_message)?;
    if edit.content.is_none() && edit.topic.is_none() {
        return Err(ApiError::bad_request("Nothing to change".into()));
    }
    if msg.sender_id != edit.editor {
        return Err(ApiError::bad_request(
            "You don't have permission to edit this message".into(),
        ));
    }
    if edit.topic.is_none() && edit.propagate_mode != "change_one" {
        return Err(ApiError::bad_request(
            "Invalid propagate_mode without topic edit".into(),
        ));
    }
    let new_content = match &edit.content {
        Some(c) if c.trim().is_empty() => Some("(deleted)".to_owned()),
        Some(c) => Some(normalize_body(c, max_len)?),
        None => None,
    };
    let new_topic = match (&edit.topic, &msg.destination) {
        (Some(t), Destination::Channel { .. }) => Some(normalize_topic(t)?),
        (Some(_), Destination::Direct { .. }) => {
            return Err(ApiError::bad_request(
                "Direct messages cannot have topics.".into(),
            ));
        }
        (None, _) => None,
    };
    let orig_content = msg.content.clone();
    let orig_topic = msg.topic().to_owned();
    let channel_id = msg.channel_id();
    let now = unix_now();

    let mut affected = vec![edit.message_id];
    if let (Some(topic), Some(channel)) = (&new_topic, channel_id) {
        let old = orig_topic.to_lowercase();
        affected = state
            .messages
            .values()
            .filter(|m| m.channel_id() == Some(channel) && m.topic().to_lowercase() == old)
            .filter(|m| match edit.propagate_mode.as_str() {
                "change_all" => true,
                "change_later" => m.id >= edit.message_id,
                _ => m.id == edit.message_id,
            })
            .map(|m| m.id)
            .collect();
        for id in &affected {
            if let Some(m) = state.messages.get_mut(id)
                && let Destination::Channel { topic: t, .. } = &mut m.destination
            {
                t.clone_from(topic);
            }
        }
    }
    if let Some(content) = &new_content {
        recompute_mentions(state, edit.message_id, content);
    }
    if let Some(m) = state.messages.get_mut(&edit.message_id) {
        m.last_edit_timestamp = Some(now);
    }

    let channel_name = channel_id
        .and_then(|c| state.channels.get(&c))
        .map(|c| c.name.clone());
    deliver_to_recipients(
        state,
        edit.message_id,
        "update_message",
        |state, viewer, _| {
            let mut e = Map::new();
            e.insert("type".into(), json!("update_message"));
            e.insert("user_id".into(), json!(edit.editor));
            e.insert("edit_timestamp".into(), json!(now));
            e.insert("message_id".into(), json!(edit.message_id));
            e.insert("message_ids".into(), json!(affected));
            let flags: Vec<String> = state
                .messages
                .get(&edit.message_id)
                .and_then(|m| m.flags.get(&viewer))
                .map(|f| f.iter().cloned().collect())
                .unwrap_or_default();
            e.insert("flags".into(), json!(flags));
            e.insert("rendering_only".into(), json!(false));
            if let (Some(c), Some(name)) = (channel_id, &channel_name) {
                e.insert("stream_id".into(), json!(c));
                e.insert("stream_name".into(), json!(name));
            }
            if let Some(content) = &new_content {
                e.insert("orig_content".into(), json!(orig_content));
                e.insert(
                    "orig_rendered_content".into(),
                    json!(render(state, &orig_content)),
                );
                e.insert("content".into(), json!(content));
                e.insert("rendered_content".into(), json!(render(state, content)));
                e.insert(
                    "is_me_message".into(),
                    json!(content.starts_with("/me ") && !content.contains('\n')),
                );
            }
            if let Some(topic) = &new_topic {
                e.insert("orig_subject".into(), json!(orig_topic));
                e.insert("subject".into(), json!(topic));
                e.insert("propagate_mode".into(), json!(edit.propagate_mode));
                e.insert("topic_links".into(), json!([]));
            }
            e
        },
    );
    Ok(())
}

/// Replaces the content and the mention flags of every recipient.
fn recompute_mentions(state: &mut State, id: u64, content: &str) {
    let mentions = scan(state, content);
    let Some(msg) = state.messages.get(&id) else {
        return;
    };
    let recipients: Vec<u64> = msg.flags.keys().copied().collect();
    let new_flags: Vec<(u64, Vec<&'static str>)> = recipients
        .into_iter()
        .map(|user| {
            (
                user,
                mention_flags(state, &mentions, &msg.destination, msg.sender_id, user),
            )
        })
        .collect();
    if let Some(msg) = state.messages.get_mut(&id) {
        msg.content = content.to_owned();
        for (user, flags) in new_flags {
            if let Some(set) = msg.flags.get_mut(&user) {
                set.retain(|f| !MENTION_FLAGS.contains(&f.as_str()));
                set.extend(flags.into_iter().map(str::to_owned));
            }
        }
    }
}
