//! The uniform task the importer stores, whatever place it came from, and
//! how it is made from Asana's record: links read from the notes, the
//! platform from the configured field or tags, and the configured name of
//! the place as its `source`.

use chrono::{DateTime, Utc};

use super::links::extract_links;
use super::platform::{CustomFieldValue, PlatformRule};
use super::types::{RawTask, Ref};

/// A person in Asana.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// The user's gid (a string, never parsed).
    pub gid: String,
    /// The display name.
    pub name: String,
}

/// A named Asana object (project, section).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    /// Its gid.
    pub gid: String,
    /// Its name.
    pub name: String,
}

/// A project a task is in, and the section it is filed under there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    /// The project.
    pub project: Named,
    /// The section within the project, if any.
    pub section: Option<Named>,
}

/// A task as Eagle imports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AsanaTask {
    /// Asana's gid; Eagle stores the task as [`AsanaTask::inbox_key`].
    pub gid: String,
    /// The title.
    pub name: String,
    /// The plain-text description.
    pub notes: String,
    /// Whether it is done in Asana (a completed task leaves the inbox).
    pub completed: bool,
    /// When it was completed.
    pub completed_at: Option<DateTime<Utc>>,
    /// Who it is assigned to.
    pub assignee: Option<User>,
    /// Its tags' names.
    pub tags: Vec<String>,
    /// The http(s) links in the notes ([`extract_links`]).
    pub links: Vec<String>,
    /// The platform, lower-cased ([`PlatformRule::platform`]).
    pub platform: Option<String>,
    /// Its custom field values (the platform rule reads one of them).
    pub custom_fields: Vec<CustomFieldValue>,
    /// The projects it is in and its section in each.
    pub memberships: Vec<Membership>,
    /// Its section in the assignee's My Tasks. Asana tells only the
    /// assignee, so this is `None` unless the token's user is assigned.
    pub my_tasks_section: Option<String>,
    /// The gids of its followers.
    pub followers: Vec<String>,
    /// The parent's gid when it is a subtask.
    pub parent: Option<String>,
    /// Asana's link to it, for people (never parsed for ids).
    pub permalink_url: Option<String>,
    /// When it was created.
    pub created_at: Option<DateTime<Utc>>,
    /// When it last changed. Asana does not move this when the task only
    /// changes section or project, and does move it for every comment,
    /// Eagle's own included.
    pub modified_at: Option<DateTime<Utc>>,
    /// The configured name of the place it was listed from (e.g.
    /// `O-L Backlog (Desktop Browsers)`, `my_tasks_inbox`, `watched`).
    pub source: String,
}

impl AsanaTask {
    /// The key Eagle's inbox stores it under: `asana:<gid>`.
    pub fn inbox_key(&self) -> String {
        format!("asana:{}", self.gid)
    }

    /// The names of the sections it is in: project sections, then its My
    /// Tasks section.
    pub fn section_names(&self) -> Vec<&str> {
        self.memberships
            .iter()
            .filter_map(|m| m.section.as_ref().map(|s| s.name.as_str()))
            .chain(self.my_tasks_section.as_deref())
            .collect()
    }

    /// Whether this user follows it.
    pub fn followed_by(&self, user_gid: &str) -> bool {
        self.followers.iter().any(|f| f == user_gid)
    }

    /// Builds it from Asana's record.
    pub(crate) fn from_raw(raw: RawTask, rule: &PlatformRule, source: &str) -> AsanaTask {
        let named = |r: Ref| Named {
            gid: r.gid,
            name: r.name,
        };
        let tags: Vec<String> = raw.tags.into_iter().map(|t| t.name).collect();
        let custom_fields: Vec<CustomFieldValue> = raw
            .custom_fields
            .into_iter()
            .map(|f| CustomFieldValue {
                name: f.name,
                display_value: f.display_value,
            })
            .collect();
        let platform = rule.platform(&custom_fields, &tags);
        AsanaTask {
            links: extract_links(&raw.notes),
            gid: raw.gid,
            name: raw.name,
            notes: raw.notes,
            completed: raw.completed,
            completed_at: raw.completed_at,
            assignee: raw.assignee.map(|a| User {
                gid: a.gid,
                name: a.name,
            }),
            tags,
            platform,
            custom_fields,
            memberships: raw
                .memberships
                .into_iter()
                .filter_map(|m| {
                    Some(Membership {
                        project: named(m.project?),
                        section: m.section.map(named),
                    })
                })
                .collect(),
            my_tasks_section: raw.assignee_section.map(|s| s.name),
            followers: raw.followers.into_iter().map(|f| f.gid).collect(),
            parent: raw.parent.map(|p| p.gid),
            permalink_url: raw.permalink_url,
            created_at: raw.created_at,
            modified_at: raw.modified_at,
            source: source.to_owned(),
        }
    }
}
