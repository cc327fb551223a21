//! Data care through the real binary, on SQLite and PostgreSQL: `eagle db
//! backup` while a worker runs, restored and read by `!status`; `eagle db
//! prune` removing exactly what it says and nothing it must keep;
//! `eagle migrate --check`, and a database newer than the binary refused by
//! `migrate`, `--check` and the shell.

use std::io::{BufRead as _, Write as _};
use std::os::unix::fs::PermissionsExt as _;
use std::process::{Command, Stdio};
use std::sync::mpsc;

use chrono::{DateTime, Utc};
use eagle::profile::DatabaseUrl;
use eagle::store::{NewTask, Origin, RunState, Store};
use sqlx::Connection as _;

use crate::executor::fake_worker_command;
use crate::support::{Db, Home, TestDb, WAIT, finish, migration_count, postgres_url, text};

on_both_backends!(
    a_backup_taken_while_a_worker_runs_restores_and_status_reads_it,
    prune_removes_exactly_the_old_prunable_rows_and_dry_run_nothing,
    migrate_check_says_pending_then_up_to_date_and_a_newer_database_is_refused,
    the_pruner_prunes_once_a_day_with_the_profiles_retention,
);

/// A home on `db` whose executor runs the fake worker.
fn home_on(db: &TestDb) -> Home {
    let mut home = Home::new();
    home.set("EAGLE_DATABASE_URL", &db.url)
        .set("EAGLE_RUNNER__WORKER_COMMAND", &fake_worker_command());
    home
}

/// An `eagle shell` kept open, its output read line by line.
struct OpenShell {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl OpenShell {
    fn start(home: &Home, input: &str) -> OpenShell {
        let mut child = home
            .command(&["shell"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn eagle shell");
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(input.as_bytes()).unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        OpenShell {
            child,
            stdin: Some(stdin),
            lines,
            seen: Vec::new(),
        }
    }

    fn wait_for(&mut self, needle: &str) {
        loop {
            match self.lines.recv_timeout(WAIT) {
                Ok(line) => {
                    let found = line.contains(needle);
                    self.seen.push(line);
                    if found {
                        return;
                    }
                }
                Err(_) => {
                    let _ = self.child.kill();
                    panic!("no {needle:?} from the shell:\n{}", self.seen.join("\n"));
                }
            }
        }
    }

    fn finish(mut self) {
        drop(self.stdin.take());
        let out = finish(self.child, b"", "eagle shell");
        assert!(out.status.success(), "{}", text(&out).1);
    }
}

/// A PostgreSQL database of the test's own, dropped when the guard goes.
struct PgDatabase {
    name: String,
}

impl PgDatabase {
    async fn create() -> PgDatabase {
        let name = format!("eagle_r_{}_{:x}", std::process::id(), fastrand::u32(..));
        let mut conn = sqlx::PgConnection::connect(&postgres_url()).await.unwrap();
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut conn)
            .await
            .unwrap();
        conn.close().await.ok();
        PgDatabase { name }
    }

    fn url(&self) -> String {
        let base = url::Url::parse(&postgres_url()).unwrap();
        let mut url = base.clone();
        url.set_path(&self.name);
        url.set_query(None);
        url.to_string()
    }
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        let name = self.name.clone();
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                if let Ok(mut conn) = sqlx::PgConnection::connect(&postgres_url()).await {
                    let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                        "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
                    )))
                    .execute(&mut conn)
                    .await;
                }
            });
        })
        .join();
    }
}

async fn a_backup_taken_while_a_worker_runs_restores_and_status_reads_it(db: Db) {
    let test = TestDb::new(db).await;
    let home = home_on(&test);
    let gate = home.exchange().join("gate");
    let mut shell = OpenShell::start(
        &home,
        &format!(
            "!queue Backed up mid-run mode:gate gate:{}\n!go 1\n",
            gate.display()
        ),
    );
    // The worker runs (and waits for its gate) while the backup is taken.
    shell.wait_for("[STATUS: working] run:1");
    let backup = home.dir.path().join(match db {
        Db::Sqlite => "backup.db",
        Db::Postgres => "backup.dump",
    });
    let out = home.run(&["db", "backup", backup.to_str().unwrap()], "");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("tasks: 1, runs: 1, "), "{stdout}");
    let size = std::fs::metadata(&backup).unwrap();
    assert!(
        stdout.contains(&format!("({} bytes", size.len())),
        "{stdout}"
    );
    assert_eq!(size.permissions().mode() & 0o777, 0o600);
    // Nothing but the backup is left beside it.
    let beside: Vec<_> = std::fs::read_dir(home.dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("backup"))
        .collect();
    assert_eq!(beside.len(), 1, "{beside:?}");
    // Kept aside: what is restored below is this copy, taken mid-run.
    let mid_run = home.dir.path().join("mid-run");
    std::fs::copy(&backup, &mid_run).unwrap();
    // A second backup to the same name is refused; --force replaces it.
    let again = home.run(&["db", "backup", backup.to_str().unwrap()], "");
    assert!(!again.status.success());
    assert!(text(&again).1.contains("exists"), "{}", text(&again).1);
    std::fs::write(&gate, "").unwrap();
    shell.wait_for("[DONE: pr_ready] run:1");
    shell.finish();
    let forced = home.run(&["db", "backup", "--force", backup.to_str().unwrap()], "");
    assert!(forced.status.success(), "{}", text(&forced).1);
    if db == Db::Sqlite {
        // Never over the live database, --force or not.
        let live = test
            .url
            .trim_start_matches("sqlite://")
            .trim_end_matches("?mode=rwc");
        let over = home.run(&["db", "backup", "--force", live], "");
        assert!(!over.status.success());
        assert!(
            text(&over).1.contains("is the database itself"),
            "{}",
            text(&over).1
        );
    }

    let _pg;
    let restored_url = match db {
        Db::Sqlite => format!("sqlite://{}?mode=rwc", mid_run.display()),
        Db::Postgres => {
            let pg = PgDatabase::create().await;
            let restore = Command::new("pg_restore")
                .arg(format!("--dbname={}", pg.url()))
                .arg("--no-owner")
                .arg(&mid_run)
                .output()
                .expect("pg_restore");
            assert!(
                restore.status.success(),
                "{}",
                String::from_utf8_lossy(&restore.stderr)
            );
            let url = format!(
                "{}?options[search_path]={}",
                pg.url(),
                test.schema().unwrap()
            );
            _pg = pg;
            url
        }
    };
    // The copy holds the run as it was: in progress, its worker running.
    let copy = Store::connect(&DatabaseUrl::new(restored_url.clone()))
        .await
        .unwrap();
    let mut tx = copy.begin_read().await.unwrap();
    let run = tx.tasks().run(1).await.unwrap().expect("run 1 in the copy");
    assert_eq!(run.state, RunState::InProgress);
    assert!(run.worker_pid.is_some(), "{run:?}");
    drop(tx);
    copy.close().await;
    let restored = read_status(&restored_url);
    assert!(
        restored.contains("**Run 1** of task #1 (Backed up mid-run"),
        "{restored}"
    );
}

/// `!status` and `!status run 1` through `eagle shell` on a profile whose
/// database is `url` (whose worker, if the run goes on, finds its gate).
fn read_status(url: &str) -> String {
    let mut home = Home::new();
    home.set("EAGLE_DATABASE_URL", url)
        .set("EAGLE_RUNNER__WORKER_COMMAND", "true {prompt}");
    let out = home.run(&["shell"], "!status\n!status run 1\n");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("#1 Backed up mid-run"), "{stdout}");
    stdout
}

/// Runs `sql` on the test's database with `$1` bound to `at`.
async fn exec(test: &TestDb, db: Db, sql: &str, at: DateTime<Utc>) {
    match db {
        Db::Sqlite => {
            let mut conn = sqlx::SqliteConnection::connect(&test.url).await.unwrap();
            sqlx::query(sqlx::AssertSqlSafe(sql.to_string()))
                .bind(at)
                .execute(&mut conn)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
        Db::Postgres => {
            let mut conn = sqlx::PgConnection::connect(&test.url).await.unwrap();
            sqlx::query(sqlx::AssertSqlSafe(sql.to_string()))
                .bind(at)
                .execute(&mut conn)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
    }
}

async fn count(test: &TestDb, db: Db, table: &str) -> i64 {
    let sql = format!("SELECT COUNT(*) FROM {table}");
    match db {
        Db::Sqlite => {
            let mut conn = sqlx::SqliteConnection::connect(&test.url).await.unwrap();
            sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                .fetch_one(&mut conn)
                .await
                .unwrap()
        }
        Db::Postgres => {
            let mut conn = sqlx::PgConnection::connect(&test.url).await.unwrap();
            sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                .fetch_one(&mut conn)
                .await
                .unwrap()
        }
    }
}

/// Every table `eagle db prune` may touch, and those it must never.
const WATCHED: &[&str] = &[
    "outbox",
    "processed_messages",
    "http_cache",
    "analyzer_jobs",
    "run_notices",
    "leases",
    "audit_log",
    "worker_requests",
    "executor_queue",
    "executor_runs",
];

async fn counts(test: &TestDb, db: Db) -> Vec<(&'static str, i64)> {
    let mut all = Vec::new();
    for table in WATCHED {
        all.push((*table, count(test, db, table).await));
    }
    all
}

/// The number a prune's output gives for `table`.
fn said(stdout: &str, table: &str, verb: &str) -> u64 {
    let line = stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some(table))
        .unwrap_or_else(|| panic!("no line for {table} in:\n{stdout}"));
    let rest = line
        .split_once(verb)
        .unwrap_or_else(|| panic!("no {verb:?} in {line:?}"))
        .1;
    rest.split_whitespace()
        .next()
        .unwrap()
        .trim_end_matches(':')
        .parse()
        .unwrap()
}

async fn prune_removes_exactly_the_old_prunable_rows_and_dry_run_nothing(db: Db) {
    let test = TestDb::new(db).await;
    let store = test.open().await;
    let old = Utc::now() - chrono::TimeDelta::days(60);
    let new = Utc::now() - chrono::TimeDelta::days(1);
    let future = Utc::now() + chrono::TimeDelta::days(1);
    // A task and its run (with their audit entries), a decided request.
    let mut tx = store.begin_write().await.unwrap();
    let task = tx
        .tasks()
        .insert_task(&NewTask {
            task_gid: "zulip:1".into(),
            source: "chat".into(),
            title: "kept".into(),
            origin: Origin {
                transport: "zulip".into(),
                ..Origin::default()
            },
            ..NewTask::default()
        })
        .await
        .unwrap()
        .unwrap();
    let run = tx
        .transitions()
        .start_run(task, "human:1 <a@example.com>", "!go")
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let run = run.id;
    let outbox = |at: &str, done: &str| {
        format!(
            "INSERT INTO outbox (identity, created_at, kind, content, ordering_key, next_attempt_at{done}) \
             VALUES ('eagle', {at}, 'message', 'hello', 'k', {at}{})",
            if done.is_empty() { "" } else { ", $1" }
        )
    };
    for (sql, at) in [
        // Outbox: delivered and given up long ago go; recent, and never
        // delivered however old, stay.
        (outbox("$1", ", delivered_at"), old),
        (outbox("$1", ", gave_up_at"), old),
        (outbox("$1", ", delivered_at"), new),
        (outbox("$1", ""), old),
        // Handled messages: old ones go, but the newest of each bot stays.
        ("INSERT INTO processed_messages (identity, message_id, processed_at, outcome) VALUES ('eagle', 1, $1, 'ok')".into(), old),
        ("INSERT INTO processed_messages (identity, message_id, processed_at, outcome) VALUES ('eagle', 2, $1, 'ok')".into(), old),
        ("INSERT INTO processed_messages (identity, message_id, processed_at, outcome) VALUES ('eagle', 3, $1, 'ok')".into(), new),
        ("INSERT INTO processed_messages (identity, message_id, processed_at, outcome) VALUES ('executor', 10, $1, 'ok')".into(), old),
        ("INSERT INTO http_cache (url, etag, body, stored_at) VALUES ('https://a/old', 'e', 'b', $1)".into(), old),
        ("INSERT INTO http_cache (url, etag, body, stored_at) VALUES ('https://a/new', 'e', 'b', $1)".into(), new),
        ("INSERT INTO analyzer_jobs (kind, requested_by, reply_identity, created_at, done_at) VALUES ('count', 'x', 'eagle', $1, $1)".into(), old),
        ("INSERT INTO analyzer_jobs (kind, requested_by, reply_identity, created_at, done_at) VALUES ('count', 'x', 'eagle', $1, $1)".into(), new),
        ("INSERT INTO analyzer_jobs (kind, requested_by, reply_identity, created_at) VALUES ('count', 'x', 'eagle', $1)".into(), old),
        (format!("INSERT INTO run_notices (run_id, kind, text, created_at, posted_at) VALUES ({run}, 'held', 't', $1, $1)"), old),
        (format!("INSERT INTO run_notices (run_id, kind, text, created_at, posted_at) VALUES ({run}, 'held', 't', $1, $1)"), new),
        (format!("INSERT INTO run_notices (run_id, kind, text, created_at) VALUES ({run}, 'held', 't', $1)"), old),
        ("INSERT INTO leases (name, owner, expires_at) VALUES ('runner:gone', 'x', $1)".into(), old),
        ("INSERT INTO leases (name, owner, expires_at) VALUES ('runner:lately', 'x', $1)".into(), new),
        ("INSERT INTO leases (name, owner, expires_at) VALUES ('runner:live', 'x', $1)".into(), future),
        // What is never pruned, however old.
        ("INSERT INTO audit_log (at, actor, action, subject) VALUES ($1, 'test', 'old.entry', 'x')".into(), old),
        (format!("INSERT INTO worker_requests (run_id, kind, action, params_hash, created_at, status, decided_at, decided_by) \
                  VALUES ({run}, 'request', 'run_tests', 'h', $1, 'approved', $1, 'policy')"), old),
    ] {
        exec(&test, db, &sql, at).await;
    }
    let before = counts(&test, db).await;
    let expected: &[(&str, u64)] = &[
        ("outbox", 2),
        ("processed_messages", 2),
        ("http_cache", 1),
        ("analyzer_jobs", 1),
        ("run_notices", 1),
        ("leases", 1),
    ];

    let mut home = Home::new();
    home.set("EAGLE_DATABASE_URL", &test.url);
    let dry = home.run(&["db", "prune", "--older-than", "30d", "--dry-run"], "");
    let (stdout, stderr) = text(&dry);
    assert!(dry.status.success(), "{stderr}");
    for (table, n) in expected {
        assert_eq!(said(&stdout, table, "would remove"), *n, "{stdout}");
    }
    assert!(
        stdout.contains("would remove 8 row(s) in all, nothing changed"),
        "{stdout}"
    );
    assert_eq!(counts(&test, db).await, before, "a dry run changed nothing");

    let out = home.run(&["db", "prune", "--older-than", "30d"], "");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let after = counts(&test, db).await;
    for ((table, was), (_, is)) in before.iter().zip(&after) {
        let want = expected
            .iter()
            .find(|(t, _)| t == table)
            .map_or(0, |(_, n)| *n);
        assert_eq!((was - is) as u64, want, "{table}: {was} → {is}\n{stdout}");
        if want > 0 {
            assert_eq!(said(&stdout, table, "removed"), want, "{stdout}");
        }
    }
    assert!(stdout.contains("removed 8 row(s) in all"), "{stdout}");
    // Exactly the old rows went: the kept ones are the ones said.
    let mut conn_rows = Vec::new();
    for (table, column) in [("processed_messages", "message_id"), ("leases", "name")] {
        let sql = format!("SELECT CAST({column} AS TEXT) FROM {table} ORDER BY 1");
        let rows: Vec<String> = match db {
            Db::Sqlite => {
                let mut conn = sqlx::SqliteConnection::connect(&test.url).await.unwrap();
                sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                    .fetch_all(&mut conn)
                    .await
                    .unwrap()
            }
            Db::Postgres => {
                let mut conn = sqlx::PgConnection::connect(&test.url).await.unwrap();
                sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                    .fetch_all(&mut conn)
                    .await
                    .unwrap()
            }
        };
        conn_rows.push(rows);
    }
    assert_eq!(conn_rows[0], ["10", "3"]);
    assert_eq!(conn_rows[1], ["runner:lately", "runner:live"]);
    // A second prune finds nothing; too short an age is refused.
    let again = home.run(&["db", "prune", "--older-than", "30d"], "");
    assert!(
        text(&again).0.contains("removed 0 row(s) in all"),
        "{}",
        text(&again).0
    );
    let short = home.run(&["db", "prune", "--older-than", "2h"], "");
    assert!(!short.status.success());
    assert!(
        text(&short).1.contains("shorter than a day"),
        "{}",
        text(&short).1
    );
    store.close().await;
}

/// Adds a migration this binary does not know, as a newer Eagle would.
async fn add_future_migration(test: &TestDb, db: Db) {
    let sql = "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
               VALUES (9999, 'from the future', TRUE, $1, 0)";
    let checksum = vec![0u8; 48];
    match db {
        Db::Sqlite => {
            let mut conn = sqlx::SqliteConnection::connect(&test.url).await.unwrap();
            sqlx::query(sql)
                .bind(checksum)
                .execute(&mut conn)
                .await
                .unwrap();
        }
        Db::Postgres => {
            let mut conn = sqlx::PgConnection::connect(&test.url).await.unwrap();
            sqlx::query(sql)
                .bind(checksum)
                .execute(&mut conn)
                .await
                .unwrap();
        }
    }
}

async fn migrate_check_says_pending_then_up_to_date_and_a_newer_database_is_refused(db: Db) {
    let test = TestDb::new(db).await;
    let mut home = Home::new();
    home.set("EAGLE_DATABASE_URL", &test.url);
    let n = migration_count();

    let fresh = home.run(&["migrate", "--check"], "");
    let (stdout, stderr) = text(&fresh);
    assert_eq!(fresh.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(
        stdout.contains(&format!("{n} migration(s) pending")),
        "{stdout}"
    );
    assert!(stdout.contains("  0001 init"), "{stdout}");
    assert!(stdout.contains(&format!("  {n:04} ")), "{stdout}");
    // The check applied nothing.
    let again = home.run(&["migrate", "--check"], "");
    assert_eq!(again.status.code(), Some(2));

    let migrate = home.run(&["migrate"], "");
    assert!(migrate.status.success(), "{}", text(&migrate).1);
    let current = home.run(&["migrate", "--check"], "");
    let (stdout, stderr) = text(&current);
    assert_eq!(current.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains(&format!("up to date, {n} migration(s) applied")),
        "{stdout}"
    );

    add_future_migration(&test, db).await;
    for args in [&["migrate", "--check"][..], &["migrate"][..]] {
        let out = home.run(args, "");
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stdout}\n{stderr}");
        assert!(stderr.contains("newer than this eagle"), "{stderr}");
        assert!(stderr.contains("9999 from the future"), "{stderr}");
        assert!(stderr.contains("upgrade eagle"), "{stderr}");
    }
    let shell = home.run(&["shell"], "!status\n");
    let (stdout, stderr) = text(&shell);
    assert!(!shell.status.success(), "{stdout}");
    assert!(stderr.contains("9999 from the future"), "{stderr}");
    assert!(stderr.contains("upgrade eagle"), "{stderr}");
    // The database is left as it was: nothing wrote to it.
    let store = Store::connect(&DatabaseUrl::new(test.url.clone()))
        .await
        .unwrap();
    assert_eq!(store.applied_migrations().await.unwrap(), n + 1);
    store.close().await;
}

/// Without `pg_dump` on `PATH`, the command to run is printed, its
/// password redacted; with one, the password reaches it in `PGPASSWORD`,
/// never on its command line.
#[test]
fn pg_backup_hands_the_password_over_apart_and_prints_the_command_without_pg_dump() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let schema = runtime.block_on(crate::support::PgSchema::create());
    let secret = "s3cr%23t-word";
    let mut url = url::Url::parse(&schema.url()).unwrap();
    url.set_password(Some(secret)).unwrap();
    let mut home = Home::new();
    home.set("EAGLE_DATABASE_URL", url.as_str());
    let migrated = home.run(&["migrate"], "");
    assert!(migrated.status.success(), "{}", text(&migrated).1);
    let empty = home.dir.path().join("empty-bin");
    std::fs::create_dir(&empty).unwrap();
    home.set("PATH", empty.to_str().unwrap());
    let file = home.dir.path().join("x.dump");
    let out = home.run(&["db", "backup", file.to_str().unwrap()], "");
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(stderr.contains("pg_dump is not on PATH"), "{stderr}");
    assert!(
        stdout.starts_with("PGPASSWORD='***' pg_dump --format=custom --file "),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("--schema={}", schema.name)),
        "{stdout}"
    );
    assert!(
        stdout.contains("--dbname=postgres://postgres@127.0.0.1:5432/postgres"),
        "{stdout}"
    );
    for shown in [&stdout, &stderr] {
        assert!(!shown.contains("s3cr"), "{shown}");
    }
    assert!(!file.exists());
    assert_eq!(
        std::fs::read_dir(home.dir.path())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().contains("x.dump"))
            })
            .count(),
        0
    );

    // A pg_dump that tells what it got.
    let bin = home.dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let seen = home.dir.path().join("seen");
    let script = bin.join("pg_dump");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprintf 'args: %s\\n' \"$*\" >{seen}\nprintf 'password: %s\\n' \"$PGPASSWORD\" >>{seen}\n\
             while [ $# -gt 0 ]; do if [ \"$1\" = --file ]; then printf dump >\"$2\"; fi; shift; done\n",
            seen = seen.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    home.set("PATH", bin.to_str().unwrap());
    let out = home.run(&["db", "backup", file.to_str().unwrap()], "");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let seen = std::fs::read_to_string(&seen).unwrap();
    let args = seen.lines().find_map(|l| l.strip_prefix("args: ")).unwrap();
    assert!(!args.contains("s3cr"), "{args}");
    assert!(args.contains("--format=custom"), "{args}");
    assert!(seen.contains("password: s3cr#t-word"), "{seen}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "dump");
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(!stdout.contains("s3cr") && !stderr.contains("s3cr"));
    drop(schema);
}

async fn the_pruner_prunes_once_a_day_with_the_profiles_retention(db: Db) {
    let test = TestDb::new(db).await;
    let store = test.open().await;
    let old = Utc::now() - chrono::TimeDelta::days(40);
    let cache = "INSERT INTO http_cache (url, etag, body, stored_at) VALUES ($1, 'e', 'b', $1)";
    exec(&test, db, &cache.replacen("($1", "('https://a/1'", 1), old).await;
    let mut pruner = eagle::eagle::pruner::Pruner::new(
        store.clone(),
        std::time::Duration::from_secs(30 * 24 * 3600),
    );
    let stop = tokio_util::sync::CancellationToken::new();
    assert!(
        eagle::runtime::background::once(&mut pruner, &store, "test".into(), &stop)
            .await
            .unwrap()
    );
    assert_eq!(count(&test, db, "http_cache").await, 0);
    // Within the day it does not prune again, however often it looks.
    exec(&test, db, &cache.replacen("($1", "('https://a/2'", 1), old).await;
    assert!(
        eagle::runtime::background::once(&mut pruner, &store, "test".into(), &stop)
            .await
            .unwrap()
    );
    assert_eq!(count(&test, db, "http_cache").await, 1);
    // Another instance holding the lease prunes; this one does nothing.
    let mut other =
        eagle::eagle::pruner::Pruner::new(store.clone(), std::time::Duration::from_secs(24 * 3600));
    assert!(
        store
            .leases()
            .acquire_lease("pruner", "someone-else", std::time::Duration::from_secs(60))
            .await
            .unwrap()
    );
    assert!(
        !eagle::runtime::background::once(&mut other, &store, "test".into(), &stop)
            .await
            .unwrap()
    );
    // A backlog larger than a batch goes whole, a batch per transaction.
    let many = match db {
        Db::Sqlite => {
            "INSERT INTO http_cache (url, etag, body, stored_at) \
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 12001) \
             SELECT 'https://b/' || i, 'e', 'b', $1 FROM n"
        }
        Db::Postgres => {
            "INSERT INTO http_cache (url, etag, body, stored_at) \
             SELECT 'https://b/' || i, 'e', 'b', $1 FROM generate_series(1, 12001) AS i"
        }
    };
    exec(&test, db, many, old).await;
    const { assert!(12001 > 2 * eagle::store::PRUNE_BATCH) };
    let cut = Utc::now() - chrono::TimeDelta::days(30);
    let pruned = store.prune_older_than(cut, false).await.unwrap();
    let cache = pruned.iter().find(|p| p.table == "http_cache").unwrap();
    assert_eq!(cache.rows, 12002);
    assert_eq!(count(&test, db, "http_cache").await, 0);
    store.close().await;
}
