//! Asana intake (the orchestrator profile): the configured projects,
//! sections, My Tasks sections and followed tasks are imported into the
//! inbox as `asana:<gid>`, with the place's configured name as `source`,
//! every `poll_interval`. Re-importing is idempotent; a task changed there
//! is updated here, and one completed there leaves the inbox (unless its
//! run already started: a person decides then). New tasks wake the
//! analyzer through the database.
//!
//! Who a task is assigned to is recorded as Asana says, by name and gid:
//! `Bob <asana:1201>`. The token's own user (the owner's personal access
//! token, the one whose My Tasks are read) is the owner Eagle knows, matched
//! by gid and recorded as `Alex <asana:me>` (`me` is Asana's own name for
//! that user); the default filter's owner is `asana:me` unless the profile
//! names another. Nothing about the process that imports (the shell's
//! person, the profile's owner) goes into it, so an import with nothing
//! changed in Asana writes nothing.

use std::collections::HashSet;
use std::time::Duration;

use crate::integrations::asana::{
    Asana, AsanaTask, Completion, MyTasksSection, Place, Source, User,
};
use crate::profile::AsanaSettings;
use crate::runtime::background::{BackgroundLoop, LeaseSpec, Next, Tick, Wake};
use crate::store::{ExternalTask, Store, StoreError, Upserted};
use chrono::Utc;

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
    Asana(#[from] crate::integrations::asana::Error),
}

/// The importer of one profile.
pub struct Intake {
    store: Store,
    asana: std::sync::Arc<Asana>,
    settings: AsanaSettings,
    /// When the next import is due.
    due: tokio::time::Instant,
}

impl std::fmt::Debug for Intake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Intake")
            .field("workspace", &self.settings.workspace)
            .finish_non_exhaustive()
    }
}

impl BackgroundLoop for Intake {
    const NAME: &'static str = "Asana intake";
    /// Asana is polled; the database has nothing to say about it.
    const WAKE: Wake = Wake::Timer;
    const ABANDON_ON_STOP: bool = true;
    /// A failing Asana is not asked again at once.
    const MIN_BACKOFF: Duration = Duration::from_secs(5);

    fn lease(&self) -> Option<LeaseSpec> {
        Some(LeaseSpec {
            name: LEASE,
            ttl: LEASE_TTL,
        })
    }

    /// Imports every `poll_interval`.
    async fn tick(&mut self, _: &mut Tick<'_>) -> anyhow::Result<Next> {
        let now = tokio::time::Instant::now();
        if now < self.due {
            return Ok(Next::After(self.due - now));
        }
        let summary = self.import().await?;
        if summary.created + summary.updated > 0 || !summary.failed.is_empty() {
            tracing::info!("{}", summary.text());
        }
        self.due = tokio::time::Instant::now() + self.settings.poll_interval;
        Ok(Next::After(self.settings.poll_interval))
    }
}

impl Intake {
    /// The importer of `settings` through `asana`.
    pub fn new(store: Store, asana: std::sync::Arc<Asana>, settings: AsanaSettings) -> Intake {
        Intake {
            store,
            asana,
            settings,
            due: tokio::time::Instant::now(),
        }
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
                    let repo = self.settings.repos.get(&task.source).cloned();
                    tasks.push(external(task, &me.gid, repo));
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
                match tx.intake().upsert_external_task(task, ACTOR).await? {
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
            tx.intake().set_imported_at(IMPORT, started, ACTOR).await?;
            tx.commit().await?;
        }
        Ok(summary)
    }
}

/// Who a task is assigned to, as the inbox records it: the name Asana gives
/// and the gid, `me` for the token's user (`me`: that user's gid).
fn assignee(user: &User, me: &str) -> String {
    let gid = if user.gid == me { "me" } else { &user.gid };
    let name = user.name.trim();
    if name.is_empty() {
        format!("<asana:{gid}>")
    } else {
        format!("{name} <asana:{gid}>")
    }
}

/// An Asana task as the inbox stores it; `me` is the token's user's gid,
/// `repo` the repository its place names.
fn external(task: AsanaTask, me: &str, repo: Option<String>) -> ExternalTask {
    let assignee = task.assignee.as_ref().map(|user| assignee(user, me));
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
        repo,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_assignee_is_recorded_by_name_and_gid_and_the_token_user_as_me() {
        let user = |gid: &str, name: &str| User {
            gid: gid.into(),
            name: name.into(),
        };
        let cases = [
            (user("1201", "Alex Owner"), "1201", "Alex Owner <asana:me>"),
            (user("1202", "Bob"), "1201", "Bob <asana:1202>"),
            (user("1202", " Bob "), "1201", "Bob <asana:1202>"),
            (user("1202", ""), "1201", "<asana:1202>"),
        ];
        for (user, me, want) in cases {
            assert_eq!(assignee(&user, me), want, "{user:?}");
        }
    }
}
