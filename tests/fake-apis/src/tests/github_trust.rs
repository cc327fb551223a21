//! What the fake GitHub knows about trust: forks and `head.repo` (REST) and
//! `headRepository` (GraphQL), `author_association` on reviews, and branch
//! protection refusing a merge with GitHub's 405, with a client that asks
//! again for nothing changed recorded as a violation.

use serde_json::{Value, json};

use super::github::{REPO, SHA, SHA2, world};
use crate::{CheckRunSpec, PrSpec, Protection};

const MERGE: &str = "/repos/acme/app/pulls/1/merge";

fn merge_at(sha: &str) -> Value {
    json!({"sha": sha, "merge_method": "squash"})
}

#[tokio::test]
async fn a_fork_pr_names_the_fork_as_its_heads_repository() {
    let (fake, gh) = world().await;
    fake.add_fork(REPO, "attacker/app");
    // The fork's branch borrows a name; the repository's own PR #1 is from
    // its own branch.
    let fork_pr = fake.open_pr(
        REPO,
        PrSpec::new("attacker", "eagle/run-1", SHA2).from_fork("attacker/app"),
    );
    let own = gh.get("/repos/acme/app/pulls/1").await.body;
    assert_eq!(own["head"]["repo"]["full_name"], "acme/app");
    assert_eq!(own["head"]["repo"]["fork"], false);
    let pr = gh
        .get(&format!("/repos/acme/app/pulls/{fork_pr}"))
        .await
        .body;
    assert_eq!(pr["head"]["ref"], "eagle/run-1");
    assert_eq!(pr["head"]["label"], "attacker:eagle/run-1");
    assert_eq!(pr["head"]["repo"]["full_name"], "attacker/app");
    assert_eq!(pr["head"]["repo"]["fork"], true);
    assert_eq!(pr["base"]["repo"]["full_name"], "acme/app");
    assert_eq!(fake.pr(REPO, fork_pr).head_repo, "attacker/app");
    // A push to the repository's branch of that name does not move the
    // fork's PR, and the fork's branch is not one of the repository's.
    fake.push_branch(REPO, "eagle/run-1", SHA);
    assert_eq!(fake.pr(REPO, fork_pr).head_sha, SHA2);
    // Listed by `head=owner:branch`, it is its owner's, not the repository's.
    let numbers = |owner: &str| {
        let path = format!("/repos/acme/app/pulls?head={owner}:eagle/run-1&state=all");
        let gh = &gh;
        async move {
            let list = gh.get(&path).await.body;
            list.as_array()
                .unwrap()
                .iter()
                .map(|p| p["number"].as_u64().unwrap())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(numbers("attacker").await, [fork_pr]);
    assert!(numbers("acme").await.is_empty());

    let query = r#"query($n: Int!) { repository(owner: "acme", name: "app") {
        pullRequest(number: $n) { headRefName headRepository { nameWithOwner } } } }"#;
    for (n, repo) in [(fork_pr, "attacker/app"), (1, "acme/app")] {
        let answer = gh.graphql(query, json!({"n": n})).await;
        let pull = &answer.body["data"]["repository"]["pullRequest"];
        assert_eq!(
            pull["headRepository"]["nameWithOwner"], repo,
            "{}",
            answer.body
        );
    }
    fake.assert_clean();
}

#[tokio::test]
async fn reviews_carry_the_reviewers_relation_to_the_repository() {
    let (fake, gh) = world().await;
    fake.set_association(REPO, "mallory", "NONE");
    fake.add_review(REPO, 1, Some("alex"), "APPROVED", "");
    fake.add_review(REPO, 1, Some("mallory"), "APPROVED", "lgtm");
    let reviews = gh.get("/repos/acme/app/pulls/1/reviews").await.body;
    let said: Vec<(&str, &str)> = reviews
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["user"]["login"].as_str().unwrap(),
                r["author_association"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(said, [("alex", "MEMBER"), ("mallory", "NONE")]);
    fake.assert_clean();
}

#[tokio::test]
async fn branch_protection_refuses_a_merge_with_405_as_github_does() {
    let (fake, gh) = world().await;
    fake.protect_branch(
        REPO,
        "main",
        Protection {
            required_checks: vec!["CI".into()],
            required_approvals: 1,
        },
    );
    let message = |answer: &super::Answer| answer.body["message"].as_str().unwrap_or("").to_owned();
    let refused = gh.put(MERGE, merge_at(SHA)).await;
    assert_eq!(
        (refused.status, message(&refused)),
        (405, "Required status check \"CI\" is expected.".to_owned())
    );
    let run = fake.add_check_run(REPO, CheckRunSpec::new("CI", SHA, "in_progress", None));
    let refused = gh.put(MERGE, merge_at(SHA)).await;
    assert_eq!(
        message(&refused),
        "Required status check \"CI\" is in progress."
    );
    fake.update_check_run(REPO, run, "completed", Some("failure"));
    let refused = gh.put(MERGE, merge_at(SHA)).await;
    assert_eq!(
        message(&refused),
        "Required status check \"CI\" is failing."
    );
    fake.add_check_run(
        REPO,
        CheckRunSpec::new("CI", SHA, "completed", Some("success")),
    );
    // Checks green; an outsider's approval is none, and an outsider asking
    // for changes blocks nothing.
    fake.set_association(REPO, "mallory", "CONTRIBUTOR");
    fake.add_review(REPO, 1, Some("mallory"), "APPROVED", "");
    let refused = gh.put(MERGE, merge_at(SHA)).await;
    assert_eq!(
        message(&refused),
        "At least 1 approving review is required by reviewers with write access."
    );
    fake.add_review(REPO, 1, Some("sam"), "CHANGES_REQUESTED", "");
    let refused = gh.put(MERGE, merge_at(SHA)).await;
    assert_eq!(
        message(&refused),
        "Changes were requested by a reviewer with write access."
    );
    fake.add_review(REPO, 1, Some("sam"), "APPROVED", "");
    fake.add_review(REPO, 1, Some("mallory"), "CHANGES_REQUESTED", "");
    assert!(!fake.pr(REPO, 1).merged);
    fake.assert_clean();
    let merged = gh.put(MERGE, merge_at(SHA)).await;
    assert_eq!(merged.status, 200, "{}", merged.body);
    assert!(fake.pr(REPO, 1).merged);
    fake.assert_clean();
}

#[tokio::test]
async fn asking_again_after_a_405_with_nothing_changed_is_a_violation() {
    let (fake, gh) = world().await;
    fake.protect_branch(
        REPO,
        "main",
        Protection {
            required_checks: vec![],
            required_approvals: 2,
        },
    );
    fake.add_review(REPO, 1, Some("alex"), "APPROVED", "");
    assert_eq!(gh.put(MERGE, merge_at(SHA)).await.status, 405);
    fake.assert_clean();
    assert_eq!(gh.put(MERGE, merge_at(SHA)).await.status, 405);
    let violations = fake.violations();
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert!(
        violations[0].contains("asked again after GitHub refused it")
            && violations[0].contains("At least 2 approving reviews"),
        "{violations:?}"
    );
    fake.clear_violations();
    // Something changed: asking again is fine.
    fake.add_review(REPO, 1, Some("sam"), "APPROVED", "");
    assert_eq!(gh.put(MERGE, merge_at(SHA)).await.status, 200);
    fake.assert_clean();
}
