//! The executor loop end to end, through the real binary: `eagle shell`
//! (both sides in one process) and the two profiles as separate `eagle run`
//! processes against the fake Zulip, with the real policy plugins and a fake
//! worker program (`fake-worker.sh`) that speaks the protocol and can be
//! told to hang, crash, go silent, flood or spoof.

use std::path::{Path, PathBuf};

use eagle::profile::DatabaseUrl;
use eagle::store::{RequestStatus, Run, RunState, Store};

use crate::support::{Home, text};
use crate::zulip::{Realm, Running, WAIT};

/// The fake worker script.
pub(crate) fn fake_worker() -> PathBuf {
    crate::support::reachable(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/it/fake-worker.sh"),
    )
}

/// The worker command that runs the fake worker.
pub(crate) fn fake_worker_command() -> String {
    format!("bash {} {{prompt}}", fake_worker().display())
}

/// A home whose executor runs the fake worker.
fn fake_home() -> Home {
    let mut home = Home::new();
    home.set("EAGLE_RUNNER__WORKER_COMMAND", &fake_worker_command());
    home
}

/// The home's SQLite store (what the shell wrote).
pub(crate) async fn home_store(home: &Home) -> Store {
    let url = format!(
        "sqlite://{}?mode=rwc",
        home.dir.path().join("data/eagle.db").display()
    );
    Store::open(&DatabaseUrl::new(url))
        .await
        .expect("the home's database")
}

async fn run_of(store: &Store, id: i64) -> Run {
    let mut tx = store.begin_read().await.unwrap();
    tx.run(id).await.unwrap().expect("the run exists")
}

/// Posts the shell printed about a run, in order.
fn posts(stdout: &str, run: i64) -> Vec<&str> {
    let prefix = format!("#executor > run {run} · ");
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix(prefix.as_str()))
        .collect()
}

#[test]
fn the_shell_runs_the_seed_story_and_a_second_shell_resumes_it() {
    let home = Home::new();
    let out = home.run(&["shell"], "!queue Fix the tab preview\n!go 1\n");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let run = posts(&stdout, 1);
    let find = |needle: &str| run.iter().position(|p| p.contains(needle));
    for needle in [
        "Исполнитель: [STATUS: started] run:1 attempt 1: investigation worker",
        "Исполнитель: [STATUS: investigation] run:1",
        "Исполнитель: [REQUEST: create_worktree] run:1 req:1",
        "Eagle: [APPROVED: create_worktree] run:1 req:1 (default-approval)",
        "Eagle: [APPROVED: run_tests] run:1 req:2 (default-approval)",
        "Eagle: [APPROVED: open_draft_pr] run:1 req:3 (default-approval)",
        "Исполнитель: [REQUEST: merge_pr] run:1 req:4",
        "Eagle: [ESCALATED: merge_pr] run:1 req:4 @**",
        "Исполнитель: [STATUS: waiting] run:1",
    ] {
        assert!(find(needle).is_some(), "missing {needle:?} in:\n{stdout}");
    }
    // The escalation names the one command that answers it (on its own line).
    assert!(stdout.contains("`!approve 1 4`"), "{stdout}");
    assert!(find("[APPROVED: create_worktree]") > find("[REQUEST: create_worktree]"));
    // Routine approvals ping nobody; only the escalation mentions the owner.
    let mentions: Vec<&&str> = run.iter().filter(|p| p.contains("@**")).collect();
    assert_eq!(mentions.len(), 1, "{mentions:#?}");
    assert!(
        !stdout.contains("[DONE: pr_ready]"),
        "merge_pr waits for a human"
    );

    // A second session goes on where the first stopped.
    let out = home.run(&["shell"], "!status run 1\n!approve 1 4 squash it first\n");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("req 4 merge_pr (escalated"), "{stdout}");
    assert!(
        stdout.contains("Approved request 4 (merge_pr) of run 1"),
        "{stdout}"
    );
    let run = posts(&stdout, 1);
    for needle in [
        "Eagle: [APPROVED: merge_pr] run:1 req:4 by",
        "— note: squash it first",
        "Исполнитель: [STATUS: started] run:1 attempt 2: continue worker",
        "Eagle: [APPROVED: merge_pr] run:1 req:5 (the same request a human approved as req 4)",
        "Исполнитель: [DONE: pr_ready] run:1",
    ] {
        assert!(
            run.iter().any(|p| p.contains(needle)),
            "missing {needle:?} in:\n{stdout}"
        );
    }
    let out = home.run(&["shell"], "!status run 1\n!why run 1\n");
    let (stdout, _) = text(&out);
    assert!(
        stdout.contains("**Run 1** of task #1 (Fix the tab preview): pr"),
        "{stdout}"
    );
    assert!(stdout.contains("run.pr → in_progress → pr"), "{stdout}");
    // Nothing follows its PR without [github], and it says so; the approved
    // merge is recorded, not made.
    assert!(
        stdout.contains("PR loop: nothing watches its PR: the executor has no [github] configured"),
        "{stdout}"
    );
    assert!(
        stdout.contains("req 4 merge_pr (approved by human:0 <"),
        "{stdout}"
    );
    assert!(
        stdout.contains("Eagle did not merge: it has no [github] configured"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "policy · request.decided (request 1) → approve (plugin default-approval 0.1.0 sha256:"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("bound:request:4 · request.decided (request 5) → approve"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdogs_kill_the_group_retry_and_then_ask_the_owner() {
    let mut home = fake_home();
    home.set("EAGLE_RUNNER__NO_OUTPUT_TIMEOUT", "1s")
        .set("EAGLE_RUNNER__HARD_TIMEOUT", "3s")
        .set("EAGLE_RUNNER__WRAP_UP_GRACE", "1s")
        .set("EAGLE_RUNNER__MAX_ATTEMPTS", "2")
        .set("EAGLE_RUNNER__MAX_REQUESTS", "200")
        .set("EAGLE_RUNNER__STATUS_INTERVAL", "0s");
    let input = "!queue silent mode:silent\n!queue chatty mode:chatty\n!queue crash mode:crash\n\
                 !queue flood mode:flood\n!go 1\n!go 2\n!go 3\n!go 4\n";
    let out = home.run(&["shell"], input);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let store = home_store(&home).await;

    // Silent: killed with its whole group, twice, then held for the owner.
    let silent = posts(&stdout, 1);
    assert!(
        silent
            .iter()
            .any(|p| p.contains("[STATUS: retry] run:1 attempt 1 failed: no output for 1s")),
        "{stdout}"
    );
    assert!(
        silent
            .iter()
            .any(|p| p.contains("[STATUS: held] run:1 attempt 2 failed: no output for 1s"))
    );
    assert!(
        silent.iter().any(|p| p.starts_with("Eagle: @**")
            && p.contains("run 1 is held after 2 failed attempt(s)")
            && p.contains("`!retry 1`")
            && p.contains("`!cancel 1`")),
        "the owner is asked: {stdout}"
    );
    let run = run_of(&store, 1).await;
    assert!(
        run.held && run.failures == 2 && run.worker_stuck_count == 2,
        "{run:?}"
    );
    assert_eq!(run.state, RunState::InProgress);
    assert!(run.waiting_on.is_some());
    for log in logs_of(&home, &run) {
        let child = log
            .lines()
            .find_map(|l| l.strip_prefix("child "))
            .expect("the silent worker names its child");
        assert!(
            !Path::new(&format!("/proc/{child}")).exists(),
            "the worker's child {child} outlived the kill"
        );
    }

    // Chatty: asked to wrap up past its hard limit, then killed.
    let chatty = posts(&stdout, 2);
    assert!(
        chatty
            .iter()
            .any(|p| p.contains("[STATUS: wrap_up] run:2 past its hard limit of 3s")),
        "{stdout}"
    );
    assert!(
        chatty
            .iter()
            .any(|p| p.contains("[STATUS: wrapping_up] run:2 asked to wrap up")),
        "{stdout}"
    );
    assert!(
        chatty
            .iter()
            .any(|p| p.contains("past its hard limit of 3s and did not wrap up")),
        "{stdout}"
    );

    // Crash: its exit code is recorded.
    let crash = posts(&stdout, 3);
    assert!(
        crash
            .iter()
            .any(|p| p.contains("attempt 1 failed: exit code 7")),
        "{stdout}"
    );
    assert_eq!(run_of(&store, 3).await.worker_exit_code, Some(7));

    // Flood: stopped, with the requests capped.
    let flood = posts(&stdout, 4);
    assert!(
        flood
            .iter()
            .any(|p| p.contains("more than 200 requests in one attempt")),
        "{stdout}"
    );
    let recorded = store.requests_of_run(4).await.unwrap();
    assert!(recorded.len() <= 2 * 200, "{} requests", recorded.len());

    // Nothing is silently stuck: every run is held for a named human.
    for id in 1..=4 {
        let run = run_of(&store, id).await;
        assert!(run.held && run.waiting_on.is_some(), "run {id}: {run:?}");
        assert!(!run.has_worker(), "run {id} still has a worker");
    }
}

/// The work logs of a run's attempts.
fn logs_of(home: &Home, run: &Run) -> Vec<String> {
    let dir = home
        .dir
        .path()
        .join("data/executor/logs")
        .join(run.task_gid.replace(':', "_"));
    let mut logs: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    logs.sort();
    logs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_claude_code_hook_inputs_get_the_right_decisions() {
    let mut home = fake_home();
    home.set("EAGLE_RUNNER__STATUS_INTERVAL", "0s");
    let inputs = crate::support::reachable(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/it/hook-inputs"),
    );
    let out = home.run(
        &["shell"],
        &format!(
            "!queue hooks mode:hook inputs:{}\n!go 1\n",
            inputs.display()
        ),
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let decisions: Vec<(String, String)> = posts(&stdout, 1)
        .iter()
        .filter_map(|p| p.strip_prefix("Исполнитель: [STATUS: hook] run:1 "))
        .map(|rest| {
            let (name, decision) = rest.split_once(' ').unwrap();
            (name.to_string(), decision.to_string())
        })
        .collect();
    // Inside the sandbox nothing asks: every call runs but an edit outside
    // the working directory (or of the checkout's git configuration) and a
    // question nobody would answer. Pushes and merges are the `git` and
    // `gh` shims' to turn into requests, not the hook's.
    let mut want = vec![
        ("ask-user", "deny"),
        ("bash-awk", "allow"),
        ("bash-find", "allow"),
        ("bash-for-loop", "allow"),
        ("bash-heredoc-commit", "allow"),
        ("bash-make", "allow"),
        ("bash-merge", "allow"),
        ("bash-pip-install", "allow"),
        ("bash-pipes", "allow"),
        ("bash-push", "allow"),
        ("bash-python-c", "allow"),
        ("bash-redirect-outside", "allow"),
        ("bash-sed", "allow"),
        ("bash-subst", "allow"),
        ("bash-tests", "allow"),
        ("bash-unknown", "allow"),
        ("edit-git-config", "deny"),
        ("edit-inside", "allow"),
        ("read", "allow"),
        ("subagent-grep", "allow"),
        ("webfetch", "allow"),
        ("write-home", "deny"),
        ("write-outside", "deny"),
        ("write-parent", "deny"),
    ];
    want.sort();
    let mut got: Vec<(&str, &str)> = decisions
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    got.sort();
    assert_eq!(got, want, "{stdout}");
    // Nothing became a request, and nobody was asked.
    let store = home_store(&home).await;
    let requests = store.requests_of_run(1).await.unwrap();
    assert!(requests.is_empty(), "{requests:#?}");
    let run_posts = posts(&stdout, 1);
    let pings: Vec<_> = run_posts.iter().filter(|p| p.contains("@**")).collect();
    assert!(pings.is_empty(), "{pings:#?}");
}

/// The seed story through Zulip, with both profiles as separate processes.
async fn seed_story_through_zulip(db: crate::support::Db) {
    let test_db = crate::support::TestDb::new(db).await;
    let realm = Realm::start().await;
    let mut home = realm.home();
    home.set("EAGLE_DATABASE_URL", &test_db.url)
        .set("EAGLE_RUNNER__WORKER_COMMAND", &fake_worker_command())
        .set("EAGLE_OWNER", &realm.alex.to_string())
        .set("EAGLE_EXECUTOR_BOT", "executor-bot@example.com");
    let (eagle, executor) = start_both(&realm, &home).await;

    realm
        .fake
        .post(realm.alex, "general", "tabs", "!queue Fix the tab preview");
    realm
        .wait_replies("general", "tabs", |r| !r.is_empty())
        .await;
    realm.fake.post(realm.alex, "general", "tabs", "!go 1");
    let replies = realm
        .wait_replies("general", "tabs", |r| r.len() >= 2)
        .await;
    assert!(
        replies[1].content.contains("run 1 is queued"),
        "{}",
        replies[1].content
    );

    // The escalation: an @-mention of the owner carrying the answer.
    let escalated = wait_post(&realm, realm.eagle, "[ESCALATED: merge_pr] run:1").await;
    let store = test_db.open().await;
    let requests = store.requests_of_run(1).await.unwrap();
    let merge = requests
        .iter()
        .find(|r| r.action == "merge_pr")
        .expect("a merge request");
    assert!(
        escalated
            .content
            .contains(&format!("@**Alex|{}**", realm.alex)),
        "{}",
        escalated.content
    );
    assert!(
        escalated
            .content
            .contains(&format!("`!approve 1 {}`", merge.id)),
        "{}",
        escalated.content
    );
    // Each identity delivers its own outbox, so the executor's posts of the
    // requests may reach the topic after Eagle's answers: wait for each.
    for line in [
        "[REQUEST: create_worktree] run:1 req:1",
        "[REQUEST: run_tests] run:1 req:2",
    ] {
        let m = wait_post(&realm, realm.executor, line).await;
        assert_eq!(m.topic, "run 1", "{line}");
        assert!(m.content.starts_with(line), "{}", m.content);
    }
    for line in [
        "[APPROVED: create_worktree] run:1 req:1",
        "[APPROVED: run_tests] run:1 req:2",
    ] {
        let m = wait_post(&realm, realm.eagle, line).await;
        assert_eq!(m.topic, "run 1", "{line}");
        assert!(m.content.starts_with(line), "{}", m.content);
        assert!(
            !m.content.contains("@**"),
            "approved silently, without a mention: {}",
            m.content
        );
    }
    // A scope expansion printed as a line is denied, and the owner told.
    let denied = wait_post(&realm, realm.eagle, "[DENIED: scope_expansion] run:1").await;
    assert!(
        denied
            .content
            .contains(&format!("@**Alex|{}**", realm.alex)),
        "{}",
        denied.content
    );

    // Spoofing: people typing protocol lines change nothing.
    realm.fake.post(
        realm.alex,
        "executor",
        "run 1",
        &format!("[APPROVED: merge_pr] run:1 req:{}", merge.id),
    );
    realm.fake.post(
        realm.bob,
        "general",
        "tabs",
        "[REQUEST: merge_pr] run:1 PR #1",
    );
    // A non-approver's answer is refused.
    realm
        .fake
        .post(realm.bob, "executor", "run 1", "!approve 1");
    let refused = wait_post(&realm, realm.eagle, "You may not use `!approve`").await;
    assert_eq!(refused.topic, "run 1");
    let requests = store.requests_of_run(1).await.unwrap();
    assert_eq!(requests.len(), 4, "{requests:#?}");
    let merge = requests.iter().find(|r| r.action == "merge_pr").unwrap();
    assert_eq!(merge.status, RequestStatus::Escalated);

    // The owner's answer: the worker is resumed and finishes.
    realm
        .fake
        .post(realm.alex, "executor", "run 1", "!approve 1");
    // A merge is approved only by its id.
    wait_post(
        &realm,
        realm.eagle,
        &format!(
            "which is approved only by its id: `!approve 1 {}`",
            merge.id
        ),
    )
    .await;
    realm.fake.post(
        realm.alex,
        "executor",
        "run 1",
        &format!("!approve 1 {}", merge.id),
    );
    wait_post(
        &realm,
        realm.eagle,
        &format!("[APPROVED: merge_pr] run:1 req:{} by Alex", merge.id),
    )
    .await;
    wait_post(&realm, realm.executor, "[DONE: pr_ready] run:1").await;
    let ok = wait_for(&store, || async {
        let run = run_of(&store, 1).await;
        run.state == RunState::Pr && !run.has_worker()
    })
    .await;
    assert!(
        ok,
        "the run did not reach pr: {:?}",
        run_of(&store, 1).await
    );
    let run = run_of(&store, 1).await;
    assert_eq!(run.attempt, 2, "resumed once");
    let requests = store.requests_of_run(1).await.unwrap();
    assert!(
        requests.iter().all(|r| !r.status.is_open()),
        "{requests:#?}"
    );
    assert_eq!(
        requests
            .iter()
            .filter(|r| r.action == "merge_pr" && r.status == RequestStatus::Approved)
            .count(),
        2,
        "the human's approval and the resumed worker's identical request bound to it"
    );
    for running in [eagle, executor] {
        let (code, log) = running.stop();
        assert_eq!(code, Some(0), "{log}");
    }
    realm.fake.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_story_through_zulip_on_sqlite() {
    seed_story_through_zulip(crate::support::Db::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_story_through_zulip_on_postgres() {
    seed_story_through_zulip(crate::support::Db::Postgres).await;
}

/// Waits for a message from `sender` whose content contains `needle`.
pub(crate) async fn wait_post(
    realm: &Realm,
    sender: u64,
    needle: &str,
) -> fake_zulip::StoredMessage {
    let wanted = needle.to_string();
    let ok = realm
        .fake
        .wait_until(WAIT, |f| {
            f.messages_from(sender)
                .iter()
                .any(|m| m.content.contains(&wanted))
        })
        .await;
    let from: Vec<String> = realm
        .fake
        .messages_from(sender)
        .into_iter()
        .map(|m| {
            format!(
                "{} > {}: {}",
                m.channel.clone().unwrap_or_default(),
                m.topic,
                m.content
            )
        })
        .collect();
    assert!(
        ok,
        "no message with {needle:?}; the sender posted:\n{}",
        from.join("\n")
    );
    realm
        .fake
        .messages_from(sender)
        .into_iter()
        .find(|m| m.content.contains(needle))
        .unwrap()
}

/// Waits until a condition on the database holds (at most `WAIT`), woken
/// by the store's change notifications.
pub(crate) async fn wait_for<F, Fut>(store: &Store, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut changes = store.changes();
    // Not listening by the deadline: the loop below still checks once.
    let _ = tokio::time::timeout_at(deadline, changes.ready()).await;
    loop {
        changes.mark_seen();
        if check().await {
            return true;
        }
        tokio::select! {
            _ = changes.changed() => {}
            _ = tokio::time::sleep_until(deadline) => return check().await,
        }
    }
}

#[test]
fn a_worker_running_as_its_own_user_cannot_reach_eagles_secrets() {
    assert_eq!(
        eagle::ground::host::euid(),
        0,
        "this test starts workers as another user: run it as root (CI does)"
    );
    let user = crate::support::worker_user();
    let mut home = Home::new();
    // The worker user may pass through the home (not list it), and run the
    // binary and the script from a copy it can read.
    eagle::ground::host::chmod(home.dir.path(), 0o711).unwrap();
    let bin = home.dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    eagle::ground::host::chmod(&bin, 0o755).unwrap();
    std::fs::copy(crate::support::eagle_bin(), bin.join("eagle")).unwrap();
    std::fs::copy(fake_worker(), bin.join("fake-worker.sh")).unwrap();
    for file in ["eagle", "fake-worker.sh"] {
        eagle::ground::host::chmod(&bin.join(file), 0o755).unwrap();
    }
    let zuliprc = home.profiles().join("eagle.zuliprc");
    // Written readable by everyone, as an operator's editor may leave it:
    // Eagle makes it private before any worker starts.
    std::fs::write(&zuliprc, "[api]\nemail=eagle-bot@example.com\nkey=secret-key-0123456789\nsite=https://zulip.example.com\n").unwrap();
    eagle::ground::host::chmod(&zuliprc, 0o644).unwrap();
    home.set("EAGLE_RUNNER__WORKER_USER", user).set(
        "EAGLE_RUNNER__WORKER_COMMAND",
        &format!("bash {} {{prompt}}", bin.join("fake-worker.sh").display()),
    );
    let child = std::process::Command::new(bin.join("eagle"))
        .arg("shell")
        .env_clear()
        .envs(&home.env)
        .current_dir(home.dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let db = home.dir.path().join("data/eagle.db");
    let input = format!(
        "!queue spoof mode:spoof db:{} zuliprc:{} eagle_pid:{}\n!go 1\n",
        db.display(),
        zuliprc.display(),
        child.id()
    );
    let out = crate::support::finish(child, input.as_bytes(), "eagle shell");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let spoof = posts(&stdout, 1)
        .into_iter()
        .find(|p| p.contains("[STATUS: spoof]"))
        .unwrap_or_else(|| panic!("the spoofing worker reported nothing:\n{stdout}\n{stderr}"));
    assert!(
        spoof.ends_with(&format!(
            "db=denied zuliprc=denied environ=denied token=exit4 user={}",
            user
        )),
        "{spoof}"
    );
    // The forged ask was refused before anything was recorded.
    let requests = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(async { home_store(&home).await.requests_of_run(1).await })
        .unwrap();
    assert!(requests.iter().all(|r| r.body != "forged"), "{requests:#?}");
    // The worker's own [APPROVED: …] line is not relayed, and decides nothing.
    assert!(
        !stdout.contains("approved by the worker itself"),
        "{stdout}"
    );
    assert!(
        stdout.contains("Eagle: [ESCALATED: merge_pr] run:1"),
        "{stdout}"
    );
    // What Eagle keeps is private to it.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&db).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode & 0o077, 0, "the database is {mode:o}");
    let mode = std::fs::metadata(&zuliprc).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the zuliprc is {mode:o}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_either_side_loses_nothing_and_starts_no_second_worker() {
    let test_db = crate::support::TestDb::new(crate::support::Db::Sqlite).await;
    let realm = Realm::start().await;
    let mut home = realm.home();
    home.set("EAGLE_DATABASE_URL", &test_db.url)
        .set("EAGLE_RUNNER__WORKER_COMMAND", &fake_worker_command());
    let gate = home.dir.path().join("gate");
    let (eagle, executor) = start_both(&realm, &home).await;
    realm.fake.post(
        realm.alex,
        "general",
        "gate",
        &format!("!queue gated mode:gate gate:{}", gate.display()),
    );
    realm
        .wait_replies("general", "gate", |r| !r.is_empty())
        .await;
    realm.fake.post(realm.alex, "general", "gate", "!go 1");
    wait_post(&realm, realm.executor, "[STATUS: working] run:1").await;
    let store = test_db.open().await;
    let before = run_of(&store, 1).await;
    let pid = before.worker_pid.expect("a worker") as i32;
    let ticks = before.worker_start_ticks.expect("its start time") as u64;

    // Both sides die at once; the worker lives on in its own group.
    executor.kill();
    eagle.kill();
    assert!(
        eagle::ground::host::is_alive(pid, ticks),
        "the worker died with its runner"
    );

    // The executor comes back first and re-adopts the worker; its request
    // waits in the database while Eagle is down.
    let executor = Running::start(&home, "executor");
    std::fs::write(&gate, "go").unwrap();
    let pending = wait_for(&store, || async {
        store
            .requests_of_run(1)
            .await
            .unwrap()
            .iter()
            .any(|r| r.action == "run_tests" && r.status == RequestStatus::Pending)
    })
    .await;
    assert!(
        pending,
        "the re-adopted worker's request was not recorded:\n{}",
        executor.log()
    );

    // Eagle comes back: the request is decided exactly once, and the run goes on.
    let eagle = Running::start(&home, "eagle");
    let done = wait_for(&store, || async {
        run_of(&store, 1).await.state == RunState::Pr
    })
    .await;
    assert!(done, "{:?}\n{}", run_of(&store, 1).await, executor.log());
    let run = run_of(&store, 1).await;
    assert_eq!(run.attempt, 1, "a second worker was started: {run:?}");
    let request = store
        .requests_of_run(1)
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.action == "run_tests")
        .unwrap();
    assert_eq!(request.status, RequestStatus::Approved);
    let decisions = store
        .audit_trail(&format!("request:{}", request.id))
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.action == "request.decided")
        .count();
    assert_eq!(decisions, 1);
    let adopted = store
        .audit_trail("run:1")
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.action == "run.adopted")
        .count();
    assert_eq!(adopted, 1);
    let starts = realm
        .fake
        .messages_from(realm.executor)
        .into_iter()
        .filter(|m| m.content.starts_with("[STATUS: started] run:1"))
        .count();
    assert_eq!(starts, 1, "one worker, one start");
    for running in [eagle, executor] {
        let (code, log) = running.stop();
        assert_eq!(code, Some(0), "{log}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_executors_on_postgres_never_run_more_than_max_workers() {
    let test_db = crate::support::TestDb::new(crate::support::Db::Postgres).await;
    let realm = Realm::start().await;
    let mut home = realm.home();
    home.set("EAGLE_DATABASE_URL", &test_db.url)
        .set("EAGLE_RUNNER__WORKER_COMMAND", &fake_worker_command())
        .set("EAGLE_RUNNER__MAX_WORKERS", "2");
    let shared = home.exchange();
    let store = test_db.open().await;
    const RUNS: usize = 10;
    for n in 1..=RUNS {
        let mut tx = store.begin_write().await.unwrap();
        let id = tx
            .insert_task(&eagle::store::NewTask {
                task_gid: format!("test:{n}"),
                source: "chat".into(),
                title: format!("count mode:count dir:{}", shared.display()),
                ..eagle::store::NewTask::default()
            })
            .await
            .unwrap()
            .unwrap();
        tx.start_run(id, "test", "!go").await.unwrap();
        tx.commit().await.unwrap();
    }
    let a = Running::start(&home, "executor");
    let b = Running::start(&home, "executor");
    let all_done = wait_for(&store, || async {
        let mut tx = store.begin_read().await.unwrap();
        let counts = tx.status_counts().await.unwrap();
        counts
            .runs
            .iter()
            .any(|(s, n)| *s == RunState::Pr && *n == RUNS as i64)
    })
    .await;
    assert!(all_done, "{}\n{}", a.log(), b.log());
    let seen = std::fs::read_to_string(shared.join("seen")).unwrap();
    let counts: Vec<usize> = seen.lines().map(|l| l.trim().parse().unwrap()).collect();
    assert_eq!(counts.len(), RUNS, "one line per worker: {seen}");
    assert!(
        counts.iter().all(|c| *c <= 2),
        "more than 2 workers at once: {counts:?}"
    );
    for running in [a, b] {
        let (code, log) = running.stop();
        assert_eq!(code, Some(0), "{log}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvers_hold_cancel_pause_and_hold_everything() {
    let test_db = crate::support::TestDb::new(crate::support::Db::Sqlite).await;
    let realm = Realm::start().await;
    let mut home = realm.home();
    home.set("EAGLE_DATABASE_URL", &test_db.url)
        .set("EAGLE_RUNNER__WORKER_COMMAND", &fake_worker_command())
        .set("EAGLE_RUNNER__WRAP_UP_GRACE", "2s");
    let (eagle, executor) = start_both(&realm, &home).await;
    let store = test_db.open().await;
    let say = |text: &str| realm.fake.post(realm.alex, "general", "controls", text);
    let never = home.dir.path().join("never");
    say(&format!("!queue first mode:gate gate:{}", never.display()));
    say(&format!("!queue second mode:gate gate:{}", never.display()));
    realm
        .wait_replies("general", "controls", |r| r.len() >= 2)
        .await;
    say("!go 1");
    wait_post(&realm, realm.executor, "[STATUS: working] run:1").await;
    let worker = run_of(&store, 1).await;
    let (pid, ticks) = (
        worker.worker_pid.unwrap() as i32,
        worker.worker_start_ticks.unwrap() as u64,
    );

    // !hold: the worker is stopped at a safe point and not restarted.
    say("!hold 1");
    wait_post(
        &realm,
        realm.executor,
        "[STATUS: held] run:1 the run is held",
    )
    .await;
    assert!(
        !eagle::ground::host::is_alive(pid, ticks),
        "the held run's worker lives on"
    );
    let run = run_of(&store, 1).await;
    assert!(run.held && !run.has_worker(), "{run:?}");
    assert_eq!(run.failures, 0, "a hold is not a failure");
    // !unhold: a fresh worker picks it up.
    say("!unhold 1");
    wait_post(&realm, realm.executor, "[STATUS: started] run:1 attempt 2").await;

    // !pause: nothing new starts; !resume: it does.
    say("!pause");
    wait_post(&realm, realm.eagle, "Paused: no runner starts new work").await;
    assert_eq!(store.work_in_sight().await.unwrap(), 0);
    say("!go 2");
    wait_post(&realm, realm.eagle, "run 2 is queued").await;
    say("!resume");
    wait_post(&realm, realm.executor, "[STATUS: started] run:2 attempt 1").await;

    // !cancel: the worker is killed, the run and its task end.
    wait_post(&realm, realm.executor, "[STATUS: working] run:2").await;
    let worker = run_of(&store, 2).await;
    let (pid2, ticks2) = (
        worker.worker_pid.unwrap() as i32,
        worker.worker_start_ticks.unwrap() as u64,
    );
    say("!cancel 2");
    wait_post(
        &realm,
        realm.executor,
        "[STATUS: stopped] run:2 the run was cancelled",
    )
    .await;
    assert!(!eagle::ground::host::is_alive(pid2, ticks2));
    assert_eq!(run_of(&store, 2).await.state, RunState::Cancelled);

    // !hold all: every running worker stops; !unhold all: they start again.
    wait_post(&realm, realm.executor, "[STATUS: working] run:1").await;
    say("!hold all");
    wait_post(
        &realm,
        realm.executor,
        "[STATUS: held] run:1 every run is held",
    )
    .await;
    assert!(!run_of(&store, 1).await.has_worker());
    say("!unhold all");
    wait_post(&realm, realm.executor, "[STATUS: started] run:1 attempt 3").await;

    // Every control is in the audit log, by whom.
    let trail = store.audit_trail("run:1").await.unwrap();
    for action in ["run.held", "run.unheld"] {
        assert!(
            trail
                .iter()
                .any(|e| e.action == action && e.actor.contains("alex@example.com")),
            "{action}"
        );
    }
    let controls = store.audit_trail("controls").await.unwrap();
    assert_eq!(controls.len(), 4, "{controls:#?}");
    say("!cancel 1");
    wait_post(&realm, realm.executor, "[STATUS: stopped] run:1").await;
    for running in [eagle, executor] {
        let (code, log) = running.stop();
        assert_eq!(code, Some(0), "{log}");
    }
    realm.fake.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_escalation_is_reminded_then_expires_and_the_worker_is_told() {
    let test_db = crate::support::TestDb::new(crate::support::Db::Sqlite).await;
    let realm = Realm::start().await;
    let mut home = realm.home();
    home.set("EAGLE_DATABASE_URL", &test_db.url)
        .set("EAGLE_RUNNER__WORKER_COMMAND", &fake_worker_command())
        .set("EAGLE_DECISIONS__REMINDER_AFTER", "1s")
        .set("EAGLE_DECISIONS__APPROVAL_TTL", "3s");
    let (eagle, executor) = start_both(&realm, &home).await;
    realm
        .fake
        .post(realm.alex, "general", "ttl", "!queue wait for nobody");
    realm
        .wait_replies("general", "ttl", |r| !r.is_empty())
        .await;
    realm.fake.post(realm.alex, "general", "ttl", "!go 1");
    wait_post(&realm, realm.eagle, "[ESCALATED: merge_pr] run:1").await;
    let reminder = wait_post(&realm, realm.eagle, "reminder: run 1 request").await;
    assert!(
        reminder
            .content
            .starts_with(&format!("@**Alex|{}**", realm.alex)),
        "{}",
        reminder.content
    );
    wait_post(&realm, realm.eagle, "[EXPIRED: merge_pr] run:1").await;
    let done = wait_post(&realm, realm.executor, "[DONE: pr_ready] run:1").await;
    assert!(done.content.contains("nobody answered"), "{}", done.content);
    let store = test_db.open().await;
    let merge = store
        .requests_of_run(1)
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.action == "merge_pr")
        .unwrap();
    assert_eq!(merge.status, RequestStatus::Expired);
    assert!(merge.delivered_at.is_some(), "the worker was told");
    for running in [eagle, executor] {
        let (code, log) = running.stop();
        assert_eq!(code, Some(0), "{log}");
    }
}

/// Starts both profiles and waits until both listen (their logs on failure).
pub(crate) async fn start_both(realm: &Realm, home: &Home) -> (Running, Running) {
    let eagle = Running::start(home, "eagle");
    let executor = Running::start(home, "executor");
    for (user, running, name) in [
        (realm.eagle, &eagle, "eagle"),
        (realm.executor, &executor, "executor"),
    ] {
        let listening = realm
            .fake
            .wait_until(WAIT, |f| {
                f.queues().iter().any(|q| q.user_id == user && q.parked)
            })
            .await;
        assert!(
            listening,
            "{name} did not start listening:\n{}",
            running.log()
        );
    }
    (eagle, executor)
}
