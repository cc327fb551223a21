//! Task lists: My Tasks, projects, sections, `GET /tasks` with
//! `modified_since`, one task, and the premium-only search.

use serde_json::{Value, json};

use super::asana::{As, world};

fn gids(answer: &super::Answer) -> Vec<String> {
    answer.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["gid"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn my_tasks_and_its_sections() {
    let w = world().await;
    let missing = w.client.get("/users/me/user_task_list").await;
    assert_eq!(
        (
            missing.status,
            missing.body["errors"][0]["message"].as_str()
        ),
        (400, Some("workspace: Missing input"))
    );
    assert_eq!(w.fake.violations().len(), 1);
    w.fake.clear_violations();

    let list = w
        .client
        .get(&format!("/users/me/user_task_list?workspace={}", w.ws))
        .await;
    assert_eq!(list.status, 200);
    let utl = list.body["data"]["gid"].as_str().unwrap().to_owned();
    assert_eq!(list.body["data"]["name"], "My Tasks");
    assert_eq!(list.body["data"]["owner"]["gid"], w.eagle);
    assert_eq!(list.body["data"]["workspace"]["gid"], w.ws);
    assert_eq!(
        w.fake.my_tasks(&w.eagle, &w.ws),
        utl,
        "one list per user and workspace"
    );
    let sections = w.fake.sections_of(&utl);
    assert_eq!(sections[0].1, "Recently assigned");
    let later = w.fake.add_section(&utl, "Later");
    w.fake.move_in_my_tasks(&w.t1, &later);

    let tasks = w
        .client
        .get(&format!(
            "/user_task_lists/{utl}/tasks?opt_fields=name,assignee_section.name"
        ))
        .await;
    assert_eq!(gids(&tasks), [w.t1.as_str()]);
    assert_eq!(
        tasks.body["data"][0]["assignee_section"],
        json!({"gid": later, "name": "Later"})
    );
    // Only the assignee sees assignee_section.
    let alex = As::new(&w.fake, &w.fake.create_pat(&w.alex));
    let seen_by_alex = alex
        .get(&format!("/tasks/{}?opt_fields=assignee_section", w.t1))
        .await;
    assert!(
        seen_by_alex.body["data"].get("assignee_section").is_none(),
        "{}",
        seen_by_alex.body
    );
    let own = alex
        .get(&format!("/tasks/{}?opt_fields=assignee_section", w.t3))
        .await;
    assert_eq!(own.body["data"]["assignee_section"], Value::Null);

    // completed_since=now keeps incomplete tasks only.
    let mut done = crate::TaskSpec::new(&w.ws, "Shipped");
    done.assignee = Some(w.eagle.clone());
    done.completed = true;
    let shipped = w.fake.add_task(done);
    let both = w.client.get(&format!("/user_task_lists/{utl}/tasks")).await;
    assert_eq!(gids(&both), [w.t1.as_str(), shipped.as_str()]);
    let open = w
        .client
        .get(&format!("/user_task_lists/{utl}/tasks?completed_since=now"))
        .await;
    assert_eq!(gids(&open), [w.t1.as_str()]);
    let recent = w
        .client
        .get(&format!(
            "/user_task_lists/{utl}/tasks?completed_since=2000-01-01T00:00:00.000Z"
        ))
        .await;
    assert_eq!(gids(&recent).len(), 2);
    let later_section = w.client.get(&format!("/sections/{later}/tasks")).await;
    assert_eq!(gids(&later_section), [w.t1.as_str()]);
    let bad = w
        .client
        .get(&format!(
            "/user_task_lists/{utl}/tasks?completed_since=last%20week"
        ))
        .await;
    assert_eq!(bad.status, 400);
    w.fake.clear_violations();
    w.fake.assert_clean();
}

#[tokio::test]
async fn projects_sections_and_one_task() {
    let w = world().await;
    let sections = w
        .client
        .get(&format!("/projects/{}/sections", w.project))
        .await;
    assert_eq!(
        sections.body["data"],
        json!([{"gid": w.inbox, "resource_type": "section", "name": "Inbox"},
               {"gid": w.doing, "resource_type": "section", "name": "Doing"}])
    );
    let inbox = w.client.get(&format!("/sections/{}/tasks", w.inbox)).await;
    assert_eq!(gids(&inbox), [w.t1.as_str()]);
    let before = w.fake.task_modified_at(&w.t1);
    w.fake.move_to_section(&w.t1, &w.project, &w.doing);
    assert_eq!(
        w.fake.task_modified_at(&w.t1),
        before,
        "a section move leaves modified_at alone"
    );
    let doing = w
        .client
        .get(&format!("/sections/{}/tasks?opt_fields=name", w.doing))
        .await;
    assert_eq!(gids(&doing), [w.t1.as_str(), w.t2.as_str()]);
    let open = w
        .client
        .get(&format!(
            "/projects/{}/tasks?completed_since=now",
            w.project
        ))
        .await;
    assert_eq!(gids(&open), [w.t1.as_str()]);

    let task = w.client.get(&format!("/tasks/{}", w.t1)).await;
    let t = &task.body["data"];
    assert_eq!(
        (
            t["name"].clone(),
            t["completed"].clone(),
            t["completed_at"].clone()
        ),
        (json!("Tab preview stuck"), json!(false), Value::Null)
    );
    assert_eq!(t["resource_type"], "task");
    assert!(
        t.get("html_notes").is_none(),
        "opt-in even on the full record"
    );
    assert_eq!(t["assignee"]["gid"], w.eagle);
    assert_eq!(t["assignee_section"], Value::Null, "Eagle is the assignee");
    assert_eq!(t["workspace"]["gid"], w.ws);
    assert_eq!(t["num_subtasks"], 1);
    assert!(
        t["created_at"].as_str().unwrap().contains('.'),
        "milliseconds, as Asana writes times"
    );
    w.fake.assert_clean();

    // A workspace Eagle is not in is forbidden.
    let other_ws = w.fake.add_workspace("Other", true);
    let hidden = w.fake.add_task(crate::TaskSpec::new(&other_ws, "secret"));
    assert_eq!(w.client.get(&format!("/tasks/{hidden}")).await.status, 403);
    w.fake.assert_clean();
}

#[tokio::test]
async fn get_tasks_filters_and_modified_since() {
    let w = world().await;
    let by_project = w.client.get(&format!("/tasks?project={}", w.project)).await;
    assert_eq!(gids(&by_project).len(), 2);
    let by_section = w.client.get(&format!("/tasks?section={}", w.doing)).await;
    assert_eq!(gids(&by_section), [w.t2.as_str()]);
    let mine = w
        .client
        .get(&format!("/tasks?assignee=me&workspace={}", w.ws))
        .await;
    assert_eq!(gids(&mine), [w.t1.as_str()]);
    let alex = w
        .client
        .get(&format!("/tasks?assignee={}&workspace={}", w.alex, w.ws))
        .await;
    assert_eq!(gids(&alex), [w.t3.as_str()]);

    let mark = w.fake.task_modified_at(&w.t2);
    w.fake.complete_task(&w.t1, true);
    let changed = w
        .client
        .get(&format!(
            "/tasks?project={}&modified_since={mark}",
            w.project
        ))
        .await;
    assert_eq!(gids(&changed), [w.t1.as_str()]);
    let t1 = w
        .client
        .get(&format!(
            "/tasks/{}?opt_fields=completed,completed_at",
            w.t1
        ))
        .await;
    assert_eq!(t1.body["data"]["completed"], true);
    assert!(t1.body["data"]["completed_at"].is_string());
    w.fake.assert_clean();

    for bad in [
        "/tasks".to_owned(),
        "/tasks?assignee=me".to_owned(),
        format!("/tasks?workspace={}", w.ws),
        format!("/tasks?project={}&section={}", w.project, w.inbox),
        format!("/tasks?project={}&modified_since=soon", w.project),
    ] {
        assert_eq!(w.client.get(&bad).await.status, 400, "{bad}");
    }
    assert_eq!(w.fake.violations().len(), 5);
    w.fake.clear_violations();
}

#[tokio::test]
async fn search_is_premium_only_and_has_no_offset() {
    let w = world().await;
    let free = w
        .client
        .get(&format!("/workspaces/{}/tasks/search?limit=10", w.free))
        .await;
    assert_eq!(free.status, 402);
    assert!(free.body["errors"][0]["message"].is_string());
    w.fake.assert_clean();

    let path = format!("/workspaces/{}/tasks/search", w.ws);
    let followed = w
        .client
        .get(&format!("{path}?followers.any={}&limit=10", w.alex))
        .await;
    assert_eq!(followed.status, 200);
    assert_eq!(gids(&followed), [w.t1.as_str()]);
    assert!(followed.body.get("next_page").is_none());
    let mine = w
        .client
        .get(&format!(
            "{path}?assignee.any=me&completed=false&limit=10&opt_fields=name"
        ))
        .await;
    assert_eq!(
        mine.body["data"],
        json!([{"gid": w.t1, "name": "Tab preview stuck"}])
    );

    let mark = w.fake.task_modified_at(&w.t3);
    w.fake.rename_task(&w.t2, "Figma mock v2");
    let fresh = w
        .client
        .get(&format!("{path}?modified_at.after={mark}&limit=10"))
        .await;
    assert_eq!(gids(&fresh), [w.t2.as_str()]);
    let oldest_first = w
        .client
        .get(&format!(
            "{path}?sort_by=created_at&sort_ascending=true&limit=2"
        ))
        .await;
    assert_eq!(gids(&oldest_first), [w.t1.as_str(), w.t2.as_str()]);
    let newest_first = w
        .client
        .get(&format!("{path}?sort_by=created_at&limit=1"))
        .await;
    assert_eq!(gids(&newest_first), [w.t3.as_str()]);
    let in_section = w
        .client
        .get(&format!("{path}?sections.any={}&limit=10", w.inbox))
        .await;
    assert_eq!(gids(&in_section), [w.t1.as_str()]);
    let text = w
        .client
        .get(&format!("{path}?text=HOVER&is_subtask=false&limit=10"))
        .await;
    assert_eq!(gids(&text), [w.t1.as_str()]);
    w.fake.assert_clean();

    let paged = w.client.get(&format!("{path}?limit=10&offset=abc")).await;
    assert_eq!(paged.status, 400);
    assert_eq!(w.client.get(&format!("{path}?limit=500")).await.status, 400);
    assert_eq!(
        w.client
            .get(&format!("{path}?limit=5&sort_by=colour"))
            .await
            .status,
        400
    );
    assert_eq!(
        w.client
            .get(&format!("{path}?followers.any={}", w.alex))
            .await
            .status,
        200
    );
    assert!(w.fake.violations().iter().any(|v| v.contains("no `limit`")));
    assert_eq!(
        w.client
            .get(&format!("{path}?limit=5&due_on.before=2030-01-01"))
            .await
            .status,
        200
    );
    assert!(
        w.fake
            .violations()
            .last()
            .unwrap()
            .contains("does not model: due_on.before")
    );
    assert_eq!(w.fake.violations().len(), 5, "{:?}", w.fake.violations());
    w.fake.clear_violations();
}
