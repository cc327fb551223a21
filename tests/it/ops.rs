//! Operations, as an operator sees them: a real Prometheus (Debian's
//! `prometheus`, started here on a port of its own) scraping both
//! identities through the seed story, `/readyz` following PostgreSQL and
//! the schema without a restart, and JSON logs that follow one request
//! across both processes and hold no secret.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::support::{Home, PgSchema, WAIT};
use crate::zulip::Realm;

/// A port nobody listens on now (bound, then let go).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Adds `[ops] listen` to a profile of `home`.
fn listen_on(home: &Home, profile: &str, port: u16) {
    let path = home.profiles().join(format!("{profile}.toml"));
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(&format!("\n[ops]\nlisten = \"127.0.0.1:{port}\"\n"));
    std::fs::write(&path, text).unwrap();
}

fn http() -> reqwest::Client {
    // reqwest is built without a default TLS provider (Eagle picks ring).
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// GET `url`: status and body, or `None` if nothing answered.
async fn get(url: &str) -> Option<(u16, String)> {
    let response = http().get(url).send().await.ok()?;
    let status = response.status().as_u16();
    Some((status, response.text().await.unwrap_or_default()))
}

/// Asks again every 100 ms until `check` holds (at most `within`); the
/// last answer either way.
async fn poll_until<T>(
    within: Duration,
    mut ask: impl AsyncFnMut() -> T,
    check: impl Fn(&T) -> bool,
) -> (bool, T) {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let answer = ask().await;
        if check(&answer) {
            return (true, answer);
        }
        if tokio::time::Instant::now() >= deadline {
            return (false, answer);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Debian's Prometheus, with its own configuration and storage, stopped
/// (and its files removed) when dropped.
struct Prometheus {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(targets: &[(&str, u16)]) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let mut config = String::from(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n",
        );
        for (job, port) in targets {
            config.push_str(&format!(
                "  - job_name: {job}\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
            ));
        }
        let config_file = dir.path().join("prometheus.yml");
        std::fs::write(&config_file, config).unwrap();
        let port = free_port();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("prometheus.log")).unwrap())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("Debian's prometheus is required (`apt-get install prometheus`, as .ci/check does): {e}")
            });
        Prometheus {
            child,
            url: format!("http://127.0.0.1:{port}"),
            _dir: dir,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// An instant query: each series' labels and value.
    async fn query(&self, promql: &str) -> Vec<(Value, f64)> {
        let Ok(response) = http()
            .get(format!("{}/api/v1/query", self.url))
            .query(&[("query", promql)])
            .send()
            .await
        else {
            return Vec::new();
        };
        let Ok(body) = response.json::<Value>().await else {
            return Vec::new();
        };
        body["data"]["result"]
            .as_array()
            .map(|series| {
                series
                    .iter()
                    .map(|s| {
                        let value = s["value"][1]
                            .as_str()
                            .and_then(|v| v.parse().ok())
                            .unwrap_or(f64::NAN);
                        (s["metric"].clone(), value)
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The sum of a query's values, once it reaches `at_least` (at most WAIT).
    async fn wait_for(&self, promql: &str, at_least: f64) -> f64 {
        let (ok, total) = poll_until(
            WAIT,
            async || self.query(promql).await.iter().map(|(_, v)| v).sum::<f64>(),
            |total| *total >= at_least,
        )
        .await;
        assert!(
            ok,
            "Prometheus never had {promql} >= {at_least} (last: {total}):\n{}",
            self.log()
        );
        total
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every line of a JSON log, parsed; a line that is not JSON fails.
fn json_lines(log: &str, what: &str) -> Vec<Value> {
    log.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{what}: a log line is not JSON ({e}): {line}"))
        })
        .collect()
}

/// Whether `line` carries `field = value`, at the top or in a span.
fn carries(line: &Value, field: &str, value: i64) -> bool {
    let is = |v: &Value| v.as_i64() == Some(value) || v.as_str() == Some(&value.to_string());
    line.get(field).is_some_and(is)
        || line["spans"]
            .as_array()
            .is_some_and(|spans| spans.iter().any(|s| s.get(field).is_some_and(is)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_holds_the_seed_story_and_json_logs_follow_one_request() {
    let realm = Realm::start().await;
    let mut home = realm.home();
    let (eagle_port, executor_port) = (free_port(), free_port());
    listen_on(&home, "eagle", eagle_port);
    listen_on(&home, "executor", executor_port);
    home.set("EAGLE_OWNER", &realm.alex.to_string())
        .set("EAGLE_EXECUTOR_BOT", "executor-bot@example.com")
        .set("EAGLE_LOG_FORMAT", "json")
        .set("RUST_LOG", "trace");
    let prometheus = Prometheus::start(&[("eagle", eagle_port), ("executor", executor_port)]);
    let (eagle, executor) = crate::executor::start_both(&realm, &home).await;

    // Both serve health at once, and are ready once their loops lead.
    for port in [eagle_port, executor_port] {
        let url = format!("http://127.0.0.1:{port}");
        let (ok, answer) = poll_until(
            WAIT,
            async || get(&format!("{url}/readyz")).await,
            |a| a.as_ref().is_some_and(|(s, _)| *s == 200),
        )
        .await;
        assert!(ok, "{url}/readyz: {answer:?}\n{}", eagle.log());
        assert_eq!(get(&format!("{url}/healthz")).await.map(|a| a.0), Some(200));
    }

    realm
        .fake
        .post(realm.alex, "general", "tabs", "!queue Fix the tab preview");
    realm
        .wait_replies("general", "tabs", |r| !r.is_empty())
        .await;
    realm.fake.post(realm.alex, "general", "tabs", "!go 1");
    crate::executor::wait_post(&realm, realm.eagle, "[ESCALATED: merge_pr] run:1").await;

    // The escalation waits, and Prometheus sees it waiting.
    prometheus
        .wait_for(r#"eagle_escalations_waiting{job="eagle"}"#, 1.0)
        .await;
    let merge = {
        let store = crate::executor::home_store(&home).await;
        let requests = store.requests().requests_of_run(1).await.unwrap();
        requests.iter().find(|r| r.action == "merge_pr").unwrap().id
    };
    realm.fake.post(
        realm.alex,
        "executor",
        "run 1",
        &format!("!approve 1 {merge}"),
    );
    crate::executor::wait_post(&realm, realm.executor, "[DONE: pr_ready] run:1").await;

    // The journey, as Prometheus holds it afterwards: the run's state
    // changes (the executor's), the decisions by plugin and by a human
    // (Eagle's), the escalation that waited and was answered.
    prometheus
        .wait_for(
            r#"eagle_run_transitions_total{job="executor",from="queued",to="in_progress"}"#,
            1.0,
        )
        .await;
    prometheus
        .wait_for(
            r#"eagle_run_transitions_total{job="executor",from="in_progress",to="pr"}"#,
            1.0,
        )
        .await;
    prometheus
        .wait_for(r#"eagle_runs{job="eagle",state="pr"}"#, 1.0)
        .await;
    prometheus
        .wait_for(
            r#"eagle_decisions_total{job="eagle",decided_by="default-approval",outcome="approve"}"#,
            3.0,
        )
        .await;
    prometheus
        .wait_for(
            r#"eagle_decisions_total{job="eagle",action="merge_pr",decided_by="default-approval",outcome="escalate"}"#,
            1.0,
        )
        .await;
    prometheus
        .wait_for(
            r#"eagle_decisions_total{job="eagle",action="merge_pr",decided_by="human",outcome="approve"}"#,
            1.0,
        )
        .await;
    let (answered, _) = poll_until(
        WAIT,
        async || {
            prometheus
                .query(r#"eagle_escalations_waiting{job="eagle"}"#)
                .await
        },
        |series| series.len() == 1 && series[0].1 == 0.0,
    )
    .await;
    assert!(answered, "the escalation was answered: none waits any more");
    let waited = prometheus
        .query(r#"max_over_time(eagle_escalations_waiting{job="eagle"}[10m])"#)
        .await;
    assert_eq!(waited.first().map(|s| s.1), Some(1.0), "{waited:?}");
    prometheus
        .wait_for(
            r#"eagle_decision_seconds_count{job="eagle",by="human"}"#,
            1.0,
        )
        .await;
    prometheus
        .wait_for(
            r#"eagle_requests_total{job="executor",action="merge_pr"}"#,
            1.0,
        )
        .await;
    prometheus
        .wait_for(r#"eagle_plugin_calls_total{job="eagle",outcome="ok"}"#, 4.0)
        .await;
    prometheus
        .wait_for(
            r#"eagle_zulip_calls_total{job="eagle",endpoint="messages",outcome="ok"}"#,
            1.0,
        )
        .await;
    prometheus
        .wait_for(r#"eagle_reaction_seconds_count{job="eagle"}"#, 2.0)
        .await;

    let (_, eagle_log) = eagle.stop();
    let (_, executor_log) = executor.stop();
    let eagle_lines = json_lines(&eagle_log, "eagle");
    let executor_lines = json_lines(&executor_log, "executor");

    // One request, followed across both identities by its run and id.
    let by = |lines: &[Value], message: &str| {
        lines.iter().any(|l| {
            l["fields"]["message"].as_str().or(l["message"].as_str()) == Some(message)
                && carries(l, "run", 1)
                && carries(l, "request", merge)
        })
    };
    assert!(
        by(
            &executor_lines,
            "request recorded; waiting for the decision"
        ),
        "the runner's line for request {merge}:\n{executor_log}"
    );
    assert!(
        by(&eagle_lines, "decided"),
        "the decider's line for request {merge}"
    );
    // The loops' spans name their profile.
    assert!(
        executor_lines
            .iter()
            .any(|l| l["spans"].as_array().is_some_and(|s| s
                .iter()
                .any(|s| s["name"] == "loop" && s["profile"] == "executor"))),
        "the executor's loop spans"
    );

    // No secret in any field, at trace: the keys raw, URL-encoded, base64.
    for (user, email) in [
        (realm.eagle, "eagle-bot@example.com"),
        (realm.executor, "executor-bot@example.com"),
    ] {
        let key = realm.fake.api_key(user);
        use base64::Engine as _;
        let forms = [
            key.clone(),
            url::form_urlencoded::byte_serialize(key.as_bytes()).collect::<String>(),
            base64::engine::general_purpose::STANDARD.encode(&key),
            base64::engine::general_purpose::STANDARD.encode(format!("{email}:{key}")),
        ];
        for form in forms {
            assert!(!eagle_log.contains(&form), "a key in Eagle's log");
            assert!(!executor_log.contains(&form), "a key in the executor's log");
        }
    }
}

/// Forwards TCP to PostgreSQL until switched off: then every connection
/// is cut and new ones are closed at once, as a stopped server would.
struct PgGate {
    addr: SocketAddr,
    open: tokio::sync::watch::Sender<bool>,
}

impl PgGate {
    async fn start() -> PgGate {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (open, _) = tokio::sync::watch::channel(true);
        let gate = open.clone();
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let mut is_open = gate.subscribe();
                if !*is_open.borrow_and_update() {
                    continue;
                }
                tokio::spawn(async move {
                    let Ok(mut server) = tokio::net::TcpStream::connect("127.0.0.1:5432").await
                    else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = is_open.wait_for(|open| !*open) => {}
                    }
                });
            }
        });
        PgGate { addr, open }
    }

    fn set(&self, open: bool) {
        self.open.send_replace(open);
    }
}

async fn readyz(port: u16) -> Option<(u16, String)> {
    get(&format!("http://127.0.0.1:{port}/readyz")).await
}

async fn wait_ready(port: u16, ready: bool, child: &Path) -> String {
    // Leases are renewed a third of their time (at most 40 s) after they
    // were last taken: a database that lost its rows is held again by then.
    let within = if ready { WAIT * 2 } else { WAIT };
    let want = if ready { 200 } else { 503 };
    let (ok, answer) = poll_until(
        within,
        async || readyz(port).await,
        |a| a.as_ref().is_some_and(|(s, _)| *s == want),
    )
    .await;
    assert!(
        ok,
        "/readyz never answered {want} (last: {answer:?}):\n{}",
        std::fs::read_to_string(child).unwrap_or_default()
    );
    answer.map(|a| a.1).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_follows_postgres_and_the_schema_without_a_restart() {
    let schema = PgSchema::create().await;
    let gate = PgGate::start().await;
    let url = format!(
        "postgres://postgres@{}/postgres?options[search_path]={}",
        gate.addr, schema.name
    );
    let port = free_port();
    let mut home = Home::new();
    home.set("EAGLE_DATABASE_URL", &url)
        .set("EAGLE_OPS__LISTEN", &format!("127.0.0.1:{port}"));
    let log = home.dir.path().join("shell.log");
    // The shell keeps listening while its input stays open.
    let mut shell = home
        .command(&["shell"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("spawn eagle shell");

    wait_ready(port, true, &log).await;
    let health = get(&format!("http://127.0.0.1:{port}/healthz")).await;
    assert_eq!(health.map(|h| h.0), Some(200));

    // PostgreSQL goes away: not ready, while the process still serves.
    gate.set(false);
    let why = wait_ready(port, false, &log).await;
    assert!(why.contains("database"), "{why}");
    let health = get(&format!("http://127.0.0.1:{port}/healthz")).await;
    assert_eq!(
        health.map(|h| h.0),
        Some(200),
        "alive while the database is not"
    );
    let metrics = get(&format!("http://127.0.0.1:{port}/metrics"))
        .await
        .unwrap();
    assert!(metrics.1.contains("eagle_database_up 0"), "{}", metrics.1);

    // It comes back: ready again, the same process.
    gate.set(true);
    wait_ready(port, true, &log).await;
    let metrics = get(&format!("http://127.0.0.1:{port}/metrics"))
        .await
        .unwrap();
    assert!(metrics.1.contains("eagle_database_up 1"), "{}", metrics.1);

    // The schema goes missing (an operator's mistake): not ready, and
    // `eagle migrate` makes it ready again without a restart.
    {
        use sqlx::Connection as _;
        let mut conn = sqlx::PgConnection::connect(&crate::support::postgres_url())
            .await
            .unwrap();
        for statement in [
            format!("DROP SCHEMA {} CASCADE", schema.name),
            format!("CREATE SCHEMA {}", schema.name),
        ] {
            sqlx::query(sqlx::AssertSqlSafe(statement))
                .execute(&mut conn)
                .await
                .unwrap();
        }
    }
    let why = wait_ready(port, false, &log).await;
    assert!(why.contains("schema"), "{why}");
    let migrated = home.run(&["migrate"], "");
    assert!(migrated.status.success(), "{:?}", migrated);
    wait_ready(port, true, &log).await;

    drop(shell.stdin.take());
    let status = crate::support::exit_within(&mut shell, crate::support::CHILD_DEADLINE);
    assert!(
        status.is_some_and(|s| s.success()),
        "{status:?}:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}

#[test]
fn a_listen_address_beyond_loopback_is_refused_unless_the_profile_says_so() {
    let mut home = Home::new();
    home.set("EAGLE_OPS__LISTEN", "0.0.0.0:9464");
    let out = home.run(&["profile", "show", "eagle"], "");
    let (_, stderr) = crate::support::text(&out);
    assert!(!out.status.success());
    assert!(
        stderr.contains("ops.listen") && stderr.contains("beyond_loopback"),
        "{stderr}"
    );
    home.set("EAGLE_OPS__BEYOND_LOOPBACK", "true");
    let out = home.run(&["profile", "show", "eagle"], "");
    assert!(out.status.success(), "{:?}", crate::support::text(&out));
    home.set("EAGLE_OPS__LISTEN", "localhost");
    let out = home.run(&["profile", "show", "eagle"], "");
    let (_, stderr) = crate::support::text(&out);
    assert!(!out.status.success());
    assert!(stderr.contains("is not an address and port"), "{stderr}");
}
