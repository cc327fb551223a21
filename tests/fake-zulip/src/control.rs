//! The test-control API: building the realm, acting as people, observing
//! what clients did, and breaking things on purpose.
//!
//! These methods panic on misuse by the test itself (an unknown user or
//! channel), which is a bug in the test, not input from a client.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::FakeZulip;
use crate::edit::{Edit, apply_edit};
use crate::messages::stored;
use crate::model::{Fault, QueueInfo, RecordedRequest, Route, StoredMessage};
use crate::queues::{Wake, remove_queue};
use crate::send::{Outgoing, send};
use crate::state::{Channel, Destination, User, unix_now};

impl FakeZulip {
    /// Adds a user and returns its id; its API key is [`FakeZulip::api_key`].
    pub fn add_user(&self, email: &str, full_name: &str, is_bot: bool) -> u64 {
        self.shared.mutate(|state| {
            assert!(
                state.user_by_email(email).is_none(),
                "a user with email {email} exists already"
            );
            let id = state.new_user_id();
            let recipient_id = state.new_recipient_id();
            let api_key: String = std::iter::repeat_with(fastrand::alphanumeric)
                .take(32)
                .collect();
            state.users.insert(
                id,
                User {
                    id,
                    email: email.to_owned(),
                    full_name: full_name.to_owned(),
                    is_bot,
                    active: true,
                    api_key,
                    date_joined: "2024-06-01T12:00:00+00:00".to_owned(),
                    recipient_id,
                },
            );
            id
        })
    }

    /// The user's API key: 32 random alphanumerics.
    pub fn api_key(&self, user_id: u64) -> String {
        let state = self.shared.read();
        match state.users.get(&user_id) {
            Some(user) => user.api_key.clone(),
            None => panic!("no user with id {user_id}"),
        }
    }

    /// Deactivates a user: its requests then fail with 401.
    pub fn deactivate(&self, user_id: u64) {
        self.shared
            .mutate(|state| match state.users.get_mut(&user_id) {
                Some(user) => user.active = false,
                None => panic!("no user with id {user_id}"),
            });
    }

    /// Adds a channel and returns its id.
    pub fn add_channel(&self, name: &str, public: bool) -> u64 {
        self.shared.mutate(|state| {
            assert!(
                state.channel_by_name(name).is_none(),
                "a channel named {name} exists already"
            );
            let id = state.new_channel_id();
            let recipient_id = state.new_recipient_id();
            state.channels.insert(
                id,
                Channel {
                    id,
                    name: name.to_owned(),
                    public,
                    subscribers: BTreeSet::new(),
                    date_created: unix_now(),
                    recipient_id,
                },
            );
            id
        })
    }

    fn channel_id(&self, name: &str) -> u64 {
        match self.shared.read().channel_by_name(name) {
            Some(channel) => channel.id,
            None => panic!("no channel named {name}"),
        }
    }

    /// Subscribes a user to a channel (case-insensitive name).
    pub fn subscribe(&self, user_id: u64, channel: &str) {
        let id = self.channel_id(channel);
        self.shared.mutate(|state| {
            if let Some(c) = state.channels.get_mut(&id) {
                c.subscribers.insert(user_id);
            }
        });
    }

    /// Unsubscribes a user from a channel.
    pub fn unsubscribe(&self, user_id: u64, channel: &str) {
        let id = self.channel_id(channel);
        self.shared.mutate(|state| {
            if let Some(c) = state.channels.get_mut(&id) {
                c.subscribers.remove(&user_id);
            }
        });
    }

    fn send_as(&self, sender: u64, destination: Destination, content: &str) -> u64 {
        let max_len = self.shared.config.max_message_length;
        let result = self.shared.mutate(|state| {
            assert!(
                state.users.contains_key(&sender),
                "no user with id {sender}"
            );
            let out = Outgoing {
                sender,
                destination,
                content: content.to_owned(),
                client: "website".to_owned(),
                read_by_sender: true,
            };
            send(state, max_len, out)
        });
        result.unwrap_or_else(|e| panic!("cannot send as user {sender}: {}", e.msg))
    }

    /// Posts to a channel as a person would, delivering the events a
    /// `POST /messages` would; returns the message id.
    pub fn post(&self, sender: u64, channel: &str, topic: &str, content: &str) -> u64 {
        let channel_id = self.channel_id(channel);
        let destination = Destination::Channel {
            channel_id,
            topic: topic.to_owned(),
        };
        self.send_as(sender, destination, content)
    }

    /// Sends a direct message; returns the message id.
    pub fn post_dm(&self, sender: u64, to: &[u64], content: &str) -> u64 {
        let destination = Destination::Direct {
            participants: to.to_vec(),
        };
        self.send_as(sender, destination, content)
    }

    /// Edits a message's content as its sender.
    pub fn edit(&self, message_id: u64, content: &str) {
        let max_len = self.shared.config.max_message_length;
        let result = self.shared.mutate(|state| {
            let sender = state.messages.get(&message_id).map(|m| m.sender_id);
            let Some(editor) = sender else {
                panic!("no message with id {message_id}");
            };
            let edit = Edit {
                editor,
                message_id,
                content: Some(content.to_owned()),
                topic: None,
                propagate_mode: "change_one".to_owned(),
            };
            apply_edit(state, max_len, edit)
        });
        result.unwrap_or_else(|e| panic!("cannot edit message {message_id}: {}", e.msg));
    }

    /// Every message, ascending by id.
    pub fn messages(&self) -> Vec<StoredMessage> {
        let state = self.shared.read();
        state.messages.values().map(|m| stored(&state, m)).collect()
    }

    /// The messages of one topic (channel and topic compared
    /// case-insensitively), ascending.
    pub fn messages_in(&self, channel: &str, topic: &str) -> Vec<StoredMessage> {
        let (channel, topic) = (channel.to_lowercase(), topic.to_lowercase());
        self.messages()
            .into_iter()
            .filter(|m| {
                m.channel
                    .as_ref()
                    .is_some_and(|c| c.to_lowercase() == channel)
                    && m.topic.to_lowercase() == topic
            })
            .collect()
    }

    /// The messages one user sent, ascending.
    pub fn messages_from(&self, sender: u64) -> Vec<StoredMessage> {
        self.messages()
            .into_iter()
            .filter(|m| m.sender_id == sender)
            .collect()
    }

    /// The reactions on a message: (user id, emoji name), in order.
    pub fn reactions_on(&self, message_id: u64) -> Vec<(u64, String)> {
        let state = self.shared.read();
        state
            .messages
            .get(&message_id)
            .map(|m| {
                m.reactions
                    .iter()
                    .map(|r| (r.user_id, r.emoji_name.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Every HTTP request received, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.read().requests.clone()
    }

    /// Every strictness or schema violation so far.
    pub fn violations(&self) -> Vec<String> {
        self.shared.read().violations.clone()
    }

    /// Forgets the violations so far (for tests that provoke some on purpose).
    pub fn clear_violations(&self) {
        self.shared.mutate(|state| state.violations.clear());
    }

    /// Panics, listing every violation, if there is any.
    pub fn assert_clean(&self) {
        let violations = self.violations();
        if !violations.is_empty() {
            let list: Vec<String> = violations.iter().map(|v| format!("  - {v}")).collect();
            panic!(
                "the fake Zulip saw {} violation(s):\n{}",
                violations.len(),
                list.join("\n")
            );
        }
    }

    /// The event queues that exist now.
    pub fn queues(&self) -> Vec<QueueInfo> {
        let state = self.shared.read();
        state
            .queues
            .values()
            .map(|q| QueueInfo {
                id: q.id.clone(),
                user_id: q.user_id,
                parked: q.parked.is_some(),
                event_types: q.event_types.clone().unwrap_or_default(),
            })
            .collect()
    }

    /// Garbage-collects one queue now; a poll parked on it gets
    /// `BAD_EVENT_QUEUE_ID`.
    pub fn expire_queue(&self, queue_id: &str) {
        self.shared.mutate(|state| remove_queue(state, queue_id));
    }

    /// Garbage-collects every queue of a user.
    pub fn expire_queues_of(&self, user_id: u64) {
        self.shared.mutate(|state| {
            let ids: Vec<String> = state
                .queues
                .values()
                .filter(|q| q.user_id == user_id)
                .map(|q| q.id.clone())
                .collect();
            for id in ids {
                remove_queue(state, &id);
            }
        });
    }

    /// Restarts the server: every parked poll ends with a 502 page, and the
    /// queues are dropped unless `keep_queues` (Tornado saves them to disk on
    /// a clean restart).
    pub fn restart(&self, keep_queues: bool) {
        self.shared.mutate(|state| {
            for queue in state.queues.values_mut() {
                queue.wake(Wake::Restart);
            }
            if !keep_queues {
                state.queues.clear();
            }
        });
    }

    /// Sets per-user rate-limit rules, (window, calls allowed in it), for the
    /// `api` bucket and, separately counted, for `GET /events`; empty turns
    /// limits (and the `X-RateLimit-*` headers) off. Past requests are
    /// forgotten.
    pub fn set_rate_limit(&self, rules: &[(Duration, u32)]) {
        self.shared.mutate(|state| state.rate.set_rules(rules));
    }

    /// The next `times` requests on `route` get `fault`.
    pub fn inject(&self, route: Route, fault: Fault, times: usize) {
        self.shared
            .mutate(|state| state.faults.inject(route, fault, times));
    }

    /// How many responses had this status.
    pub fn count_status(&self, status: u16) -> usize {
        self.shared
            .read()
            .statuses
            .get(&status)
            .copied()
            .unwrap_or(0)
    }
}
