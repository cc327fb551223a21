//! `POST /register`, `GET /events` (the long-poll) and `DELETE /events`.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::error::ApiError;
use crate::narrow::parse_register_narrow;
use crate::params::Params;
use crate::queues::{EventQueue, Parked, Wake, collect_garbage, new_queue_id, remove_queue};
use crate::send::MAX_TOPIC_LENGTH;
use crate::state::{Shared, State};
use crate::users::{FEATURE_LEVEL, ZULIP_VERSION};

/// `POST /register`.
pub(crate) fn register(
    shared: &Shared,
    state: &mut State,
    user: u64,
    p: &Params<'_>,
) -> Result<Map<String, Value>, ApiError> {
    let apply_markdown = p.bool("apply_markdown")?.unwrap_or(false);
    let client_gravatar = p.bool("client_gravatar")?.unwrap_or(true);
    let all_public_streams = p.bool("all_public_streams")?.unwrap_or(false);
    p.bool("include_subscribers")?;
    p.bool("slim_presence")?;
    p.int("presence_history_limit_days")?;
    p.int("queue_lifespan_secs")?;
    p.object("client_capabilities")?;
    let event_types = p.str_list("event_types")?;
    let fetch_event_types = match p.str_list("fetch_event_types")? {
        Some(types) => Some(types),
        None => event_types.clone(),
    };
    let narrow = match p.json("narrow")? {
        Some(value) => parse_register_narrow(&value)?,
        None => Vec::new(),
    };
    let id = new_queue_id();
    let mut queue = EventQueue::new(id.clone(), user);
    queue.event_types = event_types;
    queue.narrow = narrow;
    queue.all_public_streams = all_public_streams;
    queue.apply_markdown = apply_markdown;
    queue.client_gravatar = client_gravatar;
    state.queues.insert(id.clone(), queue);

    let mut data = Map::new();
    data.insert("queue_id".into(), json!(id));
    data.insert("last_event_id".into(), json!(-1));
    data.insert("zulip_feature_level".into(), json!(FEATURE_LEVEL));
    data.insert("zulip_version".into(), json!(ZULIP_VERSION));
    data.insert("zulip_merge_base".into(), json!(ZULIP_VERSION));
    let wants = |t: &str| {
        fetch_event_types
            .as_ref()
            .is_none_or(|types| types.iter().any(|x| x == t))
    };
    if wants("realm") {
        data.insert(
            "max_message_length".into(),
            json!(shared.config.max_message_length),
        );
        data.insert("max_topic_length".into(), json!(MAX_TOPIC_LENGTH));
        data.insert(
            "event_queue_longpoll_timeout_seconds".into(),
            json!(shared.config.longpoll_timeout_secs),
        );
        data.insert("realm_name".into(), json!("Eagle test realm"));
        data.insert("realm_url".into(), json!(format!("http://{}", shared.addr)));
    }
    if wants("message") {
        data.insert("max_message_id".into(), json!(state.max_message_id()));
    }
    Ok(data)
}

/// What `GET /events` ends with.
pub(crate) enum Polled {
    Answer(Result<Map<String, Value>, ApiError>),
    /// The server "restarted" under the poll.
    Restarted,
}

fn events_answer(queue: &EventQueue) -> Map<String, Value> {
    let mut data = Map::new();
    data.insert("events".into(), Value::Array(queue.contents()));
    data.insert("queue_id".into(), json!(queue.id));
    data
}

/// Clears a parked poll when its request goes away (the client hung up).
struct ParkGuard {
    shared: Arc<Shared>,
    queue_id: String,
    handler: u64,
}

impl Drop for ParkGuard {
    fn drop(&mut self) {
        let mut state = self.shared.read();
        if let Some(queue) = state.queues.get_mut(&self.queue_id)
            && queue
                .parked
                .as_ref()
                .is_some_and(|p| p.handler == self.handler)
        {
            queue.parked = None;
            queue.last_connection = Instant::now();
            drop(state);
            self.shared.bump();
            self.shared.gc_wake.notify_one();
        }
    }
}

/// `GET /events`: prunes, answers at once when events are waiting or with
/// `dont_block`, otherwise parks until an event, a newer poll, or the
/// heartbeat.
pub(crate) async fn get_events(shared: Arc<Shared>, user: u64, p: &Params<'_>) -> Polled {
    let parsed = (|| {
        let queue_id = p.required("queue_id")?.to_owned();
        let dont_block = p.bool("dont_block")?.unwrap_or(false);
        let last = p.int("last_event_id")?.ok_or_else(|| {
            ApiError::malformed(
                "Missing 'last_event_id' argument".into(),
                "GET /events without last_event_id".into(),
            )
        })?;
        Ok((queue_id, dont_block, last))
    })();
    let (queue_id, dont_block, last) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => return Polled::Answer(Err(e)),
    };
    let (handler, wake) = match shared
        .mutate(|state| start_poll(&shared, state, user, &queue_id, dont_block, last))
    {
        Ok(Ok(answer)) => return Polled::Answer(Ok(answer)),
        Ok(Err(parked)) => parked,
        Err(e) => return Polled::Answer(Err(e)),
    };
    let guard = ParkGuard {
        shared: Arc::clone(&shared),
        queue_id: queue_id.clone(),
        handler,
    };
    let why = tokio::select! {
        why = wake => why.unwrap_or(Wake::Gone),
        _ = tokio::time::sleep(shared.config.heartbeat) => Wake::Ready,
    };
    if why == Wake::Restart {
        return Polled::Restarted;
    }
    // The guard stays alive until the heartbeat decision is made, so that a
    // poll ended by its timer still finds itself parked.
    let answer = shared.mutate(|state| {
        let State { queues, rng, .. } = state;
        let queue = queues
            .get_mut(&queue_id)
            .filter(|q| q.user_id == user && why == Wake::Ready)
            .ok_or_else(|| ApiError::bad_queue(&queue_id))?;
        if queue.parked.as_ref().is_some_and(|p| p.handler == handler) {
            // The heartbeat timer fired first.
            queue.parked = None;
            queue.push_heartbeat(rng);
        }
        queue.last_connection = Instant::now();
        Ok(events_answer(queue))
    });
    drop(guard);
    Polled::Answer(answer)
}

type Parking = (u64, oneshot::Receiver<Wake>);

/// The locked part of a poll: an answer now, or a parked handler.
fn start_poll(
    shared: &Shared,
    state: &mut State,
    user: u64,
    queue_id: &str,
    dont_block: bool,
    last: i64,
) -> Result<Result<Map<String, Value>, Parking>, ApiError> {
    collect_garbage(state, shared.config.idle_queue_timeout);
    let handler = state.new_handler_id();
    let queue = state
        .queues
        .get_mut(queue_id)
        .filter(|q| q.user_id == user)
        .ok_or_else(|| ApiError::bad_queue(queue_id))?;
    if last < queue.newest_pruned_id {
        return Err(ApiError::bad_request(format!(
            "An event newer than {last} has already been pruned!"
        )));
    }
    queue.prune(last);
    if last != queue.newest_pruned_id {
        return Err(ApiError::bad_request(format!(
            "Event {last} was not in this queue"
        )));
    }
    // A newer poll finishes the one still parked.
    queue.wake(Wake::Ready);
    queue.last_connection = Instant::now();
    if !queue.events.is_empty() || dont_block {
        return Ok(Ok(events_answer(queue)));
    }
    let (tx, rx) = oneshot::channel();
    queue.parked = Some(Parked { handler, wake: tx });
    Ok(Err((handler, rx)))
}

/// `DELETE /events`.
pub(crate) fn delete_queue(
    state: &mut State,
    user: u64,
    p: &Params<'_>,
) -> Result<Map<String, Value>, ApiError> {
    let queue_id = p.required("queue_id")?;
    if state.queues.get(queue_id).is_none_or(|q| q.user_id != user) {
        return Err(ApiError::bad_queue(queue_id));
    }
    remove_queue(state, queue_id);
    Ok(Map::new())
}
