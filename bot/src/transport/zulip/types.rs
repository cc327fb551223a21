//! The JSON Eagle reads from Zulip (a subset of `zulip.yaml`; unknown
//! fields are ignored, unknown event types are kept as [`Event::Other`]).

use serde::Deserialize;

/// `GET /users/me`, and the user inside `GET /users/{id}`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct User {
    pub user_id: i64,
    pub email: String,
    pub full_name: String,
    #[serde(default)]
    pub is_bot: bool,
}

/// `GET /users/{id}`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct UserEnvelope {
    pub user: User,
}

/// `POST /register`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Registration {
    pub queue_id: String,
    pub last_event_id: i64,
    #[serde(default)]
    pub zulip_feature_level: Option<i64>,
    /// With `realm` in `fetch_event_types`.
    #[serde(default)]
    pub max_message_length: Option<usize>,
    #[serde(default)]
    pub event_queue_longpoll_timeout_seconds: Option<u64>,
}

/// `GET /events`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct EventsEnvelope {
    pub events: Vec<Event>,
}

/// One event from a queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Message {
        id: i64,
        message: Box<Message>,
        flags: Vec<String>,
    },
    Heartbeat {
        id: i64,
    },
    /// Any other type, or a message event Eagle could not read (logged):
    /// its id still counts for `last_event_id`.
    Other {
        id: i64,
    },
}

#[derive(Deserialize)]
struct MessageEvent {
    message: Box<Message>,
    #[serde(default)]
    flags: Vec<String>,
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        let id = value
            .get("id")
            .and_then(serde_json::Value::as_i64)
            .ok_or_else(|| serde::de::Error::custom("an event without an integer id"))?;
        Ok(
            match value.get("type").and_then(serde_json::Value::as_str) {
                Some("heartbeat") => Event::Heartbeat { id },
                Some("message") => match serde_json::from_value::<MessageEvent>(value) {
                    Ok(event) => Event::Message {
                        id,
                        message: event.message,
                        flags: event.flags,
                    },
                    Err(error) => {
                        tracing::warn!(event_id = id, %error, "a message event Eagle cannot read; skipped");
                        Event::Other { id }
                    }
                },
                _ => Event::Other { id },
            },
        )
    }
}

impl Event {
    pub fn id(&self) -> i64 {
        match self {
            Event::Message { id, .. } | Event::Heartbeat { id } | Event::Other { id } => *id,
        }
    }
}

/// A recipient of a direct message (`display_recipient` of a DM).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct DmRecipient {
    pub id: i64,
    pub email: String,
    #[serde(default)]
    pub full_name: String,
}

/// `display_recipient`: a channel name, or the participants of a DM.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum Recipient {
    Channel(String),
    Direct(Vec<DmRecipient>),
}

/// A message, from an event or from `GET /messages`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Message {
    pub id: i64,
    pub sender_id: i64,
    pub sender_email: String,
    pub sender_full_name: String,
    /// `stream` or `private`.
    #[serde(rename = "type")]
    pub kind: String,
    pub display_recipient: Recipient,
    /// The topic (its legacy name).
    #[serde(default)]
    pub subject: String,
    pub content: String,
    pub timestamp: i64,
    /// On messages from `GET /messages` (on events, flags sit beside the message).
    #[serde(default)]
    pub flags: Vec<String>,
}

/// `GET /messages`.
#[derive(Debug, Clone, Deserialize)]
pub struct MessagesPage {
    /// The messages Eagle could read; one it cannot is logged and skipped,
    /// rather than failing the whole page (and the back-fill with it).
    #[serde(deserialize_with = "readable_messages")]
    pub messages: Vec<Message>,
    #[serde(default)]
    pub found_newest: bool,
    #[serde(default)]
    pub found_oldest: bool,
}

fn readable_messages<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<Message>, D::Error> {
    let values = Vec::<serde_json::Value>::deserialize(deserializer)?;
    Ok(values
        .into_iter()
        .filter_map(|value| {
            let id = value.get("id").and_then(serde_json::Value::as_i64);
            serde_json::from_value(value)
                .map_err(|error| tracing::warn!(message_id = id, %error, "a message Eagle cannot read; skipped"))
                .ok()
        })
        .collect())
}

/// `POST /messages`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Sent {
    pub id: i64,
}

/// One of `GET /users/me/subscriptions`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Subscription {
    pub name: String,
    pub stream_id: i64,
    /// A private channel: only its subscribers see its messages.
    #[serde(default)]
    pub invite_only: bool,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct SubscriptionsEnvelope {
    pub subscriptions: Vec<Subscription>,
}

/// Where `GET /messages` starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    Newest,
    Oldest,
    Id(i64),
}

impl Anchor {
    pub fn as_param(self) -> String {
        match self {
            Anchor::Newest => "newest".into(),
            Anchor::Oldest => "oldest".into(),
            Anchor::Id(id) => id.to_string(),
        }
    }
}

/// A narrow term, sent in the object form `{"operator", "operand"}`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NarrowTerm {
    pub operator: &'static str,
    pub operand: serde_json::Value,
}

impl NarrowTerm {
    pub fn channel(name: &str) -> NarrowTerm {
        NarrowTerm {
            operator: "channel",
            operand: name.into(),
        }
    }
    pub fn topic(name: &str) -> NarrowTerm {
        NarrowTerm {
            operator: "topic",
            operand: name.into(),
        }
    }
    pub fn sender(user_id: i64) -> NarrowTerm {
        NarrowTerm {
            operator: "sender",
            operand: user_id.into(),
        }
    }
    pub fn dm(user_ids: &[i64]) -> NarrowTerm {
        NarrowTerm {
            operator: "dm",
            operand: user_ids.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_parse_with_unknown_types() {
        let json = r#"[
            {"type":"heartbeat","id":7},
            {"type":"message","id":9,"flags":["mentioned"],"message":{"id":112,"sender_id":5,
             "sender_full_name":"Iago","sender_email":"iago@zulip.com","sender_realm_str":"zulip",
             "type":"stream","stream_id":5,"display_recipient":"executor","subject":"run-42",
             "content":"@**Eagle** !status","content_type":"text/x-markdown","timestamp":1527876931,
             "recipient_id":20,"client":"website","is_me_message":false,"reactions":[],
             "submessages":[],"topic_links":[],"avatar_url":null}},
            {"type":"realm_user","id":12,"op":"update"},
            {"type":"message","id":13,"message":{"id":113,"sender_id":5,"sender_full_name":"Iago",
             "sender_email":"iago@zulip.com","type":"private","display_recipient":[
             {"id":5,"email":"iago@zulip.com","full_name":"Iago","is_mirror_dummy":false},
             {"id":7,"email":"eagle@zulip.com","full_name":"Eagle","is_mirror_dummy":false}],
             "subject":"","content":"!help","timestamp":1527876932}}
        ]"#;
        let events: Vec<Event> = serde_json::from_str(json).unwrap();
        assert_eq!(
            events.iter().map(Event::id).collect::<Vec<_>>(),
            vec![7, 9, 12, 13]
        );
        let Event::Message { message, flags, .. } = &events[1] else {
            panic!("not a message")
        };
        assert_eq!(flags, &vec!["mentioned".to_string()]);
        assert_eq!(
            message.display_recipient,
            Recipient::Channel("executor".into())
        );
        assert_eq!(events[2], Event::Other { id: 12 });
        // A message event that cannot be read still yields its id.
        let broken: Vec<Event> =
            serde_json::from_str(r#"[{"type":"message","id":20,"message":{"id":"x"}}]"#).unwrap();
        assert_eq!(broken, vec![Event::Other { id: 20 }]);
        let page: MessagesPage = serde_json::from_str(
            r#"{"messages":[{"id":1},{"id":2,"sender_id":5,"sender_full_name":"Iago","sender_email":"i@z.com",
                "type":"stream","display_recipient":"x","subject":"t","content":"c","timestamp":1}],
                "found_newest":true}"#,
        )
        .unwrap();
        assert_eq!(page.messages.len(), 1);
        assert_eq!(page.messages[0].id, 2);
        let Event::Message { message, .. } = &events[3] else {
            panic!("not a message")
        };
        assert!(matches!(&message.display_recipient, Recipient::Direct(r) if r.len() == 2));
    }
}
