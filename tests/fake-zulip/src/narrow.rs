//! Narrows: parsing both encodings (`[["channel","x"]]` and
//! `[{"operator":…,"operand":…,"negated":…}]`) and matching messages, for
//! event queues (`narrow_predicate.py`) and for `GET /messages`.

use serde_json::Value;

use crate::error::ApiError;
use crate::state::{Destination, Message, State};

/// One narrow term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NarrowTerm {
    pub operator: String,
    pub operand: Operand,
    pub negated: bool,
}

/// A narrow operand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Operand {
    Str(String),
    Int(i64),
    Ids(Vec<i64>),
}

impl Operand {
    fn as_text(&self) -> String {
        match self {
            Operand::Str(s) => s.clone(),
            Operand::Int(i) => i.to_string(),
            Operand::Ids(ids) => ids
                .iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(","),
        }
    }
}

fn invalid(name: &str, why: &str) -> ApiError {
    ApiError::malformed(format!("Invalid {name}"), format!("{name}: {why}"))
}

/// Parses the `narrow` of `POST /register`: a list of two-string lists.
pub(crate) fn parse_register_narrow(value: &Value) -> Result<Vec<NarrowTerm>, ApiError> {
    let Value::Array(items) = value else {
        return Err(ApiError::malformed(
            "narrow is not a list".into(),
            "narrow is not a list".into(),
        ));
    };
    let mut terms = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let pair = item.as_array().filter(|a| a.len() == 2);
        let Some([Value::String(op), Value::String(operand)]) = pair.map(Vec::as_slice) else {
            return Err(invalid(&format!("narrow[{i}]"), "not a two-string list"));
        };
        terms.push(NarrowTerm {
            operator: op.clone(),
            operand: Operand::Str(operand.clone()),
            negated: false,
        });
    }
    for term in &terms {
        let op = term.operator.as_str();
        if !matches!(op, "channel" | "stream" | "topic" | "sender" | "is") {
            return Err(ApiError::bad_request(format!(
                "Operator {op} not supported."
            )));
        }
        if op == "is" && term.operand == Operand::Str("followed".into()) {
            return Err(ApiError::bad_request(
                "Operand followed not supported.".into(),
            ));
        }
    }
    Ok(terms)
}

/// Parses the `narrow` of `GET /messages`, in either encoding.
pub(crate) fn parse_fetch_narrow(value: &Value) -> Result<Vec<NarrowTerm>, ApiError> {
    let Value::Array(items) = value else {
        return Err(ApiError::malformed(
            "narrow is not a list".into(),
            "narrow is not a list".into(),
        ));
    };
    let mut terms = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let name = format!("narrow[{i}]");
        let term = match item {
            Value::Array(pair) => match pair.as_slice() {
                [Value::String(op), Value::String(operand)] => NarrowTerm {
                    operator: op.clone(),
                    operand: Operand::Str(operand.clone()),
                    negated: false,
                },
                _ => return Err(invalid(&name, "not a two-string list")),
            },
            Value::Object(map) => {
                if let Some(key) = map
                    .keys()
                    .find(|k| !matches!(k.as_str(), "operator" | "operand" | "negated"))
                {
                    return Err(ApiError::malformed(
                        format!("Argument \"{key}\" at {name} is unexpected"),
                        format!("{name} has an unexpected key {key:?}"),
                    ));
                }
                let Some(Value::String(op)) = map.get("operator") else {
                    return Err(invalid(&name, "operator missing or not a string"));
                };
                let operand = match map.get("operand") {
                    Some(Value::String(s)) => Operand::Str(s.clone()),
                    Some(Value::Number(n)) if n.is_i64() => Operand::Int(n.as_i64().unwrap_or(0)),
                    Some(Value::Array(ids)) if ids.iter().all(Value::is_i64) => {
                        Operand::Ids(ids.iter().filter_map(Value::as_i64).collect())
                    }
                    _ => return Err(invalid(&name, "operand missing or of the wrong type")),
                };
                let negated = match map.get("negated") {
                    None => false,
                    Some(Value::Bool(b)) => *b,
                    Some(_) => return Err(invalid(&name, "negated is not a boolean")),
                };
                NarrowTerm {
                    operator: op.clone(),
                    operand,
                    negated,
                }
            }
            _ => return Err(invalid(&name, "neither a list nor an object")),
        };
        terms.push(term);
    }
    Ok(terms)
}

/// Whether a message matches an event queue's narrow, given the flags it
/// would be delivered with (Zulip's `build_narrow_predicate`).
pub(crate) fn event_matches(
    state: &State,
    terms: &[NarrowTerm],
    msg: &Message,
    flags: &[String],
) -> bool {
    terms.iter().all(|term| {
        let operand = term.operand.as_text();
        let operand_lower = operand.to_lowercase();
        match term.operator.as_str() {
            "channel" | "stream" => {
                channel_name(state, msg).is_some_and(|n| n.to_lowercase() == operand_lower)
            }
            "topic" => match &msg.destination {
                Destination::Channel { topic, .. } => {
                    let topic = topic.to_lowercase();
                    // Zulip also accepts the operand as one word of the topic.
                    topic == operand_lower || topic.split_whitespace().any(|w| w == operand_lower)
                }
                Destination::Direct { .. } => false,
            },
            "sender" => state
                .users
                .get(&msg.sender_id)
                .is_some_and(|u| u.email.to_lowercase() == operand_lower),
            "is" => match operand.as_str() {
                "dm" | "private" => matches!(msg.destination, Destination::Direct { .. }),
                "starred" => flags.iter().any(|f| f == "starred"),
                "unread" => !flags.iter().any(|f| f == "read"),
                "alerted" | "mentioned" => flags.iter().any(|f| f == "mentioned"),
                "resolved" => msg.topic().starts_with("✔ "),
                _ => true,
            },
            _ => true,
        }
    })
}

fn channel_name<'s>(state: &'s State, msg: &Message) -> Option<&'s str> {
    let id = msg.channel_id()?;
    state.channels.get(&id).map(|c| c.name.as_str())
}

/// A narrow of `GET /messages`, resolved against the realm.
pub(crate) struct FetchNarrow {
    terms: Vec<ResolvedTerm>,
    /// The channel whose shared history the viewer may search, if any.
    pub history_channel: Option<u64>,
}

enum Check {
    Channel(u64),
    Topic(String),
    Sender(u64),
    Is(String),
    Dm(Vec<u64>),
    Id(u64),
    Search(String),
    PublicChannels,
    Nothing,
}

struct ResolvedTerm {
    check: Check,
    negated: bool,
}

fn bad_narrow(what: &str) -> ApiError {
    ApiError::new(
        400,
        "BAD_NARROW",
        format!("Invalid narrow operator: {what}"),
    )
}

/// Resolves the terms (channel names, emails) for `viewer`.
pub(crate) fn resolve_fetch_narrow(
    state: &State,
    viewer: u64,
    terms: &[NarrowTerm],
) -> Result<FetchNarrow, ApiError> {
    let mut resolved = Vec::new();
    let mut history_channel = None;
    let mut personal = false;
    for term in terms {
        let text = term.operand.as_text();
        let check = match term.operator.as_str() {
            "channel" | "stream" => {
                let channel = match &term.operand {
                    Operand::Int(id) => u64::try_from(*id)
                        .ok()
                        .and_then(|id| state.channels.get(&id)),
                    _ => state.channel_by_name(&text),
                };
                let channel = channel.ok_or_else(|| bad_narrow("unknown channel"))?;
                if !term.negated && state.can_access_channel(viewer, channel) {
                    history_channel = Some(channel.id);
                }
                Check::Channel(channel.id)
            }
            "topic" | "subject" => Check::Topic(text.to_lowercase()),
            "sender" => {
                let user = match &term.operand {
                    Operand::Int(id) => u64::try_from(*id).ok().and_then(|id| state.users.get(&id)),
                    _ => state.user_by_email(&text),
                };
                Check::Sender(user.ok_or_else(|| bad_narrow("unknown user"))?.id)
            }
            "is" => {
                match text.as_str() {
                    "starred" | "unread" | "mentioned" | "alerted" => personal = true,
                    "dm" | "private" | "resolved" => {}
                    other => return Err(bad_narrow(&format!("unknown 'is' operand {other}"))),
                }
                Check::Is(text)
            }
            "dm" | "pm-with" => Check::Dm(resolve_users(state, viewer, &term.operand)?),
            "id" => Check::Id(text.parse().map_err(|_| bad_narrow("invalid message ID"))?),
            "search" => Check::Search(text.to_lowercase()),
            "channels" | "streams" if text == "public" => Check::PublicChannels,
            "near" | "with" => Check::Nothing,
            other => return Err(bad_narrow(&format!("unknown operator {other}"))),
        };
        resolved.push(ResolvedTerm {
            check,
            negated: term.negated,
        });
    }
    Ok(FetchNarrow {
        terms: resolved,
        history_channel: if personal { None } else { history_channel },
    })
}

fn resolve_users(state: &State, viewer: u64, operand: &Operand) -> Result<Vec<u64>, ApiError> {
    let mut ids: Vec<u64> = match operand {
        Operand::Ids(ids) => ids.iter().filter_map(|i| u64::try_from(*i).ok()).collect(),
        Operand::Int(i) => u64::try_from(*i).ok().into_iter().collect(),
        Operand::Str(s) => s
            .split(',')
            .map(|e| {
                state
                    .user_by_email(e)
                    .map(|u| u.id)
                    .ok_or_else(|| bad_narrow("unknown user"))
            })
            .collect::<Result<_, _>>()?,
    };
    ids.push(viewer);
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}

impl FetchNarrow {
    /// Whether `msg`, with the viewer's `flags`, matches every term.
    pub fn matches(&self, state: &State, msg: &Message, flags: &[String]) -> bool {
        self.terms.iter().all(|term| {
            let hit = match &term.check {
                Check::Channel(id) => msg.channel_id() == Some(*id),
                Check::Topic(t) => msg.channel_id().is_some() && msg.topic().to_lowercase() == *t,
                Check::Sender(id) => msg.sender_id == *id,
                Check::Is(what) => match what.as_str() {
                    "dm" | "private" => msg.channel_id().is_none(),
                    "starred" => flags.iter().any(|f| f == "starred"),
                    "unread" => !flags.iter().any(|f| f == "read"),
                    "mentioned" => flags
                        .iter()
                        .any(|f| f == "mentioned" || f == "wildcard_mentioned"),
                    "alerted" => flags.iter().any(|f| f == "has_alert_word"),
                    "resolved" => msg.topic().starts_with("✔ "),
                    _ => false,
                },
                Check::Dm(ids) => match &msg.destination {
                    Destination::Direct { participants } => participants == ids,
                    Destination::Channel { .. } => false,
                },
                Check::Id(id) => msg.id == *id,
                Check::Search(text) => {
                    msg.content.to_lowercase().contains(text.as_str())
                        || msg.topic().to_lowercase().contains(text.as_str())
                }
                Check::PublicChannels => msg
                    .channel_id()
                    .and_then(|id| state.channels.get(&id))
                    .is_some_and(|c| c.public),
                Check::Nothing => true,
            };
            hit != term.negated
        })
    }
}
