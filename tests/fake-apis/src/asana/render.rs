//! Full records of each kind, as `opt_fields` can see them; the endpoints
//! project or compact them. Opt-in fields (`html_notes`, `html_text`) are in
//! the full record and come out only when named.

use serde_json::{Value, json};

use crate::asana::state::{Section, State, Story, Task, UserTaskList};
use crate::common::clock::iso_millis;

fn user(state: &State, gid: &str) -> Value {
    let name = state.users.get(gid).map_or("", |u| u.name.as_str());
    json!({"gid": gid, "resource_type": "user", "name": name})
}

fn named(gid: &str, kind: &str, name: &str) -> Value {
    json!({"gid": gid, "resource_type": kind, "name": name})
}

fn workspace(state: &State, gid: &str) -> Value {
    let name = state.workspaces.get(gid).map_or("", |w| w.name.as_str());
    named(gid, "workspace", name)
}

fn opt_user(state: &State, gid: Option<&String>) -> Value {
    gid.map_or(Value::Null, |g| user(state, g))
}

/// A task's full record as `caller` sees it: `assignee_section` only for the
/// assignee, as the description says.
pub(crate) fn task(state: &State, t: &Task, caller: &str) -> Value {
    let memberships: Vec<Value> = t
        .memberships
        .iter()
        .map(|(project, section)| {
            let mut m =
                json!({"project": named(project, "project", &state.container_name(project))});
            if let Some(section) = section {
                m["section"] = named(section, "section", &state.container_name(section));
            }
            m
        })
        .collect();
    let projects: Vec<Value> = t
        .memberships
        .iter()
        .map(|(project, _)| named(project, "project", &state.container_name(project)))
        .collect();
    let parent = t.parent.as_ref().and_then(|p| state.tasks.get(p)).map_or(Value::Null, |p| {
        json!({"gid": p.gid, "resource_type": "task", "name": p.name, "resource_subtype": p.resource_subtype,
               "created_by": opt_user(state, p.created_by.as_ref())})
    });
    let first_project = t.memberships.first().map_or("0", |(p, _)| p.as_str());
    let mut value = json!({
        "gid": t.gid,
        "resource_type": "task",
        "name": t.name,
        "resource_subtype": t.resource_subtype,
        "created_by": opt_user(state, t.created_by.as_ref()),
        "assignee": opt_user(state, t.assignee.as_ref()),
        "completed": t.completed,
        "completed_at": t.completed_at.map(iso_millis),
        "created_at": iso_millis(t.created_at),
        "modified_at": iso_millis(t.modified_at),
        "custom_fields": t.custom_fields.iter().map(|(gid, name, display)| json!({
            "gid": gid, "resource_type": "custom_field", "name": name, "type": "text",
            "resource_subtype": "text", "enabled": true, "text_value": display, "display_value": display,
        })).collect::<Vec<_>>(),
        "followers": t.followers.iter().map(|f| user(state, f)).collect::<Vec<_>>(),
        "html_notes": t.html_notes,
        "memberships": memberships,
        "notes": t.notes,
        "num_subtasks": state.tasks.values().filter(|c| c.parent.as_deref() == Some(t.gid.as_str())).count(),
        "parent": parent,
        "permalink_url": format!("https://app.asana.com/0/{first_project}/{}", t.gid),
        "projects": projects,
        "tags": t.tags.iter().map(|(gid, name)| named(gid, "tag", name)).collect::<Vec<_>>(),
        "workspace": workspace(state, &t.workspace),
    });
    if t.assignee.as_deref() == Some(caller) {
        value["assignee_section"] = t.assignee_section.as_ref().map_or(Value::Null, |s| {
            named(s, "section", &state.container_name(s))
        });
    }
    value
}

/// A story's full record.
pub(crate) fn story(state: &State, s: &Story) -> Value {
    let target = state.tasks.get(&s.task).map_or(Value::Null, |t| {
        json!({"gid": t.gid, "resource_type": "task", "name": t.name, "resource_subtype": t.resource_subtype,
               "created_by": opt_user(state, t.created_by.as_ref())})
    });
    json!({
        "gid": s.gid,
        "resource_type": "story",
        "created_at": iso_millis(s.created_at),
        "created_by": opt_user(state, s.created_by.as_ref()),
        "resource_subtype": s.resource_subtype,
        "text": s.text,
        "html_text": s.html_text,
        "type": s.kind,
        "is_pinned": false,
        "is_edited": false,
        "target": target,
    })
}

/// A section's full record.
pub(crate) fn section(state: &State, s: &Section) -> Value {
    let project = named(&s.container, "project", &state.container_name(&s.container));
    json!({
        "gid": s.gid,
        "resource_type": "section",
        "name": s.name,
        "created_at": iso_millis(s.created_at),
        "project": project,
        "projects": [project],
    })
}

/// A user's full record.
pub(crate) fn user_full(state: &State, gid: &str) -> Value {
    let u = state.users.get(gid);
    let workspaces: Vec<Value> = u
        .map(|u| u.workspaces.iter().map(|w| workspace(state, w)).collect())
        .unwrap_or_default();
    json!({
        "gid": gid,
        "resource_type": "user",
        "name": u.map_or("", |u| u.name.as_str()),
        "email": u.map_or("", |u| u.email.as_str()),
        "photo": null,
        "workspaces": workspaces,
    })
}

/// A user task list's full record.
pub(crate) fn user_task_list(l: &UserTaskList) -> Value {
    json!({
        "gid": l.gid,
        "resource_type": "user_task_list",
        "name": "My Tasks",
        "owner": {"gid": l.owner, "resource_type": "user"},
        "workspace": {"gid": l.workspace, "resource_type": "workspace"},
    })
}

/// A fully populated record of a kind, to tell which `opt_fields` paths the
/// fake can answer.
pub(crate) fn sample(kind: crate::asana::fields::Kind) -> Value {
    use crate::asana::fields::Kind;
    use crate::asana::state::User;
    let mut state = State::new();
    let me = "1".to_owned();
    state.users.insert(
        me.clone(),
        User {
            name: "Ann".into(),
            email: "ann@example.com".into(),
            workspaces: vec!["2".into()],
        },
    );
    let section = Section {
        gid: "4".into(),
        name: "S".into(),
        container: "3".into(),
        created_at: 0,
    };
    let mut t = Task {
        gid: "5".into(),
        workspace: "2".into(),
        name: "T".into(),
        notes: String::new(),
        html_notes: String::new(),
        completed: true,
        completed_at: Some(0),
        assignee: Some(me.clone()),
        assignee_section: Some("4".into()),
        memberships: vec![("3".into(), Some("4".into()))],
        tags: vec![("6".into(), "tag".into())],
        custom_fields: vec![("7".into(), "field".into(), Some("v".into()))],
        followers: vec![me.clone()],
        parent: Some("8".into()),
        created_by: Some(me.clone()),
        resource_subtype: "default_task".into(),
        created_at: 0,
        modified_at: 0,
    };
    let mut parent = t.clone();
    parent.gid = "8".into();
    parent.parent = None;
    state.tasks.insert("8".into(), parent);
    t.gid = "5".into();
    state.tasks.insert("5".into(), t.clone());
    match kind {
        Kind::Task => task(&state, &t, &me),
        Kind::Story => story(
            &state,
            &Story {
                gid: "9".into(),
                task: "5".into(),
                created_by: Some(me),
                created_at: 0,
                text: String::new(),
                html_text: String::new(),
                resource_subtype: "comment_added".into(),
                kind: "comment".into(),
            },
        ),
        Kind::Section => self::section(&state, &section),
        Kind::User => user_full(&state, &me),
        Kind::UserTaskList => user_task_list(&UserTaskList {
            gid: "10".into(),
            owner: me,
            workspace: "2".into(),
            sections: Vec::new(),
        }),
    }
}
