//! What a worker wrote, recorded and relayed: its requests recorded with
//! the key `line:<offset>:<index>` (so a re-read log asks nothing twice), its
//! protocol lines posted stamped with the run's own id (status bursts
//! coalesced), its session, cost and turns, and the new log offset, all in
//! one fenced transaction.

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::time::Instant;

use super::KILL_GRACE;
use super::{Ending, Worker};
use crate::executor::runner::Shared;
use crate::executor::runner::output::{Event, events};
use crate::ground::protocol::{Line, Tag};
use crate::ground::text::{neutralize_mentions, one_line};
use crate::store::{
    Fence, NewRequest, Recorded, Request, RequestVia, StoreError, Tx, body_refusal,
};

/// The longest worker text relayed in one post.
const RELAY_CHARS: usize = 500;

/// Records a request of the attempt in `tx`; a new one is counted against
/// the flood cap and posted in the run's topic. The log's request lines and
/// the socket's requests both come through here.
pub(in crate::executor::runner) async fn record_request(
    tx: &mut Tx,
    shared: &Shared,
    fence: &Fence,
    requests: &AtomicUsize,
    private: bool,
    new: &NewRequest,
) -> Result<Recorded, StoreError> {
    let recorded = tx.requests().record_request(new, fence).await?;
    if recorded.new {
        requests.fetch_add(1, Ordering::Relaxed);
        let text = relay_request(&recorded.request, private);
        let topic = format!("run {}", fence.run);
        shared.poster.post(tx, &topic, &text).await?;
    }
    Ok(recorded)
}

/// `[REQUEST: run_tests] run:42 req:7 Scheme: macOS UI Tests CI`.
fn relay_request(request: &Request, private: bool) -> String {
    format!(
        "[{}: {}] run:{} req:{}{}",
        request.tag(),
        request.action,
        request.run_id,
        request.id,
        shown(&request.body, private)
    )
}

/// A worker's line, stamped with the run's own id whatever the worker wrote.
fn relay(line: &Line, run: i64, private: bool) -> String {
    format!(
        "[{}: {}] run:{run}{}",
        line.tag.as_str(),
        line.action,
        shown(&line.body, private)
    )
}

/// A relayed line's words after its tag, with a space before them; none for
/// a private task's run.
fn shown(body: &str, private: bool) -> String {
    if private || body.is_empty() {
        String::new()
    } else {
        format!(" {}", quote(body))
    }
}

/// A worker's text as Eagle posts it: one line, capped, mentions inert.
pub(super) fn quote(text: &str) -> String {
    neutralize_mentions(&one_line(text, RELAY_CHARS))
}

impl Worker {
    /// Records the lines read (requests, progress, session, cost) and posts
    /// what is relayed, in one transaction fenced by the claim; then stops a
    /// worker that floods requests or passed its cost cap.
    pub(super) async fn record_lines(&mut self) -> Result<(), StoreError> {
        let run = self.fence.run;
        let topic = self.topic();
        let mut tx = self.shared.store.begin_write().await?;
        let mut session_cost = None;
        let mut turns = 0;
        let mut done = None;
        let mut status = None;
        let mut flooded = false;
        let mut session = None;
        let mut posted_status = false;
        // What the worker says it is doing, for `!status run N` (every
        // line, whether or not the topic hears it).
        let mut said = Vec::new();
        for line in &self.unprocessed {
            for event in events(&line.text, self.kind) {
                match event {
                    Event::Protocol { index, line: p } => match p.tag {
                        Tag::Request | Tag::Escalate => {
                            if self.requests.load(Ordering::Relaxed)
                                >= self.shared.settings.max_requests
                            {
                                flooded = true;
                                continue;
                            }
                            // Refused whole, never cut: an approval binds
                            // to the exact bytes.
                            if let Some(refusal) = body_refusal(&p.body) {
                                tracing::warn!(run, action = %p.action, "a request line over the limit; refused");
                                let text = format!(
                                    "run {run}: a [{}: {}] line was not recorded: {refusal}",
                                    p.tag.as_str(),
                                    p.action
                                );
                                self.shared.poster.post(&mut tx, &topic, &text).await?;
                                continue;
                            }
                            let new = NewRequest {
                                run_id: run,
                                attempt: self.fence.attempt,
                                key: format!("line:{}:{index}", line.start),
                                via: RequestVia::Line,
                                escalate: p.tag == Tag::Escalate,
                                action: p.action.clone(),
                                body: p.body.clone(),
                            };
                            record_request(
                                &mut tx,
                                &self.shared,
                                &self.fence,
                                &self.requests,
                                self.private,
                                &new,
                            )
                            .await?;
                        }
                        // Status and acknowledgement lines, and every
                        // `[DONE: …]` after the first of the attempt, are
                        // posted at most once per `status_interval` (a burst
                        // is coalesced, the newest wins): a worker cannot
                        // flood the run's topic with them.
                        Tag::Status | Tag::Acknowledged | Tag::Done
                            if p.tag != Tag::Done || self.done.is_some() || done.is_some() =>
                        {
                            if p.tag == Tag::Done {
                                done = Some((p.action.clone(), p.body.clone()));
                            }
                            let text = relay(&p, run, self.private);
                            if p.tag == Tag::Status {
                                said.push(text.clone());
                            }
                            // The first status after a quiet spell goes out at
                            // once; a burst after it is coalesced (the newest wins).
                            let interval = self.shared.settings.status_interval;
                            let quiet = self
                                .last_status_post
                                .is_none_or(|at| at.elapsed() >= interval);
                            if interval.is_zero() || (quiet && !posted_status) {
                                self.shared.poster.post(&mut tx, &topic, &text).await?;
                                posted_status = true;
                            } else {
                                status = Some(text);
                            }
                        }
                        // The attempt's first result goes out at once, after
                        // the status it follows.
                        Tag::Done => {
                            done = Some((p.action.clone(), p.body.clone()));
                            if let Some(before) =
                                status.take().or_else(|| self.pending_status.take())
                            {
                                self.shared.poster.post(&mut tx, &topic, &before).await?;
                            }
                            let text = relay(&p, run, self.private);
                            self.shared.poster.post(&mut tx, &topic, &text).await?;
                        }
                        _ => {
                            let text = relay(&p, run, self.private);
                            self.shared.poster.post(&mut tx, &topic, &text).await?;
                        }
                    },
                    Event::Forged(p) => {
                        tracing::warn!(
                            run,
                            tag = p.tag.as_str(),
                            "the worker wrote one of Eagle's answer tags; ignored"
                        );
                    }
                    Event::Malformed => tracing::debug!(run, "a malformed protocol line; ignored"),
                    Event::Session(s) => session = Some(s),
                    Event::Result {
                        session_cost: cost,
                        turns: t,
                        ..
                    } => {
                        session_cost = cost.or(session_cost);
                        turns += t;
                    }
                }
            }
        }
        let skip = said.len().saturating_sub(crate::store::STATUS_LINES_KEPT);
        tx.conversations()
            .push_status_lines(run, &said[skip..])
            .await?;
        let offset = self.unprocessed.last().map_or(0, |l| l.end) as i64;
        tx.workers()
            .record_progress(
                &self.fence,
                offset,
                Some(crate::store::now()),
                session_cost,
                turns,
                session.as_deref(),
            )
            .await?;
        let over_cap = if session_cost.is_some() {
            tx.tasks().run(run).await?.and_then(|r| {
                r.cost_cap_usd
                    .filter(|cap| r.cost_usd >= *cap)
                    .map(|cap| format!("${:.2} spent of a ${cap:.2} cap", r.cost_usd))
            })
        } else {
            None
        };
        tx.commit().await?;
        if let Some(done) = done {
            self.done = Some(done);
        }
        if let Some(s) = session {
            self.session = Some(s);
        }
        if posted_status {
            self.last_status_post = Some(Instant::now());
            self.pending_status = None;
        }
        if status.is_some() {
            self.pending_status = status;
        }
        if flooded && self.ending.is_none() {
            tracing::warn!(run, "the worker floods requests; stopping it");
            self.end_worker(
                Ending::Flood,
                libc::SIGTERM,
                KILL_GRACE,
                "too many requests: stop now",
            );
        }
        if let Some(reason) = over_cap
            && !matches!(self.ending, Some(Ending::CostCap(_)))
        {
            tracing::warn!(run, %reason, "the run reached its cost cap; stopping the worker");
            self.end_worker(
                Ending::CostCap(reason),
                libc::SIGTERM,
                KILL_GRACE,
                "the cost cap is reached: stop now",
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relayed_lines_carry_the_run_and_no_pings() {
        let line = crate::ground::protocol::parse_line(
            "[STATUS: investigation] run:999 ping @**all** now\nx",
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            relay(&line, 4, false),
            "[STATUS: investigation] run:4 ping @\u{200B}**all** now x"
        );
        assert_eq!(relay(&line, 4, true), "[STATUS: investigation] run:4");
    }
}
