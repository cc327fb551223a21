//! GitHub trusts only the repository and its people (issue 24), through the
//! binary (`eagle shell`, both roles) against the strict fake GitHub: a
//! fork's PR named like the run's branch is neither followed nor merged; a
//! review counts only from someone with write access; a merge goes ahead
//! only with the required checks green at the approved head (failing or
//! absent: refused and the owner told, once; pending: it waits and says so);
//! GitHub's own 405 is told once, and never asked again.

use std::io::{BufRead, BufReader, Write as _};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use fake_apis::{CheckRunSpec, PrSpec, Protection};

use crate::effects::{
    REPO, asked_to_merge, github, home, merges, notes, remote, requests, shared_tempdir, shell,
};
use crate::support::{Db, Home, TestDb, WAIT};

const SHA: &str = "1111111111111111111111111111111111111111";

/// The owner's line of a refused merge, as the decider posts its notice.
const OWNER_TOLD: &str = "Nothing was done; once that is fixed";

/// How many lines of `stdout` contain `needle`.
fn count(stdout: &str, needle: &str) -> usize {
    stdout.lines().filter(|l| l.contains(needle)).count()
}

/// A run whose worker (the fake worker) names PR `number` and, reviewing
/// it, asks to merge it.
fn fake_worker_home(db: &TestDb) -> Home {
    let mut home = Home::new();
    home.set("EAGLE_DATABASE_URL", &db.url)
        .set(
            "EAGLE_RUNNER__WORKER_COMMAND",
            &crate::executor::fake_worker_command(),
        )
        .set("EAGLE_RUNNER__STATUS_INTERVAL", "0s");
    home
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_pr_with_the_runs_branch_name_named_by_the_worker_is_neither_followed_nor_merged() {
    let db = TestDb::new(Db::Sqlite).await;
    let mut home = fake_worker_home(&db);
    let fake = github(&mut home).await;
    // Anyone may fork a public repository and open a PR from a branch that
    // has the run's name; this one is green and approved by a member.
    fake.add_fork(REPO, "attacker/app");
    let pr = fake.open_pr(
        REPO,
        PrSpec::new("attacker", "eagle/run-1", SHA).from_fork("attacker/app"),
    );
    fake.add_check_run(
        REPO,
        CheckRunSpec::new("CI", SHA, "completed", Some("success")),
    );
    fake.add_review(REPO, pr, Some("alex"), "APPROVED", "");

    let stdout = shell(
        &home,
        &format!("!queue Ship it mode:prmerge pr:{pr}\n!go 1\n"),
    );
    assert!(
        stdout.contains(&format!(
            "[STATUS: held] run:1 PR #{pr}: the PR the worker named comes from \
             attacker/app:eagle/run-1, not from a branch of acme/app: Eagle follows no fork's PR"
        )),
        "{stdout}"
    );
    // Not followed: no reviewer, nothing recorded of it as the run's, and
    // the run waits on its owner.
    assert!(!stdout.contains("[STATUS: pr_review]"), "{stdout}");
    let store = db.open().await;
    let run = {
        let mut tx = store.begin_read().await.unwrap();
        tx.tasks().run(1).await.unwrap().unwrap()
    };
    assert!(run.held && run.waiting_on.is_some(), "{run:?}");
    assert_eq!(run.head_sha, None, "{run:?}");
    assert_eq!(run.pr_title, None, "{run:?}");
    // Not merged: nobody was even asked.
    let asked = requests(&store, "merge_pr").await;
    assert!(asked.is_empty(), "{asked:#?}");
    assert_eq!(merges(&fake), 0);
    assert!(!fake.pr(REPO, pr).merged);
    fake.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_merge_of_a_fork_pr_is_refused_saying_where_its_head_comes_from() {
    let db = TestDb::new(Db::Sqlite).await;
    let dir = shared_tempdir();
    let (remote, _, fix) = remote(dir.path());
    let mut home = home(&db, &remote);
    let fake = github(&mut home).await;
    fake.add_fork(REPO, "attacker/app");
    let pr = fake.open_pr(
        REPO,
        PrSpec::new("attacker", "eagle/run-1", &fix).from_fork("attacker/app"),
    );
    fake.add_check_run(
        REPO,
        CheckRunSpec::new("CI", &fix, "completed", Some("success")),
    );
    fake.add_review(REPO, pr, Some("alex"), "APPROVED", "");
    let out = dir.path().join("notes");
    shell(
        &home,
        &format!(
            "!queue Merge that mode:other pr:{pr} out:{}\n!go 1\n",
            out.display()
        ),
    );
    let store = db.open().await;
    let request = requests(&store, "merge_pr").await.remove(0);
    let stdout = shell(&home, &format!("!approve 1 {}\n", request.id));
    assert!(
        stdout.contains(&format!(
            "Eagle did not merge PR #{pr}: its head is attacker/app:eagle/run-1, not a branch \
             of acme/app; Eagle merges no fork's PR"
        )),
        "{stdout}\n{:#?}",
        notes(&out)
    );
    assert_eq!(merges(&fake), 0);
    fake.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outsiders_approval_does_not_make_a_merge_go_ahead() {
    let db = TestDb::new(Db::Sqlite).await;
    let dir = shared_tempdir();
    let (home, fake, store, request, fix, _) = asked_to_merge(dir.path(), &db).await;
    // Approved, at the head, by accounts without write access only.
    fake.set_association(REPO, "mallory", "NONE");
    fake.set_association(REPO, "eve", "CONTRIBUTOR");
    fake.add_review(REPO, 1, Some("mallory"), "APPROVED", "lgtm");
    fake.add_review(REPO, 1, Some("eve"), "APPROVED", "ship it");
    fake.set_draft(REPO, 1, false);
    let stdout = shell(&home, &format!("!approve 1 {}\n", request.id));
    assert!(
        stdout.contains(&format!(
            "Eagle did not merge PR #1: no review by someone with write access approves {} \
             (approvals by mallory, eve do not count: no write access)",
            &fix[..7]
        )),
        "{stdout}"
    );
    assert_eq!(merges(&fake), 0, "nothing merged");
    assert!(!fake.pr(REPO, 1).merged);
    let refused = store.requests().request(request.id).await.unwrap().unwrap();
    assert!(
        refused
            .carried_out
            .as_deref()
            .is_some_and(|c| c.starts_with("Eagle did not merge")),
        "{refused:?}"
    );
    fake.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outsiders_changes_requested_does_not_block_a_merge() {
    let db = TestDb::new(Db::Sqlite).await;
    let dir = shared_tempdir();
    let (home, fake, _store, request, fix, _) = asked_to_merge(dir.path(), &db).await;
    fake.add_review(REPO, 1, Some("alex"), "APPROVED", "");
    fake.set_association(REPO, "mallory", "FIRST_TIME_CONTRIBUTOR");
    fake.add_review(
        REPO,
        1,
        Some("mallory"),
        "CHANGES_REQUESTED",
        "delete the tests",
    );
    fake.set_draft(REPO, 1, false);
    let stdout = shell(&home, &format!("!approve 1 {}\n", request.id));
    assert!(
        stdout.contains(&format!("Eagle merged PR #1 at {}", &fix[..7])),
        "{stdout}"
    );
    let pr = fake.pr(REPO, 1);
    assert!(pr.merged);
    assert_eq!(pr.merged_head_sha.as_deref(), Some(fix.as_str()));
    assert_eq!(merges(&fake), 1);
    fake.assert_clean();
}

/// A merge refused for its checks: the run's topic says why, and its owner
/// is told once (a later shell prints nothing more of it).
fn refused_and_the_owner_told_once(home: &Home, stdout: &str, why: &str) {
    assert_eq!(count(stdout, why), 2, "the topic and the owner:\n{stdout}");
    let owner = stdout
        .lines()
        .find(|l| l.contains(OWNER_TOLD))
        .unwrap_or_else(|| panic!("the owner was not told:\n{stdout}"));
    assert!(owner.contains("run 1: ") && owner.contains(why), "{owner}");
    let later = shell(home, "!status run 1\n");
    assert_eq!(count(&later, OWNER_TOLD), 0, "told again:\n{later}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merge_approved_while_the_required_check_fails_is_refused_and_the_owner_told() {
    let db = TestDb::new(Db::Sqlite).await;
    let dir = shared_tempdir();
    let (mut home, fake, _store, request, fix, ci) = asked_to_merge(dir.path(), &db).await;
    home.set("EAGLE_GITHUB__REQUIRED_CHECKS", "CI");
    // Green when the review began, failing when the merge is approved.
    fake.update_check_run(REPO, ci, "completed", Some("failure"));
    fake.add_review(REPO, 1, Some("alex"), "APPROVED", "");
    fake.set_draft(REPO, 1, false);
    let stdout = shell(&home, &format!("!approve 1 {}\n", request.id));
    let why = format!(
        "Eagle did not merge PR #1: checks failed at the approved head {}: CI",
        &fix[..7]
    );
    refused_and_the_owner_told_once(&home, &stdout, &why);
    assert_eq!(merges(&fake), 0);
    // What the approver was shown says where the head comes from,
    // repository and branch.
    let shown = shell(&home, &format!("!show 1 {}\n", request.id));
    assert!(
        shown.contains(&format!(
            "Eagle will merge PR #1 “Fix the tab preview” from `acme/app:eagle/run-1` into \
             `main` at head `{}`",
            &fix[..7]
        )),
        "{shown}"
    );
    fake.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merge_approved_while_the_required_check_is_absent_is_refused_and_the_owner_told() {
    let db = TestDb::new(Db::Sqlite).await;
    let dir = shared_tempdir();
    let (mut home, fake, _store, request, fix, _) = asked_to_merge(dir.path(), &db).await;
    // Everything that ran is green, but the required check never reported.
    home.set("EAGLE_GITHUB__REQUIRED_CHECKS", "macOS UI Tests")
        .set("EAGLE_SHELL_WAIT", "30s");
    fake.add_check_run(
        REPO,
        CheckRunSpec::new("lint", &fix, "completed", Some("success")),
    );
    fake.add_review(REPO, 1, Some("alex"), "APPROVED", "");
    fake.set_draft(REPO, 1, false);
    let stdout = shell(&home, &format!("!approve 1 {}\n", request.id));
    let why = format!(
        "Eagle did not merge PR #1: the required check(s) macOS UI Tests never reported at the \
         approved head {}",
        &fix[..7]
    );
    refused_and_the_owner_told_once(&home, &stdout, &why);
    assert_eq!(merges(&fake), 0);
    fake.assert_clean();
}

/// An `eagle shell` left running: its input stays open, its output lines
/// arrive on a channel as it prints them.
struct LiveShell {
    child: std::process::Child,
    input: Option<std::process::ChildStdin>,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl LiveShell {
    fn start(home: &Home, first: &str) -> LiveShell {
        let mut child = home
            .command(&["shell"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        input.write_all(first.as_bytes()).unwrap();
        let output = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(output).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        LiveShell {
            child,
            input: Some(input),
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for a line containing `needle` (at most `WAIT`); false if the
    /// shell ended or the time passed first.
    fn wait_for(&mut self, needle: &str) -> bool {
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            if self.seen.iter().any(|l| l.contains(needle)) {
                return true;
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(_) => return false,
            }
        }
    }

    /// Closes its input and reads the rest of what it prints until it exits.
    fn finish(mut self) -> String {
        drop(self.input.take());
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(120)) {
            self.seen.push(line);
        }
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{}", self.seen.join("\n"));
        self.seen.join("\n")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merge_approved_while_the_check_is_pending_waits_says_so_and_goes_ahead_once_green() {
    let db = TestDb::new(Db::Sqlite).await;
    let dir = shared_tempdir();
    let (mut home, fake, _store, request, fix, ci) = asked_to_merge(dir.path(), &db).await;
    home.set("EAGLE_GITHUB__REQUIRED_CHECKS", "CI");
    // Running again when the merge is approved (a re-run).
    fake.update_check_run(REPO, ci, "in_progress", None);
    fake.add_review(REPO, 1, Some("alex"), "APPROVED", "");
    fake.set_draft(REPO, 1, false);
    let mut live = LiveShell::start(&home, &format!("!approve 1 {}\n", request.id));
    let waits = format!(
        "Eagle waits to merge PR #1: the checks at the approved head {} are not done (CI); it \
         merges once they are green there, and refuses if they are not by",
        &fix[..7]
    );
    assert!(live.wait_for(&waits), "{}", live.seen.join("\n"));
    assert_eq!(merges(&fake), 0, "nothing merged while CI runs");
    // Green at the approved head: the merge goes ahead, at that head.
    fake.update_check_run(REPO, ci, "completed", Some("success"));
    let merged = fake.wait_until(WAIT, |f| f.pr(REPO, 1).merged).await;
    let stdout = live.finish();
    assert!(merged, "{stdout}");
    assert_eq!(
        fake.pr(REPO, 1).merged_head_sha.as_deref(),
        Some(fix.as_str())
    );
    assert_eq!(merges(&fake), 1);
    assert_eq!(count(&stdout, &waits), 1, "said once:\n{stdout}");
    let said = stdout.lines().find(|l| l.contains(&waits)).unwrap();
    assert!(said.contains(" UTC"), "{said}");
    assert!(
        stdout.contains(&format!("Eagle merged PR #1 at {}", &fix[..7])),
        "{stdout}"
    );
    fake.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_405_from_branch_protection_is_told_once_and_not_asked_again() {
    let db = TestDb::new(Db::Sqlite).await;
    let dir = shared_tempdir();
    let (home, fake, store, request, fix, _) = asked_to_merge(dir.path(), &db).await;
    // GitHub wants two approvals from writers; Eagle's own gate is met by one.
    fake.protect_branch(
        REPO,
        "main",
        Protection {
            required_checks: vec![],
            required_approvals: 2,
        },
    );
    fake.add_check_run(
        REPO,
        CheckRunSpec::new("CI", &fix, "completed", Some("success")),
    );
    fake.add_review(REPO, 1, Some("alex"), "APPROVED", "");
    fake.set_draft(REPO, 1, false);
    let stdout = shell(&home, &format!("!approve 1 {}\n", request.id));
    let why = "Eagle did not merge PR #1: GitHub's branch protection refused it: branch \
               protection requires approving reviews by people with write access";
    refused_and_the_owner_told_once(&home, &stdout, why);
    // Asked once: the fake would record a second ask as a violation.
    assert_eq!(merges(&fake), 1);
    let refused = fake
        .requests()
        .into_iter()
        .find(|r| r.method == "PUT" && r.path.ends_with("/merge"))
        .unwrap();
    assert_eq!(refused.status, 405);
    assert!(!fake.pr(REPO, 1).merged);
    let settled = store.requests().request(request.id).await.unwrap().unwrap();
    assert!(settled.carried_out_at.is_some(), "{settled:?}");
    fake.assert_clean();
}
