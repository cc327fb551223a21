//! Delivering the outbox: replies, reactions and edits, in order, through
//! rate limits and server errors, exactly once.
//!
//! One instance per identity sends (a lease in the database elects it), so
//! two instances of one profile never both post a reply. Before each
//! delivery the attempt is recorded; an entry that was attempted before (the
//! process died waiting for the answer) is first looked for in its topic, so
//! a reply that reached the server is not posted again.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::Error;
use super::client::Client;
use super::types::{Anchor, NarrowTerm};
use crate::chat::{ExpressItem, ExpressLane};
use crate::runtime::lease::Lease;
use crate::store::{Destination, OutboxItem, OutboxKind, Store};
use tokio::sync::mpsc::UnboundedReceiver;

/// How long a sender's lease lasts without renewal (after a crash, another
/// instance takes over within this). A delivery is attempted only while the
/// lease has more than a request's timeout left ([`LEASE_MARGIN`]), so a
/// delivery still in flight is over before another instance may attempt the
/// same entry.
const LEASE_TTL: Duration = Duration::from_secs(30);
/// What the lease must have left when an attempt is recorded: longer than
/// any request (15 s).
const LEASE_MARGIN: Duration = Duration::from_secs(16);
/// What the lease must have left, by this instance's count, for a delivery
/// to go ahead without renewing it first: renewed within the last 10 s
/// (30 s − 10 s), it still has the margin.
const LEASE_FRESH: Duration = Duration::from_secs(20);
/// How often the lease is renewed while idle.
const LEASE_RENEW: Duration = Duration::from_secs(5);
/// How long after its lease check a lane entry may be sent without
/// another: LEASE_MARGIN − EXPRESS_WINDOW still outlasts a request.
const EXPRESS_WINDOW: Duration = Duration::from_millis(500);
/// Entries read per pass.
const BATCH: i64 = 100;
/// How long shutdown waits for the outbox to drain.
const FLUSH_DEADLINE: Duration = Duration::from_secs(15);
/// Attempts before an entry is given up (spread over about an hour).
pub(crate) const MAX_ATTEMPTS: i64 = 12;
/// The longest wait between two attempts at one entry.
const MAX_ENTRY_WAIT: Duration = Duration::from_secs(600);

/// Requests of a rate-limit window kept for replies: below this budget,
/// reactions are dropped (they never delay an answer).
const REPLY_RESERVE: u64 = 5;

/// The wait before the next attempt at an entry that failed `attempts`
/// times: doubling from 2 s, capped, jittered.
fn entry_backoff(attempts: i64) -> Duration {
    let base = 2f64
        .powi(attempts.clamp(1, 20) as i32)
        .min(MAX_ENTRY_WAIT.as_secs_f64());
    Duration::from_secs_f64(base * (0.75 + fastrand::f64() / 2.0)).min(MAX_ENTRY_WAIT)
}

/// What became of one entry.
#[derive(Debug)]
enum Step {
    Delivered,
    /// Failed; scheduled again after this long (its topic waits).
    Retry(Duration),
    /// Refused for good, recorded.
    GaveUp,
    LostLease,
    Fatal(Error),
    /// The database could not record the outcome: pause the pass.
    Trouble,
}

/// What a pass over the outbox ended with.
#[derive(Debug, PartialEq)]
enum Pass {
    /// Everything due went out; the next entry is due then, if any.
    Drained(Option<chrono::DateTime<chrono::Utc>>),
    /// A delivery failed and is scheduled again; wait before the next pass.
    Retry(Duration),
    /// Another instance holds the lease now.
    LostLease,
    /// The server refuses the credentials.
    Fatal(Error),
}

pub(crate) struct OutboxSender {
    pub client: Arc<Client>,
    pub store: Store,
    pub identity: String,
    pub me: i64,
    /// A per-process name for the lease.
    pub instance: String,
    pub wake: Arc<Notify>,
    /// Replies the listener hands over directly (see [`ExpressLane`]).
    pub express: Arc<ExpressLane>,
    /// Lane entries that did not go out through the lane.
    pub unsent: std::sync::Mutex<std::collections::HashSet<i64>>,
}

/// The lane from the listener to the sender of `identity` in this process,
/// whose lease `instance` holds when it delivers.
pub(crate) fn express_lane(
    identity: &str,
    instance: &str,
) -> (ExpressLane, UnboundedReceiver<ExpressItem>) {
    ExpressLane::new(lease_name(identity), instance.to_owned(), LEASE_MARGIN)
}

fn lease_name(identity: &str) -> String {
    format!("outbox:{identity}")
}

impl OutboxSender {
    /// Delivers until `shutdown`, then flushes what it can and releases the
    /// lease. `lane` brings the replies the listener hands over directly.
    pub async fn run(
        self,
        mut lane: UnboundedReceiver<ExpressItem>,
        shutdown: CancellationToken,
    ) -> Result<(), Error> {
        // Posts about runs come from the runner and the decider, in this
        // process or another: a change in the database wakes the sender.
        let mut changes = self.store.changes();
        // Whether the next pass reads the outbox (not only the lane), and
        // when it must at the latest.
        let mut read_outbox = true;
        let mut read_by = tokio::time::Instant::now();
        let mut handed: Vec<ExpressItem> = Vec::new();
        // A lease renewed within LEASE_RENEW is held (every delivery checks
        // it in the database anyway): no query per wake-up.
        let mut lease = Lease::new(lease_name(&self.identity), self.instance.clone(), LEASE_TTL)
            .renewing_every(LEASE_RENEW)
            .holder_called("sender");
        loop {
            changes.mark_seen();
            let leader = match lease.hold(&self.store).await {
                Ok(leader) => leader,
                Err(error) => {
                    tracing::error!(%error, "cannot take the outbox lease; retrying");
                    lease.forget();
                    false
                }
            };
            while let Ok(item) = lane.try_recv() {
                handed.push(item);
            }
            read_outbox |= tokio::time::Instant::now() >= read_by;
            // The lane's replies were checked against the lease when they
            // were stored: they go out even if this instance's view of its
            // lease is stale (the gate decides).
            let full = leader && read_outbox;
            if full || !handed.is_empty() {
                let pass = tokio::select! {
                    // A delivery cut short is recorded as attempted: the next
                    // start looks for it before sending again.
                    _ = shutdown.cancelled() => break,
                    pass = self.pass(&mut lease, std::mem::take(&mut handed), full) => pass,
                };
                let now = tokio::time::Instant::now();
                let mut wait = LEASE_RENEW;
                match pass {
                    Pass::Drained(next_due) => {
                        if let Some(due) = next_due {
                            let until = (due - chrono::Utc::now()).to_std().unwrap_or_default();
                            wait = wait.min(until);
                        }
                    }
                    Pass::Retry(after) => wait = after,
                    Pass::LostLease => lease.forget(),
                    Pass::Fatal(error) => return Err(error),
                }
                if full {
                    read_outbox = false;
                    read_by = now + wait;
                } else {
                    // A lane entry scheduled for a retry is read back then.
                    read_by = read_by.min(now + wait);
                }
            } else if !leader {
                read_by = tokio::time::Instant::now() + LEASE_RENEW;
            }
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                Some(item) = lane.recv() => handed.push(item),
                _ = self.wake.notified() => read_outbox = true,
                _ = changes.changed() => read_outbox = true,
                _ = tokio::time::sleep_until(read_by) => read_outbox = true,
            }
        }
        while let Ok(item) = lane.try_recv() {
            handed.push(item);
        }
        self.flush(&mut lease, handed).await;
        lease.release(&self.store).await;
        Ok(())
    }

    /// On shutdown: deliver what is due, for a bounded time.
    async fn flush(&self, lease: &mut Lease, mut handed: Vec<ExpressItem>) {
        if !matches!(lease.renew(&self.store).await, Ok(true)) {
            self.release(handed);
            return;
        }
        let flushed = tokio::time::timeout(FLUSH_DEADLINE, async {
            loop {
                match self.pass(lease, std::mem::take(&mut handed), true).await {
                    Pass::Drained(_) => return true,
                    Pass::Retry(wait) if wait < Duration::from_secs(3) => {
                        tokio::time::sleep(wait).await
                    }
                    _ => return false,
                }
            }
        })
        .await;
        if !matches!(flushed, Ok(true)) {
            let left = self
                .store
                .outbox()
                .undelivered_count(&self.identity)
                .await
                .unwrap_or(-1);
            tracing::warn!(
                left,
                "shutting down with replies undelivered; they go out at the next start"
            );
        }
    }

    /// Lane entries this sender will not deliver now: they wait in the
    /// outbox for a pass (attempted, so it looks for them first).
    fn release(&self, handed: Vec<ExpressItem>) {
        for ExpressItem { item, .. } in handed {
            self.lane_unsent(|unsent| unsent.insert(item.id));
            self.express.settled(item.id);
        }
    }

    /// Runs `f` on the ids of lane entries that did not go out through the
    /// lane (a retry, a release): the lane entries after them in their topic
    /// must not overtake them. Failures are rare; the set is bounded anyway.
    fn lane_unsent<R>(&self, f: impl FnOnce(&mut std::collections::HashSet<i64>) -> R) -> R {
        let mut unsent = self.unsent.lock().unwrap_or_else(|p| p.into_inner());
        if unsent.len() >= 100_000 {
            // Entries that old have no lane entry waiting behind them.
            let newest = unsent.iter().copied().max().unwrap_or(0);
            unsent.retain(|id| *id > newest - 10_000);
        }
        f(&mut unsent)
    }

    /// One pass: first the replies handed over through the lane, then, if
    /// `read_outbox`, everything due in the outbox (replies before
    /// reactions, each in id order).
    async fn pass(&self, lease: &mut Lease, handed: Vec<ExpressItem>, read_outbox: bool) -> Pass {
        // A failing entry holds back only its own topic (later entries of
        // it must not overtake it); every other topic goes on.
        let mut blocked: std::collections::HashSet<String> = std::collections::HashSet::new();
        let mut retry: Option<Duration> = None;
        let mut handed = handed.into_iter();
        while let Some(ExpressItem {
            item,
            stored_at,
            after,
        }) = handed.next()
        {
            if after
                .iter()
                .any(|id| self.lane_unsent(|unsent| unsent.contains(id)))
            {
                // An entry before it in its topic did not go out: the
                // outbox keeps the order from here.
                self.lane_unsent(|unsent| unsent.insert(item.id));
                self.express.settled(item.id);
                continue;
            }
            let step = self.settle(lease, &item, Some(stored_at)).await;
            self.express.settled(item.id);
            match step {
                Step::Delivered | Step::GaveUp => {}
                Step::Retry(wait) => {
                    self.lane_unsent(|unsent| unsent.insert(item.id));
                    blocked.insert(item.ordering_key.clone());
                    retry = Some(retry.map_or(wait, |r| r.min(wait)));
                }
                Step::Trouble => {
                    self.release(handed.collect());
                    return Pass::Retry(Duration::from_secs(2));
                }
                Step::LostLease => {
                    self.release(handed.collect());
                    return Pass::LostLease;
                }
                Step::Fatal(error) => {
                    self.release(handed.collect());
                    return Pass::Fatal(error);
                }
            }
        }
        if !read_outbox {
            return match retry {
                Some(wait) => Pass::Retry(wait),
                None => Pass::Drained(None),
            };
        }
        let (mut items, next_due) = match self
            .store
            .outbox()
            .outbox_heads(&self.identity, BATCH)
            .await
        {
            Ok(heads) => (heads.due, heads.next_due),
            Err(error) => {
                tracing::error!(%error, "cannot read the outbox");
                return Pass::Retry(Duration::from_secs(2));
            }
        };
        // Entries in the lane are the lane's to send.
        items.retain(|item| !self.express.is_pending(item.id));
        // Under a tight rate limit the answers matter more than the reactions;
        // each kind keeps its own order, and so does every topic.
        items.sort_by_key(|item| {
            (
                matches!(
                    item.kind,
                    OutboxKind::ReactionAdd { .. } | OutboxKind::ReactionRemove { .. }
                ),
                item.id,
            )
        });
        for item in items {
            if blocked.contains(&item.ordering_key) {
                continue;
            }
            let reaction = matches!(
                item.kind,
                OutboxKind::ReactionAdd { .. } | OutboxKind::ReactionRemove { .. }
            );
            if reaction
                && self
                    .client
                    .budget_left()
                    .is_some_and(|left| left < REPLY_RESERVE)
            {
                // Under rate pressure a reaction says too little to spend a
                // request on: replies get the budget.
                tracing::debug!(id = item.id, "a reaction is dropped under rate pressure");
                if let Err(error) = self
                    .store
                    .outbox()
                    .outbox_gave_up(
                        item.id,
                        "dropped under rate pressure: the budget is kept for replies",
                    )
                    .await
                {
                    tracing::error!(%error, id = item.id, "cannot record a dropped reaction");
                }
                continue;
            }
            match self.settle(lease, &item, None).await {
                Step::Delivered | Step::GaveUp => {}
                Step::Retry(wait) => {
                    blocked.insert(item.ordering_key.clone());
                    retry = Some(retry.map_or(wait, |r| r.min(wait)));
                }
                Step::Trouble => return Pass::Retry(Duration::from_secs(2)),
                Step::LostLease => return Pass::LostLease,
                Step::Fatal(error) => return Pass::Fatal(error),
            }
        }
        match retry {
            Some(wait) => Pass::Retry(wait),
            None => Pass::Drained(next_due),
        }
    }

    /// Delivers one entry, through rate limits, and records the outcome.
    /// `fresh`: the entry came through the lane, its attempt recorded then.
    async fn settle(&self, lease: &mut Lease, item: &OutboxItem, fresh: Option<Instant>) -> Step {
        loop {
            match self.wait_holding_lease(lease).await {
                Ok(()) => {}
                Err(Pass::LostLease) => return Step::LostLease,
                Err(_) => return Step::Trouble,
            }
            match self.deliver(item, fresh).await {
                Ok(server_id) => {
                    if let Err(error) = self
                        .store
                        .outbox()
                        .outbox_delivered(item.id, server_id)
                        .await
                    {
                        tracing::error!(%error, id = item.id, "delivered, but cannot record it");
                        return Step::Trouble;
                    }
                    return Step::Delivered;
                }
                // The pacer waits out the Retry-After; try the same entry again.
                Err(Error::RateLimited { .. }) => continue,
                Err(error @ Error::Unauthorized { .. }) => return Step::Fatal(error),
                Err(Error::LeaseLost) => return Step::LostLease,
                Err(error) if error.is_transient() && item.attempts + 1 < MAX_ATTEMPTS => {
                    let wait = entry_backoff(item.attempts + 1);
                    let retry_at =
                        chrono::Utc::now() + chrono::TimeDelta::from_std(wait).unwrap_or_default();
                    tracing::warn!(%error, id = item.id, attempts = item.attempts + 1, wait_ms = wait.as_millis() as u64, "a delivery failed; retrying");
                    if let Err(store_error) = self
                        .store
                        .outbox()
                        .outbox_failed(item.id, &error.to_string(), retry_at)
                        .await
                    {
                        tracing::error!(%store_error, id = item.id, "cannot record a failed delivery");
                    }
                    return Step::Retry(wait);
                }
                Err(error) => {
                    tracing::error!(%error, id = item.id, attempts = item.attempts + 1, "a delivery is given up (the server refused it, or it failed too often)");
                    if let Err(store_error) = self
                        .store
                        .outbox()
                        .outbox_gave_up(item.id, &error.to_string())
                        .await
                    {
                        tracing::error!(%store_error, id = item.id, "cannot record a refused delivery");
                        return Step::Trouble;
                    }
                    return Step::GaveUp;
                }
            }
        }
    }

    /// Waits for the rate limit's budget, renewing the lease meanwhile (a
    /// wait can outlast it, and another instance must not take over the
    /// entry this one is about to send), then once more unless it is fresh.
    async fn wait_holding_lease(&self, lease: &mut Lease) -> Result<(), Pass> {
        let budget = self.client.wait_for_budget();
        tokio::pin!(budget);
        loop {
            let waited = tokio::select! {
                () = &mut budget => true,
                () = tokio::time::sleep(LEASE_RENEW) => false,
            };
            if waited && lease.left() >= LEASE_FRESH {
                return Ok(());
            }
            match lease.renew(&self.store).await {
                Ok(true) => {}
                Ok(false) => return Err(Pass::LostLease),
                Err(error) => {
                    tracing::error!(%error, "cannot renew the outbox lease");
                    return Err(Pass::Retry(Duration::from_secs(2)));
                }
            }
            if waited {
                return Ok(());
            }
        }
    }

    /// Delivers one entry; returns the id of a posted message.
    async fn deliver(
        &self,
        item: &OutboxItem,
        fresh: Option<Instant>,
    ) -> Result<Option<i64>, Error> {
        match &item.kind {
            OutboxKind::Message { to, content } => {
                // A lane entry's recorded attempt is its first: nothing to look for.
                if item.attempts > 0
                    && fresh.is_none()
                    && let Some(found) = self.already_posted(to, content, item.in_reply_to).await?
                {
                    tracing::info!(
                        id = item.id,
                        message_id = found,
                        "a reply sent before a restart had arrived; not sending it again"
                    );
                    return Ok(Some(found));
                }
                self.client
                    .send_gated(to, content, async || self.attempting(item, fresh).await)
                    .await
                    .map(Some)
            }
            OutboxKind::ReactionAdd { message_id, emoji } => self
                .client
                .add_reaction(*message_id, emoji)
                .await
                .map(|_| None),
            OutboxKind::ReactionRemove { message_id, emoji } => self
                .client
                .remove_reaction(*message_id, emoji)
                .await
                .map(|_| None),
            OutboxKind::Edit {
                message_id,
                content,
            } => self
                .client
                .edit_gated(*message_id, content, async || {
                    self.attempting(item, fresh).await
                })
                .await
                .map(|_| None),
        }
    }

    /// Right before the request (after any wait for the rate limit): the
    /// lease is renewed, only if this instance still holds it, and the
    /// attempt recorded, in one transaction. If that fails, nothing is sent:
    /// a crash after an unrecorded send would post the reply twice, and
    /// another instance may hold the deliveries now.
    async fn attempting(&self, item: &OutboxItem, fresh: Option<Instant>) -> Result<(), Error> {
        // A lane entry recorded its attempt when the lease had at least
        // LEASE_MARGIN left; shortly after, that still outlasts the request.
        if fresh.is_some_and(|at| at.elapsed() < EXPRESS_WINDOW) {
            return Ok(());
        }
        match self
            .store
            .outbox()
            .outbox_attempting_under_lease(
                item.id,
                &lease_name(&self.identity),
                &self.instance,
                LEASE_MARGIN,
            )
            .await
        {
            Ok(true) => Ok(()),
            Ok(false) => Err(Error::LeaseLost),
            Err(e) => Err(Error::Transport(format!("cannot record the attempt: {e}"))),
        }
    }

    /// Looks for a message of the bot's with this content after the message
    /// it answers, in the same topic or conversation.
    async fn already_posted(
        &self,
        to: &Destination,
        content: &str,
        after: Option<i64>,
    ) -> Result<Option<i64>, Error> {
        let mut narrow = match to {
            Destination::Channel { channel, topic } => {
                vec![NarrowTerm::channel(channel), NarrowTerm::topic(topic)]
            }
            Destination::Direct { user_ids } => vec![NarrowTerm::dm(user_ids)],
        };
        narrow.push(NarrowTerm::sender(self.me));
        let page = match after {
            Some(id) => {
                self.client
                    .messages(Anchor::Id(id), 0, 100, false, &narrow)
                    .await?
            }
            None => {
                self.client
                    .messages(Anchor::Newest, 100, 0, true, &narrow)
                    .await?
            }
        };
        let wanted = content.trim_end();
        for message in &page.messages {
            if message.sender_id != self.me || message.content.trim_end() != wanted {
                continue;
            }
            // The same text may answer an earlier command: skip the bot's
            // messages that are recorded as another entry's delivery.
            let taken = self
                .store
                .outbox()
                .is_delivered_message(&self.identity, message.id)
                .await
                .map_err(|e| Error::Transport(format!("cannot read the outbox: {e}")))?;
            if !taken {
                return Ok(Some(message.id));
            }
        }
        Ok(None)
    }
}
