//! The seed story: through `eagle shell` and a second shell that resumes it,
//! through Zulip with both profiles as separate processes, recorded Claude
//! Code hook inputs, and an escalation nobody answers.

use std::path::Path;

use eagle::store::{RequestStatus, RunState};

use super::{
    fake_home, fake_worker_command, home_store, posts, run_of, start_both, wait_for, wait_post,
};
use crate::support::{Home, text};
use crate::zulip::Realm;

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
    let requests = store.requests().requests_of_run(1).await.unwrap();
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
    let requests = store.requests().requests_of_run(1).await.unwrap();
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
    let requests = store.requests().requests_of_run(1).await.unwrap();
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
    let requests = store.requests().requests_of_run(1).await.unwrap();
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
        .requests()
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
