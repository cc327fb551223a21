//! What a command's handler works with and what it answers.
//!
//! [`CommandContext`] is the command layer's own view of a message being
//! handled: its transaction, the profile, the bot's names, the poster, the
//! message. The chat layer builds one per message from its wider context, so
//! nothing here needs the chat layer.

use super::BotNames;
use crate::chat::message::InboundMessage;
use crate::ground::text::{neutralize_mentions, one_line};
use crate::profile::Profile;
use crate::runtime::posts::Poster;
use crate::store::{Run, StoreError, Tx};

/// A command's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandReply {
    pub text: String,
    /// Whether the command did what was asked (✅) or not (❌).
    pub ok: bool,
}

impl CommandReply {
    pub(super) fn ok(text: impl Into<String>) -> Self {
        CommandReply {
            text: text.into(),
            ok: true,
        }
    }

    pub(super) fn refused(text: impl Into<String>) -> Self {
        CommandReply {
            text: text.into(),
            ok: false,
        }
    }
}

/// Everything a handler may use while it carries out one command.
///
/// Handlers read and write through [`CommandContext::tx`], the message's own
/// transaction, so a command's effect, its reply in the outbox and the mark
/// that the message was handled commit together or not at all.
pub struct CommandContext<'t, 'a> {
    pub tx: &'t mut Tx,
    pub profile: &'a Profile,
    pub bot: &'a BotNames,
    /// Where the approver commands post about runs (the executor channel, as Eagle).
    pub poster: &'a Poster,
    pub message: &'a InboundMessage,
    /// The longest message the transport sends, in characters (`!show`
    /// fits each part of a request in one).
    pub max_message_chars: usize,
    /// How many `!queue` commands of this message captured a task so far:
    /// each gets its own task id.
    queued: usize,
}

impl<'t, 'a> CommandContext<'t, 'a> {
    /// A context for the commands of `message`, all in `tx`.
    pub fn new(
        tx: &'t mut Tx,
        profile: &'a Profile,
        bot: &'a BotNames,
        poster: &'a Poster,
        message: &'a InboundMessage,
    ) -> Self {
        CommandContext {
            tx,
            profile,
            bot,
            poster,
            message,
            max_message_chars: 10_000,
            queued: 0,
        }
    }

    /// Whether the sender is one of the profile's approvers.
    pub fn sender_is_approver(&self) -> bool {
        let sender = &self.message.sender;
        self.profile
            .is_approver(sender.user_id as u64, &sender.email)
    }

    /// Whether the sender is a bot: any bot, this one, or the executor's.
    pub fn sender_is_a_bot(&self) -> bool {
        let sender = &self.message.sender;
        sender.is_bot
            || Some(sender.user_id) == self.bot.user_id
            || self
                .profile
                .eagle
                .executor_bot
                .as_ref()
                .is_some_and(|bot| bot.matches(sender.user_id as u64, &sender.email))
    }

    /// The ordinal of the next task this message captures (1, 2, …).
    pub(super) fn next_queued(&mut self) -> usize {
        self.queued += 1;
        self.queued
    }

    /// The sender's name as it may appear in a post: one line, no mentions.
    pub(super) fn who(&self) -> String {
        neutralize_mentions(&one_line(&self.message.sender.full_name, 80))
    }

    /// Posts in a run's topic as Eagle.
    pub(super) async fn post(&mut self, run: &Run, text: &str) -> Result<(), StoreError> {
        self.poster.post(self.tx, &run.topic(), text).await?;
        Ok(())
    }

    /// The run whose topic this message was posted in (`#executor > run 42`),
    /// for commands that may leave the run's id out there.
    pub(super) async fn topic_run(&mut self) -> Result<Option<Run>, StoreError> {
        let crate::chat::message::Place::Channel { channel, topic } = &self.message.place else {
            return Ok(None);
        };
        if !crate::ground::text::eq_fold(channel, &self.profile.executor_channel) {
            return Ok(None);
        }
        self.tx.tasks().run_by_thread(topic).await
    }

    /// The run a command names, or the run of the topic it was typed in.
    pub(super) async fn named_or_topic_run(
        &mut self,
        id: Option<i64>,
        usage: &str,
    ) -> Result<Result<Run, CommandReply>, StoreError> {
        match id {
            Some(id) => self.run_or_refuse(id).await,
            None => Ok(self.topic_run().await?.ok_or_else(|| {
                CommandReply::refused(format!(
                    "Which run? Name it (`{usage}`), or type the command in the run's own topic \
                     in #{}.",
                    self.profile.executor_channel
                ))
            })),
        }
    }

    /// The run with this id, or the answer that there is none.
    pub(super) async fn run_or_refuse(
        &mut self,
        id: i64,
    ) -> Result<Result<Run, CommandReply>, StoreError> {
        Ok(match self.tx.tasks().run(id).await? {
            Some(run) => Ok(run),
            None => Err(CommandReply::refused(format!(
                "There is no run {id}. `!status` lists the open ones."
            ))),
        })
    }
}
