//! Chat as the human-facing mirror of the bus: how the runner and Eagle post
//! about runs, and how they name the people they address.
//!
//! The database is what is true; these posts only tell people. They go
//! into the outbox in the same transaction as the change they report, so a
//! crash never loses one and never posts one for a change that did not
//! happen. Text that comes from workers, tasks or plugins is made inert
//! ([`crate::ground::text::neutralize_mentions`]) before it is posted; the one
//! mention Eagle writes on purpose is the escalation's @-mention of the owner.

use crate::store::{Destination, NewOutboxItem, OutboxKind, Result, Task, Tx};

/// The longest post about a run; longer text is cut (the full text stays in
/// the work log and the database).
pub const MAX_POST_CHARS: usize = 2_000;

/// Posts under one identity into the executor channel, one topic per run.
#[derive(Debug, Clone)]
pub struct Poster {
    /// The outbox identity (a profile name, or the shell's).
    pub identity: String,
    /// The executor channel.
    pub channel: String,
}

impl Poster {
    /// Stores a post in a run's topic for delivery.
    pub async fn post(&self, tx: &mut Tx, topic: &str, content: &str) -> Result<i64> {
        self.post_to(
            tx,
            Destination::Channel {
                channel: self.channel.clone(),
                topic: topic.to_string(),
            },
            content,
        )
        .await
    }

    /// Stores a post for any destination (a task's own conversation, say).
    pub async fn post_to(&self, tx: &mut Tx, to: Destination, content: &str) -> Result<i64> {
        let content = cap(content, MAX_POST_CHARS);
        let id = tx
            .outbox()
            .enqueue(&NewOutboxItem {
                identity: self.identity.clone(),
                kind: OutboxKind::Message { to, content },
                in_reply_to: None,
            })
            .await?;
        // The sender (or the shell) delivers it as soon as this commits.
        tx.notify().await?;
        Ok(id)
    }
}

/// `text` cut to `max` characters, marked with `…` when cut.
pub fn cap(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// How a transport writes people's names in posts: the domain owns this
/// interface, and the Zulip and shell transports implement it.
pub trait Naming: std::fmt::Debug + Send + Sync {
    /// A mention that notifies the person, if the transport can make one
    /// for them (Zulip needs their user id).
    fn mention(&self, full_name: &str, user_id: Option<i64>) -> Option<String>;
    /// A mention that does not notify, if the transport has one.
    fn silent_mention(&self, full_name: &str, user_id: Option<i64>) -> Option<String>;
}

/// One message of a topic as the chat server has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Said {
    pub sender: String,
    pub at: chrono::DateTime<chrono::Utc>,
    pub content: String,
}

/// A future that may be held across threads.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// What was said in a topic, people's messages included: the domain owns
/// this interface, and the Zulip transport implements it (the seeds'
/// sliding window of a run's topic).
pub trait History: std::fmt::Debug + Send + Sync {
    /// The last `n` messages of a topic, oldest first; `None` when the
    /// server cannot be asked now.
    fn topic_window<'a>(
        &'a self,
        channel: &'a str,
        topic: &'a str,
        n: u32,
    ) -> BoxFuture<'a, Option<Vec<Said>>>;
}

/// How to address the people a run concerns.
#[derive(Debug, Clone)]
pub struct People {
    /// The mention of the profile's owner, whom every escalation and notice
    /// @-mentions: `@**Alex|26**` on Zulip, `@**alex**` in the shell.
    pub owner_fallback: Option<String>,
    /// The profile's approvers: a task's requester is mentioned too only
    /// when they are one of them (anyone else could not answer).
    pub approvers: Vec<crate::profile::UserRef>,
    /// How the transport names requesters.
    pub naming: std::sync::Arc<dyn Naming>,
}

impl People {
    /// The loud mention of whoever must answer about `task`: the profile's
    /// owner, and its requester too when they are an approver. `None` if
    /// there is nobody to mention.
    pub fn owner_of(&self, task: Option<&Task>) -> Option<String> {
        let requester = task.filter(|t| self.requester_approves(t)).and_then(|t| {
            self.naming
                .mention(t.requested_by.as_deref()?, t.requested_by_id)
        });
        match (self.owner_fallback.clone(), requester) {
            (Some(owner), Some(requester)) if owner != requester => {
                Some(format!("{owner} {requester}"))
            }
            (Some(owner), _) => Some(owner),
            (None, requester) => requester,
        }
    }

    /// Whether `task`'s requester is one of the approvers.
    fn requester_approves(&self, task: &Task) -> bool {
        let id = task.requested_by_id.unwrap_or(-1);
        let email = task.requested_by_email.as_deref().unwrap_or_default();
        id >= 0
            && self
                .approvers
                .iter()
                .any(|who| who.matches(id as u64, email))
    }

    /// A silent mention of `task`'s requester, if the transport has one.
    pub fn requester_silently(&self, task: &Task) -> Option<String> {
        let name = task.requested_by.as_deref()?;
        self.naming.silent_mention(name, task.requested_by_id)
    }

    /// The owner's name as plain text, for `waiting_on`.
    pub fn owner_label(&self, task: Option<&Task>) -> String {
        self.owner_fallback
            .as_deref()
            .map(|m| {
                let name = m.trim_start_matches('@').trim_matches('*');
                // `Alex|26` names Alex.
                name.split('|').next().unwrap_or(name).to_string()
            })
            .filter(|n| !n.is_empty())
            .or_else(|| task.and_then(|t| t.requested_by.clone()))
            .unwrap_or_else(|| "the owner".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_on_characters() {
        assert_eq!(cap("abc", 5), "abc");
        assert_eq!(cap("жжжжжж", 3), "жжж…");
    }
}
