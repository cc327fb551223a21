//! Policy plugin costs: `cargo bench --bench policy`.
//!
//! Prints, for each default plugin: cold compile and cached load, the cost
//! of one decision with a fresh store per call (what Eagle does), the same on
//! the calling thread, and warm (one
//! instance reused), decisions per second on one core, and the process's RSS
//! with the plugins loaded.

use std::path::Path;
use std::time::{Duration, Instant};

use eagle::policy::{PolicyHost, PolicyRequest, PolicyTask, RequestKind};
use eagle::profile::{PluginLimits, PluginSource, PluginSpec, PolicySettings};

fn settings(name: &str) -> PolicySettings {
    PolicySettings {
        dir: Path::new(".").to_path_buf(),
        load_all: false,
        exclude: Vec::new(),
        reload_interval: Duration::from_secs(3600),
        plugins: vec![PluginSpec {
            source: PluginSource::Builtin(name.into()),
            config_json: r#"{"platform": "macos"}"#.into(),
            limits: PluginLimits::default(),
        }],
    }
}

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        println!("RSS at start: {:.1} MiB", rss_mib());
        let request = PolicyRequest {
            kind: RequestKind::Request,
            action: "run_tests".into(),
            run_id: 42,
            request_id: 7,
            body: "Scheme: macOS UI Tests CI".into(),
            task: None,
            requested_by: "worker".into(),
        };
        let task = PolicyTask {
            gid: "1".into(),
            source: "my_tasks_inbox".into(),
            title: "Tab preview sticks".into(),
            description: "The preview stays.".into(),
            platform: Some("macos".into()),
            ..PolicyTask::default()
        };
        let mut hosts = Vec::new();
        for name in ["default-approval", "default-filter"] {
            let cache = tempfile::tempdir().unwrap();
            let started = Instant::now();
            let _cold = PolicyHost::load(&settings(name), Some(cache.path().to_path_buf())).await.unwrap();
            let cold = started.elapsed();
            let started = Instant::now();
            let host = PolicyHost::load(&settings(name), Some(cache.path().to_path_buf())).await.unwrap();
            let cached = started.elapsed();
            assert!(host.plugins()[0].state.contains("cached"), "{:?}", host.plugins()[0].state);

            // One decision at a time, as the bot makes them (fresh store per call).
            let n = 2_000;
            let mut samples = Vec::with_capacity(n);
            for _ in 0..n {
                let started = Instant::now();
                if name == "default-approval" {
                    host.decide(&request).await;
                } else {
                    host.filter(&task).await;
                }
                samples.push(started.elapsed());
            }
            samples.sort();
            let total: Duration = samples.iter().sum();
            let warm = host.warm_decisions(&request, 100_000).unwrap().unwrap() / 100_000;
            let fresh = host.fresh_decisions(&request, 10_000).unwrap() / 10_000;
            println!(
                "{name}: cold compile {:.1} ms, cached load {:.2} ms; per decision as the host makes it (fresh store) p50 {:.1} µs p99 {:.1} µs mean {:.1} µs ({:.0}/s on one core); fresh store on the calling thread {:.1} µs; warm (instance reused) {:.2} µs",
                cold.as_secs_f64() * 1e3,
                cached.as_secs_f64() * 1e3,
                percentile(&samples, 0.5).as_secs_f64() * 1e6,
                percentile(&samples, 0.99).as_secs_f64() * 1e6,
                total.as_secs_f64() * 1e6 / n as f64,
                n as f64 / total.as_secs_f64(),
                fresh.as_secs_f64() * 1e6,
                warm.as_secs_f64() * 1e6,
            );
            hosts.push((host, cache));
        }
        println!("RSS with both default plugins loaded: {:.1} MiB", rss_mib());
    });
}
