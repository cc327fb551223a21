//! Chat, independent of the transport: an inbound message in, effects and a
//! reply out, in one transaction.
//!
//! Both transports (Zulip in [`crate::transport::zulip`], the local [`crate::transport::shell`])
//! turn what they receive into an [`InboundMessage`] and call
//! [`handle_message`]. It claims the message in `processed_messages` first and
//! acts only if that insert won, so a message is handled at most once even
//! across restarts, back-fills and a second instance; the reply goes into the
//! outbox in the same transaction, so a crash between doing and saying loses
//! nothing.

pub mod commands;
pub mod conversation;
pub mod digest;
pub mod message;
pub mod milestones;

mod small_talk;

use crate::chat::commands::{BotNames, CommandContext, CommandReply, Invocation, parse_message};
use crate::chat::message::{InboundMessage, Place};
use crate::profile::{Profile, Role};
use crate::store::{NewOutboxItem, OutboxItem, OutboxKind, Store, StoreError, Tx};

/// The reaction once a command did what was asked.
pub const EMOJI_DONE: &str = "check";
/// The reaction when a command was refused or failed.
pub const EMOJI_FAILED: &str = "cross_mark";

/// What the transport can do with replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyCaps {
    /// Whether to acknowledge with reactions.
    pub reactions: bool,
    /// The server's longest message, in characters; longer replies are split.
    pub max_message_chars: usize,
}

/// What became of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handled {
    /// Not for this bot: no commands, no mention. Nothing was stored.
    Ignored,
    /// Handled before (earlier run, back-fill or another instance): nothing done.
    Duplicate,
    /// Handled now; this many outbox entries wait for delivery, `handed`
    /// of them in the sender's lane.
    Replied { outbox: usize, handed: usize },
}

/// Everything the handler needs to know about the bot.
#[derive(Debug, Clone)]
pub struct ChatContext<'a> {
    pub store: &'a Store,
    pub profile: &'a Profile,
    pub bot: &'a BotNames,
    pub caps: ReplyCaps,
    /// Where Eagle posts about runs (the executor channel, under its identity).
    pub poster: crate::runtime::posts::Poster,
    /// How many messages each sender may send a minute (Zulip; the shell has none).
    pub limiter: Option<&'a SenderLimiter>,
    /// The sender in this process, if it takes replies straight from the
    /// handling transaction (Zulip).
    pub express: Option<&'a ExpressLane>,
}

/// The short way from the handling transaction to the sender of this
/// process, for replies nothing else is waiting to send before.
///
/// Normally a reply is stored, then the sender reads it back and records its
/// attempt (each a database round trip) before the request. When this
/// process's sender holds the outbox lease with time to spare and nothing
/// is undelivered before the reply in its topic, the handling transaction
/// stores the reply with its attempt already recorded and hands it over in
/// memory: the request goes out right after the commit. The lease check in
/// the same transaction keeps delivery exactly-once; a reply that waits too
/// long in the lane is gated through the database as usual.
#[derive(Debug)]
pub struct ExpressLane {
    lease: String,
    owner: String,
    /// What the lease must have left when a reply is handed over.
    margin: std::time::Duration,
    /// Handed over (or about to be) and not settled by the sender: the
    /// sender's own reading of the outbox leaves these alone.
    pending: std::sync::Mutex<std::collections::HashSet<i64>>,
    lane: tokio::sync::mpsc::UnboundedSender<ExpressItem>,
}

/// A reply handed to the sender; its lease was checked at `stored_at`.
#[derive(Debug)]
pub struct ExpressItem {
    pub item: OutboxItem,
    pub stored_at: std::time::Instant,
    /// The undelivered entries before it in its topic when it was stored,
    /// all in the lane then: it goes out directly only after they did.
    pub after: Vec<i64>,
}

impl ExpressLane {
    /// A lane for the sender holding `lease` as `owner`; the sender reads
    /// the receiver.
    pub fn new(
        lease: String,
        owner: String,
        margin: std::time::Duration,
    ) -> (
        ExpressLane,
        tokio::sync::mpsc::UnboundedReceiver<ExpressItem>,
    ) {
        let (lane, rx) = tokio::sync::mpsc::unbounded_channel();
        let express = ExpressLane {
            lease,
            owner,
            margin,
            pending: std::sync::Mutex::new(std::collections::HashSet::new()),
            lane,
        };
        (express, rx)
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<i64>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether an entry is in the lane (the sender's pass skips it).
    pub fn is_pending(&self, id: i64) -> bool {
        self.pending().contains(&id)
    }

    /// The sender is done with an entry (delivered, failed or given back).
    pub fn settled(&self, id: i64) {
        self.pending().remove(&id);
    }
}

/// Replies stored for the express lane: handed over after the commit, or
/// released from the lane's pending set if the transaction never commits.
struct Reserved<'a> {
    lane: &'a ExpressLane,
    items: Vec<OutboxItem>,
    /// The lane entries before these in their topic.
    after: Vec<i64>,
    /// When the lease was checked (the margin counts from then).
    checked_at: std::time::Instant,
}

impl Reserved<'_> {
    /// Hands the replies to the sender; returns how many it took.
    fn hand_over(mut self) -> usize {
        let mut handed = 0;
        for item in std::mem::take(&mut self.items) {
            let id = item.id;
            let stored_at = self.checked_at;
            // Each part comes after the ones before it, too.
            let after = self.after.clone();
            self.after.push(id);
            if self
                .lane
                .lane
                .send(ExpressItem {
                    item,
                    stored_at,
                    after,
                })
                .is_ok()
            {
                handed += 1;
            } else {
                // The sender is gone: the entry waits in the outbox.
                self.lane.settled(id);
            }
        }
        handed
    }
}

impl Drop for Reserved<'_> {
    fn drop(&mut self) {
        for item in &self.items {
            self.lane.settled(item.id);
        }
    }
}

/// Counts each sender's messages per minute: past `chat.sender_rate`, their
/// messages are skipped, with one notice per window. Approvers are exempt.
#[derive(Debug)]
pub struct SenderLimiter {
    per_minute: u32,
    window: std::time::Duration,
    seen: std::sync::Mutex<std::collections::HashMap<i64, (std::time::Instant, u32)>>,
}

/// What the limiter says about one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pace {
    Go,
    /// The first message over the limit in this window: say so once.
    Notice,
    /// Over the limit, noticed already: skip quietly.
    Skip,
}

impl SenderLimiter {
    pub fn new(per_minute: u32) -> SenderLimiter {
        SenderLimiter {
            per_minute,
            window: std::time::Duration::from_secs(60),
            seen: std::sync::Mutex::new(std::collections::HashMap::new()),
        }
    }

    fn pace(&self, sender: i64) -> Pace {
        if self.per_minute == 0 {
            return Pace::Go;
        }
        let now = std::time::Instant::now();
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.len() > 10_000 {
            let window = self.window;
            seen.retain(|_, (start, _)| now.duration_since(*start) < window);
        }
        let entry = seen.entry(sender).or_insert((now, 0));
        if now.duration_since(entry.0) >= self.window {
            *entry = (now, 0);
        }
        entry.1 = entry.1.saturating_add(1);
        match entry.1.cmp(&(self.per_minute + 1)) {
            std::cmp::Ordering::Less => Pace::Go,
            std::cmp::Ordering::Equal => Pace::Notice,
            std::cmp::Ordering::Greater => Pace::Skip,
        }
    }
}

/// What a message asks of the bot, decided before touching the database.
enum Intent {
    Commands(Vec<Invocation>),
    Capture {
        title: String,
        description: String,
    },
    Hint(String),
    /// For the language backend: a question, or work to propose.
    Converse(String),
    /// A decision in prose: answered with the exact command, never taken.
    Decision {
        run: Option<i64>,
    },
    /// Over the sender's rate: a notice (the first time in the window) or nothing.
    Limited(bool),
}

fn intent(ctx: &ChatContext<'_>, message: &InboundMessage) -> Option<Intent> {
    if Some(message.sender.user_id) == ctx.bot.user_id {
        return None;
    }
    if ctx.profile.role == Role::Executor {
        // The executor answers people only to point them to Eagle.
        return match message.place {
            Place::Direct { .. } if !message.sender.is_bot => Some(Intent::Hint(format!(
                "I am {}, the executor: I run the workers and post their progress. \
                 Commands and questions go to Eagle, the orchestrator.",
                ctx.profile.display_name
            ))),
            _ => None,
        };
    }
    let invocations = parse_message(&message.content, ctx.bot);
    if !invocations.is_empty() {
        return Some(Intent::Commands(invocations));
    }
    if message.mentioned {
        let text = commands::strip_leading_mention(&message.content, ctx.bot)
            .map(str::to_string)
            .unwrap_or_else(|| commands::without_mentions(&message.content, ctx.bot));
        let mut lines = text.lines().map(str::trim_end);
        // Thanks, a greeting, a bare question or a decision in prose: an
        // answer, never a task (and never a decision). With a backend, a
        // question goes to it; a decision never does.
        let talk = small_talk::classify(&text);
        if ctx.profile.eagle.conversation.is_some()
            && !matches!(
                talk,
                Some(
                    small_talk::SmallTalk::Decision { .. }
                        | small_talk::SmallTalk::Thanks
                        | small_talk::SmallTalk::Greeting
                )
            )
            && !text.trim().is_empty()
        {
            return Some(Intent::Converse(text.trim().to_string()));
        }
        if let Some(small_talk::SmallTalk::Decision { run }) = talk {
            return Some(Intent::Decision { run });
        }
        if let Some(talk) = talk {
            return Some(Intent::Hint(small_talk::answer(&talk)));
        }
        let title = lines.by_ref().map(str::trim).find(|l| !l.is_empty());
        if let Some(title) = title {
            let description = lines.collect::<Vec<_>>().join("\n").trim().to_string();
            return Some(Intent::Capture {
                // Removing a mention from the middle leaves a double space.
                title: title.split_whitespace().collect::<Vec<_>>().join(" "),
                description,
            });
        }
    }
    if matches!(message.place, Place::Direct { .. }) && !message.sender.is_bot {
        let text = message.content.trim();
        if ctx.profile.eagle.conversation.is_some() && !text.is_empty() {
            return match small_talk::classify(text) {
                Some(small_talk::SmallTalk::Decision { run }) => Some(Intent::Decision { run }),
                Some(talk @ (small_talk::SmallTalk::Thanks | small_talk::SmallTalk::Greeting)) => {
                    Some(Intent::Hint(small_talk::answer(&talk)))
                }
                _ => Some(Intent::Converse(text.to_string())),
            };
        }
        return Some(Intent::Hint(
            "I understand commands: `!help` lists them. `!queue <title>` puts a task into the inbox."
                .into(),
        ));
    }
    None
}

/// Handles one inbound message: claims it, carries out what it asks, and
/// stores the reply in the outbox, all in one transaction.
pub async fn handle_message(
    ctx: &ChatContext<'_>,
    message: &InboundMessage,
) -> Result<Handled, StoreError> {
    let started = std::time::Instant::now();
    let span =
        tracing::info_span!("message", profile = %message.identity, message = message.message_id);
    let handled = tracing::Instrument::instrument(handle(ctx, message), span).await;
    if let Ok(Handled::Replied { .. }) = handled {
        crate::ground::metrics::get()
            .reaction_seconds
            .observe(started.elapsed().as_secs_f64());
    }
    handled
}

async fn handle(ctx: &ChatContext<'_>, message: &InboundMessage) -> Result<Handled, StoreError> {
    let Some(mut intent) = intent(ctx, message) else {
        return Ok(Handled::Ignored);
    };
    let approver = ctx
        .profile
        .is_approver(message.sender.user_id as u64, &message.sender.email);
    let pace = match ctx.limiter {
        Some(limiter) if !approver && !message.late => limiter.pace(message.sender.user_id),
        _ => Pace::Go,
    };
    if pace != Pace::Go {
        intent = Intent::Limited(pace == Pace::Notice);
    }
    let mut tx = ctx.store.begin_write().await?;
    let outcome = match (&intent, message.late) {
        (Intent::Limited(_), _) => "rate_limited",
        (Intent::Hint(_) | Intent::Decision { .. }, _) => "hint",
        (_, true) => "late",
        (Intent::Commands(_), false) => "commands",
        (Intent::Capture { .. }, false) => "capture",
        (Intent::Converse(_), false) => "conversation",
    };
    if !tx
        .handled()
        .mark_processed(&message.identity, message.message_id, outcome)
        .await?
    {
        return Ok(Handled::Duplicate);
    }
    let result = act(&mut tx, ctx, message, &intent).await;
    let outbox = match result {
        Ok(replies) => {
            let stored = enqueue_replies(
                &mut tx,
                ctx,
                message,
                &replies,
                !matches!(
                    intent,
                    Intent::Hint(_)
                        | Intent::Limited(_)
                        | Intent::Converse(_)
                        | Intent::Decision { .. }
                ),
            )
            .await?;
            tx.commit().await?;
            let handed = stored.express.map_or(0, Reserved::hand_over);
            (stored.count, handed)
        }
        // A busy database or a lost connection: nothing happened; the
        // transport tries the message again later.
        Err(error) if error.is_transient() => return Err(error),
        Err(error) => {
            let _ = tx.rollback().await;
            apologize(ctx, message, &error).await?
        }
    };
    let (outbox, handed) = outbox;
    Ok(Handled::Replied { outbox, handed })
}

async fn act(
    tx: &mut Tx,
    ctx: &ChatContext<'_>,
    message: &InboundMessage,
    intent: &Intent,
) -> Result<Vec<CommandReply>, StoreError> {
    if message.late && !matches!(intent, Intent::Hint(_) | Intent::Decision { .. }) {
        let age = chrono::Utc::now() - message.timestamp;
        return Ok(vec![CommandReply {
            text: format!(
                "I saw this message late ({} after it was posted), so I did not act on it. \
                 Send it again if it still stands.",
                humanize(age)
            ),
            ok: false,
        }]);
    }
    match intent {
        Intent::Limited(false) => Ok(Vec::new()),
        Intent::Limited(true) => Ok(vec![CommandReply {
            text: format!(
                "You are sending me more than {} messages a minute: I skip the rest of this minute's. \
                 Send them again in a minute (one message can carry several commands).",
                ctx.profile.chat.sender_rate
            ),
            ok: false,
        }]),
        Intent::Hint(text) => Ok(vec![CommandReply {
            text: text.clone(),
            ok: true,
        }]),
        Intent::Decision { run } => Ok(vec![CommandReply {
            text: decision_answer(tx, ctx, message, *run).await?,
            ok: true,
        }]),
        Intent::Converse(text) => {
            // Answered by the conversation loop, outside this transaction.
            tx.conversations()
                .add_conversation(&crate::store::NewConversation {
                    identity: message.identity.clone(),
                    message_id: message.message_id,
                    transport: message.transport.to_string(),
                    asker_id: message.sender.user_id,
                    asker_email: message.sender.email.clone(),
                    asker_name: message.sender.full_name.clone(),
                    asker_approver: ctx
                        .profile
                        .is_approver(message.sender.user_id as u64, &message.sender.email),
                    to: message.reply_destination(),
                    private: message.private,
                    text: crate::runtime::posts::cap(text, 8_000),
                })
                .await?;
            Ok(Vec::new())
        }
        Intent::Capture { title, description } => {
            let mut reply = commands::queue_task(
                tx,
                message,
                &commands::NewQueued {
                    title,
                    description,
                    repo: None,
                },
                1,
            )
            .await?;
            reply
                .text
                .push_str(" (captured from your mention; `!help` lists what else I do)");
            Ok(vec![reply])
        }
        Intent::Commands(invocations) => {
            // One message, bounded work: the first `max_commands` run.
            let max = ctx.profile.chat.max_commands;
            let (invocations, skipped) = invocations.split_at(invocations.len().min(max));
            let mut replies = Vec::with_capacity(invocations.len() + 1);
            let mut cx = CommandContext::new(tx, ctx.profile, ctx.bot, &ctx.poster, message);
            cx.max_message_chars = ctx.caps.max_message_chars;
            for invocation in invocations {
                let reply = match &invocation.result {
                    Ok(command) => commands::execute(&mut cx, command).await?,
                    Err(error) => CommandReply {
                        text: error.to_string(),
                        ok: false,
                    },
                };
                replies.push(reply);
            }
            if replies.len() > 1 {
                for (reply, invocation) in replies.iter_mut().zip(invocations) {
                    let line = crate::ground::text::one_line(&invocation.line, 200);
                    reply.text = format!("**`{line}`**\n{}", reply.text);
                }
            }
            if !skipped.is_empty() {
                replies.push(CommandReply {
                    text: format!(
                        "{} more command(s) in this message were not run: one message runs at most {max}.",
                        skipped.len()
                    ),
                    ok: false,
                });
            }
            Ok(replies)
        }
    }
}

/// The answer to a decision in prose: the exact command when the run it
/// names (or the run whose topic it was said in) has one request waiting.
async fn decision_answer(
    tx: &mut Tx,
    ctx: &ChatContext<'_>,
    message: &InboundMessage,
    named: Option<i64>,
) -> Result<String, StoreError> {
    let run = match named {
        Some(id) => tx.tasks().run(id).await?,
        None => match &message.place {
            Place::Channel { channel, topic }
                if crate::ground::text::eq_fold(channel, &ctx.profile.executor_channel) =>
            {
                tx.tasks().run_by_thread(topic).await?
            }
            _ => None,
        },
    };
    let fallback = small_talk::answer(&small_talk::SmallTalk::Decision { run: named });
    let Some(run) = run else { return Ok(fallback) };
    let requests = tx.requests().requests_of_run(run.id).await?;
    let open: Vec<_> = requests.iter().filter(|r| r.status.is_open()).collect();
    Ok(match open.as_slice() {
        [one] => format!(
            "I take decisions only as commands, so nothing was approved: run {run} waits on req \
             {req} ({action}); `!approve {run} {req}` approves it, `!deny {run} {req} <reason>` \
             denies it (`!show {run} {req}` shows it in full).",
            run = run.id,
            req = one.id,
            action = crate::ground::text::one_line(&one.action, 40)
        ),
        [] => format!(
            "I take decisions only as commands, and run {} has nothing waiting for one \
             (`!status run {}`). Nothing was changed.",
            run.id, run.id
        ),
        _ => small_talk::answer(&small_talk::SmallTalk::Decision { run: Some(run.id) }),
    })
}

/// What [`enqueue_replies`] stored.
struct Stored<'a> {
    /// Outbox entries, in all.
    count: usize,
    /// The replies to hand to the sender after the commit, if they may go
    /// out at once.
    express: Option<Reserved<'a>>,
}

async fn enqueue_replies<'a>(
    tx: &mut Tx,
    ctx: &ChatContext<'a>,
    message: &InboundMessage,
    replies: &[CommandReply],
    react: bool,
) -> Result<Stored<'a>, StoreError> {
    // Every command is answered in this very transaction, so no "seen it"
    // reaction goes first: the reply follows at once.
    let react = react && ctx.caps.reactions;
    let identity = &message.identity;
    let mut count = 0;
    let text = replies
        .iter()
        .map(|r| r.text.as_str())
        .collect::<Vec<_>>()
        .join("\n\n");
    // Replies echo what people wrote: no mention in them may ping anyone.
    let text = crate::ground::text::neutralize_mentions(&text);
    let max_parts = ctx.profile.chat.max_reply_parts;
    let (mut parts, cut) = if text.is_empty() {
        (Vec::new(), false)
    } else {
        crate::ground::text::split_message_capped(&text, ctx.caps.max_message_chars, max_parts)
    };
    if cut {
        parts.pop();
        parts.push(format!(
            "(This answer is longer than {max_parts} messages, so it is cut here: ask for less, \
             e.g. `!status page 2` or `!status <task id>`.)"
        ));
    }
    let to = message.reply_destination();
    let mut express = match ctx.express {
        Some(lane) if !parts.is_empty() => {
            let checked_at = std::time::Instant::now();
            let earlier = tx
                .outbox()
                .express_check(
                    &lane.lease,
                    &lane.owner,
                    lane.margin,
                    identity,
                    &to.ordering_key(),
                )
                .await?;
            // Whatever is undelivered before in the topic must be in the
            // lane already (it is first-in, first-out), or the replies wait.
            earlier
                .filter(|ids| ids.iter().all(|id| lane.is_pending(*id)))
                .map(|after| Reserved {
                    lane,
                    items: Vec::new(),
                    after,
                    checked_at,
                })
        }
        _ => None,
    };
    for part in parts {
        let new = NewOutboxItem {
            identity: identity.clone(),
            kind: OutboxKind::Message {
                to: to.clone(),
                content: part,
            },
            in_reply_to: Some(message.message_id),
        };
        match &mut express {
            Some(reserved) => {
                let id = tx.outbox().enqueue_attempted(&new).await?;
                reserved.lane.pending().insert(id);
                reserved.items.push(OutboxItem {
                    id,
                    identity: new.identity,
                    kind: new.kind,
                    in_reply_to: new.in_reply_to,
                    attempts: 1,
                    ordering_key: to.ordering_key(),
                });
            }
            None => {
                tx.outbox().enqueue(&new).await?;
            }
        }
        count += 1;
    }
    // A reply says everything a ✅ or ❌ would, and costs the same request
    // under the rate limit: a reaction only acknowledges what got no reply.
    if react && count == 0 {
        let ok = replies.iter().all(|r| r.ok);
        tx.outbox()
            .enqueue(&NewOutboxItem {
                identity: identity.clone(),
                kind: OutboxKind::ReactionAdd {
                    message_id: message.message_id,
                    emoji: if ok { EMOJI_DONE } else { EMOJI_FAILED }.into(),
                },
                in_reply_to: None,
            })
            .await?;
        count += 1;
    }
    Ok(Stored { count, express })
}

/// After an internal error: the message is marked handled with a short
/// apology that carries a reference to the logged error, never its text.
async fn apologize(
    ctx: &ChatContext<'_>,
    message: &InboundMessage,
    error: &StoreError,
) -> Result<(usize, usize), StoreError> {
    let reference = format!("E{:08x}", fastrand::u32(..));
    tracing::error!(reference, message_id = message.message_id, error = %error, "command failed");
    let mut tx = ctx.store.begin_write().await?;
    if !tx
        .handled()
        .mark_processed(&message.identity, message.message_id, "failed")
        .await?
    {
        return Ok((0, 0));
    }
    let reply = CommandReply {
        text: format!(
            "Sorry, something went wrong on my side and nothing was changed (reference {reference})."
        ),
        ok: false,
    };
    let stored = enqueue_replies(&mut tx, ctx, message, &[reply], true).await?;
    tx.commit().await?;
    let handed = stored.express.map_or(0, Reserved::hand_over);
    Ok((stored.count, handed))
}

fn humanize(age: chrono::TimeDelta) -> String {
    let secs = age.num_seconds().max(0);
    match secs {
        0..120 => format!("{secs} s"),
        120..7200 => format!("{} min", secs / 60),
        7200..172_800 => format!("{} h", secs / 3600),
        _ => format!("{} days", secs / 86_400),
    }
}
