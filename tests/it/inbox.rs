//! The owner's inbox through the binary: `!review`, `!skip`, `!drop` and
//! `!priority` on a 30-task inbox (several ids at once, bad ids, running
//! tasks, a non-approver), the audit trail, and the runner taking the most
//! urgent task first; on SQLite and PostgreSQL.

use crate::support::{Home, PgSchema, text};

const BOSS: &str = "boss@example.com";

/// Runs `input` in a shell as `user`.
fn shell(home: &Home, user: &str, input: &str) -> String {
    let out = home.run(&["shell", "--user", user], input);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stderr: {stderr}\nstdout: {stdout}");
    stdout
}

/// The one reply that starts with `first`: the lines up to the blank line.
fn reply<'a>(stdout: &'a str, first: &str) -> &'a str {
    let start = stdout
        .find(first)
        .unwrap_or_else(|| panic!("no reply starting {first:?} in:\n{stdout}"));
    let rest = &stdout[start..];
    &rest[..rest.find("\n\n").unwrap_or(rest.len())]
}

fn the_inbox_is_cleaned_by_its_commands(home: &Home) {
    let mut input = String::new();
    for n in 1..=30 {
        input.push_str(&format!("!queue Inbox task {n}\n"));
    }
    let stdout = shell(home, BOSS, &input);
    assert!(
        stdout.contains("Queued task #30: Inbox task 30"),
        "{stdout}"
    );

    // Claiming is paused so the order the runner takes is seen whole.
    let input = "!pause\n\
                 !review 1 2 3\n\
                 !skip 4 5 9 not ours\n\
                 !skip 6\n\
                 !drop 7 duplicate of 6\n\
                 !drop 8 99 8\n\
                 !review 1\n\
                 !priority 12 13 2\n\
                 !priority 14 1\n\
                 !priority 15 9\n\
                 !go 10\n!go 12\n!go 14\n\
                 !drop 10\n\
                 !skip 12 too big\n\
                 !review 4\n";
    let stdout = shell(home, BOSS, input);
    let answer = reply(&stdout, "* Task #1 is awaiting_go");
    assert_eq!(
        answer,
        "* Task #1 is awaiting_go: `!go 1` starts it.\n\
         * Task #2 is awaiting_go: `!go 2` starts it.\n\
         * Task #3 is awaiting_go: `!go 3` starts it.",
        "one answer for three ids"
    );
    let answer = reply(&stdout, "* Task #4 is skip");
    assert_eq!(
        answer,
        "* Task #4 is skip: not ours (skipped by boss).\n\
         * Task #5 is skip: not ours (skipped by boss).\n\
         * Task #9 is skip: not ours (skipped by boss)."
    );
    assert!(
        stdout.contains("Say why after the ids: `!skip 4 5 not ours`."),
        "{stdout}"
    );
    assert!(
        stdout.contains("Task #7 is cancelled: duplicate of 6 (dropped by boss)."),
        "{stdout}"
    );
    // A bad id among good ones: the good ones change, the bad one is said.
    let answer = reply(&stdout, "* Task #8 is cancelled");
    assert!(
        answer.contains("* Task #99 does not exist"),
        "{answer}\n{stdout}"
    );
    assert!(
        stdout.contains("Task #1 is awaiting_go already; nothing changed."),
        "{stdout}"
    );
    assert!(
        stdout.contains("* Task #12 is for_review with priority 2.")
            || stdout.contains("* Task #12 is pending with priority 2."),
        "{stdout}"
    );
    assert!(
        stdout.contains("15 is not a priority") || stdout.contains("9 is not a priority"),
        "{stdout}"
    );
    // A task with an open run is neither dropped nor skipped: the answer
    // names the command that stops the run.
    assert!(
        stdout.contains(
            "Task #10 has run 1 (queued), which must stop before you drop it: `!cancel 1` stops the run"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "Task #12 has run 2 (queued), which must stop before you skip it: `!cancel 2`"
        ),
        "{stdout}"
    );
    // A review overrides a skip.
    assert!(
        stdout.contains("Task #4 is awaiting_go: `!go 4` starts it."),
        "{stdout}"
    );

    // Not an approver: refused, nothing changes.
    let stdout = shell(
        home,
        "eve@example.com",
        "!drop 11\n!priority 11 1\n!status 11\n",
    );
    assert!(
        stdout.contains("You may not use `!drop`: you are not in this profile's approvers."),
        "{stdout}"
    );
    assert!(stdout.contains("You may not use `!priority`"), "{stdout}");
    assert!(stdout.contains("**Task #11**: Inbox task 11"), "{stdout}");
    assert!(!stdout.contains("priority 1"), "{stdout}");

    // The audit trail and the listing, by priority then age.
    let stdout = shell(home, BOSS, "!why task 5\n!why task 13\n!status\n");
    assert!(stdout.contains("task.skip"), "{stdout}");
    assert!(stdout.contains("not ours (skipped by boss)"), "{stdout}");
    assert!(stdout.contains("task.priority"), "{stdout}");
    let at = |needle: &str| {
        stdout
            .find(needle)
            .unwrap_or_else(|| panic!("{needle:?} not listed in:\n{stdout}"))
    };
    assert!(at("#14 Inbox task 14 (") < at("#12 Inbox task 12 ("));
    assert!(at("#12 Inbox task 12 (") < at("#13 Inbox task 13 ("));
    assert!(at("#13 Inbox task 13 (") < at("#1 Inbox task 1 ("));
    assert!(at("#1 Inbox task 1 (") < at("#2 Inbox task 2 ("));
    for gone in [
        "#5 Inbox task 5 (",
        "#7 Inbox task 7 (",
        "#8 Inbox task 8 (",
    ] {
        assert!(!stdout.contains(gone), "{gone} is still listed:\n{stdout}");
    }

    // The runner takes the most urgent first: task 14's run (2nd queued,
    // priority 1), then task 12's (priority 2), then task 10's (none).
    let stdout = shell(home, BOSS, "!resume\n");
    let started = |run: i64| {
        stdout
            .find(&format!("[STATUS: started] run:{run} attempt 1"))
            .unwrap_or_else(|| panic!("run {run} did not start:\n{stdout}"))
    };
    assert!(started(3) < started(2), "{stdout}");
    assert!(started(2) < started(1), "{stdout}");
}

#[test]
fn inbox_commands_on_sqlite() {
    let mut home = Home::new();
    home.set("EAGLE_APPROVERS", BOSS)
        .set("EAGLE_OWNER", BOSS)
        .set("USER", "boss")
        .set("EAGLE_RUNNER__MAX_WORKERS", "1");
    the_inbox_is_cleaned_by_its_commands(&home);
}

#[test]
fn inbox_commands_on_postgres() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let schema = runtime.block_on(PgSchema::create());
    let mut home = Home::new();
    home.set("EAGLE_APPROVERS", BOSS)
        .set("EAGLE_OWNER", BOSS)
        .set("USER", "boss")
        .set("EAGLE_RUNNER__MAX_WORKERS", "1")
        .set("EAGLE_DATABASE_URL", &schema.url());
    the_inbox_is_cleaned_by_its_commands(&home);
    drop(schema);
}

/// The filter reads the whole task: a Figma link in a `!queue`'s title
/// (with or without its scheme) skips it, as one in its links does.
#[test]
fn a_design_link_in_a_title_is_skipped_by_the_filter() {
    let home = Home::new();
    let stdout = shell(
        &home,
        "local@localhost",
        "!queue Redo the toolbar per https://www.figma.com/file/abc/Toolbar\n\
         !queue Redo the sidebar (see www.figma.com/file/def/Sidebar)\n\
         !queue Redo the tab strip\n",
    );
    assert!(stdout.contains("Queued task #3"), "{stdout}");
    let stdout = shell(
        &home,
        "local@localhost",
        "!status 1\n!status 2\n!status 3\n",
    );
    assert!(
        stdout.contains("links to a design file (https://www.figma.com/file/abc/Toolbar)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("links to a design file (www.figma.com/file/def/Sidebar)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("**Task #3**: Redo the tab strip"),
        "{stdout}"
    );
    let third = &stdout[stdout.find("**Task #3**").unwrap()..];
    assert!(third.contains("status: for_review"), "{third}");
    assert!(!third.contains("design file"), "{third}");
}
