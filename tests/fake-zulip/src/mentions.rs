//! Mentions and the per-recipient flags they set (`zerver/lib/mention.py`):
//! `@**Name**`, `@**Name|id**` and `@**|id**` set `mentioned`; the silent
//! `@_**…**` sets nothing; `@**all**` and friends set
//! `stream_wildcard_mentioned`, `@**topic**` sets `topic_wildcard_mentioned`,
//! both with the legacy `wildcard_mentioned`.

use std::collections::BTreeSet;

use crate::render::{Block, Inline, blocks, inlines};
use crate::state::{Destination, State};

/// Whom a mention names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MentionTarget {
    User(u64),
    StreamWildcard,
    TopicWildcard,
}

/// Resolves the text between the asterisks of a mention.
pub(crate) fn resolve_mention(state: &State, name: &str) -> Option<MentionTarget> {
    match name {
        "all" | "everyone" | "channel" | "stream" => return Some(MentionTarget::StreamWildcard),
        "topic" => return Some(MentionTarget::TopicWildcard),
        _ => {}
    }
    if let Some((full_name, id)) = name.rsplit_once('|')
        && !id.is_empty()
        && id.bytes().all(|b| b.is_ascii_digit())
    {
        let user = state.users.get(&id.parse().ok()?)?;
        // With a name, it must be that user's name.
        if !full_name.is_empty() && !user.full_name.eq_ignore_ascii_case(full_name) {
            return None;
        }
        return Some(MentionTarget::User(user.id));
    }
    let wanted = name.to_lowercase();
    state
        .users
        .values()
        .find(|u| u.full_name.to_lowercase() == wanted)
        .map(|u| MentionTarget::User(u.id))
}

/// The mentions of a message that notify someone.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Mentions {
    pub users: BTreeSet<u64>,
    pub stream_wildcard: bool,
    pub topic_wildcard: bool,
}

/// Finds the notifying mentions in content, skipping code.
pub(crate) fn scan(state: &State, content: &str) -> Mentions {
    let mut found = Mentions::default();
    for block in blocks(content) {
        let Block::Paragraph(text) = block else {
            continue;
        };
        for inline in inlines(&text) {
            let Inline::Mention {
                silent: false,
                name,
                ..
            } = inline
            else {
                continue;
            };
            match resolve_mention(state, name) {
                // Mentions of deactivated users render silent.
                Some(MentionTarget::User(id)) if state.users.get(&id).is_some_and(|u| u.active) => {
                    found.users.insert(id);
                }
                Some(MentionTarget::StreamWildcard) => found.stream_wildcard = true,
                Some(MentionTarget::TopicWildcard) => found.topic_wildcard = true,
                Some(MentionTarget::User(_)) | None => {}
            }
        }
    }
    found
}

/// The mention flags of one recipient.
pub(crate) fn mention_flags(
    state: &State,
    mentions: &Mentions,
    destination: &Destination,
    sender: u64,
    recipient: u64,
) -> Vec<&'static str> {
    let mut flags = Vec::new();
    if mentions.users.contains(&recipient) {
        flags.push("mentioned");
    }
    let topic_wildcard = mentions.topic_wildcard
        && match destination {
            Destination::Channel { channel_id, topic } => {
                recipient == sender || participated(state, *channel_id, topic, recipient)
            }
            Destination::Direct { .. } => false,
        };
    if mentions.stream_wildcard {
        flags.push("stream_wildcard_mentioned");
    }
    if topic_wildcard {
        flags.push("topic_wildcard_mentioned");
    }
    if mentions.stream_wildcard || topic_wildcard {
        flags.push("wildcard_mentioned");
    }
    flags
}

/// Whether the user has posted in the topic (`@**topic**` notifies those).
fn participated(state: &State, channel_id: u64, topic: &str, user: u64) -> bool {
    let topic = topic.to_lowercase();
    state.messages.values().any(|m| {
        m.sender_id == user
            && m.channel_id() == Some(channel_id)
            && m.topic().to_lowercase() == topic
    })
}
