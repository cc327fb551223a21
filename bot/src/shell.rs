//! `eagle shell`: the whole product in one process, with no Zulip.
//!
//! Each line of standard input is a message from the local user in one
//! topic; Eagle's replies go to standard output. It runs the same chat
//! handler ([`crate::chat::handle_message`]), the same decider
//! ([`crate::decisions`]) and the same runner ([`crate::runner`]) as `eagle
//! run`, against the same store, and prints every post about runs
//! (`#executor > run 1 · Исполнитель: …`). With no worker command
//! configured, the runner uses the built-in demo worker.
//!
//! Replies belong to one shell session (its own outbox identity), so two
//! shells never print each other's replies; posts about runs are printed by
//! whichever shell holds the mirror's lease. From a pipe, the shell answers
//! every line, then waits (at most `shell_wait`) until no worker is running
//! or about to start, and exits; a later shell goes on where it stopped.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::time::Duration;

use anyhow::Context as _;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use crate::chat::{ChatContext, Handled, ReplyCaps, handle_message};
use crate::commands::BotNames;
use crate::decisions::{Decider, DeciderSettings};
use crate::message::{InboundMessage, Place, Sender};
use crate::mirror::{People, Poster};
use crate::profile::{Profile, UserRef};
use crate::runner::{Runner, RunnerOptions};
use crate::store::{OutboxKind, Store};

/// The prefix of shell sessions' reply identities (`shell:<session>`).
pub const IDENTITY: &str = "shell";
/// The channel shell messages appear in.
pub const CHANNEL: &str = "shell";
/// The lease a shell holds while it prints posts about runs.
const MIRROR_LEASE: &str = "outbox:shell-mirror";

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
    /// The executor profile whose runner settings the shell's runner uses.
    pub executor: Option<Profile>,
    /// The process environment (what workers may be given of it).
    pub env: BTreeMap<String, String>,
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

/// The identities whose posts the shell prints about runs, and their speakers.
struct Mirror {
    eagle: Poster,
    executor: Poster,
    eagle_name: String,
    executor_name: String,
}

/// Runs the shell until `input` ends (and, from a pipe, the work in sight is done).
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
    let sender = local_sender(profile, options.user.as_ref(), &options.login);
    // With nobody configured, the person at the keyboard owns the shell.
    let mut profile = profile.clone();
    if profile.approvers.is_empty() && options.user.is_none() {
        profile.approvers = vec![UserRef::Email(sender.email.clone())];
        profile
            .owner
            .get_or_insert(UserRef::Email(sender.email.clone()));
    }
    let profile = &profile;
    let session = format!("{IDENTITY}:{:08x}", fastrand::u32(..));
    let executor_profile = options.executor.as_ref().unwrap_or(profile);
    let mirror = Mirror {
        eagle: Poster {
            identity: format!("{IDENTITY}/{}", profile.name),
            channel: profile.executor_channel.clone(),
        },
        executor: Poster {
            identity: format!("{IDENTITY}/{}", executor_profile.name),
            channel: profile.executor_channel.clone(),
        },
        eagle_name: profile.display_name.clone(),
        executor_name: executor_profile.display_name.clone(),
    };
    let bot = BotNames {
        full_name: profile.display_name.clone(),
        user_id: None,
    };
    let policy = crate::policy::PolicyHost::for_profile(profile).await?;
    let ctx = ChatContext {
        store,
        profile,
        bot: &bot,
        caps: ReplyCaps {
            reactions: false,
            max_message_chars: 10_000,
        },
        poster: mirror.eagle.clone(),
        limiter: None,
        express: None,
    };
    let people = People {
        owner_fallback: Some(format!("@**{}**", options.login)),
        zulip: false,
    };
    let stop = CancellationToken::new();
    let analyzer = crate::analyzer::Analyzer::for_profile(
        profile,
        store.clone(),
        policy.clone(),
        mirror.eagle.clone(),
        false,
        &options.env,
    )?;
    let decider = Decider {
        store: store.clone(),
        policy: policy.clone(),
        poster: mirror.eagle.clone(),
        people: people.clone(),
        settings: DeciderSettings {
            reminder_after: profile.decisions.reminder_after,
            approval_ttl: profile.decisions.approval_ttl,
        },
    };
    let runner = Runner::new(
        executor_profile,
        store.clone(),
        RunnerOptions {
            identity: mirror.executor.identity.clone(),
            people: people.clone(),
            demo_if_unset: true,
            exe: None,
        },
        options.env.clone(),
    )?;
    let prs = crate::prloop::PrLoop::for_profile(
        executor_profile,
        store.clone(),
        mirror.executor.clone(),
        people.clone(),
    )?;
    let carrier = crate::carry::Carrier::for_profile(profile, store.clone(), mirror.eagle.clone())?;
    let intake = crate::intake::Intake::for_profile(profile, store.clone())?;
    // From a pipe, the first import is through before the shell can call
    // itself idle (what it imports is analysed in this session).
    if let Some(intake) = &intake
        && !options.interactive
    {
        match intake.import().await {
            Ok(summary) => tracing::info!("{}", summary.text()),
            Err(error) => tracing::warn!(%error, "the Asana import failed"),
        }
    }
    let mut active = runner.active();
    let tasks = {
        let mut tasks = vec![
            tokio::spawn({
                let (d, stop) = (decider.clone(), stop.clone());
                async move { d.run(stop).await }
            }),
            tokio::spawn({
                let (r, stop) = (runner.clone(), stop.clone());
                async move { r.run(stop).await }
            }),
            tokio::spawn({
                let stop = stop.clone();
                async move { analyzer.run(stop).await }
            }),
            tokio::spawn({
                let stop = stop.clone();
                async move { prs.run(stop).await }
            }),
            tokio::spawn({
                let stop = stop.clone();
                async move { carrier.run(stop).await }
            }),
        ];
        if let Some(intake) = intake {
            let stop = stop.clone();
            tasks.push(tokio::spawn(async move { intake.run(stop).await }));
        }
        tasks
    };
    if options.interactive {
        let worker = match &executor_profile.runner.worker_command {
            Some(command) => format!("workers: {}", command.template),
            None => "workers: the built-in demo worker".into(),
        };
        let banner = format!(
            "{} ({} profile) · database {} · you are {} in #{} > {} · {worker}\n\
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
    let mut lease = MirrorLease {
        instance: crate::host::instance_name(),
        renewed: None,
        held: false,
    };
    let instance = &mut lease;
    let mut changes = store.changes();
    let mut lines = input.lines();
    let mut input_open = true;
    deliver(store, &mut output, &session, &mirror, instance).await?;
    while input_open {
        if options.interactive {
            output.write_all(b"> ").await?;
            output.flush().await?;
        }
        let line = loop {
            changes.mark_seen();
            tokio::select! {
                line = lines.next_line() => break line.context("reading standard input")?,
                _ = changes.changed() => {
                    deliver(store, &mut output, &session, &mirror, instance).await?;
                }
            }
        };
        let Some(line) = line else {
            input_open = false;
            continue;
        };
        handle_line(&ctx, store, &session, &sender, &options.topic, &bot, line).await?;
        deliver(store, &mut output, &session, &mirror, instance).await?;
    }
    if !options.interactive {
        wait_until_idle(
            store,
            &mut output,
            &session,
            &mirror,
            instance,
            &mut active,
            profile.shell_wait,
        )
        .await?;
    }
    stop.cancel();
    for task in tasks {
        let _ = task.await;
    }
    deliver(store, &mut output, &session, &mirror, instance).await?;
    let _ = store.release_lease(MIRROR_LEASE, &instance.instance).await;
    if options.interactive {
        output.write_all(b"\n").await?;
    }
    output.flush().await?;
    Ok(())
}

async fn handle_line(
    ctx: &ChatContext<'_>,
    store: &Store,
    session: &str,
    sender: &Sender,
    topic: &str,
    bot: &BotNames,
    line: String,
) -> anyhow::Result<()> {
    loop {
        let message_id = {
            let mut tx = store.begin_read().await?;
            tx.next_local_message_id(session).await?
        };
        let message = InboundMessage {
            identity: session.to_string(),
            transport: "shell",
            message_id,
            sender: sender.clone(),
            place: Place::Channel {
                channel: CHANNEL.into(),
                topic: topic.to_string(),
            },
            mentioned: crate::commands::strip_leading_mention(&line, bot).is_some(),
            content: line.clone(),
            private: false,
            timestamp: chrono::Utc::now(),
            late: false,
        };
        match handle_message(ctx, &message).await? {
            // Another shell of this session took this number first.
            Handled::Duplicate => continue,
            Handled::Ignored | Handled::Replied { .. } => return Ok(()),
        }
    }
}

/// From a pipe, after the last line: waits until no worker runs and none is
/// about to start (and Eagle has nothing left to decide), at most `limit`.
async fn wait_until_idle<W: AsyncWrite + Unpin>(
    store: &Store,
    output: &mut W,
    session: &str,
    mirror: &Mirror,
    instance: &mut MirrorLease,
    active: &mut tokio::sync::watch::Receiver<usize>,
    limit: Duration,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + limit;
    let mut changes = store.changes();
    loop {
        changes.mark_seen();
        deliver(store, output, session, mirror, &mut *instance).await?;
        let running = *active.borrow_and_update();
        // Idle: no worker, nothing to claim or decide, nothing pending
        // analysis, nothing asked of the analyzer, no PR not looked at,
        // nothing approved that Eagle has yet to carry out.
        if running == 0
            && store.work_in_sight().await? == 0
            && store.pending_count().await? == 0
            && store.open_analyzer_jobs().await?.is_empty()
            && store.prs_to_look_at().await? == 0
            && store.requests_to_carry_out(1).await?.is_empty()
        {
            return Ok(());
        }
        tokio::select! {
            _ = changes.changed() => {}
            _ = active.changed() => {}
            _ = tokio::time::sleep_until(deadline) => {
                let note = format!(
                    "(still working after {}: {running} worker(s) go on; `eagle shell` again picks them up, `!status` shows them)\n\n",
                    humantime::format_duration(limit)
                );
                output.write_all(note.as_bytes()).await?;
                return Ok(());
            }
            // A change in another process (SQLite) is seen by the poll; the
            // runner's own state by `active`.
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

/// Which shell prints the posts about runs: one at a time.
struct MirrorLease {
    instance: String,
    renewed: Option<std::time::Instant>,
    held: bool,
}

impl MirrorLease {
    /// Takes or renews the lease, at most every few seconds (a renewal is a
    /// write, and a write wakes every watcher).
    async fn held(&mut self, store: &Store) -> bool {
        if self
            .renewed
            .is_some_and(|at| at.elapsed() < Duration::from_secs(10))
        {
            return self.held;
        }
        let mut held = store
            .acquire_lease(MIRROR_LEASE, &self.instance, Duration::from_secs(30))
            .await
            .unwrap_or(false);
        if !held
            && let Ok(Some(owner)) = store.lease_owner(MIRROR_LEASE).await
            && crate::host::holder_is_dead(&owner)
        {
            let _ = store.release_lease(MIRROR_LEASE, &owner).await;
            held = store
                .acquire_lease(MIRROR_LEASE, &self.instance, Duration::from_secs(30))
                .await
                .unwrap_or(false);
        }
        self.renewed = Some(std::time::Instant::now());
        self.held = held;
        held
    }
}

/// Prints this session's undelivered replies and (if this shell holds the
/// mirror) the posts about runs, and marks them delivered.
async fn deliver<W: AsyncWrite + Unpin>(
    store: &Store,
    output: &mut W,
    session: &str,
    mirror: &Mirror,
    lease: &mut MirrorLease,
) -> anyhow::Result<()> {
    let mirror_is_ours = lease.held(store).await;
    loop {
        let mut due = store.due_outbox(session, 100).await?;
        if mirror_is_ours {
            for poster in [&mirror.eagle, &mirror.executor] {
                due.extend(store.due_outbox(&poster.identity, 100).await?);
            }
            due.sort_by_key(|item| item.id);
        }
        if due.is_empty() {
            return Ok(());
        }
        for item in due {
            if let OutboxKind::Message { content, to } = &item.kind {
                let text = if item.identity == session {
                    format!("{content}\n\n")
                } else {
                    let speaker = if item.identity == mirror.executor.identity {
                        &mirror.executor_name
                    } else {
                        &mirror.eagle_name
                    };
                    let place = match to {
                        crate::store::Destination::Channel { channel, topic } => {
                            format!("#{channel} > {topic}")
                        }
                        crate::store::Destination::Direct { .. } => "a direct message".into(),
                    };
                    format!("{place} · {speaker}: {content}\n")
                };
                output.write_all(text.as_bytes()).await?;
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
