//! The conversation a task came from hears about its run, once per
//! milestone: started, needs a human (with the one command that answers
//! and the run's topic), held, failed, PR opened, complete.
//!
//! A background loop of Eagle's profile (once per deployment, by its lease)
//! reads the runs changed since its cursor and the open escalations, and
//! tells each milestone not told yet, in one transaction with its mark
//! (`milestones`), so a crash never tells one twice or loses one. The lines
//! ping nobody: the escalation's @-mention is in the run's topic, and this
//! is where the requester learns to look there.

use std::time::Duration;

use crate::ground::text::{neutralize_mentions, one_line};
use crate::runtime::background::{BackgroundLoop, LeaseSpec, Next, Tick, Wake};
use crate::runtime::posts::Poster;
use crate::store::{Request, Run, RunState, Store, StoreError, Task};

const LEASE: &str = "milestones";
const LEASE_TTL: Duration = Duration::from_secs(60);
/// The cursor of runs looked at (`controls`: `cursor:milestones`).
pub const CURSOR: &str = "milestones";
/// Changes this close before the cursor are read again (clocks of several
/// writers, a transaction that committed late).
const OVERLAP: chrono::TimeDelta = chrono::TimeDelta::seconds(30);
const BATCH: i64 = 500;

/// The milestone loop.
#[derive(Debug)]
pub struct Milestones {
    store: Store,
    poster: Poster,
    executor_channel: String,
}

impl Milestones {
    pub fn new(store: Store, poster: Poster, executor_channel: String) -> Milestones {
        Milestones {
            store,
            poster,
            executor_channel,
        }
    }

    /// Tells what happened since the cursor; returns whether a batch was full.
    pub async fn pass(&self) -> Result<bool, StoreError> {
        let mut tx = self.store.begin_read().await?;
        let cursor = tx.conversations().cursor(CURSOR).await?;
        drop(tx);
        let Some(cursor) = cursor else {
            // The first pass of a deployment tells nothing of the past.
            let mut tx = self.store.begin_write().await?;
            tx.conversations()
                .set_cursor(CURSOR, crate::store::now())
                .await?;
            return tx.commit().await.map(|()| false);
        };
        let mut tx = self.store.begin_read().await?;
        let runs = tx
            .conversations()
            .runs_changed_since(cursor - OVERLAP, BATCH)
            .await?;
        drop(tx);
        let mut newest = cursor;
        for run in &runs {
            self.tell(run, None).await?;
            newest = newest.max(run.updated_at);
        }
        for request in self.store.requests().escalated_requests(200).await? {
            let mut tx = self.store.begin_read().await?;
            let run = tx.tasks().run(request.run_id).await?;
            drop(tx);
            if let Some(run) = run {
                self.tell(&run, Some(&request)).await?;
            }
        }
        if newest > cursor {
            let mut tx = self.store.begin_write().await?;
            tx.conversations().set_cursor(CURSOR, newest).await?;
            tx.commit().await?;
        }
        Ok(runs.len() as i64 == BATCH && newest > cursor)
    }

    /// Tells `run`'s milestones not told yet (or the one escalation).
    async fn tell(&self, run: &Run, escalation: Option<&Request>) -> Result<(), StoreError> {
        let mut tx = self.store.begin_read().await?;
        let task = tx.tasks().task_by_gid(&run.task_gid).await?;
        let told = tx.conversations().told_milestones(run.id).await?;
        drop(tx);
        let Some(task) = task else { return Ok(()) };
        let Some(to) = crate::eagle::analyzer::origin_destination(&task) else {
            return Ok(());
        };
        let lines = match escalation {
            Some(request) => vec![(
                format!("escalation:{}", request.id),
                self.escalation_line(run, &task, request),
            )],
            None => self.lines(run, &task),
        };
        // Every change wakes this loop: a write only for what is new.
        let lines: Vec<_> = lines
            .into_iter()
            .filter(|(key, _)| !told.contains(key))
            .collect();
        if lines.is_empty() {
            return Ok(());
        }
        let mut tx = self.store.begin_write().await?;
        for (key, line) in lines {
            if tx.conversations().mark_milestone(run.id, &key).await? {
                self.poster.post_to(&mut tx, to.clone(), &line).await?;
            }
        }
        tx.commit().await
    }

    fn topic_link(&self, run: &Run) -> String {
        format!("#**{}>{}**", self.executor_channel, run.topic())
    }

    fn lines(&self, run: &Run, task: &Task) -> Vec<(String, String)> {
        let id = run.id;
        let t = task.id;
        let mut lines = Vec::new();
        if run.started_at.is_some() {
            lines.push((
                "started".to_string(),
                format!(
                    "Run {id} of task #{t} started; its worker's progress is in {}.",
                    self.topic_link(run)
                ),
            ));
        }
        if let Some(url) = &run.pr_url {
            lines.push((
                "pr".to_string(),
                format!(
                    "Run {id} of task #{t} opened its PR: {}",
                    neutralize_mentions(url)
                ),
            ));
        }
        let reason = run
            .state_reason
            .as_deref()
            .map(|r| neutralize_mentions(&one_line(r, 200)))
            .unwrap_or_else(|| "no reason recorded".into());
        match run.state {
            RunState::Complete => lines.push((
                "complete".to_string(),
                match &run.pr_url {
                    Some(url) => format!(
                        "Run {id} of task #{t} is complete: {} is green and reviewed.",
                        neutralize_mentions(url)
                    ),
                    None => format!("Run {id} of task #{t} is complete."),
                },
            )),
            RunState::Abandoned => lines.push((
                "failed".to_string(),
                format!(
                    "Run {id} of task #{t} failed: {reason}. `!retry {id}` starts it again; \
                     the details are in {}.",
                    self.topic_link(run)
                ),
            )),
            _ if run.held => lines.push((
                "held".to_string(),
                format!(
                    "Run {id} of task #{t} is held: {reason}. Its owner decides in {} \
                     (`!retry {id}` or `!cancel {id}`).",
                    self.topic_link(run)
                ),
            )),
            _ => {}
        }
        lines
    }

    fn escalation_line(&self, run: &Run, task: &Task, request: &Request) -> String {
        let asks = format!("req {} ({})", request.id, request.action);
        format!(
            "Run {id} of task #{t} needs a human: {asks}. The owner answers in {link} with \
             `!approve {id} {req}` or `!deny {id} {req} <reason>`.",
            id = run.id,
            t = task.id,
            link = self.topic_link(run),
            req = request.id
        )
    }
}

impl BackgroundLoop for Milestones {
    const NAME: &'static str = "milestones";
    const WAKE: Wake = Wake::ChangesSettled;

    fn lease(&self) -> Option<LeaseSpec> {
        Some(LeaseSpec {
            name: LEASE,
            ttl: LEASE_TTL,
        })
    }

    async fn tick(&mut self, _: &mut Tick<'_>) -> anyhow::Result<Next> {
        Ok(if self.pass().await? {
            Next::Again
        } else {
            Next::Idle
        })
    }
}
