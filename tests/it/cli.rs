//! The `eagle` binary end to end: the shell, profiles, migrations, and
//! what must never be printed.

use base64::Engine as _;

use crate::support::{Home, PgSchema, text};

#[test]
fn help_and_version() {
    let home = Home::new();
    let out = home.run(&["--help"], "");
    assert!(out.status.success());
    let (stdout, _) = text(&out);
    for sub in ["run", "shell", "migrate", "profile", "check"] {
        assert!(
            stdout.contains(sub),
            "--help does not mention {sub}:\n{stdout}"
        );
    }
    let out = home.run(&["--version"], "");
    assert_eq!(
        text(&out).0.trim(),
        format!("eagle {}", env!("CARGO_PKG_VERSION"))
    );
    let out = home.run(&["frobnicate"], "");
    assert_eq!(out.status.code(), Some(2), "usage errors exit 2");
}

#[test]
fn shell_queues_lists_and_remembers() {
    let home = Home::new();
    let out = home.run(&["shell"], "!queue Fix the tab preview\n!status\n");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stderr: {stderr}");
    assert!(
        stdout.contains("Queued task #1: Fix the tab preview"),
        "stdout:\n{stdout}"
    );
    let queued = stdout.find("Queued task #1").unwrap();
    let listed = stdout
        .find("#1 Fix the tab preview (")
        .expect("the status lists the task");
    assert!(
        queued < listed,
        "the task was listed before it was queued:\n{stdout}"
    );
    // The analyzer keeps it (filters only): it waits for an approver's `!go`.
    // A second run sees the same database.
    let out = home.run(&["shell"], "!status\n");
    let (stdout, _) = text(&out);
    assert!(out.status.success());
    assert!(
        stdout.contains("#1 Fix the tab preview (for_review"),
        "stdout:\n{stdout}"
    );
    assert!(
        stdout.contains("**Tasks**: 1 for_review"),
        "stdout:\n{stdout}"
    );
    assert!(!stdout.contains("Queued task #2"));
    // The database file is where the profile says.
    assert!(home.dir.path().join("data/eagle.db").is_file());
}

/// `cargo run` hands the binary the environment cargo builds with (every
/// `cargo:rustc-env` of the build script included); Eagle must start in it.
#[test]
fn shell_runs_in_the_environment_cargo_gives_it() {
    let home = Home::new();
    let mut cmd = std::process::Command::new(crate::support::eagle_bin());
    cmd.arg("shell")
        .envs(std::env::vars().filter(|(k, _)| {
            k.starts_with("CARGO") || k.starts_with("EAGLE_") || k.starts_with("BUILT_")
        }))
        .envs(&home.env)
        .current_dir(home.dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let out = crate::support::finish(cmd.spawn().unwrap(), b"!status\n", "eagle shell");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("Nothing queued or running"), "{stdout}");
}

#[test]
fn shell_answers_several_commands_and_bad_input() {
    let mut home = Home::new();
    home.set("EAGLE_APPROVERS", "boss@example.com");
    home.set("EAGLE_OWNER", "boss@example.com");
    let input = "!queue Write docs\nIn the README.\n\
                 !status 1\n!status 99\n!status run 5\n!approve 1\n!bogus\n> !queue hidden\n\
                 !why task 1\n";
    let out = home.run(
        &["shell", "--topic", "Docs", "--user", "me@example.com"],
        input,
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stderr: {stderr}");
    for want in [
        "Queued task #1: Write docs",
        "**Task #1**: Write docs",
        "in #shell > Docs",
        "There is no task #99.",
        "There is no run 5.",
        "You may not use `!approve`: you are not in this profile's approvers.",
        "I don't know the command `!bogus`.",
        "human:0 <me@example.com> · task.queued",
    ] {
        assert!(stdout.contains(want), "missing {want:?} in:\n{stdout}");
    }
    assert!(
        !stdout.contains("hidden"),
        "a quoted command ran:\n{stdout}"
    );
}

#[test]
fn shell_works_on_postgres() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let schema = runtime.block_on(PgSchema::create());
    let mut home = Home::new();
    home.set("EAGLE_DATABASE_URL", &schema.url());
    let out = home.run(&["shell"], "!queue On PostgreSQL\n");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stderr: {stderr}");
    assert!(stdout.contains("Queued task #1: On PostgreSQL"), "{stdout}");
    let out = home.run(&["shell"], "!status\n");
    assert!(text(&out).0.contains("#1 On PostgreSQL (for_review"));
    assert!(!home.dir.path().join("data/eagle.db").exists());
    drop(schema);
}

/// Every shell session numbers its lines from one counter: the first
/// `!queue` of a later session is a new task, never "queued already".
#[test]
fn two_shell_sessions_one_after_another_each_queue_a_task() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let schema = runtime.block_on(PgSchema::create());
    for postgres in [false, true] {
        let mut home = Home::new();
        if postgres {
            home.set("EAGLE_DATABASE_URL", &schema.url());
        }
        let first = home.run(&["shell"], "!queue First task\n");
        let (stdout, stderr) = text(&first);
        assert!(first.status.success(), "stderr: {stderr}");
        assert!(stdout.contains("Queued task #1: First task"), "{stdout}");
        let second = home.run(&["shell"], "!queue Second task\n!status\n");
        let (stdout, stderr) = text(&second);
        assert!(second.status.success(), "stderr: {stderr}");
        assert!(stdout.contains("Queued task #2: Second task"), "{stdout}");
        assert!(!stdout.contains("queued already"), "{stdout}");
        assert!(stdout.contains("#1 First task ("), "{stdout}");
        assert!(stdout.contains("#2 Second task ("), "{stdout}");
    }
    drop(schema);
}

#[test]
fn migrate_reports_what_it_did() {
    let home = Home::new();
    let out = home.run(&["migrate"], "");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stderr: {stderr}");
    let n = crate::support::migration_count();
    assert!(
        stdout.contains(&format!(
            "{n} migration(s) applied now, {n} in all (sqlite backend)"
        )),
        "{stdout}"
    );
    let out = home.run(&["migrate", "--profile", "executor"], "");
    assert!(
        text(&out)
            .0
            .contains(&format!("0 migration(s) applied now, {n} in all"))
    );
}

#[test]
fn profiles_list_show_and_clone() {
    let home = Home::new();
    let out = home.run(&["profile", "list"], "");
    let (stdout, _) = text(&out);
    assert!(stdout.contains("eagle\torchestrator\tEagle"), "{stdout}");
    assert!(
        stdout.contains("executor\texecutor\tИсполнитель"),
        "{stdout}"
    );

    let out = home.run(&["profile", "show", "executor"], "");
    let (stdout, stderr) = text(&out);
    assert!(
        out.status.success(),
        "show works without Zulip credentials: {stderr}"
    );
    assert!(stdout.contains("role:          executor"), "{stdout}");
    assert!(stdout.contains("zulip:         not usable:"), "{stdout}");

    let out = home.run(&["profile", "create", "reviewer", "--clone", "eagle"], "");
    assert!(out.status.success(), "{}", text(&out).1);
    let created = std::fs::read_to_string(home.profiles().join("reviewer.toml")).unwrap();
    assert!(
        created.contains("zuliprc = \"reviewer.zuliprc\""),
        "the clone shares a bot:\n{created}"
    );
    assert!(home.profiles().join("reviewer.soul.md").is_file());
    let out = home.run(&["profile", "show", "reviewer"], "");
    assert!(text(&out).0.contains("profile:       reviewer"));
    let out = home.run(&["profile", "create", "reviewer", "--clone", "eagle"], "");
    assert!(!out.status.success());
    assert!(text(&out).1.contains("exists already"));
}

#[test]
fn a_bad_profile_is_refused_with_file_key_and_reason() {
    let home = Home::new();
    let path = home.profiles().join("eagle.toml");
    let text_before = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text_before.replace(
            "approvers = []",
            "approvers = [\"alex@example.com\", \"bob\"]",
        ),
    )
    .unwrap();
    for args in [
        &["shell"][..],
        &["profile", "show", "eagle"],
        &["migrate"],
        &["run"],
    ] {
        let out = home.run(args, "");
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(
            stderr.contains("eagle.toml: approvers[1]: \"bob\" is neither an email nor a user id"),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn unknown_profile_is_a_clear_error() {
    let home = Home::new();
    let out = home.run(&["shell", "--profile", "nobody"], "");
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).1.contains("nobody.toml: no such profile file"));
}

/// Every encoding in which an API key could leak.
pub fn encodings_of(email: &str, key: &str) -> Vec<String> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut forms = vec![
        key.to_string(),
        url::form_urlencoded::byte_serialize(key.as_bytes()).collect::<String>(),
        b64.encode(format!("{email}:{key}")),
        b64.encode(key),
    ];
    // The key inside a longer base64 text starts at any of three alignments.
    for pad in ["", "x", "xx"] {
        let encoded = b64.encode(format!("{pad}{key}"));
        let skip = (pad.len() * 4).div_ceil(3) + 1;
        forms.push(encoded[skip..encoded.len().saturating_sub(4)].to_string());
    }
    forms
}

#[test]
fn no_secret_is_ever_printed() {
    let mut home = Home::new();
    let key = "Sup3r+Secret/Key=Value%42";
    let email = "eagle-bot@example.com";
    std::fs::write(
        home.profiles().join("eagle.zuliprc"),
        format!("[api]\nemail={email}\nkey={key}\nsite=http://127.0.0.1:9/\n"),
    )
    .unwrap();
    // The plugins compiled before trace logging is on (`check` loads them;
    // the home's copy of the shared cache has them unless the binary's
    // engine changed): Cranelift logging every instruction would take minutes.
    assert!(home.run(&["policy", "list"], "").status.success());
    home.set("RUST_LOG", "trace");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let schema = runtime.block_on(PgSchema::create());
    // Trust authentication ignores the password, which must not leak either.
    let db_password = "Db-Pa55word-Secret";
    let url = schema
        .url()
        .replacen("postgres@", &format!("postgres:{db_password}@"), 1);
    home.set("EAGLE_DATABASE_URL", &url);
    let mut outputs = Vec::new();
    for args in [
        &["profile", "show", "eagle"][..],
        &["profile", "list"],
        &["migrate"],
        &["shell"],
        &["check"],
    ] {
        let out = home.run(args, "!queue secret test\n!status\n");
        let (stdout, stderr) = text(&out);
        outputs.push((args, stdout, stderr));
    }
    let show = &outputs[0].1;
    assert!(show.contains("API key: present"), "{show}");
    assert!(show.contains("postgres:***@"), "{show}");
    let mut forms = encodings_of(email, key);
    forms.push(db_password.into());
    for (args, stdout, stderr) in &outputs {
        assert!(
            !stderr.is_empty() || !stdout.is_empty(),
            "{args:?} printed nothing"
        );
        for form in &forms {
            assert!(
                !stdout.contains(form.as_str()),
                "{args:?} stdout leaks {form:?}:\n{stdout}"
            );
            assert!(
                !stderr.contains(form.as_str()),
                "{args:?} stderr leaks {form:?}:\n{stderr}"
            );
        }
    }
    // The trace log did log something, so the check above means something.
    assert!(
        outputs[3].2.contains("TRACE") || outputs[3].2.contains("DEBUG"),
        "{}",
        outputs[3].2
    );
    drop(schema);
}

#[test]
fn the_executor_refuses_to_start_without_a_worker_command() {
    let mut home = Home::new();
    home.env.remove("EAGLE_RUNNER__WORKER_USER");
    std::fs::write(
        home.profiles().join("executor.zuliprc"),
        "[api]\nemail=executor-bot@example.com\nkey=abcdefghijklmnop\nsite=http://127.0.0.1:9\n",
    )
    .unwrap();
    let out = home.run(&["run", "--profile", "executor"], "");
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("no worker command: set runner.worker_command in the executor profile"),
        "{stderr}"
    );
    assert!(!stderr.contains("abcdefghijklmnop"));
    let out = home.run(&["check", "--profile", "executor"], "");
    let (stdout, _) = text(&out);
    assert!(
        stdout.contains("FAIL  no worker command: set runner.worker_command"),
        "{stdout}"
    );
    let isolation = if eagle::ground::host::euid() == 0 {
        "FAIL  workers would run as root"
    } else {
        "WARN  workers run as Eagle's own user"
    };
    assert!(stdout.contains(isolation), "{stdout}");
    assert_ne!(out.status.code(), Some(0));
}
