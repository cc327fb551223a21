//! Message objects as Zulip serialises them (`MessagesBase` in the spec),
//! for events and for `GET /messages`, and the public [`StoredMessage`].

use serde_json::{Map, Value, json};

use crate::model::StoredMessage;
use crate::render::render;
use crate::state::{Destination, Message, State, User};

/// The avatar URL of a user without an uploaded avatar (a Gravatar URL).
pub(crate) fn avatar_url(user: &User) -> String {
    // A stable stand-in for the MD5 of the email that Gravatar uses.
    let mut hash: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    for b in user.email.to_lowercase().bytes() {
        hash ^= u128::from(b);
        hash = hash.wrapping_mul(0x0000_0000_0100_0000_0000_0000_0000_013b);
    }
    format!("https://secure.gravatar.com/avatar/{hash:032x}?d=identicon&version=1")
}

/// A message as the viewer gets it.
pub(crate) fn message_json(
    state: &State,
    msg: &Message,
    apply_markdown: bool,
    client_gravatar: bool,
) -> Map<String, Value> {
    let sender = state.users.get(&msg.sender_id);
    let mut m = Map::new();
    let avatar = match sender {
        Some(user) if !client_gravatar => json!(avatar_url(user)),
        _ => Value::Null,
    };
    m.insert("avatar_url".into(), avatar);
    m.insert("client".into(), json!(msg.client));
    if apply_markdown {
        m.insert("content".into(), json!(render(state, &msg.content)));
        m.insert("content_type".into(), json!("text/html"));
    } else {
        m.insert("content".into(), json!(msg.content));
        m.insert("content_type".into(), json!("text/x-markdown"));
    }
    m.insert("id".into(), json!(msg.id));
    m.insert(
        "is_me_message".into(),
        json!(msg.content.starts_with("/me ") && !msg.content.contains('\n')),
    );
    let reactions: Vec<Value> = msg
        .reactions
        .iter()
        .map(|r| {
            json!({
                "emoji_name": r.emoji_name,
                "emoji_code": r.emoji_code,
                "reaction_type": r.reaction_type,
                "user_id": r.user_id,
            })
        })
        .collect();
    m.insert("reactions".into(), json!(reactions));
    m.insert("recipient_id".into(), json!(msg.recipient_id));
    m.insert(
        "sender_email".into(),
        json!(sender.map_or("", |u| u.email.as_str())),
    );
    m.insert(
        "sender_full_name".into(),
        json!(sender.map_or("", |u| u.full_name.as_str())),
    );
    m.insert("sender_id".into(), json!(msg.sender_id));
    m.insert("sender_realm_str".into(), json!("zulip"));
    match &msg.destination {
        Destination::Channel { channel_id, topic } => {
            let name = state
                .channels
                .get(channel_id)
                .map_or("", |c| c.name.as_str());
            m.insert("display_recipient".into(), json!(name));
            m.insert("stream_id".into(), json!(channel_id));
            m.insert("subject".into(), json!(topic));
            m.insert("type".into(), json!("stream"));
        }
        Destination::Direct { participants } => {
            let people: Vec<Value> = participants
                .iter()
                .filter_map(|id| state.users.get(id))
                .map(|u| json!({"id": u.id, "email": u.email, "full_name": u.full_name, "is_mirror_dummy": false}))
                .collect();
            m.insert("display_recipient".into(), json!(people));
            m.insert("subject".into(), json!(""));
            m.insert("type".into(), json!("private"));
        }
    }
    m.insert("submessages".into(), json!([]));
    m.insert("timestamp".into(), json!(msg.timestamp));
    m.insert("topic_links".into(), json!([]));
    if let Some(ts) = msg.last_edit_timestamp {
        m.insert("last_edit_timestamp".into(), json!(ts));
    }
    m
}

/// The viewer's flags on a message: their own, or `read` + `historical` for
/// a message they did not receive (shared channel history).
pub(crate) fn viewer_flags(msg: &Message, viewer: u64) -> Vec<String> {
    match msg.flags.get(&viewer) {
        Some(flags) => flags.iter().cloned().collect(),
        None => vec!["read".into(), "historical".into()],
    }
}

/// The public view of a stored message.
pub(crate) fn stored(state: &State, msg: &Message) -> StoredMessage {
    let (channel, dm_recipients) = match &msg.destination {
        Destination::Channel { channel_id, .. } => (
            state.channels.get(channel_id).map(|c| c.name.clone()),
            Vec::new(),
        ),
        Destination::Direct { participants } => {
            let others: Vec<u64> = participants
                .iter()
                .copied()
                .filter(|id| *id != msg.sender_id)
                .collect();
            (
                None,
                if others.is_empty() {
                    vec![msg.sender_id]
                } else {
                    others
                },
            )
        }
    };
    StoredMessage {
        id: msg.id,
        sender_id: msg.sender_id,
        channel,
        topic: msg.topic().to_owned(),
        dm_recipients,
        content: msg.content.clone(),
        timestamp: msg.timestamp,
        mentioned_user_ids: msg
            .flags
            .iter()
            .filter(|(_, flags)| flags.contains("mentioned"))
            .map(|(id, _)| *id)
            .collect(),
        wildcard_mentioned: msg
            .flags
            .values()
            .any(|flags| flags.contains("wildcard_mentioned")),
    }
}
