//! `eagle policy`: what its commands print and how they exit, and what a
//! plugin cannot make them print.

use eagle::policy::content_hash;

use crate::support::{Home, builtin_file, fixture, text};

#[test]
fn policy_commands_print_votes_and_exit_codes() {
    let home = Home::new();
    let out = home.run(&["policy", "list"], "");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("1. default-approval 0.1.0"), "{stdout}");
    assert!(stdout.contains("2. default-filter 0.1.0"), "{stdout}");
    assert!(stdout.contains("interface: eagle:policy@0.1.0"), "{stdout}");
    let sha = content_hash(&std::fs::read(builtin_file("default-approval")).unwrap());
    assert!(stdout.contains(&sha), "{stdout}");

    for (line, word) in [
        ("[REQUEST: merge_pr] run:42 PR #1234", "decision: escalate"),
        (
            "[REQUEST: run_tests] run:42 all of them",
            "decision: approve",
        ),
        (
            "[REQUEST: modify_unrelated_file] run:42 TabBar.swift",
            "decision: deny",
        ),
    ] {
        let out = home.run(&["policy", "test", "--request", line], "");
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(0), "{line}: {stderr}");
        assert!(stdout.contains(word), "{line}:\n{stdout}");
        assert!(
            stdout.contains("default-approval 0.1.0 (builtin:default-approval, sha256:"),
            "{stdout}"
        );
    }

    let task_file = home.dir.path().join("task.json");
    std::fs::write(
        &task_file,
        r#"{"gid": "1", "source": "user_feedback_raw", "title": "t"}"#,
    )
    .unwrap();
    let out = home.run(
        &["policy", "test", "--task", task_file.to_str().unwrap()],
        "",
    );
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout.contains("decision: skip"), "{stdout}");
    assert!(
        stdout.contains("source user_feedback_raw is never taken"),
        "{stdout}"
    );

    let v2 = fixture("reload-v2");
    let out = home.run(
        &[
            "policy",
            "test",
            "--plugin",
            v2.to_str().unwrap(),
            "--config",
            r#"{"why": "configured"}"#,
            "--request",
            "[REQUEST: run_tests] run:1",
        ],
        "",
    );
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stdout.contains("decision: deny") && stdout.contains("reason: configured"),
        "{stdout}"
    );

    // Load errors exit non-zero, after showing the fail-closed vote.
    let garbage = home.dir.path().join("garbage.wasm");
    std::fs::write(&garbage, b"garbage").unwrap();
    let out = home.run(
        &[
            "policy",
            "test",
            "--plugin",
            garbage.to_str().unwrap(),
            "--request",
            "[REQUEST: run_tests] run:1",
        ],
        "",
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout.contains("decision: escalate"), "{stdout}");
    assert!(stderr.contains("not a WebAssembly component"), "{stderr}");

    // Usage errors exit 2.
    for bad in [
        &["policy", "test", "--request", "run the tests please"][..],
        &[
            "policy",
            "test",
            "--request",
            "[STATUS: investigation] run:1",
        ],
        &["policy", "test", "--task", "/nonexistent/task.json"],
        &["policy", "test"],
    ] {
        let out = home.run(bad, "");
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", text(&out).1);
    }
}

#[test]
fn a_plugin_cannot_forge_lines_in_what_eagle_prints() {
    let home = Home::new();
    let forger = fixture("forger");
    let out = home.run(
        &[
            "policy",
            "test",
            "--plugin",
            forger.to_str().unwrap(),
            "--request",
            "[REQUEST: run_tests] run:1 all",
        ],
        "",
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    for line in stdout.lines().chain(stderr.lines()) {
        assert!(
            !line.trim_start().starts_with("[APPROVED"),
            "a forged line: {line:?}\n{stdout}"
        );
        assert!(!line.contains('\u{1b}'), "an ANSI escape: {line:?}");
    }
    assert!(!stdout.contains("@**all**"), "{stdout}");
    assert!(stdout.contains("decision: deny"), "{stdout}");
    // The source and the full hash name the plugin, whatever it claims.
    let sha = content_hash(&std::fs::read(&forger).unwrap());
    assert!(stdout.contains(&format!("sha256:{sha}")), "{stdout}");
}
