//! What a run's start costs in its repository: `cargo bench --bench checkout`
//! (`-- --files 50000 --mb 500` are the defaults; smaller for a quick look).
//!
//! A generated repository (by `git fast-import`: `--files` files of 1 KiB
//! of random bytes in the first commit, then commits rewriting a fifth of
//! them until the history holds `--mb` MB) is started from three ways:
//!
//! * `git clone file://…`: what every run did before the cache (the whole
//!   history over git's pack protocol, then the checkout);
//! * Eagle, cold: its cache made and fetched for the first time, then the
//!   run's checkout from it (Eagle's own code: `repos::cache::refresh`,
//!   `repos::checkout::clone`);
//! * Eagle, warm: the cache fetched again (nothing new), then the checkout.
//!
//! Each is timed end to end; the warm start 5 times (p50 and the worst).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use eagle::executor::repos::cache::refresh;
use eagle::executor::repos::checkout::{Checkout, clone};
use eagle::executor::repos::git::GitAuth;
use eagle::profile::{GitCredential, RepoSettings, RepoUrl};

const WARM_STARTS: usize = 5;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A bare repository of `files` files and about `mb` MB of history.
fn generate(dir: &Path, files: usize, mb: usize) -> PathBuf {
    let bare = dir.join("big.git");
    let status = Command::new("git")
        .args(["init", "-q", "--bare", "-b", "main"])
        .arg(&bare)
        .status()
        .unwrap();
    assert!(status.success());
    let mut child = Command::new("git")
        .args(["fast-import", "--quiet"])
        .env("GIT_DIR", &bare)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = std::io::BufWriter::new(child.stdin.take().unwrap());
    let mut rng = fastrand::Rng::with_seed(7);
    let mut blob = vec![0u8; 1024];
    let mut written = 0usize;
    let mut commit = 0usize;
    let per_commit = (files / 5).max(1);
    while commit == 0 || written < mb << 20 {
        let changed: Vec<usize> = if commit == 0 {
            (0..files).collect()
        } else {
            (0..per_commit).map(|_| rng.usize(..files)).collect()
        };
        writeln!(input, "commit refs/heads/main").unwrap();
        writeln!(
            input,
            "committer Bench <bench@example.com> {} +0000",
            1_700_000_000 + commit
        )
        .unwrap();
        let message = format!("commit {commit}");
        writeln!(input, "data {}\n{message}", message.len()).unwrap();
        for file in changed {
            rng.fill(&mut blob);
            writeln!(input, "M 644 inline src/d{:03}/f{file}.bin", file % 500).unwrap();
            writeln!(input, "data {}", blob.len()).unwrap();
            input.write_all(&blob).unwrap();
            writeln!(input).unwrap();
            written += blob.len();
        }
        commit += 1;
    }
    drop(input);
    assert!(child.wait().unwrap().success());
    eprintln!(
        "generated {files} files, {commit} commits, {} MB of blobs",
        written >> 20
    );
    bare
}

/// Writes what earlier steps left dirty to disk first, so that a start is
/// timed as it would be on a host whose cache was fetched long before (not
/// behind the writeback of hundreds of MB just generated).
fn settle() {
    let status = Command::new("sync").status().unwrap();
    assert!(status.success());
}

fn seconds(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

/// Eagle's start of run `n`: the cache refreshed, the checkout made;
/// returns the whole and the refresh's part.
async fn eagle_start(
    repo: &RepoSettings,
    data: &Path,
    runs: &Path,
    n: usize,
) -> (Duration, Duration) {
    let base = runs.join(n.to_string());
    let (work, home, own) = (base.join("work"), base.join("home"), base.join("eagle"));
    for dir in [&work, &home, &own] {
        std::fs::create_dir_all(dir).unwrap();
    }
    settle();
    let started = Instant::now();
    let auth = GitAuth::of(repo, None, data).await.unwrap();
    let (cache, _) = refresh(data, repo, &auth, None).await.unwrap();
    let fetched = started.elapsed();
    clone(
        &Checkout {
            cache: &cache,
            origin: &repo.url.as_git(),
            branch: &format!("eagle/run-{n}"),
            base: &base,
            work: &work,
            home: &home,
            eagle: &own,
            path: "/usr/local/bin:/usr/bin:/bin",
        },
        None,
    )
    .await
    .unwrap();
    let took = started.elapsed();
    std::fs::remove_dir_all(&base).unwrap();
    (took, fetched)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let files = arg("--files", 50_000);
    let mb = arg("--mb", 500);
    let dir = tempfile::tempdir().unwrap();
    let made = Instant::now();
    let bare = generate(dir.path(), files, mb);
    let size = Command::new("du")
        .args(["-sm"])
        .arg(&bare)
        .output()
        .unwrap();
    eprintln!(
        "generated in {} ({} MB on disk)",
        seconds(made.elapsed()),
        String::from_utf8_lossy(&size.stdout)
            .split_whitespace()
            .next()
            .unwrap_or("?")
    );

    let target = dir.path().join("cloned");
    settle();
    let started = Instant::now();
    let status = Command::new("git")
        .args(["clone", "-q", "--no-local"])
        .arg(format!("file://{}", bare.display()))
        .arg(&target)
        .status()
        .unwrap();
    assert!(status.success());
    let clone_time = started.elapsed();
    std::fs::remove_dir_all(&target).unwrap();

    let repo = RepoSettings {
        name: "big".into(),
        url: RepoUrl::Local(bare.clone()),
        base: "main".into(),
        github: None,
        credential: GitCredential::None,
        setup: None,
        setup_allow_hosts: Vec::new(),
        setup_timeout: Duration::from_secs(60),
        cache: Vec::new(),
        cache_key: Vec::new(),
    };
    let data = dir.path().join("data");
    let runs = dir.path().join("runs");
    let cold = eagle_start(&repo, &data, &runs, 0).await;
    let mut warm: Vec<(Duration, Duration)> = Vec::new();
    for n in 1..=WARM_STARTS {
        warm.push(eagle_start(&repo, &data, &runs, n).await);
    }
    warm.sort();
    println!("checkout bench: {files} files, about {mb} MB of history");
    println!("  git clone file://…        {}", seconds(clone_time));
    println!(
        "  Eagle, cold (cache made)  {} (of which the fetch {})",
        seconds(cold.0),
        seconds(cold.1)
    );
    let (p50, fetch) = warm[WARM_STARTS / 2];
    println!(
        "  Eagle, warm (p50 of {WARM_STARTS})  {} (of which the fetch {}); worst {}",
        seconds(p50),
        seconds(fetch),
        seconds(warm[WARM_STARTS - 1].0)
    );
}
