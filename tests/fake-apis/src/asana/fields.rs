//! `opt_fields`: which field paths a request may name (the lists in
//! [`spec_fields`](crate::asana::spec_fields)), and the projection of a full
//! record onto them. Every object keeps its `gid`; a path naming an object
//! without going deeper gives that object's compact form; `html_notes` and
//! `html_text` appear only when named, because only named paths appear.

use serde_json::{Map, Value, json};

use crate::asana::spec_fields;

/// What kind of record an endpoint returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Task,
    Story,
    Section,
    User,
    UserTaskList,
}

fn allowed(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Task => spec_fields::TASK,
        Kind::Story => spec_fields::STORY,
        Kind::Section => spec_fields::SECTION,
        Kind::User => spec_fields::USER,
        Kind::UserTaskList => spec_fields::USER_TASK_LIST,
    }
}

/// Whether the endpoint's description allows a path.
pub(crate) fn valid(kind: Kind, list: bool, path: &str) -> bool {
    let list_only = ["offset", "path", "uri"];
    if allowed(kind).contains(&path) || path == "gid" || path == "resource_type" {
        return true;
    }
    if list && list_only.contains(&path) {
        return true;
    }
    ["gid", "resource_type"].iter().any(|leaf| {
        path.strip_suffix(leaf)
            .and_then(|p| p.strip_suffix('.'))
            .is_some_and(|prefix| allowed(kind).contains(&prefix))
    })
}

/// The compact form of a record, as Asana's `…Compact` schemas give it.
pub(crate) fn compact(value: &Value) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.iter().map(compact).collect()),
        Value::Object(map) => {
            let keys: &[&str] = match map.get("resource_type").and_then(Value::as_str) {
                Some("task") => &[
                    "gid",
                    "resource_type",
                    "name",
                    "resource_subtype",
                    "created_by",
                ],
                Some("story") => &[
                    "gid",
                    "resource_type",
                    "created_at",
                    "created_by",
                    "resource_subtype",
                    "text",
                ],
                Some("custom_field") => &[
                    "gid",
                    "resource_type",
                    "name",
                    "type",
                    "resource_subtype",
                    "enabled",
                    "display_value",
                ],
                Some("user_task_list") => &["gid", "resource_type", "name", "owner", "workspace"],
                Some(_) => &["gid", "resource_type", "name"],
                // A membership: {project, section}.
                None => {
                    return Value::Object(
                        map.iter().map(|(k, v)| (k.clone(), compact(v))).collect(),
                    );
                }
            };
            let mut out = Map::new();
            for key in keys {
                if let Some(v) = map.get(*key) {
                    let v = match (*key, v) {
                        // A compact record's creator is only `{gid, resource_type}`.
                        ("created_by", Value::Object(user))
                            if map.get("resource_type") == Some(&json!("task")) =>
                        {
                            json!({"gid": user.get("gid"), "resource_type": "user"})
                        }
                        ("created_by" | "owner" | "workspace", v) => compact(v),
                        (_, v) => v.clone(),
                    };
                    out.insert((*key).to_owned(), v);
                }
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// Projects a full record onto the named paths.
pub(crate) fn project(full: &Value, paths: &[String]) -> Value {
    let split: Vec<Vec<&str>> = paths.iter().map(|p| p.split('.').collect()).collect();
    project_split(full, &split)
}

fn project_split(full: &Value, paths: &[Vec<&str>]) -> Value {
    match full {
        Value::Array(items) => {
            Value::Array(items.iter().map(|i| project_split(i, paths)).collect())
        }
        Value::Object(map) => {
            let mut out = Map::new();
            if let Some(gid) = map.get("gid") {
                out.insert("gid".to_owned(), gid.clone());
            }
            let mut keys: Vec<&str> = Vec::new();
            for p in paths {
                if let Some(first) = p.first()
                    && !keys.contains(first)
                {
                    keys.push(first);
                }
            }
            for key in keys {
                let Some(value) = map.get(key) else {
                    continue;
                };
                let rest: Vec<Vec<&str>> = paths
                    .iter()
                    .filter(|p| p.first() == Some(&key) && p.len() > 1)
                    .map(|p| p[1..].to_vec())
                    .collect();
                let bare = paths.iter().any(|p| p.len() == 1 && p[0] == key);
                let nested = matches!(value, Value::Object(_) | Value::Array(_));
                let projected = match (nested, rest.is_empty()) {
                    (false, _) => value.clone(),
                    (true, true) => compact(value),
                    (true, false) if bare => merge(compact(value), project_split(value, &rest)),
                    (true, false) => project_split(value, &rest),
                };
                out.insert(key.to_owned(), projected);
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

fn merge(a: Value, b: Value) -> Value {
    match (a, b) {
        (Value::Object(mut a), Value::Object(b)) => {
            for (k, v) in b {
                let merged = match a.remove(&k) {
                    Some(old) => merge(old, v),
                    None => v,
                };
                a.insert(k, merged);
            }
            Value::Object(a)
        }
        (Value::Array(a), Value::Array(b)) => {
            Value::Array(a.into_iter().zip(b).map(|(x, y)| merge(x, y)).collect())
        }
        (_, b) => b,
    }
}

/// The paths a fully populated sample record cannot answer: fields of the
/// description the fake does not model.
pub(crate) fn unmodelled(sample: &Value, paths: &[String]) -> Vec<String> {
    paths
        .iter()
        .filter(|p| !["offset", "path", "uri"].contains(&p.as_str()))
        .filter(|p| {
            let mut value = sample;
            for segment in p.split('.') {
                if let Value::Array(items) = value {
                    match items.first() {
                        Some(first) => value = first,
                        None => return true,
                    }
                }
                if segment == "gid" || segment == "resource_type" {
                    return false;
                }
                match value.get(segment) {
                    Some(v) => value = v,
                    None => return true,
                }
            }
            false
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task() -> Value {
        json!({
            "gid": "1", "resource_type": "task", "name": "T", "resource_subtype": "default_task",
            "created_by": {"gid": "9", "resource_type": "user", "name": "Ann"},
            "notes": "n", "html_notes": "<body>n</body>",
            "assignee": {"gid": "9", "resource_type": "user", "name": "Ann"},
            "memberships": [{"project": {"gid": "3", "resource_type": "project", "name": "P"},
                             "section": {"gid": "4", "resource_type": "section", "name": "S"}}],
            "custom_fields": [{"gid": "5", "resource_type": "custom_field", "name": "Platform", "type": "text",
                               "resource_subtype": "text", "enabled": true, "display_value": "macOS"}],
        })
    }

    #[test]
    fn projection_keeps_gids_and_only_named_fields() {
        let full = task();
        assert_eq!(
            compact(&full),
            json!({"gid": "1", "resource_type": "task", "name": "T", "resource_subtype": "default_task",
                   "created_by": {"gid": "9", "resource_type": "user"}})
        );
        let cases: &[(&[&str], Value)] = &[
            (&["name"], json!({"gid": "1", "name": "T"})),
            (
                &["assignee"],
                json!({"gid": "1", "assignee": {"gid": "9", "resource_type": "user", "name": "Ann"}}),
            ),
            (
                &["assignee.name"],
                json!({"gid": "1", "assignee": {"gid": "9", "name": "Ann"}}),
            ),
            (
                &["memberships.project.name", "memberships.section.name"],
                json!({"gid": "1", "memberships": [{"project": {"gid": "3", "name": "P"}, "section": {"gid": "4", "name": "S"}}]}),
            ),
            (
                &["custom_fields.display_value", "custom_fields.name"],
                json!({"gid": "1", "custom_fields": [{"gid": "5", "display_value": "macOS", "name": "Platform"}]}),
            ),
            (&["notes"], json!({"gid": "1", "notes": "n"})),
            (
                &["html_notes"],
                json!({"gid": "1", "html_notes": "<body>n</body>"}),
            ),
        ];
        for (paths, expected) in cases {
            let paths: Vec<String> = paths.iter().map(|p| (*p).to_owned()).collect();
            assert_eq!(&project(&full, &paths), expected, "{paths:?}");
        }
    }

    #[test]
    fn paths_are_checked_against_the_description() {
        assert!(valid(Kind::Task, false, "assignee.name"));
        assert!(valid(Kind::Task, false, "custom_fields.gid"));
        assert!(valid(Kind::Task, true, "offset"));
        assert!(!valid(Kind::Task, false, "offset"));
        assert!(!valid(Kind::Task, false, "colour"));
        assert!(!valid(Kind::Task, false, "assignee.colour"));
        let paths = vec![
            "name".to_owned(),
            "due_on".to_owned(),
            "assignee.email".to_owned(),
            "custom_fields.gid".to_owned(),
        ];
        assert_eq!(
            unmodelled(&task(), &paths),
            vec!["due_on".to_owned(), "assignee.email".to_owned()]
        );
    }
}
