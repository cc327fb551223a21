//! Event queues as Tornado keeps them: events with increasing but not
//! consecutive ids, pruning through `last_event_id`, at most one parked
//! long-poll per queue, and garbage collection of idle queues.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::narrow::NarrowTerm;
use crate::state::{Shared, State};

/// Why a parked long-poll was woken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// Events arrived, or a newer poll on the same queue took over: answer
    /// with the queue's contents.
    Ready,
    /// The queue was deleted or expired.
    Gone,
    /// The server restarted: the connection ends without a Zulip answer.
    Restart,
}

/// A long-poll waiting for events.
#[derive(Debug)]
pub(crate) struct Parked {
    pub handler: u64,
    pub wake: oneshot::Sender<Wake>,
}

/// One client's event queue.
#[derive(Debug)]
pub(crate) struct EventQueue {
    pub id: String,
    pub user_id: u64,
    /// `None` means every event type.
    pub event_types: Option<Vec<String>>,
    pub narrow: Vec<NarrowTerm>,
    pub all_public_streams: bool,
    pub apply_markdown: bool,
    pub client_gravatar: bool,
    pub events: VecDeque<Value>,
    /// The id of the newest event pushed, -1 for none.
    pub last_id: i64,
    /// The id of the newest event pruned, -1 for none (Zulip's
    /// `newest_pruned_id`).
    pub newest_pruned_id: i64,
    pub last_connection: Instant,
    pub parked: Option<Parked>,
}

impl EventQueue {
    /// A fresh, empty queue.
    pub fn new(id: String, user_id: u64) -> EventQueue {
        EventQueue {
            id,
            user_id,
            event_types: None,
            narrow: Vec::new(),
            all_public_streams: false,
            apply_markdown: false,
            client_gravatar: true,
            events: VecDeque::new(),
            last_id: -1,
            newest_pruned_id: -1,
            last_connection: Instant::now(),
            parked: None,
        }
    }

    /// Whether the queue wants events of this type (heartbeats bypass this).
    pub fn accepts_type(&self, event_type: &str) -> bool {
        self.event_types
            .as_ref()
            .is_none_or(|types| types.iter().any(|t| t == event_type))
    }

    /// Appends an event with the next id, skipping some ids at random so that
    /// clients cannot rely on consecutive ids, and wakes a parked poll.
    pub fn push(&mut self, rng: &mut fastrand::Rng, mut event: Map<String, Value>) {
        let id = self.last_id + 1 + rng.i64(0..=2);
        self.last_id = id;
        event.insert("id".into(), json!(id));
        self.events.push_back(Value::Object(event));
        self.wake(Wake::Ready);
    }

    /// Appends a heartbeat event.
    pub fn push_heartbeat(&mut self, rng: &mut fastrand::Rng) {
        let mut event = Map::new();
        event.insert("type".into(), json!("heartbeat"));
        self.push(rng, event);
    }

    /// Drops every event with an id up to `through`.
    pub fn prune(&mut self, through: i64) {
        while let Some(id) = self.events.front().and_then(|e| e["id"].as_i64()) {
            if id > through {
                break;
            }
            self.newest_pruned_id = id;
            self.events.pop_front();
        }
    }

    /// Ends the parked poll, if any.
    pub fn wake(&mut self, why: Wake) {
        if let Some(parked) = self.parked.take() {
            // The poll may already be gone (client timed out); nothing to do.
            let _ = parked.wake.send(why);
            self.last_connection = Instant::now();
        }
    }

    /// The events a poll answers with.
    pub fn contents(&self) -> Vec<Value> {
        self.events.iter().cloned().collect()
    }

    /// When this queue expires if nothing connects, or `None` while parked.
    pub fn expires_at(&self, idle: Duration) -> Option<Instant> {
        match self.parked {
            Some(_) => None,
            None => Some(self.last_connection + idle),
        }
    }
}

/// A fresh queue id, shaped like the server's (a UUID).
pub(crate) fn new_queue_id() -> String {
    let hex = |n: usize| -> String {
        (0..n)
            .map(|_| char::from_digit(fastrand::u32(0..16), 16).unwrap_or('0'))
            .collect()
    };
    format!("{}-{}-4{}-{}-{}", hex(8), hex(4), hex(3), hex(4), hex(12))
}

/// Removes every queue idle for longer than the configured timeout; says
/// whether any went.
pub(crate) fn collect_garbage(state: &mut State, idle: Duration) -> bool {
    let now = Instant::now();
    let before = state.queues.len();
    state
        .queues
        .retain(|_, q| q.expires_at(idle).is_none_or(|at| at > now));
    state.queues.len() != before
}

/// Removes one queue, ending a poll parked on it.
pub(crate) fn remove_queue(state: &mut State, queue_id: &str) -> bool {
    match state.queues.remove(queue_id) {
        Some(mut queue) => {
            queue.wake(Wake::Gone);
            true
        }
        None => false,
    }
}

/// Runs the garbage collector for the server's lifetime: it sleeps until the
/// earliest expiry, or until the state changes.
pub(crate) async fn gc_task(shared: Arc<Shared>) {
    let idle = shared.config.idle_queue_timeout;
    loop {
        // Registered before looking, so that a change in between is not lost.
        let changed = shared.gc_wake.notified();
        let (removed, next) = {
            let mut state = shared.read();
            let removed = collect_garbage(&mut state, idle);
            let next = state
                .queues
                .values()
                .filter_map(|q| q.expires_at(idle))
                .min();
            (removed, next)
        };
        if removed {
            shared.bump();
        }
        match next {
            Some(at) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(at) => {}
                    _ = changed => {}
                }
            }
            None => changed.await,
        }
    }
}
