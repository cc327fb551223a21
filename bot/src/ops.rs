//! The operator's listener (`[ops] listen`): `/metrics` for Prometheus,
//! `/healthz` (the process serves) and `/readyz` (the database answers with
//! this binary's schema, each identity's transport is connected, and every
//! lease this process's loops run under is held by a live instance).
//!
//! Readiness is checked by a prober in the background, every
//! [`PROBE_EVERY`], each look bounded by [`PROBE_TIMEOUT`]; `/readyz` only
//! reads its last finding, so it answers at once whatever the database
//! does, and a finding older than [`STALE`] (a prober stuck on a database
//! that hangs past its bound) is itself a failure. `/metrics` reads the
//! database's gauges at each scrape, within [`SCRAPE_TIMEOUT`]; past it,
//! `eagle_database_up` is 0 and the gauges keep their last values.

pub mod logging;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio_util::sync::CancellationToken;

use crate::ground::metrics::{self, StateLabels, StatusLabels};
use crate::store::Store;

/// How often readiness is looked at.
pub const PROBE_EVERY: Duration = Duration::from_secs(1);
/// How long one look may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// A finding older than this is not trusted.
pub const STALE: Duration = Duration::from_secs(5);
/// How long a scrape waits for the database.
pub const SCRAPE_TIMEOUT: Duration = Duration::from_secs(2);

/// What readiness depends on, and the prober's last finding.
#[derive(Debug)]
pub struct Health {
    store: Store,
    /// The identities whose transport must be connected.
    identities: Vec<String>,
    /// The leases this process's loops need someone to hold.
    leases: Mutex<Vec<String>>,
    finding: Mutex<Finding>,
}

#[derive(Debug, Clone)]
struct Finding {
    at: Instant,
    /// Empty when ready: otherwise what is wrong, one line each.
    problems: Vec<String>,
}

impl Health {
    pub fn new(store: Store, identities: Vec<String>) -> Arc<Health> {
        Arc::new(Health {
            store,
            identities,
            leases: Mutex::new(Vec::new()),
            finding: Mutex::new(Finding {
                at: Instant::now(),
                problems: vec!["not checked yet".into()],
            }),
        })
    }

    /// A loop of this process runs under `lease`.
    pub fn expect_lease(&self, lease: &str) {
        let mut leases = self.leases.lock().unwrap_or_else(|e| e.into_inner());
        if !leases.iter().any(|l| l == lease) {
            leases.push(lease.to_string());
        }
    }

    /// Looks once: the database and its schema, the transports, the leases.
    pub async fn probe(&self) {
        let leases = self
            .leases
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut problems = Vec::new();
        let database = async {
            if !self.store.schema_ready().await? {
                return Ok(Err(
                    "the database's schema is missing or older than this binary (run `eagle migrate`)"
                        .to_string(),
                ));
            }
            Ok::<_, crate::store::StoreError>(Ok(self.store.unheld_leases(&leases).await?))
        };
        match tokio::time::timeout(PROBE_TIMEOUT, database).await {
            Err(_) => problems.push(format!(
                "the database did not answer within {} ms",
                PROBE_TIMEOUT.as_millis()
            )),
            Ok(Err(error)) => problems.push(format!("the database: {error}")),
            Ok(Ok(Err(schema))) => problems.push(schema),
            Ok(Ok(Ok(unheld))) => {
                for lease in unheld {
                    problems.push(format!("nobody holds the lease {lease:?}"));
                }
            }
        }
        for identity in &self.identities {
            if !metrics::get().is_connected(identity) {
                problems.push(format!("{identity}: the chat transport is not connected"));
            }
        }
        *self.finding.lock().unwrap_or_else(|e| e.into_inner()) = Finding {
            at: Instant::now(),
            problems,
        };
    }

    /// The last finding: ready, or what is wrong.
    pub fn readiness(&self) -> Result<(), Vec<String>> {
        let finding = self
            .finding
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if finding.at.elapsed() > STALE {
            return Err(vec![format!(
                "readiness was last checked {} s ago (the check is stuck)",
                finding.at.elapsed().as_secs()
            )]);
        }
        if finding.problems.is_empty() {
            Ok(())
        } else {
            Err(finding.problems)
        }
    }

    /// Probes every [`PROBE_EVERY`] until `stop`.
    pub async fn keep_probing(self: Arc<Health>, stop: CancellationToken) {
        let mut tick = tokio::time::interval(PROBE_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => self.probe().await,
            }
        }
    }
}

/// Reads the database's state into the gauges; false when it could not.
pub async fn refresh_gauges(store: &Store) -> bool {
    let m = metrics::get();
    let read = tokio::time::timeout(SCRAPE_TIMEOUT, store.gauges()).await;
    let gauges = match read {
        Ok(Ok(gauges)) => gauges,
        Ok(Err(error)) => {
            tracing::debug!(%error, "metrics: cannot read the database");
            m.database_up.set(0);
            return false;
        }
        Err(_) => {
            m.database_up.set(0);
            return false;
        }
    };
    m.database_up.set(1);
    // A status or state nobody is in any more reads 0, not its last count.
    m.tasks.clear();
    for (status, count) in gauges.tasks {
        m.tasks.get_or_create(&StatusLabels { status }).set(count);
    }
    m.runs.clear();
    for (state, count) in gauges.runs {
        m.runs.get_or_create(&StateLabels { state }).set(count);
    }
    for state in [
        "queued",
        "in_progress",
        "pr",
        "complete",
        "abandoned",
        "cancelled",
    ] {
        let _ = m.runs.get_or_create(&StateLabels {
            state: state.into(),
        });
    }
    m.workers_running.set(gauges.workers_running);
    m.workers_limit.set(gauges.worker_slots);
    m.escalations_waiting.set(gauges.escalations_waiting);
    let age = |since: Option<chrono::DateTime<chrono::Utc>>| {
        since.map_or(0.0, |t| {
            (gauges.now - t).num_microseconds().unwrap_or(0).max(0) as f64 / 1e6
        })
    };
    m.escalation_oldest_seconds
        .set(age(gauges.oldest_escalation));
    m.outbox_depth.set(gauges.outbox_depth);
    m.outbox_oldest_seconds.set(age(gauges.oldest_outbox));
    true
}

/// The listener, bound: [`Listener::serve`] answers until stopped.
#[derive(Debug)]
pub struct Listener {
    socket: tokio::net::TcpListener,
    health: Arc<Health>,
}

impl Listener {
    /// Binds `addr` (an error names it: a port in use is a setting to fix).
    pub async fn bind(addr: SocketAddr, health: Arc<Health>) -> anyhow::Result<Listener> {
        let socket = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
            anyhow::anyhow!("cannot serve metrics and health on {addr} ([ops] listen): {e}")
        })?;
        Ok(Listener { socket, health })
    }

    /// The address it listens on (the port, when `listen` asked for 0).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.socket.local_addr().ok()
    }

    /// Answers `/metrics`, `/healthz` and `/readyz` until `stop`.
    pub async fn serve(self, stop: CancellationToken) {
        if let Some(addr) = self.local_addr() {
            tracing::info!(%addr, "serving /metrics, /healthz and /readyz");
        }
        let app = Router::new()
            .route("/metrics", get(scrape))
            .route("/healthz", get(|| async { "ok\n" }))
            .route("/readyz", get(ready))
            .with_state(self.health);
        let served = axum::serve(self.socket, app)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await;
        if let Err(error) = served {
            tracing::error!(%error, "the metrics listener stopped");
        }
    }
}

async fn scrape(State(health): State<Arc<Health>>) -> impl IntoResponse {
    refresh_gauges(&health.store).await;
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics::get().encode(),
    )
}

async fn ready(State(health): State<Arc<Health>>) -> impl IntoResponse {
    match health.readiness() {
        Ok(()) => (StatusCode::OK, "ready\n".to_string()),
        Err(problems) => (
            StatusCode::SERVICE_UNAVAILABLE,
            problems
                .iter()
                .map(|p| format!("{p}\n"))
                .collect::<String>(),
        ),
    }
}
