//! Asana's JSON as the client reads it: the `{"data": …}` envelope, list
//! pages with `next_page`, the error body, and the records for exactly the
//! `opt_fields` the client asks for. Only this module and `client` know the
//! wire shapes; the rest of Eagle sees [`super::AsanaTask`] and friends.
//!
//! Fields are lenient about `null` (Asana writes `null` for an unset
//! assignee, parent, section or date) and strict about types.

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde::de::{Deserializer, IntoDeserializer};

/// `opt_fields` of every task read: exactly what [`super::AsanaTask`] is made
/// of. `gid` always comes back. `assignee_section` is answered only to the
/// assignee (the token's user), which is what My Tasks needs.
pub(crate) const TASK_FIELDS: &str = "name,notes,completed,completed_at,assignee.name,\
assignee_section.name,memberships.project.name,memberships.section.name,tags.name,\
custom_fields.name,custom_fields.display_value,permalink_url,created_at,modified_at,followers,parent";

/// `opt_fields` of a story read: enough to know a comment Eagle posted by
/// its author, its text and when it was made.
pub(crate) const STORY_FIELDS: &str = "resource_subtype,created_by,created_at,text";

/// A single record: `{"data": {…}}`.
#[derive(Debug, Deserialize)]
pub(crate) struct Envelope<T> {
    pub data: T,
}

/// One page of a list: `{"data": […], "next_page": {"offset": …} | null}`.
#[derive(Debug, Deserialize)]
pub(crate) struct Page<T> {
    pub data: Vec<T>,
    #[serde(default)]
    pub next_page: Option<NextPage>,
}

/// Where the next page starts; only the opaque `offset` token is used.
#[derive(Debug, Deserialize)]
pub(crate) struct NextPage {
    pub offset: String,
}

/// Asana's error body, `{"errors":[{"message": …}]}`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ErrorBody {
    #[serde(default)]
    pub errors: Vec<ErrorItem>,
}

/// One entry of an error body.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ErrorItem {
    #[serde(default)]
    pub message: Option<String>,
}

/// A reference to an object: its gid and, when asked for, its name.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Ref {
    pub gid: String,
    #[serde(default, deserialize_with = "null_default")]
    pub name: String,
}

/// A task's membership of a project, and its section there.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct RawMembership {
    #[serde(default)]
    pub project: Option<Ref>,
    #[serde(default)]
    pub section: Option<Ref>,
}

/// A custom field as `custom_fields.name,custom_fields.display_value` give it.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct RawCustomField {
    #[serde(default, deserialize_with = "null_default")]
    pub name: String,
    #[serde(default)]
    pub display_value: Option<String>,
}

/// A task with [`TASK_FIELDS`].
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct RawTask {
    pub gid: String,
    #[serde(default, deserialize_with = "null_default")]
    pub name: String,
    #[serde(default, deserialize_with = "null_default")]
    pub notes: String,
    #[serde(default, deserialize_with = "null_default")]
    pub completed: bool,
    #[serde(default)]
    pub completed_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub assignee: Option<Ref>,
    #[serde(default)]
    pub assignee_section: Option<Ref>,
    #[serde(default, deserialize_with = "null_default")]
    pub memberships: Vec<RawMembership>,
    #[serde(default, deserialize_with = "null_default")]
    pub tags: Vec<Ref>,
    #[serde(default, deserialize_with = "null_default")]
    pub custom_fields: Vec<RawCustomField>,
    #[serde(default)]
    pub permalink_url: Option<String>,
    #[serde(default)]
    pub created_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub modified_at: Option<DateTime<Utc>>,
    #[serde(default, deserialize_with = "null_default")]
    pub followers: Vec<Ref>,
    #[serde(default)]
    pub parent: Option<Ref>,
}

/// A story with [`STORY_FIELDS`].
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct RawStory {
    pub gid: String,
    #[serde(default, deserialize_with = "null_default")]
    pub resource_subtype: String,
    #[serde(default)]
    pub created_by: Option<Ref>,
    #[serde(default, deserialize_with = "null_default")]
    pub text: String,
    #[serde(default)]
    pub created_at: Option<DateTime<Utc>>,
}

/// A user task list (My Tasks): only its gid is used.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct RawUserTaskList {
    pub gid: String,
}

/// Reads `null` as the type's default (an empty name, an empty list).
fn null_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    let value: Option<serde_json::Value> = Option::deserialize(deserializer)?;
    match value {
        None => Ok(T::default()),
        Some(v) => T::deserialize(v.into_deserializer()).map_err(serde::de::Error::custom),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerates_nulls_and_missing_fields() {
        let task: RawTask = serde_json::from_str(
            r#"{"gid":"1","name":null,"notes":null,"completed":null,"completed_at":null,
                "assignee":null,"memberships":null,"tags":[{"gid":"2","name":null}],
                "custom_fields":[{"gid":"3","name":"Platform","display_value":null}],
                "parent":null,"followers":null}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(task.name, "");
        assert!(!task.completed);
        assert!(task.assignee.is_none() && task.memberships.is_empty());
        assert_eq!(task.tags[0].name, "");
        assert_eq!(task.custom_fields[0].display_value, None);
        let bad = serde_json::from_str::<RawTask>(r#"{"gid":"1","completed":"yes"}"#);
        assert!(bad.is_err());
        let bad_date = serde_json::from_str::<RawTask>(r#"{"gid":"1","modified_at":"later"}"#);
        assert!(bad_date.is_err());
    }
}
