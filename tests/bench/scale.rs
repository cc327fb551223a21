//! Many executors on one PostgreSQL: `cargo bench --bench scale` (all sizes)
//! or `cargo bench --bench scale -- 8` (one size, N = 8).
//!
//! One Eagle (`eagle run --profile eagle`, the decider) and N executors
//! (`eagle run --profile executor`, each its own instance) share one fresh
//! PostgreSQL database (`eagle_scale_<random>`, dropped after) and one global
//! `runner.max_workers`, against the fake Zulip. RUNS tasks are approved
//! straight in the store, all in one transaction; each worker (a bash script)
//! makes K `eagle request run_tests` calls (approved silently by the default
//! policy), writing to a journal when it starts, each request's send and
//! answer, and when it ends, then reports `[DONE: pr_ready]`. The journal
//! gives the decision latency (as a worker sees it: it includes starting the
//! `eagle request` process), the most workers alive at once and whether two
//! workers ever worked on one run at once; the bench samples `worker_slots`
//! and `pg_stat_activity` every 20 ms. Set `SCALE_RUNS`, `SCALE_REQUESTS`,
//! `SCALE_MAX_WORKERS` to change the load, `TEST_POSTGRES_URL` the server.
//!
//! Measured 2026-12-03 with the release build (`cargo bench --bench scale`
//! built it; then `SCALE_RUNS=100 SCALE_REQUESTS=3 target/release/deps/scale-* 2 8 32`),
//! two cores, nothing else running; PostgreSQL 15, `max_connections` = 100,
//! `max_workers` = 16. "pool each" is each executor's `[store]
//! max_connections` (Eagle keeps 8); "connections" the most seen in
//! `pg_stat_activity` for the database (the bench's own included); the
//! latency is a worker's, with the start of its `eagle request` process:
//!
//! | executors | pool each | runs | claims/s | decisions/s | latency p50 | latency p99 | most workers at once (journal / slots) | double runs | limit exceeded | PostgreSQL connections (most) | errors logged |
//! |---|---|---|---|---|---|---|---|---|---|---|---|
//! | 2 | 8 | 100/100 | 14.5 | 43.4 | 270.7 ms | 408.8 ms | 16 / 16 (limit 16) | 0 | no | 25 | 0 |
//! | 8 | 8 | 100/100 | 7.2 | 21.5 | 579.6 ms | 1026.8 ms | 16 / 16 (limit 16) | 0 | no | 73 | 0 |
//! | 32 | 2 | 100/100 | 3.9 | 11.7 | 807.1 ms | 2156.8 ms | 16 / 16 (limit 16) | 0 | no | 73 | 0 |
//!
//! One decider decides every request in turn (about 23 ms each on
//! PostgreSQL with 16 workers asking at once), so decisions per second are
//! its rate, not the executors'; and every change wakes every executor (one
//! `NOTIFY` reaches all N listeners, each of which sweeps), so on two cores
//! the rate falls as N grows: that fan-out, not the claims, is what slows
//! first (the claims never collide: no double run, the limit held).
//!
//! What broke first at N = 32 with every process at the default pool of 8
//! (up to 33 × 9 = 297 connections): the server's 100 connections. The
//! executors' loops failed with "pool timed out while waiting for an open
//! connection" and the bench itself could not connect; hence `[store]
//! max_connections`, which the bench sets to what fits (the server's
//! connections less 12 for others and Eagle's 9, shared, at least 2;
//! `SCALE_EXECUTOR_POOL` overrides it). A pool of 1 starved a process's own
//! loops even at N = 2, so 2 is the least a profile may say.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use eagle::profile::DatabaseUrl;
use eagle::store::{NewTask, Store};
use fake_zulip::{FakeConfig, FakeZulip};
use sqlx::Connection;

/// The worker: journals its start, K requests and its end, then is done.
const WORKER_SCRIPT: &str = r#"#!/bin/bash
# $1 run, $2 attempt, $3 journal, $4 requests. The prompt is on stdin.
set -u
run=$1 attempt=$2 journal=$3 k=$4
cat >/dev/null
echo "start $run $attempt $$ $EPOCHREALTIME" >>"$journal"
for ((i = 0; i < k; i++)); do
    t0=$EPOCHREALTIME
    eagle request run_tests "Scheme: bench $i" >/dev/null 2>&1
    rc=$?
    echo "ask $run $attempt $$ $t0 $EPOCHREALTIME $rc" >>"$journal"
done
echo "end $run $attempt $$ $EPOCHREALTIME" >>"$journal"
echo "[DONE: pr_ready] run:$run PR #$run opened"
"#;

/// Connections left to others (the bench's own, psql, other tests).
const RESERVED: usize = 12;
/// Eagle's pool: the default `store.max_connections`.
const EAGLE_POOL: usize = eagle::profile::DEFAULT_MAX_CONNECTIONS as usize;

/// The user the workers run as (Eagle refuses root workers); created if missing.
const WORKER_USER: &str = "eagle-test-worker";

struct Settings {
    runs: usize,
    requests: usize,
    max_workers: usize,
    server: String,
    /// `SCALE_EXECUTOR_POOL`: each executor's `store.max_connections`; unset,
    /// what fits: the server's connections, less RESERVED and Eagle's, shared.
    executor_pool: Option<usize>,
    /// The server's `max_connections`.
    server_connections: usize,
    /// `SCALE_ENV="A=1 B=2"`: more variables for every process (profile overrides).
    extra_env: Vec<(String, String)>,
}

fn setting(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(text) => text
            .parse()
            .unwrap_or_else(|_| panic!("{name}={text:?} is not a number")),
        Err(_) => default,
    }
}

fn main() {
    // `cargo bench` passes `--bench`; numbers are sizes.
    let mut sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .map(|a| a.parse().unwrap_or_else(|_| panic!("{a:?} is not a size")))
        .collect();
    if sizes.is_empty() {
        sizes = vec![2, 8, 32];
    }
    let mut settings = Settings {
        runs: setting("SCALE_RUNS", 200),
        requests: setting("SCALE_REQUESTS", 5),
        max_workers: setting("SCALE_MAX_WORKERS", 16),
        server: std::env::var("TEST_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into()),
        executor_pool: std::env::var("SCALE_EXECUTOR_POOL")
            .ok()
            .map(|_| setting("SCALE_EXECUTOR_POOL", 0)),
        server_connections: 0,
        extra_env: std::env::var("SCALE_ENV")
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    };
    worker_user();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let rows = runtime.block_on(async {
        let mut server = sqlx::PgConnection::connect(&settings.server)
            .await
            .expect("the PostgreSQL server");
        let max: String = sqlx::query_scalar("SHOW max_connections")
            .fetch_one(&mut server)
            .await
            .unwrap();
        let _ = server.close().await;
        settings.server_connections = max.parse().unwrap_or(100);
        println!(
            "PostgreSQL max_connections = {max}; {} runs of {} requests each, max_workers = {}",
            settings.runs, settings.requests, settings.max_workers
        );
        let mut rows = Vec::new();
        for n in sizes {
            rows.push(one_size(&settings, n).await);
        }
        rows
    });
    println!();
    println!(
        "| executors | pool each | runs | claims/s | decisions/s | latency p50 | latency p99 | most workers at once (journal / slots) | double runs | limit exceeded | PostgreSQL connections (most) | errors logged |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for row in rows {
        println!("{row}");
    }
}

/// Creates the worker user once, as the integration tests do.
fn worker_user() {
    let exists = || {
        Command::new("id")
            .arg(WORKER_USER)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if exists() || eagle::ground::host::euid() != 0 {
        return;
    }
    let out = Command::new("useradd")
        .args([
            "--system",
            "--no-create-home",
            "--shell",
            "/usr/sbin/nologin",
            WORKER_USER,
        ])
        .output()
        .expect("useradd");
    assert!(
        out.status.success() || exists(),
        "useradd {WORKER_USER}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What one size measured.
struct Row {
    executors: usize,
    pool: usize,
    runs_done: i64,
    runs: usize,
    claims_per_s: f64,
    decisions_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    journal_most: usize,
    slots_most: i64,
    double_runs: usize,
    max_workers: usize,
    most_connections: i64,
    errors: usize,
}

impl std::fmt::Display for Row {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let exceeded =
            self.journal_most > self.max_workers || self.slots_most > self.max_workers as i64;
        write!(
            f,
            "| {} | {} | {}/{} | {:.1} | {:.1} | {:.1} ms | {:.1} ms | {} / {} (limit {}) | {} | {} | {} | {} |",
            self.executors,
            self.pool,
            self.runs_done,
            self.runs,
            self.claims_per_s,
            self.decisions_per_s,
            self.p50_ms,
            self.p99_ms,
            self.journal_most,
            self.slots_most,
            self.max_workers,
            self.double_runs,
            if exceeded { "**yes**" } else { "no" },
            self.most_connections,
            self.errors,
        )
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Where a file is reachable by the worker user: 0755 directories up to it.
fn open_dir(path: &Path) {
    eagle::ground::host::chmod(path, 0o755).unwrap();
}

async fn one_size(settings: &Settings, executors: usize) -> Row {
    let fake = FakeZulip::start(FakeConfig {
        validate_responses: false,
        ..FakeConfig::default()
    })
    .await;
    let eagle_bot = fake.add_user("eagle-bot@example.com", "Eagle", true);
    let executor_bot = fake.add_user("executor-bot@example.com", "Исполнитель", true);
    fake.add_channel("executor", true);
    for user in [eagle_bot, executor_bot] {
        fake.subscribe(user, "executor");
    }
    let home = tempfile::tempdir().unwrap();
    let profiles = home.path().join("profiles");
    std::fs::create_dir_all(&profiles).unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiles");
    for entry in std::fs::read_dir(&repo).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, profiles.join(path.file_name().unwrap())).unwrap();
    }
    // Each executor's share of the server's connections (`[store]`).
    let pool = settings.executor_pool.unwrap_or_else(|| {
        let spare = settings
            .server_connections
            .saturating_sub(RESERVED + EAGLE_POOL + 1);
        (spare / executors).saturating_sub(1).clamp(2, 8)
    });
    let mut executor_toml = std::fs::read_to_string(profiles.join("executor.toml")).unwrap();
    executor_toml.push_str(&format!("\n[store]\nmax_connections = {pool}\n"));
    std::fs::write(profiles.join("executor.toml"), executor_toml).unwrap();
    for (name, user, email) in [
        ("eagle", eagle_bot, "eagle-bot@example.com"),
        ("executor", executor_bot, "executor-bot@example.com"),
    ] {
        std::fs::write(
            profiles.join(format!("{name}.zuliprc")),
            format!(
                "[api]\nemail={email}\nkey={}\nsite={}\n",
                fake.api_key(user),
                fake.url()
            ),
        )
        .unwrap();
    }
    // What the worker user reaches: the binary, the script, the journal.
    let shared = home.path().join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    open_dir(home.path());
    open_dir(&shared);
    let bin = shared.join("eagle");
    std::fs::copy(env!("CARGO_BIN_EXE_eagle"), &bin).unwrap();
    eagle::ground::host::chmod(&bin, 0o755).unwrap();
    let script = shared.join("worker.sh");
    std::fs::write(&script, WORKER_SCRIPT).unwrap();
    eagle::ground::host::chmod(&script, 0o755).unwrap();
    let journal = shared.join("journal");
    std::fs::write(&journal, "").unwrap();
    eagle::ground::host::chmod(&journal, 0o666).unwrap();
    let worker_command = format!(
        "/bin/bash {} {{run}} {{attempt}} {} {} {{prompt}}",
        script.display(),
        journal.display(),
        settings.requests
    );

    // A fresh database on the server, dropped after (also on a panic).
    let database = Database::create(&settings.server).await;
    let url = database.url.clone();

    // The processes' logs outlive the bench, for what went wrong.
    let logs = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("scale-logs/{executors}"));
    let _ = std::fs::remove_dir_all(&logs);
    std::fs::create_dir_all(&logs).unwrap();
    let spawn = |profile: &str, index: usize| -> Child {
        let stderr = std::fs::File::create(logs.join(format!("{profile}-{index}.log"))).unwrap();
        Command::new(&bin)
            .args(["run", "--profile", profile])
            .env_clear()
            .env("HOME", home.path())
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("EAGLE_PROFILES_DIR", &profiles)
            .env("EAGLE_DATA_DIR", home.path().join("data"))
            .env("EAGLE_DATABASE_URL", &url)
            .env("EAGLE_RUNNER__WORKER_COMMAND", &worker_command)
            .env("EAGLE_RUNNER__WORKER_USER", WORKER_USER)
            .env("EAGLE_RUNNER__SANDBOX__MODE", "off")
            .env(
                "EAGLE_RUNNER__MAX_WORKERS",
                settings.max_workers.to_string(),
            )
            .env("EAGLE_RUNNER__MAX_REQUESTS", "100000")
            .envs(settings.extra_env.iter().cloned())
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("spawn eagle")
    };
    // Eagle first: it migrates the fresh database; the executors find it done.
    let mut fleet = Fleet(vec![spawn("eagle", 0)]);
    let up = fake
        .wait_until(Duration::from_secs(120), |f| {
            f.queues().iter().any(|q| q.user_id == eagle_bot)
        })
        .await;
    assert!(up, "eagle did not start (see {})", logs.display());
    for index in 1..=executors {
        fleet.0.push(spawn("executor", index));
    }
    let up = fake
        .wait_until(Duration::from_secs(300), |f| {
            f.queues()
                .iter()
                .filter(|q| q.user_id == executor_bot)
                .count()
                >= executors
        })
        .await;
    if !up {
        for (i, child) in fleet.0.iter_mut().enumerate() {
            if let Ok(Some(status)) = child.try_wait() {
                eprintln!("process {i} ended: {status}");
            }
        }
        panic!(
            "the executors did not all start: {} of {executors} listening (see {})",
            fake.queues()
                .iter()
                .filter(|q| q.user_id == executor_bot)
                .count(),
            logs.display()
        );
    }

    // Every task at once, approved, in one transaction.
    let store = Store::open(&DatabaseUrl::new(url.clone())).await.unwrap();
    {
        let mut tx = store.begin_write().await.unwrap();
        for i in 0..settings.runs {
            let id = tx
                .tasks()
                .insert_task(&NewTask {
                    task_gid: format!("bench:{executors}:{i}"),
                    source: "chat".into(),
                    title: format!("bench {i}"),
                    ..NewTask::default()
                })
                .await
                .unwrap()
                .unwrap();
            tx.transitions()
                .start_run(id, "bench", "!go")
                .await
                .unwrap();
        }
        tx.commit().await.unwrap();
    }
    store.close().await;
    let started = Instant::now();

    // Sample until every run is in `pr` or held (or the deadline).
    let mut watch = sqlx::PgConnection::connect(&url).await.unwrap();
    let deadline = started + Duration::from_secs(900);
    let mut slots_most = 0i64;
    let mut most_connections = 0i64;
    let (runs_done, elapsed) = loop {
        let (busy, top_slot, done, stuck, connections): (i64, Option<i64>, i64, i64, i64) =
            sqlx::query_as(
                "SELECT (SELECT COUNT(*) FROM worker_slots WHERE run_id IS NOT NULL), \
                        (SELECT MAX(slot) FROM worker_slots WHERE run_id IS NOT NULL), \
                        (SELECT COUNT(*) FROM executor_runs WHERE state = 'pr'), \
                        (SELECT COUNT(*) FROM executor_runs WHERE state <> 'pr' AND held), \
                        (SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database())",
            )
            .fetch_one(&mut watch)
            .await
            .unwrap();
        slots_most = slots_most.max(busy).max(top_slot.unwrap_or(0));
        most_connections = most_connections.max(connections);
        if done + stuck >= settings.runs as i64 {
            break (done, started.elapsed());
        }
        if Instant::now() > deadline {
            eprintln!("N={executors}: deadline passed with {done} runs done, {stuck} held");
            break (done, started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let (claims, decisions): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT COALESCE(SUM(attempt), 0)::BIGINT FROM executor_runs), \
                (SELECT COUNT(*) FROM worker_requests WHERE status = 'approved')",
    )
    .fetch_one(&mut watch)
    .await
    .unwrap();
    let _ = watch.close().await;

    drop(fleet);
    drop(database);
    let errors = logged_errors(&logs);

    let journal = read_journal(&journal);
    let seconds = elapsed.as_secs_f64();
    let row = Row {
        executors,
        pool,
        runs_done,
        runs: settings.runs,
        claims_per_s: claims as f64 / seconds,
        decisions_per_s: decisions as f64 / seconds,
        p50_ms: percentile(&journal.latencies_ms, 0.5),
        p99_ms: percentile(&journal.latencies_ms, 0.99),
        journal_most: journal.most_at_once,
        slots_most,
        double_runs: journal.double_runs,
        max_workers: settings.max_workers,
        most_connections,
        errors,
    };
    println!(
        "N={executors}: {runs_done}/{} runs in {seconds:.1} s, {claims} claims, {decisions} decisions, \
         {} requests journalled ({} failed), {} workers",
        settings.runs,
        journal.latencies_ms.len(),
        journal.failed_asks,
        journal.workers,
    );
    row
}

/// The processes of one size: ended (SIGTERM, then SIGKILL) however the bench ends.
struct Fleet(Vec<Child>);

impl Drop for Fleet {
    fn drop(&mut self) {
        for child in &self.0 {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        for child in &mut self.0 {
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A throwaway database on the server, dropped (forcibly) however the bench ends.
struct Database {
    server: String,
    name: String,
    url: String,
}

impl Database {
    async fn create(server: &str) -> Database {
        let name = format!("eagle_scale_{:08x}", fastrand::u32(..));
        let mut conn = sqlx::PgConnection::connect(server).await.unwrap();
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut conn)
            .await
            .unwrap();
        let _ = conn.close().await;
        let mut url = url::Url::parse(server).expect("TEST_POSTGRES_URL is a URL");
        url.set_path(&format!("/{name}"));
        Database {
            server: server.to_string(),
            name,
            url: url.to_string(),
        }
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        let (server, name) = (self.server.clone(), self.name.clone());
        // Its own runtime on its own thread: drop may run inside the bench's.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let mut conn = sqlx::PgConnection::connect(&server).await?;
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
                )))
                .execute(&mut conn)
                .await?;
                conn.close().await
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("could not drop the database {}: drop it by hand", self.name);
        }
    }
}

/// What the workers wrote.
struct Journal {
    latencies_ms: Vec<f64>,
    failed_asks: usize,
    workers: usize,
    most_at_once: usize,
    double_runs: usize,
}

fn read_journal(path: &PathBuf) -> Journal {
    let text = std::fs::read_to_string(path).unwrap();
    let mut latencies_ms = Vec::new();
    let mut failed_asks = 0;
    // (run, attempt, pid) → (start, end)
    let mut spans: BTreeMap<(u64, u64, u64), (f64, Option<f64>)> = BTreeMap::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| words.get(i).and_then(|w| w.parse::<f64>().ok());
        let key = || {
            (
                num(1).unwrap_or(0.0) as u64,
                num(2).unwrap_or(0.0) as u64,
                num(3).unwrap_or(0.0) as u64,
            )
        };
        match words.first() {
            Some(&"start") => {
                spans.insert(key(), (num(4).unwrap_or(0.0), None));
            }
            Some(&"end") => {
                if let Some(span) = spans.get_mut(&key()) {
                    span.1 = num(4);
                }
            }
            Some(&"ask") => match (num(4), num(5), words.get(6)) {
                (Some(sent), Some(answered), Some(&"0")) => {
                    latencies_ms.push((answered - sent) * 1e3)
                }
                _ => failed_asks += 1,
            },
            _ => {}
        }
    }
    latencies_ms.sort_by(f64::total_cmp);
    // A worker that never journalled its end counts as running to the last moment.
    let last = spans.values().filter_map(|s| s.1).fold(0.0f64, f64::max);
    let mut events: Vec<(f64, i32)> = Vec::new();
    let mut per_run: BTreeMap<u64, Vec<(f64, f64)>> = BTreeMap::new();
    for (&(run, _, _), &(start, end)) in &spans {
        let end = end.unwrap_or(last);
        events.push((start, 1));
        events.push((end, -1));
        per_run.entry(run).or_default().push((start, end));
    }
    // Ends before starts at the same instant.
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut now, mut most_at_once) = (0i32, 0i32);
    for (_, delta) in events {
        now += delta;
        most_at_once = most_at_once.max(now);
    }
    let mut double_runs = 0;
    for spans in per_run.values_mut() {
        spans.sort_by(|a, b| a.0.total_cmp(&b.0));
        if spans.windows(2).any(|w| w[1].0 < w[0].1) {
            double_runs += 1;
        }
    }
    Journal {
        latencies_ms,
        failed_asks,
        workers: spans.len(),
        most_at_once: most_at_once.max(0) as usize,
        double_runs,
    }
}

/// Counts the ERROR lines the processes logged, and shows the first kinds.
fn logged_errors(logs: &Path) -> usize {
    let mut count = 0;
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for entry in std::fs::read_dir(logs).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap_or_default();
        for line in text
            .lines()
            .filter(|l| l.contains("ERROR") || l.contains("WARN"))
        {
            if line.contains("ERROR") {
                count += 1;
            }
            // The message without the timestamp.
            let kind: String = line
                .split_once(' ')
                .map_or(line, |(_, rest)| rest)
                .chars()
                .take(160)
                .collect();
            *kinds.entry(kind).or_default() += 1;
        }
    }
    for (kind, n) in kinds.iter().take(12) {
        eprintln!("  logged {n}×: {kind}");
    }
    count
}
