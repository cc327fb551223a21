//! Everything the fake Asana knows: workspaces, users and their tokens,
//! projects, sections, My Tasks lists, tasks and stories, the offset tokens
//! it issued, the limiter, the faults and the journal, behind one mutex.

use std::collections::{BTreeMap, HashMap};

use crate::asana::model::{Fault, Route};
use crate::asana::ratelimit::Limiter;
use crate::common::clock::Clock;
use crate::common::faults::Faults;
use crate::common::hub::Hub;
use crate::common::journal::{Journal, Journaled};

/// The hub type of the fake Asana.
pub(crate) type Shared = Hub<State>;

/// A workspace (or organization).
#[derive(Debug, Clone)]
pub(crate) struct Workspace {
    pub name: String,
    pub premium: bool,
}

/// A user.
#[derive(Debug, Clone)]
pub(crate) struct User {
    pub name: String,
    pub email: String,
    pub workspaces: Vec<String>,
}

/// A project, with its sections in order.
#[derive(Debug, Clone)]
pub(crate) struct Project {
    pub name: String,
    pub workspace: String,
    pub sections: Vec<String>,
}

/// A section of a project or of a My Tasks list.
#[derive(Debug, Clone)]
pub(crate) struct Section {
    pub gid: String,
    pub name: String,
    /// The project or user task list it belongs to.
    pub container: String,
    pub created_at: i64,
}

/// A user's My Tasks list in a workspace.
#[derive(Debug, Clone)]
pub(crate) struct UserTaskList {
    pub gid: String,
    pub owner: String,
    pub workspace: String,
    pub sections: Vec<String>,
}

/// A task.
#[derive(Debug, Clone)]
pub(crate) struct Task {
    pub gid: String,
    pub workspace: String,
    pub name: String,
    pub notes: String,
    pub html_notes: String,
    pub completed: bool,
    pub completed_at: Option<i64>,
    pub assignee: Option<String>,
    pub assignee_section: Option<String>,
    pub memberships: Vec<(String, Option<String>)>,
    /// (gid, name).
    pub tags: Vec<(String, String)>,
    /// (gid, name, display value).
    pub custom_fields: Vec<(String, String, Option<String>)>,
    pub followers: Vec<String>,
    pub parent: Option<String>,
    pub created_by: Option<String>,
    pub resource_subtype: String,
    pub created_at: i64,
    pub modified_at: i64,
}

/// A story on a task.
#[derive(Debug, Clone)]
pub(crate) struct Story {
    pub gid: String,
    pub task: String,
    pub created_by: Option<String>,
    pub created_at: i64,
    pub text: String,
    pub html_text: String,
    pub resource_subtype: String,
    /// `comment` or `system`.
    pub kind: String,
}

/// An offset token the fake issued: which listing it continues, and where.
#[derive(Debug, Clone)]
pub(crate) struct Offset {
    pub listing: String,
    pub position: usize,
}

/// Everything the fake knows.
pub(crate) struct State {
    pub journal: Journal,
    pub workspaces: BTreeMap<String, Workspace>,
    pub users: BTreeMap<String, User>,
    /// Token → user gid.
    pub pats: BTreeMap<String, String>,
    pub projects: BTreeMap<String, Project>,
    pub sections: BTreeMap<String, Section>,
    pub user_task_lists: BTreeMap<String, UserTaskList>,
    pub tasks: BTreeMap<String, Task>,
    pub stories: Vec<Story>,
    /// (workspace, name) → gid, for tags and custom fields.
    pub tags: BTreeMap<(String, String), String>,
    pub custom_fields: BTreeMap<(String, String), String>,
    pub offsets: HashMap<String, Offset>,
    pub limiter: Limiter,
    pub faults: Faults<Route, Fault>,
    pub clock: Clock,
    /// Seeded, so that gids and tokens are the same on every run.
    pub rng: fastrand::Rng,
    next_gid: u64,
}

impl Journaled for State {
    fn journal(&self) -> &Journal {
        &self.journal
    }
}

impl State {
    /// An empty fake.
    pub fn new() -> State {
        State {
            journal: Journal::default(),
            workspaces: BTreeMap::new(),
            users: BTreeMap::new(),
            pats: BTreeMap::new(),
            projects: BTreeMap::new(),
            sections: BTreeMap::new(),
            user_task_lists: BTreeMap::new(),
            tasks: BTreeMap::new(),
            stories: Vec::new(),
            tags: BTreeMap::new(),
            custom_fields: BTreeMap::new(),
            offsets: HashMap::new(),
            limiter: Limiter::default(),
            faults: Faults::default(),
            clock: Clock::default(),
            rng: fastrand::Rng::with_seed(0xa5a_0a5a),
            next_gid: 1_204_000_000_000_000,
        }
    }

    /// A fresh gid: a string of digits, increasing, never reused.
    pub fn new_gid(&mut self) -> String {
        self.next_gid += 1 + self.rng.u64(0..1_000);
        self.next_gid.to_string()
    }

    /// The gid of a tag or custom field by name, made on first use.
    pub fn named_gid(&mut self, custom_field: bool, workspace: &str, name: &str) -> String {
        let key = (workspace.to_owned(), name.to_owned());
        let existing = if custom_field {
            self.custom_fields.get(&key)
        } else {
            self.tags.get(&key)
        };
        if let Some(gid) = existing {
            return gid.clone();
        }
        let gid = self.new_gid();
        if custom_field {
            self.custom_fields.insert(key, gid.clone());
        } else {
            self.tags.insert(key, gid.clone());
        }
        gid
    }

    /// Whether the user belongs to the workspace.
    pub fn member(&self, user: &str, workspace: &str) -> bool {
        self.users
            .get(user)
            .is_some_and(|u| u.workspaces.iter().any(|w| w == workspace))
    }

    /// The name of a project, section or user task list, for compact records.
    pub fn container_name(&self, gid: &str) -> String {
        if let Some(p) = self.projects.get(gid) {
            return p.name.clone();
        }
        if let Some(s) = self.sections.get(gid) {
            return s.name.clone();
        }
        "My Tasks".to_owned()
    }

    /// Records a violation.
    pub fn violation(&mut self, text: String) {
        self.journal.violation(text);
    }
}
