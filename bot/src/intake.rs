//! Asana intake (the orchestrator profile): the configured projects,
//! sections, My Tasks sections and followed tasks are imported into the
//! inbox as `asana:<gid>`, with the place's configured name as `source`,
//! every `poll_interval`. Re-importing is idempotent; a task changed there
//! is updated here, and one completed there leaves the inbox (unless its
//! run already started: a person decides then). New tasks wake the
//! analyzer through the database.
//!
//! Who a task is assigned to is what the default filter reads: a task
//! assigned to the token's own user (the owner's personal access token, the
//! one whose My Tasks are read) is recorded as assigned to the profile's
//! `owner`, so that "unassigned or assigned to the owner" holds; anyone
//! else is recorded by name.

use std::collections::HashSet;
use std::time::Duration;

use chrono::Utc;
use tokio_util::sync::CancellationToken;

use crate::asana::{
    Asana, AsanaConfig, AsanaTask, Completion, MyTasksSection, Place, PlatformRule, Source,
};
use crate::profile::{AsanaSettings, Profile};
use crate::store::{ExternalTask, Store, StoreError, Upserted};

const LEASE: &str = "asana-intake";
const LEASE_TTL: Duration = Duration::from_secs(120);
/// The name its progress is kept under.
const IMPORT: &str = "asana";
/// Tasks written per transaction.
const CHUNK: usize = 100;
const ACTOR: &str = "asana-intake";

/// What one import did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportSummary {
    pub created: usize,
    pub updated: usize,
    pub unchanged: usize,
    /// Completed there before Eagle ever saw them: not imported.
    pub done_there: usize,
    /// Sources that could not be read, with why (the others were imported).
    pub failed: Vec<(String, String)>,
}

impl ImportSummary {
    /// One line for the operator.
    pub fn text(&self) -> String {
        let mut out = format!(
            "imported from Asana: {} new, {} updated, {} unchanged",
            self.created, self.updated, self.unchanged
        );
        if self.done_there > 0 {
            out.push_str(&format!(
                ", {} done there before they reached the inbox (not imported)",
                self.done_there
            ));
        }
        for (source, why) in &self.failed {
            out.push_str(&format!("; {source}: {why}"));
        }
        out
    }
}

#[derive(Debug, thiserror::Error)]
pub enum IntakeError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("asana: {0}")]
    Asana(#[from] crate::asana::Error),
}

/// The importer of one profile.
#[derive(Clone)]
pub struct Intake {
    store: Store,
    asana: std::sync::Arc<Asana>,
    settings: AsanaSettings,
    /// How the profile names its owner (the default filter compares it).
    owner: Option<String>,
    instance: String,
}

impl std::fmt::Debug for Intake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Intake")
            .field("workspace", &self.settings.workspace)
            .finish_non_exhaustive()
    }
}

impl Intake {
    /// The importer of `profile`, or `None` without `[asana]`.
    pub fn for_profile(profile: &Profile, store: Store) -> anyhow::Result<Option<Intake>> {
        let Some(settings) = &profile.asana else {
            return Ok(None);
        };
        let mut config = AsanaConfig::new(settings.api_url.clone(), settings.token.clone());
        config.platform = PlatformRule {
            field: settings.platform_field.clone(),
            tags: settings.platform_tags.clone(),
        };
        let asana = Asana::new(config)
            .map_err(|e| anyhow::anyhow!("profile {}: asana: {e}", profile.name))?;
        Ok(Some(Intake {
            store,
            asana: std::sync::Arc::new(asana),
            settings: settings.clone(),
            owner: profile.owner.as_ref().map(ToString::to_string),
            instance: crate::host::instance_name(),
        }))
    }

    /// Imports every `poll_interval` until `shutdown`.
    pub async fn run(&self, shutdown: CancellationToken) {
        let mut lease = crate::singleton::Lease::new(LEASE, self.instance.clone(), LEASE_TTL);
        let mut backoff = crate::backoff::Backoff::new();
        // When the next import is due; the lease is renewed in between.
        let mut due = tokio::time::Instant::now();
        loop {
            let wait = match lease.hold(&self.store).await {
                Ok(true) if tokio::time::Instant::now() < due => due
                    .saturating_duration_since(tokio::time::Instant::now())
                    .min(lease.renew_in()),
                Ok(true) => match tokio::select! {
                    result = self.import() => result,
                    _ = shutdown.cancelled() => break,
                } {
                    Ok(summary) => {
                        backoff.succeeded();
                        if summary.created + summary.updated > 0 || !summary.failed.is_empty() {
                            tracing::info!("{}", summary.text());
                        }
                        due = tokio::time::Instant::now() + self.settings.poll_interval;
                        self.settings.poll_interval.min(lease.renew_in())
                    }
                    Err(error) => {
                        let wait = backoff.failed().max(Duration::from_secs(5));
                        tracing::error!(%error, wait_ms = wait.as_millis() as u64, "the Asana import failed; retrying");
                        due = tokio::time::Instant::now() + wait;
                        wait
                    }
                },
                Ok(false) => lease.renew_in(),
                Err(error) => {
                    tracing::error!(%error, "cannot take the Asana intake's lease");
                    backoff.failed()
                }
            };
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(wait) => {}
            }
        }
        lease.release(&self.store).await;
    }

    /// One import of every configured place. A place that fails is named
    /// in the summary; the others are imported all the same.
    pub async fn import(&self) -> Result<ImportSummary, IntakeError> {
        let started = Utc::now();
        let completion = match self.store.imported_at(IMPORT).await? {
            Some(since) => Completion::Since(since),
            None => Completion::Open,
        };
        let me = self.asana.me().await?;
        let mut summary = ImportSummary::default();
        let mut seen: HashSet<String> = HashSet::new();
        let mut tasks: Vec<ExternalTask> = Vec::new();
        let mut take = |found: Vec<AsanaTask>, tasks: &mut Vec<ExternalTask>| {
            for task in found {
                // The first place a task is found in names it (config order).
                if seen.insert(task.gid.clone()) {
                    tasks.push(self.external(task, &me.gid));
                }
            }
        };
        let workspace = self.settings.workspace.clone();
        let mut sources: Vec<Source> = Vec::new();
        for (gid, name) in &self.settings.projects {
            sources.push(Source {
                name: name.clone(),
                place: Place::Project { gid: gid.clone() },
            });
        }
        for (gid, name) in &self.settings.sections {
            sources.push(Source {
                name: name.clone(),
                place: Place::Section { gid: gid.clone() },
            });
        }
        for source in &sources {
            match self.asana.list(source, completion).await {
                Ok(found) => take(found, &mut tasks),
                Err(error) => summary
                    .failed
                    .push((source.name.clone(), error.to_string())),
            }
        }
        if !self.settings.my_tasks.is_empty() {
            let sections: Vec<MyTasksSection> = self
                .settings
                .my_tasks
                .iter()
                .map(|(section, source)| MyTasksSection {
                    section: section.clone(),
                    source: source.clone(),
                })
                .collect();
            match self.asana.my_tasks(&workspace, &sections, completion).await {
                Ok(found) => take(found, &mut tasks),
                Err(error) => summary.failed.push(("my_tasks".into(), error.to_string())),
            }
        }
        if let Some(name) = &self.settings.followed_source {
            let source = Source {
                name: name.clone(),
                place: Place::Followed {
                    workspace: workspace.clone(),
                },
            };
            match self.asana.list(&source, completion).await {
                Ok(found) => take(found, &mut tasks),
                Err(error) => summary.failed.push((name.clone(), error.to_string())),
            }
        }
        for chunk in tasks.chunks(CHUNK) {
            let mut tx = self.store.begin_write().await?;
            for task in chunk {
                match tx.upsert_external_task(task, ACTOR).await? {
                    Upserted::Created(_) => summary.created += 1,
                    Upserted::Updated(_) => summary.updated += 1,
                    Upserted::Unchanged(_) => summary.unchanged += 1,
                    Upserted::Ignored => summary.done_there += 1,
                }
            }
            tx.commit().await?;
        }
        // Only a pass that read every place moves the mark: a place that
        // failed is read in full next time.
        if summary.failed.is_empty() {
            let mut tx = self.store.begin_write().await?;
            tx.set_imported_at(IMPORT, started, ACTOR).await?;
            tx.commit().await?;
        }
        Ok(summary)
    }

    /// An Asana task as the inbox stores it.
    fn external(&self, task: AsanaTask, me: &str) -> ExternalTask {
        let assignee = task.assignee.as_ref().map(|user| match &self.owner {
            Some(owner) if user.gid == me => owner.clone(),
            _ => user.name.clone(),
        });
        ExternalTask {
            task_gid: task.inbox_key(),
            source: task.source,
            title: task.name,
            description: task.notes,
            notes: String::new(),
            links: task.links,
            tags: task.tags,
            platform: task.platform,
            assignee,
            closed: task.completed,
            external_url: task.permalink_url,
            modified_at: task.modified_at,
        }
    }
}
