//! The owner's own tasks, through the binary: the My Tasks tasks assigned to
//! the token's user are kept by the shipped default filter with no profile
//! edit (the owner is the token's user, by gid); an import with nothing
//! changed writes nothing, whichever process imports; and an approved
//! comment is posted as approved, with no marker, once even across a crash
//! between posting it and recording it.

use std::io::Write;
use std::process::Stdio;

use eagle::store::{Store, TaskStatus};
use fake_apis::{AsanaFault, AsanaRoute, CustomField, FakeAsana, TaskSpec};

use crate::executor::{fake_worker_command, home_store};
use crate::support::{Home, text};

/// The owner's workspace: the token is Alex Owner's, whose My Tasks has an
/// Inbox and a Backlog; Bob is someone else.
struct Owner {
    fake: FakeAsana,
    ws: String,
    alex: String,
    bob: String,
    token: String,
    project: String,
    inbox: String,
    backlog: String,
}

async fn owner() -> Owner {
    let fake = FakeAsana::start().await;
    let ws = fake.add_workspace("Acme", false);
    let alex = fake.add_user("Alex Owner", "alex@example.com", &[&ws]);
    let bob = fake.add_user("Bob", "bob@example.com", &[&ws]);
    let token = fake.create_pat(&alex);
    let project = fake.add_project(&ws, "O-L Backlog (Desktop Browsers)");
    let list = fake.my_tasks(&alex, &ws);
    let inbox = fake.add_section(&list, "Inbox");
    let backlog = fake.add_section(&list, "Backlog");
    Owner {
        fake,
        ws,
        alex,
        bob,
        token,
        project,
        inbox,
        backlog,
    }
}

impl Owner {
    /// A macOS task, changed by `f`.
    fn task(&self, name: &str, f: impl FnOnce(&mut TaskSpec)) -> String {
        let mut spec = TaskSpec::new(&self.ws, name);
        spec.custom_fields = vec![CustomField::new("Platform", "macOS")];
        f(&mut spec);
        self.fake.add_task(spec)
    }

    /// A task assigned to the token's user in a My Tasks section.
    fn mine(&self, name: &str, section: &str) -> String {
        self.task(name, |t| {
            t.assignee = Some(self.alex.clone());
            t.assignee_section = Some(section.to_owned());
        })
    }

    /// A home whose profile is the shipped one plus only `[asana]`: no
    /// owner, no filter configuration.
    fn home(&self) -> Home {
        let mut home = Home::new();
        home.set("ASANA_TOKEN", &self.token);
        let toml = format!(
            "\n[asana]\napi_url = \"{}\"\nworkspace = \"{}\"\nplatform_field = \"Platform\"\n\
             [[asana.projects]]\ngid = \"{}\"\nsource = \"O-L Backlog (Desktop Browsers)\"\n\
             [[asana.my_tasks]]\nsection = \"Inbox\"\nsource = \"my_tasks_inbox\"\n\
             [[asana.my_tasks]]\nsection = \"Backlog\"\nsource = \"my_tasks_backlog\"\n",
            self.fake.url(),
            self.ws,
            self.project,
        );
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(home.profiles().join("eagle.toml"))
            .unwrap();
        file.write_all(toml.as_bytes()).unwrap();
        home
    }
}

/// `eagle <args>`, which must succeed; its standard output.
fn run(home: &Home, args: &[&str], stdin: &str) -> String {
    let out = home.run(args, stdin);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "eagle {args:?}: {stdout}{stderr}");
    stdout
}

async fn status_of(store: &Store, gid: &str) -> (TaskStatus, Option<String>) {
    let mut tx = store.begin_read().await.unwrap();
    let task = tx
        .tasks()
        .task_by_gid(&format!("asana:{gid}"))
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("asana:{gid} was not imported"));
    (task.status, task.status_reason)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owners_my_tasks_are_kept_with_no_profile_edit() {
    let o = owner().await;
    let inbox = o.mine("In my inbox", &o.inbox);
    let backlog = o.mine("In my backlog", &o.backlog);
    let bobs = o.task("Bob's task", |t| {
        t.assignee = Some(o.bob.clone());
        t.memberships = vec![(o.project.clone(), None)];
    });
    let home = o.home();
    let stdout = run(&home, &["import"], "");
    assert!(stdout.contains("3 new, 0 updated, 0 unchanged"), "{stdout}");
    let stdout = run(&home, &["analyze"], "");
    assert!(stdout.contains("Analysed 3 tasks:"), "{stdout}");

    let store = home_store(&home).await;
    for gid in [&inbox, &backlog] {
        let (status, reason) = status_of(&store, gid).await;
        assert_eq!(status, TaskStatus::ForReview, "{gid}: {reason:?}");
        assert!(
            reason
                .as_deref()
                .is_some_and(|r| r.starts_with("kept by the filters")),
            "{gid}: {reason:?}"
        );
    }
    // Someone else's task is still someone else's, named as Asana names them.
    let (status, reason) = status_of(&store, &bobs).await;
    assert_eq!(status, TaskStatus::Skip);
    let reason = reason.unwrap_or_default();
    assert!(
        reason.contains("assigned to Bob, not to the owner"),
        "{reason}"
    );
    o.fake.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_with_nothing_changed_writes_nothing() {
    let o = owner().await;
    for i in 0..5 {
        o.mine(&format!("Mine {i}"), &o.inbox);
    }
    let bobs = o.task("Bob's task", |t| {
        t.assignee = Some(o.bob.clone());
        t.memberships = vec![(o.project.clone(), None)];
    });
    let home = o.home();
    let stdout = run(&home, &["import"], "");
    assert!(stdout.contains("6 new, 0 updated, 0 unchanged"), "{stdout}");
    let store = home_store(&home).await;
    let mut tx = store.begin_read().await.unwrap();
    let gids: Vec<String> = tx
        .tasks()
        .open_tasks(0, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.task_gid)
        .collect();
    drop(tx);
    assert_eq!(gids.len(), 6);
    // Each row as it is now: who it is assigned to, and when it was written.
    let rows = |store: Store, gids: Vec<String>| async move {
        let mut tx = store.begin_read().await.unwrap();
        let mut rows = Vec::new();
        for gid in gids {
            let task = tx.tasks().task_by_gid(&gid).await.unwrap().unwrap();
            rows.push((task.task_gid, task.assignee, task.updated_at));
        }
        rows
    };
    let first = rows(store.clone(), gids.clone()).await;
    // The shell imports too (as the person at the keyboard, and it then
    // analyses what it imported), then a plain import again: nothing
    // changed in Asana, so neither import writes a task.
    let log = run(&home, &["shell"], "");
    let before = rows(store.clone(), gids.clone()).await;
    let assignees = |rows: &[(String, Option<String>, chrono::DateTime<chrono::Utc>)]| {
        rows.iter().map(|r| r.1.clone()).collect::<Vec<_>>()
    };
    assert_eq!(assignees(&before), assignees(&first), "{log}");
    let stdout = run(&home, &["import"], "");
    assert!(
        stdout.contains("0 new, 0 updated, 6 unchanged"),
        "{stdout}\nshell: {log}"
    );
    assert_eq!(rows(store.clone(), gids).await, before);
    // Bob is recorded as Asana names him, with his gid.
    let bob = format!("Bob <asana:{}>", o.bob);
    assert!(
        first
            .iter()
            .any(|(gid, assignee, _)| gid == &format!("asana:{bobs}")
                && assignee.as_deref() == Some(bob.as_str())),
        "{first:?}"
    );
    o.fake.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_comment_is_posted_as_approved_once_across_a_crash() {
    let o = owner().await;
    let gid = o.task("Tab preview stuck mode:asana", |t| {
        t.memberships = vec![(o.project.clone(), None)];
    });
    let approved = "Fixed in PR #1: the tab preview no longer sticks";
    let mut home = o.home();
    home.set("EAGLE_RUNNER__WORKER_COMMAND", &fake_worker_command())
        .set("EAGLE_OWNER", "alex@example.com")
        .set("EAGLE_APPROVERS", "alex@example.com");
    // The worker asks to comment; the default policy escalates it.
    let stdout = run(&home, &["shell"], "!go 1\n");
    assert!(
        stdout.contains("[ESCALATED: post_asana_comment] run:1"),
        "{stdout}"
    );
    let store = home_store(&home).await;
    let request = store
        .requests()
        .requests_of_run(1)
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.action == "post_asana_comment")
        .expect("the comment request");
    let path = format!("/tasks/{gid}/stories");

    // Approved: Asana takes the comment but its answer never comes, and
    // Eagle is killed while it waits.
    o.fake
        .inject(AsanaRoute::CreateStory, AsanaFault::AcceptThenHang, 1);
    let mut shell = home
        .command(&["shell"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    shell
        .stdin
        .take()
        .unwrap()
        .write_all(format!("!approve 1 {}\n", request.id).as_bytes())
        .unwrap();
    let posted = o
        .fake
        .wait_until(crate::zulip::WAIT, |f| !f.stories(&gid).is_empty())
        .await;
    assert!(posted, "the comment never reached Asana");
    shell.kill().unwrap();
    shell.wait().unwrap();
    let pending = store.requests().request(request.id).await.unwrap().unwrap();
    assert!(
        pending.carried_out_at.is_none(),
        "killed before recording it"
    );

    // After the restart: the comment is found, nothing is posted again.
    let stdout = run(&home, &["shell"], "!status run 1\n");
    let request = store.requests().request(request.id).await.unwrap().unwrap();
    assert!(
        request
            .carried_out
            .as_deref()
            .is_some_and(|c| c.starts_with("The approved comment is on the Asana task")),
        "{request:?}\n{stdout}"
    );
    let stories = o.fake.stories(&gid);
    let texts: Vec<&str> = stories.iter().map(|s| s.text.as_str()).collect();
    // Exactly the approved words: no marker, nothing added.
    assert_eq!(texts, vec![approved]);
    assert_eq!(stories[0].created_by.as_deref(), Some(o.alex.as_str()));
    let posts = o
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path == path)
        .count();
    assert_eq!(posts, 1);
    o.fake.assert_clean();
}
