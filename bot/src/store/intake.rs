//! Tasks from other systems (Asana): imported by their gid, idempotently;
//! a change there updates the inbox, and a task completed there leaves it.

use chrono::{DateTime, Utc};

use super::tasks::TaskStatus;
use super::{QueryContext, Result, on_pool, on_tx};

super::tx_handle!(
    /// Tasks from other systems (Asana), by their gid, in a transaction: `tx.intake()`.
    IntakeTx,
    intake
);

/// A task as another system describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExternalTask {
    /// `asana:<gid>`.
    pub task_gid: String,
    /// The section or project it came from, as the profile names it.
    pub source: String,
    pub title: String,
    pub description: String,
    pub notes: String,
    pub links: Vec<String>,
    pub tags: Vec<String>,
    pub platform: Option<String>,
    pub assignee: Option<String>,
    /// Completed where it lives.
    pub closed: bool,
    pub external_url: Option<String>,
    pub modified_at: Option<DateTime<Utc>>,
    /// The executor's repository it belongs to, if its place names one.
    pub repo: Option<String>,
}

/// What an import did with one task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upserted {
    /// New in the inbox (pending analysis).
    Created(i64),
    /// Known; its fields changed (and, if it was closed there while still
    /// in the inbox, it left the inbox).
    Updated(i64),
    /// Known and unchanged.
    Unchanged(i64),
    /// Never seen and already completed there: nothing to do.
    Ignored,
}

type Row = (
    i64,
    String,
    String,
    String,
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    String,
    String,
    Option<String>,
);

impl IntakeTx<'_> {
    /// Imports one task: inserts it, or updates what changed. A task closed
    /// there while it waits in the inbox (pending, analysed or skipped) is
    /// cancelled; one already approved keeps its run (a person decides).
    pub async fn upsert_external_task(
        &mut self,
        task: &ExternalTask,
        actor: &str,
    ) -> Result<Upserted> {
        let links = serde_json::to_string(&task.links).unwrap_or_else(|_| "[]".into());
        let tags = serde_json::to_string(&task.tags).unwrap_or_else(|_| "[]".into());
        let state = if task.closed { "closed" } else { "open" };
        let now = super::now();
        let existing: Option<Row> = on_tx!(self, conn => {
            sqlx::query_as(
                "SELECT id, source, title, description, notes, links, tags, platform, assignee, \
                 task_state, status, repo FROM executor_queue WHERE task_gid = $1",
            )
            .bind(&task.task_gid)
            .fetch_optional(conn)
            .await
        })
        .op("reading an imported task")?;
        let Some((
            id,
            source,
            title,
            description,
            notes,
            old_links,
            old_tags,
            platform,
            assignee,
            old_state,
            status,
            old_repo,
        )) = existing
        else {
            // A task first seen already done (a re-import lists what was
            // completed since) is not work for anyone.
            if task.closed {
                return Ok(Upserted::Ignored);
            }
            let id: Option<i64> = on_tx!(self, conn => {
                sqlx::query_scalar(
                    "INSERT INTO executor_queue (task_gid, added_at, updated_at, source, title, description, \
                     notes, links, tags, platform, assignee, task_state, external_url, external_modified_at, \
                     origin_transport, repo) \
                     VALUES ($1, $2, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) \
                     ON CONFLICT (task_gid) DO NOTHING RETURNING id",
                )
                .bind(&task.task_gid)
                .bind(now)
                .bind(&task.source)
                .bind(&task.title)
                .bind(&task.description)
                .bind(&task.notes)
                .bind(&links)
                .bind(&tags)
                .bind(&task.platform)
                .bind(&task.assignee)
                .bind(state)
                .bind(&task.external_url)
                .bind(task.modified_at)
                .bind(task.task_gid.split(':').next().unwrap_or("import"))
                .bind(&task.repo)
                .fetch_optional(conn)
                .await
            })
            .op("importing a task")?;
            // Another importer inserted it meanwhile: it is known.
            let Some(id) = id else {
                return Ok(Upserted::Unchanged(0));
            };
            self.audit_log()
                .audit(&super::NewAuditEntry {
                    actor: actor.to_string(),
                    action: "task.imported".into(),
                    subject: format!("task:{id}"),
                    reason: Some(format!("{} from {}", task.task_gid, task.source)),
                    ..super::NewAuditEntry::default()
                })
                .await?;
            self.notify().await?;
            return Ok(Upserted::Created(id));
        };
        let waiting = matches!(
            TaskStatus::try_from(status).ok(),
            Some(
                TaskStatus::Pending
                    | TaskStatus::ForReview
                    | TaskStatus::AwaitingGo
                    | TaskStatus::Skip
            )
        );
        // A task keeps the repository it was started in: only one still
        // waiting moves with its place's `repo`.
        let repo = if waiting {
            task.repo.clone()
        } else {
            old_repo.clone()
        };
        let changed = source != task.source
            || title != task.title
            || description != task.description
            || notes != task.notes
            || old_links != links
            || old_tags != tags
            || platform != task.platform
            || assignee != task.assignee
            || old_state != state
            || old_repo != repo;
        if !changed {
            return Ok(Upserted::Unchanged(id));
        }
        on_tx!(self, conn => {
            sqlx::query(
                "UPDATE executor_queue SET source = $2, title = $3, description = $4, notes = $5, links = $6, \
                 tags = $7, platform = $8, assignee = $9, task_state = $10, external_url = $11, \
                 external_modified_at = $12, updated_at = $13, repo = $14 WHERE id = $1",
            )
            .bind(id)
            .bind(&task.source)
            .bind(&task.title)
            .bind(&task.description)
            .bind(&task.notes)
            .bind(&links)
            .bind(&tags)
            .bind(&task.platform)
            .bind(&task.assignee)
            .bind(state)
            .bind(&task.external_url)
            .bind(task.modified_at)
            .bind(now)
            .bind(&repo)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("updating an imported task")?;
        if task.closed && old_state != "closed" && waiting {
            self.transitions()
                .transition_task(
                    id,
                    TaskStatus::Cancelled,
                    actor,
                    "completed where it came from",
                )
                .await?;
        }
        self.notify().await?;
        Ok(Upserted::Updated(id))
    }
}

impl super::Store {
    /// When the import `name` last started a pass that went through (its
    /// next pass asks for what was completed since), if ever.
    pub async fn imported_at(&self, name: &str) -> Result<Option<DateTime<Utc>>> {
        let key = format!("import:{name}");
        let value: Option<String> = on_pool!(self, pool => {
            sqlx::query_scalar("SELECT value FROM controls WHERE name = $1")
                .bind(&key)
                .fetch_optional(pool)
                .await
        })
        .op("reading when tasks were last imported")?;
        Ok(value.and_then(|v| {
            DateTime::parse_from_rfc3339(&v)
                .ok()
                .map(|t| t.with_timezone(&Utc))
        }))
    }
}

impl IntakeTx<'_> {
    /// Records that the import `name` went through a pass started at `at`.
    pub async fn set_imported_at(
        &mut self,
        name: &str,
        at: DateTime<Utc>,
        actor: &str,
    ) -> Result<()> {
        let key = format!("import:{name}");
        let now = super::now();
        on_tx!(self, conn => {
            sqlx::query(
                "INSERT INTO controls (name, value, updated_at, updated_by) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (name) DO UPDATE SET value = excluded.value, \
                 updated_at = excluded.updated_at, updated_by = excluded.updated_by",
            )
            .bind(&key)
            .bind(at.to_rfc3339())
            .bind(now)
            .bind(actor)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        })
        .op("recording an import")?;
        Ok(())
    }
}
