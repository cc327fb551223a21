//! What a started worker gets: its run's variables and the allowed names,
//! no inherited descriptor, the prompt on stdin and on no command line.

use std::collections::BTreeMap;

use super::script;
use crate::support::{Db, Home, TestDb, text};

/// Secrets planted in Eagle's own environment: none may reach a worker.
const PLANTED: &[(&str, &str)] = &[
    ("GITHUB_TOKEN", "ghp_planted0github0token0value0000000"),
    ("GH_TOKEN", "gho_planted0gh0token0value00000000000"),
    ("ASANA_TOKEN", "2/planted-asana-token-value-000000"),
    ("PGPASSWORD", "planted-pg-password-value"),
    ("ZULIP_API_KEY", "planted-zulip-api-key-value"),
    ("ZULIP_EMAIL", "planted-zulip@example.com"),
    ("AWS_SECRET_ACCESS_KEY", "planted-aws-secret-value"),
];

/// A home on `db` (SQLite in the home, or a PostgreSQL schema).
fn home_on(test_db: &TestDb, db: Db) -> Home {
    let mut home = Home::new();
    if db == Db::Postgres {
        home.set("EAGLE_DATABASE_URL", &test_db.url);
    }
    home
}

/// Lines of `KEY=value` as a map (values may hold `=`).
fn env_map(text: &str) -> BTreeMap<String, String> {
    text.split('\0')
        .filter_map(|entry| entry.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

async fn a_started_worker_gets_only_its_runs_variables_and_the_allowed_names(db: Db) {
    let test_db = TestDb::new(db).await;
    let mut home = home_on(&test_db, db);
    let out_dir = home.exchange();
    let worker = script(
        &home,
        "env-worker.sh",
        &format!(
            "out={out}\n\
             cat /proc/$$/environ > \"$out/environ\"\n\
             cat /proc/$$/cmdline > \"$out/cmdline\"\n\
             cat /proc/$PPID/cmdline > \"$out/shim-cmdline\"\n\
             ls /proc/$$/fd > \"$out/fds\"\n\
             cat > \"$out/stdin\"\n\
             echo \"[DONE: abandoned] run:$EAGLE_RUN_ID seen\"",
            out = out_dir.display()
        ),
    );
    home.set(
        "EAGLE_RUNNER__WORKER_COMMAND",
        &format!("bash {} {{prompt}}", worker.display()),
    )
    .set("EAGLE_RUNNER__WORKER_ENV", "ANTHROPIC_API_KEY")
    .set("ANTHROPIC_API_KEY", "sk-ant-allowed-for-the-worker")
    .set(
        "DATABASE_URL",
        "postgres://eagle:planted-db-password@127.0.0.1/eagle",
    );
    for (name, value) in PLANTED {
        home.set(name, value);
    }
    // A descriptor the process that starts Eagle leaves inheritable (a
    // build tool's jobserver pipe, say): the worker must not get it.
    let planted = std::fs::File::open("/dev/null").unwrap();
    let planted_fd = std::os::fd::AsRawFd::as_raw_fd(&planted);
    // SAFETY: clearing FD_CLOEXEC on a descriptor this test owns.
    unsafe {
        libc::fcntl(planted_fd, libc::F_SETFD, 0);
    }
    let marker = "Secret-title-marker-4f1c";
    let out = home.run(&["shell"], &format!("!queue {marker}\n!go 1\n"));
    drop(planted);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("[DONE: abandoned] run:1"),
        "the worker did not run:\n{stdout}\n{stderr}"
    );

    // Its standard streams and bash's own script descriptor (255), nothing
    // inherited from Eagle or from whatever started it.
    let fds = std::fs::read_to_string(out_dir.join("fds")).unwrap();
    let fds: Vec<&str> = fds.split_whitespace().collect();
    assert!(
        fds.iter().all(|fd| ["0", "1", "2", "255"].contains(fd)),
        "the worker inherited descriptors {fds:?} (planted: {planted_fd})"
    );
    let env = env_map(&std::fs::read_to_string(out_dir.join("environ")).unwrap());
    // Only the run's own EAGLE_* keys, nothing of Zulip's or the database's.
    let eagle_keys: Vec<&String> = env.keys().filter(|k| k.starts_with("EAGLE_")).collect();
    assert_eq!(
        eagle_keys,
        ["EAGLE_RUN_ID", "EAGLE_RUN_SOCKET", "EAGLE_RUN_TOKEN"],
        "{env:#?}"
    );
    assert!(!env.keys().any(|k| k.starts_with("ZULIP_")), "{env:#?}");
    assert!(!env.contains_key("DATABASE_URL"), "{env:#?}");
    // Every key is one Eagle sets, a locale one, the allowed name, or bash's own.
    let allowed = [
        "PATH",
        "HOME",
        "TMPDIR",
        "USER",
        "LOGNAME",
        "LANG",
        "LC_ALL",
        "LC_CTYPE",
        "TZ",
        "TERM",
        "ANTHROPIC_API_KEY",
        "EAGLE_RUN_ID",
        "EAGLE_RUN_SOCKET",
        "EAGLE_RUN_TOKEN",
    ];
    for key in env.keys() {
        assert!(
            allowed.contains(&key.as_str()),
            "{key} reached the worker: {env:#?}"
        );
    }
    assert_eq!(
        env.get("ANTHROPIC_API_KEY").map(String::as_str),
        Some("sk-ant-allowed-for-the-worker")
    );
    let everything = std::fs::read_to_string(out_dir.join("environ")).unwrap();
    for (name, value) in PLANTED {
        assert!(
            !everything.contains(value),
            "{name}'s value reached the worker"
        );
    }
    assert!(!everything.contains("planted-db-password"));

    // The prompt (it carries the task's text) came on stdin, and no
    // command line any local user can read shows it.
    let stdin = std::fs::read_to_string(out_dir.join("stdin")).unwrap();
    assert!(
        stdin.contains(marker),
        "the prompt did not reach the worker: {stdin}"
    );
    for file in ["cmdline", "shim-cmdline"] {
        let cmdline = std::fs::read(out_dir.join(file)).unwrap();
        let cmdline = String::from_utf8_lossy(&cmdline);
        assert!(
            !cmdline.contains(marker),
            "the task's text is on the {file}: {cmdline:?}"
        );
        assert!(!cmdline.is_empty(), "{file} was not read");
    }
    // Nor did the file it was handed over in stay behind.
    let eagle_dir = home.dir.path().join("data/executor/runs/1/eagle");
    let left: Vec<_> = std::fs::read_dir(&eagle_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("prompt"))
        .collect();
    assert!(left.is_empty(), "{left:?} in {}", eagle_dir.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_started_worker_gets_only_its_runs_variables_and_the_allowed_names_on_sqlite() {
    a_started_worker_gets_only_its_runs_variables_and_the_allowed_names(Db::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_started_worker_gets_only_its_runs_variables_and_the_allowed_names_on_postgres() {
    a_started_worker_gets_only_its_runs_variables_and_the_allowed_names(Db::Postgres).await;
}

#[test]
fn a_prompt_inside_a_word_of_the_worker_command_is_refused() {
    let mut home = Home::new();
    home.set("EAGLE_RUNNER__WORKER_COMMAND", "claude --prompt={prompt}");
    let out = home.run(&["check", "--profile", "executor"], "");
    let (stdout, stderr) = text(&out);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        format!("{stdout}{stderr}").contains("{prompt} must be a word of its own"),
        "{stdout}\n{stderr}"
    );
}
