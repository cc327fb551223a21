//! The analyzer's reads and writes: tasks pending analysis, what the
//! filters or the analysis concluded, and putting skipped tasks back.
//!
//! Every conclusion is a transition from `pending` through the task table
//! (so it is audited and happens once, however many analyzers race), with
//! its details in the same transaction.

use super::tasks::{TASK_COLUMNS, TaskStatus, sql};
use super::{QueryContext, Result, StoreError, Task, Tx, on_pool, on_tx};

super::store_handle!(
    /// The analyzer's reads and writes: tasks pending analysis, their analyses, the analyzer's jobs: `store.analyses()`.
    Analyses,
    analyses
);

super::tx_handle!(
    /// The analyzer's reads and writes: tasks pending analysis, their analyses, the analyzer's jobs, in a transaction: `tx.analyses()`.
    AnalysesTx,
    analyses
);

/// One filter's reason to skip a task.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SkipReason {
    /// The plugin, as `name version`.
    pub plugin: String,
    pub reason: String,
}

/// What the analysis command concluded (or what stands in for it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Analysis {
    /// `for_review`, `awaiting_go` or `skip`.
    pub status: Option<TaskStatus>,
    pub summary: Option<String>,
    pub complexity: Option<String>,
    pub feasibility: Option<String>,
    pub priority: Option<i64>,
    /// The repository the task belongs to, as the analysis names it; kept
    /// only where the task names none.
    pub repo: Option<String>,
    /// The answer as it was, when it could not be read.
    pub raw: Option<String>,
    /// Why, in a sentence (the status reason).
    pub reason: String,
}

impl Analyses<'_> {
    /// Tasks waiting for analysis, oldest first.
    pub async fn pending_tasks(&self, limit: i64) -> Result<Vec<Task>> {
        let query = sql(&[
            "SELECT ",
            TASK_COLUMNS,
            " FROM executor_queue WHERE status = 'pending' ORDER BY id LIMIT $1",
        ]);
        on_pool!(self, pool => sqlx::query_as(query).bind(limit).fetch_all(pool).await)
            .op("listing tasks pending analysis")
    }

    /// Tasks pending analysis plus jobs asked of the analyzer, in one query.
    pub async fn analyzer_work(&self) -> Result<i64> {
        on_pool!(self, pool => {
            sqlx::query_scalar(
                "SELECT (SELECT COUNT(*) FROM executor_queue WHERE status = 'pending') \
                 + (SELECT COUNT(*) FROM analyzer_jobs WHERE done_at IS NULL)",
            )
            .fetch_one(pool)
            .await
        })
        .op("looking for the analyzer's work")
    }

    /// How many tasks wait for analysis.
    pub async fn pending_count(&self) -> Result<i64> {
        on_pool!(self, pool => {
            sqlx::query_scalar("SELECT COUNT(*) FROM executor_queue WHERE status = 'pending'")
                .fetch_one(pool)
                .await
        })
        .op("counting tasks pending analysis")
    }

    /// Skipped tasks after `after_id`, by id (for re-analysis).
    pub async fn skipped_tasks(&self, after_id: i64, limit: i64) -> Result<Vec<Task>> {
        let query = sql(&[
            "SELECT ",
            TASK_COLUMNS,
            " FROM executor_queue WHERE status = 'skip' AND id > $1 ORDER BY id LIMIT $2",
        ]);
        on_pool!(self, pool => {
            sqlx::query_as(query).bind(after_id).bind(limit).fetch_all(pool).await
        })
        .op("listing skipped tasks")
    }
}

impl AnalysesTx<'_> {
    /// A filter skipped a pending task: every reason is kept. False if the
    /// task is no longer pending (someone else concluded first).
    pub async fn record_filter_skip(
        &mut self,
        id: i64,
        reasons: &[SkipReason],
        actor: &str,
    ) -> Result<bool> {
        let text = reasons
            .iter()
            .map(|r| format!("{}: {}", r.plugin, r.reason))
            .collect::<Vec<_>>()
            .join("; ");
        if !self
            .conclude(
                id,
                TaskStatus::Skip,
                actor,
                &format!("skipped by a filter: {text}"),
            )
            .await?
        {
            return Ok(false);
        }
        let json = serde_json::to_string(reasons)
            .map_err(|e| StoreError::Corrupt(format!("skip reasons: {e}")))?;
        let now = super::now();
        on_tx!(self, conn => {
            sqlx::query(
                "UPDATE executor_queue SET skipped_by = 'filter', skip_reasons = $2, analyzed_at = $3, \
                 analysis_summary = NULL, analysis_raw = NULL WHERE id = $1",
            )
            .bind(id)
            .bind(json)
            .bind(now)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("recording a skip")?;
        Ok(true)
    }

    /// The analysis (or its stand-in) concluded on a pending task. False
    /// if the task is no longer pending.
    pub async fn record_analysis(
        &mut self,
        id: i64,
        analysis: &Analysis,
        actor: &str,
    ) -> Result<bool> {
        let status = analysis.status.unwrap_or(TaskStatus::ForReview);
        if !self.conclude(id, status, actor, &analysis.reason).await? {
            return Ok(false);
        }
        let now = super::now();
        let skipped_by = (status == TaskStatus::Skip).then_some("analysis");
        on_tx!(self, conn => {
            sqlx::query(
                "UPDATE executor_queue SET skipped_by = $2, skip_reasons = NULL, analyzed_at = $3, \
                 analysis_summary = $4, complexity = $5, feasibility = $6, priority = $7, \
                 analysis_raw = $8, analysis_attempts = analysis_attempts + 1, \
                 repo = COALESCE(repo, $9) WHERE id = $1",
            )
            .bind(id)
            .bind(skipped_by)
            .bind(now)
            .bind(&analysis.summary)
            .bind(&analysis.complexity)
            .bind(&analysis.feasibility)
            .bind(analysis.priority)
            .bind(&analysis.raw)
            .bind(&analysis.repo)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("recording an analysis")?;
        Ok(true)
    }

    /// Puts a skipped task back for analysis; its conclusion then goes into
    /// a summary (`quiet`), not a message of its own. False if it is no
    /// longer skipped.
    pub async fn reopen_for_analysis(&mut self, id: i64, actor: &str, quiet: bool) -> Result<bool> {
        if !self
            .conclude_from(
                id,
                TaskStatus::Skip,
                TaskStatus::Pending,
                actor,
                "put back for re-analysis",
            )
            .await?
        {
            return Ok(false);
        }
        on_tx!(self, conn => {
            sqlx::query(
                "UPDATE executor_queue SET skipped_by = NULL, skip_reasons = NULL, quiet_analysis = $2 \
                 WHERE id = $1",
            )
            .bind(id)
            .bind(quiet)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("putting a task back")?;
        self.notify().await?;
        Ok(true)
    }

    /// Clears a task's quiet mark once its conclusion is in a summary.
    pub async fn clear_quiet(&mut self, id: i64) -> Result<()> {
        on_tx!(self, conn => {
            sqlx::query("UPDATE executor_queue SET quiet_analysis = $2 WHERE id = $1")
                .bind(id)
                .bind(false)
                .execute(conn)
                .await
                .map(|done| done.rows_affected())
        })
        .op("clearing a task's re-analysis mark")?;
        Ok(())
    }
}

impl Tx {
    async fn conclude(
        &mut self,
        id: i64,
        to: TaskStatus,
        actor: &str,
        reason: &str,
    ) -> Result<bool> {
        self.conclude_from(id, TaskStatus::Pending, to, actor, reason)
            .await
    }

    /// `from` → `to`, or false if the task is not in `from` (any more).
    async fn conclude_from(
        &mut self,
        id: i64,
        from: TaskStatus,
        to: TaskStatus,
        actor: &str,
        reason: &str,
    ) -> Result<bool> {
        // Checked under the row's lock: a task someone approved meanwhile
        // is not the analyzer's any more.
        match self.task_for_update(id).await? {
            Some(task) if task.status == from => {}
            _ => return Ok(false),
        }
        match self
            .transitions()
            .transition_task(id, to, actor, reason)
            .await
        {
            Ok(()) => Ok(true),
            // Changed between the read and the write (PostgreSQL).
            Err(StoreError::IllegalTransition { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// Work asked of the analyzer from chat (`!reanalyze`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnalyzerJob {
    pub id: i64,
    /// Put the tasks back (`!reanalyze confirm`), or only count them.
    pub reanalyze: bool,
    pub requested_by: String,
    /// The identity that answers, and where.
    pub reply_identity: String,
    pub reply_to: super::Destination,
    /// The tasks put back, once they are.
    pub reopened: Option<Vec<i64>>,
}

type JobRow = (
    i64,
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

impl AnalysesTx<'_> {
    /// Asks the analyzer to count (or, with `reanalyze`, put back) the
    /// skipped tasks the current filters would keep, answering at `reply_to`.
    pub async fn request_analyzer_job(
        &mut self,
        reanalyze: bool,
        requested_by: &str,
        reply_identity: &str,
        reply_to: &super::Destination,
    ) -> Result<i64> {
        let now = super::now();
        let (channel, topic, users) = match reply_to {
            super::Destination::Channel { channel, topic } => {
                (Some(channel.clone()), Some(topic.clone()), None)
            }
            super::Destination::Direct { user_ids } => (
                None,
                None,
                Some(serde_json::to_string(user_ids).unwrap_or_else(|_| "[]".into())),
            ),
        };
        let id: i64 = on_tx!(self, conn => {
            sqlx::query_scalar(
                "INSERT INTO analyzer_jobs (kind, requested_by, reply_identity, reply_channel, \
                 reply_topic, reply_user_ids, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
            )
            .bind(if reanalyze { "reanalyze" } else { "count" })
            .bind(requested_by)
            .bind(reply_identity)
            .bind(&channel)
            .bind(&topic)
            .bind(&users)
            .bind(now)
            .fetch_one(conn)
            .await
        })
        .op("asking the analyzer")?;
        self.audit_log()
            .audit(&super::NewAuditEntry {
                actor: requested_by.to_string(),
                action: if reanalyze {
                    "analyzer.reanalyze"
                } else {
                    "analyzer.count"
                }
                .into(),
                subject: format!("analyzer_job:{id}"),
                ..super::NewAuditEntry::default()
            })
            .await?;
        self.notify().await?;
        Ok(id)
    }

    /// Records the tasks a job put back; false if another analyzer took
    /// the job up first (the caller rolls back).
    pub async fn set_job_reopened(&mut self, id: i64, reopened: &[i64]) -> Result<bool> {
        let json = serde_json::to_string(reopened).unwrap_or_else(|_| "[]".into());
        let changed = on_tx!(self, conn => {
            sqlx::query(
                "UPDATE analyzer_jobs SET reopened = $2 WHERE id = $1 AND reopened IS NULL AND done_at IS NULL",
            )
            .bind(id)
            .bind(json)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("recording a job's tasks")?;
        Ok(changed == 1)
    }

    /// Ends a job; false if another analyzer ended it first.
    pub async fn finish_analyzer_job(&mut self, id: i64) -> Result<bool> {
        let now = super::now();
        let changed = on_tx!(self, conn => {
            sqlx::query("UPDATE analyzer_jobs SET done_at = $2 WHERE id = $1 AND done_at IS NULL")
                .bind(id)
                .bind(now)
                .execute(conn)
                .await
                .map(|done| done.rows_affected())
        })
        .op("ending an analyzer job")?;
        Ok(changed == 1)
    }
}

impl Analyses<'_> {
    /// The analyzer's open jobs, oldest first.
    pub async fn open_analyzer_jobs(&self) -> Result<Vec<AnalyzerJob>> {
        let rows: Vec<JobRow> = on_pool!(self, pool => {
            sqlx::query_as(
                "SELECT id, kind, requested_by, reply_identity, reply_channel, reply_topic, \
                 reply_user_ids, reopened FROM analyzer_jobs WHERE done_at IS NULL ORDER BY id LIMIT 20",
            )
            .fetch_all(pool)
            .await
        })
        .op("listing the analyzer's jobs")?;
        Ok(rows
            .into_iter()
            .map(
                |(id, kind, requested_by, reply_identity, channel, topic, users, reopened)| {
                    let reply_to = match (channel, topic) {
                        (Some(channel), Some(topic)) => {
                            super::Destination::Channel { channel, topic }
                        }
                        _ => super::Destination::Direct {
                            user_ids: users
                                .and_then(|u| serde_json::from_str(&u).ok())
                                .unwrap_or_default(),
                        },
                    };
                    AnalyzerJob {
                        id,
                        reanalyze: kind == "reanalyze",
                        requested_by,
                        reply_identity,
                        reply_to,
                        reopened: reopened.and_then(|r| serde_json::from_str(&r).ok()),
                    }
                },
            )
            .collect())
    }

    /// The statuses of these tasks now (for a re-analysis summary).
    pub async fn task_statuses(&self, ids: &[i64]) -> Result<Vec<(i64, TaskStatus)>> {
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(500) {
            let json = serde_json::to_string(chunk).unwrap_or_else(|_| "[]".into());
            let rows: Vec<(i64, String)> = match &self.pool {
                super::Pool::Sqlite(pool) => sqlx::query_as(
                    "SELECT id, status FROM executor_queue WHERE id IN (SELECT value FROM json_each($1)) ORDER BY id",
                )
                .bind(&json)
                .fetch_all(pool)
                .await,
                super::Pool::Postgres(pool) => sqlx::query_as(
                    "SELECT id, status FROM executor_queue WHERE id IN \
                     (SELECT jsonb_array_elements_text($1::jsonb)::bigint) ORDER BY id",
                )
                .bind(&json)
                .fetch_all(pool)
                .await,
            }
            .op("reading tasks' statuses")?;
            for (id, status) in rows {
                out.push((id, TaskStatus::try_from(status)?));
            }
        }
        Ok(out)
    }
}
