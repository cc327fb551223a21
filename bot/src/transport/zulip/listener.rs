//! One identity's event loop: register, back-fill, long-poll, handle.
//!
//! Nothing is lost: when the queue expires (`BAD_EVENT_QUEUE_ID`) or the
//! server restarts, the loop registers a new queue (with a new
//! `last_event_id`, never the old one) and then back-fills every message
//! after the persisted bookmark with `GET /messages`. Nothing is done twice:
//! [`crate::chat::handle_message`] claims each message in the database
//! before acting. The bookmark moves only after a message is handled.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::Error;
use super::client::{Client, RegisterParams};
use super::types::{Anchor, Event, Message, Recipient, User};
use crate::chat::commands::BotNames;
use crate::chat::message::{InboundMessage, Place, Sender};
use crate::chat::{ChatContext, Handled, ReplyCaps, handle_message};
use crate::ground::backoff::Backoff;
use crate::profile::{Profile, Role};
use crate::store::Store;

/// Zulip's long-poll timeout when the server does not say (before feature level 74).
const DEFAULT_LONGPOLL: Duration = Duration::from_secs(90);
/// How long messages passed over may wait to be saved in the bookmark.
const BOOKMARK_EVERY: Duration = Duration::from_secs(30);
/// Messages per back-fill page.
const BACKFILL_PAGE: u32 = 200;
/// Zulip's default maximum message length.
const DEFAULT_MAX_MESSAGE: usize = 10_000;

/// Why the loop stopped for good.
#[derive(Debug, thiserror::Error)]
pub enum Fatal {
    #[error("{0}")]
    Zulip(Error),
}

pub(crate) struct Listener<'a> {
    pub client: &'a Client,
    pub store: &'a Store,
    pub profile: &'a Profile,
    pub me: User,
    pub bot: BotNames,
    pub outbox: Arc<Notify>,
    /// Whether each sender is a bot (bots other than the executor are ignored).
    pub known: HashMap<i64, bool>,
    /// The newest message passed over without a transaction; saved in batches.
    /// The sender's lane, for replies that may go out at once.
    express: Arc<crate::chat::ExpressLane>,
    pending_bookmark: Option<i64>,
    /// Since when `pending_bookmark` has been waiting to be saved.
    pending_since: Option<std::time::Instant>,
    /// Each sender's messages per minute.
    limiter: crate::chat::SenderLimiter,
    /// The channels the bot is subscribed to (folded name → private), and
    /// when they were last read.
    channels: HashMap<String, bool>,
    channels_read: Option<std::time::Instant>,
    max_message_chars: usize,
}

impl<'a> Listener<'a> {
    pub fn new(
        client: &'a Client,
        store: &'a Store,
        profile: &'a Profile,
        me: User,
        outbox: Arc<Notify>,
        express: Arc<crate::chat::ExpressLane>,
    ) -> Self {
        let bot = BotNames {
            full_name: me.full_name.clone(),
            user_id: Some(me.user_id),
        };
        Listener {
            client,
            store,
            profile,
            me,
            bot,
            outbox,
            express,
            known: HashMap::new(),
            pending_bookmark: None,
            pending_since: None,
            limiter: crate::chat::SenderLimiter::new(profile.chat.sender_rate),
            channels: HashMap::new(),
            channels_read: None,
            max_message_chars: DEFAULT_MAX_MESSAGE,
        }
    }

    fn identity(&self) -> &str {
        &self.profile.name
    }

    /// Runs until `shutdown` (Ok) or a fatal error.
    pub async fn run(&mut self, shutdown: &CancellationToken) -> Result<(), Fatal> {
        let params = RegisterParams {
            event_types: vec!["message"],
            all_public_streams: self.profile.zulip.all_public_streams,
        };
        let mut backoff = Backoff::new();
        // Queues refused before their first poll, across registrations.
        let mut refused_queues = Backoff::new();
        // Before the first queue exists: anything after the bookmark is
        // back-filled, so nothing falls between the two.
        if !self.ensure_bookmark(shutdown, &mut backoff).await? {
            return Ok(());
        }
        'register: loop {
            let Some(registration) = self.register(&params, shutdown, &mut backoff).await? else {
                return Ok(());
            };
            self.max_message_chars = registration
                .max_message_length
                .unwrap_or(DEFAULT_MAX_MESSAGE);
            // Whatever the server says, a poll waits a sane time (no overflow).
            let longpoll = registration
                .event_queue_longpoll_timeout_seconds
                .map(|s| Duration::from_secs(s.clamp(1, 600)))
                .unwrap_or(DEFAULT_LONGPOLL);
            let poll_timeout = longpoll + (longpoll / 10).max(Duration::from_secs(5));
            let queue_id = registration.queue_id.clone();
            tracing::info!(profile = %self.profile.name, queue_id, "event queue registered");
            crate::ground::metrics::get().connected(self.identity(), true);
            let _ = self
                .store
                .handled()
                .record_queue(
                    self.identity(),
                    Some(&queue_id),
                    Some(registration.last_event_id),
                )
                .await;
            // Register first, then back-fill: anything posted in between is in
            // both, and the database makes sure it is handled once.
            if !self.backfill(shutdown, &mut backoff).await? {
                self.delete_queue(&queue_id).await;
                return Ok(());
            }
            let mut last_event_id = registration.last_event_id;
            let mut dont_block = false;
            let mut polled_once = false;
            loop {
                let polled = tokio::select! {
                    _ = shutdown.cancelled() => {
                        self.flush_bookmark().await;
                        self.delete_queue(&queue_id).await;
                        return Ok(());
                    }
                    polled = self.client.events(&queue_id, last_event_id, dont_block, poll_timeout) => polled,
                };
                match polled {
                    Ok(events) => {
                        if !polled_once || backoff.failures() > 0 {
                            crate::ground::metrics::get().connected(self.identity(), true);
                        }
                        backoff.succeeded();
                        refused_queues.succeeded();
                        polled_once = true;
                        dont_block = false;
                        for event in events {
                            last_event_id = last_event_id.max(event.id());
                            if let Event::Message { message, flags, .. } = event
                                && !self.handle(*message, flags, false, shutdown).await
                            {
                                self.delete_queue(&queue_id).await;
                                return Ok(());
                            }
                        }
                        self.flush_bookmark_if_due().await;
                    }
                    Err(Error::BadEventQueue) => {
                        self.flush_bookmark().await;
                        if polled_once {
                            tracing::info!(profile = %self.profile.name, "the event queue expired; registering a new one");
                            continue 'register;
                        }
                        // A queue refused before it ever answered: the server
                        // is in trouble; register again, but not in a tight
                        // loop (this backoff outlives the registrations).
                        let wait = refused_queues.failed();
                        tracing::warn!(profile = %self.profile.name, wait_ms = wait.as_millis() as u64, refused = refused_queues.failures(), "a new event queue was refused before its first event; registering again after a pause");
                        if !pause(shutdown, wait).await {
                            return Ok(());
                        }
                        continue 'register;
                    }
                    // A long poll that times out is normal: poll again at once.
                    Err(Error::Timeout) => {
                        tracing::debug!("the long poll timed out; polling again")
                    }
                    Err(error @ Error::Unauthorized { .. }) => return Err(Fatal::Zulip(error)),
                    Err(Error::RateLimited { retry_after }) => {
                        // Shutdown during the wait is seen at the next poll.
                        pause(shutdown, backoff.failed_at_least(retry_after)).await;
                    }
                    Err(error) => {
                        crate::ground::metrics::get().connected(self.identity(), false);
                        let wait = backoff.failed();
                        tracing::warn!(%error, wait_ms = wait.as_millis() as u64, "polling for events failed; retrying");
                        dont_block = true;
                        pause(shutdown, wait).await;
                    }
                }
            }
        }
    }

    /// Registers a queue. The request itself is never abandoned half-way: a
    /// queue the server created is deleted again if shutdown came meanwhile.
    async fn register(
        &self,
        params: &RegisterParams,
        shutdown: &CancellationToken,
        backoff: &mut Backoff,
    ) -> Result<Option<super::types::Registration>, Fatal> {
        let registered = retrying(shutdown, backoff, InFlight::Finish, || {
            self.client.register(params)
        })
        .await?;
        match registered {
            Some(registration) if shutdown.is_cancelled() => {
                self.delete_queue(&registration.queue_id).await;
                Ok(None)
            }
            other => Ok(other),
        }
    }

    /// Deletes the queue on the way out, briefly: an unreachable server must
    /// not hold up shutdown (it expires the queue by itself).
    async fn delete_queue(&self, queue_id: &str) {
        let deleted =
            tokio::time::timeout(Duration::from_secs(5), self.client.delete_queue(queue_id)).await;
        match deleted {
            Ok(Ok(()) | Err(Error::BadEventQueue)) => {
                let _ = self
                    .store
                    .handled()
                    .record_queue(self.identity(), None, None)
                    .await;
            }
            Ok(Err(error)) => tracing::warn!(%error, "could not delete the event queue"),
            Err(_) => tracing::warn!("the server did not answer the queue deletion in time"),
        }
    }

    /// On the very first start, the bookmark is the newest message: history
    /// is not replayed. Returns false on shutdown.
    async fn ensure_bookmark(
        &self,
        shutdown: &CancellationToken,
        backoff: &mut Backoff,
    ) -> Result<bool, Fatal> {
        loop {
            match self.store.handled().bookmark(self.identity()).await {
                Ok(Some(_)) => return Ok(true),
                Ok(None) => break,
                Err(error) => {
                    tracing::error!(%error, "cannot read the bookmark; retrying");
                    if !pause(shutdown, backoff.failed()).await {
                        return Ok(false);
                    }
                }
            }
        }
        let Some(page) = retrying(shutdown, backoff, InFlight::Abandon, || {
            self.client.messages(Anchor::Newest, 1, 0, true, &[])
        })
        .await?
        else {
            return Ok(false);
        };
        let newest = page.messages.last().map_or(0, |m| m.id);
        loop {
            match self
                .store
                .handled()
                .init_bookmark(self.identity(), newest)
                .await
            {
                Ok(()) => return Ok(true),
                Err(error) => {
                    tracing::error!(%error, "cannot save the bookmark; retrying");
                    if !pause(shutdown, backoff.failed()).await {
                        return Ok(false);
                    }
                }
            }
        }
    }

    /// Handles every message after the bookmark. Returns false on shutdown.
    async fn backfill(
        &mut self,
        shutdown: &CancellationToken,
        backoff: &mut Backoff,
    ) -> Result<bool, Fatal> {
        let mut anchor = loop {
            match self.store.handled().bookmark(self.identity()).await {
                Ok(Some(bookmark)) => break bookmark.last_message_id,
                Ok(None) => return Ok(true),
                // Never skip a back-fill because the database hiccuped.
                Err(error) => {
                    tracing::error!(%error, "cannot read the bookmark; retrying");
                    if !pause(shutdown, backoff.failed()).await {
                        return Ok(false);
                    }
                }
            }
        };
        loop {
            let Some(page) = retrying(shutdown, backoff, InFlight::Abandon, || {
                self.client
                    .messages(Anchor::Id(anchor), 0, BACKFILL_PAGE, false, &[])
            })
            .await?
            else {
                return Ok(false);
            };
            let count = page.messages.len();
            for message in page.messages {
                anchor = anchor.max(message.id);
                let flags = message.flags.clone();
                if !self.handle(message, flags, true, shutdown).await {
                    return Ok(false);
                }
            }
            if count > 0 {
                tracing::info!(profile = %self.profile.name, count, "back-filled messages");
            }
            self.flush_bookmark().await;
            if page.found_newest || count == 0 {
                return Ok(true);
            }
        }
    }

    async fn flush_bookmark(&mut self) {
        if let Some(id) = self.pending_bookmark.take() {
            match self
                .store
                .handled()
                .advance_bookmark(self.identity(), id)
                .await
            {
                Ok(()) => self.pending_since = None,
                Err(error) => {
                    tracing::warn!(%error, "cannot save the bookmark; it is saved with the next message");
                    self.pending_bookmark = Some(id);
                }
            }
        }
    }

    fn pass_over(&mut self, message_id: i64) {
        self.pending_bookmark = Some(
            self.pending_bookmark
                .map_or(message_id, |b| b.max(message_id)),
        );
        self.pending_since
            .get_or_insert_with(std::time::Instant::now);
    }

    /// After a batch of events: the messages passed over (the bot's own
    /// replies, chatter) are saved in the bookmark at most every
    /// [`BOOKMARK_EVERY`], not one write each. Losing them in a crash costs
    /// only reading them again: what was handled is known by message id.
    async fn flush_bookmark_if_due(&mut self) {
        if self
            .pending_since
            .is_some_and(|since| since.elapsed() >= BOOKMARK_EVERY)
        {
            self.flush_bookmark().await;
        }
    }

    /// A handled message's transaction moved the bookmark to it: whatever
    /// was passed over before it is saved with it.
    fn saved_through(&mut self, message_id: i64) {
        if self.pending_bookmark.is_some_and(|b| b <= message_id) {
            self.pending_bookmark = None;
            self.pending_since = None;
        }
    }

    /// Whether a channel is private (what is captured there stays there).
    /// The subscriptions are read again, at most once a minute, for a
    /// channel not seen yet; unknown means public (a channel the bot is not
    /// subscribed to, seen through `all_public_streams`).
    async fn channel_is_private(&mut self, channel: &str) -> bool {
        let key = crate::ground::text::fold_key(channel);
        if let Some(private) = self.channels.get(&key) {
            return *private;
        }
        let stale = self
            .channels_read
            .is_none_or(|at| at.elapsed() >= Duration::from_secs(60));
        if stale {
            self.channels_read = Some(std::time::Instant::now());
            match self.client.subscriptions().await {
                Ok(subscriptions) => {
                    self.channels = subscriptions
                        .into_iter()
                        .map(|s| (crate::ground::text::fold_key(&s.name), s.invite_only))
                        .collect();
                }
                Err(error) => tracing::warn!(%error, "cannot read the bot's subscriptions"),
            }
        }
        self.channels.get(&key).copied().unwrap_or(false)
    }

    /// Whether a sender is a bot, asked of the server once per sender. The
    /// question is asked again until it is answered: a bot's message must
    /// never count as a person's. `None` on shutdown.
    async fn is_bot(&mut self, user_id: i64, shutdown: &CancellationToken) -> Option<bool> {
        if let Some(known) = self.known.get(&user_id) {
            return Some(*known);
        }
        let mut backoff = Backoff::new();
        let client = self.client;
        let user = retrying(shutdown, &mut backoff, InFlight::Abandon, || {
            client.user(user_id)
        })
        .await;
        match user {
            Ok(Some(user)) => {
                self.known.insert(user_id, user.is_bot);
                Some(user.is_bot)
            }
            Ok(None) => None,
            Err(error) => {
                // A sender the server will not describe is not acted on.
                tracing::warn!(%error, user_id, "cannot tell whether a sender is a bot; skipping the message");
                Some(true)
            }
        }
    }

    /// Handles one message, in a span of its own (attached to the future,
    /// not entered across awaits). Returns false if shutdown interrupted it.
    async fn handle(
        &mut self,
        message: Message,
        flags: Vec<String>,
        backfilled: bool,
        shutdown: &CancellationToken,
    ) -> bool {
        use tracing::Instrument as _;
        let span = tracing::info_span!(
            "message",
            id = message.id,
            sender = message.sender_id,
            backfilled
        );
        self.handle_in_span(message, flags, backfilled, shutdown)
            .instrument(span)
            .await
    }

    async fn handle_in_span(
        &mut self,
        message: Message,
        flags: Vec<String>,
        backfilled: bool,
        shutdown: &CancellationToken,
    ) -> bool {
        if message.sender_id == self.me.user_id {
            self.pass_over(message.id);
            return true;
        }
        let from_executor = self
            .profile
            .eagle
            .executor_bot
            .as_ref()
            .is_some_and(|bot| bot.matches(message.sender_id as u64, &message.sender_email));
        if from_executor {
            // The executor's posts mirror the database, which Eagle reads
            // directly: nothing in chat is a request or a decision.
            self.pass_over(message.id);
            return true;
        }
        let place = match &message.display_recipient {
            Recipient::Channel(channel) => {
                if !self.profile.listens_in(channel) {
                    self.pass_over(message.id);
                    return true;
                }
                Place::Channel {
                    channel: channel.clone(),
                    topic: message.subject.clone(),
                }
            }
            Recipient::Direct(people) => Place::Direct {
                user_ids: people
                    .iter()
                    .map(|p| p.id)
                    .filter(|id| *id != self.me.user_id)
                    .collect(),
            },
        };
        // Asked of the server once per sender, so after the cheap filters.
        let Some(is_bot) = self.is_bot(message.sender_id, shutdown).await else {
            return false;
        };
        if is_bot {
            tracing::debug!("ignoring another bot");
            self.pass_over(message.id);
            return true;
        }
        // The `mentioned` flag also stands for user-group mentions; only a
        // mention of the bot itself captures a task. Deliveries to
        // non-subscribers carry no flags at all: then the text decides.
        let direct = crate::chat::commands::mentions_bot(&message.content, &self.bot);
        let mentioned = direct && (flags.is_empty() || flags.iter().any(|f| f == "mentioned"));
        let private = match &place {
            Place::Direct { .. } => true,
            Place::Channel { channel, .. } => self.channel_is_private(&channel.clone()).await,
        };
        let timestamp: DateTime<Utc> = Utc
            .timestamp_opt(message.timestamp, 0)
            .single()
            .unwrap_or_else(Utc::now);
        let age = (Utc::now() - timestamp).to_std().unwrap_or_default();
        let inbound = InboundMessage {
            identity: self.profile.name.clone(),
            transport: "zulip",
            message_id: message.id,
            sender: Sender {
                user_id: message.sender_id,
                email: message.sender_email.clone(),
                full_name: message.sender_full_name.clone(),
                is_bot: false,
            },
            private,
            place,
            content: message.content,
            mentioned,
            timestamp,
            late: backfilled && age > self.profile.zulip.late_command_age,
        };
        let ctx = ChatContext {
            store: self.store,
            profile: self.profile,
            bot: &self.bot,
            caps: ReplyCaps {
                reactions: true,
                max_message_chars: self.max_message_chars,
            },
            poster: crate::runtime::posts::Poster {
                identity: self.profile.name.clone(),
                channel: self.profile.executor_channel.clone(),
            },
            limiter: Some(&self.limiter),
            express: Some(&self.express),
        };
        let mut backoff = Backoff::new();
        loop {
            match handle_message(&ctx, &inbound).await {
                Ok(Handled::Replied { outbox, handed }) => {
                    tracing::debug!(outbox, handed, "handled");
                    if outbox > handed {
                        self.outbox.notify_one();
                    }
                    self.saved_through(inbound.message_id);
                    return true;
                }
                Ok(Handled::Duplicate) => {
                    tracing::debug!("handled before");
                    return true;
                }
                Ok(Handled::Ignored) => {
                    self.pass_over(inbound.message_id);
                    return true;
                }
                Err(error) => {
                    // The database is down or busy: nothing was recorded, so
                    // try the same message again rather than lose it.
                    let wait = backoff.failed();
                    tracing::error!(%error, wait_ms = wait.as_millis() as u64, "cannot handle a message; retrying");
                    if !pause(shutdown, wait).await {
                        return false;
                    }
                }
            }
        }
    }
}

/// Sleeps unless shut down first; returns false on shutdown.
pub(crate) async fn pause(shutdown: &CancellationToken, wait: Duration) -> bool {
    tokio::select! {
        _ = shutdown.cancelled() => false,
        _ = tokio::time::sleep(wait) => true,
    }
}

/// What shutdown does to a request in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InFlight {
    /// Drop it: its effect does not matter.
    Abandon,
    /// Let it finish: the server may create something that must be undone.
    Finish,
}

/// Calls `f` until it succeeds, backing off on transient errors (and waiting
/// out `Retry-After`). `Ok(None)` on shutdown; `Err` for refused credentials,
/// which retrying cannot fix.
pub(crate) async fn retrying<T, F, Fut>(
    shutdown: &CancellationToken,
    backoff: &mut Backoff,
    in_flight: InFlight,
    mut f: F,
) -> Result<Option<T>, Fatal>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Error>>,
{
    // A refusal that is not transient (a 4xx other than 429) is tried a few
    // times (it may be a blip of the server's), then reported for good.
    const MAX_REFUSALS: u32 = 5;
    let mut refusals = 0;
    loop {
        if shutdown.is_cancelled() {
            return Ok(None);
        }
        let result = match in_flight {
            InFlight::Finish => f().await,
            InFlight::Abandon => tokio::select! {
                _ = shutdown.cancelled() => return Ok(None),
                result = f() => result,
            },
        };
        let wait = match result {
            Ok(value) => {
                backoff.succeeded();
                return Ok(Some(value));
            }
            Err(error @ Error::Unauthorized { .. }) => return Err(Fatal::Zulip(error)),
            Err(Error::RateLimited { retry_after }) => backoff.failed_at_least(retry_after),
            Err(error) if !error.is_transient() && refusals + 1 >= MAX_REFUSALS => {
                return Err(Fatal::Zulip(error));
            }
            Err(error) => {
                if !error.is_transient() {
                    refusals += 1;
                }
                let wait = backoff.failed();
                tracing::warn!(%error, wait_ms = wait.as_millis() as u64, "a Zulip request failed; retrying");
                wait
            }
        };
        if !pause(shutdown, wait).await {
            return Ok(None);
        }
    }
}

/// Whether the executor role answers here at all (it answers direct messages only).
pub(crate) fn role_listens(profile: &Profile) -> &'static str {
    match profile.role {
        Role::Orchestrator => "commands in channels and direct messages",
        Role::Executor => "direct messages (pointing to Eagle)",
    }
}
