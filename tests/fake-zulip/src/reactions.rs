//! `POST` and `DELETE /messages/{message_id}/reactions` with a small table
//! of Unicode emoji, and `reaction` events.

use serde_json::{Map, Value, json};

use crate::deliver::deliver_to_recipients;
use crate::error::ApiError;
use crate::params::Params;
use crate::state::{Reaction, State};

/// Emoji names (canonical names and aliases) and their code points.
const EMOJI: &[(&str, &str)] = &[
    ("eyes", "1f440"),
    ("check", "2705"),
    ("all_good", "2705"),
    ("approved", "2705"),
    ("check_mark", "2714"),
    ("cross_mark", "274c"),
    ("x", "274c"),
    ("thumbs_up", "1f44d"),
    ("+1", "1f44d"),
    ("like", "1f44d"),
    ("thumbs_down", "1f44e"),
    ("-1", "1f44e"),
    ("tada", "1f389"),
    ("warning", "26a0"),
    ("hourglass", "231b"),
    ("stop_sign", "1f6d1"),
    ("rocket", "1f680"),
    ("robot", "1f916"),
    ("question", "2753"),
    ("exclamation", "2757"),
    ("heart", "2764"),
    ("working_on_it", "1f6e0"),
    ("octopus", "1f419"),
];

fn code_of(name: &str) -> Option<&'static str> {
    EMOJI.iter().find(|(n, _)| *n == name).map(|(_, c)| *c)
}

fn unknown_emoji(name: &str) -> ApiError {
    ApiError::bad_request(format!("Emoji '{name}' does not exist"))
}

/// `check_emoji_request` for Unicode emoji.
fn check_emoji(name: &str, code: &str, reaction_type: &str) -> Result<(), ApiError> {
    if reaction_type != "unicode_emoji" {
        return Err(ApiError::bad_request("Invalid emoji type.".into()));
    }
    if !EMOJI.iter().any(|(_, c)| *c == code) {
        return Err(ApiError::bad_request("Invalid emoji code.".into()));
    }
    if code_of(name) != Some(code) {
        return Err(ApiError::bad_request("Invalid emoji name.".into()));
    }
    Ok(())
}

/// Adds a reaction, as `check_add_reaction` does.
pub(crate) fn add_reaction(
    state: &mut State,
    user: u64,
    id: u64,
    name: &str,
    code: Option<&str>,
    kind: Option<&str>,
) -> Result<(), ApiError> {
    let msg = state
        .messages
        .get(&id)
        .filter(|m| state.can_access_message(user, m))
        .ok_or_else(ApiError::invalid_message)?;
    let (code, kind) = match (code, kind) {
        (Some(code), Some(kind)) => (code.to_owned(), kind.to_owned()),
        _ => (
            code_of(name).ok_or_else(|| unknown_emoji(name))?.to_owned(),
            "unicode_emoji".to_owned(),
        ),
    };
    let same = |r: &&Reaction| r.emoji_code == code && r.reaction_type == kind;
    if msg.reactions.iter().filter(same).any(|r| r.user_id == user) {
        return Err(ApiError::new(
            400,
            "REACTION_ALREADY_EXISTS",
            "Reaction already exists.".into(),
        ));
    }
    // A vote for an existing reaction keeps that reaction's name.
    let name = match msg.reactions.iter().find(same) {
        Some(existing) => existing.emoji_name.clone(),
        None => {
            check_emoji(name, &code, &kind)?;
            name.to_owned()
        }
    };
    let reaction = Reaction {
        user_id: user,
        emoji_name: name,
        emoji_code: code,
        reaction_type: kind,
    };
    if let Some(msg) = state.messages.get_mut(&id) {
        // Reacting to a message one did not receive gives one a copy.
        msg.flags
            .entry(user)
            .or_insert_with(|| ["read".to_owned(), "historical".to_owned()].into());
        msg.reactions.push(reaction.clone());
    }
    deliver_reaction(state, id, "add", &reaction);
    Ok(())
}

/// Removes a reaction, as `remove_reaction` does.
pub(crate) fn remove_reaction(
    state: &mut State,
    user: u64,
    id: u64,
    name: Option<&str>,
    code: Option<&str>,
    kind: &str,
) -> Result<(), ApiError> {
    let msg = state
        .messages
        .get(&id)
        .filter(|m| state.can_access_message(user, m))
        .ok_or_else(ApiError::invalid_message)?;
    let code = match (code, name) {
        (Some(code), _) => code.to_owned(),
        (None, Some(name)) => code_of(name).ok_or_else(|| unknown_emoji(name))?.to_owned(),
        (None, None) => {
            return Err(ApiError::malformed(
                "At least one of the following arguments must be present: emoji_name, emoji_code"
                    .into(),
                "DELETE reactions without emoji_name or emoji_code".into(),
            ));
        }
    };
    let position = msg
        .reactions
        .iter()
        .position(|r| r.user_id == user && r.emoji_code == code && r.reaction_type == kind)
        .ok_or_else(|| {
            ApiError::new(
                400,
                "REACTION_DOES_NOT_EXIST",
                "Reaction doesn't exist.".into(),
            )
        })?;
    let mut removed = None;
    if let Some(msg) = state.messages.get_mut(&id) {
        removed = Some(msg.reactions.remove(position));
    }
    if let Some(reaction) = removed {
        deliver_reaction(state, id, "remove", &reaction);
    }
    Ok(())
}

fn deliver_reaction(state: &mut State, id: u64, op: &str, reaction: &Reaction) {
    let user = state.users.get(&reaction.user_id).cloned();
    deliver_to_recipients(state, id, "reaction", |_, _, _| {
        let mut e = Map::new();
        e.insert("type".into(), json!("reaction"));
        e.insert("op".into(), json!(op));
        e.insert("message_id".into(), json!(id));
        e.insert("emoji_name".into(), json!(reaction.emoji_name));
        e.insert("emoji_code".into(), json!(reaction.emoji_code));
        e.insert("reaction_type".into(), json!(reaction.reaction_type));
        e.insert("user_id".into(), json!(reaction.user_id));
        if let Some(u) = &user {
            e.insert(
                "user".into(),
                json!({"user_id": u.id, "email": u.email, "full_name": u.full_name}),
            );
        }
        e
    });
}

/// `POST /messages/{message_id}/reactions`.
pub(crate) fn post_reaction(
    state: &mut State,
    user: u64,
    id: u64,
    p: &Params<'_>,
) -> Result<Map<String, Value>, ApiError> {
    let name = p.required("emoji_name")?;
    add_reaction(
        state,
        user,
        id,
        name,
        p.get("emoji_code"),
        p.get("reaction_type"),
    )?;
    Ok(Map::new())
}

/// `DELETE /messages/{message_id}/reactions`.
pub(crate) fn delete_reaction(
    state: &mut State,
    user: u64,
    id: u64,
    p: &Params<'_>,
) -> Result<Map<String, Value>, ApiError> {
    let kind = p.get("reaction_type").unwrap_or("unicode_emoji");
    remove_reaction(
        state,
        user,
        id,
        p.get("emoji_name"),
        p.get("emoji_code"),
        kind,
    )?;
    Ok(Map::new())
}
