//! The realm behind the fake: users, channels, messages, event queues and
//! the record of every request, all behind one mutex.
//!
//! Every change goes through [`Shared::mutate`], which bumps a version
//! counter afterwards so that `wait_until` re-evaluates its check.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::sync::{Notify, watch};

use crate::faults::Faults;
use crate::model::{FakeConfig, RecordedRequest};
use crate::queues::EventQueue;
use crate::ratelimit::RateLimiter;

/// A user (human or bot) of the realm.
#[derive(Debug, Clone)]
pub(crate) struct User {
    pub id: u64,
    pub email: String,
    pub full_name: String,
    pub is_bot: bool,
    pub active: bool,
    pub api_key: String,
    pub date_joined: String,
    /// The recipient id of direct messages to this user alone.
    pub recipient_id: u64,
}

/// A channel (stream).
#[derive(Debug, Clone)]
pub(crate) struct Channel {
    pub id: u64,
    pub name: String,
    pub public: bool,
    pub subscribers: BTreeSet<u64>,
    pub date_created: i64,
    pub recipient_id: u64,
}

/// Where a message went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Destination {
    /// A channel message: channel id and topic.
    Channel { channel_id: u64, topic: String },
    /// A direct message: every participant including the sender, ascending.
    Direct { participants: Vec<u64> },
}

/// One reaction on a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reaction {
    pub user_id: u64,
    pub emoji_name: String,
    pub emoji_code: String,
    pub reaction_type: String,
}

/// A stored message with its per-recipient flags (Zulip's `UserMessage` rows).
#[derive(Debug, Clone)]
pub(crate) struct Message {
    pub id: u64,
    pub sender_id: u64,
    pub destination: Destination,
    pub recipient_id: u64,
    pub content: String,
    pub timestamp: i64,
    pub client: String,
    pub reactions: Vec<Reaction>,
    pub last_edit_timestamp: Option<i64>,
    /// User id → flags, for every user who received the message.
    pub flags: BTreeMap<u64, BTreeSet<String>>,
}

impl Message {
    /// The topic, empty for direct messages.
    pub fn topic(&self) -> &str {
        match &self.destination {
            Destination::Channel { topic, .. } => topic,
            Destination::Direct { .. } => "",
        }
    }

    /// The channel id of a channel message.
    pub fn channel_id(&self) -> Option<u64> {
        match &self.destination {
            Destination::Channel { channel_id, .. } => Some(*channel_id),
            Destination::Direct { .. } => None,
        }
    }
}

/// Everything the fake knows.
pub(crate) struct State {
    pub users: BTreeMap<u64, User>,
    pub channels: BTreeMap<u64, Channel>,
    pub messages: BTreeMap<u64, Message>,
    pub queues: BTreeMap<String, EventQueue>,
    /// Recipient ids of group direct messages, by sorted participants.
    pub group_recipients: BTreeMap<Vec<u64>, u64>,
    pub requests: Vec<RecordedRequest>,
    pub violations: Vec<String>,
    pub statuses: BTreeMap<u16, usize>,
    pub rate: RateLimiter,
    pub faults: Faults,
    /// Seeded, so that id gaps are the same on every run.
    pub rng: fastrand::Rng,
    next_user_id: u64,
    next_channel_id: u64,
    next_message_id: u64,
    next_recipient_id: u64,
    next_handler_id: u64,
}

impl State {
    fn new() -> State {
        State {
            users: BTreeMap::new(),
            channels: BTreeMap::new(),
            messages: BTreeMap::new(),
            queues: BTreeMap::new(),
            group_recipients: BTreeMap::new(),
            requests: Vec::new(),
            violations: Vec::new(),
            statuses: BTreeMap::new(),
            rate: RateLimiter::default(),
            faults: Faults::default(),
            rng: fastrand::Rng::with_seed(0x5eed_2a91),
            next_user_id: 8,
            next_channel_id: 3,
            next_message_id: 100,
            next_recipient_id: 20,
            next_handler_id: 1,
        }
    }

    /// A fresh user id.
    pub fn new_user_id(&mut self) -> u64 {
        self.next_user_id += 1;
        self.next_user_id
    }

    /// A fresh channel id.
    pub fn new_channel_id(&mut self) -> u64 {
        self.next_channel_id += 1;
        self.next_channel_id
    }

    /// A fresh recipient id.
    pub fn new_recipient_id(&mut self) -> u64 {
        self.next_recipient_id += 1;
        self.next_recipient_id
    }

    /// A fresh message id: increasing, with an occasional gap, as on a server
    /// that hosts other realms.
    pub fn new_message_id(&mut self) -> u64 {
        self.next_message_id += 1 + self.rng.u64(0..=2);
        self.next_message_id
    }

    /// A fresh id for a parked long-poll.
    pub fn new_handler_id(&mut self) -> u64 {
        self.next_handler_id += 1;
        self.next_handler_id
    }

    /// The highest message id so far, or -1.
    pub fn max_message_id(&self) -> i64 {
        self.messages
            .keys()
            .next_back()
            .map_or(-1, |id| i64::try_from(*id).unwrap_or(i64::MAX))
    }

    /// The user with this email, compared case-insensitively.
    pub fn user_by_email(&self, email: &str) -> Option<&User> {
        let email = email.trim();
        self.users
            .values()
            .find(|u| u.email.eq_ignore_ascii_case(email))
    }

    /// The channel with this name, compared case-insensitively.
    pub fn channel_by_name(&self, name: &str) -> Option<&Channel> {
        let wanted = name.to_lowercase();
        self.channels
            .values()
            .find(|c| c.name.to_lowercase() == wanted)
    }

    /// Whether `user_id` may read the channel's shared history.
    pub fn can_access_channel(&self, user_id: u64, channel: &Channel) -> bool {
        channel.public || channel.subscribers.contains(&user_id)
    }

    /// Whether `user_id` may see this message at all.
    pub fn can_access_message(&self, user_id: u64, message: &Message) -> bool {
        if message.flags.contains_key(&user_id) {
            return true;
        }
        match message.channel_id().and_then(|id| self.channels.get(&id)) {
            Some(channel) => self.can_access_channel(user_id, channel),
            None => false,
        }
    }

    /// The recipient id of a direct message among these participants.
    pub fn direct_recipient_id(&mut self, sender: u64, participants: &[u64]) -> u64 {
        let others: Vec<u64> = participants
            .iter()
            .copied()
            .filter(|id| *id != sender)
            .collect();
        match others.as_slice() {
            [] => self.users.get(&sender).map_or(0, |u| u.recipient_id),
            [one] => self.users.get(one).map_or(0, |u| u.recipient_id),
            _ => {
                if let Some(id) = self.group_recipients.get(participants) {
                    return *id;
                }
                let id = self.new_recipient_id();
                self.group_recipients.insert(participants.to_vec(), id);
                id
            }
        }
    }

    /// Records a violation of the client's contract with Zulip.
    pub fn violation(&mut self, text: String) {
        self.violations.push(text);
    }
}

/// The state shared by the server task, the background tasks and the
/// test's handle.
pub(crate) struct Shared {
    pub config: FakeConfig,
    pub addr: SocketAddr,
    state: Mutex<State>,
    version: watch::Sender<u64>,
    /// Wakes the queue garbage collector when queues change.
    pub gc_wake: Notify,
}

impl Shared {
    pub fn new(config: FakeConfig, addr: SocketAddr) -> Shared {
        Shared {
            config,
            addr,
            state: Mutex::new(State::new()),
            version: watch::channel(0).0,
            gc_wake: Notify::new(),
        }
    }

    /// Reads the state. A poisoned lock (a panic in a test's closure) is
    /// recovered, since the state itself is never left half-updated.
    pub fn read(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Changes the state, then tells everyone waiting on a change.
    pub fn mutate<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let result = {
            let mut state = self.read();
            f(&mut state)
        };
        self.bump();
        self.gc_wake.notify_one();
        result
    }

    /// Tells everyone waiting on a change that one happened.
    pub fn bump(&self) {
        self.version.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// A receiver that sees every later change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }
}

/// Now, in UNIX seconds.
pub(crate) fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Now, in fractional UNIX seconds.
pub(crate) fn unix_now_f64() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
