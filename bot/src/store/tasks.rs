//! Tasks (`executor_queue`, the inbox) and runs (`executor_runs`).

use chrono::{DateTime, Utc};

use super::{QueryContext, Result, StoreError, Tx, on_tx};

super::tx_handle!(
    /// Tasks (the inbox) and their runs, in a transaction: `tx.tasks()`.
    TasksTx,
    tasks
);

/// Where a task in the queue stands (seed 003's status column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TaskStatus {
    /// Captured, not analysed yet.
    Pending,
    ForReview,
    AwaitingGo,
    Approved,
    Skip,
    Done,
    Cancelled,
}

impl TaskStatus {
    pub const ALL: [TaskStatus; 7] = [
        TaskStatus::Pending,
        TaskStatus::ForReview,
        TaskStatus::AwaitingGo,
        TaskStatus::Approved,
        TaskStatus::Skip,
        TaskStatus::Done,
        TaskStatus::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Pending => "pending",
            TaskStatus::ForReview => "for_review",
            TaskStatus::AwaitingGo => "awaiting_go",
            TaskStatus::Approved => "approved",
            TaskStatus::Skip => "skip",
            TaskStatus::Done => "done",
            TaskStatus::Cancelled => "cancelled",
        }
    }

    /// Whether the task still needs something to happen.
    pub fn is_open(self) -> bool {
        !matches!(
            self,
            TaskStatus::Skip | TaskStatus::Done | TaskStatus::Cancelled
        )
    }
}

impl TryFrom<String> for TaskStatus {
    type Error = StoreError;
    fn try_from(value: String) -> Result<Self> {
        TaskStatus::ALL
            .into_iter()
            .find(|s| s.as_str() == value)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown task status {value:?}")))
    }
}

/// Where a run stands (seed 003's state machine, plus `cancelled`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RunState {
    Queued,
    InProgress,
    Pr,
    Complete,
    Abandoned,
    Cancelled,
}

impl RunState {
    pub const ALL: [RunState; 6] = [
        RunState::Queued,
        RunState::InProgress,
        RunState::Pr,
        RunState::Complete,
        RunState::Abandoned,
        RunState::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Queued => "queued",
            RunState::InProgress => "in_progress",
            RunState::Pr => "pr",
            RunState::Complete => "complete",
            RunState::Abandoned => "abandoned",
            RunState::Cancelled => "cancelled",
        }
    }

    /// Whether the run has reached one of its ends.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            RunState::Complete | RunState::Abandoned | RunState::Cancelled
        )
    }
}

impl TryFrom<String> for RunState {
    type Error = StoreError;
    fn try_from(value: String) -> Result<Self> {
        RunState::ALL
            .into_iter()
            .find(|s| s.as_str() == value)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown run state {value:?}")))
    }
}

/// Where a task was captured: the reply and later notices go back there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origin {
    /// `zulip`, `shell`, or another source.
    pub transport: String,
    pub channel: Option<String>,
    pub topic: Option<String>,
    pub message_id: Option<i64>,
    /// Captured in a direct message or a private channel: its text is shown
    /// only where that origin is visible.
    pub private: bool,
}

/// A task to put into the inbox.
#[derive(Debug, Clone, Default)]
pub struct NewTask {
    /// Unique per task; a chat task's is `zulip:<message id>`.
    pub task_gid: String,
    pub source: String,
    pub title: String,
    pub description: String,
    pub requested_by: Option<String>,
    pub requested_by_id: Option<i64>,
    pub requested_by_email: Option<String>,
    pub origin: Origin,
    /// The repository it belongs to (`!queue --repo`); `None`: the executor's first.
    pub repo: Option<String>,
}

/// A task in the inbox.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Task {
    pub id: i64,
    pub task_gid: String,
    pub added_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub source: String,
    pub title: String,
    pub description: String,
    pub notes: String,
    pub links: String,
    pub tags: String,
    pub platform: Option<String>,
    pub assignee: Option<String>,
    pub task_state: String,
    #[sqlx(try_from = "String")]
    pub status: TaskStatus,
    pub status_reason: Option<String>,
    pub priority: Option<i64>,
    pub complexity: Option<String>,
    pub feasibility: Option<String>,
    pub analysis_summary: Option<String>,
    pub executor_run_id: Option<i64>,
    pub requested_by: Option<String>,
    pub requested_by_id: Option<i64>,
    pub origin_transport: Option<String>,
    pub origin_channel: Option<String>,
    pub origin_topic: Option<String>,
    pub origin_message_id: Option<i64>,
    pub origin_private: bool,
    /// `filter` or `analysis`, for a skipped task.
    pub skipped_by: Option<String>,
    /// Every filter's reason, as JSON: `[{"plugin": …, "reason": …}]`.
    pub skip_reasons: Option<String>,
    /// An analysis answer that could not be read, as it was.
    pub analysis_raw: Option<String>,
    /// Put back by a re-analysis: its conclusion goes into a summary.
    pub quiet_analysis: bool,
    pub analyzed_at: Option<DateTime<Utc>>,
    /// The task in the system it came from (an Asana permalink).
    pub external_url: Option<String>,
    pub requested_by_email: Option<String>,
    /// The repository it belongs to; `None`: the executor's first.
    #[sqlx(default)]
    pub repo: Option<String>,
}

impl Task {
    /// The conversation the task came from, for replies about it.
    pub fn origin(&self) -> Origin {
        Origin {
            transport: self.origin_transport.clone().unwrap_or_default(),
            channel: self.origin_channel.clone(),
            topic: self.origin_topic.clone(),
            message_id: self.origin_message_id,
            private: self.origin_private,
        }
    }
}

/// A run to create for a task.
#[derive(Debug, Clone, Default)]
pub struct NewRun {
    pub task_gid: String,
    /// The run's topic in the executor channel.
    pub thread_id: Option<String>,
}

/// A run of a task.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Run {
    pub id: i64,
    pub task_gid: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    #[sqlx(try_from = "String")]
    pub state: RunState,
    pub state_reason: Option<String>,
    pub held: bool,
    pub waiting_on: Option<String>,
    pub worktree_path: Option<String>,
    pub branch_name: Option<String>,
    pub pr_url: Option<String>,
    pub pr_number: Option<i64>,
    pub thread_id: Option<String>,
    pub ci_attempts: i64,
    pub worker_pid: Option<i64>,
    pub worker_last_update: Option<DateTime<Utc>>,
    pub worker_stuck_count: i64,
    pub attempt: i64,
    pub log_path: Option<String>,
    pub worker_session_id: Option<String>,
    pub lease_owner: Option<String>,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub heartbeat_at: Option<DateTime<Utc>>,
    pub prompt_kind: Option<String>,
    pub failures: i64,
    pub worker_pgid: Option<i64>,
    pub worker_host: Option<String>,
    pub worker_start_ticks: Option<i64>,
    pub worker_started_at: Option<DateTime<Utc>>,
    pub worker_alive_until: Option<DateTime<Utc>>,
    pub worker_exit_code: Option<i64>,
    pub worker_exit_file: Option<String>,
    pub log_offset: i64,
    pub socket_path: Option<String>,
    pub token_sha256: Option<String>,
    pub cost_usd: f64,
    pub session_cost_usd: f64,
    pub cost_cap_usd: Option<f64>,
    pub turns: i64,
    pub slot: Option<i64>,
    /// The PR's repository (`owner/name`), when it is not the profile's.
    pub pr_repo: Option<String>,
    /// The PR's head as the PR loop last saw it.
    pub head_sha: Option<String>,
    /// What a worker must do about the PR next (`fix_ci`, `fix_comments`,
    /// `pr_review`); none while CI runs, so the run holds no worker slot.
    #[sqlx(try_from = "Option<String>")]
    pub pr_work: PrWorkSlot,
    /// Why the run waits, for `!status` (`waiting for CI`, …).
    pub pr_status: Option<String>,
    pub pr_checked_at: Option<DateTime<Utc>>,
    /// The head a pr-review worker found green.
    pub review_green_sha: Option<String>,
    /// Comments up to this time were considered (a later human comment on a
    /// complete draft PR sends the run back to `pr`).
    pub pr_comments_seen_at: Option<DateTime<Utc>>,
    /// The last poll's mark (JSON), see `github::PollMark`.
    pub pr_poll: Option<String>,
    pub head_seen_at: Option<DateTime<Utc>>,
    /// The head CI was re-triggered for.
    pub ci_triggered_sha: Option<String>,
    /// When the PR was merged or closed: nothing more to watch.
    pub pr_closed_at: Option<DateTime<Utc>>,
    /// The head the last fix worker ended on, and when.
    pub pr_work_done_sha: Option<String>,
    pub pr_work_done_at: Option<DateTime<Utc>>,
    /// PR workers asked for so far.
    pub pr_rounds: i64,
    /// What the PR loop last saw of the PR: its title, head and base
    /// branches, and CI on its head (`green`, `running`, `failed: …`).
    pub pr_title: Option<String>,
    pub pr_head_ref: Option<String>,
    /// The repository the head branch is in (`owner/name`).
    pub pr_head_repo: Option<String>,
    pub pr_base_ref: Option<String>,
    pub pr_ci: Option<String>,
    /// Whether the PR was a draft when the PR loop last saw it.
    pub pr_draft: Option<bool>,
    /// Attempts that ended waiting for decisions (held past `max_waits`).
    pub waits: i64,
    /// The head of its PR Eagle last named to the owner when it offered the
    /// merge: what `!merge` merges, never a head the owner was not shown.
    #[sqlx(default)]
    pub merge_offered_sha: Option<String>,
    /// How its setup phase went: `ran`, `cached`, `failed: …`.
    #[sqlx(default)]
    pub setup_outcome: Option<String>,
    /// A dry run: no effect is carried out, each is described instead.
    #[sqlx(default)]
    pub dry_run: bool,
}

/// What a worker must do about a run's PR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PrWork {
    FixCi,
    FixComments,
    PrReview,
}

impl PrWork {
    pub const ALL: [PrWork; 3] = [PrWork::FixCi, PrWork::FixComments, PrWork::PrReview];

    /// The stored word, also the prompt kind (`fix_ci`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            PrWork::FixCi => "fix_ci",
            PrWork::FixComments => "fix_comments",
            PrWork::PrReview => "pr_review",
        }
    }
}

/// A run's `pr_work` column: `None` when nothing is to be done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PrWorkSlot(pub Option<PrWork>);

impl TryFrom<Option<String>> for PrWorkSlot {
    type Error = StoreError;
    fn try_from(value: Option<String>) -> Result<Self> {
        match value {
            None => Ok(PrWorkSlot(None)),
            Some(word) => PrWork::ALL
                .into_iter()
                .find(|w| w.as_str() == word)
                .map(|w| PrWorkSlot(Some(w)))
                .ok_or_else(|| StoreError::Corrupt(format!("unknown PR work {word:?}"))),
        }
    }
}

impl Run {
    /// The run's topic in the executor channel.
    pub fn topic(&self) -> String {
        self.thread_id
            .clone()
            .unwrap_or_else(|| format!("run {}", self.id))
    }

    /// Whether a worker process is believed to be running for this run.
    pub fn has_worker(&self) -> bool {
        self.worker_pid.is_some() && self.lease_owner.is_some()
    }
}

/// How many tasks and runs are in each status and state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusCounts {
    pub tasks: Vec<(TaskStatus, i64)>,
    pub runs: Vec<(RunState, i64)>,
}

pub(super) const TASK_COLUMNS: &str = "id, task_gid, added_at, updated_at, source, title, description, notes, \
    links, tags, platform, assignee, task_state, status, status_reason, priority, complexity, \
    feasibility, analysis_summary, executor_run_id, requested_by, requested_by_id, \
    origin_transport, origin_channel, origin_topic, origin_message_id, origin_private, \
    skipped_by, skip_reasons, analysis_raw, quiet_analysis, analyzed_at, external_url, \
    requested_by_email, repo";

pub(super) const RUN_COLUMNS: &str = "id, task_gid, created_at, updated_at, started_at, \
    completed_at, state, state_reason, held, waiting_on, worktree_path, branch_name, pr_url, \
    pr_number, thread_id, ci_attempts, worker_pid, worker_last_update, worker_stuck_count, \
    attempt, log_path, worker_session_id, lease_owner, lease_expires_at, heartbeat_at, \
    prompt_kind, failures, worker_pgid, worker_host, worker_start_ticks, worker_started_at, \
    worker_alive_until, worker_exit_code, worker_exit_file, log_offset, socket_path, \
    token_sha256, cost_usd, session_cost_usd, cost_cap_usd, turns, slot, pr_repo, head_sha, \
    pr_work, pr_status, pr_checked_at, review_green_sha, pr_comments_seen_at, pr_poll, \
    head_seen_at, ci_triggered_sha, pr_closed_at, pr_work_done_sha, pr_work_done_at, pr_rounds, waits, \
    pr_title, pr_head_ref, pr_base_ref, pr_ci, pr_draft, pr_head_repo, merge_offered_sha, \
    setup_outcome, dry_run";

/// The start of an `ORDER BY` over `executor_queue`: priority 1 (urgent)
/// first, tasks without one last; the caller adds the age.
const BY_PRIORITY: &str = "(priority IS NULL), priority, ";
const OPEN_TASK_FILTER: &str = "status NOT IN ('skip', 'done', 'cancelled')";
const OPEN_RUN_FILTER: &str = "state NOT IN ('complete', 'abandoned', 'cancelled')";

/// Builds a query string from constant parts; the result only ever contains
/// the literals above, never input.
pub(super) fn sql(parts: &[&str]) -> sqlx::AssertSqlSafe<String> {
    sqlx::AssertSqlSafe(parts.concat())
}

impl TasksTx<'_> {
    /// Makes run `run` a dry run: nothing it asks for is carried out, each
    /// effect is described instead. Set before its worker can ask.
    pub async fn set_dry_run(&mut self, run: i64) -> Result<()> {
        on_tx!(self, conn => {
            sqlx::query("UPDATE executor_runs SET dry_run = $2 WHERE id = $1")
                .bind(run)
                .bind(true)
                .execute(conn)
                .await
                .map(|_| ())
        })
        .op("making a run a dry run")
    }

    /// Puts a task into the inbox. Returns its id, or `None` if a task with
    /// the same `task_gid` exists already (a message captured twice).
    pub async fn insert_task(&mut self, task: &NewTask) -> Result<Option<i64>> {
        let now = super::now();
        on_tx!(self, conn => {
            sqlx::query_scalar(
                "INSERT INTO executor_queue (task_gid, added_at, updated_at, source, title, \
                 description, requested_by, requested_by_id, origin_transport, origin_channel, \
                 origin_topic, origin_message_id, origin_private, requested_by_email, repo) \
                 VALUES ($1, $2, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) \
                 ON CONFLICT (task_gid) DO NOTHING RETURNING id",
            )
            .bind(&task.task_gid)
            .bind(now)
            .bind(&task.source)
            .bind(&task.title)
            .bind(&task.description)
            .bind(&task.requested_by)
            .bind(task.requested_by_id)
            .bind(&task.origin.transport)
            .bind(&task.origin.channel)
            .bind(&task.origin.topic)
            .bind(task.origin.message_id)
            .bind(task.origin.private)
            .bind(&task.requested_by_email)
            .bind(&task.repo)
            .fetch_optional(conn)
            .await
        })
        .op("inserting a task")
    }

    /// One task by id.
    pub async fn task(&mut self, id: i64) -> Result<Option<Task>> {
        let query = sql(&[
            "SELECT ",
            TASK_COLUMNS,
            " FROM executor_queue WHERE id = $1",
        ]);
        on_tx!(self, conn => sqlx::query_as(query).bind(id).fetch_optional(conn).await)
            .op("reading a task")
    }

    /// Sets a task's priority (`!priority`; the caller audits it).
    pub async fn set_task_priority(&mut self, id: i64, priority: Option<i64>) -> Result<()> {
        let now = super::now();
        on_tx!(self, conn => {
            sqlx::query("UPDATE executor_queue SET priority = $2, updated_at = $3 WHERE id = $1")
                .bind(id)
                .bind(priority)
                .bind(now)
                .execute(conn)
                .await
                .map(|_| ())
        })
        .op("setting a task's priority")
    }

    /// One task by its gid.
    pub async fn task_by_gid(&mut self, gid: &str) -> Result<Option<Task>> {
        let query = sql(&[
            "SELECT ",
            TASK_COLUMNS,
            " FROM executor_queue WHERE task_gid = $1",
        ]);
        on_tx!(self, conn => sqlx::query_as(query).bind(gid).fetch_optional(conn).await)
            .op("reading a task")
    }

    /// Open tasks (not skipped, done or cancelled), by priority (1 first,
    /// none last), then oldest first: the order the runner claims in.
    pub async fn open_tasks(&mut self, offset: i64, limit: i64) -> Result<Vec<Task>> {
        let query = sql(&[
            "SELECT ",
            TASK_COLUMNS,
            " FROM executor_queue WHERE ",
            OPEN_TASK_FILTER,
            " ORDER BY ",
            BY_PRIORITY,
            "id LIMIT $1 OFFSET $2",
        ]);
        on_tx!(self, conn => sqlx::query_as(query).bind(limit).bind(offset).fetch_all(conn).await)
            .op("listing open tasks")
    }

    /// How many tasks are open.
    pub async fn open_task_count(&mut self) -> Result<i64> {
        let query = sql(&[
            "SELECT COUNT(*) FROM executor_queue WHERE ",
            OPEN_TASK_FILTER,
        ]);
        on_tx!(self, conn => sqlx::query_scalar(query).fetch_one(conn).await)
            .op("counting open tasks")
    }

    /// Tasks and runs counted by status and state.
    pub async fn status_counts(&mut self) -> Result<StatusCounts> {
        // One round trip: both tables, told apart by the first column.
        let rows: Vec<(String, String, i64)> = on_tx!(self, conn => {
            sqlx::query_as(
                "SELECT 'task', status, COUNT(*) FROM executor_queue GROUP BY status \
                 UNION ALL SELECT 'run', state, COUNT(*) FROM executor_runs GROUP BY state",
            )
            .fetch_all(conn)
            .await
        })
        .op("counting tasks and runs")?;
        let (tasks, runs): (Vec<_>, Vec<_>) =
            rows.into_iter().partition(|(table, _, _)| table == "task");
        let tasks = tasks.into_iter().map(|(_, s, n)| (s, n));
        let runs = runs.into_iter().map(|(_, s, n)| (s, n));
        let mut counts = StatusCounts {
            tasks: tasks
                .map(|(s, n)| Ok((TaskStatus::try_from(s)?, n)))
                .collect::<Result<_>>()?,
            runs: runs
                .map(|(s, n)| Ok((RunState::try_from(s)?, n)))
                .collect::<Result<_>>()?,
        };
        counts.tasks.sort();
        counts.runs.sort();
        Ok(counts)
    }

    /// Creates a run of a task, in state `queued`.
    pub async fn insert_run(&mut self, run: &NewRun) -> Result<i64> {
        let now = super::now();
        let thread_key = run.thread_id.as_deref().map(crate::ground::text::fold_key);
        on_tx!(self, conn => {
            sqlx::query_scalar(
                "INSERT INTO executor_runs (task_gid, created_at, updated_at, thread_id, thread_key) \
                 VALUES ($1, $2, $2, $3, $4) RETURNING id",
            )
            .bind(&run.task_gid)
            .bind(now)
            .bind(&run.thread_id)
            .bind(thread_key)
            .fetch_one(conn)
            .await
        })
        .op("inserting a run")
    }

    /// One run by id.
    pub async fn run(&mut self, id: i64) -> Result<Option<Run>> {
        let query = sql(&["SELECT ", RUN_COLUMNS, " FROM executor_runs WHERE id = $1"]);
        on_tx!(self, conn => sqlx::query_as(query).bind(id).fetch_optional(conn).await)
            .op("reading a run")
    }

    /// The runs of a task, oldest first.
    pub async fn runs_of_task(&mut self, task_gid: &str) -> Result<Vec<Run>> {
        let query = sql(&[
            "SELECT ",
            RUN_COLUMNS,
            " FROM executor_runs WHERE task_gid = $1 ORDER BY id",
        ]);
        on_tx!(self, conn => sqlx::query_as(query).bind(task_gid).fetch_all(conn).await)
            .op("listing the runs of a task")
    }

    /// Runs that have not reached an end, oldest first.
    pub async fn open_runs(&mut self, offset: i64, limit: i64) -> Result<Vec<Run>> {
        let query = sql(&[
            "SELECT ",
            RUN_COLUMNS,
            " FROM executor_runs WHERE ",
            OPEN_RUN_FILTER,
            " ORDER BY id LIMIT $1 OFFSET $2",
        ]);
        on_tx!(self, conn => sqlx::query_as(query).bind(limit).bind(offset).fetch_all(conn).await)
            .op("listing open runs")
    }

    /// How many runs are open.
    pub async fn open_run_count(&mut self) -> Result<i64> {
        let query = sql(&["SELECT COUNT(*) FROM executor_runs WHERE ", OPEN_RUN_FILTER]);
        on_tx!(self, conn => sqlx::query_scalar(query).fetch_one(conn).await)
            .op("counting open runs")
    }

    /// The open run whose executor topic is `topic` (compared with Unicode case folding).
    pub async fn run_by_thread(&mut self, topic: &str) -> Result<Option<Run>> {
        let query = sql(&[
            "SELECT ",
            RUN_COLUMNS,
            " FROM executor_runs WHERE thread_key = $1 ORDER BY id DESC LIMIT 1",
        ]);
        let key = crate::ground::text::fold_key(topic);
        on_tx!(self, conn => sqlx::query_as(query).bind(key).fetch_optional(conn).await)
            .op("finding a run by topic")
    }
}

impl Tx {
    /// One task by id, locked for update on PostgreSQL (SQLite's write
    /// transaction already holds the lock).
    pub(super) async fn task_for_update(&mut self, id: i64) -> Result<Option<Task>> {
        let lock = if self.backend() == super::Backend::Postgres {
            " FOR UPDATE"
        } else {
            ""
        };
        let query = sql(&[
            "SELECT ",
            TASK_COLUMNS,
            " FROM executor_queue WHERE id = $1",
            lock,
        ]);
        on_tx!(self, conn => sqlx::query_as(query).bind(id).fetch_optional(conn).await)
            .op("reading a task")
    }

    /// One run, locked for update on PostgreSQL (SQLite's write transaction
    /// already holds the lock).
    pub(super) async fn run_for_update(&mut self, id: i64) -> Result<Option<Run>> {
        let lock = if self.backend() == super::Backend::Postgres {
            " FOR UPDATE"
        } else {
            ""
        };
        let query = sql(&[
            "SELECT ",
            RUN_COLUMNS,
            " FROM executor_runs WHERE id = $1",
            lock,
        ]);
        on_tx!(self, conn => sqlx::query_as(query).bind(id).fetch_optional(conn).await)
            .op("reading a run")
    }
}
