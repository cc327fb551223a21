//! Eagle speaks first, once a day: a digest for the owner at the profile's
//! `[digest]` time and place. What finished (with PR links), what waits on
//! them (each with its one answering command), what is stuck or held and
//! why, and what the workers (and the questions) cost since the last
//! digest. Only what is still open is listed, so nothing the owner answered
//! already comes back; a day with nothing to say posts nothing.
//!
//! A background loop of Eagle's profile (once per deployment, by its lease)
//! woken by its timer; `eagle digest` composes one now. The time of the last
//! digest and the workers' total cost then are kept in `controls`, so a
//! restart neither repeats nor skips a day.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use crate::ground::text::{neutralize_mentions, one_line};
use crate::profile::DigestSettings;
use crate::runtime::background::{BackgroundLoop, LeaseSpec, Next, Tick, Wake};
use crate::runtime::posts::Poster;
use crate::store::{Destination, RunState, Store, StoreError, TaskStatus};

const LEASE: &str = "digest";
const LEASE_TTL: Duration = Duration::from_secs(120);
/// When the last digest was composed.
const CURSOR: &str = "digest";
/// The most items one section lists.
const MAX_ITEMS: usize = 15;

/// The digest loop.
#[derive(Debug)]
pub struct Digest {
    store: Store,
    poster: Poster,
    settings: DigestSettings,
    /// The owner's loud mention, if any.
    owner: Option<String>,
}

impl Digest {
    pub fn new(
        store: Store,
        poster: Poster,
        settings: DigestSettings,
        owner: Option<String>,
    ) -> Digest {
        Digest {
            store,
            poster,
            settings,
            owner,
        }
    }

    /// When the digest after `last` is due (the first configured time
    /// after it).
    pub fn due_after(&self, last: DateTime<Utc>) -> DateTime<Utc> {
        next_at(&self.settings, last)
    }

    /// Composes the digest of what happened since the last one and posts
    /// it, unless there is nothing to say; either way, the next one covers
    /// from now. Returns the text posted.
    pub async fn post_now(&self) -> Result<Option<String>, StoreError> {
        let now = crate::store::now();
        let mut tx = self.store.begin_read().await?;
        let since = tx
            .conversations()
            .cursor(CURSOR)
            .await?
            .unwrap_or(now - TimeDelta::days(1));
        let cost_then = tx
            .conversations()
            .cursor_value(CURSOR)
            .await?
            .unwrap_or(0.0);
        drop(tx);
        let (text, cost_now) = self.compose(since, cost_then).await?;
        let mut tx = self.store.begin_write().await?;
        tx.conversations().set_cursor(CURSOR, now).await?;
        tx.conversations()
            .set_cursor_value(CURSOR, cost_now)
            .await?;
        if let Some(text) = &text {
            let to = Destination::Channel {
                channel: self.settings.channel.clone(),
                topic: self.settings.topic.clone(),
            };
            self.poster.post_to(&mut tx, to, text).await?;
        }
        tx.commit().await?;
        Ok(text)
    }

    /// The digest's text (`None`: nothing to say) and the workers' total
    /// cost now.
    async fn compose(
        &self,
        since: DateTime<Utc>,
        cost_then: f64,
    ) -> Result<(Option<String>, f64), StoreError> {
        let mut tx = self.store.begin_read().await?;
        let changed = tx.conversations().runs_changed_since(since, 2000).await?;
        let mut finished = Vec::new();
        for run in changed.iter().filter(|r| {
            r.state == RunState::Complete && r.completed_at.is_some_and(|at| at >= since)
        }) {
            let task = tx.tasks().task_by_gid(&run.task_gid).await?;
            let title = task.as_ref().map(task_label).unwrap_or_default();
            let pr = run
                .pr_url
                .as_deref()
                .map(|u| format!(": {}", neutralize_mentions(u)))
                .unwrap_or_default();
            let dry = if run.dry_run { " (a dry run)" } else { "" };
            finished.push(format!("* run {}{dry} of {title}{pr}", run.id));
        }
        drop(tx);
        let mut tx = self.store.begin_read().await?;
        let mut offset = 0;
        let mut to_go = Vec::new();
        let mut stuck = Vec::new();
        loop {
            let tasks = tx.tasks().open_tasks(offset, 500).await?;
            if tasks.is_empty() {
                break;
            }
            offset += tasks.len() as i64;
            for task in &tasks {
                if matches!(task.status, TaskStatus::AwaitingGo | TaskStatus::ForReview) {
                    to_go.push(format!("* {}: `!go {}`", task_label(task), task.id));
                }
            }
        }
        let mut offset = 0;
        let mut cost_now = 0.0;
        let mut held = Vec::new();
        loop {
            let runs = tx.tasks().open_runs(offset, 500).await?;
            if runs.is_empty() {
                break;
            }
            offset += runs.len() as i64;
            for run in runs.iter().filter(|r| r.held) {
                held.push(run.id);
                let why = run
                    .state_reason
                    .as_deref()
                    .map(|r| neutralize_mentions(&one_line(r, 160)))
                    .unwrap_or_else(|| "held".into());
                stuck.push(format!(
                    "* run {id} is held: {why}: `!retry {id}` or `!cancel {id}`",
                    id = run.id
                ));
            }
        }
        for run in changed.iter().filter(|r| {
            r.state == RunState::Abandoned && r.completed_at.is_some_and(|at| at >= since)
        }) {
            let why = run
                .state_reason
                .as_deref()
                .map(|r| neutralize_mentions(&one_line(r, 160)))
                .unwrap_or_else(|| "no reason recorded".into());
            stuck.push(format!(
                "* run {id} failed: {why}: `!retry {id}`",
                id = run.id
            ));
        }
        cost_now += tx.conversations().total_worker_cost().await?;
        drop(tx);
        // A held run's open request is listed with the hold, once.
        let mut waits = Vec::new();
        for request in self.store.requests().escalated_requests(200).await? {
            if held.contains(&request.run_id) {
                continue;
            }
            waits.push(format!(
                "* run {run} req {id} ({action}): `!approve {run} {id}` or `!deny {run} {id} <reason>`",
                run = request.run_id,
                id = request.id,
                action = one_line(&request.action, 40)
            ));
        }
        let questions = self
            .store
            .conversations()
            .conversation_usage(since, None)
            .await?;
        let spent = (cost_now - cost_then).max(0.0);
        let waiting = waits.len() + to_go.len();
        if finished.is_empty() && waiting == 0 && stuck.is_empty() && spent < 0.005 {
            return Ok((None, cost_now));
        }
        let mut text = format!(
            "{}Eagle's digest since {}:",
            self.owner
                .as_deref()
                .map(|o| format!("{o} "))
                .unwrap_or_default(),
            since.format("%Y-%m-%d %H:%M UTC")
        );
        section(&mut text, "Finished", &finished);
        waits.extend(to_go);
        section(&mut text, "Waiting on you", &waits);
        section(&mut text, "Stuck or held", &stuck);
        text.push_str(&format!(
            "\n\n**Cost** since then: ${spent:.2} for the workers"
        ));
        if questions.questions > 0 {
            text.push_str(&format!(
                ", ${:.2} for {} question(s)",
                questions.cost_usd, questions.questions
            ));
        }
        text.push('.');
        Ok((Some(text), cost_now))
    }
}

/// `task #3 (Fix the tab preview) in web`: the title only where the task's
/// origin is not private, the repository where it names one.
fn task_label(task: &crate::store::Task) -> String {
    let id = task.id;
    let title = if task.origin_private {
        String::new()
    } else {
        format!(" ({})", neutralize_mentions(&one_line(&task.title, 80)))
    };
    let repo = task
        .repo
        .as_deref()
        .map(|r| format!(" in {r}"))
        .unwrap_or_default();
    format!("task #{id}{title}{repo}")
}

fn section(text: &mut String, name: &str, items: &[String]) {
    if items.is_empty() {
        return;
    }
    text.push_str(&format!("\n\n**{name}** ({}):\n", items.len()));
    for item in items.iter().take(MAX_ITEMS) {
        text.push_str(item);
        text.push('\n');
    }
    if items.len() > MAX_ITEMS {
        text.push_str(&format!(
            "* … and {} more (`!status`)\n",
            items.len() - MAX_ITEMS
        ));
    }
    let trimmed = text.trim_end().len();
    text.truncate(trimmed);
}

/// The first digest time strictly after `last`.
fn next_at(settings: &DigestSettings, last: DateTime<Utc>) -> DateTime<Utc> {
    let offset = TimeDelta::minutes(i64::from(settings.utc_offset_minutes));
    let local = last + offset;
    let midnight = local
        .date_naive()
        .and_hms_opt(0, 0, 0)
        .map(|t| t.and_utc())
        .unwrap_or(local);
    let mut due = midnight + TimeDelta::minutes(i64::from(settings.at_minute));
    if due <= local {
        due += TimeDelta::days(1);
    }
    due - offset
}

impl BackgroundLoop for Digest {
    const NAME: &'static str = "digest";
    const WAKE: Wake = Wake::Timer;

    fn lease(&self) -> Option<LeaseSpec> {
        Some(LeaseSpec {
            name: LEASE,
            ttl: LEASE_TTL,
        })
    }

    async fn tick(&mut self, tick: &mut Tick<'_>) -> anyhow::Result<Next> {
        let now = crate::store::now();
        let mut tx = self.store.begin_read().await?;
        let last = tx.conversations().cursor(CURSOR).await?;
        drop(tx);
        let Some(last) = last else {
            // A new deployment starts counting now: its first digest is the next due time.
            let mut tx = self.store.begin_write().await?;
            tx.conversations().set_cursor(CURSOR, now).await?;
            let cost = tx.conversations().total_worker_cost().await?;
            tx.conversations().set_cursor_value(CURSOR, cost).await?;
            tx.commit().await?;
            return Ok(Next::After(
                (self.due_after(now) - now).to_std().unwrap_or_default(),
            ));
        };
        let due = self.due_after(last);
        if due > now {
            return Ok(Next::After((due - now).to_std().unwrap_or_default()));
        }
        if tick.leads().await? {
            self.post_now().await?;
        }
        let now = crate::store::now();
        Ok(Next::After(
            (self.due_after(now) - now).to_std().unwrap_or_default(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn the_next_digest_is_the_next_local_time() {
        let settings = DigestSettings {
            at_minute: 9 * 60,
            utc_offset_minutes: 180,
            channel: "executor".into(),
            topic: "digest".into(),
        };
        // 09:00 at +03:00 is 06:00 UTC.
        assert_eq!(
            next_at(&settings, at("2026-12-02T05:00:00Z")),
            at("2026-12-02T06:00:00Z")
        );
        assert_eq!(
            next_at(&settings, at("2026-12-02T06:00:00Z")),
            at("2026-12-03T06:00:00Z")
        );
        // 23:30 UTC is already the next local day.
        assert_eq!(
            next_at(&settings, at("2026-12-02T23:30:00Z")),
            at("2026-12-03T06:00:00Z")
        );
    }
}
