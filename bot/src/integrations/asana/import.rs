//! Listing what to import: the tasks of a project, of a section, of the
//! owner's My Tasks sections and the tasks the owner follows, each as
//! [`AsanaTask`]s named by the configured source; and one task again, to
//! re-check what was imported.
//!
//! Seeing completions: Asana's project, section and My Tasks lists take
//! only `completed_since` (no `modified_since`, NOTES "Pitfalls"). A first
//! import asks for [`Completion::Open`]; later ones ask for
//! [`Completion::Since`] the previous import, so a task completed since then
//! comes back with `completed: true`. A task that left the place, or was
//! deleted, no longer appears in any list: [`Asana::task`] tells which
//! (a 404 is [`Error::NotFound`]).

use std::collections::HashSet;

use chrono::{DateTime, Duration as Span, SecondsFormat, SubsecRound, Utc};

use super::client::{Asana, Call, PAGE_SIZE};
use super::error::Error;
use super::task::AsanaTask;
use super::types::{RawTask, RawUserTaskList, TASK_FIELDS};
use crate::ground::text::eq_fold;

/// Which tasks a listing returns, by completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completion {
    /// Incomplete tasks only (`completed_since=now`): what to import.
    Open,
    /// Incomplete tasks and those completed at or after this time: a
    /// re-import that also sees what was completed since the last one.
    Since(DateTime<Utc>),
    /// Every task, completed or not.
    All,
}

/// A configured place to import from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// Every task of a project (`GET /projects/{gid}/tasks`).
    Project {
        /// The project's gid.
        gid: String,
    },
    /// The tasks of one project section (`GET /sections/{gid}/tasks`).
    Section {
        /// The section's gid.
        gid: String,
    },
    /// The tasks filed under one section of the token user's My Tasks in a
    /// workspace (to import several sections, [`Asana::my_tasks`] reads
    /// the list once for all of them).
    MyTasks {
        /// The workspace's gid.
        workspace: String,
        /// The My Tasks section's name (e.g. `Inbox`), compared without
        /// regard to case.
        section: String,
    },
    /// The tasks the token's user follows in a workspace (the seed's
    /// `watched`). Needs a premium workspace: see [`Asana::followed_tasks`].
    Followed {
        /// The workspace's gid.
        workspace: String,
    },
}

/// A place and the name tasks from it carry as their `source`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The configured name (`O-L Backlog (Desktop Browsers)`,
    /// `my_tasks_inbox`, `watched`, …), which the filters read.
    pub name: String,
    /// Where the tasks are.
    pub place: Place,
}

/// A My Tasks section to import, and the source its tasks carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MyTasksSection {
    /// The section's name in My Tasks (e.g. `Inbox`), compared without
    /// regard to case.
    pub section: String,
    /// The source name its tasks carry (e.g. `my_tasks_inbox`).
    pub source: String,
}

/// Asana's time format, e.g. `2024-06-01T12:00:00.123Z`.
fn iso(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

impl Asana {
    /// The tasks of a source, however its place is listed.
    pub async fn list(
        &self,
        source: &Source,
        completion: Completion,
    ) -> Result<Vec<AsanaTask>, Error> {
        let name = source.name.as_str();
        match &source.place {
            Place::Project { gid } => self.project_tasks(gid, name, completion).await,
            Place::Section { gid } => self.section_tasks(gid, name, completion).await,
            Place::MyTasks { workspace, section } => {
                let wanted = [MyTasksSection {
                    section: section.clone(),
                    source: source.name.clone(),
                }];
                self.my_tasks(workspace, &wanted, completion).await
            }
            Place::Followed { workspace } => self.followed_tasks(workspace, name, completion).await,
        }
    }

    /// Every task of a project, all pages.
    pub async fn project_tasks(
        &self,
        project_gid: &str,
        source: &str,
        completion: Completion,
    ) -> Result<Vec<AsanaTask>, Error> {
        let call = Call::get(vec!["projects", project_gid, "tasks"]);
        self.task_list(call, source, completion).await
    }

    /// Every task of a project section, all pages. (The spec calls this
    /// endpoint "board view only"; Asana answers it for list projects too.)
    pub async fn section_tasks(
        &self,
        section_gid: &str,
        source: &str,
        completion: Completion,
    ) -> Result<Vec<AsanaTask>, Error> {
        let call = Call::get(vec!["sections", section_gid, "tasks"]);
        self.task_list(call, source, completion).await
    }

    /// The token user's My Tasks in a workspace, kept to the tasks filed
    /// under one of the wanted sections, each task named by its section's
    /// source. The list is read once, whatever the number of sections. The
    /// section comes from `assignee_section`, which Asana shows only to the
    /// assignee: the token's user, whose list this is.
    pub async fn my_tasks(
        &self,
        workspace_gid: &str,
        sections: &[MyTasksSection],
        completion: Completion,
    ) -> Result<Vec<AsanaTask>, Error> {
        let list_call = Call::get(vec!["users", "me", "user_task_list"])
            .query("workspace", workspace_gid)
            .query("opt_fields", "gid");
        let list: RawUserTaskList = self.get_one(&list_call).await?;
        let call = Call::get(vec!["user_task_lists", &list.gid, "tasks"]);
        let mut tasks = self.task_list(call, "", completion).await?;
        tasks.retain_mut(|task| {
            let wanted = task.my_tasks_section.as_deref().and_then(|name| {
                sections
                    .iter()
                    .find(|s| eq_fold(s.section.trim(), name.trim()))
            });
            match wanted {
                Some(s) => {
                    task.source.clone_from(&s.source);
                    true
                }
                None => false,
            }
        });
        Ok(tasks)
    }

    /// The tasks the token's user follows in a workspace, through Asana's
    /// search (`followers.any=me`), the only API that lists them.
    ///
    /// Search is premium-only: a free workspace answers 402, returned as
    /// [`Error::PaymentRequired`] ("needs a premium asana workspace") for
    /// the caller to report once and skip this source. No fallback is
    /// attempted: without search, finding followed tasks means reading
    /// every task of every project of the workspace (and tasks in no
    /// project cannot be found at all), which costs more requests than the
    /// free per-minute quota allows for any real workspace. Followed tasks
    /// inside the other configured places are still visible through
    /// [`AsanaTask::followed_by`].
    ///
    /// Search has no `offset`: results are sorted by `created_at` ascending
    /// and the next page starts from the last one seen (a millisecond
    /// earlier, duplicates dropped by gid). Its index lags writes by up to a
    /// minute; a task followed just now appears on a later import.
    pub async fn followed_tasks(
        &self,
        workspace_gid: &str,
        source: &str,
        completion: Completion,
    ) -> Result<Vec<AsanaTask>, Error> {
        let mut raw = match completion {
            Completion::Open => {
                self.search_followed(workspace_gid, &[("completed", "false".into())])
                    .await?
            }
            Completion::All => self.search_followed(workspace_gid, &[]).await?,
            Completion::Since(since) => {
                // Asana's times have milliseconds: compare at that precision.
                let since = since.trunc_subsecs(3);
                // Open ones, plus completed ones changed since (completing
                // a task moves its modified_at), then kept by completed_at.
                let mut open = self
                    .search_followed(workspace_gid, &[("completed", "false".into())])
                    .await?;
                let done = self
                    .search_followed(
                        workspace_gid,
                        &[
                            ("completed", "true".into()),
                            ("modified_at.after", iso(since - Span::milliseconds(1))),
                        ],
                    )
                    .await?;
                open.extend(
                    done.into_iter()
                        .filter(|t| t.completed_at.is_none_or(|at| at >= since)),
                );
                open
            }
        };
        let mut seen = HashSet::new();
        raw.retain(|t| seen.insert(t.gid.clone()));
        Ok(raw
            .into_iter()
            .map(|t| AsanaTask::from_raw(t, &self.config.platform, source))
            .collect())
    }

    /// One task again (`GET /tasks/{gid}`), e.g. to re-check an imported
    /// task that no listing returned: completed, moved, or deleted
    /// ([`Error::NotFound`]).
    pub async fn task(&self, task_gid: &str, source: &str) -> Result<AsanaTask, Error> {
        let call = Call::get(vec!["tasks", task_gid]).query("opt_fields", TASK_FIELDS);
        let raw: RawTask = self.get_one(&call).await?;
        Ok(AsanaTask::from_raw(raw, &self.config.platform, source))
    }

    /// A task list endpoint read to the end, with the task fields and the
    /// completion filter.
    async fn task_list(
        &self,
        call: Call<'_>,
        source: &str,
        completion: Completion,
    ) -> Result<Vec<AsanaTask>, Error> {
        let call = match completion {
            Completion::Open => call.query("completed_since", "now"),
            Completion::Since(at) => call.query("completed_since", iso(at)),
            Completion::All => call,
        }
        .query("opt_fields", TASK_FIELDS);
        let raw: Vec<RawTask> = self.get_all(&call).await?;
        Ok(raw
            .into_iter()
            .map(|t| AsanaTask::from_raw(t, &self.config.platform, source))
            .collect())
    }

    /// Every search result for the followed tasks with these extra filters,
    /// paged by `created_at`.
    async fn search_followed(
        &self,
        workspace_gid: &str,
        filters: &[(&'static str, String)],
    ) -> Result<Vec<RawTask>, Error> {
        let mut found: Vec<RawTask> = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        let mut after: Option<DateTime<Utc>> = None;
        loop {
            let mut call = Call::get(vec!["workspaces", workspace_gid, "tasks", "search"])
                .query("followers.any", "me")
                .query("sort_by", "created_at")
                .query("sort_ascending", "true")
                .query("limit", PAGE_SIZE.to_string())
                .query("opt_fields", TASK_FIELDS);
            for (name, value) in filters {
                call = call.query(name, value.clone());
            }
            if let Some(after) = after {
                call = call.query("created_at.after", iso(after - Span::milliseconds(1)));
            }
            let page: Vec<RawTask> = self.get_one(&call).await?;
            let full = page.len() >= PAGE_SIZE;
            let last = page.last().map(|t| t.created_at);
            let before = found.len();
            found.extend(page.into_iter().filter(|t| seen.insert(t.gid.clone())));
            if !full {
                return Ok(found);
            }
            let Some(Some(last)) = last else {
                return Err(Error::Malformed {
                    what: call.what(),
                    reason: "a search result has no created_at to page by".to_owned(),
                });
            };
            if found.len() == before {
                // A whole page created within one millisecond: there is no
                // way past it without an offset, which search lacks.
                tracing::warn!(
                    call = %call.what(),
                    "more than a page of followed tasks share one creation time; the rest are skipped"
                );
                return Ok(found);
            }
            after = Some(last);
        }
    }
}
