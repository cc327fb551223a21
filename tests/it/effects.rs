//! Workers hold no credential; Eagle carries out every effect that leaves
//! the sandbox, through the binary (`eagle shell`, both roles), with a
//! worker script that uses plain `git push` and `gh`: a local bare
//! repository stands for GitHub's git storage, the strict fake GitHub for
//! its API, and records what Eagle did.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use eagle::store::{Request, Store};
use fake_apis::{CheckRunSpec, FakeGitHub, PrSpec, RepoSpec};

use crate::support::{Db, Home, TestDb, text};

pub(crate) const REPO: &str = "acme/app";

/// Runs git outside any repository's or user's configuration.
pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "Human")
        .env("GIT_AUTHOR_EMAIL", "human@example.com")
        .env("GIT_COMMITTER_NAME", "Human")
        .env("GIT_COMMITTER_EMAIL", "human@example.com")
        .stdin(Stdio::null())
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The "GitHub" remote: a bare repository with `main` at a first commit,
/// and a prepared fix (a child of it) under `refs/prepared/fix` for the
/// worker to fetch. Returns the remote, main's sha and the fix's sha.
pub(crate) fn remote(dir: &Path) -> (PathBuf, String, String) {
    let remote = dir.join("github.git");
    let scratch = dir.join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    git(
        dir,
        &[
            "init",
            "-q",
            "--bare",
            "-b",
            "main",
            remote.to_str().unwrap(),
        ],
    );
    git(&scratch, &["init", "-q", "-b", "main"]);
    std::fs::write(scratch.join("README"), "app\n").unwrap();
    git(&scratch, &["add", "README"]);
    git(&scratch, &["commit", "-qm", "base"]);
    let main = git(&scratch, &["rev-parse", "HEAD"]);
    std::fs::write(scratch.join("fix.txt"), "the fix\n").unwrap();
    git(&scratch, &["add", "fix.txt"]);
    git(&scratch, &["commit", "-qm", "fix the tab preview"]);
    let fix = git(&scratch, &["rev-parse", "HEAD"]);
    let url = remote.to_str().unwrap();
    git(
        &scratch,
        &["push", "-q", url, &format!("{main}:refs/heads/main")],
    );
    git(
        &scratch,
        &["push", "-q", url, &format!("{fix}:refs/prepared/fix")],
    );
    // "Someone else" (the worker script, straight to the path, standing in
    // for another person's push) may write to it, as the worker's user.
    git(&remote, &["config", "core.sharedRepository", "0777"]);
    let opened = Command::new("chmod")
        .args(["-R", "a+rwX"])
        .arg(&remote)
        .status()
        .unwrap();
    assert!(opened.success());
    (remote, main, fix)
}

/// A branch's head in the remote, if it exists.
pub(crate) fn head_of(remote: &Path, branch: &str) -> Option<String> {
    let out = Command::new("git")
        .args([
            "--git-dir",
            remote.to_str().unwrap(),
            "rev-parse",
            "--verify",
            "--quiet",
        ])
        .arg(format!("refs/heads/{branch}"))
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A scratch directory the test's worker user (not root) can use too: the
/// remote it clones and the notes it writes are there.
pub(crate) fn shared_tempdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    eagle::ground::host::chmod(dir.path(), 0o777).unwrap();
    dir
}

fn worker_command() -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/it/effects-worker.sh");
    format!("bash {} {{prompt}}", script.display())
}

/// A home whose runs clone `remote` and run the effects worker, on `db`.
pub(crate) fn home(db: &TestDb, remote: &Path) -> Home {
    let mut home = Home::new();
    home.set("EAGLE_DATABASE_URL", &db.url)
        .set("EAGLE_RUNNER__WORKER_COMMAND", &worker_command())
        .set("EAGLE_RUNNER__REPO", remote.to_str().unwrap())
        .set("EAGLE_RUNNER__STATUS_INTERVAL", "0s");
    home
}

/// The fake GitHub with `acme/app`, and the home pointed at it.
pub(crate) async fn github(home: &mut Home) -> FakeGitHub {
    let fake = FakeGitHub::start().await;
    let token = fake.create_token("eagle-bot");
    fake.add_repo(REPO, RepoSpec::default());
    home.set("GITHUB_TOKEN", &token)
        .set("EAGLE_GITHUB__API_URL", &fake.url())
        .set("EAGLE_GITHUB__REPO", REPO)
        .set("EAGLE_GITHUB__POLL_INTERVAL", "1s");
    fake
}

/// What the worker noted, one line each.
pub(crate) fn notes(out: &Path) -> Vec<String> {
    std::fs::read_to_string(out)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

pub(crate) fn note<'a>(notes: &'a [String], key: &str) -> &'a str {
    notes
        .iter()
        .find_map(|n| n.strip_prefix(&format!("{key} ")))
        .unwrap_or_else(|| panic!("no note {key:?} in {notes:#?}"))
}

pub(crate) fn shell(home: &Home, input: &str) -> String {
    let out = home.run(&["shell"], input);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}\n{stdout}");
    stdout
}

pub(crate) async fn requests(store: &Store, action: &str) -> Vec<Request> {
    store
        .requests()
        .requests_of_run(1)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.action == action)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_push_lands_on_the_runs_branch_pushed_by_eagle_on_sqlite() {
    git_push_lands_on_the_runs_branch(Db::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_push_lands_on_the_runs_branch_pushed_by_eagle_on_postgres() {
    git_push_lands_on_the_runs_branch(Db::Postgres).await;
}

async fn git_push_lands_on_the_runs_branch(db: Db) {
    let db = TestDb::new(db).await;
    let dir = shared_tempdir();
    let (remote, main, _) = remote(dir.path());
    let home = home(&db, &remote);
    let out = dir.path().join("notes");
    shell(
        &home,
        &format!("!queue Push it mode:push out:{}\n!go 1\n", out.display()),
    );
    let notes = notes(&out);
    let get = |key: &str| note(&notes, key).to_string();
    // The checkout pushes through Eagle; its git push reached the branch.
    assert_eq!(get("pushurl"), "eagle::origin", "{notes:#?}");
    assert_eq!(get("push-a"), "ok", "{notes:#?}");
    // Another ref, a tag, a delete: refused, nothing there.
    assert_eq!(get("push-main"), "refused");
    assert_eq!(get("push-tag"), "refused");
    assert_eq!(get("delete"), "refused");
    assert_eq!(head_of(&remote, "main").as_deref(), Some(main.as_str()));
    let tags = git(dir.path(), &["--git-dir", remote.to_str().unwrap(), "tag"]);
    assert!(tags.is_empty(), "{tags}");
    // A rewrite of Eagle's own push goes; a force over someone else's
    // commit does not, and leaves their commit on the branch.
    assert_eq!(get("force-own"), "ok");
    assert_eq!(get("force-other"), "refused");
    assert_eq!(head_of(&remote, "eagle/run-1"), Some(get("h")));
    // `eagle request push_branch` (HEAD, the rewritten commit) is refused too.
    assert_eq!(get("request"), "1");

    // Each push was a request Eagle carried out, and says so.
    let store = db.open().await;
    let pushes = requests(&store, "push_branch").await;
    let carried: Vec<&str> = pushes
        .iter()
        .filter_map(|r| r.carried_out.as_deref())
        .collect();
    assert!(
        carried
            .iter()
            .any(|c| c.starts_with(&format!("Eagle pushed {} to eagle/run-1", &get("a")[..12]))),
        "{carried:#?}"
    );
    assert!(
        carried
            .iter()
            .any(|c| c.contains("over its own earlier push")),
        "{carried:#?}"
    );
    let refused: Vec<&&str> = carried
        .iter()
        .filter(|c| c.starts_with("Eagle did not push"))
        .collect();
    assert_eq!(refused.len(), 2, "{carried:#?}");
    assert!(
        refused[0].contains("holds commits Eagle did not push"),
        "{refused:#?}"
    );
    // The refused pushes to other refs were never requests at all.
    assert!(
        pushes
            .iter()
            .all(|r| r.body.contains("\"branch\":\"eagle/run-1\"")
                || !r.body.contains("\"branch\":")),
        "{pushes:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eagle_opens_the_draft_pr_from_the_runs_branch_with_the_exact_text() {
    let db = TestDb::new(Db::Sqlite).await;
    let dir = shared_tempdir();
    let (remote, _, fix) = remote(dir.path());
    let mut home = home(&db, &remote);
    let fake = github(&mut home).await;
    // GitHub's storage holds what Eagle pushes (the bare remote stands for it).
    fake.push_branch(REPO, "eagle/run-1", &fix);
    let out = dir.path().join("notes");
    shell(
        &home,
        &format!(
            "!queue Fix the tab preview mode:pr out:{}\n!go 1\n",
            out.display()
        ),
    );
    let notes = notes(&out);
    assert_eq!(note(&notes, "push"), "ok", "{notes:#?}");
    assert_eq!(
        head_of(&remote, "eagle/run-1").as_deref(),
        Some(fix.as_str())
    );
    // gh printed what gh prints: the PR's address.
    assert_eq!(
        note(&notes, "pr"),
        "0 https://github.com/acme/app/pull/1",
        "{notes:#?}"
    );
    // Anything else gh would do with a token fails, and does nothing.
    assert_eq!(note(&notes, "gh-other"), "refused");
    let pr = fake.pr(REPO, 1);
    assert_eq!(
        (pr.head_ref.as_str(), pr.base_ref.as_str(), pr.draft),
        ("eagle/run-1", "main", true)
    );
    assert_eq!(pr.author, "eagle-bot", "Eagle opened it with its own token");
    assert_eq!(pr.title, "Fix the tab preview");
    assert_eq!(
        pr.body.as_deref(),
        Some("Fixes the tab preview.\n\nIt no longer sticks after a drag.\n")
    );
    assert_eq!(fake.pr_numbers(REPO), [1], "one PR, opened once");
    let store = db.open().await;
    let mut tx = store.begin_read().await.unwrap();
    let run = tx.tasks().run(1).await.unwrap().unwrap();
    assert_eq!(run.pr_number, Some(1));
    drop(tx);
    let opened = requests(&store, "open_draft_pr").await;
    assert_eq!(
        store
            .carried()
            .carried_result(opened[0].id)
            .await
            .unwrap()
            .as_deref(),
        Some(
            r#"{"branch":"eagle/run-1","pr_number":1,"url":"https://github.com/acme/app/pull/1","draft":true}"#
        )
    );
    fake.assert_clean();
}

/// A dry run (`!go N --dry-run`, or an executor with `[runner] dry_run`):
/// the worker works and every request is decided as usual, but nothing
/// leaves: the remote gets no branch, GitHub no PR; the run's topic says
/// exactly what Eagle would have done, and `!status` that it is a dry run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_carries_nothing_out_and_says_what_it_would_have_done() {
    let db = TestDb::new(Db::Sqlite).await;
    let dir = shared_tempdir();
    let (remote, _, fix) = remote(dir.path());
    let mut home = home(&db, &remote);
    let fake = github(&mut home).await;
    let out = dir.path().join("notes");
    let said = shell(
        &home,
        &format!(
            "!queue Fix the tab preview mode:pr out:{}\n!go 1 --dry-run\n",
            out.display()
        ),
    );
    let status = shell(&home, "!status run 1\n");
    assert_eq!(head_of(&remote, "eagle/run-1"), None, "{said}");
    assert!(fake.pr_numbers(REPO).is_empty(), "a PR was opened:\n{said}");
    assert!(said.contains("It is a dry run"), "{said}");
    assert!(
        said.contains(&format!(
            "Dry run: Eagle did not push {} to eagle/run-1; approved, it would have pushed that commit (",
            &fix[..12]
        )),
        "{said}"
    );
    assert!(
        said.contains("Dry run: Eagle did not carry out the approved open_draft_pr; approved, it would have done this: Eagle will open a draft PR"),
        "{said}"
    );
    assert!(said.contains("Fix the tab preview"), "{said}");
    assert!(status.contains("dry run: yes"), "{status}");
    // An executor whose every run is a dry run.
    let dir2 = shared_tempdir();
    let (remote2, _, _) = crate::effects::remote(dir2.path());
    let db2 = TestDb::new(Db::Sqlite).await;
    let mut home2 = crate::effects::home(&db2, &remote2);
    home2.set("EAGLE_RUNNER__DRY_RUN", "true");
    let out2 = dir2.path().join("notes");
    let said2 = shell(
        &home2,
        &format!("!queue Push it mode:pr out:{}\n!go 1\n", out2.display()),
    );
    assert_eq!(head_of(&remote2, "eagle/run-1"), None, "{said2}");
    assert!(said2.contains("Dry run: Eagle did not push"), "{said2}");
    fake.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_comment_is_posted_once_also_across_a_kill_9_on_sqlite() {
    comment_posted_once(Db::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_comment_is_posted_once_also_across_a_kill_9_on_postgres() {
    comment_posted_once(Db::Postgres).await;
}

async fn comment_posted_once(db: Db) {
    use std::io::Write as _;
    let db = TestDb::new(db).await;
    let dir = shared_tempdir();
    let (remote, _, fix) = remote(dir.path());
    let mut home = home(&db, &remote);
    let fake = github(&mut home).await;
    fake.push_branch(REPO, "eagle/run-1", &fix);
    let out = dir.path().join("notes");
    let store = db.open().await;
    // The worker asks to comment; the default policy approves it. GitHub
    // takes the comment but never answers, and Eagle is killed (SIGKILL)
    // while it waits.
    fake.inject(
        fake_apis::GitHubRoute::CreateIssueComment,
        fake_apis::GitHubFault::AcceptThenHang,
        1,
    );
    let mut eagle = home
        .command(&["shell"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = eagle.stdin.take().unwrap();
    stdin
        .write_all(format!("!queue Fix it mode:comment out:{}\n!go 1\n", out.display()).as_bytes())
        .unwrap();
    let posted = fake
        .wait_until(crate::zulip::WAIT, |f| {
            f.issue_comments(REPO, 1)
                .iter()
                .any(|c| c.body.contains("<!-- eagle:run-1-req-"))
        })
        .await;
    assert!(posted, "the comment never reached GitHub");
    eagle.kill().unwrap();
    eagle.wait().unwrap();
    drop(stdin);
    let request = requests(&store, "comment_on_pr").await.remove(0);
    let marker = format!("<!-- eagle:run-1-req-{} -->", request.id);
    assert_eq!(
        fake.issue_comments(REPO, 1)
            .iter()
            .filter(|c| c.body.contains(&marker))
            .count(),
        1
    );
    let pending = store.requests().request(request.id).await.unwrap().unwrap();
    assert!(
        pending.carried_out_at.is_none(),
        "killed before recording it"
    );

    // After the restart: the marker is found, nothing is posted again, and
    // the resumed worker learns where the comment is.
    shell(&home, "!status run 1\n");
    let done = store.requests().request(request.id).await.unwrap().unwrap();
    assert!(
        done.carried_out
            .as_deref()
            .is_some_and(|c| c.starts_with("The approved comment is on PR #1 already")),
        "{done:?}"
    );
    let comments = fake.issue_comments(REPO, 1);
    let marked: Vec<_> = comments
        .iter()
        .filter(|c| c.body.contains(&marker))
        .collect();
    assert_eq!(marked.len(), 1, "{comments:#?}");
    assert_eq!(
        marked[0].body,
        format!("Ready for a look: the preview is fixed.\n\n{marker}")
    );
    assert_eq!(marked[0].login.as_deref(), Some("eagle-bot"));
    // A worker run again asks again (a new request, its own marker): each
    // request's comment is on GitHub once, and GitHub was asked once for each.
    let mut markers: Vec<&str> = comments
        .iter()
        .filter_map(|c| c.body.rsplit_once("<!-- eagle:").map(|(_, m)| m))
        .collect();
    let all = markers.len();
    markers.sort_unstable();
    markers.dedup();
    assert_eq!(markers.len(), all, "{comments:#?}");
    let posts = fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/issues/1/comments"))
        .count();
    assert_eq!(posts, all, "{comments:#?}");
    fake.clear_violations();
}

/// A run whose worker opened its PR and asked to merge it at its head:
/// returns the home, the fake, the store, the merge request and the head.
pub(crate) async fn asked_to_merge(
    dir: &Path,
    db: &TestDb,
) -> (Home, FakeGitHub, Store, Request, String, u64) {
    let (remote, _, fix) = remote(dir);
    let mut home = home(db, &remote);
    let fake = github(&mut home).await;
    fake.push_branch(REPO, "eagle/run-1", &fix);
    // CI green at the fix: once Eagle follows the PR, a review follows.
    let ci = fake.add_check_run(
        REPO,
        CheckRunSpec::new("CI", &fix, "completed", Some("success")),
    );
    let out = dir.join("notes");
    let stdout = shell(
        &home,
        &format!("!queue Ship it mode:merge out:{}\n!go 1\n", out.display()),
    );
    let notes = notes(&out);
    // The worker that opened the PR asked to merge it before Eagle saw its
    // head: refused when asked, nothing recorded, nothing merged.
    assert_eq!(note(&notes, "early-merge"), "1", "{notes:#?}");
    // Its reviewer asked once Eagle had seen the head: a human decides.
    assert_eq!(note(&notes, "merge"), "3", "{notes:#?}\n{stdout}");
    assert_eq!(merges(&fake), 0);
    let store = db.open().await;
    let mut asked = requests(&store, "merge_pr").await;
    assert_eq!(asked.len(), 1, "{asked:#?}");
    let request = asked.remove(0);
    assert_eq!(request.bound_sha.as_deref(), Some(fix.as_str()));
    (home, fake, store, request, fix, ci)
}

pub(crate) fn merges(fake: &FakeGitHub) -> usize {
    fake.requests()
        .into_iter()
        .filter(|r| r.method == "PUT" && r.path.ends_with("/merge"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eagle_merges_only_at_the_approved_sha_with_checks_and_review_green_there() {
    let db = TestDb::new(Db::Sqlite).await;
    let dir = shared_tempdir();
    let (home, fake, store, request, fix, _) = asked_to_merge(dir.path(), &db).await;
    fake.add_review(REPO, 1, Some("alex"), "APPROVED", "");
    // A draft cannot be merged: a human marks it ready.
    fake.set_draft(REPO, 1, false);
    shell(&home, &format!("!approve 1 {}\n", request.id));
    let pr = fake.pr(REPO, 1);
    assert!(
        pr.merged,
        "{:?}",
        store.requests().request(request.id).await.unwrap()
    );
    assert_eq!(pr.merged_head_sha.as_deref(), Some(fix.as_str()));
    assert_eq!(merges(&fake), 1);
    let merged = store.requests().request(request.id).await.unwrap().unwrap();
    assert!(
        merged
            .carried_out
            .as_deref()
            .is_some_and(|c| c.starts_with("Eagle merged PR #1 at")),
        "{merged:?}"
    );
    fake.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merge_without_green_checks_or_review_at_the_sha_is_refused_and_the_owner_told() {
    let db = TestDb::new(Db::Sqlite).await;
    let dir = shared_tempdir();
    let (home, fake, store, request, _, _) = asked_to_merge(dir.path(), &db).await;
    // Checks green (CI), but the only approval is of another commit, and
    // someone asked for changes.
    fake.add_review(REPO, 1, Some("sam"), "CHANGES_REQUESTED", "not yet");
    fake.set_draft(REPO, 1, false);
    let stdout = shell(&home, &format!("!approve 1 {}\n", request.id));
    assert!(
        stdout.contains("Eagle did not merge PR #1: sam asked for changes"),
        "{stdout}"
    );
    assert!(!fake.pr(REPO, 1).merged);
    assert_eq!(merges(&fake), 0, "nothing merged");
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
async fn a_merge_of_a_pr_that_is_not_the_runs_is_refused() {
    let db = TestDb::new(Db::Sqlite).await;
    let dir = shared_tempdir();
    let (remote, _, fix) = remote(dir.path());
    let mut home = home(&db, &remote);
    let fake = github(&mut home).await;
    // Green, approved PRs: one from another branch, one from the run's
    // branch into another base.
    let other = fake.open_pr(REPO, PrSpec::new("sam", "feature/x", &fix));
    let mut spec = PrSpec::new("sam", "eagle/run-2", &fix);
    spec.base_ref = "release".into();
    let based = fake.open_pr(REPO, spec);
    fake.add_check_run(
        REPO,
        CheckRunSpec::new("CI", &fix, "completed", Some("success")),
    );
    for n in [other, based] {
        fake.add_review(REPO, n, Some("alex"), "APPROVED", "");
    }
    let (a, b) = (dir.path().join("notes-a"), dir.path().join("notes-b"));
    shell(
        &home,
        &format!(
            "!queue Merge that mode:other pr:{other} out:{}\n!queue Merge this mode:other pr:{based} out:{}\n\
             !go 1\n!go 2\n",
            a.display(),
            b.display()
        ),
    );
    let store = db.open().await;
    let mut approve = String::new();
    for run in [1, 2] {
        let request = store
            .requests()
            .requests_of_run(run)
            .await
            .unwrap()
            .into_iter()
            .find(|r| r.action == "merge_pr")
            .unwrap_or_else(|| panic!("no merge request in run {run}"));
        approve.push_str(&format!("!approve {run} {}\n", request.id));
    }
    let stdout = shell(&home, &approve);
    for (n, why) in [
        (
            other,
            "it is from the branch feature/x, not the run's own eagle/run-1",
        ),
        (based, "it goes into release, not into main (github.base)"),
    ] {
        assert!(
            stdout.contains(&format!("Eagle did not merge PR #{n}: {why}")),
            "{stdout}"
        );
    }
    assert_eq!(merges(&fake), 0, "nothing merged");
    fake.assert_clean();
}

#[test]
fn eagle_check_refuses_a_credential_in_worker_env() {
    for name in [
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "ASANA_TOKEN",
        "PGPASSWORD",
        "ZULIP_API_KEY",
    ] {
        let mut home = Home::new();
        home.set(
            "EAGLE_RUNNER__WORKER_ENV",
            &format!("ANTHROPIC_API_KEY,{name}"),
        );
        let out = home.run(&["check", "--profile", "executor"], "");
        let (stdout, stderr) = text(&out);
        let said = format!("{stdout}{stderr}");
        assert!(!out.status.success(), "{name}: {said}");
        assert!(
            said.contains(&format!("runner.worker_env[1]: {name} is")),
            "{name}: {said}"
        );
    }
    // The profile's own token variable, whatever its name, too.
    let mut home = Home::new();
    home.set("EAGLE_GITHUB__TOKEN_ENV", "MY_GH")
        .set("MY_GH", "t")
        .set("EAGLE_GITHUB__REPO", REPO)
        .set("EAGLE_RUNNER__WORKER_ENV", "MY_GH");
    let out = home.run(&["check", "--profile", "executor"], "");
    let (stdout, stderr) = text(&out);
    let said = format!("{stdout}{stderr}");
    assert!(!out.status.success());
    assert!(
        said.contains("MY_GH is a credential (this profile's github.token_env)"),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_merge_of_a_draft_marks_it_ready_then_merges_on_sqlite() {
    a_draft_is_marked_ready_then_merged(Db::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_merge_of_a_draft_marks_it_ready_then_merges_on_postgres() {
    a_draft_is_marked_ready_then_merged(Db::Postgres).await;
}

/// Workers open drafts; the run completes while its PR is one. Approving
/// its merge_pr means "mark it ready, then merge" at the approved head.
async fn a_draft_is_marked_ready_then_merged(db: Db) {
    let db = TestDb::new(db).await;
    let dir = shared_tempdir();
    let (home, fake, store, request, fix, _) = asked_to_merge(dir.path(), &db).await;
    assert!(fake.pr(REPO, 1).draft, "the worker's PR is a draft");
    fake.add_review(REPO, 1, Some("alex"), "APPROVED", "");
    let stdout = shell(&home, &format!("!show 1 {}\n", request.id));
    assert!(
        stdout.contains(
            "The PR is a draft: approving marks it ready for review at that head, then merges it."
        ),
        "{stdout}"
    );
    let before = fake.requests().len();
    shell(&home, &format!("!approve 1 {}\n", request.id));
    let pr = fake.pr(REPO, 1);
    assert!(
        pr.merged,
        "{:?}",
        store.requests().request(request.id).await.unwrap()
    );
    assert!(!pr.draft);
    assert_eq!(pr.merged_head_sha.as_deref(), Some(fix.as_str()));
    assert_eq!(merges(&fake), 1, "one merge, no 405 first");
    // The mutation went out before the merge.
    let after: Vec<_> = fake.requests().into_iter().skip(before).collect();
    let merge = after
        .iter()
        .position(|r| r.method == "PUT" && r.path.ends_with("/merge"))
        .expect("the merge");
    assert_eq!(after[merge].status, 200, "{:?}", after[merge]);
    assert!(
        after[..merge]
            .iter()
            .any(|r| r.method == "POST" && r.path == "/graphql"),
        "no GraphQL call before the merge: {after:#?}"
    );
    let merged = store.requests().request(request.id).await.unwrap().unwrap();
    assert!(
        merged.carried_out.as_deref().is_some_and(
            |c| c.starts_with("Eagle marked the draft ready for review and merged PR #1 at")
        ),
        "{merged:?}"
    );
    fake.assert_clean();
}

/// `github.drafts = "keep"`: the escalation says the PR is a draft and
/// that `!approve` will not merge it; approving spends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drafts_kept_as_drafts_are_said_so_and_not_merged() {
    let db = TestDb::new(Db::Sqlite).await;
    let dir = shared_tempdir();
    let (mut home, fake, store, request, _, _) = asked_to_merge(dir.path(), &db).await;
    home.set("EAGLE_GITHUB__DRAFTS", "keep");
    fake.add_review(REPO, 1, Some("alex"), "APPROVED", "");
    let stdout = shell(&home, &format!("!show 1 {}\n", request.id));
    assert!(
        stdout.contains(
            "The PR is a draft, and github.drafts = \"keep\": `!approve` will not merge it"
        ),
        "{stdout}"
    );
    let stdout = shell(&home, &format!("!approve 1 {}\n", request.id));
    assert!(
        stdout.contains("Eagle did not merge PR #1: it is a draft, and github.drafts = \"keep\""),
        "{stdout}"
    );
    assert!(fake.pr(REPO, 1).draft);
    assert!(!fake.pr(REPO, 1).merged);
    assert_eq!(merges(&fake), 0);
    let refused = store.requests().request(request.id).await.unwrap().unwrap();
    assert!(
        refused
            .carried_out
            .as_deref()
            .is_some_and(|c| c.starts_with("Eagle did not merge")),
        "{refused:?}"
    );
    // A bad value is refused at start with the key named.
    home.set("EAGLE_GITHUB__DRAFTS", "sometimes");
    let out = home.run(&["shell"], "");
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(stderr.contains("github.drafts"), "{stderr}");
    fake.assert_clean();
}

/// A worker names a PR in another repository: the run is held for its
/// owner, who is asked once, never left waiting on nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_pr_is_in_another_repository_is_held_for_its_owner() {
    let db = TestDb::new(Db::Sqlite).await;
    let mut home = Home::new();
    home.set("EAGLE_DATABASE_URL", &db.url)
        .set(
            "EAGLE_RUNNER__WORKER_COMMAND",
            &crate::executor::fake_worker_command(),
        )
        .set("EAGLE_RUNNER__STATUS_INTERVAL", "0s");
    let fake = github(&mut home).await;
    let stdout = shell(
        &home,
        "!queue Elsewhere mode:pr pr:https://github.com/other/thing/pull/5\n!go 1\n",
    );
    let held = "[STATUS: held] run:1 PR #5: its PR is in other/thing, not in github.repo acme/app \
                nor in a repository an executor announced: Eagle does not follow it";
    assert!(stdout.contains(held), "{stdout}");
    let stdout = shell(&home, "!status run 1\n");
    assert!(stdout.contains("held"), "{stdout}");
    assert!(stdout.contains("waiting on"), "{stdout}");
    assert!(!stdout.contains("[STATUS: held]"), "said once:\n{stdout}");
    let store = db.open().await;
    let mut tx = store.begin_read().await.unwrap();
    let run = tx.tasks().run(1).await.unwrap().unwrap();
    assert!(run.held);
    assert!(run.waiting_on.is_some(), "{run:?}");
    // Nothing was asked of GitHub about another repository.
    assert!(
        fake.requests()
            .iter()
            .all(|r| !r.path.contains("other/thing")),
        "{:#?}",
        fake.requests()
    );
    fake.assert_clean();
}

/// What an approver reads is what Eagle pushes: a push whose commit id is
/// written with a JSON escape (the raw text then holds another run of 40
/// hex digits) is named, in its escalation and in `!show`, by the commit
/// Eagle parses from it, and that commit is what lands on the branch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_written_with_json_escapes_is_named_by_the_commit_eagle_pushes() {
    let db = TestDb::new(Db::Sqlite).await;
    let dir = shared_tempdir();
    let (remote, _, _) = remote(dir.path());
    let home = home(&db, &remote);
    let out = dir.path().join("notes");
    let stdout = shell(
        &home,
        &format!("!queue Push it mode:escaped out:{}\n!go 1\n", out.display()),
    );
    let notes = notes(&out);
    let sha = note(&notes, "sha").to_string();
    assert_eq!(note(&notes, "ask-fresh"), "3", "{notes:#?}\n{stdout}");
    // The raw text names another commit: the fourth digit escaped.
    let store = db.open().await;
    let [asked] = requests(&store, "push_branch").await.try_into().unwrap();
    let decoy = format!("00{:02x}{}", sha.as_bytes()[3], &sha[4..]);
    assert!(asked.body.contains(&decoy), "{}", asked.body);
    assert!(!asked.body.contains(&sha), "{}", asked.body);
    let said = format!("Eagle will push commit `{sha}` to the run's own branch `eagle/run-1`");
    let escalation = stdout
        .lines()
        .find(|l| l.contains("[ESCALATED: push_branch] run:1"))
        .unwrap_or_else(|| panic!("no escalation:\n{stdout}"));
    assert!(escalation.contains(&said), "{escalation}");
    assert!(!escalation.contains(&decoy[..7]), "{escalation}");
    let shown = shell(&home, &format!("!show 1 {}\n", asked.id));
    assert!(shown.contains(&said), "{shown}");

    // Approved, the resumed worker asks again with the same bytes: Eagle
    // pushes the commit it named.
    let stdout = shell(&home, &format!("!approve 1 {}\n", asked.id));
    let notes = self::notes(&out);
    assert!(
        notes.iter().any(|n| n == "ask-resumed 0"),
        "{notes:#?}\n{stdout}"
    );
    assert_eq!(head_of(&remote, "eagle/run-1"), Some(sha));
}

/// A merge asked before Eagle saw the PR's head (a protocol line, which is
/// recorded as written) is described as merging nothing, and approving it
/// merges nothing, whatever commit its body names: CI and the review are
/// green at that commit, and it is the PR's head.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merge_asked_before_eagle_saw_the_head_is_not_merged_at_the_commit_it_names() {
    let db = TestDb::new(Db::Sqlite).await;
    let dir = shared_tempdir();
    let (remote, _, fix) = remote(dir.path());
    let mut home = home(&db, &remote);
    let fake = github(&mut home).await;
    fake.push_branch(REPO, "eagle/run-1", &fix);
    let out = dir.path().join("notes");
    let stdout = shell(
        &home,
        &format!(
            "!queue Ship it mode:mergeline out:{}\n!go 1\n",
            out.display()
        ),
    );
    let store = db.open().await;
    let [asked] = requests(&store, "merge_pr").await.try_into().unwrap();
    assert!(asked.body.contains(&fix), "{}", asked.body);
    assert_eq!(asked.bound_sha, None);
    let nothing = "Eagle will not merge PR #1: the request was made before Eagle saw the PR's head";
    let escalation = stdout
        .lines()
        .find(|l| l.contains("[ESCALATED: merge_pr] run:1"))
        .unwrap_or_else(|| panic!("no escalation:\n{stdout}"));
    assert!(escalation.contains(nothing), "{escalation}");
    fake.add_check_run(
        REPO,
        CheckRunSpec::new("CI", &fix, "completed", Some("success")),
    );
    fake.add_review(REPO, 1, Some("alex"), "APPROVED", "");
    fake.set_draft(REPO, 1, false);
    let stdout = shell(&home, &format!("!approve 1 {}\n", asked.id));
    assert!(
        stdout.contains(
            "Eagle did not merge PR #1: the request was made before Eagle saw the PR's head"
        ),
        "{stdout}"
    );
    assert_eq!(merges(&fake), 0, "nothing merged");
    assert!(!fake.pr(REPO, 1).merged);
    fake.assert_clean();
}
