//! Listings of every kind of place read to the last page, the fields a task
//! is made of, completions seen on re-import, and the token's user.

use chrono::Utc;
use eagle::integrations::asana::{Asana, Completion, Error, MyTasksSection, Place, Source};
use fake_apis::{CustomField, TaskSpec};

use super::{TASK_FIELDS, assert_paged, config, expect, gids, millis_now, param, sorted, world};

#[tokio::test]
async fn project_and_section_listings_read_every_page() {
    let w = world().await;
    let project = w.fake.add_project(&w.ws, "O-L Backlog (Desktop Browsers)");
    let inbox = w.fake.add_section(&project, "Inbox");
    let doing = w.fake.add_section(&project, "Doing");
    let in_inbox = w.tasks(150, "inbox", |t| {
        t.memberships = vec![(project.clone(), Some(inbox.clone()))];
    });
    let in_doing = w.tasks(20, "doing", |t| {
        t.memberships = vec![(project.clone(), Some(doing.clone()))];
    });
    let done = w.tasks(5, "done", |t| {
        t.memberships = vec![(project.clone(), Some(inbox.clone()))];
        t.completed = true;
    });

    let source = Source {
        name: "O-L Backlog (Desktop Browsers)".to_owned(),
        place: Place::Project {
            gid: project.clone(),
        },
    };
    let open = expect(w.asana.list(&source, Completion::Open).await);
    let all_open: Vec<String> = in_inbox.iter().chain(&in_doing).cloned().collect();
    assert_eq!(gids(&open), sorted(all_open.clone()));
    assert!(open.iter().all(|t| t.source == source.name && !t.completed));
    let path = format!("/projects/{project}/tasks");
    let requests = w.requests_to("GET", &path);
    assert_paged(&requests, 2);
    assert!(
        requests
            .iter()
            .all(|r| param(r, "completed_since") == Some("now"))
    );

    let everything = expect(w.asana.project_tasks(&project, "p", Completion::All).await);
    assert_eq!(everything.len(), 175);
    assert_eq!(everything.iter().filter(|t| t.completed).count(), 5);
    assert!(
        w.requests_to("GET", &path)[2..]
            .iter()
            .all(|r| param(r, "completed_since").is_none())
    );

    let section = Source {
        name: "inbox".to_owned(),
        place: Place::Section { gid: inbox.clone() },
    };
    let listed = expect(w.asana.list(&section, Completion::Open).await);
    assert_eq!(gids(&listed), sorted(in_inbox.clone()));
    assert_paged(
        &w.requests_to("GET", &format!("/sections/{inbox}/tasks")),
        2,
    );
    assert!(listed.iter().all(|t| t.section_names() == ["Inbox"]));
    let with_done = expect(
        w.asana
            .section_tasks(&inbox, "inbox", Completion::All)
            .await,
    );
    assert_eq!(
        gids(&with_done),
        sorted(in_inbox.iter().chain(&done).cloned().collect())
    );
    w.fake.assert_clean();
}

#[tokio::test]
async fn my_tasks_sections_are_read_in_one_listing() {
    let w = world().await;
    let my_tasks = w.fake.my_tasks(&w.eagle, &w.ws);
    let inbox = w.fake.add_section(&my_tasks, "Inbox");
    let backlog = w.fake.add_section(&my_tasks, "Backlog");
    let later = w.fake.add_section(&my_tasks, "Later");
    let mine = |section: &str| {
        let eagle = w.eagle.clone();
        let section = section.to_owned();
        move |t: &mut TaskSpec| {
            t.assignee = Some(eagle.clone());
            t.assignee_section = Some(section.clone());
        }
    };
    let in_inbox = w.tasks(130, "inbox", mine(&inbox));
    let in_backlog = w.tasks(25, "backlog", mine(&backlog));
    w.tasks(10, "later", mine(&later));
    // Alex's task in a section of the same name is not in Eagle's My Tasks.
    let alex_list = w.fake.my_tasks(&w.alex, &w.ws);
    let alex_inbox = w.fake.add_section(&alex_list, "Inbox");
    w.tasks(3, "alex", |t| {
        t.assignee = Some(w.alex.clone());
        t.assignee_section = Some(alex_inbox.clone());
    });

    let sections = [
        MyTasksSection {
            section: "inbox".to_owned(),
            source: "my_tasks_inbox".to_owned(),
        },
        MyTasksSection {
            section: "BACKLOG".to_owned(),
            source: "my_tasks_backlog".to_owned(),
        },
    ];
    let tasks = expect(w.asana.my_tasks(&w.ws, &sections, Completion::Open).await);
    assert_eq!(
        gids(&tasks),
        sorted(in_inbox.iter().chain(&in_backlog).cloned().collect())
    );
    for t in &tasks {
        let expected = if in_inbox.contains(&t.gid) {
            ("Inbox", "my_tasks_inbox")
        } else {
            ("Backlog", "my_tasks_backlog")
        };
        assert_eq!(
            (t.my_tasks_section.as_deref(), t.source.as_str()),
            (Some(expected.0), expected.1)
        );
        assert_eq!(
            t.assignee.as_ref().map(|a| a.gid.as_str()),
            Some(w.eagle.as_str())
        );
    }
    let lookups = w.requests_to("GET", "/users/me/user_task_list");
    assert_eq!(lookups.len(), 1);
    assert_eq!(param(&lookups[0], "workspace"), Some(w.ws.as_str()));
    assert_paged(
        &w.requests_to("GET", &format!("/user_task_lists/{my_tasks}/tasks")),
        2,
    );

    // One section through the uniform listing.
    let source = Source {
        name: "my_tasks_backlog".to_owned(),
        place: Place::MyTasks {
            workspace: w.ws.clone(),
            section: "Backlog".to_owned(),
        },
    };
    let backlog_only = expect(w.asana.list(&source, Completion::Open).await);
    assert_eq!(gids(&backlog_only), sorted(in_backlog));
    w.fake.assert_clean();
}

#[tokio::test]
async fn task_fields_links_and_platform_are_mapped() {
    let w = world().await;
    let project = w.fake.add_project(&w.ws, "Browsers");
    let inbox = w.fake.add_section(&project, "Inbox");
    let mut spec = TaskSpec::new(&w.ws, "Tab preview stuck");
    spec.notes =
        "Design: https://www.figma.com/file/abc. PR (https://github.com/acme/app/pull/7), \
                  again https://www.figma.com/file/abc"
            .to_owned();
    spec.assignee = Some(w.alex.clone());
    spec.memberships = vec![(project.clone(), Some(inbox.clone()))];
    spec.tags = vec!["bug".to_owned(), "macOS".to_owned()];
    spec.custom_fields = vec![
        CustomField::new("Team", "Desktop"),
        CustomField::new("Platform", "Windows"),
    ];
    spec.followers = vec![w.eagle.clone()];
    let by_field = w.fake.add_task(spec);
    let mut spec = TaskSpec::new(&w.ws, "Dock icon");
    spec.memberships = vec![(project.clone(), None)];
    spec.tags = vec!["MACOS".to_owned()];
    spec.parent = Some(by_field.clone());
    let by_tag = w.fake.add_task(spec);
    let mut spec = TaskSpec::new(&w.ws, "No platform");
    spec.memberships = vec![(project.clone(), None)];
    spec.custom_fields = vec![CustomField {
        name: "Platform".to_owned(),
        display_value: None,
    }];
    let neither = w.fake.add_task(spec);

    let tasks = expect(
        w.asana
            .project_tasks(&project, "browsers", Completion::Open)
            .await,
    );
    let find = |gid: &str| {
        tasks
            .iter()
            .find(|t| t.gid == gid)
            .unwrap_or_else(|| panic!("{gid} not listed"))
    };
    let t = find(&by_field);
    assert_eq!(t.name, "Tab preview stuck");
    assert!(
        t.notes
            .starts_with("Design: https://www.figma.com/file/abc.")
    );
    assert_eq!(
        t.assignee
            .as_ref()
            .map(|a| (a.gid.as_str(), a.name.as_str())),
        Some((w.alex.as_str(), "Alex"))
    );
    assert_eq!(t.tags, ["bug", "macOS"]);
    assert_eq!(
        t.links,
        [
            "https://www.figma.com/file/abc",
            "https://github.com/acme/app/pull/7"
        ]
    );
    assert_eq!(
        t.platform.as_deref(),
        Some("windows"),
        "the field wins over the tag"
    );
    assert_eq!(t.memberships.len(), 1);
    assert_eq!(
        (
            t.memberships[0].project.name.as_str(),
            t.memberships[0].section.as_ref().map(|s| s.name.as_str())
        ),
        ("Browsers", Some("Inbox"))
    );
    assert!(t.followed_by(&w.eagle) && !t.followed_by(&w.alex));
    assert_eq!(
        t.permalink_url.as_deref(),
        Some(format!("https://app.asana.com/0/{project}/{by_field}").as_str())
    );
    assert!(t.created_at.is_some() && t.modified_at.is_some());
    assert_eq!(t.completed_at, None);
    assert_eq!(
        (t.source.as_str(), t.inbox_key()),
        ("browsers", format!("asana:{by_field}"))
    );
    // Alex is the assignee, so Eagle is not told Alex's My Tasks section.
    assert_eq!(t.my_tasks_section, None);

    let t = find(&by_tag);
    assert_eq!(t.platform.as_deref(), Some("macos"));
    assert_eq!(t.parent.as_deref(), Some(by_field.as_str()));
    assert_eq!((t.assignee.clone(), t.links.clone()), (None, vec![]));
    assert_eq!(find(&neither).platform, None);

    // One task read again gives the same record.
    let again = expect(w.asana.task(&by_field, "browsers").await);
    assert_eq!(&again, find(&by_field));
    let one = w.requests_to("GET", &format!("/tasks/{by_field}"));
    assert_eq!(param(&one[0], "opt_fields"), Some(TASK_FIELDS));
    w.fake.assert_clean();
}

#[tokio::test]
async fn a_task_completed_in_asana_is_seen_completed_on_recheck() {
    let w = world().await;
    let project = w.fake.add_project(&w.ws, "Browsers");
    let ids = w.tasks(3, "task", |t| t.memberships = vec![(project.clone(), None)]);
    let first = expect(w.asana.project_tasks(&project, "b", Completion::Open).await);
    assert_eq!(first.len(), 3);
    // Asana's times have milliseconds.
    let imported_at = millis_now();

    w.fake.complete_task(&ids[1], true);
    // An open-only listing drops it: on its own that says nothing.
    let open = expect(w.asana.project_tasks(&project, "b", Completion::Open).await);
    assert_eq!(gids(&open), sorted(vec![ids[0].clone(), ids[2].clone()]));
    // Listing since the last import returns it, completed.
    let since = expect(
        w.asana
            .project_tasks(&project, "b", Completion::Since(imported_at))
            .await,
    );
    let done = since
        .iter()
        .find(|t| t.gid == ids[1])
        .unwrap_or_else(|| panic!("the completed task is not listed"));
    assert!(done.completed && done.completed_at.is_some_and(|at| at >= imported_at));
    assert_eq!(since.len(), 3);
    // Reading the task itself says the same.
    let one = expect(w.asana.task(&ids[1], "b").await);
    assert!(one.completed);
    // A task that is gone is a typed NotFound.
    let gone = w.asana.task("987654321", "b").await;
    assert!(matches!(gone, Err(Error::NotFound { .. })), "{gone:?}");
    let recheck = w.requests_to("GET", &format!("/projects/{project}/tasks"));
    assert_eq!(
        param(&recheck[2], "completed_since"),
        Some(
            imported_at
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
                .as_str()
        )
    );
    w.fake.assert_clean();
}

#[tokio::test]
async fn followed_tasks_need_a_premium_workspace() {
    let w = world().await;
    let followed = w.tasks(150, "followed", |t| t.followers = vec![w.eagle.clone()]);
    w.tasks(5, "not followed", |t| t.followers = vec![w.alex.clone()]);
    let closed = w.tasks(2, "closed", |t| {
        t.followers = vec![w.eagle.clone()];
        t.completed = true;
    });
    let source = Source {
        name: "watched".to_owned(),
        place: Place::Followed {
            workspace: w.ws.clone(),
        },
    };
    let open = expect(w.asana.list(&source, Completion::Open).await);
    assert_eq!(gids(&open), sorted(followed.clone()));
    assert!(
        open.iter()
            .all(|t| t.source == "watched" && t.followed_by(&w.eagle))
    );
    let search = format!("/workspaces/{}/tasks/search", w.ws);
    let requests = w.requests_to("GET", &search);
    assert_eq!(
        requests.len(),
        2,
        "search pages by created_at: {requests:#?}"
    );
    for r in &requests {
        assert_eq!(param(r, "followers.any"), Some("me"));
        assert_eq!(param(r, "completed"), Some("false"));
        assert_eq!(param(r, "limit"), Some("100"));
        assert_eq!(param(r, "opt_fields"), Some(TASK_FIELDS));
    }
    assert!(param(&requests[1], "created_at.after").is_some());

    // Since an earlier import: the open ones and the ones completed since.
    // The fake's clock runs ahead of the wall clock when many tasks are made
    // in a millisecond: "now" is just after the newest task.
    let newest = w.fake.task_modified_at(&closed[1]);
    let before = chrono::DateTime::parse_from_rfc3339(&newest)
        .unwrap_or_else(|e| panic!("{newest}: {e}"))
        .with_timezone(&Utc)
        + chrono::Duration::milliseconds(1);
    w.fake.complete_task(&followed[0], true);
    let since = expect(w.asana.list(&source, Completion::Since(before)).await);
    assert_eq!(since.len(), 150);
    assert!(since.iter().any(|t| t.gid == followed[0] && t.completed));
    assert!(!since.iter().any(|t| closed.contains(&t.gid)));
    let all = expect(
        w.asana
            .followed_tasks(&w.ws, "watched", Completion::All)
            .await,
    );
    assert_eq!(all.len(), 152);

    // A free workspace answers 402: a clear, typed error.
    let free = w.fake.add_workspace("Side project", false);
    let (eagle, token) = {
        let user = w.fake.add_user("Eagle", "eagle2@example.com", &[&free]);
        (user.clone(), w.fake.create_pat(&user))
    };
    w.tasks(1, "x", |t| {
        t.workspace = free.clone();
        t.followers = vec![eagle.clone()];
    });
    let on_free = expect(Asana::new(config(&w.fake.url(), &token)));
    let refused = on_free
        .followed_tasks(&free, "watched", Completion::Open)
        .await;
    match refused {
        Err(e @ Error::PaymentRequired { .. }) => {
            assert!(
                e.to_string().contains("needs a premium asana workspace"),
                "{e}"
            );
        }
        other => panic!("expected PaymentRequired, got {other:?}"),
    }
    w.fake.assert_clean();
}

#[tokio::test]
async fn me_is_the_tokens_user_asked_once() {
    let w = world().await;
    let me = expect(w.asana.me().await);
    assert_eq!(
        (me.gid.as_str(), me.name.as_str()),
        (w.eagle.as_str(), "Eagle")
    );
    assert_eq!(expect(w.asana.me().await), me);
    assert_eq!(w.requests_to("GET", "/users/me").len(), 1);
    w.fake.assert_clean();
}
