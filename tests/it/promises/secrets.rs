//! What Eagle keeps to itself: its environment in `/proc`, unreadable by a
//! process of its own user, and no secret in a trace log or the database.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::support::{Db, Home, TestDb, text};

/// Whether `who` (a uid) can read `path`, as a process of that user with
/// no capabilities: `Some(text)` when it could.
fn read_as(uid: u32, gid: u32, path: &Path) -> Result<String, String> {
    use std::os::unix::process::CommandExt;
    let out = std::process::Command::new("cat")
        .arg(path)
        .uid(uid)
        .gid(gid)
        .env_clear()
        .stdin(Stdio::null())
        .output()
        .expect("cat");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn a_process_of_eagles_own_user_cannot_read_its_environment() {
    assert_eq!(
        eagle::ground::host::euid(),
        0,
        "this test runs Eagle as another user: run it as root (CI does)"
    );
    let user = eagle::ground::host::lookup_user(crate::support::worker_user())
        .unwrap()
        .expect("the test worker user");
    let mut home = Home::new();
    home.env.remove("EAGLE_RUNNER__WORKER_USER");
    home.env.remove("EAGLE_ANALYZER__WORKER_USER");
    let secret = "planted-secret-in-eagles-environment";
    home.set("PLANTED_SECRET", secret);
    // Eagle runs as the test user, in a home that user owns.
    let chown = std::process::Command::new("chown")
        .arg("-R")
        .arg(format!("{}:{}", user.uid, user.gid))
        .arg(home.dir.path())
        .status()
        .unwrap();
    assert!(chown.success());
    let mut child = {
        use std::os::unix::process::CommandExt;
        home.command(&["shell"])
            .uid(user.uid)
            .gid(user.gid)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // Its answer to a command says it is past its start-up (and hardened).
    let mut stdin = child.stdin.take().unwrap();
    std::io::Write::write_all(&mut stdin, b"!status\n").unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let answered = loop {
        match rx.recv_timeout(crate::support::WAIT) {
            Ok(line) if line.contains("Nothing queued or running") => break true,
            Ok(_) => continue,
            Err(_) => break false,
        }
    };
    let environ = PathBuf::from(format!("/proc/{}/environ", child.id()));
    let eagle_read = read_as(user.uid, user.gid, &environ);
    // The same user reads the environment of a process of its that is not
    // hardened: the check above means something.
    let mut plain = {
        use std::os::unix::process::CommandExt;
        std::process::Command::new("sleep")
            .arg("60")
            .env("PLAIN", "readable")
            .uid(user.uid)
            .gid(user.gid)
            .spawn()
            .unwrap()
    };
    let plain_read = read_as(
        user.uid,
        user.gid,
        &PathBuf::from(format!("/proc/{}/environ", plain.id())),
    );
    let _ = plain.kill();
    let _ = plain.wait();
    drop(stdin);
    let out = crate::support::finish(child, b"", "eagle shell");
    let (_, stderr) = text(&out);
    assert!(answered, "the shell did not answer:\n{stderr}");
    assert!(
        plain_read.as_deref().is_ok_and(|t| t.contains("readable")),
        "{plain_read:?}"
    );
    match eagle_read {
        Ok(text) => panic!(
            "a process of Eagle's own user read its environment (secret there: {})",
            text.contains(secret)
        ),
        Err(error) => assert!(error.contains("Permission denied"), "{error}"),
    }
}

/// What a store holds, as bytes to search: the SQLite files, or a dump of
/// the PostgreSQL schema.
fn database_bytes(test_db: &TestDb) -> Vec<u8> {
    match test_db.schema() {
        Some(schema) => {
            let out = std::process::Command::new("pg_dump")
                .args(["--data-only", "--schema", schema])
                .arg(crate::support::postgres_url())
                .output()
                .expect("pg_dump");
            assert!(
                out.status.success(),
                "pg_dump: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            out.stdout
        }
        None => {
            let path = test_db
                .url
                .trim_start_matches("sqlite://")
                .split('?')
                .next()
                .unwrap()
                .to_string();
            let mut bytes = Vec::new();
            for suffix in ["", "-wal", "-shm"] {
                if let Ok(more) = std::fs::read(format!("{path}{suffix}")) {
                    bytes.extend(more);
                }
            }
            assert!(!bytes.is_empty(), "no database at {path}");
            bytes
        }
    }
}

/// Through a run that asks on its socket (the run token), reaches `pr`
/// and is polled on GitHub (the token) by two processes on Zulip (their
/// keys), every log line at `trace` and the whole database hold none of
/// those secrets, raw or encoded.
async fn no_secret_reaches_a_trace_log_or_the_database(db: Db) {
    use crate::prloop::{SHA1, hub, queue_and_go, start, wait_run_post};
    use crate::zulip::Realm;
    let test_db = TestDb::new(db).await;
    let realm = Realm::start().await;
    let hub = hub().await;
    let number = hub.open_draft("eagle/run-1");
    hub.check(SHA1, "completed", Some("success"));
    let scripts = tempfile::tempdir().unwrap();
    eagle::ground::host::chmod(scripts.path(), 0o755).unwrap();
    let tokens = scripts.path().join("tokens");
    std::fs::write(&tokens, "").unwrap();
    eagle::ground::host::chmod(&tokens, 0o666).unwrap();
    let worker = scripts.path().join("worker.sh");
    std::fs::write(
        &worker,
        format!(
            "#!/usr/bin/env bash\n\
             echo \"$EAGLE_RUN_TOKEN\" >> {tokens}\n\
             eagle request run_tests \"the suite\" || exit 1\n\
             echo \"[DONE: pr_ready] run:$EAGLE_RUN_ID PR #{number} opened\"\n",
            tokens = tokens.display()
        ),
    )
    .unwrap();
    eagle::ground::host::chmod(&worker, 0o755).unwrap();
    let command = format!("bash {} {{prompt}}", worker.display());
    let (_home, eagle, executor) = start(
        &realm,
        &hub,
        &test_db,
        &[
            ("RUST_LOG", "trace"),
            ("EAGLE_RUNNER__WORKER_COMMAND", &command),
        ],
    )
    .await;
    let store = test_db.open().await;
    queue_and_go(&realm, "Fix the tab preview").await;
    wait_run_post(
        &realm,
        realm.executor,
        &format!("[STATUS: pr] run:1 PR #{number} waits"),
    )
    .await;
    // The PR loop polled GitHub with the token.
    let polled = crate::executor::wait_for(&store, || async {
        let mut tx = store.begin_read().await.unwrap();
        tx.tasks()
            .run(1)
            .await
            .unwrap()
            .is_some_and(|r| r.pr_checked_at.is_some())
    })
    .await;
    assert!(polled, "{}", executor.log());
    let (code, eagle_log) = eagle.stop();
    assert_eq!(code, Some(0), "{eagle_log}");
    let (code, executor_log) = executor.stop();
    assert_eq!(code, Some(0), "{executor_log}");

    let run_tokens: Vec<String> = std::fs::read_to_string(&tokens)
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    assert!(!run_tokens.is_empty(), "the worker never ran");
    let mut secrets: Vec<(String, String)> = vec![
        ("the GitHub token".into(), hub.token.clone()),
        (
            "the executor's Zulip key".into(),
            realm.fake.api_key(realm.executor),
        ),
        ("Eagle's Zulip key".into(), realm.fake.api_key(realm.eagle)),
    ];
    for token in &run_tokens {
        secrets.push(("a run token".into(), token.clone()));
    }
    let database = String::from_utf8_lossy(&database_bytes(&test_db)).into_owned();
    for (what, secret) in &secrets {
        for form in crate::cli::encodings_of("executor-bot@example.com", secret) {
            for (place, text) in [
                ("Eagle's trace log", &eagle_log),
                ("the executor's trace log", &executor_log),
                ("the database", &database),
            ] {
                assert!(!text.contains(&form), "{what} ({form:?}) is in {place}");
            }
        }
    }
    // The logs were at trace level, and saw the flow: the search meant something.
    for log in [&eagle_log, &executor_log] {
        assert!(log.contains("TRACE"), "{log}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_reaches_a_trace_log_or_the_database_on_sqlite() {
    no_secret_reaches_a_trace_log_or_the_database(Db::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_reaches_a_trace_log_or_the_database_on_postgres() {
    no_secret_reaches_a_trace_log_or_the_database(Db::Postgres).await;
}
