//! `eagle shell`: the whole product in one process, with no Zulip.
//!
//! Each line of standard input is a message from the local user in one
//! topic; Eagle's replies go to standard output. The shell is a transport
//! of the daemon ([`crate::daemon`]): the same chat handler
//! ([`crate::chat::handle_message`]), the same loops of both identities
//! (the decider, the runner and the rest) against the same store, and it
//! prints every post about runs (`#executor > run 1 · Исполнитель: …`).
//! With no worker command configured, the runner uses the built-in demo
//! worker.
//!
//! Replies belong to one shell session (its own outbox identity), so two
//! shells never print each other's replies; posts about runs are printed by
//! whichever shell holds the mirror's lease. From a pipe, the shell answers
//! every line, then waits (at most `shell_wait`) until no worker is running
//! or about to start, and exits; a later shell goes on where it stopped.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt, Lines};
use tokio_util::sync::CancellationToken;

use crate::chat::commands::BotNames;
use crate::chat::message::{InboundMessage, Place, Sender};
use crate::chat::{ChatContext, Handled, ReplyCaps, handle_message};
use crate::daemon::{Context, Daemon, Setup, Transport, Voice};
use crate::profile::{Profile, UserRef};
use crate::runtime::lease::Lease;
use crate::runtime::posts::{Naming, People, Poster};
use crate::store::{OutboxKind, Store};

/// The prefix of shell sessions' reply identities (`shell:<session>`).
pub const IDENTITY: &str = "shell";
/// The channel shell messages appear in.
pub const CHANNEL: &str = "shell";
/// The lease a shell holds while it prints posts about runs.
const MIRROR_LEASE: &str = "outbox:shell-mirror";
/// How long the mirror's lease lasts without renewal.
const MIRROR_TTL: Duration = Duration::from_secs(30);

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

/// How the shell names people: `@**name**` (nobody is notified).
#[derive(Debug, Clone, Copy)]
struct ShellNaming;

impl Naming for ShellNaming {
    fn mention(&self, full_name: &str, _: Option<i64>) -> Option<String> {
        let name: String = full_name
            .chars()
            .filter(|c| *c != '*' && *c != '|')
            .collect();
        Some(format!("@**{name}**"))
    }

    fn silent_mention(&self, _: &str, _: Option<i64>) -> Option<String> {
        None
    }
}

/// The identities whose posts the shell prints about runs, and their speakers.
#[derive(Debug, Default)]
struct Mirror {
    /// (outbox identity, display name) of each profile, Eagle's first.
    speakers: Vec<(String, String)>,
}

impl Mirror {
    fn speaker(&self, identity: &str) -> &str {
        self.speakers
            .iter()
            .find(|(id, _)| id == identity)
            .or(self.speakers.first())
            .map_or("", |(_, name)| name.as_str())
    }
}

/// The terminal as the daemon's transport.
struct Terminal<R, W> {
    options: ShellOptions,
    sender: Sender,
    /// This session's reply identity (`shell:<random>`).
    session: String,
    /// Eagle's channel for posts about runs.
    channel: String,
    mirror: Mirror,
    lease: Option<Lease>,
    lines: Lines<R>,
    output: W,
}

/// Runs the shell until `input` ends (and, from a pipe, the work in sight is done).
pub async fn run<R, W>(
    mut setup: Setup,
    options: ShellOptions,
    input: R,
    output: W,
    stop: CancellationToken,
) -> anyhow::Result<()>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let profile = setup
        .eagle
        .as_mut()
        .ok_or_else(|| anyhow::anyhow!("the shell needs Eagle's profile"))?;
    let sender = local_sender(profile, options.user.as_ref(), &options.login);
    // With nobody configured, the person at the keyboard owns the shell.
    if profile.approvers.is_empty() && options.user.is_none() {
        profile.approvers = vec![UserRef::Email(sender.email.clone())];
        profile
            .owner
            .get_or_insert(UserRef::Email(sender.email.clone()));
    }
    let mut terminal = Terminal {
        channel: profile.executor_channel.clone(),
        session: format!("{IDENTITY}:{:08x}", fastrand::u32(..)),
        sender,
        options,
        mirror: Mirror::default(),
        lease: None,
        lines: input.lines(),
        output,
    };
    let ctx = Context::build(setup, &mut terminal).await?;
    terminal.lease = Some(Lease::new(MIRROR_LEASE, ctx.instance.clone(), MIRROR_TTL));
    crate::daemon::run(ctx, terminal, stop).await
}

impl<R, W> Transport for Terminal<R, W>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    async fn voice(&mut self, profile: &Profile) -> Voice {
        let identity = format!("{IDENTITY}/{}", profile.name);
        self.mirror
            .speakers
            .push((identity.clone(), profile.display_name.clone()));
        Voice {
            history: None,
            poster: Poster {
                identity,
                channel: self.channel.clone(),
            },
            people: People {
                owner_fallback: Some(format!("@**{}**", self.options.login)),
                approvers: profile.approvers.clone(),
                naming: Arc::new(ShellNaming),
            },
        }
    }

    async fn listen(&mut self, daemon: &Daemon, stop: &CancellationToken) -> anyhow::Result<()> {
        let ctx = daemon.context();
        let side = ctx
            .eagle
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("the shell needs Eagle's profile"))?;
        let profile = &side.profile;
        // The terminal is connected for as long as it listens.
        for side in [&ctx.eagle, &ctx.executor].into_iter().flatten() {
            crate::ground::metrics::get().connected(&side.profile.name, true);
        }
        // From a pipe, the first import is through before the shell can
        // call itself idle (what it imports is analysed in this session).
        if !self.options.interactive
            && let Some(intake) = ctx.intake()?
        {
            match intake.import().await {
                Ok(summary) => tracing::info!("{}", summary.text()),
                Err(error) => tracing::warn!(%error, "the Asana import failed"),
            }
        }
        if self.options.interactive {
            self.banner(ctx).await?;
        }
        let bot = BotNames {
            full_name: profile.display_name.clone(),
            user_id: None,
        };
        let chat = ChatContext {
            store: &ctx.store,
            profile,
            bot: &bot,
            caps: ReplyCaps {
                reactions: false,
                max_message_chars: 10_000,
            },
            poster: side.voice.poster.clone(),
            limiter: None,
            express: None,
        };
        let mut changes = ctx.store.changes();
        self.deliver_or_warn(&ctx.store).await;
        loop {
            if self.options.interactive {
                self.output.write_all(b"> ").await?;
                self.output.flush().await?;
            }
            let line = loop {
                changes.mark_seen();
                tokio::select! {
                    line = self.lines.next_line() => break line.context("reading standard input")?,
                    _ = changes.changed() => self.deliver_or_warn(&ctx.store).await,
                    _ = stop.cancelled() => return Ok(()),
                }
            };
            let Some(line) = line else { break };
            // The database gone (a restart, a network cut) costs this line,
            // said so, never the session.
            if let Err(error) = handle_line(
                &chat,
                &self.session,
                &self.sender,
                &self.options.topic,
                &bot,
                line,
            )
            .await
            {
                tracing::error!(error = format!("{error:#}"), "a line was not handled");
                let note = format!(
                    "(not handled: {error:#}; type it again once the database answers)\n\n"
                );
                self.output.write_all(note.as_bytes()).await?;
            }
            self.deliver_or_warn(&ctx.store).await;
        }
        if !self.options.interactive {
            self.wait_until_idle(daemon, profile.shell_wait).await?;
        }
        Ok(())
    }

    async fn finish(mut self, daemon: &Daemon) -> anyhow::Result<()> {
        let store = &daemon.context().store;
        self.deliver(store).await?;
        if let Some(lease) = &mut self.lease {
            lease.release(store).await;
        }
        if self.options.interactive {
            self.output.write_all(b"\n").await?;
        }
        self.output.flush().await?;
        Ok(())
    }
}

impl<R, W> Terminal<R, W>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    async fn banner(&mut self, ctx: &Context) -> anyhow::Result<()> {
        let (Some(eagle), Some(executor)) = (&ctx.eagle, &ctx.executor) else {
            return Ok(());
        };
        let worker = match &executor.profile.executor.runner.worker_command {
            Some(command) => format!("workers: {}", command.template),
            None => "workers: the built-in demo worker".into(),
        };
        let banner = format!(
            "{} ({} profile) · database {} · you are {} in #{} > {} · {worker}\n\
             `!help` lists the commands; end of input (Ctrl-D) quits.\n",
            eagle.profile.display_name,
            eagle.profile.name,
            ctx.store.url(),
            self.sender.email,
            CHANNEL,
            self.options.topic
        );
        self.output.write_all(banner.as_bytes()).await?;
        Ok(())
    }

    /// From a pipe, after the last line: waits until nothing is left that
    /// would happen without a human ([`Daemon::idle`]), at most `limit`.
    async fn wait_until_idle(&mut self, daemon: &Daemon, limit: Duration) -> anyhow::Result<()> {
        let store = &daemon.context().store;
        let deadline = tokio::time::Instant::now() + limit;
        let mut changes = store.changes();
        let mut busy = daemon.busy();
        loop {
            changes.mark_seen();
            busy.mark_unchanged();
            self.deliver_or_warn(store).await;
            match daemon.idle().await {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                // Looked at again at the next change or second.
                Err(error) => tracing::warn!(%error, "cannot tell whether work is left"),
            }
            tokio::select! {
                _ = changes.changed() => {}
                _ = busy.changed() => {}
                _ = tokio::time::sleep_until(deadline) => {
                    let running = *busy.borrow();
                    let note = format!(
                        "(still working after {}: {running} worker(s) go on; `eagle shell` again picks them up, `!status` shows them)\n\n",
                        humantime::format_duration(limit)
                    );
                    self.output.write_all(note.as_bytes()).await?;
                    return Ok(());
                }
                // A change in another process (SQLite) is seen by the poll; the
                // runner's own state by `busy`.
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
    }

    /// [`Self::deliver`], with a failure (the database gone for a while)
    /// logged: what is undelivered stays in the outbox for the next try.
    async fn deliver_or_warn(&mut self, store: &Store) {
        if let Err(error) = self.deliver(store).await {
            tracing::warn!(
                error = format!("{error:#}"),
                "cannot print the outbox now; trying again at the next change"
            );
        }
    }

    /// Prints this session's undelivered replies and (if this shell holds
    /// the mirror) the posts about runs, and marks them delivered.
    async fn deliver(&mut self, store: &Store) -> anyhow::Result<()> {
        let mirror_is_ours = match &mut self.lease {
            Some(lease) => lease.hold(store).await.unwrap_or(false),
            None => false,
        };
        loop {
            let mut due = store.outbox().due_outbox(&self.session, 100).await?;
            if mirror_is_ours {
                for (identity, _) in &self.mirror.speakers {
                    due.extend(store.outbox().due_outbox(identity, 100).await?);
                }
                due.sort_by_key(|item| item.id);
                due.dedup_by_key(|item| item.id);
            }
            if due.is_empty() {
                return Ok(());
            }
            for item in due {
                if let OutboxKind::Message { content, to } = &item.kind {
                    let text = if item.identity == self.session {
                        format!("{content}\n\n")
                    } else {
                        let speaker = self.mirror.speaker(&item.identity);
                        let place = match to {
                            crate::store::Destination::Channel { channel, topic } => {
                                format!("#{channel} > {topic}")
                            }
                            crate::store::Destination::Direct { .. } => "a direct message".into(),
                        };
                        format!("{place} · {speaker}: {content}\n")
                    };
                    self.output.write_all(text.as_bytes()).await?;
                    self.output.flush().await?;
                }
                store.outbox().outbox_delivered(item.id, None).await?;
            }
        }
    }
}

/// Where a shell line is posted: `--topic general` is `#shell > general`;
/// `--topic "#executor > run 1"` is that run's own topic.
fn place_of(topic: &str) -> Place {
    match topic
        .strip_prefix('#')
        .and_then(|t| t.split_once(" > "))
        .filter(|(c, t)| !c.trim().is_empty() && !t.trim().is_empty())
    {
        Some((channel, topic)) => Place::Channel {
            channel: channel.trim().to_string(),
            topic: topic.trim().to_string(),
        },
        None => Place::Channel {
            channel: CHANNEL.into(),
            topic: topic.to_string(),
        },
    }
}

async fn handle_line(
    ctx: &ChatContext<'_>,
    session: &str,
    sender: &Sender,
    topic: &str,
    bot: &BotNames,
    line: String,
) -> anyhow::Result<()> {
    loop {
        // Numbered by one counter for every shell session, so the task key
        // `shell:<n>` of this line is no other session's.
        let message_id = {
            let mut tx = ctx.store.begin_write().await?;
            let id = tx.handled().next_local_message_id(IDENTITY).await?;
            tx.commit().await?;
            id
        };
        let message = InboundMessage {
            identity: session.to_string(),
            transport: "shell",
            message_id,
            sender: sender.clone(),
            place: place_of(topic),
            mentioned: crate::chat::commands::strip_leading_mention(&line, bot).is_some(),
            content: line.clone(),
            private: false,
            timestamp: chrono::Utc::now(),
            late: false,
        };
        match handle_message(ctx, &message).await? {
            // Cannot happen with the shared counter; a fresh number is safe.
            Handled::Duplicate => continue,
            Handled::Ignored | Handled::Replied { .. } => return Ok(()),
        }
    }
}
