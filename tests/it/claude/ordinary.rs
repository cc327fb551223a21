//! An ordinary bug-fix session asks nobody and needs one worker.

use serde_json::Value;

use super::{claude_bin, ordinary_session, project, shell, start_scripted, tool_results};
use crate::support::Home;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ordinary_session_asks_nobody_and_needs_one_worker() {
    let claude = claude_bin();
    let mut home = Home::new();
    let repo = home.dir.path().join("repo");
    project(&repo);
    let work = home.dir.path().join("data/executor/runs/1/work");
    let script = ordinary_session(&work);
    assert!(script.len() >= 30);
    let calls = script.len();
    let (url, model) = start_scripted(home.dir.path().join("outside.txt"), script).await;
    crate::claude::as_worker(&mut home, &claude, &url)
        .set("EAGLE_RUNNER__REPO", &repo.display().to_string())
        .set("EAGLE_RUNNER__NO_OUTPUT_TIMEOUT", "60s")
        .set("EAGLE_RUNNER__HOOK_TIMEOUT", "30s")
        .set("EAGLE_RUNNER__MAX_COST_USD", "5")
        .set("EAGLE_RUNNER__STATUS_INTERVAL", "0s");

    let (stdout, stderr, ok) = shell(&home, "!queue Fix add\n!go 1\n").await;
    assert!(ok, "{stderr}");
    let store = eagle::store::Store::open(&eagle::profile::DatabaseUrl::new(format!(
        "sqlite://{}?mode=rwc",
        home.dir.path().join("data/eagle.db").display()
    )))
    .await
    .unwrap();
    // Zero requests, zero pings, one worker start.
    let requests = store.requests().requests_of_run(1).await.unwrap();
    assert!(requests.is_empty(), "{requests:#?}\n{stdout}");
    assert!(!stdout.contains("@**"), "somebody was pinged:\n{stdout}");
    let starts = stdout.matches("[STATUS: started] run:1 attempt").count();
    assert_eq!(starts, 1, "{stdout}");
    assert!(
        stdout.contains("[DONE: pr_ready] run:1 the fix is committed"),
        "{stdout}\n{stderr}"
    );
    // Every call ran: the model got a result for each, none an error.
    let seen = model.seen.lock().unwrap();
    let last = seen
        .requests
        .iter()
        .max_by_key(|r| tool_results(r))
        .expect("the model was asked");
    assert_eq!(tool_results(last), calls, "{stdout}");
    let errors: Vec<&Value> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == "tool_result" && b["is_error"] == true)
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    drop(seen);
    // The edit and the commits are in the run's checkout (the worker's user's).
    let log = std::process::Command::new("git")
        .args(["-c", "safe.directory=*", "log", "--format=%s"])
        .current_dir(&work)
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&log.stdout);
    assert!(
        log.contains("fix: add() adds") && log.contains("chore: mark"),
        "{log}"
    );
    assert!(
        std::fs::read_to_string(work.join("src/calc.py"))
            .unwrap()
            .contains("return a + b")
    );
}
