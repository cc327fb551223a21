//! Eagle against the fake Zulip over loopback: `cargo bench --bench zulip`.
//!
//! Four figures, each against what any bot on the same fake could do:
//!
//! 1. **Reaction time**: 1,000 `!status` commands, one after the other,
//!    posted → reply stored, at p50 and p99, side by side with an echo-only
//!    floor client (reqwest, one long poll, one reply per message) answering
//!    the same way on the same fake, interleaved so both see the same machine.
//! 2. **A burst under a rate limit**: 30 commands at once under 20 requests
//!    per 10 s: the time until the last answer, the floor the limit imposes
//!    (the 21st request cannot go before the first leaves the window), and
//!    the 429s the server had to send (none is the goal).
//! 3. **Memory**: the RSS of `eagle run --profile eagle` with both default
//!    plugins after a first start with an empty data directory, and idle
//!    after the 1,000 commands.
//! 4. **Database work per command**: the statements sqlx
//!    ran per handled command, from its statement log.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fake_zulip::{FakeConfig, FakeZulip};

const COMMANDS: usize = 1_000;
const WARM_UP: usize = 20;
const BURST: usize = 30;
const COUNTED: usize = 100;

fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Where a process's resident memory is: the binary's own pages, the heap
/// (anonymous mappings) and the rest, in MiB, from `/proc/<pid>/smaps`.
fn memory_breakdown(pid: u32) -> String {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let (mut binary, mut anon, mut other) = (0u64, 0u64, 0u64);
    let mut name = String::new();
    let mut biggest: Vec<(u64, String)> = Vec::new();
    for line in smaps.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields
            .first()
            .is_some_and(|f| f.contains('-') && !f.ends_with(':'))
        {
            name = fields.get(5).copied().unwrap_or("[anon]").to_owned();
        } else if fields.first() == Some(&"Rss:") {
            let kb: u64 = fields.get(1).and_then(|v| v.parse().ok()).unwrap_or(0);
            if name.ends_with("/eagle") {
                binary += kb;
            } else if name == "[anon]" || name == "[heap]" {
                anon += kb;
                biggest.push((kb, name.clone()));
            } else {
                other += kb;
            }
        }
    }
    biggest.sort_unstable_by(|a, b| b.cmp(a));
    let top: Vec<String> = biggest
        .iter()
        .take(5)
        .map(|(kb, _)| format!("{:.1}", *kb as f64 / 1024.0))
        .collect();
    format!(
        "binary {:.1} MiB, heap and anonymous {:.1} MiB (largest mappings: {}), other {:.1} MiB",
        binary as f64 / 1024.0,
        anon as f64 / 1024.0,
        top.join(", "),
        other as f64 / 1024.0
    )
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// An `eagle run` that is stopped (SIGTERM) when dropped, even by a panic.
struct Eagle {
    child: Child,
    _home: tempfile::TempDir,
}

impl Eagle {
    fn start(fake: &FakeZulip, key: &str, rust_log: &str, log: Option<&std::path::Path>) -> Eagle {
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
                "[api]\nemail=eagle-bot@example.com\nkey={key}\nsite={}\n",
                fake.url()
            ),
        )
        .unwrap();
        let stderr = match log {
            Some(path) => Stdio::from(std::fs::File::create(path).unwrap()),
            None => Stdio::null(),
        };
        let child = Command::new(env!("CARGO_BIN_EXE_eagle"))
            .args(["run", "--profile", "eagle"])
            .env_clear()
            .env("HOME", home.path())
            .env("EAGLE_PROFILES_DIR", &profiles)
            .env("EAGLE_DATA_DIR", home.path().join("data"))
            // The bench's sender is not an approver: lift the per-sender rate.
            .env("EAGLE_CHAT__SENDER_RATE", "0")
            .env("RUST_LOG", rust_log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("spawn eagle");
        Eagle { child, _home: home }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Eagle {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run());
}

struct Realm {
    fake: FakeZulip,
    eagle: u64,
    echo: u64,
    alex: u64,
}

async fn realm() -> Realm {
    let fake = FakeZulip::start(FakeConfig {
        validate_responses: false,
        ..FakeConfig::default()
    })
    .await;
    let eagle = fake.add_user("eagle-bot@example.com", "Eagle", true);
    let echo = fake.add_user("echo-bot@example.com", "Echo", true);
    let alex = fake.add_user("alex@example.com", "Alex", false);
    for channel in ["general", "executor", "floor"] {
        fake.add_channel(channel, true);
        fake.subscribe(alex, channel);
    }
    fake.subscribe(eagle, "general");
    fake.subscribe(eagle, "executor");
    fake.subscribe(echo, "floor");
    Realm {
        fake,
        eagle,
        echo,
        alex,
    }
}

async fn wait_listening(fake: &FakeZulip, user: u64) {
    let listening = fake
        .wait_until(Duration::from_secs(60), |f| {
            f.queues().iter().any(|q| q.user_id == user && q.parked)
        })
        .await;
    assert!(listening, "user {user} is not listening");
}

/// Posts `content` and waits for the next message of `bot` in the topic.
async fn round_trip(
    realm: &Realm,
    channel: &str,
    topic: &str,
    content: &str,
    bot: u64,
) -> Duration {
    let before = realm
        .fake
        .messages_in(channel, topic)
        .iter()
        .filter(|m| m.sender_id == bot)
        .count();
    let started = Instant::now();
    realm.fake.post(realm.alex, channel, topic, content);
    let answered = realm
        .fake
        .wait_until(Duration::from_secs(10), |f| {
            f.messages_in(channel, topic)
                .iter()
                .filter(|m| m.sender_id == bot)
                .count()
                > before
        })
        .await;
    assert!(answered, "{content:?} in {channel} was not answered");
    started.elapsed()
}

async fn run() {
    let realm = realm().await;
    let echo = tokio::spawn(echo_bot(
        realm.fake.url(),
        "echo-bot@example.com".into(),
        realm.fake.api_key(realm.echo),
    ));
    wait_listening(&realm.fake, realm.echo).await;

    // 1 and 3: reaction time beside the floor, and memory.
    let eagle = Eagle::start(&realm.fake, &realm.fake.api_key(realm.eagle), "warn", None);
    wait_listening(&realm.fake, realm.eagle).await;
    let rss_first_start = rss_mib(eagle.pid());
    let mut eagle_times = Vec::with_capacity(COMMANDS);
    let mut floor_times = Vec::with_capacity(COMMANDS);
    for i in 0..WARM_UP + COMMANDS {
        let e = round_trip(&realm, "general", "bench", "!status", realm.eagle).await;
        let f = round_trip(&realm, "floor", "bench", "echo", realm.echo).await;
        if i >= WARM_UP {
            eagle_times.push(e);
            floor_times.push(f);
        }
    }
    // Let the last acknowledgements go out, then measure the idle process.
    let settled = realm
        .fake
        .wait_until(Duration::from_secs(30), |f| {
            f.requests()
                .last()
                .is_some_and(|r| r.path == "/api/v1/events")
        })
        .await;
    assert!(settled);
    let rss_idle = rss_mib(eagle.pid());
    eagle_times.sort();
    floor_times.sort();
    let (e50, e99) = (
        percentile(&eagle_times, 0.5),
        percentile(&eagle_times, 0.99),
    );
    let (f50, f99) = (
        percentile(&floor_times, 0.5),
        percentile(&floor_times, 0.99),
    );
    println!("reaction time over loopback (posted → reply stored), {COMMANDS} commands each:");
    println!(
        "  eagle run !status   p50 {:.2} ms  p99 {:.2} ms",
        ms(e50),
        ms(e99)
    );
    println!(
        "  echo floor client   p50 {:.2} ms  p99 {:.2} ms",
        ms(f50),
        ms(f99)
    );
    println!(
        "  eagle − floor       p50 {:+.2} ms  p99 ×{:.2}",
        ms(e50) - ms(f50),
        e99.as_secs_f64() / f99.as_secs_f64()
    );
    println!(
        "eagle run RSS: {rss_first_start:.1} MiB after a first start (empty data directory), {rss_idle:.1} MiB idle after {} commands",
        WARM_UP + COMMANDS
    );
    println!("  {}", memory_breakdown(eagle.pid()));

    // 2: a burst under 20 requests per 10 s.
    let window = Duration::from_secs(10);
    realm.fake.set_rate_limit(&[(window, 20)]);
    let refused_before = realm.fake.count_status(429);
    let started = Instant::now();
    for i in 0..BURST {
        realm.fake.post(
            realm.alex,
            "general",
            "burst",
            &format!("!status {}", i + 1),
        );
    }
    let answered = realm
        .fake
        .wait_until(Duration::from_secs(120), |f| {
            f.messages_in("general", "burst")
                .iter()
                .filter(|m| m.sender_id == realm.eagle)
                .count()
                >= BURST
        })
        .await;
    let took = started.elapsed();
    assert!(answered, "the burst was not answered in full");
    let refused = realm.fake.count_status(429) - refused_before;
    // The floor: 20 requests go at once, the 21st when the first leaves
    // the window.
    let floor = window * (BURST as u32).div_ceil(20).saturating_sub(1);
    println!(
        "burst of {BURST} commands under 20 requests / 10 s: answered in {:.2} s; floor {:.2} s ({:+.0} %); 429s: {refused}",
        took.as_secs_f64(),
        floor.as_secs_f64(),
        (took.as_secs_f64() / floor.as_secs_f64() - 1.0) * 100.0
    );
    drop(eagle);
    realm.fake.set_rate_limit(&[]);

    // 4: statements and transactions per command, from sqlx's log.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("eagle.log");
    let eagle = Eagle::start(
        &realm.fake,
        &realm.fake.api_key(realm.eagle),
        "warn,sqlx::query=debug",
        Some(&log),
    );
    wait_listening(&realm.fake, realm.eagle).await;
    round_trip(&realm, "general", "count", "!status", realm.eagle).await;
    let settled = |f: &FakeZulip| {
        f.requests()
            .last()
            .is_some_and(|r| r.path == "/api/v1/events")
    };
    assert!(
        realm
            .fake
            .wait_until(Duration::from_secs(30), settled)
            .await
    );
    let lines_before = std::fs::read_to_string(&log).unwrap().lines().count();
    for _ in 0..COUNTED {
        round_trip(&realm, "general", "count", "!status", realm.eagle).await;
    }
    assert!(
        realm
            .fake
            .wait_until(Duration::from_secs(30), settled)
            .await
    );
    drop(eagle);
    let text = std::fs::read_to_string(&log).unwrap();
    let counted: Vec<&str> = text
        .lines()
        .skip(lines_before)
        .filter(|l| l.contains("sqlx::query"))
        .collect();
    let mut kinds: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for line in &counted {
        let summary = line
            .split("summary=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or("?");
        *kinds.entry(summary).or_default() += 1;
    }
    // sqlx does not log BEGIN and COMMIT: the handling transaction holds
    // the claim, the command's reads and the reply; the delivery's record
    // is one more statement after the request.
    println!(
        "database work per handled !status: {:.1} statements (sqlx statement log, {COUNTED} commands, idle polling included)",
        counted.len() as f64 / COUNTED as f64,
    );
    let mut kinds: Vec<_> = kinds.into_iter().collect();
    kinds.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    for (summary, n) in kinds.iter().take(25) {
        println!("  {:>5.2}  {summary}", *n as f64 / COUNTED as f64);
    }
    echo.abort();
}

/// The floor: a bot that does nothing but answer each message with one
/// reply, through one long poll, on the same HTTP stack as Eagle.
async fn echo_bot(site: String, email: String, key: String) {
    let http = reqwest::Client::new();
    let api = |path: &str| format!("{site}/api/v1/{path}");
    let registered: serde_json::Value = http
        .post(api("register"))
        .basic_auth(&email, Some(&key))
        .form(&[("event_types", r#"["message"]"#)])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let queue = registered["queue_id"].as_str().unwrap().to_owned();
    let mut last = registered["last_event_id"].as_i64().unwrap();
    loop {
        let polled: serde_json::Value = http
            .get(api("events"))
            .basic_auth(&email, Some(&key))
            .query(&[
                ("queue_id", queue.as_str()),
                ("last_event_id", &last.to_string()),
            ])
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        for event in polled["events"].as_array().into_iter().flatten() {
            last = last.max(event["id"].as_i64().unwrap_or(last));
            let message = &event["message"];
            if event["type"] != "message" || message["sender_email"] == email.as_str() {
                continue;
            }
            http.post(api("messages"))
                .basic_auth(&email, Some(&key))
                .form(&[
                    ("type", "stream"),
                    (
                        "to",
                        message["display_recipient"].as_str().unwrap_or("floor"),
                    ),
                    ("topic", message["subject"].as_str().unwrap_or("bench")),
                    ("content", "echo"),
                ])
                .send()
                .await
                .unwrap();
        }
    }
}
