//! The test servers for real repositories: a git remote that demands a
//! token as GitHub's does (real clones and pushes through `git
//! http-backend`), and a package index that counts fetches and refuses
//! uploads.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use base64::Engine as _;

use crate::support::git_http::GitHttp;
use crate::support::package_index::{PackageIndex, tarball};
use crate::support::{WAIT, within};

const TOKEN: &str = "ghs_test_token_1234";

/// Runs `git args` in `dir` with nothing of the host's: no user or system
/// configuration (`home` stands in), never a prompt, and `env` besides.
async fn git(home: &Path, dir: &Path, args: &[&str], env: &[(String, String)]) -> Output {
    let mut command = tokio::process::Command::new("git");
    command
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let what = format!("git {}", args.join(" "));
    within(WAIT, &what, command.output())
        .await
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"))
}

/// Like [`git`], and it must succeed: its standard output.
async fn git_ok(home: &Path, dir: &Path, args: &[&str], env: &[(String, String)]) -> String {
    let out = git(home, dir, args, env).await;
    assert!(
        out.status.success(),
        "git {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The token as an `Authorization` header, in git's environment the way
/// Eagle passes it (never on a command line).
fn with_token(token: &str) -> Vec<(String, String)> {
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("x-access-token:{token}"));
    vec![
        ("GIT_CONFIG_COUNT".into(), "1".into()),
        ("GIT_CONFIG_KEY_0".into(), "http.extraHeader".into()),
        (
            "GIT_CONFIG_VALUE_0".into(),
            format!("Authorization: Basic {basic}"),
        ),
    ]
}

/// Waits until nothing accepts connections at `addr` any more.
async fn closed(addr: SocketAddr) {
    within(WAIT, "the server to stop", async {
        while tokio::net::TcpStream::connect(addr).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
}

fn addr_of(url: &str) -> SocketAddr {
    let rest = url.trim_start_matches("http://");
    let host = rest.split('/').next().expect("a host in the URL");
    host.parse().expect("an address in the URL")
}

/// A clone without credentials is refused; with the token it works and a
/// push lands in the bare repository (owned by another user when the tests
/// run as root, as a worker's would be); a rotated token retires the old.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_git_remote_serves_clones_and_pushes_only_to_its_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (home, root) = (dir.path().join("home"), dir.path().join("root"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&root).unwrap();
    let bare = root.join("app.git");
    let none = Vec::new();
    git_ok(
        &home,
        &root,
        &["init", "--bare", "-b", "main", "app.git"],
        &none,
    )
    .await;
    let seed = dir.path().join("seed");
    git_ok(&home, dir.path(), &["init", "-b", "main", "seed"], &none).await;
    std::fs::write(seed.join("README"), "hello\n").unwrap();
    git_ok(&home, &seed, &["add", "README"], &none).await;
    git_ok(&home, &seed, &["commit", "-m", "first"], &none).await;
    // Many branches at distinct commits: a clone then wants them all, in a
    // request large enough that git sends it gzipped.
    for n in 0..40 {
        let (message, branch) = (format!("empty {n}"), format!("b{n}"));
        git_ok(
            &home,
            &seed,
            &["commit", "--allow-empty", "-m", &message],
            &none,
        )
        .await;
        git_ok(&home, &seed, &["branch", &branch], &none).await;
    }
    let bare_arg = bare.display().to_string();
    git_ok(&home, &seed, &["push", &bare_arg, "--all"], &none).await;
    if eagle::ground::host::euid() == 0 {
        let owned = std::process::Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(&bare)
            .status()
            .expect("chown");
        assert!(owned.success(), "cannot give the repository away");
    }

    let server = GitHttp::start(&root, TOKEN).await;
    let url = server.url("app");

    let anonymous = git(&home, dir.path(), &["clone", &url, "anon"], &none).await;
    assert!(!anonymous.status.success(), "cloned without credentials");
    assert!(server.refused() > 0);
    assert_eq!(server.served(), 0);
    let wrong = git(
        &home,
        dir.path(),
        &["clone", &url, "wrong"],
        &with_token("nope"),
    )
    .await;
    assert!(!wrong.status.success(), "cloned with a wrong token");

    git_ok(
        &home,
        dir.path(),
        &["clone", &url, "work"],
        &with_token(TOKEN),
    )
    .await;
    let work = dir.path().join("work");
    assert_eq!(
        std::fs::read_to_string(work.join("README")).unwrap(),
        "hello\n"
    );
    git_ok(&home, &work, &["switch", "-c", "feature"], &none).await;
    std::fs::write(work.join("NEW"), "new\n").unwrap();
    git_ok(&home, &work, &["add", "NEW"], &none).await;
    git_ok(&home, &work, &["commit", "-m", "second"], &none).await;
    git_ok(
        &home,
        &work,
        &["push", "origin", "feature"],
        &with_token(TOKEN),
    )
    .await;
    let pushed = git_ok(&home, &work, &["rev-parse", "HEAD"], &none).await;
    let landed = git_ok(
        &home,
        dir.path(),
        &[
            "-c",
            "safe.directory=*",
            "--git-dir",
            &bare_arg,
            "rev-parse",
            "refs/heads/feature",
        ],
        &none,
    )
    .await;
    assert_eq!(landed, pushed);
    assert!(server.served() > 0);
    assert_eq!(server.authorizations(), ["nope", TOKEN]);

    server.set_token("other");
    let before = server.refused();
    let old = git(&home, &work, &["ls-remote", &url], &with_token(TOKEN)).await;
    assert!(!old.status.success(), "the old token still works");
    assert!(server.refused() > before);
    let refs = git_ok(&home, &work, &["ls-remote", &url], &with_token("other")).await;
    assert!(refs.contains("refs/heads/feature"), "{refs}");
    assert_eq!(server.authorizations(), ["nope", TOKEN, "other"]);

    let addr = addr_of(&url);
    drop(server);
    closed(addr).await;
}

fn http() -> reqwest::Client {
    // reqwest is built without a default TLS provider (Eagle picks ring).
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(WAIT)
        .build()
        .expect("an HTTP client")
}

/// The index serves its tarball byte for byte, counts each GET, answers
/// anything that would change it 405 (counted as an upload attempt), and
/// stops when dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_package_index_serves_counts_fetches_and_refuses_uploads() {
    let tar = tarball(&[
        ("demo/README", b"hello\n"),
        ("demo/bin/run", b"#!/bin/sh\n"),
    ]);
    let index = PackageIndex::start(&[("pkg/demo.tar", tar.clone())]).await;
    assert_eq!(index.url(), format!("http://127.0.0.1:{}", index.port()));
    let client = http();
    let url = format!("{}/pkg/demo.tar", index.url());

    let got = client.get(&url).send().await.expect("GET the tarball");
    assert_eq!(got.status().as_u16(), 200);
    let bytes = got.bytes().await.expect("the tarball's bytes");
    assert_eq!(bytes.as_ref(), tar.as_slice());
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("demo.tar"), &bytes).unwrap();
    let listing = std::process::Command::new("tar")
        .args(["-tf", "demo.tar"])
        .current_dir(dir.path())
        .output()
        .expect("tar");
    assert_eq!(
        String::from_utf8_lossy(&listing.stdout),
        "demo/README\ndemo/bin/run\n"
    );
    assert_eq!(index.fetches("pkg/demo.tar"), 1);
    assert_eq!(index.fetches("/pkg/demo.tar"), 1);

    let head = client.head(&url).send().await.expect("HEAD");
    assert_eq!(head.status().as_u16(), 200);
    let missing = client
        .get(format!("{}/pkg/missing.tar", index.url()))
        .send()
        .await
        .expect("GET a missing package");
    assert_eq!(missing.status().as_u16(), 404);

    let put = client.put(&url).body("evil").send().await.expect("PUT");
    assert_eq!(put.status().as_u16(), 405);
    let post = client
        .post(format!("{}/upload", index.url()))
        .body("evil")
        .send()
        .await
        .expect("POST");
    assert_eq!(post.status().as_u16(), 405);
    assert_eq!(index.uploads(), 2);
    assert_eq!(index.fetches("pkg/demo.tar"), 1);
    assert_eq!(index.fetches("pkg/missing.tar"), 1);

    let addr = addr_of(&index.url());
    drop(client);
    drop(index);
    closed(addr).await;
}
