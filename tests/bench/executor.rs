//! A worker's request to its decision: `cargo bench --bench executor`.
//!
//! A worker asks `run_tests` (approved silently by the default policy) and
//! waits for the answer: the request goes over the run's socket to the
//! runner, into the database, to Eagle's decider and its plugins, and back.
//! Measured 1,000 times in a row, as p50 and p99, in three set-ups:
//!
//! * one process: the store, the decider and the runner of `eagle shell`,
//!   in this process, on SQLite;
//! * two processes (`eagle run --profile eagle` and `--profile executor`,
//!   against the fake Zulip) on SQLite, and on PostgreSQL.
//!
//! The worker is a shell that publishes its socket and token and sleeps;
//! the bench asks through the same client code as `eagle request`, so the
//! figures leave out only the start of an `eagle request` process, which is
//! measured separately (100 runs of the real command).

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use eagle::ground::wire::{Ask, ENV_SOCKET, ENV_TOKEN, Status};
use eagle::profile::DatabaseUrl;
use eagle::store::{NewTask, Store};
use fake_zulip::{FakeConfig, FakeZulip};

const REQUESTS: usize = 1_000;
const WARM_UP: usize = 20;
/// The worker: says where it can be reached, then waits.
const WORKER: &str =
    "sh -c 'echo ready $EAGLE_RUN_SOCKET $EAGLE_RUN_TOKEN; exec sleep 600' {prompt}";

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1e3
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        one_process().await;
        two_processes("SQLite", None).await;
        let pg = std::env::var("TEST_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
        two_processes("PostgreSQL", Some(pg)).await;
    });
}

/// Queues a task and approves it (`!go`), straight in the store.
async fn go(store: &Store) {
    let mut tx = store.begin_write().await.unwrap();
    let id = tx
        .tasks()
        .insert_task(&NewTask {
            task_gid: format!("bench:{}", fastrand::u32(..)),
            source: "chat".into(),
            title: "bench".into(),
            ..NewTask::default()
        })
        .await
        .unwrap()
        .unwrap();
    tx.transitions()
        .start_run(id, "bench", "!go")
        .await
        .unwrap();
    tx.commit().await.unwrap();
}

/// Waits for the worker to publish its socket and token in its work log.
async fn worker_env(store: &Store) -> BTreeMap<String, String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let run = {
            let mut tx = store.begin_read().await.unwrap();
            tx.tasks().open_runs(0, 1).await.unwrap().pop()
        };
        if let Some(path) = run.and_then(|r| r.log_path) {
            let log = std::fs::read_to_string(path).unwrap_or_default();
            if let Some(line) = log.lines().find(|l| l.starts_with("ready ")) {
                let mut words = line.split_whitespace().skip(1);
                let mut env = BTreeMap::new();
                env.insert(ENV_SOCKET.to_string(), words.next().unwrap().to_string());
                env.insert(ENV_TOKEN.to_string(), words.next().unwrap().to_string());
                return env;
            }
        }
        assert!(Instant::now() < deadline, "the worker did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Asks `run_tests` REQUESTS times and prints the latencies.
async fn measure(label: &str, env: BTreeMap<String, String>) {
    let latencies = tokio::task::spawn_blocking(move || {
        let mut latencies = Vec::with_capacity(REQUESTS);
        for i in 0..WARM_UP + REQUESTS {
            let started = Instant::now();
            let answer = eagle::worker::ask(
                &env,
                |token| Ask::Request {
                    token,
                    key: format!("bench-{i}"),
                    action: "run_tests".into(),
                    body: "Scheme: bench".into(),
                    escalate: false,
                },
                None,
            )
            .expect("an answer");
            assert_eq!(answer.status, Status::Approved, "{answer:?}");
            if i >= WARM_UP {
                latencies.push(started.elapsed());
            }
        }
        latencies
    })
    .await
    .unwrap();
    let mut sorted = latencies;
    sorted.sort();
    let mean = sorted.iter().sum::<Duration>().as_secs_f64() * 1e3 / sorted.len() as f64;
    println!(
        "{label}: {REQUESTS} auto-approved requests, worker → decision: p50 {:.2} ms, p99 {:.2} ms, mean {mean:.2} ms",
        percentile(&sorted, 0.5),
        percentile(&sorted, 0.99),
    );
}

async fn one_process() {
    let home = tempfile::tempdir().unwrap();
    let profiles = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiles");
    let mut env = BTreeMap::new();
    env.insert("HOME".to_string(), home.path().display().to_string());
    env.insert(
        "EAGLE_DATA_DIR".to_string(),
        home.path().join("data").display().to_string(),
    );
    env.insert(
        "EAGLE_RUNNER__WORKER_COMMAND".to_string(),
        WORKER.to_string(),
    );
    env.insert(
        "EAGLE_RUNNER__MAX_REQUESTS".to_string(),
        "100000".to_string(),
    );
    // The bench asks from outside the worker, at the socket's real path
    // (the sandbox's cost is `cargo bench --bench sandbox`'s).
    env.insert("EAGLE_RUNNER__SANDBOX__MODE".to_string(), "off".to_string());
    if let Some(user) = worker_user(home.path()) {
        env.insert("EAGLE_RUNNER__WORKER_USER".to_string(), user.to_string());
    }
    env.insert(
        "PATH".to_string(),
        std::env::var("PATH").unwrap_or_default(),
    );
    let eagle = eagle::profile::Profile::load(&profiles, "eagle", &env).unwrap();
    let executor = eagle::profile::Profile::load(&profiles, "executor", &env).unwrap();
    let store = Store::open(&eagle.database_url).await.unwrap();
    // Both identities in one process, as `eagle shell` runs them.
    let setup = eagle::daemon::Setup {
        store: store.clone(),
        exe: eagle_bin(),
        eagle: Some(eagle),
        executor: Some(executor),
        demo_worker: false,
    };
    let ctx = eagle::daemon::Context::build(setup, &mut eagle::transport::offline::Offline)
        .await
        .unwrap();
    let mut daemon = match eagle::daemon::Daemon::start(ctx) {
        Ok(daemon) => daemon,
        Err(error) => panic!("{error:#}"),
    };
    go(&store).await;
    let worker = worker_env(&store).await;
    measure("one process (eagle shell), SQLite", worker.clone()).await;
    process_start(&worker);
    hook_calls(&worker);
    daemon.drain().await;
    kill_workers(&store).await;
}

/// The real `eagle request` process, 100 times: what a worker's shell pays.
fn process_start(env: &BTreeMap<String, String>) {
    let eagle = eagle_bin();
    let mut times = Vec::new();
    for _ in 0..100 {
        let started = Instant::now();
        let status = Command::new(&eagle)
            .args(["request", "run_tests", "Scheme: bench"])
            .env_clear()
            .envs(env)
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
        times.push(started.elapsed());
    }
    times.sort();
    println!(
        "  the same through a real `eagle request` process (100 runs): p50 {:.2} ms, p99 {:.2} ms",
        percentile(&times, 0.5),
        percentile(&times, 0.99)
    );
}

/// The real `eagle hook claude-pretool`, 100 times, on a tool call that
/// needs no request (a `Read`): what every tool call of a worker pays.
fn hook_calls(env: &BTreeMap<String, String>) {
    use std::io::Write as _;
    let eagle = eagle_bin();
    let input = serde_json::json!({
        "session_id": "bench",
        "hook_event_name": "PreToolUse",
        "tool_name": "Read",
        "tool_input": {"file_path": "README.md"},
        "tool_use_id": "toolu_bench",
    })
    .to_string();
    let mut times = Vec::new();
    for _ in 0..100 {
        let started = Instant::now();
        let mut child = Command::new(&eagle)
            .args(["hook", "claude-pretool"])
            .env_clear()
            .envs(env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        times.push(started.elapsed());
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("\"allow\""), "{text}");
    }
    times.sort();
    println!(
        "  a tool call through a real `eagle hook claude-pretool` (100 runs, a Read: no request): p50 {:.2} ms, p99 {:.2} ms",
        percentile(&times, 0.5),
        percentile(&times, 0.99)
    );
}

/// `/healthz`, `/readyz` (1,000 each) and `/metrics` (100) of Eagle's
/// listener, over one kept-alive connection.
async fn endpoints(port: u16) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    for (path, n) in [("healthz", 1_000), ("readyz", 1_000), ("metrics", 100)] {
        let url = format!("http://127.0.0.1:{port}/{path}");
        let mut times = Vec::with_capacity(n);
        let mut bytes = 0;
        for _ in 0..n {
            let started = Instant::now();
            let response = client.get(&url).send().await.expect("an answer");
            assert!(
                response.status().is_success(),
                "{path}: {}",
                response.status()
            );
            bytes = response.bytes().await.unwrap().len();
            times.push(started.elapsed());
        }
        times.sort();
        println!(
            "  /{path} ({n} requests, {bytes} bytes): p50 {:.3} ms, p99 {:.3} ms",
            percentile(&times, 0.5),
            percentile(&times, 0.99)
        );
    }
}

/// Resident memory of a process now and at its peak, in MiB.
fn rss(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (kib("VmRSS:") / 1024.0, kib("VmHWM:") / 1024.0)
}

/// The workers this bench started (the runner leaves them to a next runner).
async fn kill_workers(store: &Store) {
    let mut tx = store.begin_read().await.unwrap();
    for run in tx.tasks().open_runs(0, 100).await.unwrap() {
        if let Some(pgid) = run.worker_pgid {
            let _ = eagle::ground::host::signal_group(pgid as i32, 9);
        }
    }
}

/// As root, workers run as a user of their own (Eagle refuses root):
/// the integration tests' `eagle-test-worker`, created if missing, who
/// must pass through `home`.
fn worker_user(home: &std::path::Path) -> Option<&'static str> {
    const USER: &str = "eagle-test-worker";
    if eagle::ground::host::euid() != 0 {
        return None;
    }
    let exists = || {
        Command::new("id")
            .arg(USER)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !exists() {
        let _ = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                USER,
            ])
            .status();
        assert!(exists(), "cannot create the worker user {USER}");
    }
    eagle::ground::host::chmod(home, 0o711).unwrap();
    Some(USER)
}

fn eagle_bin() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_BIN_EXE_eagle"))
}

async fn two_processes(label: &str, postgres: Option<String>) {
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
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiles");
    for entry in std::fs::read_dir(&repo).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, profiles.join(path.file_name().unwrap())).unwrap();
    }
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
    // A throwaway schema on PostgreSQL.
    let schema = format!("eagle_bench_{:x}", fastrand::u32(..));
    let url = match &postgres {
        Some(base) => {
            use sqlx::Connection;
            let mut conn = sqlx::PgConnection::connect(base).await.unwrap();
            sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
                .execute(&mut conn)
                .await
                .unwrap();
            let sep = if base.contains('?') { '&' } else { '?' };
            format!("{base}{sep}options[search_path]={schema}")
        }
        None => format!(
            "sqlite://{}?mode=rwc",
            home.path().join("data/eagle.db").display()
        ),
    };
    let ops_port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let spawn = |profile: &str| {
        let listen = if profile == "eagle" {
            format!("127.0.0.1:{ops_port}")
        } else {
            String::new()
        };
        Command::new(eagle_bin())
            .args(["run", "--profile", profile])
            .env_clear()
            .env("EAGLE_OPS__LISTEN", listen)
            .env("HOME", home.path())
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("EAGLE_PROFILES_DIR", &profiles)
            .env("EAGLE_DATA_DIR", home.path().join("data"))
            .env("EAGLE_DATABASE_URL", &url)
            .env("EAGLE_RUNNER__WORKER_COMMAND", WORKER)
            .env("EAGLE_RUNNER__MAX_REQUESTS", "100000")
            .env("EAGLE_RUNNER__SANDBOX__MODE", "off")
            .env(
                "EAGLE_RUNNER__WORKER_USER",
                worker_user(home.path()).unwrap_or(""),
            )
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn eagle")
    };
    let mut eagle = spawn("eagle");
    let mut executor = spawn("executor");
    let listening = fake
        .wait_until(Duration::from_secs(60), |f| {
            let parked = |u| f.queues().iter().any(|q| q.user_id == u && q.parked);
            parked(eagle_bot) && parked(executor_bot)
        })
        .await;
    assert!(listening, "eagle did not start");
    let store = Store::open(&DatabaseUrl::new(url.clone())).await.unwrap();
    go(&store).await;
    let worker = worker_env(&store).await;
    measure(&format!("two processes (eagle run × 2), {label}"), worker).await;
    endpoints(ops_port).await;
    for (name, child) in [("eagle", &eagle), ("executor", &executor)] {
        let (now, peak) = rss(child.id());
        println!(
            "  RSS of `eagle run --profile {name}` after them: {now:.1} MiB (peak {peak:.1} MiB)"
        );
    }
    for child in [&mut eagle, &mut executor] {
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let _ = child.wait();
    }
    kill_workers(&store).await;
    store.close().await;
    if let Some(base) = &postgres {
        use sqlx::Connection;
        if let Ok(mut conn) = sqlx::PgConnection::connect(base).await {
            let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
                .execute(&mut conn)
                .await;
        }
    }
}
