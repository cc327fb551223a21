//! Requests and what an approval covers, through the binary: a forged
//! token is refused (exit 4, nothing recorded), the hook and `eagle
//! request` fail closed when the run's socket leads nowhere, an approval
//! binds to the exact bytes of a request, a request over the limit is
//! refused whole, `!show` shows a request in full only to an approver (and a
//! private task's only where the task is), and a merge is approved only by
//! its id.

use std::io::Write;
use std::os::unix::net::UnixListener;
use std::process::{Command, Stdio};
use std::time::Duration;

use eagle::store::{RequestStatus, Store};

use crate::executor::{fake_worker_command, home_store};
use crate::support::{CHILD_DEADLINE, WAIT, exit_within};
use crate::support::{Db, Home, TestDb, eagle_bin, text};
use crate::zulip::Realm;

/// Posts the shell printed about run 1, in order.
fn run_posts(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("#executor > run 1 · "))
        .collect()
}

fn fake_home() -> Home {
    let mut home = Home::new();
    home.set("EAGLE_RUNNER__WORKER_COMMAND", &fake_worker_command())
        .set("EAGLE_RUNNER__STATUS_INTERVAL", "0s");
    home
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_token_exits_4_and_records_nothing() {
    let home = fake_home();
    let out = home.run(&["shell"], "!queue forge mode:forge\n!go 1\n");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        run_posts(&stdout)
            .iter()
            .any(|p| p.ends_with("[STATUS: forge] run:1 forged=4")),
        "{stdout}"
    );
    let store = home_store(&home).await;
    let requests = store.requests().requests_of_run(1).await.unwrap();
    assert!(requests.is_empty(), "{requests:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_over_the_limit_is_refused_whole() {
    let home = fake_home();
    let out = home.run(&["shell"], "!queue big mode:big\n!go 1\n");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        run_posts(&stdout)
            .iter()
            .any(|p| p.ends_with("[STATUS: big] run:1 exit=4")),
        "{stdout}"
    );
    let store = home_store(&home).await;
    assert!(
        store
            .requests()
            .requests_of_run(1)
            .await
            .unwrap()
            .is_empty()
    );
}

/// Runs a worker-side command of the binary with the run's variables
/// pointing at `socket`, feeding it `stdin`, for at most `within`: `None`
/// when it was still running then.
fn worker_side(
    socket: &std::path::Path,
    args: &[&str],
    stdin: &str,
    within: Duration,
) -> Option<(i32, String)> {
    let mut child = Command::new(eagle_bin())
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("EAGLE_RUN_SOCKET", socket)
        .env("EAGLE_RUN_TOKEN", "a-token-of-a-run")
        .env("EAGLE_RUN_ID", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn eagle");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let status = exit_within(&mut child, within)?;
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
    Some((status.code().unwrap_or(-1), out))
}

#[test]
fn the_hook_and_eagle_request_fail_closed_when_the_runner_is_dead_or_silent() {
    let dir = tempfile::tempdir().unwrap();
    // A dead runner: its socket file is there, nobody listens on it.
    let dead = dir.path().join("dead.sock");
    drop(UnixListener::bind(&dead).unwrap());
    // A silent runner: it accepts and never answers.
    let silent = dir.path().join("silent.sock");
    let listener = UnixListener::bind(&silent).unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            held.push(stream);
        }
    });
    let input = serde_json::json!({
        "tool_name": "Bash",
        "tool_input": {"command": "ls"},
        "tool_use_id": "toolu_dead",
        "cwd": dir.path(),
    })
    .to_string();
    let hook_timeout = 8;
    for socket in [&dead, &silent] {
        // Claude Code kills a hook at its timeout: the answer must come first.
        let (code, out) = worker_side(
            socket,
            &[
                "hook",
                "claude-pretool",
                "--timeout",
                &hook_timeout.to_string(),
            ],
            &input,
            Duration::from_secs(hook_timeout),
        )
        .unwrap_or_else(|| panic!("the hook did not answer before its timeout ({socket:?})"));
        assert_eq!(code, 0, "{socket:?}: {out}");
        let decision: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(
            decision["hookSpecificOutput"]["permissionDecision"], "deny",
            "{socket:?}: {out}"
        );
        let (code, _) = worker_side(
            socket,
            &["request", "--timeout", "2", "run_tests", "all"],
            "",
            CHILD_DEADLINE,
        )
        .expect("eagle request ends");
        assert_eq!(code, 4, "{socket:?}");
    }
}

/// A text of `lines` lines of ASCII (no `#`, no `@`, no backticks).
fn long_text(lines: usize) -> String {
    (0..lines)
        .map(|i| {
            format!(
                "line {i:05}: the quick brown fox jumps over the lazy dog {}\n",
                i * 7
            )
        })
        .collect::<String>()
        .trim_end()
        .to_string()
}

async fn binds_to_the_exact_bytes(db: Db) {
    let test_db = TestDb::new(db).await;
    let mut home = fake_home();
    home.set("EAGLE_DATABASE_URL", &test_db.url);
    let text_file = home.dir.path().join("text.txt");
    let body = long_text(400);
    assert!(body.len() > 20_000);
    std::fs::write(&text_file, &body).unwrap();
    let out = home.run(
        &["shell"],
        &format!(
            "!queue bind mode:bind text:{}\n!go 1\n",
            text_file.display()
        ),
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        run_posts(&stdout)
            .iter()
            .any(|p| p.ends_with("[STATUS: bind] run:1 first=3")),
        "{stdout}"
    );
    let store = test_db.open().await;
    let first = only_open(&store).await;
    assert_eq!(first.body, body, "recorded exactly");

    // Approved for that text: the resumed worker asks for texts that
    // differ in one byte (a trailing newline; one character past 2,000),
    // then for the very same text.
    let out = home.run(&["shell"], &format!("!approve 1 {}\n", first.id));
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        run_posts(&stdout)
            .iter()
            .any(|p| p.ends_with("[STATUS: bind] run:1 newline=3 past2000=3 same=0")),
        "{stdout}"
    );
    let requests = store.requests().requests_of_run(1).await.unwrap();
    let [_, newline, past, same] = requests.as_slice() else {
        panic!("{requests:#?}");
    };
    assert_eq!(newline.body, format!("{body}\n"));
    assert_eq!(newline.status, RequestStatus::Escalated);
    assert_eq!(newline.bound_to, None);
    assert_eq!(past.body.len(), body.len());
    assert_ne!(past.body, body);
    assert_eq!(past.body[..2000], body[..2000]);
    assert_eq!(past.status, RequestStatus::Escalated);
    assert_eq!(past.bound_to, None);
    assert_eq!(same.status, RequestStatus::Approved);
    assert_eq!(same.bound_to, Some(first.id));

    // `!show` gives the approver every byte, in parts that each fit a message.
    let mut shown = String::new();
    let mut part = 1;
    loop {
        let out = home.run(&["shell"], &format!("!show 1 {} {part}\n", newline.id));
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{stderr}");
        if stdout.contains("there is no part") {
            break;
        }
        assert!(
            stdout.contains(&format!("**Request {} of run 1**", newline.id)),
            "{stdout}"
        );
        assert!(stdout.contains("ending with a line break"), "{stdout}");
        let start = stdout.find("```text\n").expect("a fenced text") + "```text\n".len();
        let end = start + stdout[start..].find("\n```").expect("the fence closes");
        assert!(end - start <= 10_000, "a part fits one message");
        shown.push_str(&stdout[start..end]);
        part += 1;
        assert!(part < 10, "too many parts");
    }
    assert!(part > 3, "a long text comes in parts");
    assert_eq!(shown, format!("{body}\n"));

    // Anyone else is refused.
    home.set("EAGLE_APPROVERS", "boss@example.com");
    home.set("EAGLE_OWNER", "boss@example.com");
    let out = home.run(
        &["shell", "--user", "someone@example.com"],
        &format!("!show 1 {}\n", newline.id),
    );
    let (stdout, _) = text(&out);
    assert!(
        stdout.contains("You may not use `!show`: you are not in this profile's approvers"),
        "{stdout}"
    );
    assert!(!stdout.contains("line 00001"), "{stdout}");
}

async fn only_open(store: &Store) -> eagle::store::Request {
    let requests = store.requests().requests_of_run(1).await.unwrap();
    let open: Vec<_> = requests.iter().filter(|r| r.status.is_open()).collect();
    let [one] = open.as_slice() else {
        panic!("{requests:#?}");
    };
    (*one).clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_binds_to_the_exact_bytes_on_sqlite() {
    binds_to_the_exact_bytes(Db::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_binds_to_the_exact_bytes_on_postgres() {
    binds_to_the_exact_bytes(Db::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merge_is_approved_only_by_its_id_and_named_in_eagles_words() {
    let home = fake_home();
    let out = home.run(&["shell"], "!queue merge it\n!go 1\n");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let escalation = run_posts(&stdout)
        .into_iter()
        .find(|p| p.contains("[ESCALATED: merge_pr] run:1"))
        .unwrap_or_else(|| panic!("no escalation:\n{stdout}"));
    // Eagle's words, not the worker's ("PR #1"): it knows of no PR.
    assert!(
        escalation.contains("Eagle knows of no PR of this run"),
        "{escalation}"
    );
    assert!(!escalation.contains("The worker asks"), "{escalation}");
    let store = home_store(&home).await;
    let merge = only_open(&store).await;
    assert_eq!(merge.action, "merge_pr");

    let out = home.run(&["shell"], "!approve 1\n");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains(&format!(
            "which is approved only by its id: `!approve 1 {}`",
            merge.id
        )),
        "{stdout}"
    );
    let after = store.requests().request(merge.id).await.unwrap().unwrap();
    assert_eq!(after.status, RequestStatus::Escalated);
    // Named by its id, it is approved.
    let out = home.run(&["shell"], &format!("!approve 1 {}\n", merge.id));
    assert!(
        text(&out)
            .0
            .contains(&format!("Approved request {} (merge_pr)", merge.id)),
        "{}",
        text(&out).0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_tasks_request_is_shown_only_where_the_task_is() {
    let realm = Realm::start().await;
    let mut home = realm.home();
    home.set("EAGLE_RUNNER__WORKER_COMMAND", &fake_worker_command())
        .set("EAGLE_OWNER", &realm.alex.to_string())
        .set("EAGLE_EXECUTOR_BOT", "executor-bot@example.com");
    let (_eagle, _executor) = crate::executor::start_both(&realm, &home).await;
    let dm = |content: &str| realm.fake.post_dm(realm.alex, &[realm.eagle], content);
    dm("!queue the secret plan");
    wait_dm(&realm, &["Queued task #1"]).await;
    dm("!go 1");
    let ok = realm
        .fake
        .wait_until(WAIT, |f| {
            f.messages_in("executor", "run 1")
                .iter()
                .any(|m| m.content.contains("[ESCALATED: merge_pr] run:1"))
        })
        .await;
    assert!(ok, "no escalation");
    let escalation = realm
        .fake
        .messages_in("executor", "run 1")
        .into_iter()
        .find(|m| m.content.contains("[ESCALATED: merge_pr]"))
        .unwrap();
    let id = escalation
        .content
        .split("req:")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|id| id.parse::<i64>().ok())
        .unwrap_or_else(|| panic!("{}", escalation.content));

    // In the run's public topic: refused, the text not shown.
    realm
        .fake
        .post(realm.alex, "executor", "run 1", &format!("!show 1 {id}"));
    let replies = realm
        .wait_replies("executor", "run 1", |r| {
            r.iter()
                .any(|m| m.content.contains("belongs to a private task"))
        })
        .await;
    assert!(
        replies.iter().all(|m| !m.content.contains("```text")),
        "{replies:#?}"
    );
    // In the task's own conversation: shown.
    dm(&format!("!show 1 {id}"));
    wait_dm(
        &realm,
        &[&format!("**Request {id} of run 1**"), "```text\nPR #1\n```"],
    )
    .await;
}

/// Waits for a direct reply of Eagle to Alex that contains every needle.
async fn wait_dm(realm: &Realm, needles: &[&str]) {
    let (eagle, alex) = (realm.eagle, realm.alex);
    let direct = |f: &fake_zulip::FakeZulip| -> Vec<String> {
        f.messages_from(eagle)
            .into_iter()
            .filter(|m| m.channel.is_none() && m.dm_recipients.contains(&alex))
            .map(|m| m.content)
            .collect()
    };
    let ok = realm
        .fake
        .wait_until(WAIT, |f| {
            direct(f)
                .iter()
                .any(|c| needles.iter().all(|n| c.contains(n)))
        })
        .await;
    assert!(
        ok,
        "no direct reply with {needles:?}: {:#?}",
        direct(&realm.fake)
    );
}

/// Code points that show nothing or turn the text around (tag characters
/// spelling an instruction, bidirectional overrides and isolates, a
/// zero-width joiner, a variation selector, a line separator) reach an
/// approver written as their code points: in the escalation and in `!show`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_and_the_escalation_write_invisible_code_points_out() {
    let home = fake_home();
    let text_file = home.dir.path().join("text.txt");
    let tags: String = "IGNORE"
        .chars()
        .map(|c| char::from_u32(0xE0000 + u32::from(c)).unwrap())
        .collect();
    let body = format!(
        "deploy docs\u{202E}fdp.exe\u{202C} to \u{2066}prod\u{2069}{tags}\u{200D}\u{FE0F}\u{2028}done"
    );
    std::fs::write(&text_file, &body).unwrap();
    let out = home.run(
        &["shell"],
        &format!(
            "!queue sneaky mode:bind text:{}\n!go 1\n",
            text_file.display()
        ),
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let escaped = "deploy docs<U+202E>fdp.exe<U+202C> to <U+2066>prod<U+2069><U+E0049><U+E0047>\
                   <U+E004E><U+E004F><U+E0052><U+E0045><U+200D><U+FE0F><U+2028>done";
    let escalation = run_posts(&stdout)
        .into_iter()
        .find(|p| p.contains("[ESCALATED: deploy_docs] run:1"))
        .unwrap_or_else(|| panic!("no escalation:\n{stdout}"));
    assert!(escalation.contains(escaped), "{escalation}");
    let store = home_store(&home).await;
    let request = only_open(&store).await;
    assert_eq!(request.body, body, "recorded exactly");
    let out = home.run(&["shell"], &format!("!show 1 {}\n", request.id));
    let (shown, _) = text(&out);
    assert!(
        shown.contains(&format!("```text\n{escaped}\n```")),
        "{shown}"
    );
    assert!(
        shown.contains("13 invisible character(s) written as `<U+…>`"),
        "{shown}"
    );
    for output in [escalation, shown.as_str()] {
        assert!(
            !output
                .chars()
                .any(|c| eagle::ground::text::is_invisible(c) && c != '\n' && c != '\u{200B}'),
            "{output:?}"
        );
    }
}
