//! `!confirm`: the asker puts the task Eagle understood from their words
//! into the inbox. Eagle's language backend only proposes a task
//! ([`crate::chat::conversation`]); nothing is captured from prose until the
//! person who asked confirms it here.

use super::parse::id;
use super::{Access, ChatCommand, CommandContext, CommandReply, CommandSpec, Handler, ParseError};
use crate::chat::message::{InboundMessage, Place};
use crate::store::{Destination, StoreError};

/// `!confirm [proposal id]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirm {
    pub proposal: Option<i64>,
}

impl ChatCommand for Confirm {
    const SPEC: CommandSpec = CommandSpec {
        name: "confirm",
        args: "[proposal id]",
        summary: "queue the task Eagle understood from your message",
        details: "When you ask Eagle for work in your own words, it answers with the title it \
                  understood and `!confirm <n>`; that puts the task into the inbox. A bare \
                  `!confirm` takes your newest proposal in this conversation. Only the person \
                  who asked can confirm; `!queue <title>` captures without asking.",
        access: Access::Anyone,
    };

    fn parse(args: &str, _body: &[&str]) -> Result<Self, ParseError> {
        match args.split_whitespace().collect::<Vec<_>>().as_slice() {
            [] => Ok(Confirm { proposal: None }),
            [one] => id(one, "proposal")
                .map(|n| Confirm { proposal: Some(n) })
                .map_err(|m| ParseError::usage(&Self::SPEC, m)),
            _ => Err(ParseError::usage(
                &Self::SPEC,
                "`!confirm` takes at most the proposal's number.",
            )),
        }
    }
}

impl Handler for Confirm {
    async fn handle(&self, cx: &mut CommandContext<'_, '_>) -> Result<CommandReply, StoreError> {
        let within = cx
            .profile
            .eagle
            .conversation
            .as_ref()
            .map_or(std::time::Duration::from_secs(24 * 3600), |c| {
                c.confirm_within
            });
        let since = crate::store::now()
            - chrono::TimeDelta::from_std(within).unwrap_or(chrono::TimeDelta::days(1));
        let here = cx.message.reply_destination();
        let Some(proposal) = cx
            .tx
            .conversations()
            .open_proposal(cx.message.sender.user_id, self.proposal, &here, since)
            .await?
        else {
            return Ok(CommandReply::refused(match self.proposal {
                Some(n) => format!(
                    "No proposal {n} of yours waits for confirmation (it may be someone else's, \
                     confirmed already, or older than {}). `!queue <title>` captures a task.",
                    humantime::format_duration(within)
                ),
                None => "No proposed task of yours waits for confirmation here. \
                         `!queue <title>` captures a task."
                    .into(),
            }));
        };
        let title = proposal.proposed_title.clone().unwrap_or_default();
        let description = proposal.proposed_description.clone().unwrap_or_default();
        // The task is the asking message's: its origin, its requester.
        let asked = InboundMessage {
            identity: proposal.identity.clone(),
            transport: if proposal.transport == "shell" {
                "shell"
            } else {
                "zulip"
            },
            message_id: proposal.message_id,
            sender: cx.message.sender.clone(),
            place: match &proposal.to {
                Destination::Channel { channel, topic } => Place::Channel {
                    channel: channel.clone(),
                    topic: topic.clone(),
                },
                Destination::Direct { user_ids } => Place::Direct {
                    user_ids: user_ids
                        .iter()
                        .copied()
                        .filter(|id| *id != proposal.asker_id)
                        .collect(),
                },
            },
            content: proposal.text.clone(),
            mentioned: true,
            private: proposal.private,
            timestamp: proposal.asked_at,
            late: false,
        };
        let mut reply = super::queue_task(
            cx.tx,
            &asked,
            &super::NewQueued {
                title: &title,
                description: &description,
                repo: None,
            },
            1,
        )
        .await?;
        if let Some(task) = cx
            .tx
            .tasks()
            .task_by_gid(&super::task_gid(&asked, 1))
            .await?
        {
            cx.tx
                .conversations()
                .capture_proposal(proposal.id, task.id)
                .await?;
        }
        reply.text.push_str(" (confirmed from your message)");
        Ok(reply)
    }
}
