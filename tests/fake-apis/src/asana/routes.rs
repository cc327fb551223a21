//! Which endpoint a request is for. Asana answers an unknown path or method
//! with 404 (its `NotFound` response covers "the request method and path
//! supplied do not specify a known action").

use crate::asana::fields::Kind;
use crate::asana::model::Route;
use crate::common::query::decode_segment;

/// One endpoint of the fake, with its path parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Endpoint {
    User(String),
    UserTaskList(String),
    UserTaskListTasks(String),
    ProjectTasks(String),
    ProjectSections(String),
    SectionTasks(String),
    Tasks,
    Task(String),
    Stories(String),
    CreateStory(String),
    Search(String),
}

/// The search filters the description lists, beside `opt_fields`.
const SEARCH_PARAMS: &[&str] = &[
    "text",
    "resource_subtype",
    "assignee.any",
    "assignee.not",
    "portfolios.any",
    "projects.any",
    "projects.not",
    "projects.all",
    "sections.any",
    "sections.not",
    "sections.all",
    "tags.any",
    "tags.not",
    "tags.all",
    "teams.any",
    "followers.any",
    "followers.not",
    "created_by.any",
    "created_by.not",
    "assigned_by.any",
    "assigned_by.not",
    "liked_by.not",
    "commented_on_by.not",
    "due_on.before",
    "due_on.after",
    "due_on",
    "due_at.before",
    "due_at.after",
    "start_on.before",
    "start_on.after",
    "start_on",
    "created_on.before",
    "created_on.after",
    "created_on",
    "created_at.before",
    "created_at.after",
    "completed_on.before",
    "completed_on.after",
    "completed_on",
    "completed_at.before",
    "completed_at.after",
    "modified_on.before",
    "modified_on.after",
    "modified_on",
    "modified_at.before",
    "modified_at.after",
    "is_blocking",
    "is_blocked",
    "has_attachment",
    "completed",
    "is_subtask",
    "sort_by",
    "sort_ascending",
    "limit",
];

impl Endpoint {
    /// The route faults are injected on.
    pub fn route(&self) -> Route {
        match self {
            Endpoint::User(_) => Route::User,
            Endpoint::UserTaskList(_) => Route::UserTaskList,
            Endpoint::UserTaskListTasks(_) => Route::UserTaskListTasks,
            Endpoint::ProjectTasks(_) => Route::ProjectTasks,
            Endpoint::ProjectSections(_) => Route::ProjectSections,
            Endpoint::SectionTasks(_) => Route::SectionTasks,
            Endpoint::Tasks => Route::Tasks,
            Endpoint::Task(_) => Route::Task,
            Endpoint::Stories(_) => Route::Stories,
            Endpoint::CreateStory(_) => Route::CreateStory,
            Endpoint::Search(_) => Route::Search,
        }
    }

    /// The kind of record it returns, and whether it is a paginated list.
    pub fn kind(&self) -> (Kind, bool) {
        match self {
            Endpoint::User(_) => (Kind::User, false),
            Endpoint::UserTaskList(_) => (Kind::UserTaskList, false),
            Endpoint::ProjectSections(_) => (Kind::Section, true),
            Endpoint::Task(_) | Endpoint::Search(_) => (Kind::Task, false),
            Endpoint::Stories(_) => (Kind::Story, true),
            Endpoint::CreateStory(_) => (Kind::Story, false),
            _ => (Kind::Task, true),
        }
    }

    /// The query parameters it takes besides `opt_fields` and `opt_pretty`.
    pub fn known_params(&self) -> &'static [&'static str] {
        const PAGED_TASKS: &[&str] = &["completed_since", "limit", "offset"];
        match self {
            Endpoint::User(_) | Endpoint::UserTaskList(_) => &["workspace"],
            Endpoint::UserTaskListTasks(_)
            | Endpoint::ProjectTasks(_)
            | Endpoint::SectionTasks(_) => PAGED_TASKS,
            Endpoint::ProjectSections(_) | Endpoint::Stories(_) => &["limit", "offset"],
            Endpoint::Tasks => &[
                "limit",
                "offset",
                "assignee",
                "project",
                "section",
                "workspace",
                "completed_since",
                "modified_since",
            ],
            Endpoint::Task(_) | Endpoint::CreateStory(_) => &[],
            Endpoint::Search(_) => SEARCH_PARAMS,
        }
    }
}

/// Finds the endpoint for a method and a raw path.
pub(crate) fn resolve(method: &str, path: &str) -> Option<Endpoint> {
    let segments: Vec<String> = path
        .strip_prefix('/')?
        .split('/')
        .map(decode_segment)
        .collect();
    let parts: Vec<&str> = segments.iter().map(String::as_str).collect();
    let gid = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    match (method, parts.as_slice()) {
        ("GET", ["users", g]) => Some(Endpoint::User(gid(g)?)),
        ("GET", ["users", g, "user_task_list"]) => Some(Endpoint::UserTaskList(gid(g)?)),
        ("GET", ["user_task_lists", g, "tasks"]) => Some(Endpoint::UserTaskListTasks(gid(g)?)),
        ("GET", ["projects", g, "tasks"]) => Some(Endpoint::ProjectTasks(gid(g)?)),
        ("GET", ["projects", g, "sections"]) => Some(Endpoint::ProjectSections(gid(g)?)),
        ("GET", ["sections", g, "tasks"]) => Some(Endpoint::SectionTasks(gid(g)?)),
        ("GET", ["tasks"]) => Some(Endpoint::Tasks),
        ("GET", ["tasks", g]) => Some(Endpoint::Task(gid(g)?)),
        ("GET", ["tasks", g, "stories"]) => Some(Endpoint::Stories(gid(g)?)),
        ("POST", ["tasks", g, "stories"]) => Some(Endpoint::CreateStory(gid(g)?)),
        ("GET", ["workspaces", g, "tasks", "search"]) => Some(Endpoint::Search(gid(g)?)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_paths_and_methods() {
        let cases: &[(&str, &str, Option<Endpoint>)] = &[
            ("GET", "/users/me", Some(Endpoint::User("me".into()))),
            (
                "GET",
                "/users/me/user_task_list",
                Some(Endpoint::UserTaskList("me".into())),
            ),
            ("GET", "/tasks", Some(Endpoint::Tasks)),
            ("GET", "/tasks/12", Some(Endpoint::Task("12".into()))),
            (
                "POST",
                "/tasks/12/stories",
                Some(Endpoint::CreateStory("12".into())),
            ),
            ("PUT", "/tasks/12/stories", None),
            (
                "GET",
                "/workspaces/1/tasks/search",
                Some(Endpoint::Search("1".into())),
            ),
            ("GET", "/tasks/", None),
            ("GET", "/api/1.0/tasks", None),
            ("GET", "/events", None),
        ];
        for (method, path, expected) in cases {
            assert_eq!(&resolve(method, path), expected, "{method} {path}");
        }
    }
}
