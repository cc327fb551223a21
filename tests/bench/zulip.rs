//! `!status` over loopback: `cargo bench --bench zulip`.
//!
//! Starts the fake Zulip server (rate limits off, schema checking off) and
//! the real `eagle run`, then sends 1,000 `!status` commands one after the
//! other and prints the round trip (posted → reply stored) at p50 and p99,
//! the time Eagle itself takes (posted → its reply request arrives, which
//! includes two loopback HTTP hops), and the RSS of `eagle run` when idle.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fake_zulip::{FakeConfig, FakeZulip};

const COMMANDS: usize = 1_000;
const WARM_UP: usize = 20;

fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1e3
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run());
}

async fn run() {
    let fake = FakeZulip::start(FakeConfig {
        validate_responses: false,
        ..FakeConfig::default()
    })
    .await;
    let eagle = fake.add_user("eagle-bot@example.com", "Eagle", true);
    let alex = fake.add_user("alex@example.com", "Alex", false);
    fake.add_channel("general", true);
    fake.add_channel("executor", true);
    for user in [eagle, alex] {
        fake.subscribe(user, "general");
        fake.subscribe(user, "executor");
    }
    let home = tempfile::tempdir().unwrap();
    let profiles = home.path().join("profiles");
    std::fs::create_dir_all(&profiles).unwrap();
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiles");
    for name in ["eagle.toml", "eagle.soul.md"] {
        std::fs::copy(repo.join(name), profiles.join(name)).unwrap();
    }
    std::fs::write(
        profiles.join("eagle.zuliprc"),
        format!(
            "[api]\nemail=eagle-bot@example.com\nkey={}\nsite={}\n",
            fake.api_key(eagle),
            fake.url()
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_eagle"))
        .args(["run", "--profile", "eagle"])
        .env_clear()
        .env("HOME", home.path())
        .env("EAGLE_PROFILES_DIR", &profiles)
        .env("EAGLE_DATA_DIR", home.path().join("data"))
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn eagle");
    let listening = fake
        .wait_until(Duration::from_secs(30), |f| {
            f.queues().iter().any(|q| q.user_id == eagle && q.parked)
        })
        .await;
    assert!(listening, "eagle did not start");
    let rss_start = rss_mib(child.id());

    let mut round_trips = Vec::with_capacity(COMMANDS);
    let mut in_bot = Vec::with_capacity(COMMANDS);
    for i in 0..WARM_UP + COMMANDS {
        let replies_before = fake.messages_from(eagle).len();
        let started = Instant::now();
        fake.post(alex, "general", "bench", "!status");
        let answered = fake
            .wait_until(Duration::from_secs(10), move |f| {
                f.messages_from(eagle).len() > replies_before
            })
            .await;
        let round_trip = started.elapsed();
        assert!(answered, "command {i} was not answered");
        if i >= WARM_UP {
            round_trips.push(round_trip);
            let reply_sent = fake
                .requests()
                .iter()
                .rev()
                .find(|r| r.method == "POST" && r.path == "/api/v1/messages" && r.at >= started)
                .map(|r| r.at.duration_since(started));
            if let Some(at) = reply_sent {
                in_bot.push(at);
            }
        }
    }
    // Let the last reactions go out, then measure the idle process.
    let settled = fake
        .wait_until(Duration::from_secs(30), |f| {
            f.requests()
                .iter()
                .filter(|r| r.method == "POST" && r.path.ends_with("/reactions"))
                .count()
                >= WARM_UP + COMMANDS
        })
        .await;
    assert!(settled, "reactions still pending");
    let rss_idle = rss_mib(child.id());
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let status = child.wait().unwrap();

    round_trips.sort();
    in_bot.sort();
    let mean = round_trips.iter().sum::<Duration>().as_secs_f64() * 1e3 / round_trips.len() as f64;
    println!(
        "!status round trip over loopback, {COMMANDS} commands: p50 {:.2} ms, p99 {:.2} ms, mean {mean:.2} ms",
        percentile(&round_trips, 0.5),
        percentile(&round_trips, 0.99),
    );
    println!(
        "time in Eagle (event out → reply request in): p50 {:.2} ms, p99 {:.2} ms",
        percentile(&in_bot, 0.5),
        percentile(&in_bot, 0.99),
    );
    println!(
        "eagle run RSS: {rss_start:.1} MiB after start, {rss_idle:.1} MiB idle after the run; exit {status}"
    );
}
