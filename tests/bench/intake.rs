//! The analyzer and the PR loop: `cargo bench --bench intake`.
//!
//! * Analyzer throughput with the filters only (no analysis command, the
//!   built-in default filter): 10,000 pending tasks, half of them skipped,
//!   each concluded, audited and told in its own transaction, on SQLite and
//!   on PostgreSQL.
//! * What an idle run costs on GitHub: a run in `pr` whose PR does not
//!   change, polled 120 times by the PR loop against the strict fake
//!   GitHub: requests per poll, and the REST quota and GraphQL points they
//!   spend (a 304 costs none), then per hour at the default poll interval
//!   (2 minutes) and threads re-read every 30 minutes.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use eagle::profile::Profile;
use eagle::runtime::posts::{People, Poster};
use eagle::store::{ClaimLimits, NewTask, PrLink, RunEnd, RunState, Store};
use fake_apis::{CheckRunSpec, FakeGitHub, PrSpec, RepoSpec, Resource};

const TASKS: i64 = 10_000;
const POLLS: usize = 120;
const SHA: &str = "1111111111111111111111111111111111111111";

fn profile(
    home: &std::path::Path,
    extra: &[(&str, String)],
) -> (Profile, BTreeMap<String, String>) {
    let profiles = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiles");
    let mut env = BTreeMap::new();
    env.insert("HOME".to_string(), home.display().to_string());
    env.insert(
        "EAGLE_DATA_DIR".to_string(),
        home.join("data").display().to_string(),
    );
    for (key, value) in extra {
        env.insert((*key).to_string(), value.clone());
    }
    let profile = Profile::load(&profiles, "eagle", &env).expect("the shipped profile");
    (profile, env)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        analyzer("SQLite", None).await;
        let pg = std::env::var("TEST_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
        analyzer("PostgreSQL", Some(pg)).await;
        idle_pr().await;
    });
}

async fn analyzer(label: &str, postgres: Option<String>) {
    let home = tempfile::tempdir().unwrap();
    let schema = format!("bench_{:08x}", fastrand::u32(..));
    let mut extra = Vec::new();
    if let Some(url) = &postgres {
        let admin = sqlx::PgPool::connect(url).await.unwrap();
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
            .execute(&admin)
            .await
            .unwrap();
        let sep = if url.contains('?') { '&' } else { '?' };
        extra.push((
            "EAGLE_DATABASE_URL",
            format!("{url}{sep}options[search_path]={schema}"),
        ));
    }
    let (profile, _) = profile(home.path(), &extra);
    let store = Store::open(&profile.database_url).await.unwrap();
    // Tasks as an importer leaves them: a qualifying source; every other
    // one for the wrong platform.
    for chunk in 0..TASKS / 500 {
        let mut tx = store.begin_write().await.unwrap();
        for i in 0..500 {
            let n = chunk * 500 + i;
            let platform = if n % 2 == 0 { "macos" } else { "windows" };
            tx.intake()
                .upsert_external_task(
                    &eagle::store::ExternalTask {
                        task_gid: format!("asana:{n}"),
                        source: "O-L Backlog (Desktop Browsers)".into(),
                        title: format!("Task {n}"),
                        description: "The tab preview sticks after a resize.".into(),
                        platform: Some(platform.into()),
                        ..Default::default()
                    },
                    "bench",
                )
                .await
                .unwrap();
        }
        tx.commit().await.unwrap();
    }
    let policy = eagle::policy::PolicyHost::for_profile(&profile)
        .await
        .unwrap();
    let poster = Poster {
        identity: "eagle".into(),
        channel: "executor".into(),
    };
    let people = People {
        owner_fallback: None,
        approvers: Vec::new(),
        naming: std::sync::Arc::new(eagle::transport::zulip::ZulipNaming),
    };
    let exe = std::path::PathBuf::from(env!("CARGO_BIN_EXE_eagle"));
    let mut analyzer = eagle::eagle::analyzer::Analyzer::new(
        &profile,
        store.clone(),
        policy,
        poster,
        people,
        &exe,
    )
    .unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let started = Instant::now();
    assert!(
        eagle::runtime::background::once(&mut analyzer, &store, "bench".into(), &stop)
            .await
            .unwrap()
    );
    let took = started.elapsed();
    let summary = analyzer.last_pass.clone();
    assert_eq!(summary.total() as i64, TASKS);
    assert_eq!(summary.skipped.len() as i64, TASKS / 2);
    println!(
        "analyzer, filters only, {label}: {TASKS} tasks in {:.2} s: {:.0} tasks/s ({:.0} µs each; {} kept, {} skipped)",
        took.as_secs_f64(),
        TASKS as f64 / took.as_secs_f64(),
        took.as_secs_f64() * 1e6 / TASKS as f64,
        summary.for_review.len(),
        summary.skipped.len(),
    );
    store.close().await;
    if let Some(url) = &postgres {
        let admin = sqlx::PgPool::connect(url).await.unwrap();
        sqlx::query(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
            .execute(&admin)
            .await
            .unwrap();
    }
}

async fn idle_pr() {
    let fake = FakeGitHub::start().await;
    let token = fake.create_token("executor-bot");
    fake.add_repo("acme/app", RepoSpec::default());
    let number = fake.open_pr("acme/app", PrSpec::new("executor-bot", "eagle/run-1", SHA));
    fake.add_check_run(
        "acme/app",
        CheckRunSpec::new("macOS UI Tests", SHA, "in_progress", None),
    );
    let home = tempfile::tempdir().unwrap();
    let (profile, _) = profile(
        home.path(),
        &[
            ("GITHUB_TOKEN", token),
            ("EAGLE_GITHUB__API_URL", fake.url()),
            ("EAGLE_GITHUB__REPO", "acme/app".into()),
            // Every tick polls: the figures are per poll.
            ("EAGLE_GITHUB__POLL_INTERVAL", "1ms".into()),
        ],
    );
    let store = Store::open(&profile.database_url).await.unwrap();
    // A run that reached `pr` with PR #1.
    let mut tx = store.begin_write().await.unwrap();
    let task = tx
        .tasks()
        .insert_task(&NewTask {
            task_gid: "bench:1".into(),
            source: "chat".into(),
            title: "bench".into(),
            ..NewTask::default()
        })
        .await
        .unwrap()
        .unwrap();
    tx.transitions()
        .start_run(task, "bench", "!go")
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let limits = ClaimLimits {
        max_workers: 2,
        lease: Duration::from_secs(30),
        alive_for: Duration::from_secs(60),
        cost_cap: None,
    };
    let claim = store
        .claims()
        .claim_run("bench", &limits)
        .await
        .unwrap()
        .unwrap();
    let mut tx = store.begin_write().await.unwrap();
    tx.workers()
        .finish_attempt(
            &claim.fence,
            Some(0),
            &RunEnd::Moved {
                to: RunState::Pr,
                reason: "[DONE: pr_ready]".into(),
                pr: Some(PrLink {
                    number: number as i64,
                    url: None,
                    repo: None,
                }),
            },
        )
        .await
        .unwrap();
    tx.commit().await.unwrap();

    // The client `eagle run` builds: its ETags kept in the database.
    let github = eagle::daemon::clients::github(&profile, &store)
        .unwrap()
        .unwrap();
    let mut prs = eagle::executor::pr_loop::PrLoop::new(
        store.clone(),
        Poster {
            identity: "executor".into(),
            channel: "executor".into(),
        },
        People {
            owner_fallback: None,
            approvers: Vec::new(),
            naming: std::sync::Arc::new(eagle::transport::zulip::ZulipNaming),
        },
        Some((github, profile.github.clone().unwrap())),
    );
    let stop = tokio_util::sync::CancellationToken::new();
    // The first poll reads everything; the rest find nothing changed.
    eagle::runtime::background::once(&mut prs, &store, "bench".into(), &stop)
        .await
        .unwrap();
    let (requests, core, points) = (
        fake.requests().len(),
        fake.quota_used(Resource::Core),
        fake.quota_used(Resource::GraphQl),
    );
    let started = Instant::now();
    for _ in 0..POLLS {
        tokio::time::sleep(Duration::from_millis(2)).await;
        eagle::runtime::background::once(&mut prs, &store, "bench".into(), &stop)
            .await
            .unwrap();
    }
    let took = started.elapsed();
    let idle_requests = fake.requests().len() - requests;
    let idle_core = fake.quota_used(Resource::Core) - core;
    let idle_points = fake.quota_used(Resource::GraphQl) - points;
    let per_poll = idle_requests as f64 / POLLS as f64;
    let run = {
        let mut tx = store.begin_read().await.unwrap();
        tx.tasks().run(1).await.unwrap().unwrap()
    };
    assert_eq!(run.pr_status.as_deref(), Some("waiting for CI on 1111111"));
    println!(
        "an idle run in pr (CI running, nothing changes): first poll {requests} requests \
         ({core} quota, {points} GraphQL points); then {per_poll:.1} requests a poll, \
         {idle_core} quota and {idle_points} points in {POLLS} polls ({:.1} ms a poll)",
        took.as_secs_f64() * 1e3 / POLLS as f64
    );
    let polls_an_hour = 3600 / 120;
    println!(
        "  per idle run and hour at the default 2-minute interval: {:.0} requests, {} REST quota \
         (304s are free), {} GraphQL points (threads re-read every 30 minutes)",
        per_poll * polls_an_hour as f64 + 2.0,
        idle_core as usize * polls_an_hour / POLLS,
        2 * points.max(1),
    );
    fake.assert_clean();
}
