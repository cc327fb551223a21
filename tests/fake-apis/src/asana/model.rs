//! The public data types of the fake Asana: what tests set up, read back,
//! and inject.

/// A task to add. Gids (users, projects, sections) come from the control API.
#[derive(Debug, Clone)]
pub struct TaskSpec {
    /// The workspace gid.
    pub workspace: String,
    /// The name.
    pub name: String,
    /// Plain-text notes.
    pub notes: String,
    /// Rich-text notes (`<body>…</body>`); derived from `notes` when `None`.
    pub html_notes: Option<String>,
    /// The assignee's user gid.
    pub assignee: Option<String>,
    /// A section of the assignee's My Tasks list.
    pub assignee_section: Option<String>,
    /// (project gid, section gid) pairs.
    pub memberships: Vec<(String, Option<String>)>,
    /// Tag names (tags are created on first use).
    pub tags: Vec<String>,
    /// Custom field values.
    pub custom_fields: Vec<CustomField>,
    /// Follower user gids.
    pub followers: Vec<String>,
    /// The parent task's gid.
    pub parent: Option<String>,
    /// Who created it.
    pub created_by: Option<String>,
    /// Whether it is completed.
    pub completed: bool,
    /// `default_task`, `milestone` or `approval`.
    pub resource_subtype: String,
}

impl TaskSpec {
    /// An incomplete, unassigned task with no notes, in no project.
    pub fn new(workspace: &str, name: &str) -> TaskSpec {
        TaskSpec {
            workspace: workspace.to_owned(),
            name: name.to_owned(),
            notes: String::new(),
            html_notes: None,
            assignee: None,
            assignee_section: None,
            memberships: Vec::new(),
            tags: Vec::new(),
            custom_fields: Vec::new(),
            followers: Vec::new(),
            parent: None,
            created_by: None,
            completed: false,
            resource_subtype: "default_task".to_owned(),
        }
    }
}

/// A (text) custom field value on a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomField {
    /// The field's name; one gid per name and workspace.
    pub name: String,
    /// What `display_value` shows; `None` when unset.
    pub display_value: Option<String>,
}

impl CustomField {
    /// A field with a value.
    pub fn new(name: &str, value: &str) -> CustomField {
        CustomField {
            name: name.to_owned(),
            display_value: Some(value.to_owned()),
        }
    }
}

/// A story (comment or system story) on a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredStory {
    /// Its gid.
    pub gid: String,
    /// The task's gid.
    pub task: String,
    /// The author's user gid (`None` for a system story without one).
    pub created_by: Option<String>,
    /// `comment_added` for comments.
    pub resource_subtype: String,
    /// The plain text.
    pub text: String,
    /// The rich text (`<body>…</body>`).
    pub html_text: String,
    /// When (ISO 8601 with milliseconds).
    pub created_at: String,
}

/// Which requests an injected fault applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `GET /users/{gid}` (and `/users/me`).
    User,
    /// `GET /users/{gid}/user_task_list`.
    UserTaskList,
    /// `GET /user_task_lists/{gid}/tasks`.
    UserTaskListTasks,
    /// `GET /projects/{gid}/tasks`.
    ProjectTasks,
    /// `GET /projects/{gid}/sections`.
    ProjectSections,
    /// `GET /sections/{gid}/tasks`.
    SectionTasks,
    /// `GET /tasks`.
    Tasks,
    /// `GET /tasks/{gid}`.
    Task,
    /// `GET /tasks/{gid}/stories`.
    Stories,
    /// `POST /tasks/{gid}/stories`.
    CreateStory,
    /// `GET /workspaces/{gid}/tasks/search`.
    Search,
    /// Every request.
    Any,
}

/// What an injected fault does to a matching request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// 429 with `Retry-After` in seconds.
    RateLimit {
        /// The `Retry-After` seconds.
        retry_after: u64,
    },
    /// 500 with an error phrase.
    ServerError,
    /// 502 from the load balancer.
    BadGateway,
    /// Never answer, and do nothing.
    Hang,
    /// Do the work (create the story, …) but never answer.
    AcceptThenHang,
}
