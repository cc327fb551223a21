//! Moving in: a plugin dropped into a running Eagle's plugin directory, and
//! (below) the old executor's data imported with `eagle import executor-v2`.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::{Home, fixture, text};

/// How long a live shell may take to print what a test waits for.
const WAIT: Duration = Duration::from_secs(60);

/// An `eagle shell` that keeps running while the test types into it.
struct LiveShell {
    child: Child,
    stdin: Option<ChildStdin>,
    out: Arc<Mutex<String>>,
}

impl LiveShell {
    fn start(home: &Home) -> LiveShell {
        let mut child = home
            .command(&["shell"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn eagle shell");
        let out = Arc::new(Mutex::new(String::new()));
        let stdout = child.stdout.take().unwrap();
        let sink = Arc::clone(&out);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let mut out = sink.lock().unwrap();
                out.push_str(&line);
                out.push('\n');
            }
        });
        LiveShell {
            stdin: child.stdin.take(),
            child,
            out,
        }
    }

    fn say(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("the shell's input is open");
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// Waits until the shell printed `needle`; returns everything so far.
    fn wait_for(&self, needle: &str) -> String {
        self.wait_for_nth(needle, 1)
    }

    /// Waits until the shell printed `needle` `n` times.
    fn wait_for_nth(&self, needle: &str, n: usize) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let out = self.out.lock().unwrap().clone();
            if out.matches(needle).count() >= n {
                return out;
            }
            assert!(
                Instant::now() < deadline,
                "the shell did not print {needle:?} within {WAIT:?}:\n{out}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for LiveShell {
    fn drop(&mut self) {
        drop(self.stdin.take());
        if crate::support::exit_within(&mut self.child, Duration::from_secs(30)).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A component built from `tests/plugins/` and copied into the plugin
/// directory decides the next request, with no restart and no profile
/// edit; the owner is told its name, version and hash. A directory or a
/// file that others may write is refused, and that is said too.
#[test]
fn a_dropped_in_plugin_decides_the_next_request_and_unsafe_ones_are_refused() {
    let mut home = Home::new();
    home.set("EAGLE_POLICY__RELOAD_INTERVAL", "200ms")
        .set("EAGLE_SHELL_WAIT", "5s");
    let plugins = home.dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    chmod(&plugins, 0o700);
    let mut shell = LiveShell::start(&home);
    shell.say("!queue Before mode:x\n!go 1");
    shell.wait_for("[APPROVED: create_worktree] run:1 req:1 (default-approval)");

    // Dropped in: written elsewhere, then moved in whole.
    let staged = home.dir.path().join("probe.wasm");
    std::fs::copy(fixture("reload-v2"), &staged).unwrap();
    chmod(&staged, 0o600);
    let dropped = plugins.join("probe.wasm");
    std::fs::rename(&staged, &dropped).unwrap();
    let sha = eagle::policy::content_hash(&std::fs::read(&dropped).unwrap());
    let out = shell.wait_for("Policy plugin **reload-probe** 2.0.0");
    assert!(
        out.contains(&format!(
            "Policy plugin **reload-probe** 2.0.0 (sha256 `{sha}`) is loaded from `{}`",
            dropped.display()
        )),
        "{out}"
    );
    assert!(out.contains("#executor > plugins · Eagle: @**"), "{out}");
    shell.say("!queue After mode:x\n!go 2");
    let out = shell.wait_for("[DENIED: create_worktree] run:2 req:");
    assert!(out.contains("version 2 denies"), "{out}");

    // A directory anyone may write: refused, said, and it votes escalate.
    chmod(&plugins, 0o777);
    let out = shell.wait_for("is not used:");
    assert!(
        out.contains(&format!(
            "its directory {} is writable by its group and everyone (mode 0777)",
            plugins.display()
        )) || out.contains("the plugin directory"),
        "{out}"
    );
    let listed = home.run(&["policy", "list"], "");
    let (stdout, stderr) = text(&listed);
    assert_eq!(listed.status.code(), Some(1), "a refused plugin: {stderr}");
    assert!(stdout.contains("state:     failed:"), "{stdout}");
    assert!(stdout.contains("is refused: its directory"), "{stdout}");
    assert!(
        stdout.contains("whoever can write there can decide"),
        "{stdout}"
    );

    // Back to private, but the file itself writable by others.
    chmod(&plugins, 0o700);
    let loaded = format!(
        "(sha256 `{sha}`) is loaded from `{}`: it votes from now on.",
        dropped.display()
    );
    shell.wait_for_nth(&loaded, 2);
    chmod(&dropped, 0o646);
    let out = shell.wait_for("the plugin file");
    assert!(
        out.contains(&format!(
            "the plugin file {} is writable by everyone (mode 0646)",
            dropped.display()
        )),
        "{out}"
    );
    drop(shell);

    // Excluded by the profile: not loaded, nothing to decide with.
    chmod(&dropped, 0o600);
    home.set("EAGLE_POLICY__EXCLUDE", "probe");
    let listed = home.run(&["policy", "list"], "");
    let (stdout, _) = text(&listed);
    assert!(!stdout.contains("reload-probe"), "{stdout}");
}

/// Seed 003's schema, as the old executor has it (with `user_context`,
/// which becomes the notes).
const OLD_SCHEMA: &str = "
CREATE TABLE executor_runs (
    id serial PRIMARY KEY, task_gid text, worktree_path text, branch_name text,
    pr_url text, pr_number int, thread_id text, started_at timestamptz,
    updated_at timestamptz, completed_at timestamptz, state text,
    ci_attempts int DEFAULT 0, worker_session_id text, worker_last_update timestamptz,
    worker_pid int, worker_stuck_count int DEFAULT 0);
CREATE TABLE executor_queue (
    id serial PRIMARY KEY, task_gid text UNIQUE NOT NULL, added_at timestamptz,
    updated_at timestamptz, source text, description text, notes text, user_context text,
    status text, priority int, complexity text, feasibility text, analysis_summary text,
    executor_run_id int REFERENCES executor_runs (id));
";

/// A fingerprint of the old database's rows (to see that nothing changed).
async fn fingerprint(conn: &mut sqlx::PgConnection) -> (String, String) {
    use sqlx::Row;
    let row = sqlx::query(
        "SELECT (SELECT md5(string_agg(q::text, '|' ORDER BY id)) FROM executor_queue q), \
                (SELECT md5(string_agg(r::text, '|' ORDER BY id)) FROM executor_runs r)",
    )
    .fetch_one(conn)
    .await
    .unwrap();
    (row.get(0), row.get(1))
}

/// The old executor's tables with a few hundred rows in every status and
/// state; the runs in PR states point at PRs of `fake`. Returns the
/// connection and the gid of the task whose run is `ci_running`.
async fn old_executor(
    schema: &crate::support::PgSchema,
    fake: &fake_apis::FakeGitHub,
) -> sqlx::PgConnection {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(&schema.url()).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(OLD_SCHEMA.to_string()))
        .execute(&mut conn)
        .await
        .unwrap();
    // 300 tasks: 200 skip, 16 in_progress, 10 awaiting_go, 20 for_review,
    // 5 approved, 30 done, 16 never analysed, 3 in a status Eagle lacks.
    let statuses = [
        ("skip", 200),
        ("in_progress", 16),
        ("awaiting_go", 10),
        ("for_review", 20),
        ("approved", 5),
        ("done", 30),
        ("", 16),
        ("mystery", 3),
    ];
    let mut n = 0;
    for (status, count) in statuses {
        for _ in 0..count {
            n += 1;
            let status = (!status.is_empty()).then_some(status);
            sqlx::query(
                "INSERT INTO executor_queue (task_gid, added_at, updated_at, source, description, \
                 user_context, status, priority) \
                 VALUES ($1, now() - interval '10 days', now(), 'my_tasks_inbox', $2, $3, $4, $5)",
            )
            .bind(format!("{}", 1_200_000_000_000_000i64 + n))
            .bind(format!("Old task {n}\nIts description."))
            .bind((n % 7 == 0).then(|| format!("Alex said: task {n} matters")))
            .bind(status)
            .bind((n % 5 == 0).then_some(n % 5 + 1))
            .execute(&mut conn)
            .await
            .unwrap();
        }
    }
    // Runs of the 16 in_progress tasks (ids 201..=216) and of done ones.
    let mut runs: Vec<(i64, &str)> = vec![
        (201, "ci_running"),
        (202, "ci_running"),
        (203, "queued"),
        (204, "queued"),
        (205, "queued"),
        (206, "awaiting_review"),
        (207, "awaiting_review"),
        (208, "in_progress"),
        (209, "pr"),
        (210, "recording"),
    ];
    for done in 247..=250 {
        runs.push((done, "complete"));
    }
    runs.push((251, "abandoned"));
    for (task, state) in runs {
        let gid = format!("{}", 1_200_000_000_000_000i64 + task);
        let pr_like = matches!(state, "ci_running" | "awaiting_review" | "pr" | "complete");
        let branch = format!("fix/task-{task}");
        let pr = pr_like.then(|| {
            let mut spec = fake_apis::PrSpec::new(
                "executor-bot",
                &branch,
                "1111111111111111111111111111111111111111",
            );
            spec.draft = true;
            fake.open_pr("acme/app", spec) as i32
        });
        sqlx::query(
            "INSERT INTO executor_runs (task_gid, worktree_path, branch_name, pr_url, pr_number, \
             started_at, updated_at, state, ci_attempts, worker_session_id, worker_pid) \
             VALUES ($1, $2, $3, $4, $5, now() - interval '1 day', now(), $6, 1, $7, 4242)",
        )
        .bind(&gid)
        .bind(format!("/Users/alex/worktrees/task-{task}"))
        .bind(&branch)
        .bind(pr.map(|n| format!("https://github.com/acme/app/pull/{n}")))
        .bind(pr)
        .bind(state)
        .bind(format!("session-{task}"))
        .execute(&mut conn)
        .await
        .unwrap();
    }
    // A run whose task is not in the queue.
    sqlx::query("INSERT INTO executor_runs (task_gid, state) VALUES ('999', 'queued')")
        .execute(&mut conn)
        .await
        .unwrap();
    sqlx::query(
        "UPDATE executor_queue q SET executor_run_id = r.id FROM executor_runs r WHERE r.task_gid = q.task_gid",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    conn
}

/// `eagle import executor-v2` against seed 003's schema on PostgreSQL: the
/// dry run's counts, the import, a second import that changes nothing, the
/// old database untouched, and the imported runs in `!status`, the one
/// that was `ci_running` followed by the PR loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_old_executor_moves_in_on_sqlite() {
    moves_in(crate::support::Db::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_old_executor_moves_in_on_postgres() {
    moves_in(crate::support::Db::Postgres).await;
}

async fn moves_in(db: crate::support::Db) {
    let eagle_db = crate::support::TestDb::new(db).await;
    let old = crate::support::PgSchema::create().await;
    let fake = fake_apis::FakeGitHub::start().await;
    let token = fake.create_token("eagle-bot");
    fake.add_repo("acme/app", fake_apis::RepoSpec::default());
    let mut conn = old_executor(&old, &fake).await;
    let before = fingerprint(&mut conn).await;
    let mut home = Home::new();
    home.set("EAGLE_DATABASE_URL", &eagle_db.url)
        .set("GITHUB_TOKEN", &token)
        .set("EAGLE_GITHUB__API_URL", &fake.url())
        .set("EAGLE_GITHUB__REPO", "acme/app")
        .set("EAGLE_GITHUB__POLL_INTERVAL", "1s")
        .set("EAGLE_SHELL_WAIT", "20s");
    // With a password in the address, which is never printed.
    let url = old.url().replacen("postgres@", "postgres:hunter2@", 1);
    let run = |args: &[&str]| {
        let out = home.run(args, "");
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{args:?}: {stderr}\n{stdout}");
        assert!(!stdout.contains("hunter2") && !stderr.contains("hunter2"));
        stdout
    };

    let dry = run(&["import", "executor-v2", &url, "--dry-run"]);
    for want in [
        "executor_queue: 300 task(s): 200 skip, 30 done, 20 for_review, 16 (none), 16 in_progress, 10 awaiting_go, 5 approved, 3 mystery\n",
        "executor_runs: 16 run(s): 4 complete, 4 queued, 2 awaiting_review, 2 ci_running, 1 abandoned, 1 in_progress, 1 pr, 1 recording\n",
        "tasks would become: 21 approved, 10 awaiting_go, 30 done, 20 for_review, 16 pending, 200 skip\n",
        "runs would become: 1 abandoned, 4 complete, 1 in_progress, 5 pr, 3 queued\n",
        "cannot map: 1 run state \"recording\" (id 10)\n",
        "cannot map: 1 run whose task is not imported (id 16)\n",
        "cannot map: 3 task status \"mystery\" (id 298, 299, 300)\n",
        "dry run: nothing written",
        "postgres://postgres:***@",
    ] {
        assert!(dry.contains(want), "missing {want:?} in:\n{dry}");
    }
    let status = home.run(&["shell"], "!status\n");
    assert!(
        text(&status).0.contains("Nothing queued or running"),
        "the dry run wrote:\n{}",
        text(&status).0
    );

    // Claiming paused, so no worker starts on what comes in.
    home.run(&["shell"], "!pause\n");
    let first = run(&["import", "executor-v2", &url, "--batch", "64"]);
    assert!(
        first.contains(
            "imported 297 task(s) and 14 run(s); 0 task(s) and 0 run(s) were here already"
        ),
        "{first}"
    );
    let second = run(&["import", "executor-v2", &url]);
    assert!(
        second.contains(
            "imported 0 task(s) and 0 run(s); 297 task(s) and 14 run(s) were here already"
        ),
        "{second}"
    );
    assert_eq!(
        fingerprint(&mut conn).await,
        before,
        "the old database changed"
    );

    let store = eagle_db.open().await;
    let mut tx = store.begin_read().await.unwrap();
    let counts = tx.tasks().status_counts().await.unwrap();
    let task = tx
        .tasks()
        .task_by_gid("asana:1200000000000007")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(task.notes, "Alex said: task 7 matters");
    assert_eq!(task.title, "Old task 7");
    let ci_running = tx
        .tasks()
        .runs_of_task("asana:1200000000000201")
        .await
        .unwrap()
        .remove(0);
    drop(tx);
    let runs: std::collections::BTreeMap<&str, i64> =
        counts.runs.iter().map(|(s, n)| (s.as_str(), *n)).collect();
    assert_eq!(runs.get("pr"), Some(&5), "{counts:?}");
    assert_eq!(ci_running.state, eagle::store::RunState::Pr);
    assert_eq!(ci_running.pr_work.0, None, "waiting on CI holds no slot");
    assert_eq!(ci_running.branch_name.as_deref(), Some("fix/task-201"));
    assert_eq!(ci_running.worker_session_id.as_deref(), Some("session-201"));
    assert_eq!(
        ci_running.worker_pid, None,
        "the old host's pid is not kept"
    );
    let pr = ci_running.pr_number.unwrap();

    // Eagle's loops pick the open PRs up: !status shows the imported runs,
    // and the PR loop polls the one that was ci_running.
    let out = home.run(
        &["shell"],
        &format!("!status\n!status run {}\n", ci_running.id),
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("**Runs**:"), "{stdout}");
    assert!(
        stdout.contains(&format!("**Run {}** of task", ci_running.id)),
        "{stdout}"
    );
    assert!(stdout.contains(&format!("PR #{pr}")), "{stdout}");
    assert!(
        fake.requests()
            .iter()
            .any(|r| r.method == "GET" && r.path == format!("/repos/acme/app/pulls/{pr}")),
        "the PR loop never looked at PR #{pr}"
    );
    drop(conn);
}
