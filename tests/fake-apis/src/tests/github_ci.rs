//! CI over REST: check runs, the combined status, workflow runs, re-runs
//! and dispatches.

use serde_json::json;

use super::github::{REPO, SHA, SHA2, world};
use crate::{CheckRunSpec, WorkflowRunSpec, WorkflowSpec};

fn run_spec(sha: &str, status: &str, conclusion: Option<&str>) -> WorkflowRunSpec {
    WorkflowRunSpec {
        workflow_id: 11,
        head_sha: sha.to_owned(),
        head_branch: "fix/a".to_owned(),
        event: "pull_request".to_owned(),
        status: status.to_owned(),
        conclusion: conclusion.map(str::to_owned),
        pull_requests: vec![1],
    }
}

#[tokio::test]
async fn check_runs_filter_and_page() {
    let (fake, gh) = world().await;
    let path = format!("/repos/acme/app/commits/{SHA}/check-runs");
    let none = gh.get(&path).await;
    assert_eq!(none.body, json!({"total_count": 0, "check_runs": []}));

    let old = fake.add_check_run(
        REPO,
        CheckRunSpec::new("build", SHA, "completed", Some("failure")),
    );
    let new = fake.add_check_run(REPO, CheckRunSpec::new("build", SHA, "in_progress", None));
    let lint = fake.add_check_run(REPO, CheckRunSpec::new("lint", SHA, "queued", None));
    let mut other_app = CheckRunSpec::new("codecov", SHA, "completed", Some("success"));
    other_app.app_id = 254;
    fake.add_check_run(REPO, other_app);

    let latest = gh.get(&path).await;
    assert_eq!(
        latest.body["total_count"], 3,
        "a newer run of a name hides the old one"
    );
    let runs = latest.body["check_runs"].as_array().unwrap();
    let build = runs.iter().find(|r| r["name"] == "build").unwrap();
    assert_eq!(build["id"], new);
    assert_eq!(build["status"], "in_progress");
    assert_eq!(
        build["conclusion"],
        serde_json::Value::Null,
        "null while incomplete"
    );
    assert_eq!(build["completed_at"], serde_json::Value::Null);
    assert!(build["started_at"].is_string() && build["details_url"].is_string());
    assert_eq!(build["head_sha"], SHA);
    assert!(build["check_suite"]["id"].is_u64());
    assert_eq!(build["app"]["slug"], "github-actions");
    assert_eq!(latest.header("link"), "");

    let all = gh.get(&format!("{path}?filter=all")).await;
    assert_eq!(all.body["total_count"], 4);
    let by_name = gh.get(&format!("{path}?check_name=build&filter=all")).await;
    let ids: Vec<u64> = by_name.body["check_runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, [new, old], "newest first");
    let queued = gh.get(&format!("{path}?status=queued")).await;
    assert_eq!(queued.body["check_runs"][0]["id"], lint);
    let app = gh.get(&format!("{path}?app_id=254")).await;
    assert_eq!(app.body["total_count"], 1);

    fake.update_check_run(REPO, new, "completed", Some("success"));
    let done = gh.get(&format!("{path}?check_name=build")).await;
    assert_eq!(done.body["check_runs"][0]["conclusion"], "success");
    assert!(done.body["check_runs"][0]["completed_at"].is_string());

    let page = gh.get(&format!("{path}?per_page=2&page=2")).await;
    assert_eq!(page.body["total_count"], 3);
    assert_eq!(page.body["check_runs"].as_array().unwrap().len(), 1);
    let link = page.header("link");
    assert!(
        link.contains("page=1>; rel=\"prev\"") && link.contains("per_page=2"),
        "{link}"
    );
    assert!(!link.contains("rel=\"next\""), "{link}");

    let by_branch = gh.get("/repos/acme/app/commits/fix%2Fa/check-runs").await;
    assert_eq!(
        by_branch.body["total_count"], 3,
        "a branch name resolves to its head"
    );
    fake.assert_clean();

    for bad in ["?status=done", "?filter=newest", "?app_id=x"] {
        assert_eq!(gh.get(&format!("{path}{bad}")).await.status, 422, "{bad}");
    }
    let unknown = gh
        .get(&format!(
            "/repos/acme/app/commits/{}/check-runs",
            "f".repeat(40)
        ))
        .await;
    assert_eq!(unknown.status, 422);
    assert!(
        unknown.body["message"]
            .as_str()
            .unwrap()
            .starts_with("No commit found for SHA")
    );
    assert_eq!(fake.violations().len(), 4);
    fake.clear_violations();
}

#[tokio::test]
async fn the_combined_status_is_pending_without_statuses() {
    let (fake, gh) = world().await;
    let path = format!("/repos/acme/app/commits/{SHA}/status");
    let empty = gh.get(&path).await;
    assert_eq!(
        (
            empty.body["state"].clone(),
            empty.body["total_count"].clone()
        ),
        (json!("pending"), json!(0))
    );
    assert_eq!(empty.body["sha"], SHA);

    fake.add_status(REPO, SHA, "ci/legacy", "pending", None);
    fake.add_status(
        REPO,
        SHA,
        "ci/legacy",
        "success",
        Some("https://ci.example/1"),
    );
    fake.add_status(REPO, SHA, "deploy", "success", None);
    let green = gh.get(&path).await;
    assert_eq!(
        green.body["state"], "success",
        "the latest status of each context counts"
    );
    assert_eq!(green.body["total_count"], 2);
    assert_eq!(
        green.body["statuses"][0]["target_url"],
        "https://ci.example/1"
    );
    fake.add_status(REPO, SHA, "deploy", "error", None);
    assert_eq!(gh.get(&path).await.body["state"], "failure");

    let missing = gh
        .get(&format!("/repos/acme/app/commits/{SHA2}/status"))
        .await;
    assert_eq!(missing.status, 404);
    fake.clear_violations();
    fake.assert_clean();
}

#[tokio::test]
async fn workflow_runs_are_listed_with_filters() {
    let (fake, gh) = world().await;
    let failed = fake.add_workflow_run(REPO, run_spec(SHA, "completed", Some("failure")));
    let mut push = run_spec(SHA2, "in_progress", None);
    push.event = "push".to_owned();
    push.head_branch = "main".to_owned();
    push.pull_requests.clear();
    fake.add_workflow_run(REPO, push);

    let all = gh.get("/repos/acme/app/actions/runs").await;
    assert_eq!(all.body["total_count"], 2);
    let first = &all.body["workflow_runs"][1];
    assert_eq!(first["id"], failed);
    assert_eq!(
        (first["name"].clone(), first["path"].clone()),
        (json!("CI"), json!(".github/workflows/ci.yml"))
    );
    assert_eq!(
        (first["head_sha"].clone(), first["head_branch"].clone()),
        (json!(SHA), json!("fix/a"))
    );
    assert_eq!(
        (first["status"].clone(), first["conclusion"].clone()),
        (json!("completed"), json!("failure"))
    );
    assert_eq!(first["run_attempt"], 1);
    assert!(first["check_suite_id"].is_u64());
    assert_eq!(first["pull_requests"][0]["number"], 1);

    let cases = [
        (format!("head_sha={SHA}"), 1),
        ("branch=main".to_owned(), 1),
        ("event=pull_request".to_owned(), 1),
        ("status=failure".to_owned(), 1),
        ("status=in_progress".to_owned(), 1),
        ("status=success".to_owned(), 0),
        ("actor=eagle-bot".to_owned(), 1),
        (format!("head_sha={}", "0".repeat(40)), 0),
    ];
    for (query, count) in cases {
        let answer = gh
            .get(&format!("/repos/acme/app/actions/runs?{query}"))
            .await;
        assert_eq!(answer.body["total_count"], count, "{query}");
    }
    let bare = gh
        .get(&format!(
            "/repos/acme/app/actions/runs?head_sha={SHA}&exclude_pull_requests=true"
        ))
        .await;
    assert_eq!(bare.body["workflow_runs"][0]["pull_requests"], json!([]));
    fake.assert_clean();

    assert_eq!(
        gh.get("/repos/acme/app/actions/runs?status=red")
            .await
            .status,
        422
    );
    assert_eq!(
        gh.get("/repos/acme/app/actions/runs?created=%3E2024-01-01")
            .await
            .status,
        200
    );
    assert_eq!(fake.violations().len(), 2, "{:?}", fake.violations());
    fake.clear_violations();
}

#[tokio::test]
async fn a_rerun_replays_the_original_commit() {
    let (fake, gh) = world().await;
    let run = fake.add_workflow_run(REPO, run_spec(SHA, "completed", Some("failure")));
    fake.add_check_run(
        REPO,
        CheckRunSpec::new("CI", SHA, "completed", Some("failure")),
    );
    fake.push(REPO, 1, SHA2);

    let rerun = gh
        .post(
            &format!("/repos/acme/app/actions/runs/{run}/rerun"),
            json!({}),
        )
        .await;
    assert_eq!((rerun.status, rerun.body.clone()), (201, json!({})));
    let reruns = fake.reruns();
    assert_eq!(reruns.len(), 1);
    assert_eq!(
        (reruns[0].run_id, reruns[0].head_sha.as_str()),
        (run, SHA),
        "the old commit, not the new head"
    );
    let check = reruns[0].check_run_id.unwrap();
    let old_checks = gh
        .get(&format!("/repos/acme/app/commits/{SHA}/check-runs"))
        .await;
    assert_eq!(old_checks.body["check_runs"][0]["id"], check);
    assert_eq!(old_checks.body["check_runs"][0]["status"], "queued");
    let new_checks = gh
        .get(&format!("/repos/acme/app/commits/{SHA2}/check-runs"))
        .await;
    assert_eq!(
        new_checks.body["total_count"], 0,
        "the new head still has no CI"
    );
    let listed = gh
        .get(&format!("/repos/acme/app/actions/runs?head_sha={SHA}"))
        .await;
    assert_eq!(
        (
            listed.body["workflow_runs"][0]["run_attempt"].clone(),
            listed.body["workflow_runs"][0]["status"].clone()
        ),
        (json!(2), json!("queued"))
    );

    let running = gh
        .post(
            &format!("/repos/acme/app/actions/runs/{run}/rerun"),
            json!({}),
        )
        .await;
    assert_eq!(
        (running.status, running.body["message"].as_str()),
        (403, Some("This workflow is already running"))
    );
    fake.update_workflow_run(REPO, run, "completed", Some("success"));
    fake.set_rerun_creates_check_run(false);
    let quiet = gh
        .call(
            reqwest::Method::POST,
            &format!("/repos/acme/app/actions/runs/{run}/rerun"),
            None,
        )
        .await;
    assert_eq!(quiet.status, 201);
    assert_eq!(fake.reruns()[1].check_run_id, None);
    assert_eq!(
        gh.post("/repos/acme/app/actions/runs/4/rerun", json!({}))
            .await
            .status,
        404
    );
    fake.assert_clean();
}

#[tokio::test]
async fn dispatches_need_an_existing_workflow_and_a_ref() {
    let (fake, gh) = world().await;
    let mut manual = WorkflowSpec::new(12, "Nightly", "nightly.yml");
    manual.dispatchable = false;
    fake.add_workflow(REPO, manual);
    for workflow in ["11", "ci.yml"] {
        let answer = gh
            .post(
                &format!("/repos/acme/app/actions/workflows/{workflow}/dispatches"),
                json!({"ref": "fix/a", "inputs": {"reason": "ci never ran"}}),
            )
            .await;
        assert_eq!(
            (answer.status, answer.body.clone()),
            (204, serde_json::Value::Null),
            "{workflow}"
        );
    }
    let dispatches = fake.dispatches();
    assert_eq!(dispatches.len(), 2);
    assert_eq!(
        (dispatches[1].workflow_id, dispatches[1].git_ref.as_str()),
        (11, "fix/a")
    );
    assert_eq!(dispatches[1].inputs["reason"], "ci never ran");
    assert_eq!(
        gh.post(
            "/repos/acme/app/actions/workflows/ci.yml/dispatches",
            json!({"ref": "main"})
        )
        .await
        .status,
        204
    );
    fake.assert_clean();

    let missing = gh
        .post(
            "/repos/acme/app/actions/workflows/deploy.yml/dispatches",
            json!({"ref": "main"}),
        )
        .await;
    assert_eq!(missing.status, 404);
    let cases = [
        ("ci.yml", json!({"inputs": {}}), "\"ref\" wasn't supplied"),
        ("ci.yml", json!({"ref": "nope"}), "No ref found for: nope"),
        (
            "ci.yml",
            json!({"ref": "main", "inputs": {"force": true}}),
            "Unexpected inputs provided",
        ),
        ("nightly.yml", json!({"ref": "main"}), "workflow_dispatch"),
    ];
    for (workflow, body, message) in cases {
        let answer = gh
            .post(
                &format!("/repos/acme/app/actions/workflows/{workflow}/dispatches"),
                body,
            )
            .await;
        assert_eq!(answer.status, 422, "{message}");
        assert!(
            answer.body["message"].as_str().unwrap().contains(message),
            "{}",
            answer.body
        );
    }
    assert_eq!(fake.violations().len(), 4);
    assert_eq!(fake.dispatches().len(), 3);
    fake.clear_violations();
}
