//! The PR loop end to end: both profiles as separate `eagle run`
//! processes against the fake Zulip and the strict fake GitHub, with the
//! fake worker. The worker's own effects on GitHub (a push, a reply in a
//! review thread) are the test's to make on the fake, as a real worker's
//! `git push` and `gh` would.

use eagle::store::{PrWork, RunState, Store};

use fake_apis::{CheckRunSpec, FakeGitHub, PrSpec, RepoSpec, WorkflowSpec};

use crate::executor::{fake_worker_command, wait_for};
use crate::support::{Db, Home, TestDb};
use crate::zulip::{Realm, Running, WAIT};

pub(crate) const REPO: &str = "acme/app";
pub(crate) const SHA1: &str = "1111111111111111111111111111111111111111";
const SHA2: &str = "2222222222222222222222222222222222222222";
const UI_TESTS: &str = "macOS UI Tests";

/// A fake GitHub with `acme/app`, its CI workflow, and the token both
/// profiles use.
pub(crate) struct Hub {
    pub(crate) fake: FakeGitHub,
    pub(crate) token: String,
}

pub(crate) async fn hub() -> Hub {
    let fake = FakeGitHub::start().await;
    let token = fake.create_token("eagle-bot");
    fake.add_repo(REPO, RepoSpec::default());
    fake.add_workflow(REPO, WorkflowSpec::new(7, "CI", "ci.yml"));
    Hub { fake, token }
}

impl Hub {
    /// A draft PR by the workers' account, at SHA1.
    pub(crate) fn open_draft(&self, branch: &str) -> u64 {
        let mut spec = PrSpec::new("executor-bot", branch, SHA1);
        spec.draft = true;
        self.fake.open_pr(REPO, spec)
    }

    pub(crate) fn check(&self, sha: &str, status: &str, conclusion: Option<&str>) {
        self.fake
            .add_check_run(REPO, CheckRunSpec::new(UI_TESTS, sha, status, conclusion));
    }
}

/// Both profiles' settings for the fake GitHub: a fast poll, so that the
/// test waits seconds, not minutes, and a grace long enough that a worker's
/// push, made by the test once it sees the worker's post, always counts as
/// its fix (the posts may reach chat seconds after the run's end on a
/// loaded machine).
fn with_github(home: &mut Home, hub: &Hub) {
    home.set("GITHUB_TOKEN", &hub.token)
        .set("EAGLE_GITHUB__API_URL", &hub.fake.url())
        .set("EAGLE_GITHUB__REPO", REPO)
        .set("EAGLE_GITHUB__POLL_INTERVAL", "1s")
        .set("EAGLE_GITHUB__CI_GRACE", "60s")
        .set("EAGLE_GITHUB__REQUIRED_CHECKS", UI_TESTS)
        .set("EAGLE_GITHUB__REQUIRED_LABELS", "eagle")
        .set("EAGLE_GITHUB__BOT_LOGINS", "executor-bot,eagle-bot");
}

pub(crate) async fn start(
    realm: &Realm,
    hub: &Hub,
    db: &TestDb,
    extra: &[(&str, &str)],
) -> (Home, Running, Running) {
    let mut home = realm.home();
    home.set("EAGLE_DATABASE_URL", &db.url)
        .set("EAGLE_RUNNER__WORKER_COMMAND", &fake_worker_command())
        .set("EAGLE_RUNNER__STATUS_INTERVAL", "0s")
        .set("EAGLE_OWNER", &realm.alex.to_string())
        .set("EAGLE_EXECUTOR_BOT", "executor-bot@example.com");
    with_github(&mut home, hub);
    for (key, value) in extra {
        home.set(key, value);
    }
    let (eagle, executor) = crate::executor::start_both(realm, &home).await;
    (home, eagle, executor)
}

/// Alex queues a task and approves it (`!go 1`) in #general.
pub(crate) async fn queue_and_go(realm: &Realm, title: &str) {
    realm
        .fake
        .post(realm.alex, "general", "tabs", &format!("!queue {title}"));
    realm
        .wait_replies("general", "tabs", |r| !r.is_empty())
        .await;
    realm.fake.post(realm.alex, "general", "tabs", "!go 1");
}

async fn run_of(store: &Store, id: i64) -> eagle::store::Run {
    let mut tx = store.begin_read().await.unwrap();
    tx.tasks().run(id).await.unwrap().expect("the run exists")
}

/// Waits for a post from `sender` in run 1's topic containing `needle`,
/// after the first `skip` of its posts there.
pub(crate) async fn wait_run_post(realm: &Realm, sender: u64, needle: &str) -> String {
    let wanted = needle.to_string();
    let ok = realm
        .fake
        .wait_until(WAIT, |f| {
            f.messages_in("executor", "run 1")
                .iter()
                .any(|m| m.sender_id == sender && m.content.contains(&wanted))
        })
        .await;
    let topic: Vec<String> = realm
        .fake
        .messages_in("executor", "run 1")
        .into_iter()
        .map(|m| m.content)
        .collect();
    assert!(
        ok,
        "no post with {needle:?} in run 1:\n{}",
        topic.join("\n")
    );
    topic.into_iter().find(|c| c.contains(needle)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_carried_from_failed_ci_to_complete_and_back_by_a_human_comment_on_sqlite() {
    carried_from_failed_ci_to_complete(Db::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_carried_from_failed_ci_to_complete_and_back_by_a_human_comment_on_postgres() {
    carried_from_failed_ci_to_complete(Db::Postgres).await;
}

async fn carried_from_failed_ci_to_complete(db: Db) {
    let db = TestDb::new(db).await;
    let realm = Realm::start().await;
    let hub = hub().await;
    let number = hub.open_draft("eagle/run-1");
    hub.check(SHA1, "completed", Some("failure"));
    let (_home, eagle, executor) = start(&realm, &hub, &db, &[]).await;
    let store = db.open().await;

    queue_and_go(&realm, &format!("Fix the tab preview mode:pr pr:{number}")).await;

    // The investigation opens the PR; the loop finds CI failed: a fix-ci worker.
    wait_run_post(
        &realm,
        realm.executor,
        &format!("[STATUS: pr] run:1 PR #{number} waits"),
    )
    .await;
    wait_run_post(
        &realm,
        realm.executor,
        "[STATUS: fix_ci] run:1 CI failed on 1111111: macOS UI Tests",
    )
    .await;
    wait_run_post(&realm, realm.executor, "[DONE: ci_fixed] run:1").await;
    // The draft got the required label.
    assert_eq!(hub.fake.pr(REPO, number).labels, vec!["eagle".to_string()]);
    let run = run_of(&store, 1).await;
    assert_eq!(run.ci_attempts, 1);

    // A reviewer leaves a comment; the fix is pushed and CI is green.
    let thread = hub.fake.add_review_thread(
        REPO,
        number,
        Some("alex"),
        "TabBar.swift",
        Some(12),
        "Please rename this",
    );
    hub.check(SHA2, "completed", Some("success"));
    hub.fake.push(REPO, number, SHA2);
    wait_run_post(
        &realm,
        realm.executor,
        "[STATUS: fix_comments] run:1 1 unresolved review thread(s): TabBar.swift:12",
    )
    .await;
    wait_run_post(&realm, realm.executor, "[DONE: comments_addressed] run:1").await;
    // The worker's `reply_thread` (the id from its prompt): Eagle answered
    // in the thread with its own login, the only one whose acknowledgement
    // counts.
    let replies = hub.fake.thread_comments(REPO, &thread);
    assert!(
        replies
            .iter()
            .any(|(author, body)| author.as_deref() == Some("eagle-bot")
                && body.starts_with("[ACKNOWLEDGED: fixed] renamed")),
        "{replies:#?}"
    );

    // Nothing unresolved and CI green: a review, then complete.
    wait_run_post(&realm, realm.executor, "[STATUS: pr_review] run:1").await;
    wait_run_post(&realm, realm.executor, "[DONE: review_green] run:1").await;
    let done = wait_run_post(&realm, realm.eagle, "run 1 is complete").await;
    assert!(
        done.contains(&format!("@**Alex|{}**", realm.alex)),
        "{done}"
    );
    assert!(done.contains(&format!("/{REPO}/pull/{number}")), "{done}");
    let ok = wait_for(&store, || async {
        run_of(&store, 1).await.state == RunState::Complete
    })
    .await;
    assert!(ok, "{:?}", run_of(&store, 1).await);
    let run = run_of(&store, 1).await;
    assert_eq!(run.review_green_sha.as_deref(), Some(SHA2));
    assert_eq!(run.ci_attempts, 1, "one fix-ci worker in all");
    // Where the task was asked: one line per milestone, pinging nobody.
    let told = |prefix: &str| {
        let prefix = prefix.to_string();
        move |f: &fake_zulip::FakeZulip| {
            f.messages_from(realm.eagle)
                .iter()
                .filter(|m| m.topic == "tabs" && m.content.starts_with(&prefix))
                .count()
        }
    };
    let complete = realm
        .fake
        .wait_until(WAIT, |f| told("Run 1 of task #1 is complete")(f) == 1)
        .await;
    assert!(complete, "{:#?}", realm.fake.messages_from(realm.eagle));
    let f = &realm.fake;
    assert_eq!(told("Run 1 of task #1 started")(f), 1);
    assert_eq!(told("Run 1 of task #1 opened its PR")(f), 1);
    assert!(
        f.messages_from(realm.eagle)
            .iter()
            .filter(|m| m.topic == "tabs")
            .all(|m| m.mentioned_user_ids.is_empty()),
        "a milestone line pinged someone"
    );

    // A human comments on the complete draft: back to pr, a worker answers.
    hub.fake
        .add_issue_comment(REPO, number, Some("alex"), "One more thing: the tooltip");
    wait_run_post(
        &realm,
        realm.executor,
        "alex commented on its draft PR: back to pr",
    )
    .await;
    let trail = store.audit_log().audit_trail("run:1").await.unwrap();
    assert!(
        trail
            .iter()
            .any(|e| e.action == "run.pr" && e.decision.as_deref() == Some("complete → pr")),
        "{trail:#?}"
    );
    // It goes round again: the comment answered, reviewed, complete.
    let ok = wait_for(&store, || async {
        store
            .audit_log()
            .audit_trail("run:1")
            .await
            .unwrap()
            .iter()
            .filter(|e| e.action == "run.complete")
            .count()
            == 2
    })
    .await;
    assert!(ok, "{:?}", run_of(&store, 1).await);
    for running in [eagle, executor] {
        let (code, log) = running.stop();
        assert_eq!(code, Some(0), "{log}");
    }
    hub.fake.assert_clean();
    realm.fake.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merge_binds_to_the_head_a_push_expires_it_and_eagle_merges_what_was_approved() {
    let db = TestDb::new(Db::Sqlite).await;
    let realm = Realm::start().await;
    let hub = hub().await;
    let number = hub.open_draft("eagle/run-1");
    hub.fake.set_draft(REPO, number, false);
    hub.check(SHA1, "completed", Some("success"));
    let (_home, eagle, executor) = start(&realm, &hub, &db, &[]).await;
    let store = db.open().await;

    queue_and_go(&realm, &format!("Ship it mode:prmerge pr:{number}")).await;

    // The reviewer asks to merge: bound to SHA1, escalated to the owner.
    wait_run_post(&realm, realm.eagle, "[ESCALATED: merge_pr] run:1").await;
    let first = store
        .requests()
        .requests_of_run(1)
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.action == "merge_pr")
        .expect("a merge request");
    assert_eq!(first.bound_sha.as_deref(), Some(SHA1));

    // A push before anyone answers: the request expires, the worker asks again.
    hub.fake.push(REPO, number, SHA2);
    hub.check(SHA2, "completed", Some("success"));
    wait_run_post(
        &realm,
        realm.eagle,
        &format!("[EXPIRED: merge_pr] run:1 req:{}", first.id),
    )
    .await;
    let ok = wait_for(&store, || async {
        store
            .requests()
            .requests_of_run(1)
            .await
            .unwrap()
            .iter()
            .any(|r| {
                r.action == "merge_pr" && r.bound_sha.as_deref() == Some(SHA2) && r.status.is_open()
            })
    })
    .await;
    assert!(
        ok,
        "{:#?}",
        store.requests().requests_of_run(1).await.unwrap()
    );
    let second = store
        .requests()
        .requests_of_run(1)
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.action == "merge_pr" && r.bound_sha.as_deref() == Some(SHA2))
        .unwrap();
    // An approval of the expired one is refused: it is of another commit.
    realm.fake.post(
        realm.alex,
        "executor",
        "run 1",
        &format!("!approve 1 {}", first.id),
    );
    // Eagle merges only with the review of that head green.
    hub.fake
        .add_review(REPO, number, Some("alex"), "APPROVED", "");
    realm.fake.post(
        realm.alex,
        "executor",
        "run 1",
        &format!("!approve 1 {}", second.id),
    );
    let merged = wait_run_post(
        &realm,
        realm.eagle,
        &format!("Eagle merged PR #{number} at 2222222"),
    )
    .await;
    assert!(merged.contains(&format!("req:{}", second.id)), "{merged}");
    let pr = hub.fake.pr(REPO, number);
    assert!(pr.merged);
    assert_eq!(pr.merged_head_sha.as_deref(), Some(SHA2));
    assert_eq!(pr.merge_method.as_deref(), Some("squash"));
    // Merged: the run is complete, and nothing was merged twice.
    let ok = wait_for(&store, || async {
        run_of(&store, 1).await.state == RunState::Complete
    })
    .await;
    assert!(ok, "{:?}", run_of(&store, 1).await);
    let merges = hub
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "PUT" && r.path.ends_with("/merge"))
        .count();
    assert_eq!(merges, 1);
    let requests = store.requests().requests_of_run(1).await.unwrap();
    let carried: Vec<_> = requests
        .iter()
        .filter(|r| r.carried_out_at.is_some())
        .collect();
    assert_eq!(carried.len(), 1, "{requests:#?}");
    for running in [eagle, executor] {
        let (code, log) = running.stop();
        assert_eq!(code, Some(0), "{log}");
    }
    hub.fake.assert_clean();
    realm.fake.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ci_that_never_ran_is_started_once_for_the_head() {
    let db = TestDb::new(Db::Sqlite).await;
    let realm = Realm::start().await;
    let hub = hub().await;
    let number = hub.open_draft("eagle/run-1");
    let (_home, eagle, executor) = start(
        &realm,
        &hub,
        &db,
        &[
            ("EAGLE_GITHUB__CI_WORKFLOW", "ci.yml"),
            ("EAGLE_GITHUB__CI_GRACE", "2s"),
        ],
    )
    .await;
    let store = db.open().await;
    queue_and_go(&realm, &format!("Fix the tab preview mode:pr pr:{number}")).await;
    // Within the grace it waits; past it, the workflow is dispatched on the
    // PR's branch (the Actions API), once for this head.
    wait_run_post(
        &realm,
        realm.executor,
        "[STATUS: ci] run:1 CI never ran on 1111111: ci.yml is dispatched on eagle/run-1",
    )
    .await;
    let dispatches = hub.fake.dispatches();
    assert_eq!(dispatches.len(), 1, "{dispatches:?}");
    assert_eq!(dispatches[0].git_ref, "eagle/run-1");
    assert_eq!(dispatches[0].workflow_id, 7);
    let run = run_of(&store, 1).await;
    assert_eq!(run.ci_triggered_sha.as_deref(), Some(SHA1));
    for running in [eagle, executor] {
        let (code, log) = running.stop();
        assert_eq!(code, Some(0), "{log}");
    }
    hub.fake.assert_clean();
    realm.fake.assert_clean();
}

/// Runs waiting for CI hold no worker slot: with `max_workers = 2`, two runs
/// whose CI runs do not keep a third from starting.
#[test]
fn runs_waiting_for_ci_do_not_keep_a_third_from_starting() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let hub = runtime.block_on(hub());
    let numbers: Vec<u64> = (1..=3)
        .map(|i| {
            let n = hub.open_draft(&format!("eagle/run-{i}"));
            hub.fake
                .add_check_run(REPO, CheckRunSpec::new(UI_TESTS, SHA1, "in_progress", None));
            n
        })
        .collect();
    let mut home = Home::new();
    with_github(&mut home, &hub);
    home.set("EAGLE_RUNNER__WORKER_COMMAND", &fake_worker_command())
        .set("EAGLE_RUNNER__MAX_WORKERS", "2");
    let mut input = String::new();
    for n in &numbers {
        input.push_str(&format!("!queue task {n} mode:pr pr:{n}\n"));
    }
    input.push_str("!go 1\n!go 2\n");
    // Both first runs reach pr, and the loop sees their CI running.
    let out = home.run(&["shell"], &input);
    let (stdout, stderr) = crate::support::text(&out);
    assert!(out.status.success(), "{stderr}");
    let store = runtime.block_on(crate::executor::home_store(&home));
    runtime.block_on(async {
        let ok = wait_for(&store, || async {
            let (a, b) = (run_of(&store, 1).await, run_of(&store, 2).await);
            [a, b].iter().all(|r| {
                r.state == RunState::Pr
                    && r.pr_status
                        .as_deref()
                        .is_some_and(|s| s.starts_with("waiting for CI"))
            })
        })
        .await;
        assert!(ok, "{stdout}");
    });
    // Two runs wait for CI; the third starts and finishes all the same.
    let out = home.run(&["shell"], "!go 3\n");
    let (stdout, stderr) = crate::support::text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("[DONE: pr_ready] run:3"), "{stdout}");
    runtime.block_on(async {
        for id in [1, 2] {
            let run = run_of(&store, id).await;
            assert_eq!(run.state, RunState::Pr);
            assert!(run.slot.is_none() && !run.has_worker(), "{run:?}");
            assert_eq!(run.pr_work.0, None::<PrWork>);
        }
        assert_eq!(run_of(&store, 3).await.state, RunState::Pr);
    });
    hub.fake.assert_clean();
}

/// Only a reviewer's verdict counts: a fix-ci worker that says its own PR
/// is reviewed green does not make it so.
#[test]
fn a_fix_ci_worker_cannot_review_its_own_pr_green() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let hub = runtime.block_on(hub());
    let number = hub.open_draft("eagle/run-1");
    hub.check(SHA1, "completed", Some("failure"));
    let mut home = Home::new();
    with_github(&mut home, &hub);
    home.set("EAGLE_RUNNER__WORKER_COMMAND", &fake_worker_command());
    let out = home.run(
        &["shell"],
        &format!("!queue Fix it mode:prliar pr:{number}\n!go 1\n"),
    );
    let (stdout, stderr) = crate::support::text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains("[DONE: review_green] run:1 trust me"),
        "{stdout}"
    );
    let store = runtime.block_on(crate::executor::home_store(&home));
    let run = runtime.block_on(run_of(&store, 1));
    assert_eq!(run.state, RunState::Pr);
    assert_eq!(run.review_green_sha, None, "{run:?}");
    assert_eq!(run.pr_work_done_sha.as_deref(), Some(SHA1));
    hub.fake.assert_clean();
}

/// A git repository for runs to clone, with the rule files the profile
/// names (or none), readable by the workers' user.
fn repo_with_rules(dir: &std::path::Path, with_rules: bool) -> std::path::PathBuf {
    let repo = dir.join(if with_rules {
        "rules-repo"
    } else {
        "bare-repo"
    });
    std::fs::create_dir_all(repo.join(".cursor/rules")).unwrap();
    std::fs::write(repo.join("README"), "app\n").unwrap();
    if with_rules {
        std::fs::write(
            repo.join(".cursor/rules/swift.mdc"),
            "RULE-SWIFT: no force unwraps in UI code.\n",
        )
        .unwrap();
        std::fs::write(
            repo.join("pull-request.mdc"),
            "RULE-PR: one change per PR.\n",
        )
        .unwrap();
    }
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(&repo)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "Human")
            .env("GIT_AUTHOR_EMAIL", "human@example.com")
            .env("GIT_COMMITTER_NAME", "Human")
            .env("GIT_COMMITTER_EMAIL", "human@example.com")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&["init", "-q", "-b", "main"]);
    git(&["add", "-A"]);
    git(&["commit", "-qm", "base"]);
    let opened = std::process::Command::new("chmod")
        .args(["-R", "a+rX"])
        .arg(&repo)
        .status()
        .unwrap();
    assert!(opened.success());
    repo
}

/// The pr-review worker's prompt has the repository's own rules (read from
/// the run's checkout), the required checks with the UI tests, and the
/// recording the task asks for; without the rule files it still renders.
#[test]
fn the_pr_review_prompt_carries_the_repositorys_rules_and_checks() {
    for with_rules in [true, false] {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let hub = runtime.block_on(hub());
        let number = hub.open_draft("eagle/run-1");
        hub.check(SHA1, "completed", Some("success"));
        let mut home = Home::new();
        with_github(&mut home, &hub);
        let repo = repo_with_rules(&home.exchange(), with_rules);
        let dump = home.exchange().join(format!("review-prompt-{with_rules}"));
        home.set("EAGLE_RUNNER__WORKER_COMMAND", &fake_worker_command())
            .set("EAGLE_RUNNER__REPO", repo.to_str().unwrap())
            .set(
                "EAGLE_RUNNER__REVIEW_RULES",
                ".cursor/rules/*.mdc,pull-request.mdc,pixels.instructions.md",
            );
        let out = home.run(
            &["shell"],
            &format!(
                "!queue Redo the toolbar mode:pr pr:{number} dump:{} with a screen recording of it\n!go 1\n",
                dump.display()
            ),
        );
        let (stdout, stderr) = crate::support::text(&out);
        assert!(out.status.success(), "{stderr}");
        assert!(stdout.contains("[DONE: review_green] run:1"), "{stdout}");
        let prompt = std::fs::read_to_string(&dump).expect("the reviewer's prompt");
        if with_rules {
            assert!(
                prompt.contains(
                    "----- .cursor/rules/swift.mdc -----\nRULE-SWIFT: no force unwraps in UI code."
                ),
                "{prompt}"
            );
            assert!(prompt.contains("RULE-PR: one change per PR."), "{prompt}");
        } else {
            assert!(
                prompt.contains("(none of the review rules the profile names is in this checkout"),
                "{prompt}"
            );
        }
        assert!(
            prompt.contains("Required checks, each green on the head: macOS UI Tests"),
            "{prompt}"
        );
        assert!(prompt.contains("with a screen recording of it"), "{prompt}");
        assert!(!prompt.contains("{review_rules}"), "{prompt}");
        hub.fake.assert_clean();
    }
}
