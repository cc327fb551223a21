//! Real repositories, through the binary: several repositories per
//! executor, each cloned (once, into Eagle's cache) and pushed with Eagle's
//! own token against a git remote that demands it (git's own `git
//! http-backend`), the token nowhere a worker or a log could show it; and
//! a repository's setup, run confined with its package index reachable,
//! its caches kept per lock file, the agent after it offline.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use base64::Engine as _;

use crate::effects::git;
use crate::support::git_http::GitHttp;
use crate::support::package_index::{PackageIndex, tarball};
use crate::support::{Db, Home, TestDb, eagle_bin, finish, text};

const TOKEN: &str = "ghs_repoTestToken0123456789";

/// A bare repository `<root>/<name>.git` with `main` at one commit holding
/// `files`.
fn bare_repo(root: &Path, name: &str, files: &[(&str, &str)]) -> PathBuf {
    let bare = root.join(format!("{name}.git"));
    let scratch = root.join(format!("{name}-scratch"));
    std::fs::create_dir_all(&scratch).unwrap();
    git(
        root,
        &["init", "-q", "--bare", "-b", "main", bare.to_str().unwrap()],
    );
    git(&scratch, &["init", "-q", "-b", "main"]);
    for (file, text) in files {
        std::fs::write(scratch.join(file), text).unwrap();
        git(&scratch, &["add", file]);
    }
    git(&scratch, &["commit", "-qm", "start"]);
    git(&scratch, &["push", "-q", bare.to_str().unwrap(), "main"]);
    bare
}

/// A new commit on `main` of `bare` that sets `file` to `text`.
fn commit_to_main(root: &Path, bare: &Path, file: &str, text: &str) {
    let scratch = root.join("again");
    let _ = std::fs::remove_dir_all(&scratch);
    git(
        root,
        &[
            "clone",
            "-q",
            bare.to_str().unwrap(),
            scratch.to_str().unwrap(),
        ],
    );
    std::fs::write(scratch.join(file), text).unwrap();
    git(&scratch, &["commit", "-qam", "change"]);
    git(&scratch, &["push", "-q", "origin", "main"]);
}

/// Adds `toml` to the executor's profile in `home`.
fn add_to_executor(home: &Home, toml: &str) {
    let path = home.profiles().join("executor.toml");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push('\n');
    text.push_str(toml);
    std::fs::write(&path, text).unwrap();
}

/// The worker script and the binary in `<home>/bin`, on the worker's PATH
/// (the one place of the home a confined worker sees).
fn worker_bin(home: &mut Home) -> PathBuf {
    let bin = home.dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    eagle::ground::host::chmod(&bin, 0o755).unwrap();
    std::fs::copy(eagle_bin(), bin.join("eagle")).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/it/repo-worker.sh");
    std::fs::copy(&script, bin.join("repo-worker.sh")).unwrap();
    for file in ["eagle", "repo-worker.sh"] {
        eagle::ground::host::chmod(&bin.join(file), 0o755).unwrap();
    }
    home.set(
        "EAGLE_RUNNER__WORKER_COMMAND",
        &format!("bash {} {{prompt}}", bin.join("repo-worker.sh").display()),
    )
    .set("EAGLE_RUNNER__WORKER_PATH", "/usr/local/bin:/usr/bin:/bin")
    .set("EAGLE_RUNNER__STATUS_INTERVAL", "0s")
    .set("EAGLE_RUNNER__MAX_ATTEMPTS", "1");
    bin
}

/// Runs the home's own copy of the binary as `eagle shell` in a blocking
/// thread (the test's servers answer meanwhile): stdout, stderr.
async fn shell(home: &Home, input: &str) -> (String, String) {
    let (ok, stdout, stderr) = eagle_with(home, &["shell"], input).await;
    assert!(ok, "{stdout}\n{stderr}");
    (stdout, stderr)
}

/// Runs the home's own copy of the binary with `args` in a blocking
/// thread: whether it succeeded, stdout and stderr.
async fn eagle_in(home: &Home, args: &[&str]) -> (bool, String, String) {
    eagle_with(home, args, "").await
}

/// As [`eagle_in`], with `input` on its standard input.
async fn eagle_with(home: &Home, args: &[&str], input: &str) -> (bool, String, String) {
    let (env, dir) = (home.env.clone(), home.dir.path().to_path_buf());
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let input = input.to_string();
    tokio::task::spawn_blocking(move || {
        let child = Command::new(dir.join("bin/eagle"))
            .args(&args)
            .env_clear()
            .envs(&env)
            .current_dir(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn eagle");
        let out = finish(child, input.as_bytes(), "eagle");
        let (stdout, stderr) = text(&out);
        (out.status.success(), stdout, stderr)
    })
    .await
    .expect("eagle's thread")
}

/// A run's working directory in `home`.
fn work(home: &Home, run: i64) -> PathBuf {
    home.dir
        .path()
        .join(format!("data/executor/runs/{run}/work"))
}

/// What the worker of `run` noted, one line each.
fn notes(home: &Home, run: i64) -> Vec<String> {
    std::fs::read_to_string(work(home, run).join("notes.txt"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// The file names at the tip of `branch` in `bare` (which must have it).
fn files_at(bare: &Path, branch: &str) -> String {
    let pushed = crate::effects::head_of(bare, branch)
        .unwrap_or_else(|| panic!("no {branch} in {}", bare.display()));
    let out = Command::new("git")
        .args([
            "--git-dir",
            bare.to_str().unwrap(),
            "ls-tree",
            "--name-only",
            &pushed,
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every regular file under `dir` that holds `needle`.
pub(crate) fn files_holding(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                stack.push(path);
            } else if meta.is_file()
                && std::fs::read(&path)
                    .is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle))
            {
                found.push(path);
            }
        }
    }
    found
}

/// Two repositories over HTTPS-like git that demands a token, the real
/// Claude Code CLI as the worker (its model faked): each task goes to its
/// repository, each run's `git push` (the CLI's Bash tool) lands on its
/// own branch there and nowhere else, the checkout's origin is the plain
/// URL, and the token is in no file, no worker's view of any process, and
/// no log line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_repositories_each_run_pushes_its_own_with_eagles_token_and_nothing_shows_it() {
    let db = TestDb::new(Db::Sqlite).await;
    let served = tempfile::tempdir().unwrap();
    let web = bare_repo(served.path(), "web", &[("README", "web\n")]);
    let api = bare_repo(served.path(), "api", &[("README", "api\n")]);
    let server = GitHttp::start(served.path(), TOKEN).await;
    let mut home = Home::new();
    let bin = worker_bin(&mut home);
    // The agent's one tool call: the worker script (notes, the processes'
    // view, a commit and `git push`) through the CLI's Bash tool.
    let push = serde_json::json!({"type": "tool_use", "name": "Bash", "input": {
        "command": format!("bash {} mode:push", bin.join("repo-worker.sh").display()),
        "description": "commit and push"}});
    let (model_url, model) =
        crate::claude::start_scripted(home.dir.path().join("outside.txt"), vec![push]).await;
    let claude = crate::claude::claude_bin();
    crate::claude::as_worker(&mut home, &claude, &model_url)
        .set("EAGLE_DATABASE_URL", &db.url)
        .set("GIT_TOKEN", TOKEN)
        .set("RUST_LOG", "trace")
        .set("EAGLE_RUNNER__NO_OUTPUT_TIMEOUT", "60s")
        .set("EAGLE_RUNNER__HOOK_TIMEOUT", "30s");
    add_to_executor(
        &home,
        &format!(
            "[[runner.repos]]\nname = \"web\"\nurl = \"{}\"\ntoken_env = \"GIT_TOKEN\"\n\n\
             [[runner.repos]]\nname = \"api\"\nurl = \"{}\"\ntoken_env = \"GIT_TOKEN\"\n",
            server.url("web"),
            server.url("api")
        ),
    );
    let (stdout, stderr) = shell(
        &home,
        "!queue --repo web Web work mode:push\n!go 1\n!queue --repo api Api work mode:push\n!go 2\n\
         !status 1\n!queue --repo nowhere Lost work\n",
    )
    .await;
    assert!(stdout.contains("Queued task #1 (in web)"), "{stdout}");
    assert!(stdout.contains("repository: web"), "{stdout}");
    assert!(
        stdout.contains("There is no repository named nowhere"),
        "{stdout}"
    );
    let head = |bare: &Path, branch: &str| crate::effects::head_of(bare, branch);
    // Each run's commit is on its own branch of its own repository only.
    for (run, bare, other) in [(1, &web, &api), (2, &api, &web)] {
        let branch = format!("eagle/run-{run}");
        let notes = notes(&home, run);
        assert!(
            notes.contains(&"push ok".to_string()),
            "run {run}: {notes:?}\n{stdout}"
        );
        let files = files_at(bare, &branch);
        assert!(files.contains(&format!("run-{run}.txt")), "{files}");
        assert_eq!(
            head(other, &branch),
            None,
            "run {run} pushed into the other repository"
        );
        // The checkout's origin is the plain URL, and it borrows the cache's objects.
        let name = bare.file_stem().unwrap().to_str().unwrap();
        assert!(
            notes.contains(&format!("origin {}", server.url(name))),
            "{notes:?}"
        );
        let alternates =
            std::fs::read_to_string(work(&home, run).join(".git/objects/info/alternates")).unwrap();
        assert!(
            alternates
                .trim()
                .ends_with(&format!("data/repos/{name}.git/objects")),
            "{alternates}"
        );
    }
    // The real CLI ran both sessions, its push call without an error.
    {
        let seen = model.seen.lock().unwrap();
        let done: Vec<&serde_json::Value> = seen
            .requests
            .iter()
            .filter(|r| crate::claude::tool_results(r) == 1)
            .collect();
        assert!(done.len() >= 2, "{stdout}");
        for request in done {
            let text = request.to_string();
            assert!(!text.contains("\"is_error\":true"), "{text}");
        }
    }
    // Eagle's git sent the token, and only it; nothing was refused.
    assert_eq!(server.authorizations(), vec![TOKEN.to_string()]);
    assert_eq!(server.refused(), 0);
    // Nowhere to be seen: not in any file under the home (Eagle's data,
    // the runs, the workers' copies of every process's environment and
    // command line), not in any log line at trace level.
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("x-access-token:{TOKEN}"));
    for needle in [TOKEN, basic.as_str()] {
        let found = files_holding(home.dir.path(), needle.as_bytes())
            .into_iter()
            // The profile names the variable, and the test's environment holds it.
            .filter(|p| !p.ends_with("executor.toml"))
            .collect::<Vec<_>>();
        assert!(found.is_empty(), "{needle} found in {found:#?}");
        assert!(!stdout.contains(needle) && !stderr.contains(needle));
    }
    assert!(
        stderr.contains("TRACE") || stderr.contains("trace"),
        "no trace log: {stderr:.500}"
    );
    // The repositories are announced: a second executor could not be told otherwise.
    let store = db.open().await;
    let names: Vec<String> = store
        .repos()
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(names, vec!["api".to_string(), "web".to_string()]);
    // A task whose repository the executor does not know (another
    // executor's, since gone) is held at once, not retried.
    let mut tx = store.begin_write().await.unwrap();
    let task = tx
        .tasks()
        .insert_task(&eagle::store::NewTask {
            task_gid: "chat:gone".into(),
            source: "chat".into(),
            title: "Elsewhere".into(),
            repo: Some("gone".into()),
            ..eagle::store::NewTask::default()
        })
        .await
        .unwrap()
        .unwrap();
    tx.commit().await.unwrap();
    let (held, _) = shell(&home, &format!("!go {task}\n")).await;
    assert!(held.contains("[STATUS: no_repository] run:3"), "{held}");
    assert!(
        held.contains("which this executor does not know (it knows web, api)"),
        "{held}"
    );
    let (status, _) = shell(&home, "!status run 3\n").await;
    assert!(status.contains("held: yes"), "{status}");
    assert!(
        status.contains("worker: none now (1 attempt(s) so far, 1 failed)"),
        "{status}"
    );
}

/// A repository's setup runs confined with only its package index
/// reachable; the agent then finds the package and cannot reach the index
/// (its attempts refused and recorded); a second run with the same lock
/// file starts without the setup (the index sees no second fetch), a
/// changed lock file runs it again; a failing setup holds its run with the
/// log's tail, and no worker starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_setup_runs_once_per_lock_file_and_the_agent_stays_offline() {
    let db = TestDb::new(Db::Sqlite).await;
    let served = tempfile::tempdir().unwrap();
    let web = bare_repo(
        served.path(),
        "web",
        &[("README", "web\n"), ("package-lock.json", "{\"v\": 1}\n")],
    );
    let index = PackageIndex::start(&[(
        "pkg/demo.tar",
        tarball(&[("lib.txt", b"demo 1.0\n".as_slice())]),
    )])
    .await;
    let mut home = Home::new();
    worker_bin(&mut home);
    home.set("EAGLE_DATABASE_URL", &db.url)
        .set("EAGLE_RUNNER__SANDBOX__MODE", "on");
    let setup = format!(
        "mkdir -p deps && curl -fsS {}/pkg/demo.tar | tar -x -C deps",
        index.url()
    );
    add_to_executor(
        &home,
        &format!(
            "[[runner.repos]]\nname = \"web\"\nurl = \"{web}\"\nsetup = \"{setup}\"\n\
             setup_allow_hosts = [\"127.0.0.1:{port}\"]\ncache = [\"deps\"]\n\
             cache_key = [\"package-lock.json\"]\n\n\
             [[runner.repos]]\nname = \"broken\"\nurl = \"{web}\"\n\
             setup = \"echo the-registry-is-down >&2; exit 3\"\n",
            web = web.display(),
            port = index.port(),
        ),
    );
    let task = |n: i64| {
        format!(
            "!queue --repo web Build {n} mode:setup index:{}\n!go {n}\n",
            index.url()
        )
    };
    let (first, _) = shell(&home, &task(1)).await;
    let (status1, _) = shell(&home, "!status run 1\n").await;
    let notes1 = notes(&home, 1);
    assert!(
        notes1.contains(&"dep demo 1.0".to_string()),
        "{notes1:?}\n{first}"
    );
    assert!(notes1.contains(&"fetch refused".to_string()), "{notes1:?}");
    assert!(notes1.contains(&"upload refused".to_string()), "{notes1:?}");
    assert_eq!(index.fetches("pkg/demo.tar"), 1, "{first}");
    assert_eq!(index.uploads(), 0);
    assert!(status1.contains("setup: ran"), "{status1}");
    // The agent's attempts are recorded as the run's refusals.
    assert!(status1.contains("network: refused"), "{status1}");

    let (second, _) = shell(&home, &task(2)).await;
    let (status2, _) = shell(&home, "!status run 2\n").await;
    let notes2 = notes(&home, 2);
    assert!(
        notes2.contains(&"dep demo 1.0".to_string()),
        "{notes2:?}\n{second}"
    );
    assert_eq!(
        index.fetches("pkg/demo.tar"),
        1,
        "the setup ran again:\n{second}"
    );
    assert!(status2.contains("setup: cached"), "{status2}");

    // A changed lock file: `eagle repo setup` runs the setup ahead of the
    // next run, which then finds it kept.
    commit_to_main(served.path(), &web, "package-lock.json", "{\"v\": 2}\n");
    let (ok, out, err) = eagle_in(&home, &["repo", "setup", "web"]).await;
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("Repository web: setup ran (cache "), "{out}");
    assert_eq!(index.fetches("pkg/demo.tar"), 2, "{out}\n{err}");
    let (ok, out, _) = eagle_in(&home, &["repo", "setup", "web"]).await;
    assert!(ok && out.contains("setup cached"), "{out}");
    assert_eq!(index.fetches("pkg/demo.tar"), 2, "it ran again: {out}");
    let runs = home.dir.path().join("data/executor/runs");
    assert!(
        !runs.join("setup-web").exists(),
        "the setup's checkout is left behind"
    );
    let (third, _) = shell(&home, &task(3)).await;
    assert!(
        notes(&home, 3).contains(&"dep demo 1.0".to_string()),
        "{third}"
    );
    assert_eq!(index.fetches("pkg/demo.tar"), 2, "{third}");
    let (status3, _) = shell(&home, "!status run 3\n").await;
    assert!(status3.contains("setup: cached"), "{status3}");
    // A failing setup ahead of time says why, and an unknown name lists
    // the known ones.
    let (ok, _, err) = eagle_in(&home, &["repo", "setup", "broken"]).await;
    assert!(!ok && err.contains("the-registry-is-down"), "{err}");
    let (ok, _, err) = eagle_in(&home, &["repo", "setup", "nowhere"]).await;
    assert!(!ok, "{err}");
    assert!(
        err.contains("no repository named \"nowhere\"; its repositories: web, broken"),
        "{err}"
    );

    let (told, _) = shell(&home, "!queue --repo broken Never mode:setup\n!go 4\n").await;
    assert!(told.contains("[STATUS: setup_failed] run:4"), "{told}");
    assert!(told.contains("the-registry-is-down"), "{told}");
    let (broken, _) = shell(&home, "!status run 4\n").await;
    assert!(broken.contains("setup: failed"), "{broken}");
    assert!(broken.contains("held: yes"), "{broken}");
    assert!(
        notes(&home, 4).is_empty(),
        "a worker started after a failed setup"
    );
}

/// An SSH server of the test's own: Debian's `sshd` on a port of its own,
/// root's login by the given key only, stopped (by its id) when dropped.
struct Sshd {
    child: std::process::Child,
    port: u16,
    host_key_line: String,
    // Dropped after the child is stopped (fields drop after `drop`).
    _run_dir: RunDir,
}

/// sshd's privilege separation directory, made if missing and then removed
/// when dropped (also when the start panics).
struct RunDir(bool);

impl RunDir {
    fn make() -> RunDir {
        let missing = !Path::new("/run/sshd").exists();
        if missing {
            std::fs::create_dir_all("/run/sshd").unwrap();
        }
        RunDir(missing)
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if self.0 {
            let _ = std::fs::remove_dir("/run/sshd");
        }
    }
}

impl Sshd {
    fn start(dir: &Path, authorized: &Path) -> Sshd {
        let sshd = ["/usr/sbin/sshd", "/usr/bin/sshd"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect("Debian's openssh-server is required (`apt-get install openssh-server`, as .ci/check does)");
        let host_key = dir.join("host_key");
        let out = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(&host_key)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = dir.join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {}\nAuthorizedKeysFile {}\n\
                 StrictModes no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                 UsePAM no\nPermitRootLogin prohibit-password\nPidFile {}\n",
                host_key.display(),
                authorized.display(),
                dir.join("sshd.pid").display()
            ),
        )
        .unwrap();
        let run_dir = RunDir::make();
        let mut child = Command::new(sshd)
            .args(["-D", "-e", "-f"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Ready once it says it listens.
        let stderr = child.stderr.take().unwrap();
        let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stderr));
        let mut said = Vec::new();
        loop {
            match lines.next() {
                Some(Ok(line)) if line.contains("Server listening") => break,
                Some(Ok(line)) => said.push(line),
                _ => panic!("sshd did not start: {said:#?}"),
            }
        }
        // Keep reading its log, so that it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        let public = std::fs::read_to_string(host_key.with_extension("pub")).unwrap();
        let mut parts = public.split_whitespace();
        let host_key_line = format!(
            "[127.0.0.1]:{port} {} {}\n",
            parts.next().unwrap(),
            parts.next().unwrap()
        );
        Sshd {
            child,
            port,
            host_key_line,
            _run_dir: run_dir,
        }
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A repository over SSH with a deploy key: Eagle's own git fetches and
/// pushes with it (`IdentitiesOnly`, the given known_hosts, no agent), the
/// run's push lands on its branch, and the key is nowhere a worker sees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repository_over_ssh_is_fetched_and_pushed_with_its_deploy_key_only() {
    let db = TestDb::new(Db::Sqlite).await;
    let served = tempfile::tempdir().unwrap();
    let bare = bare_repo(served.path(), "firmware", &[("README", "firmware\n")]);
    let keys = tempfile::tempdir().unwrap();
    let key = keys.path().join("deploy");
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "eagle-deploy", "-f"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let authorized = keys.path().join("authorized_keys");
    std::fs::copy(key.with_extension("pub"), &authorized).unwrap();
    let sshd = Sshd::start(keys.path(), &authorized);
    let known_hosts = keys.path().join("known_hosts");
    std::fs::write(&known_hosts, &sshd.host_key_line).unwrap();
    let mut home = Home::new();
    worker_bin(&mut home);
    home.set("EAGLE_DATABASE_URL", &db.url);
    // An agent of Eagle's user's would be ignored; make sure it is not asked.
    home.set("SSH_AUTH_SOCK", "/nonexistent/agent.sock");
    let url = format!("ssh://root@127.0.0.1:{}{}", sshd.port, bare.display());
    add_to_executor(
        &home,
        &format!(
            "[[runner.repos]]\nname = \"firmware\"\nurl = \"{url}\"\nssh_key_file = \"{}\"\n\
             known_hosts = \"{}\"\n",
            key.display(),
            known_hosts.display()
        ),
    );
    let (stdout, stderr) = shell(&home, "!queue --repo firmware Debounce mode:push\n!go 1\n").await;
    let notes = notes(&home, 1);
    assert!(
        notes.contains(&"push ok".to_string()),
        "{notes:?}\n{stdout}\n{stderr}"
    );
    assert!(notes.contains(&format!("origin {url}")), "{notes:?}");
    assert!(files_at(&bare, "eagle/run-1").contains("run-1.txt"));
    let private = std::fs::read_to_string(&key).unwrap();
    let secret_line = private.lines().nth(1).unwrap();
    let found = files_holding(home.dir.path(), secret_line.as_bytes());
    assert!(found.is_empty(), "the deploy key is in {found:#?}");
    drop(sshd);
}

/// Eagle's git as a GitHub App: the installation token the App's JWT buys
/// from the (fake) GitHub clones, fetches and pushes, against a git remote
/// that takes only the tokens GitHub issued for that repository; a token
/// about to expire is renewed before git uses it, and none is shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_github_apps_installation_token_fetches_and_pushes_and_is_renewed_as_it_expires() {
    const APP: u64 = 4242;
    let db = TestDb::new(Db::Sqlite).await;
    let served = tempfile::tempdir().unwrap();
    let web = bare_repo(served.path(), "web", &[("README", "web\n")]);
    let keys = tempfile::tempdir().unwrap();
    let (private, public) = crate::github::app::rsa_pair(keys.path(), "app");
    let fake = fake_apis::FakeGitHub::start().await;
    fake.add_repo("acme/web", fake_apis::RepoSpec::default());
    let mut spec = fake_apis::AppSpec::new(APP, "eagle-app", &public);
    // Shorter than the five minutes before expiry at which Eagle renews:
    // every use finds the last token about to expire.
    spec.token_lifetime = std::time::Duration::from_secs(120);
    fake.add_app(spec);
    fake.install_app(APP, &["acme/web"]);
    let grants = fake.clone();
    let server = GitHttp::start_checked(
        served.path(),
        std::sync::Arc::new(move |password: &str, repo: &str| {
            grants.installation_token_grants(password, &format!("acme/{repo}"))
        }),
    )
    .await;
    let mut home = Home::new();
    worker_bin(&mut home);
    let key = home.dir.path().join("app.pem");
    std::fs::write(&key, &private).unwrap();
    eagle::ground::host::chmod(&key, 0o600).unwrap();
    home.set("EAGLE_DATABASE_URL", &db.url)
        .set("EAGLE_GITHUB__API_URL", &fake.url())
        .set("EAGLE_GITHUB__REPO", "acme/web")
        .set("EAGLE_GITHUB__APP_ID", &APP.to_string())
        .set("EAGLE_GITHUB__PRIVATE_KEY_FILE", &key.display().to_string())
        .set("RUST_LOG", "trace");
    add_to_executor(
        &home,
        &format!(
            "[[runner.repos]]\nname = \"web\"\nurl = \"{}\"\ngithub = \"acme/web\"\n",
            server.url("web")
        ),
    );
    let (stdout, stderr) = shell(
        &home,
        "!queue Web work mode:push\n!go 1\n!queue Web again mode:push\n!go 2\n",
    )
    .await;
    for run in [1, 2] {
        assert!(
            notes(&home, run).contains(&"push ok".to_string()),
            "run {run}: {:?}\n{stdout}",
            notes(&home, run)
        );
        let files = files_at(&web, &format!("eagle/run-{run}"));
        assert!(files.contains(&format!("run-{run}.txt")), "{files}");
    }
    // Every password git sent was an installation token GitHub issued for
    // acme/web; each run's git found the last one about to expire and
    // bought another.
    let tokens = server.authorizations();
    assert_eq!(server.refused(), 0, "{tokens:?}");
    assert!(tokens.len() >= 2, "{tokens:?}");
    assert!(fake.installation_tokens_issued() >= 2);
    for token in &tokens {
        assert!(token.starts_with("ghs_"), "{token}");
        assert!(!stdout.contains(token.as_str()) && !stderr.contains(token.as_str()));
        let found = files_holding(home.dir.path(), token.as_bytes());
        assert!(found.is_empty(), "{token} found in {found:#?}");
    }
}
