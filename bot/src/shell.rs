//! `eagle shell`: the local chat transport.
//!
//! Each line of standard input is a message from the local user in one topic;
//! Eagle's replies go to standard output. It runs the same handler
//! ([`crate::chat::handle_message`]) against the same store as `eagle run`,
//! and delivers its replies through the same outbox, so it is a faithful way
//! to use Eagle without a Zulip server. It works interactively and from a
//! pipe, and exits at end of input.

use std::io::IsTerminal;

use anyhow::Context as _;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};

use crate::chat::{ChatContext, Handled, InboundMessage, Place, ReplyCaps, Sender, handle_message};
use crate::commands::BotNames;
use crate::profile::{Profile, UserRef};
use crate::store::{OutboxKind, Store};

/// The identity under which the shell's messages are recorded.
pub const IDENTITY: &str = "shell";
/// The channel name shell messages appear in.
pub const CHANNEL: &str = "shell";

/// Options of one shell session.
#[derive(Debug, Clone)]
pub struct ShellOptions {
    /// The topic the messages are posted in.
    pub topic: String,
    /// Who the local user is (email or id); by default the profile's owner.
    pub user: Option<UserRef>,
    /// The local login name (`$USER`), shown as the sender's name.
    pub login: String,
    /// Print a banner and prompts (when standard input is a terminal).
    pub interactive: bool,
}

/// The local user as a message sender.
fn local_sender(profile: &Profile, user: Option<&UserRef>, login: &str) -> Sender {
    let who = user.or(profile.owner.as_ref());
    let (user_id, email) = match who {
        Some(UserRef::Id(id)) => (*id as i64, format!("{login}@localhost")),
        Some(UserRef::Email(email)) => (0, email.clone()),
        None => (0, format!("{login}@localhost")),
    };
    Sender {
        user_id,
        email,
        full_name: login.to_string(),
        is_bot: false,
    }
}

/// Runs the shell until `input` ends.
pub async fn run<R, W>(
    profile: &Profile,
    store: &Store,
    options: &ShellOptions,
    input: R,
    mut output: W,
) -> anyhow::Result<()>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let bot = BotNames {
        full_name: profile.display_name.clone(),
        user_id: None,
    };
    let ctx = ChatContext {
        store,
        profile,
        bot: &bot,
        caps: ReplyCaps {
            reactions: false,
            max_message_chars: 10_000,
        },
        track_bookmark: false,
    };
    let sender = local_sender(profile, options.user.as_ref(), &options.login);
    if options.interactive {
        let banner = format!(
            "{} ({} profile) · database {} · you are {} in #{} > {}\n\
             `!help` lists the commands; end of input (Ctrl-D) quits.\n",
            profile.display_name,
            profile.name,
            store.url(),
            sender.email,
            CHANNEL,
            options.topic
        );
        output.write_all(banner.as_bytes()).await?;
    }
    // Replies a previous session stored but never printed come first.
    deliver(store, &mut output).await?;
    let mut lines = input.lines();
    loop {
        if options.interactive {
            output.write_all(b"> ").await?;
            output.flush().await?;
        }
        let Some(line) = lines.next_line().await.context("reading standard input")? else {
            break;
        };
        loop {
            let message_id = {
                let mut tx = store.begin_read().await?;
                tx.next_local_message_id(IDENTITY).await?
            };
            let message = InboundMessage {
                identity: IDENTITY.into(),
                transport: "shell",
                message_id,
                sender: sender.clone(),
                place: Place::Channel {
                    channel: CHANNEL.into(),
                    topic: options.topic.clone(),
                },
                mentioned: crate::commands::strip_leading_mention(&line, &bot).is_some(),
                content: line.clone(),
                private: false,
                timestamp: chrono::Utc::now(),
                late: false,
            };
            match handle_message(&ctx, &message).await? {
                // Another shell took this number first: take the next one.
                Handled::Duplicate => continue,
                Handled::Ignored | Handled::Replied { .. } => break,
            }
        }
        deliver(store, &mut output).await?;
    }
    if options.interactive {
        output.write_all(b"\n").await?;
    }
    output.flush().await?;
    Ok(())
}

/// Prints the shell's undelivered replies and marks them delivered.
async fn deliver<W: AsyncWrite + Unpin>(store: &Store, output: &mut W) -> anyhow::Result<()> {
    loop {
        let due = store.due_outbox(IDENTITY, 100).await?;
        if due.is_empty() {
            return Ok(());
        }
        for item in due {
            if let OutboxKind::Message { content, .. } = &item.kind {
                output.write_all(content.as_bytes()).await?;
                output.write_all(b"\n\n").await?;
                output.flush().await?;
            }
            store.outbox_delivered(item.id, None).await?;
        }
    }
}

/// Whether standard input is a terminal (then the shell shows prompts).
pub fn stdin_is_terminal() -> bool {
    std::io::stdin().is_terminal()
}
