//! The test-control API of the fake Asana: building workspaces, people,
//! projects and tasks, acting as people, reading back what clients did, and
//! breaking things on purpose.
//!
//! These methods panic on misuse by the test itself (an unknown gid), which
//! is a bug in the test, not input from a client.

use crate::FakeAsana;
use crate::asana::model::{Fault, Route, StoredStory, TaskSpec};
use crate::asana::state::{Project, Section, State, Story, Task, User, Workspace};
use crate::asana::stories::escape;
use crate::asana::users::ensure_user_task_list;
use crate::common::clock::iso_millis;
use crate::common::journal::{RecordedRequest, assert_no_violations};

fn task_mut<'s>(state: &'s mut State, gid: &str) -> &'s mut Task {
    match state.tasks.get_mut(gid) {
        Some(task) => task,
        None => panic!("the fake Asana has no task {gid}"),
    }
}

/// Changes a task the way that moves `modified_at`.
fn modify(state: &mut State, gid: &str, change: impl FnOnce(&mut Task, i64)) {
    let now = state.clock.now_ms();
    let task = task_mut(state, gid);
    change(task, now);
    task.modified_at = now;
}

impl FakeAsana {
    /// Adds a workspace; search answers 402 unless it is premium.
    pub fn add_workspace(&self, name: &str, premium: bool) -> String {
        self.shared.mutate(|s| {
            let gid = s.new_gid();
            s.workspaces.insert(
                gid.clone(),
                Workspace {
                    name: name.to_owned(),
                    premium,
                },
            );
            gid
        })
    }

    /// Adds a user who belongs to these workspaces.
    pub fn add_user(&self, name: &str, email: &str, workspaces: &[&str]) -> String {
        self.shared.mutate(|s| {
            for w in workspaces {
                assert!(
                    s.workspaces.contains_key(*w),
                    "the fake Asana has no workspace {w}"
                );
            }
            let gid = s.new_gid();
            let workspaces = workspaces.iter().map(|w| (*w).to_owned()).collect();
            s.users.insert(
                gid.clone(),
                User {
                    name: name.to_owned(),
                    email: email.to_owned(),
                    workspaces,
                },
            );
            gid
        })
    }

    /// Creates a personal access token acting as the user.
    pub fn create_pat(&self, user: &str) -> String {
        self.shared.mutate(|s| {
            assert!(
                s.users.contains_key(user),
                "the fake Asana has no user {user}"
            );
            let secret: String = std::iter::repeat_with(|| s.rng.alphanumeric())
                .take(32)
                .collect();
            let token = format!("2/{user}/{secret}");
            s.pats.insert(token.clone(), user.to_owned());
            token
        })
    }

    /// Adds a project to a workspace.
    pub fn add_project(&self, workspace: &str, name: &str) -> String {
        self.shared.mutate(|s| {
            assert!(
                s.workspaces.contains_key(workspace),
                "the fake Asana has no workspace {workspace}"
            );
            let gid = s.new_gid();
            s.projects.insert(
                gid.clone(),
                Project {
                    name: name.to_owned(),
                    workspace: workspace.to_owned(),
                    sections: Vec::new(),
                },
            );
            gid
        })
    }

    /// Adds a section at the end of a project or of a My Tasks list.
    pub fn add_section(&self, container: &str, name: &str) -> String {
        self.shared.mutate(|s| {
            let gid = s.new_gid();
            let now = s.clock.now_ms();
            if let Some(p) = s.projects.get_mut(container) {
                p.sections.push(gid.clone());
            } else if let Some(l) = s.user_task_lists.get_mut(container) {
                l.sections.push(gid.clone());
            } else {
                panic!("the fake Asana has no project or user task list {container}");
            }
            s.sections.insert(
                gid.clone(),
                Section {
                    gid: gid.clone(),
                    name: name.to_owned(),
                    container: container.to_owned(),
                    created_at: now,
                },
            );
            gid
        })
    }

    /// The user's My Tasks list in a workspace (made on first use, with a
    /// "Recently assigned" section).
    pub fn my_tasks(&self, user: &str, workspace: &str) -> String {
        self.shared.mutate(|s| {
            assert!(
                s.member(user, workspace),
                "user {user} is not in workspace {workspace}"
            );
            ensure_user_task_list(s, user, workspace)
        })
    }

    /// The sections of a project or My Tasks list, in order: (gid, name).
    pub fn sections_of(&self, container: &str) -> Vec<(String, String)> {
        let s = self.shared.read();
        let gids = match (s.projects.get(container), s.user_task_lists.get(container)) {
            (Some(p), _) => p.sections.clone(),
            (None, Some(l)) => l.sections.clone(),
            (None, None) => panic!("the fake Asana has no project or user task list {container}"),
        };
        gids.iter()
            .filter_map(|g| s.sections.get(g))
            .map(|sec| (sec.gid.clone(), sec.name.clone()))
            .collect()
    }

    /// Adds a task; returns its gid.
    pub fn add_task(&self, spec: TaskSpec) -> String {
        self.shared.mutate(|s| {
            assert!(
                s.workspaces.contains_key(&spec.workspace),
                "the fake Asana has no workspace {}",
                spec.workspace
            );
            for (project, section) in &spec.memberships {
                assert!(
                    s.projects.contains_key(project),
                    "the fake Asana has no project {project}"
                );
                if let Some(section) = section {
                    assert!(
                        s.sections
                            .get(section)
                            .is_some_and(|x| x.container == *project),
                        "section {section} is not in project {project}"
                    );
                }
            }
            let gid = s.new_gid();
            let now = s.clock.now_ms();
            let tags = spec
                .tags
                .iter()
                .map(|t| (s.named_gid(false, &spec.workspace, t), t.clone()))
                .collect();
            let custom_fields = spec
                .custom_fields
                .iter()
                .map(|f| {
                    (
                        s.named_gid(true, &spec.workspace, &f.name),
                        f.name.clone(),
                        f.display_value.clone(),
                    )
                })
                .collect();
            let html_notes = spec
                .html_notes
                .clone()
                .unwrap_or_else(|| format!("<body>{}</body>", escape(&spec.notes)));
            s.tasks.insert(
                gid.clone(),
                Task {
                    gid: gid.clone(),
                    workspace: spec.workspace,
                    name: spec.name,
                    notes: spec.notes,
                    html_notes,
                    completed: spec.completed,
                    completed_at: spec.completed.then_some(now),
                    assignee: spec.assignee,
                    assignee_section: spec.assignee_section,
                    memberships: spec.memberships,
                    tags,
                    custom_fields,
                    followers: spec.followers,
                    parent: spec.parent,
                    created_by: spec.created_by,
                    resource_subtype: spec.resource_subtype,
                    created_at: now,
                    modified_at: now,
                },
            );
            gid
        })
    }

    /// Moves a task to another section of a project it is in (or adds it to
    /// the project); `modified_at` does not move.
    pub fn move_to_section(&self, task: &str, project: &str, section: &str) {
        self.shared.mutate(|s| {
            assert!(
                s.sections
                    .get(section)
                    .is_some_and(|x| x.container == project),
                "section {section} is not in project {project}"
            );
            let t = task_mut(s, task);
            t.memberships.retain(|(p, _)| p != project);
            t.memberships
                .push((project.to_owned(), Some(section.to_owned())));
        });
    }

    /// Files a task under a section of its assignee's My Tasks;
    /// `modified_at` does not move.
    pub fn move_in_my_tasks(&self, task: &str, section: &str) {
        self.shared.mutate(|s| {
            assert!(
                s.sections.contains_key(section),
                "the fake Asana has no section {section}"
            );
            task_mut(s, task).assignee_section = Some(section.to_owned());
        });
    }

    /// Completes (or reopens) a task.
    pub fn complete_task(&self, task: &str, completed: bool) {
        self.shared.mutate(|s| {
            modify(s, task, |t, now| {
                t.completed = completed;
                t.completed_at = completed.then_some(now);
            });
        });
    }

    /// Renames a task.
    pub fn rename_task(&self, task: &str, name: &str) {
        self.shared
            .mutate(|s| modify(s, task, |t, _| t.name = name.to_owned()));
    }

    /// Replaces a task's notes (rich text derived from them when `None`).
    pub fn set_notes(&self, task: &str, notes: &str, html_notes: Option<&str>) {
        self.shared.mutate(|s| {
            modify(s, task, |t, _| {
                t.notes = notes.to_owned();
                t.html_notes = html_notes
                    .map_or_else(|| format!("<body>{}</body>", escape(notes)), str::to_owned);
            });
        });
    }

    /// Assigns a task (or unassigns it with `None`).
    pub fn assign(&self, task: &str, assignee: Option<&str>) {
        self.shared.mutate(|s| {
            modify(s, task, |t, _| {
                t.assignee = assignee.map(str::to_owned);
                t.assignee_section = None;
            });
        });
    }

    /// Sets (or clears) a custom field's value.
    pub fn set_custom_field(&self, task: &str, name: &str, value: Option<&str>) {
        self.shared.mutate(|s| {
            let workspace = task_mut(s, task).workspace.clone();
            let gid = s.named_gid(true, &workspace, name);
            modify(s, task, |t, _| {
                t.custom_fields.retain(|(g, _, _)| *g != gid);
                t.custom_fields
                    .push((gid, name.to_owned(), value.map(str::to_owned)));
            });
        });
    }

    /// Adds a follower; `modified_at` does not move.
    pub fn add_follower(&self, task: &str, user: &str) {
        self.shared.mutate(|s| {
            assert!(
                s.users.contains_key(user),
                "the fake Asana has no user {user}"
            );
            let t = task_mut(s, task);
            if !t.followers.iter().any(|f| f == user) {
                t.followers.push(user.to_owned());
            }
        });
    }

    /// Moves `modified_at` as any other change would.
    pub fn touch(&self, task: &str) {
        self.shared.mutate(|s| modify(s, task, |_, _| {}));
    }

    /// Comments on a task as a person would; returns the story's gid.
    pub fn add_comment(&self, task: &str, author: &str, text: &str) -> String {
        self.shared.mutate(|s| {
            assert!(
                s.users.contains_key(author),
                "the fake Asana has no user {author}"
            );
            let gid = s.new_gid();
            let now = s.clock.now_ms();
            modify(s, task, |_, _| {});
            s.stories.push(Story {
                gid: gid.clone(),
                task: task.to_owned(),
                created_by: Some(author.to_owned()),
                created_at: now,
                text: text.to_owned(),
                html_text: format!("<body>{}</body>", escape(text)),
                resource_subtype: "comment_added".to_owned(),
                kind: "comment".to_owned(),
            });
            gid
        })
    }

    /// The stories of a task, oldest first.
    pub fn stories(&self, task: &str) -> Vec<StoredStory> {
        let s = self.shared.read();
        s.stories
            .iter()
            .filter(|x| x.task == task)
            .map(|x| StoredStory {
                gid: x.gid.clone(),
                task: x.task.clone(),
                created_by: x.created_by.clone(),
                resource_subtype: x.resource_subtype.clone(),
                text: x.text.clone(),
                html_text: x.html_text.clone(),
                created_at: iso_millis(x.created_at),
            })
            .collect()
    }

    /// A task's `modified_at` as the API reports it.
    pub fn task_modified_at(&self, task: &str) -> String {
        self.shared
            .mutate(|s| iso_millis(task_mut(s, task).modified_at))
    }

    /// Sets the per-token limit of requests per minute (`None`: off, the
    /// default); past requests are forgotten.
    pub fn set_rate_limit(&self, per_minute: Option<u32>) {
        self.shared.mutate(|s| s.limiter.set(per_minute));
    }

    /// The next `times` requests on `route` get `fault`.
    pub fn inject(&self, route: Route, fault: Fault, times: usize) {
        self.shared.mutate(|s| s.faults.inject(route, fault, times));
    }

    /// Every HTTP request received, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.read().journal.requests.clone()
    }

    /// Every strictness violation so far.
    pub fn violations(&self) -> Vec<String> {
        self.shared.read().journal.violations.clone()
    }

    /// Forgets the violations so far (for tests that provoke some on purpose).
    pub fn clear_violations(&self) {
        self.shared.mutate(|s| s.journal.violations.clear());
    }

    /// Panics, listing every violation, if there is any.
    pub fn assert_clean(&self) {
        assert_no_violations("Asana", &self.violations());
    }
}
