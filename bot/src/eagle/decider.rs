//! Eagle's decider: workers' requests in, decisions out, through the database.
//!
//! The runner records every request in `worker_requests`; the decider picks
//! pending ones up (woken by [`crate::store::Store::changes`]: in-process,
//! PostgreSQL `LISTEN`, or SQLite's data-version poll), asks the policy
//! plugins **outside** any write transaction, then records the decision, its
//! audit entry and its post in the run's topic in one transaction, by a
//! conditional update: with several Eagle instances each request is still
//! decided exactly once. Nothing here knows about Zulip: decisions keep
//! flowing while the chat server is down, and the posts wait in the outbox.
//!
//! It also posts what the runner leaves for a human (a run held after too
//! many failures, a cost cap reached), reminds the owner of escalations left
//! unanswered, and expires them after `approval_ttl` (the worker is told on
//! resume).

mod offer;

use std::time::Duration;

use crate::ground::text::{neutralize_mentions, one_line, visible_line};
use crate::policy::{Outcome, PolicyHost, PolicyRequest, PolicyTask, RequestKind};
use crate::runtime::background::{BackgroundLoop, Next, Tick, Wake};
use crate::runtime::posts::{People, Poster};
use crate::store::{Request, RequestStatus, Run, Store, StoreError, Task};

/// Requests decided per sweep before looking at the rest of the work.
const BATCH: i64 = 50;
/// How often reminders and expiries are looked for when nothing else wakes the decider.
const PERIODIC: Duration = Duration::from_secs(30);
/// The longest plugin reason or worker text quoted in a post.
const QUOTE_CHARS: usize = 300;

/// When escalations are reminded and when they expire.
#[derive(Debug, Clone, Copy)]
pub struct DeciderSettings {
    pub reminder_after: Duration,
    pub approval_ttl: Duration,
    /// `github.drafts = "keep"`: an escalated merge of a draft says it will
    /// not be merged.
    pub keep_drafts: bool,
}

impl Default for DeciderSettings {
    fn default() -> Self {
        DeciderSettings {
            reminder_after: Duration::from_secs(2 * 3600),
            approval_ttl: Duration::from_secs(24 * 3600),
            keep_drafts: false,
        }
    }
}

/// What a sweep left for later.
#[derive(Debug, Clone, Copy)]
pub struct Sweep {
    /// More requests are pending than one pass takes.
    pub more: bool,
    /// When the next reminder or expiry is due.
    pub next_due: Option<Duration>,
}

impl BackgroundLoop for Decider {
    const NAME: &'static str = "decider";
    /// A worker waits on every decision: no settling.
    const WAKE: Wake = Wake::Changes;

    async fn tick(&mut self, _: &mut Tick<'_>) -> anyhow::Result<Next> {
        Ok(match self.sweep().await? {
            Sweep { more: true, .. } => Next::Again,
            Sweep { next_due, .. } => {
                Next::After(next_due.map_or(PERIODIC, |due| due.min(PERIODIC)))
            }
        })
    }
}

/// Everything the decider needs.
#[derive(Debug, Clone)]
pub struct Decider {
    pub store: Store,
    pub policy: PolicyHost,
    /// Eagle's identity in the executor channel.
    pub poster: Poster,
    pub people: People,
    pub settings: DeciderSettings,
}

impl Decider {
    /// One pass over everything waiting for Eagle.
    pub async fn sweep(&self) -> Result<Sweep, StoreError> {
        let pending = self.store.requests().pending_requests(BATCH).await?;
        let more = pending.len() as i64 == BATCH;
        for request in pending {
            let span = tracing::info_span!("request", run = request.run_id, request = request.id);
            tracing::Instrument::instrument(self.decide(request), span).await?;
        }
        self.post_notices().await?;
        let next_due = self.remind_and_expire().await?;
        Ok(Sweep { more, next_due })
    }

    /// Decides one pending request: by a human's earlier answer to exactly
    /// this request, or by the plugins.
    pub async fn decide(&self, request: Request) -> Result<(), StoreError> {
        let (run, task) = self.run_and_task(request.run_id).await?;
        let Some(run) = run else {
            return Ok(());
        };
        if self.decide_by_binding(&request, &run).await? {
            return Ok(());
        }
        let policy_request = PolicyRequest {
            kind: if request.kind == "escalate" {
                RequestKind::Escalate
            } else {
                RequestKind::Request
            },
            action: request.action.clone(),
            run_id: run.id as u64,
            request_id: request.id as u64,
            body: request.body.clone(),
            task: task.as_ref().map(policy_task),
            requested_by: format!("run {} worker", run.id),
        };
        // The plugins run outside any write transaction.
        let decision = self.policy.decide(&policy_request).await;
        let status = match decision.outcome {
            Outcome::Approve => RequestStatus::Approved,
            Outcome::Deny => RequestStatus::Denied,
            Outcome::Escalate => RequestStatus::Escalated,
        };
        let decided_by = decision
            .decided_by
            .as_ref()
            .map_or_else(|| "policy".to_string(), |p| format!("policy:{}", p.name));
        let mut tx = self.store.begin_write().await?;
        let expires = (status == RequestStatus::Escalated).then(|| {
            crate::store::now()
                + chrono::TimeDelta::from_std(self.settings.approval_ttl)
                    .unwrap_or(chrono::TimeDelta::days(1))
        });
        let Some(decided) = tx
            .requests()
            .decide_request(
                request.id,
                status,
                &decided_by,
                &decision.reason,
                decision.notify_owner,
                expires,
            )
            .await?
        else {
            // Another instance or a human decided first.
            return Ok(());
        };
        tx.audit_log()
            .audit(&decision.audit_entry(
                &format!("request:{}", request.id),
                &request.params_hash,
                None,
            ))
            .await?;
        let owner = self.people.owner_of(task.as_ref());
        let plugin = decision.decided_by.as_ref().map_or_else(
            || "no plugin decided".to_string(),
            |p| one_line(&p.name, 64),
        );
        let reason = quote(&decision.reason);
        let head = answer_head(&decided, &run);
        // What answers the request now, for the escalations it replaces.
        let mut current = match status {
            RequestStatus::Approved => format!("Eagle approved it ({plugin})"),
            RequestStatus::Denied => format!("Eagle denied it ({plugin})"),
            _ => format!("`!approve {} {}` answers it", run.id, decided.id),
        };
        let text = match status {
            RequestStatus::Approved => format!("{head} ({plugin})"),
            RequestStatus::Denied => {
                let mut text = format!("{head} ({plugin}): {reason}");
                if decision.notify_owner
                    && let Some(owner) = &owner
                {
                    text.push_str(&format!(" · {owner}, for your information"));
                }
                text
            }
            _ => {
                tx.holds()
                    .set_waiting_on(run.id, Some(&self.people.owner_label(task.as_ref())), None)
                    .await?;
                let merge =
                    (decided.action == "merge_pr").then(|| offer::at_escalation(&run, &decided));
                match merge {
                    // One decision, one message: the merge of this head
                    // offered, `!merge` answering the request too.
                    Some(offer::Offer::Decide(sha)) => {
                        tx.prs().record_merge_offer(run.id, &sha).await?;
                        current = format!("`!merge {}` answers it", run.id);
                        let owner = owner
                            .as_deref()
                            .map(|o| format!("{o} "))
                            .unwrap_or_default();
                        format!(
                            "{head} {}",
                            offer::decide_text(
                                &format!("{owner}merge run {}'s PR?", run.id),
                                &run,
                                &sha,
                                Some(&decided),
                                self.settings.keep_drafts
                            )
                        )
                    }
                    // The owner was offered this head already: no second ping.
                    Some(offer::Offer::Shown(sha)) => {
                        current = format!("`!merge {}` answers it", run.id);
                        format!(
                            "{head} the worker asks to merge the head Eagle offered already ({}): \
                         `!merge {id}` answers it too.",
                            crate::store::short_sha(&sha),
                            id = run.id
                        )
                    }
                    _ => escalation_text(
                        &head,
                        owner.as_deref(),
                        &reason,
                        &decided,
                        &run,
                        task.as_ref(),
                        self.settings.keep_drafts,
                    ),
                }
            }
        };
        // The earlier escalations for the same effect step aside, naming
        // this one; only this one asks (and pings).
        tx.supersede_earlier(&decided, &current).await?;
        let post = self.poster.post(&mut tx, &run.topic(), &text).await?;
        if status == RequestStatus::Escalated {
            tx.record_escalation_post(decided.id, post).await?;
        }
        tx.commit().await?;
        tracing::info!(
            run = run.id,
            request = request.id,
            action = %request.action,
            outcome = decision.outcome.as_str(),
            "decided"
        );
        Ok(())
    }

    /// A resumed worker asking again for exactly what a human decided gets
    /// that decision (an approval once). Returns whether it did.
    async fn decide_by_binding(&self, request: &Request, run: &Run) -> Result<bool, StoreError> {
        let mut tx = self.store.begin_write().await?;
        let Some(bound) = tx.requests().bind_to_human_decision(request).await? else {
            return Ok(false);
        };
        let earlier = bound.bound_to.unwrap_or_default();
        let head = answer_head(&bound, run);
        let text = match bound.status {
            RequestStatus::Approved => {
                format!("{head} (the same request a human approved as req {earlier})")
            }
            _ => format!(
                "{head} (the same request a human denied as req {earlier}): {}",
                quote(bound.decision_reason.as_deref().unwrap_or(""))
            ),
        };
        self.poster.post(&mut tx, &run.topic(), &text).await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn run_and_task(&self, run_id: i64) -> Result<(Option<Run>, Option<Task>), StoreError> {
        let mut tx = self.store.begin_read().await?;
        let Some(run) = tx.tasks().run(run_id).await? else {
            return Ok((None, None));
        };
        let task = tx.tasks().task_by_gid(&run.task_gid).await?;
        Ok((Some(run), task))
    }

    /// Posts what runners left for a human, with the @-mention.
    async fn post_notices(&self) -> Result<(), StoreError> {
        for notice in self.store.controls().unposted_notices(BATCH).await? {
            let (run, task) = self.run_and_task(notice.run_id).await?;
            let Some(run) = run else { continue };
            let owner = self
                .people
                .owner_of(task.as_ref())
                .map(|o| format!("{o} "))
                .unwrap_or_default();
            let what = quote(&notice.text);
            let mut offered = None;
            let text = match notice.kind.as_str() {
                "complete" => {
                    let requests = self.store.requests().requests_of_run(run.id).await?;
                    let done = format!(
                        "run {id} is complete: CI and the review are green and nothing is \
                         unresolved on its PR, {url}.",
                        id = run.id,
                        url = what
                    );
                    match offer::at_completion(&run, &requests) {
                        offer::Offer::Decide(sha) => {
                            let text = offer::decide_text(
                                &format!(
                                    "{owner}run {} is complete, CI and the review green: merge \
                                     its PR?",
                                    run.id
                                ),
                                &run,
                                &sha,
                                None,
                                self.settings.keep_drafts,
                            );
                            offered = Some(sha);
                            format!("{text} {what}")
                        }
                        offer::Offer::Shown(sha) => format!(
                            "{done} `!merge {id}` merges it at {}, as offered above.",
                            crate::store::short_sha(&sha),
                            id = run.id
                        ),
                        offer::Offer::Nothing(why) => format!("{done} Nothing to decide: {why}."),
                    }
                }
                "merge_moved" => format!("{owner}run {id}: {what}.", id = run.id),
                "pr_held" => format!(
                    "{owner}run {id} is held: {what}. `!retry {id}` lets the PR loop go on (as many \
                     workers again); `!cancel {id}` stops it.",
                    id = run.id
                ),
                "ci_never_ran" => format!(
                    "{owner}run {id} waits: {what}. Start CI on its branch, or set \
                     `github.ci_workflow` in the executor profile.",
                    id = run.id
                ),
                "carry_blocked" => format!(
                    "{owner}run {id}: {what}. Nothing was done; once that is fixed, a new \
                     request (the worker's, after `!retry {id}`) asks again.",
                    id = run.id
                ),
                // Not a question: no mention.
                "merge_expired" => format!("[EXPIRED: merge_pr] run:{} {what}", run.id),
                "waits" => format!(
                    "{owner}run {id} is held: {what}. `!retry {id}` lets it go on (as many \
                     times again); `!cancel {id}` stops it.",
                    id = run.id
                ),
                "cost_cap" => format!(
                    "{owner}run {id} is held: it reached its cost cap ({what}). \
                     `!retry {id}` allows it as much again; `!cancel {id}` stops it.",
                    id = run.id
                ),
                _ => format!(
                    "{owner}run {id} is held after {failures} failed attempt(s); the last: {what}. \
                     `!retry {id}` tries again; `!cancel {id}` stops it.",
                    id = run.id,
                    failures = run.failures
                ),
            };
            let mut tx = self.store.begin_write().await?;
            if !tx.controls().mark_notice_posted(notice.id).await? {
                continue;
            }
            if let Some(sha) = &offered {
                tx.prs().record_merge_offer(run.id, sha).await?;
            }
            self.poster.post(&mut tx, &run.topic(), &text).await?;
            tx.commit().await?;
        }
        Ok(())
    }

    /// Reminds the owner of escalations waiting longer than `reminder_after`
    /// and expires those older than `approval_ttl`. Returns when the next
    /// one is due.
    async fn remind_and_expire(&self) -> Result<Option<Duration>, StoreError> {
        let now = crate::store::now();
        let remind_after = chrono::TimeDelta::from_std(self.settings.reminder_after)
            .unwrap_or(chrono::TimeDelta::hours(2));
        let mut next: Option<chrono::DateTime<chrono::Utc>> = None;
        for request in self.store.requests().escalated_requests(200).await? {
            let remind_at = request
                .escalated_at
                .filter(|_| request.reminded_at.is_none())
                .map(|at| at + remind_after);
            let expired = request.expires_at.is_some_and(|at| at <= now);
            let due = remind_at.is_some_and(|at| at <= now);
            if !expired && !due {
                for at in [remind_at, request.expires_at].into_iter().flatten() {
                    next = Some(next.map_or(at, |n| n.min(at)));
                }
                continue;
            }
            let (run, task) = self.run_and_task(request.run_id).await?;
            let Some(run) = run else { continue };
            let mut tx = self.store.begin_write().await?;
            if expired {
                let ttl = humantime::format_duration(self.settings.approval_ttl);
                let reason = format!("nobody answered within {ttl}");
                let Some(gone) = tx.requests().expire_request(request.id, &reason).await? else {
                    continue;
                };
                tx.holds().settle_waiting(run.id).await?;
                let text = format!(
                    "[EXPIRED: {}] run:{} req:{} {reason}; the worker is told when it resumes.",
                    gone.action, run.id, gone.id
                );
                self.poster.post(&mut tx, &run.topic(), &text).await?;
            } else {
                if !tx.requests().mark_reminded(request.id).await? {
                    continue;
                }
                let owner = self
                    .people
                    .owner_of(task.as_ref())
                    .map(|o| format!("{o} "))
                    .unwrap_or_default();
                let answer = if request.action == "merge_pr" && request.bound_sha.is_some() {
                    format!("`!merge {}`", run.id)
                } else {
                    format!("`!approve {} {}`", run.id, request.id)
                };
                let text = format!(
                    "{owner}reminder: run {run_id} request {id} ({action}) still waits for you: \
                     {answer} or `!deny {run_id} {id} <reason>`.",
                    run_id = run.id,
                    id = request.id,
                    action = request.action
                );
                self.poster.post(&mut tx, &run.topic(), &text).await?;
            }
            tx.commit().await?;
            // What happened may make another due soon (an expiry after a
            // reminder): look again right away.
            next = Some(now);
        }
        Ok(next.map(|at| (at - now).to_std().unwrap_or_default()))
    }
}

/// `[APPROVED: run_tests] run:42 req:7`.
fn answer_head(request: &Request, run: &Run) -> String {
    let tag = match request.status {
        RequestStatus::Approved => "APPROVED",
        RequestStatus::Denied => "DENIED",
        RequestStatus::Escalated => "ESCALATED",
        RequestStatus::Expired => "EXPIRED",
        RequestStatus::Pending => "PENDING",
    };
    format!(
        "[{tag}: {}] run:{} req:{}",
        request.action, run.id, request.id
    )
}

fn escalation_text(
    head: &str,
    owner: Option<&str>,
    reason: &str,
    request: &Request,
    run: &Run,
    task: Option<&Task>,
    keep_drafts: bool,
) -> String {
    let owner = owner.map(|o| format!(" {o}")).unwrap_or_default();
    let private = task.is_some_and(|t| t.origin_private);
    // An effect is named in Eagle's words; a question in the worker's.
    let asked = match crate::policy::effect::describe_for(request, run, private, keep_drafts) {
        Some(what) => format!(" {what}\n"),
        None if request.body.is_empty() || private => " ".to_string(),
        None => format!(" The worker asks: “{}”. ", quote(&request.body)),
    };
    format!(
        "{head}{owner} {reason}.{asked}Answer with `!approve {run_id} {id}` or \
         `!deny {run_id} {id} <reason>`; `!show {run_id} {id}` shows the request in full.",
        run_id = run.id,
        id = request.id
    )
}

/// Text from a plugin or a worker, safe to post: one line, capped, inert
/// mentions, every invisible code point written out (`<U+202E>`).
fn quote(text: &str) -> String {
    neutralize_mentions(&visible_line(text, QUOTE_CHARS))
}

/// A task as the plugins see it.
pub fn policy_task(task: &Task) -> PolicyTask {
    PolicyTask {
        gid: task.task_gid.clone(),
        source: task.source.clone(),
        title: task.title.clone(),
        description: task.description.clone(),
        notes: task.notes.clone(),
        links: serde_json::from_str(&task.links).unwrap_or_default(),
        tags: serde_json::from_str(&task.tags).unwrap_or_default(),
        platform: task.platform.clone(),
        assignee: task.assignee.clone(),
        closed: task.task_state == "closed",
    }
}
