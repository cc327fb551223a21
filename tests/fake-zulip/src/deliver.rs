//! Putting events into queues, as Tornado's `process_notification` does:
//! message events go to the queues of users who received the message (and,
//! with `flags: []`, to `all_public_streams` queues for public channels),
//! filtered by each queue's event types and narrow.

use serde_json::{Map, Value, json};

use crate::messages::message_json;
use crate::narrow::event_matches;
use crate::state::State;

/// Queues a `message` event for every queue that should see message `id`.
pub(crate) fn deliver_message(state: &mut State, id: u64) {
    let Some(msg) = state.messages.get(&id) else {
        return;
    };
    let public_channel = msg
        .channel_id()
        .and_then(|c| state.channels.get(&c))
        .is_some_and(|c| c.public);
    let mut outgoing = Vec::new();
    for queue in state.queues.values() {
        let flags: Vec<String> = match msg.flags.get(&queue.user_id) {
            Some(flags) => flags.iter().cloned().collect(),
            None if queue.all_public_streams && public_channel => Vec::new(),
            None => continue,
        };
        if !queue.accepts_type("message") || !event_matches(state, &queue.narrow, msg, &flags) {
            continue;
        }
        let mut event = Map::new();
        event.insert("type".into(), json!("message"));
        event.insert("flags".into(), json!(flags));
        event.insert(
            "message".into(),
            Value::Object(message_json(
                state,
                msg,
                queue.apply_markdown,
                queue.client_gravatar,
            )),
        );
        outgoing.push((queue.id.clone(), event));
    }
    push_all(state, outgoing);
}

/// Queues an event built per recipient for every queue whose owner received
/// message `id` and that accepts `event_type`.
pub(crate) fn deliver_to_recipients(
    state: &mut State,
    id: u64,
    event_type: &str,
    build: impl Fn(&State, u64, bool) -> Map<String, Value>,
) {
    let Some(msg) = state.messages.get(&id) else {
        return;
    };
    let outgoing: Vec<(String, Map<String, Value>)> = state
        .queues
        .values()
        .filter(|q| msg.flags.contains_key(&q.user_id) && q.accepts_type(event_type))
        .map(|q| (q.id.clone(), build(state, q.user_id, q.apply_markdown)))
        .collect();
    push_all(state, outgoing);
}

fn push_all(state: &mut State, outgoing: Vec<(String, Map<String, Value>)>) {
    for (queue_id, event) in outgoing {
        if let Some(queue) = state.queues.get_mut(&queue_id) {
            queue.push(&mut state.rng, event);
        }
    }
}
