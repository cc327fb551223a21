//! Questions put to the language backend, the tasks it proposes until their
//! asker confirms, the milestones told in a task's own conversation, and a
//! worker's latest status lines.
//!
//! A conversation is written in the transaction that claims its chat
//! message, so it is handled once; the conversation loop claims it for
//! the backend's call (`claimed_by`, `claimed_until`: outside any
//! transaction) and concludes it once, with its answer in the outbox.

use chrono::{DateTime, Utc};

use super::tasks::{RUN_COLUMNS, TASK_COLUMNS, sql};
use super::{Destination, QueryContext, Result, Run, StoreError, Task, Tx, on_pool, on_tx};

super::store_handle!(
    /// Questions put to the language backend, and the tasks it proposes: `store.conversations()`.
    Conversations,
    conversations
);

super::tx_handle!(
    /// Questions put to the language backend, and the tasks it proposes, in a transaction: `tx.conversations()`.
    ConversationsTx,
    conversations
);

/// How many status lines a run keeps.
pub const STATUS_LINES_KEPT: usize = 3;

/// Where a conversation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConversationStatus {
    /// Waiting for the backend.
    Pending,
    /// Answered (or refused by a limit, or apologised for).
    Answered,
    /// A task was proposed; it waits for its asker's `!confirm`.
    Proposed,
    /// The proposal was confirmed: `task_id` is the task.
    Captured,
    /// The backend failed; the asker got an apology.
    Failed,
    /// Not sent to the backend: a limit was reached.
    Refused,
}

impl ConversationStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ConversationStatus::Pending => "pending",
            ConversationStatus::Answered => "answered",
            ConversationStatus::Proposed => "proposed",
            ConversationStatus::Captured => "captured",
            ConversationStatus::Failed => "failed",
            ConversationStatus::Refused => "refused",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "pending" => ConversationStatus::Pending,
            "answered" => ConversationStatus::Answered,
            "proposed" => ConversationStatus::Proposed,
            "captured" => ConversationStatus::Captured,
            "failed" => ConversationStatus::Failed,
            "refused" => ConversationStatus::Refused,
            _ => return None,
        })
    }
}

/// A question to store with its message's claim.
#[derive(Debug, Clone)]
pub struct NewConversation {
    /// The outbox identity the answer goes out under.
    pub identity: String,
    pub message_id: i64,
    /// `zulip` or `shell`.
    pub transport: String,
    pub asker_id: i64,
    pub asker_email: String,
    pub asker_name: String,
    pub asker_approver: bool,
    pub to: Destination,
    pub private: bool,
    pub text: String,
}

/// A stored conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    pub id: i64,
    pub identity: String,
    pub message_id: i64,
    pub transport: String,
    pub asker_id: i64,
    pub asker_email: String,
    pub asker_name: String,
    pub asker_approver: bool,
    pub to: Destination,
    pub private: bool,
    pub text: String,
    pub asked_at: DateTime<Utc>,
    pub status: ConversationStatus,
    pub proposed_title: Option<String>,
    pub proposed_description: Option<String>,
    pub task_id: Option<i64>,
}

/// How a conversation ended.
#[derive(Debug, Clone, Default)]
pub struct Conclusion {
    /// Answered, Proposed, Failed or Refused.
    pub status: Option<ConversationStatus>,
    pub proposed_title: Option<String>,
    pub proposed_description: Option<String>,
    pub backend: Option<String>,
    pub model: Option<String>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
    pub reference: Option<String>,
}

/// Tokens and cost of the questions since a time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    pub tokens: u64,
    pub cost_usd: f64,
    pub questions: u64,
}

#[derive(sqlx::FromRow)]
struct Row {
    id: i64,
    identity: String,
    message_id: i64,
    transport: String,
    asker_id: i64,
    asker_email: String,
    asker_name: String,
    asker_approver: bool,
    channel: Option<String>,
    topic: Option<String>,
    dm_user_ids: Option<String>,
    private: bool,
    text: String,
    asked_at: DateTime<Utc>,
    status: String,
    proposed_title: Option<String>,
    proposed_description: Option<String>,
    task_id: Option<i64>,
}

const COLUMNS: &str = "id, identity, message_id, transport, asker_id, asker_email, asker_name, \
     asker_approver, channel, topic, dm_user_ids, private, text, asked_at, status, \
     proposed_title, proposed_description, task_id";

impl Row {
    fn decode(self) -> Result<Conversation> {
        let corrupt = |what: &str| StoreError::Corrupt(format!("conversation {}: {what}", self.id));
        let to = match (&self.channel, &self.topic, &self.dm_user_ids) {
            (Some(channel), Some(topic), None) => Destination::Channel {
                channel: channel.clone(),
                topic: topic.clone(),
            },
            (None, None, Some(ids)) => Destination::Direct {
                user_ids: serde_json::from_str(ids).map_err(|_| corrupt("bad recipients"))?,
            },
            _ => return Err(corrupt("no place")),
        };
        let status =
            ConversationStatus::parse(&self.status).ok_or_else(|| corrupt("bad status"))?;
        Ok(Conversation {
            id: self.id,
            identity: self.identity,
            message_id: self.message_id,
            transport: self.transport,
            asker_id: self.asker_id,
            asker_email: self.asker_email,
            asker_name: self.asker_name,
            asker_approver: self.asker_approver,
            to,
            private: self.private,
            text: self.text,
            asked_at: self.asked_at,
            status,
            proposed_title: self.proposed_title,
            proposed_description: self.proposed_description,
            task_id: self.task_id,
        })
    }
}

fn place_columns(to: &Destination) -> (Option<&str>, Option<&str>, Option<String>) {
    match to {
        Destination::Channel { channel, topic } => (Some(channel), Some(topic), None),
        Destination::Direct { user_ids } => {
            let mut ids = user_ids.clone();
            ids.sort_unstable();
            ids.dedup();
            (
                None,
                None,
                Some(serde_json::to_string(&ids).unwrap_or_default()),
            )
        }
    }
}

impl ConversationsTx<'_> {
    /// Stores a question for the backend (with its message's claim) and
    /// wakes the conversation loop.
    pub async fn add_conversation(&mut self, new: &NewConversation) -> Result<i64> {
        let (channel, topic, dm) = place_columns(&new.to);
        let now = super::now();
        let id = on_tx!(self, conn => {
            sqlx::query_scalar(
                "INSERT INTO conversations (identity, message_id, transport, asker_id, asker_email, \
                 asker_name, asker_approver, channel, topic, dm_user_ids, private, text, asked_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING id",
            )
            .bind(&new.identity)
            .bind(new.message_id)
            .bind(&new.transport)
            .bind(new.asker_id)
            .bind(&new.asker_email)
            .bind(&new.asker_name)
            .bind(new.asker_approver)
            .bind(channel)
            .bind(topic)
            .bind(dm)
            .bind(new.private)
            .bind(&new.text)
            .bind(now)
            .fetch_one(conn)
            .await
        })
        .op("storing a question")?;
        self.notify().await?;
        Ok(id)
    }

    /// Concludes a claimed conversation once: false if it was concluded
    /// already or the claim is another's.
    pub async fn conclude_conversation(
        &mut self,
        id: i64,
        owner: &str,
        conclusion: &Conclusion,
    ) -> Result<bool> {
        let status = conclusion
            .status
            .unwrap_or(ConversationStatus::Answered)
            .as_str();
        let done = on_tx!(self, conn => {
            sqlx::query(
                "UPDATE conversations SET status = $1, concluded_at = $2, proposed_title = $3, \
                 proposed_description = $4, backend = $5, model = $6, input_tokens = $7, \
                 output_tokens = $8, cost_usd = $9, reference = $10, claimed_by = NULL, \
                 claimed_until = NULL \
                 WHERE id = $11 AND status = 'pending' AND (claimed_by = $12 OR claimed_by IS NULL)",
            )
            .bind(status)
            .bind(super::now())
            .bind(&conclusion.proposed_title)
            .bind(&conclusion.proposed_description)
            .bind(&conclusion.backend)
            .bind(&conclusion.model)
            .bind(conclusion.input_tokens as i64)
            .bind(conclusion.output_tokens as i64)
            .bind(conclusion.cost_usd)
            .bind(&conclusion.reference)
            .bind(id)
            .bind(owner)
            .execute(conn)
            .await
            .map(|d| d.rows_affected())
        })
        .op("concluding a question")?;
        Ok(done == 1)
    }

    /// The asker's open proposal: `id` if given, else their newest in `to`.
    pub async fn open_proposal(
        &mut self,
        asker_id: i64,
        id: Option<i64>,
        to: &Destination,
        since: DateTime<Utc>,
    ) -> Result<Option<Conversation>> {
        let (channel, topic, dm) = place_columns(to);
        let query = sql(&[
            "SELECT ",
            COLUMNS,
            " FROM conversations WHERE status = 'proposed' AND asker_id = $1 \
             AND asked_at >= $2 AND ($3 = id OR ($3 = 0 AND channel IS NOT DISTINCT FROM $4 \
             AND topic IS NOT DISTINCT FROM $5 AND dm_user_ids IS NOT DISTINCT FROM $6)) \
             ORDER BY id DESC LIMIT 1",
        ]);
        let row: Option<Row> = on_tx!(self, conn => {
            sqlx::query_as(query)
                .bind(asker_id)
                .bind(since)
                .bind(id.unwrap_or(0))
                .bind(channel)
                .bind(topic)
                .bind(dm)
                .fetch_optional(conn)
                .await
        })
        .op("finding a proposed task")?;
        row.map(Row::decode).transpose()
    }

    /// Marks a proposal captured as `task_id`; false if it is not open.
    pub async fn capture_proposal(&mut self, id: i64, task_id: i64) -> Result<bool> {
        let done = on_tx!(self, conn => {
            sqlx::query(
                "UPDATE conversations SET status = 'captured', task_id = $1 \
                 WHERE id = $2 AND status = 'proposed'",
            )
            .bind(task_id)
            .bind(id)
            .execute(conn)
            .await
            .map(|d| d.rows_affected())
        })
        .op("capturing a proposed task")?;
        Ok(done == 1)
    }

    /// A cursor kept in `controls` (`cursor:<name>`), if it was set.
    pub async fn cursor(&mut self, name: &str) -> Result<Option<DateTime<Utc>>> {
        Ok(self
            .kept(&format!("cursor:{name}"))
            .await?
            .and_then(|v| DateTime::parse_from_rfc3339(&v).ok())
            .map(|t| t.with_timezone(&Utc)))
    }

    /// Moves a cursor kept in `controls`.
    pub async fn set_cursor(&mut self, name: &str, at: DateTime<Utc>) -> Result<()> {
        self.keep(&format!("cursor:{name}"), at.to_rfc3339()).await
    }

    /// A number kept beside a cursor (`cursor-value:<name>`).
    pub async fn cursor_value(&mut self, name: &str) -> Result<Option<f64>> {
        Ok(self
            .kept(&format!("cursor-value:{name}"))
            .await?
            .and_then(|v| v.parse().ok()))
    }

    /// Sets the number kept beside a cursor.
    pub async fn set_cursor_value(&mut self, name: &str, value: f64) -> Result<()> {
        self.keep(&format!("cursor-value:{name}"), value.to_string())
            .await
    }

    /// What every worker of every run cost so far, in dollars.
    pub async fn total_worker_cost(&mut self) -> Result<f64> {
        let total: Option<f64> = on_tx!(self, conn => {
            sqlx::query_scalar("SELECT CAST(SUM(cost_usd) AS DOUBLE PRECISION) FROM executor_runs")
                .fetch_one(conn)
                .await
        })
        .op("adding up the workers' cost")?;
        Ok(total.unwrap_or(0.0))
    }

    /// The milestones of a run told so far.
    pub async fn told_milestones(&mut self, run_id: i64) -> Result<Vec<String>> {
        on_tx!(self, conn => {
            sqlx::query_scalar("SELECT milestone FROM milestones WHERE run_id = $1")
                .bind(run_id)
                .fetch_all(conn)
                .await
        })
        .op("reading a run's milestones")
    }

    /// Tells a run's milestone once: false if it was told before.
    pub async fn mark_milestone(&mut self, run_id: i64, milestone: &str) -> Result<bool> {
        let done = on_tx!(self, conn => {
            sqlx::query(
                "INSERT INTO milestones (run_id, milestone, told_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (run_id, milestone) DO NOTHING",
            )
            .bind(run_id)
            .bind(milestone)
            .bind(super::now())
            .execute(conn)
            .await
            .map(|d| d.rows_affected())
        })
        .op("recording a milestone")?;
        Ok(done == 1)
    }

    /// Adds a worker's status lines to its run's latest (the newest kept).
    pub async fn push_status_lines(&mut self, run_id: i64, lines: &[String]) -> Result<()> {
        if lines.is_empty() {
            return Ok(());
        }
        let current: Option<Option<String>> = on_tx!(self, conn => {
            sqlx::query_scalar("SELECT worker_status FROM executor_runs WHERE id = $1")
                .bind(run_id)
                .fetch_optional(conn)
                .await
        })
        .op("reading a run's status lines")?;
        let mut kept: Vec<StatusLine> = current
            .flatten()
            .and_then(|json| serde_json::from_str(&json).ok())
            .unwrap_or_default();
        let at = super::now();
        kept.extend(lines.iter().map(|text| StatusLine {
            at,
            text: text.clone(),
        }));
        let skip = kept.len().saturating_sub(STATUS_LINES_KEPT);
        let kept: Vec<_> = kept.into_iter().skip(skip).collect();
        let json = serde_json::to_string(&kept).unwrap_or_else(|_| "[]".into());
        on_tx!(self, conn => {
            sqlx::query("UPDATE executor_runs SET worker_status = $1 WHERE id = $2")
                .bind(json)
                .bind(run_id)
                .execute(conn)
                .await
                .map(|d| d.rows_affected())
        })
        .op("recording a run's status lines")?;
        Ok(())
    }

    /// A run's latest status lines, oldest first.
    pub async fn status_lines(&mut self, run_id: i64) -> Result<Vec<StatusLine>> {
        let json: Option<Option<String>> = on_tx!(self, conn => {
            sqlx::query_scalar("SELECT worker_status FROM executor_runs WHERE id = $1")
                .bind(run_id)
                .fetch_optional(conn)
                .await
        })
        .op("reading a run's status lines")?;
        Ok(json
            .flatten()
            .and_then(|j| serde_json::from_str(&j).ok())
            .unwrap_or_default())
    }
}

impl Tx {
    /// A value kept in `controls` under a name of Eagle's own (not a switch).
    async fn kept(&mut self, name: &str) -> Result<Option<String>> {
        on_tx!(self, conn => {
            sqlx::query_scalar("SELECT value FROM controls WHERE name = $1")
                .bind(name)
                .fetch_optional(conn)
                .await
        })
        .op("reading a cursor")
    }

    /// Keeps a value in `controls`.
    async fn keep(&mut self, name: &str, value: String) -> Result<()> {
        on_tx!(self, conn => {
            sqlx::query(
                "INSERT INTO controls (name, value, updated_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            )
            .bind(name)
            .bind(value)
            .bind(super::now())
            .execute(conn)
            .await
            .map(|d| d.rows_affected())
        })
        .op("moving a cursor")?;
        Ok(())
    }
}

/// One status line a worker wrote, as relayed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StatusLine {
    pub at: DateTime<Utc>,
    pub text: String,
}

impl Conversations<'_> {
    /// Claims the oldest pending conversation whose claim is free, until
    /// `until`.
    pub async fn claim_conversation(
        &self,
        owner: &str,
        until: DateTime<Utc>,
    ) -> Result<Option<Conversation>> {
        let now = super::now();
        let query = sql(&[
            "SELECT ",
            COLUMNS,
            " FROM conversations WHERE status = 'pending' \
             AND (claimed_until IS NULL OR claimed_until < $1) ORDER BY id LIMIT 4",
        ]);
        let candidates: Vec<Row> = on_pool!(self, pool => {
            sqlx::query_as(query).bind(now).fetch_all(pool).await
        })
        .op("looking for questions")?;
        for row in candidates {
            let id = row.id;
            let mut tx = self.begin_write().await?;
            let won = on_tx!(tx, conn => {
                sqlx::query(
                    "UPDATE conversations SET claimed_by = $1, claimed_until = $2 WHERE id = $3 \
                     AND status = 'pending' AND (claimed_until IS NULL OR claimed_until < $4)",
                )
                .bind(owner)
                .bind(until)
                .bind(id)
                .bind(now)
                .execute(conn)
                .await
                .map(|d| d.rows_affected())
            })
            .op("claiming a question")?;
            tx.commit().await?;
            if won == 1 {
                return row.decode().map(Some);
            }
        }
        Ok(None)
    }

    /// The newest conversations, newest first.
    pub async fn recent_conversations(&self, limit: i64) -> Result<Vec<Conversation>> {
        let query = sql(&[
            "SELECT ",
            COLUMNS,
            " FROM conversations ORDER BY id DESC LIMIT $1",
        ]);
        let rows: Vec<Row> =
            on_pool!(self, pool => sqlx::query_as(query).bind(limit).fetch_all(pool).await)
                .op("listing questions")?;
        rows.into_iter().map(Row::decode).collect()
    }

    /// Whether a run changed after the cursor `name` (the milestone loop
    /// has not looked at it yet); false before the cursor is first set.
    pub async fn changed_after_cursor(&self, name: &str) -> Result<bool> {
        let mut tx = self.begin_read().await?;
        let Some(cursor) = tx.conversations().cursor(name).await? else {
            return Ok(false);
        };
        let n: i64 = on_tx!(tx, conn => {
            sqlx::query_scalar("SELECT COUNT(*) FROM executor_runs WHERE updated_at > $1")
                .bind(cursor)
                .fetch_one(conn)
                .await
        })
        .op("looking for runs changed since a cursor")?;
        Ok(n > 0)
    }

    /// How many questions wait for the backend.
    pub async fn pending_conversations(&self) -> Result<i64> {
        on_pool!(self, pool => {
            sqlx::query_scalar("SELECT COUNT(*) FROM conversations WHERE status = 'pending'")
                .fetch_one(pool)
                .await
        })
        .op("counting questions")
    }

    /// When the next claimed conversation's claim runs out, if any is pending.
    pub async fn next_conversation_due(&self) -> Result<Option<DateTime<Utc>>> {
        on_pool!(self, pool => {
            sqlx::query_scalar(
                "SELECT MIN(claimed_until) FROM conversations WHERE status = 'pending' \
                 AND claimed_until IS NOT NULL",
            )
            .fetch_one(pool)
            .await
        })
        .op("looking for questions")
    }

    /// Tokens and cost of the questions asked since `since` (by one asker,
    /// or by everyone).
    pub async fn conversation_usage(
        &self,
        since: DateTime<Utc>,
        asker_id: Option<i64>,
    ) -> Result<Usage> {
        let (tokens, cost, questions): (Option<i64>, Option<f64>, i64) = on_pool!(self, pool => {
            sqlx::query_as(
                "SELECT CAST(SUM(input_tokens + output_tokens) AS BIGINT), \
                 CAST(SUM(cost_usd) AS DOUBLE PRECISION), COUNT(*) FROM conversations \
                 WHERE asked_at >= $1 AND ($2 = 0 OR asker_id = $2) AND backend IS NOT NULL",
            )
            .bind(since)
            .bind(asker_id.unwrap_or(0))
            .fetch_one(pool)
            .await
        })
        .op("adding up what questions cost")?;
        Ok(Usage {
            tokens: tokens.unwrap_or(0).max(0) as u64,
            cost_usd: cost.unwrap_or(0.0),
            questions: questions.max(0) as u64,
        })
    }
}

/// A message posted in a topic, as the outbox holds it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct TopicPost {
    pub identity: String,
    pub created_at: DateTime<Utc>,
    pub content: String,
}

impl ConversationsTx<'_> {
    /// Runs changed at or after `since`, oldest change first.
    pub async fn runs_changed_since(
        &mut self,
        since: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<Run>> {
        let query = sql(&[
            "SELECT ",
            RUN_COLUMNS,
            " FROM executor_runs WHERE updated_at >= $1 ORDER BY updated_at, id LIMIT $2",
        ]);
        on_tx!(self, conn => sqlx::query_as(query).bind(since).bind(limit).fetch_all(conn).await)
            .op("listing runs changed since a time")
    }

    /// Tasks added at or after `since`, oldest first.
    pub async fn tasks_added_since(
        &mut self,
        since: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<Task>> {
        let query = sql(&[
            "SELECT ",
            TASK_COLUMNS,
            " FROM executor_queue WHERE added_at >= $1 ORDER BY id LIMIT $2",
        ]);
        on_tx!(self, conn => sqlx::query_as(query).bind(since).bind(limit).fetch_all(conn).await)
            .op("listing tasks added since a time")
    }

    /// The newest `limit` messages Eagle's identities posted in a topic,
    /// oldest first: the run's topic as the bots wrote it.
    pub async fn topic_posts(
        &mut self,
        channel: &str,
        topic: &str,
        limit: i64,
    ) -> Result<Vec<TopicPost>> {
        let key = Destination::Channel {
            channel: channel.to_string(),
            topic: topic.to_string(),
        }
        .ordering_key();
        let mut posts: Vec<TopicPost> = on_tx!(self, conn => {
            sqlx::query_as(
                "SELECT identity, created_at, content FROM outbox WHERE ordering_key = $1 \
                 AND kind = 'message' ORDER BY id DESC LIMIT $2",
            )
            .bind(key)
            .bind(limit)
            .fetch_all(conn)
            .await
        })
        .op("reading a topic's posts")?;
        posts.reverse();
        Ok(posts)
    }
}
