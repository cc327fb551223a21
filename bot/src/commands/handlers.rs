//! What each command does, inside the caller's transaction.
//!
//! Handlers read and write through the [`Tx`] they are given, so a command's
//! effect, its reply in the outbox and the mark that the message was handled
//! commit together or not at all.

use super::{Access, Command, StatusQuery, help_text};
use crate::chat::ChatContext;
use crate::message::{InboundMessage, Place};
use crate::store::{NewAuditEntry, NewTask, Origin, StoreError, Tx};

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

/// Carries out one command of `message`. `ordinal` numbers the `!queue`
/// commands of one message, so that each gets its own task id.
pub async fn execute(
    tx: &mut Tx,
    ctx: &ChatContext<'_>,
    message: &InboundMessage,
    command: &Command,
    ordinal: usize,
) -> Result<CommandReply, StoreError> {
    let profile = ctx.profile;
    let spec = command.spec();
    if spec.access == Access::Approvers
        && !profile.is_approver(message.sender.user_id as u64, &message.sender.email)
    {
        let why = if profile.approvers.is_empty() {
            "this profile has no approvers configured"
        } else {
            "you are not in this profile's approvers"
        };
        return Ok(CommandReply::refused(format!(
            "You may not use `!{}`: {why}. It changes what runs, so only approvers may.",
            spec.name
        )));
    }
    if spec.access == Access::Approvers && is_a_bot(ctx, message) {
        // The executor bot (or any bot) can never approve, whatever its settings.
        return Ok(CommandReply::refused(format!(
            "Bots may not use `!{}`: only people decide what runs.",
            spec.name
        )));
    }
    use super::status;
    let approver = profile.is_approver(message.sender.user_id as u64, &message.sender.email);
    match command {
        Command::Help { command } => Ok(CommandReply::ok(help_text(*command))),
        Command::Queue { title: None, .. } => {
            status::overview(tx, message, approver, 1, false).await
        }
        Command::Queue {
            title: Some(title),
            description,
        } => queue(tx, message, title, description, ordinal).await,
        Command::Status(StatusQuery::Overview { page }) => {
            status::overview(tx, message, approver, *page, true).await
        }
        Command::Status(StatusQuery::Task(id)) => {
            status::task_status(tx, message, approver, *id).await
        }
        Command::Status(StatusQuery::Run(id)) => {
            status::run_status(tx, message, approver, *id).await
        }
        Command::Why(target) => status::why(tx, message, *target).await,
        control => super::control::execute(tx, ctx, message, control).await,
    }
}

fn is_a_bot(ctx: &ChatContext<'_>, message: &InboundMessage) -> bool {
    message.sender.is_bot
        || Some(message.sender.user_id) == ctx.bot.user_id
        || ctx
            .profile
            .executor_bot
            .as_ref()
            .is_some_and(|bot| bot.matches(message.sender.user_id as u64, &message.sender.email))
}

/// The task id a captured message gets: `zulip:<message id>`, with `#n` for
/// the second and later `!queue` lines of one message.
pub fn task_gid(message: &InboundMessage, ordinal: usize) -> String {
    let base = format!("{}:{}", message.transport, message.message_id);
    if ordinal <= 1 {
        base
    } else {
        format!("{base}#{ordinal}")
    }
}

/// Captures a task into the inbox (from `!queue` or an @-mention).
pub async fn queue(
    tx: &mut Tx,
    message: &InboundMessage,
    title: &str,
    description: &str,
    ordinal: usize,
) -> Result<CommandReply, StoreError> {
    let (channel, topic) = match &message.place {
        Place::Channel { channel, topic } => (Some(channel.clone()), Some(topic.clone())),
        Place::Direct { .. } => (None, None),
    };
    let gid = task_gid(message, ordinal);
    let new = NewTask {
        task_gid: gid.clone(),
        source: "chat".into(),
        title: title.to_string(),
        description: description.to_string(),
        requested_by: Some(message.sender.full_name.clone()),
        requested_by_id: Some(message.sender.user_id),
        origin: Origin {
            transport: message.transport.to_string(),
            channel,
            topic,
            message_id: Some(message.message_id),
            private: message.private,
        },
    };
    match tx.insert_task(&new).await? {
        Some(id) => {
            tx.audit(&NewAuditEntry {
                actor: message.sender_actor(),
                action: "task.queued".into(),
                subject: format!("task:{id}"),
                reason: Some(format!("captured from {}", message.place)),
                source_message_id: Some(message.message_id),
                ..NewAuditEntry::default()
            })
            .await?;
            Ok(CommandReply::ok(format!("Queued task #{id}: {title}")))
        }
        None => {
            let existing = tx.task_by_gid(&gid).await?;
            let id = existing.map(|t| t.id).unwrap_or_default();
            Ok(CommandReply::ok(format!(
                "This message was queued already as task #{id}."
            )))
        }
    }
}
