//! Intake and the analyzer through the real binary: tasks imported from
//! the strict fake Asana (`eagle import`, idempotent, following changes and
//! completions there) and from chat (`eagle shell`), judged by the real
//! default filter and an analysis command that may hang, the skipped ones
//! analysed again after the filter changed, and an approved Asana comment
//! posted once across a crash.

use std::collections::BTreeMap;
use std::io::Write;

use eagle::store::{Store, TaskStatus};
use fake_apis::{CustomField, FakeAsana, TaskSpec};

use crate::executor::home_store;
use crate::support::{Home, text};

/// An Asana workspace as the owner's token sees it, with a place for every
/// source the table needs.
struct Desk {
    fake: FakeAsana,
    ws: String,
    alex: String,
    bob: String,
    token: String,
    /// Source name → the project (or section) gid it is read from.
    projects: BTreeMap<&'static str, String>,
    /// The owner's My Tasks sections, by name.
    my_tasks: BTreeMap<&'static str, String>,
    /// The project holding the `user_reports` section.
    support: String,
    user_reports: String,
}

async fn desk() -> Desk {
    let fake = FakeAsana::start().await;
    let ws = fake.add_workspace("Acme", true);
    let alex = fake.add_user("Alex", "alex@example.com", &[&ws]);
    let bob = fake.add_user("Bob", "bob@example.com", &[&ws]);
    let token = fake.create_pat(&alex);
    let mut projects = BTreeMap::new();
    for source in [
        "O-L Backlog (Desktop Browsers)",
        "hack_days",
        "user_feedback_raw",
        "random_project",
    ] {
        projects.insert(source, fake.add_project(&ws, source));
    }
    let support = fake.add_project(&ws, "Support");
    let user_reports = fake.add_section(&support, "User reports");
    let list = fake.my_tasks(&alex, &ws);
    let mut my_tasks = BTreeMap::new();
    for section in ["Inbox", "Backlog"] {
        my_tasks.insert(section, fake.add_section(&list, section));
    }
    Desk {
        fake,
        ws,
        alex,
        bob,
        token,
        projects,
        my_tasks,
        support,
        user_reports,
    }
}

impl Desk {
    /// A macOS task named `name` in the project of `source`, changed by `f`.
    fn task(&self, source: &str, name: &str, f: impl FnOnce(&mut TaskSpec)) -> String {
        let mut spec = TaskSpec::new(&self.ws, name);
        spec.custom_fields = vec![CustomField::new("Platform", "macOS")];
        if let Some(project) = self.projects.get(source) {
            spec.memberships = vec![(project.clone(), None)];
        }
        f(&mut spec);
        self.fake.add_task(spec)
    }

    /// The home's profile, reading this workspace.
    fn home(&self) -> Home {
        let mut home = Home::new();
        home.set("ASANA_TOKEN", &self.token)
            .set("EAGLE_OWNER", "alex@example.com")
            .set("EAGLE_APPROVERS", "alex@example.com");
        let mut toml = format!(
            "\n[asana]\napi_url = \"{}\"\nworkspace = \"{}\"\nplatform_field = \"Platform\"\n\
             platform_tags = [\"macOS\", \"Windows\"]\nfollowed_source = \"watched\"\n",
            self.fake.url(),
            self.ws
        );
        for (source, gid) in &self.projects {
            toml.push_str(&format!(
                "[[asana.projects]]\ngid = \"{gid}\"\nsource = \"{source}\"\n"
            ));
        }
        toml.push_str(&format!(
            "[[asana.sections]]\ngid = \"{}\"\nsource = \"user_reports\"\nrepo = \"web\"\n",
            self.user_reports
        ));
        for (section, source, repo) in [
            ("Inbox", "my_tasks_inbox", ""),
            ("Backlog", "my_tasks_backlog", "repo = \"api\"\n"),
        ] {
            toml.push_str(&format!(
                "[[asana.my_tasks]]\nsection = \"{section}\"\nsource = \"{source}\"\n{repo}"
            ));
        }
        append(&home, &toml);
        home
    }
}

fn append(home: &Home, toml: &str) {
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(home.profiles().join("eagle.toml"))
        .unwrap();
    file.write_all(toml.as_bytes()).unwrap();
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
async fn the_seeds_filters_decide_what_is_taken() {
    let d = desk().await;
    let ol = "O-L Backlog (Desktop Browsers)";
    let figma = d.task(ol, "Tab preview (design)", |t| {
        t.notes = "See https://www.figma.com/file/abc/Tabs for the spec".into();
    });
    let template = d.task(ol, "Q3 project", |t| {
        t.notes = "Timeline: Q3\nProject Advisor: Dana".into();
    });
    let windows = d.task(ol, "Windows tab bar", |t| {
        t.custom_fields = vec![CustomField::new("Platform", "Windows")];
    });
    let tagged = d.task(ol, "Tagged, no field", |t| {
        t.custom_fields = vec![];
        t.tags = vec!["macOS".into()];
    });
    let raw = d.task("user_feedback_raw", "Raw feedback", |_| {});
    let unqualified = d.task("random_project", "Somewhere else", |_| {});
    let bobs = d.task(ol, "Bob's task", |t| t.assignee = Some(d.bob.clone()));
    let alexs = d.task(ol, "Alex's task", |t| t.assignee = Some(d.alex.clone()));
    let plain = d.task(ol, "Tab preview stuck", |_| {});
    let hack = d.task("hack_days", "Hack day idea", |_| {});
    let report = d.task("", "A user report", |t| {
        t.memberships = vec![(d.support.clone(), Some(d.user_reports.clone()))];
    });
    let inbox = d.task("", "In my inbox", |t| {
        t.assignee = Some(d.alex.clone());
        t.assignee_section = Some(d.my_tasks["Inbox"].clone());
    });
    let backlog = d.task("", "In my backlog", |t| {
        t.assignee = Some(d.alex.clone());
        t.assignee_section = Some(d.my_tasks["Backlog"].clone());
    });
    let watched = d.task("", "Followed", |t| t.followers = vec![d.alex.clone()]);

    let home = d.home();
    let out = home.run(&["import"], "");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("imported from Asana: 14 new, 0 updated, 0 unchanged"),
        "{stdout}"
    );
    // Closed after the first import: the next one sees it completed.
    let closed = d.task(ol, "Done already", |_| {});
    d.fake.complete_task(&closed, true);
    let out = home.run(&["import"], "");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains(
            "imported from Asana: 0 new, 0 updated, 14 unchanged, 1 done there before they reached the inbox"
        ),
        "{stdout}"
    );

    let out = home.run(&["analyze"], "");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("Analysed 14 tasks:"), "{stdout}");

    let store = home_store(&home).await;
    let want: Vec<(&str, &String, TaskStatus, &str)> = vec![
        (
            "a Figma link",
            &figma,
            TaskStatus::Skip,
            "links to a design file",
        ),
        (
            "a project template",
            &template,
            TaskStatus::Skip,
            "a project template",
        ),
        (
            "the wrong platform",
            &windows,
            TaskStatus::Skip,
            "for windows, not a macos task",
        ),
        (
            "user_feedback_raw",
            &raw,
            TaskStatus::Skip,
            "source user_feedback_raw is never taken",
        ),
        (
            "an unqualified source",
            &unqualified,
            TaskStatus::Skip,
            "not a qualifying source",
        ),
        (
            "assigned to someone else",
            &bobs,
            TaskStatus::Skip,
            "assigned to Bob, not to the owner",
        ),
        (
            "assigned to the owner",
            &alexs,
            TaskStatus::ForReview,
            "kept by the filters",
        ),
        (
            "the platform from a tag",
            &tagged,
            TaskStatus::ForReview,
            "kept by the filters",
        ),
        (
            "O-L Backlog (Desktop Browsers)",
            &plain,
            TaskStatus::ForReview,
            "kept by the filters",
        ),
        (
            "hack_days",
            &hack,
            TaskStatus::ForReview,
            "kept by the filters",
        ),
        (
            "user_reports",
            &report,
            TaskStatus::ForReview,
            "kept by the filters",
        ),
        (
            "my_tasks_inbox",
            &inbox,
            TaskStatus::ForReview,
            "kept by the filters",
        ),
        (
            "my_tasks_backlog",
            &backlog,
            TaskStatus::ForReview,
            "kept by the filters",
        ),
        (
            "watched",
            &watched,
            TaskStatus::ForReview,
            "kept by the filters",
        ),
    ];
    for (what, gid, status, reason) in want {
        let (got, why) = status_of(&store, gid).await;
        assert_eq!(got, status, "{what}: {why:?}");
        assert!(
            why.as_deref().unwrap_or_default().contains(reason),
            "{what}: {why:?}"
        );
    }
    // A place that names its repository gives it to its tasks.
    let mut tx = store.begin_read().await.unwrap();
    for (gid, repo) in [
        (&report, Some("web")),
        (&backlog, Some("api")),
        (&inbox, None),
    ] {
        let task = tx
            .tasks()
            .task_by_gid(&format!("asana:{gid}"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(task.repo.as_deref(), repo, "{task:?}");
    }
    drop(tx);
    // Closed: done there before Eagle saw it, so never in the inbox (one
    // closed after it came in leaves it: see the intake test below).
    let mut tx = store.begin_read().await.unwrap();
    assert!(
        tx.tasks()
            .task_by_gid(&format!("asana:{closed}"))
            .await
            .unwrap()
            .is_none()
    );
    drop(tx);
    // `!status` says which filter skipped it, and why.
    let figma_id = {
        let mut tx = store.begin_read().await.unwrap();
        tx.tasks()
            .task_by_gid(&format!("asana:{figma}"))
            .await
            .unwrap()
            .unwrap()
            .id
    };
    let out = home.run(&["shell"], &format!("!status {figma_id}\n!go {figma_id}\n"));
    let (stdout, _) = text(&out);
    assert!(stdout.contains("skipped by a filter:"), "{stdout}");
    assert!(
        stdout.contains("* default-filter 0.1.0: links to a design file"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("`!go {figma_id}` takes it anyway")),
        "{stdout}"
    );
    // An approver's `!go` overrides the skip, and the audit log says so.
    let trail = store
        .audit_log()
        .audit_trail(&format!("task:{figma_id}"))
        .await
        .unwrap();
    assert!(
        trail.iter().any(|e| e.action == "task.approved"
            && e.decision.as_deref() == Some("skip → approved")
            && e.reason
                .as_deref()
                .is_some_and(|r| r.contains("overrides the skip"))),
        "{trail:#?}"
    );
    d.fake.assert_clean();
}

/// A stand-in for a model API on 127.0.0.1: each request's head goes to
/// `answer`, whose text is the answer's body. Returns its port.
fn model_server(answer: impl Fn(&str) -> String + Send + 'static) -> u16 {
    let model = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = model.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::{Read as _, Write as _};
        for stream in model.incoming() {
            let Ok(mut stream) = stream else { break };
            let mut head = [0u8; 8192];
            let n = stream.read(&mut head).unwrap_or(0);
            let body = answer(&String::from_utf8_lossy(&head[..n]));
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

fn fake_analysis() -> String {
    let script = crate::support::reachable(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/it/fake-analysis.sh"),
    );
    format!("bash {} {{prompt}}", script.display())
}

/// A confined analysis command reaches its model API through its own
/// egress proxy (`analyzer.allow_hosts`), and nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confined_analysis_reaches_its_model_and_no_other_host() {
    let port = model_server(|_| "the model read the task".into());
    let mut home = Home::new();
    home.set("EAGLE_ANALYZER__COMMAND", &fake_analysis())
        .set("EAGLE_ANALYZER__ENV", "MODEL_URL")
        .set("MODEL_URL", &format!("http://127.0.0.1:{port}"))
        .set("EAGLE_RUNNER__SANDBOX__MODE", "on");
    home.set("EAGLE_ANALYZER__ALLOW_HOSTS", &format!("127.0.0.1:{port}"));
    // Confined, a command reads the system and its PATH: the script's
    // directory goes on it.
    let script = fake_analysis();
    let dir = std::path::Path::new(script.split(' ').nth(1).unwrap())
        .parent()
        .unwrap()
        .display()
        .to_string();
    home.set(
        "EAGLE_ANALYZER__PATH",
        &format!("{dir}:/usr/local/bin:/usr/bin:/bin"),
    );
    let out = home.run(&["shell"], "!queue Tabs mode:model\n");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("UNCONFINED"), "{stderr}");
    let store = home_store(&home).await;
    let mut tx = store.begin_read().await.unwrap();
    let task = tx.tasks().task(1).await.unwrap().unwrap();
    assert_eq!(
        task.status,
        TaskStatus::AwaitingGo,
        "{task:?}\n{stdout}\n{stderr}"
    );
    // The model answered through the proxy; the other host got the proxy's
    // refusal (403), never a connection.
    assert_eq!(
        task.analysis_summary.as_deref(),
        Some("the model read the task; other host: 403"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_or_failing_analysis_leaves_its_task_for_review_and_stops_nothing() {
    let mut home = Home::new();
    home.set("EAGLE_ANALYZER__COMMAND", &fake_analysis())
        .set("EAGLE_ANALYZER__NO_OUTPUT_TIMEOUT", "2s")
        .set("EAGLE_ANALYZER__HARD_TIMEOUT", "5s");
    let pidfile = home.exchange().join("analysis.pid");
    let input = format!(
        "!queue Tabs mode:hang pidfile:{}\n!queue Tabs mode:busy\n!queue Fix the tab preview\n\
         !queue mode:garbled one\n!queue mode:broken one\n",
        pidfile.display()
    );
    let out = home.run(&["shell"], &input);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let store = home_store(&home).await;
    let task = |id: i64| {
        let store = store.clone();
        async move {
            let mut tx = store.begin_read().await.unwrap();
            tx.tasks().task(id).await.unwrap().unwrap()
        }
    };
    let hung = task(1).await;
    assert_eq!(hung.status, TaskStatus::ForReview);
    let reason = hung.status_reason.unwrap_or_default();
    assert!(reason.contains("it printed nothing for 2s"), "{reason}");
    let busy = task(2).await;
    assert_eq!(busy.status, TaskStatus::ForReview);
    let reason = busy.status_reason.unwrap_or_default();
    assert!(reason.contains("it ran past its limit of 5s"), "{reason}");
    // The command's whole process group is gone.
    let pid = std::fs::read_to_string(&pidfile).unwrap();
    assert!(
        !std::path::Path::new(&format!("/proc/{}", pid.trim())).exists(),
        "the hung analysis {pid} still runs"
    );
    // The others were analysed all the same.
    let ready = task(3).await;
    assert_eq!(ready.status, TaskStatus::AwaitingGo);
    assert_eq!(
        ready.analysis_summary.as_deref(),
        Some("a one-line fix in TabBar")
    );
    assert_eq!(ready.complexity.as_deref(), Some("low"));
    assert_eq!(ready.priority, Some(2));
    let garbled = task(4).await;
    assert_eq!(garbled.status, TaskStatus::ForReview);
    assert!(
        garbled
            .analysis_raw
            .as_deref()
            .is_some_and(|raw| raw.contains("I think this one is fine")),
        "{garbled:?}"
    );
    let broken = task(5).await;
    assert_eq!(broken.status, TaskStatus::ForReview);
    assert!(
        broken
            .status_reason
            .as_deref()
            .is_some_and(|r| r.contains("exited with 1") && r.contains("the model is unreachable")),
        "{broken:?}"
    );
    // The requester hears each conclusion where the task was asked for,
    // with the one command that moves it on.
    assert!(
        stdout.contains(
            "Task #3 (Fix the tab preview) is ready to start (complexity low, feasibility high, priority 2). \
             a one-line fix in TabBar `!go 3` starts it."
        ),
        "{stdout}"
    );
    assert!(stdout.contains("Task #1 (Tabs mode:hang"), "{stdout}");
}

/// A confined Claude Code analysis holds a placeholder, as a worker does:
/// its egress proxy sets the real key on the model API's own calls, and
/// refuses an upload path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confined_claude_analysis_holds_a_placeholder_and_its_proxy_sets_the_key() {
    const REAL: &str = "sk-ant-real-analysis-key-0123";
    let keys = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = std::sync::Arc::clone(&keys);
    let port = model_server(move |head| {
        let key = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("x-api-key:")
                    .map(|_| l[10..].trim().to_string())
            })
            .unwrap_or_default();
        let body = if key == REAL { "real" } else { "wrong" };
        seen.lock().unwrap().push(key);
        body.into()
    });
    let mut home = Home::new();
    let script = fake_analysis();
    let dir = std::path::Path::new(script.split(' ').nth(1).unwrap())
        .parent()
        .unwrap()
        .display()
        .to_string();
    home.set("EAGLE_ANALYZER__COMMAND", &script)
        .set("EAGLE_ANALYZER__COMMAND_KIND", "claude")
        .set(
            "EAGLE_ANALYZER__ENV",
            "ANTHROPIC_BASE_URL,ANTHROPIC_API_KEY",
        )
        .set("ANTHROPIC_BASE_URL", &format!("http://127.0.0.1:{port}"))
        .set("ANTHROPIC_API_KEY", REAL)
        .set("EAGLE_RUNNER__SANDBOX__MODE", "on")
        .set(
            "EAGLE_ANALYZER__PATH",
            &format!("{dir}:/usr/local/bin:/usr/bin:/bin"),
        );
    let out = home.run(&["shell"], "!queue Tabs mode:claudekey\n");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let store = home_store(&home).await;
    let mut tx = store.begin_read().await.unwrap();
    let task = tx.tasks().task(1).await.unwrap().unwrap();
    assert_eq!(
        task.analysis_summary.as_deref(),
        Some("held eagle-placeholder-key; the model said real; files 403"),
        "{task:?}\n{stdout}\n{stderr}"
    );
    // The model API saw only the real key, once: the upload never reached it.
    assert_eq!(*keys.lock().unwrap(), vec![REAL.to_string()]);
}

/// The analysis may name the repository a task belongs to: one an
/// executor has is kept, unless a person named another; an unknown one is
/// left out, and the reason says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_analysis_names_a_known_repository_and_never_overrides_a_person() {
    let mut home = Home::new();
    home.set("EAGLE_ANALYZER__COMMAND", &fake_analysis());
    {
        let store = home_store(&home).await;
        let repo = |name: &str| eagle::store::AnnouncedRepo {
            name: name.into(),
            url: format!("https://github.com/acme/{name}.git"),
            github: Some(format!("acme/{name}")),
            base: "main".into(),
            executor: String::new(),
            announced_at: chrono::Utc::now(),
        };
        store
            .repos()
            .announce("elsewhere", &[repo("api"), repo("web")])
            .await
            .unwrap();
    }
    let out = home.run(
        &["shell"],
        "!queue Fix the API mode:repo want:api\n!queue Odd mode:repo want:nowhere\n\
         !queue --repo web Fix the page mode:repo want:api\n",
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let store = home_store(&home).await;
    let mut tx = store.begin_read().await.unwrap();
    let api = tx.tasks().task(1).await.unwrap().unwrap();
    assert_eq!(api.repo.as_deref(), Some("api"), "{api:?}\n{stdout}");
    // The prompt listed what the executors have.
    assert!(
        api.analysis_summary
            .as_deref()
            .is_some_and(|s| s.contains("api")
                && s.contains("web")
                && s.starts_with("Repositories:")),
        "{api:?}"
    );
    let odd = tx.tasks().task(2).await.unwrap().unwrap();
    assert_eq!(odd.repo, None, "{odd:?}");
    assert!(
        odd.status_reason
            .as_deref()
            .is_some_and(|r| r.contains("\"nowhere\", which no executor has")),
        "{odd:?}"
    );
    let page = tx.tasks().task(3).await.unwrap().expect(&stdout);
    assert_eq!(page.repo.as_deref(), Some("web"), "{page:?}");
    assert!(stdout.contains("repository api"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skipped_tasks_are_analysed_again_after_the_filter_changes_in_one_summary() {
    let d = desk().await;
    let ol = "O-L Backlog (Desktop Browsers)";
    let windows: Vec<String> = (1..=3)
        .map(|i| {
            d.task(ol, &format!("Windows task {i}"), |t| {
                t.custom_fields = vec![CustomField::new("Platform", "Windows")];
            })
        })
        .collect();
    d.task(ol, "A macOS task", |_| {});
    let home = d.home();
    for args in [&["import"][..], &["analyze"][..]] {
        let out = home.run(args, "");
        assert!(out.status.success(), "{:?}", text(&out));
    }
    let store = home_store(&home).await;
    for gid in &windows {
        assert_eq!(status_of(&store, gid).await.0, TaskStatus::Skip);
    }
    // The owner changes the filter: Windows tasks are wanted now.
    let profile = home.profiles().join("eagle.toml");
    let text_of = std::fs::read_to_string(&profile).unwrap();
    std::fs::write(
        &profile,
        text_of.replace("platform = \"macos\"", "platform = \"windows\""),
    )
    .unwrap();

    // A dry run first: a count, nothing changed.
    let out = home.run(&["analyze", "--reanalyze-skipped", "--dry-run"], "");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains("3 of 3 skipped task(s) would be kept by the current filters."),
        "{stdout}"
    );
    for gid in &windows {
        assert_eq!(status_of(&store, gid).await.0, TaskStatus::Skip);
    }

    // From chat: a count, then the re-analysis, answered by one summary.
    let out = home.run(&["shell"], "!reanalyze\n!reanalyze confirm\n");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains(
            "3 of 3 skipped task(s) would be kept by the current filters. `!reanalyze confirm`"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("Put 3 of 3 skipped task(s) back for analysis"),
        "{stdout}"
    );
    assert_eq!(
        stdout.matches("Analysed ").count(),
        1,
        "one summary:\n{stdout}"
    );
    assert!(
        stdout.contains("Analysed 3 skipped task(s) again:\n* 3 for a human look: #"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("needs a human look"),
        "no message per task:\n{stdout}"
    );
    for gid in &windows {
        assert_eq!(status_of(&store, gid).await.0, TaskStatus::ForReview);
    }
    d.fake.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imports_are_idempotent_and_a_task_completed_in_asana_leaves_the_inbox() {
    let d = desk().await;
    let ol = "O-L Backlog (Desktop Browsers)";
    let stays = d.task(ol, "Tab preview stuck", |_| {});
    let renamed = d.task(ol, "Old title", |_| {});
    let completed = d.task(ol, "Fixed already", |_| {});
    let started = d.task(ol, "Started here, completed there", |_| {});
    let home = d.home();
    for _ in 0..2 {
        let out = home.run(&["import"], "");
        assert!(out.status.success(), "{:?}", text(&out));
    }
    let store = home_store(&home).await;
    let mut tx = store.begin_read().await.unwrap();
    let tasks = tx.tasks().open_tasks(0, 100).await.unwrap();
    drop(tx);
    let mut gids: Vec<&str> = tasks.iter().map(|t| t.task_gid.as_str()).collect();
    gids.sort_unstable();
    let mut want: Vec<String> = [&stays, &renamed, &completed, &started]
        .iter()
        .map(|g| format!("asana:{g}"))
        .collect();
    want.sort_unstable();
    assert_eq!(gids, want, "imported twice: one task each");
    let started_id = tasks
        .iter()
        .find(|t| t.task_gid == format!("asana:{started}"))
        .unwrap()
        .id;
    let out = home.run(&["shell"], &format!("!go {started_id}\n"));
    assert!(out.status.success(), "{:?}", text(&out));

    // Changed and completed there: updated here, and the completed one left.
    d.fake.rename_task(&renamed, "New title");
    d.fake.complete_task(&completed, true);
    d.fake.complete_task(&started, true);
    let out = home.run(&["import"], "");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("0 new, 3 updated, 1 unchanged"), "{stdout}");
    let mut tx = store.begin_read().await.unwrap();
    let renamed = tx
        .tasks()
        .task_by_gid(&format!("asana:{renamed}"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(renamed.title, "New title");
    let gone = tx
        .tasks()
        .task_by_gid(&format!("asana:{completed}"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(gone.status, TaskStatus::Cancelled);
    assert_eq!(
        gone.status_reason.as_deref(),
        Some("completed where it came from")
    );
    // One with a run is left to a person: its run goes on.
    let started = tx
        .tasks()
        .task_by_gid(&format!("asana:{started}"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(started.status, TaskStatus::Approved);
    assert_eq!(started.task_state, "closed");
    drop(tx);
    d.fake.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_asana_comment_is_posted_once_even_across_a_crash() {
    use std::process::Stdio;
    let d = desk().await;
    let gid = d.task(
        "O-L Backlog (Desktop Browsers)",
        "Tab preview stuck mode:asana",
        |_| {},
    );
    let mut home = d.home();
    home.set(
        "EAGLE_RUNNER__WORKER_COMMAND",
        &crate::executor::fake_worker_command(),
    );
    // The worker asks to comment; the default policy escalates it.
    let out = home.run(&["shell"], "!go 1\n");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
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
    let approved = "Fixed in PR #1: the tab preview no longer sticks";
    let path = format!("/tasks/{gid}/stories");

    // Approved: Asana takes the comment but its answer never comes, and
    // Eagle is killed while it waits.
    d.fake.inject(
        fake_apis::AsanaRoute::CreateStory,
        fake_apis::AsanaFault::AcceptThenHang,
        1,
    );
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
    let posted = d
        .fake
        .wait_until(crate::zulip::WAIT, |f| {
            f.stories(&gid).iter().any(|s| s.text == approved)
        })
        .await;
    assert!(posted, "the comment never reached Asana");
    shell.kill().unwrap();
    shell.wait().unwrap();
    assert!(
        store
            .requests()
            .request(request.id)
            .await
            .unwrap()
            .unwrap()
            .carried_out_at
            .is_none(),
        "killed before it could record it"
    );

    // After the restart: the comment is found, nothing is posted again.
    let out = home.run(&["shell"], "!status run 1\n");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let request = store.requests().request(request.id).await.unwrap().unwrap();
    assert!(
        request
            .carried_out
            .as_deref()
            .is_some_and(|c| c.starts_with("The approved comment is on the Asana task")),
        "{request:?}\n{stdout}"
    );
    let posted: Vec<_> = d
        .fake
        .stories(&gid)
        .into_iter()
        .filter(|s| s.text == approved)
        .collect();
    assert_eq!(posted.len(), 1, "{posted:#?}");
    let posts = d
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path == path)
        .count();
    assert_eq!(posts, 1);
    d.fake.assert_clean();
}

/// Eagle stopping mid-analysis ends the analysis command's whole process
/// group, not only its shim.
#[test]
fn an_analysis_running_when_eagle_stops_ends_with_it() {
    let mut home = Home::new();
    home.set("EAGLE_ANALYZER__COMMAND", &fake_analysis())
        .set("EAGLE_ANALYZER__NO_OUTPUT_TIMEOUT", "1h")
        .set("EAGLE_ANALYZER__HARD_TIMEOUT", "1h");
    // A FIFO: the test learns the command's pid the moment it writes it.
    let pidfile = home.exchange().join("analysis.pid");
    let made = std::process::Command::new("mkfifo")
        .arg("-m")
        .arg("666")
        .arg(&pidfile)
        .status()
        .unwrap();
    assert!(made.success());
    let mut child = home
        .command(&["shell"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "!queue Tabs mode:hang pidfile:{}", pidfile.display()).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    {
        let pidfile = pidfile.clone();
        std::thread::spawn(move || {
            let _ = tx.send(std::fs::read_to_string(&pidfile));
        });
    }
    let pid = rx
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("the analysis command started")
        .unwrap();
    let pid = pid.trim().to_string();
    let alive = |pid: &str| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                stat.rsplit_once(')')
                    .map(|(_, rest)| rest.trim_start().chars().next())
            })
            .flatten()
            .is_some_and(|state| state != 'Z' && state != 'X')
    };
    assert!(alive(&pid), "the analysis {pid} is not running");
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let status = crate::support::exit_within(&mut child, std::time::Duration::from_secs(60));
    assert!(status.is_some(), "eagle shell did not stop on SIGTERM");
    drop(stdin);
    assert!(!alive(&pid), "the analysis {pid} outlived Eagle");
}
