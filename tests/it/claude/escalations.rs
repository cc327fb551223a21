//! What reaches the owner: the hook denies an edit outside the run, an
//! escalated request stops the worker and the session is resumed after
//! `!approve`; a run over its cost cap is held.

use super::{RESUME_MARKER, claude_bin, last_prompt, shell, start_fake};
use crate::support::Home;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_as_a_worker_asks_through_its_hook_and_is_resumed() {
    let claude = claude_bin();
    let mut home = Home::new();
    let outside = home.dir.path().join("outside.txt");
    let (url, model) = start_fake(outside.clone()).await;
    // A `gh-merge` that asks Eagle in the free-text form (the `gh` shim asks
    // with parameters and Eagle merges), and leaves a
    // mark where it runs once approved instead of merging anything.
    let fakebin = home.dir.path().join("fakebin");
    std::fs::create_dir(&fakebin).unwrap();
    std::fs::write(
        fakebin.join("gh-merge"),
        "#!/bin/sh\neagle request merge_pr \"PR #$3\" || exit $?\necho \"$*\" > merged-marker\necho merged\n",
    )
    .unwrap();
    eagle::ground::host::chmod(&fakebin.join("gh-merge"), 0o755).unwrap();
    crate::claude::as_worker(&mut home, &claude, &url)
        .set(
            "EAGLE_RUNNER__WORKER_PATH",
            &format!("{}:/usr/local/bin:/usr/bin:/bin", fakebin.display()),
        )
        .set("EAGLE_RUNNER__NO_OUTPUT_TIMEOUT", "60s")
        .set("EAGLE_RUNNER__HOOK_TIMEOUT", "30s")
        .set("EAGLE_RUNNER__MAX_COST_USD", "5")
        .set("EAGLE_RUNNER__STATUS_INTERVAL", "0s");

    let (stdout, stderr, ok) = shell(&home, "!queue Fix the tab preview\n!go 1\n").await;
    assert!(ok, "{stderr}");
    let store = eagle::store::Store::open(&eagle::profile::DatabaseUrl::new(format!(
        "sqlite://{}?mode=rwc",
        home.dir.path().join("data/eagle.db").display()
    )))
    .await
    .unwrap();
    let requests = store.requests().requests_of_run(1).await.unwrap();
    let action = |a: &str| {
        requests
            .iter()
            .find(|r| r.action == a)
            .unwrap_or_else(|| panic!("no {a} request:\n{stdout}\n{stderr}"))
            .clone()
    };
    // The Write outside the run's directory was denied by the hook, asked
    // nobody, and did not run.
    assert!(!outside.exists(), "a denied tool call ran");
    assert!(
        requests.iter().all(|r| r.action != "modify_unrelated_file"),
        "{requests:#?}"
    );
    // The merge was escalated, and did not run.
    let merge = action("merge_pr");
    assert_eq!(merge.status, eagle::store::RequestStatus::Escalated);
    assert_eq!(merge.via, "socket");
    assert_eq!(requests.len(), 1, "{requests:#?}");
    let work = home.dir.path().join("data/executor/runs/1/work");
    assert!(
        !work.join("merged-marker").exists(),
        "an escalated tool call ran"
    );
    assert!(
        stdout.contains("Исполнитель: [STATUS: investigation] run:1 reading the code"),
        "{stdout}"
    );
    assert!(
        stdout.contains("Eagle: [ESCALATED: merge_pr] run:1 req:"),
        "{stdout}"
    );
    let run = {
        let mut tx = store.begin_read().await.unwrap();
        tx.tasks().run(1).await.unwrap().unwrap()
    };
    let session = run
        .worker_session_id
        .clone()
        .expect("the runner chose a session");
    assert!(
        run.cost_usd > 0.0 && run.turns > 0,
        "cost and turns: {run:?}"
    );
    let log = std::fs::read_to_string(run.log_path.as_deref().unwrap()).unwrap();
    assert!(
        log.contains("\"type\":\"system\"") && log.contains("\"type\":\"result\""),
        "{log}"
    );
    // The worker's own CLAUDE.md and AGENTS.md are there for it, with the rules.
    assert!(
        std::fs::read_to_string(work.join("AGENTS.md"))
            .unwrap()
            .contains("eagle request")
    );

    // The owner approves in a second session: the same session is resumed,
    // and the identical merge request is allowed once.
    let (stdout, stderr, ok) = shell(&home, &format!("!approve 1 {}\n", merge.id)).await;
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("Исполнитель: [DONE: pr_ready] run:1 PR #1 merged after approval"),
        "{stdout}\n{stderr}"
    );
    assert!(
        work.join("merged-marker").exists(),
        "the approved merge did not run"
    );
    let run = {
        let mut tx = store.begin_read().await.unwrap();
        tx.tasks().run(1).await.unwrap().unwrap()
    };
    assert_eq!(run.state, eagle::store::RunState::Pr);
    assert_eq!(run.worker_session_id.as_deref(), Some(session.as_str()));
    let seen = model.seen.lock().unwrap();
    assert!(
        seen.sessions.iter().all(|s| *s == session),
        "{:?}",
        seen.sessions
    );
    assert!(
        seen.unknown.is_empty(),
        "the fake was asked for {:?}",
        seen.unknown
    );
    let resumed = seen.requests.iter().any(|r| {
        last_prompt(r).is_some_and(|p| p.contains(RESUME_MARKER))
            && r["messages"].as_array().unwrap().len() > 2
    });
    assert!(
        resumed,
        "the resumed request did not carry the earlier conversation"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_over_its_cost_cap_is_held_and_its_owner_asked() {
    let claude = claude_bin();
    let mut home = Home::new();
    let (url, _model) = start_fake(home.dir.path().join("outside.txt")).await;
    // Each model call costs $0.006 (1,000 tokens in, 100 out): the cap is
    // reached after the second.
    crate::claude::as_worker(&mut home, &claude, &url).set("EAGLE_RUNNER__MAX_COST_USD", "0.01");
    let (stdout, stderr, ok) = shell(&home, "!queue Expensive\n!go 1\n").await;
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("[STATUS: held] run:1 cost cap reached"),
        "{stdout}"
    );
    assert!(
        stdout.contains("Eagle: @**") && stdout.contains("run 1 is held: it reached its cost cap"),
        "{stdout}"
    );
    assert!(
        stdout.contains("`!retry 1` allows it as much again"),
        "{stdout}"
    );
    let store = eagle::store::Store::open(&eagle::profile::DatabaseUrl::new(format!(
        "sqlite://{}?mode=rwc",
        home.dir.path().join("data/eagle.db").display()
    )))
    .await
    .unwrap();
    let run = {
        let mut tx = store.begin_read().await.unwrap();
        tx.tasks().run(1).await.unwrap().unwrap()
    };
    assert!(run.held && run.cost_usd >= 0.01, "{run:?}");
    assert_eq!(run.cost_cap_usd, Some(0.01));
}
