//! A chat message as Eagle sees it, whatever carried it: who sent it,
//! where, and what it says.
//!
//! The transports (Zulip in [`crate::transport::zulip`], the local [`crate::transport::shell`])
//! build an [`InboundMessage`]; [`crate::chat`] handles it and
//! [`crate::chat::commands`] carries out what it asks. It lives below both, so
//! that the command layer needs nothing from the chat layer that calls it.

use std::fmt;

use chrono::{DateTime, Utc};

use crate::store::Destination;

/// Who sent a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sender {
    pub user_id: i64,
    pub email: String,
    pub full_name: String,
    pub is_bot: bool,
}

/// Where a message was posted, which is where its reply goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    Channel {
        channel: String,
        topic: String,
    },
    /// A direct message; `user_ids` are the other participants.
    Direct {
        user_ids: Vec<i64>,
    },
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Channel { channel, topic } => write!(f, "#{channel} > {topic}"),
            Place::Direct { .. } => f.write_str("a direct message"),
        }
    }
}

/// A message as the command layer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboundMessage {
    /// The identity that received it: the profile name, or `shell`.
    pub identity: String,
    /// `zulip` or `shell`: the prefix of task ids captured from it.
    pub transport: &'static str,
    pub message_id: i64,
    pub sender: Sender,
    pub place: Place,
    pub content: String,
    /// Whether the message mentions the bot.
    pub mentioned: bool,
    /// Posted where not everyone can read it (a direct message, a private
    /// channel): what it captures is shown only where it is visible.
    pub private: bool,
    pub timestamp: DateTime<Utc>,
    /// Found by back-fill and older than the profile's `late_command_age`:
    /// reported, not executed.
    pub late: bool,
}

impl InboundMessage {
    /// How the audit log names the sender.
    pub fn sender_actor(&self) -> String {
        format!("human:{} <{}>", self.sender.user_id, self.sender.email)
    }

    /// Where the reply goes: the same topic, or the same conversation.
    pub fn reply_destination(&self) -> Destination {
        match &self.place {
            Place::Channel { channel, topic } => Destination::Channel {
                channel: channel.clone(),
                topic: topic.clone(),
            },
            Place::Direct { user_ids } => {
                let mut ids = user_ids.clone();
                if !ids.contains(&self.sender.user_id) {
                    ids.push(self.sender.user_id);
                }
                Destination::Direct { user_ids: ids }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(place: Place) -> InboundMessage {
        InboundMessage {
            identity: "eagle".into(),
            transport: "zulip",
            message_id: 1,
            sender: Sender {
                user_id: 5,
                email: "ann@example.com".into(),
                full_name: "Ann".into(),
                is_bot: false,
            },
            place,
            content: String::new(),
            mentioned: false,
            private: false,
            timestamp: Utc::now(),
            late: false,
        }
    }

    #[test]
    fn a_direct_reply_includes_the_sender_once() {
        let to = message(Place::Direct { user_ids: vec![9] }).reply_destination();
        assert_eq!(
            to,
            Destination::Direct {
                user_ids: vec![9, 5]
            }
        );
        let to = message(Place::Direct {
            user_ids: vec![5, 9],
        })
        .reply_destination();
        assert_eq!(
            to,
            Destination::Direct {
                user_ids: vec![5, 9]
            }
        );
        let place = Place::Channel {
            channel: "general".into(),
            topic: "t".into(),
        };
        assert_eq!(place.to_string(), "#general > t");
        assert_eq!(message(place).sender_actor(), "human:5 <ann@example.com>");
    }
}
