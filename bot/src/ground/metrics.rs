//! What Eagle counts, for Prometheus: one registry per process, recorded
//! into from wherever the event happens (a decision, a Zulip call, a plugin
//! call), and read by the ops listener (`crate::ops`), which adds the
//! state the database holds (tasks, runs, workers, escalations, the outbox)
//! at each scrape.
//!
//! Nothing here imports the rest of the crate, so every layer may record;
//! labels are closed sets (actions, outcomes, plugin names, endpoints), never
//! free text, a person's name or anything secret.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicI64, AtomicU64};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of one kind: `{action="merge_pr"}` and the like.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ActionLabels {
    pub action: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DecisionLabels {
    pub action: String,
    /// approve, deny, escalate.
    pub outcome: String,
    /// The deciding plugin's name, `human` for an approver's answer, or
    /// `none` when no plugin decided.
    pub decided_by: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DeciderLabels {
    /// policy or human.
    pub by: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TransitionLabels {
    pub from: String,
    pub to: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CallLabels {
    /// The endpoint, as a fixed name (`register`, `events`, `messages`, …).
    pub endpoint: String,
    /// ok, rate_limited, client_error, server_error, transport.
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginLabels {
    pub plugin: String,
    /// ok, or the failure's kind (timeout, fuel, memory, trap, …).
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NameLabels {
    pub name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    pub state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StatusLabels {
    pub status: String,
}

type IntGauge = Gauge<i64, AtomicI64>;
type FloatGauge = Gauge<f64, AtomicU64>;
type FloatCounter = Counter<f64, AtomicU64>;

/// Latency buckets from 100 µs to about 100 s, doubling.
fn latency() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.0, 21))
}

/// Every metric of the process.
pub struct Metrics {
    registry: Registry,
    // Events, recorded where they happen.
    pub requests: Family<ActionLabels, Counter>,
    pub decisions: Family<DecisionLabels, Counter>,
    pub decision_seconds: Family<DeciderLabels, Histogram>,
    pub run_transitions: Family<TransitionLabels, Counter>,
    pub reaction_seconds: Histogram,
    pub hook_seconds: Histogram,
    pub zulip_calls: Family<CallLabels, Counter>,
    pub zulip_rate_limited: Counter,
    pub pacer_wait_seconds: FloatCounter,
    pub plugin_calls: Family<PluginLabels, Counter>,
    pub plugin_fuel: Family<NameLabels, Counter>,
    pub github_calls: Family<OutcomeLabels, Counter>,
    pub github_remaining: Family<NameLabels, IntGauge>,
    pub asana_calls: Family<OutcomeLabels, Counter>,
    pub sandbox_refusals: Counter,
    pub transport_connected: Family<NameLabels, IntGauge>,
    // State, read from the database at each scrape.
    pub database_up: IntGauge,
    pub tasks: Family<StatusLabels, IntGauge>,
    pub runs: Family<StateLabels, IntGauge>,
    pub workers_running: IntGauge,
    pub workers_limit: IntGauge,
    pub escalations_waiting: IntGauge,
    pub escalation_oldest_seconds: FloatGauge,
    pub outbox_depth: IntGauge,
    pub outbox_oldest_seconds: FloatGauge,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// The process's metrics.
pub fn get() -> &'static Metrics {
    &METRICS
}

impl Metrics {
    fn new() -> Metrics {
        let mut registry = Registry::with_prefix("eagle");
        let m = Metrics {
            requests: Family::default(),
            decisions: Family::default(),
            decision_seconds: Family::new_with_constructor(latency),
            run_transitions: Family::default(),
            reaction_seconds: latency(),
            hook_seconds: latency(),
            zulip_calls: Family::default(),
            zulip_rate_limited: Counter::default(),
            pacer_wait_seconds: FloatCounter::default(),
            plugin_calls: Family::default(),
            plugin_fuel: Family::default(),
            github_calls: Family::default(),
            github_remaining: Family::default(),
            asana_calls: Family::default(),
            sandbox_refusals: Counter::default(),
            transport_connected: Family::default(),
            database_up: IntGauge::default(),
            tasks: Family::default(),
            runs: Family::default(),
            workers_running: IntGauge::default(),
            workers_limit: IntGauge::default(),
            escalations_waiting: IntGauge::default(),
            escalation_oldest_seconds: FloatGauge::default(),
            outbox_depth: IntGauge::default(),
            outbox_oldest_seconds: FloatGauge::default(),
            registry: Registry::default(),
        };
        let r = &mut registry;
        r.register(
            "requests",
            "Worker requests recorded, by action",
            m.requests.clone(),
        );
        r.register(
            "decisions",
            "Requests decided, by action, outcome and who decided (the plugin, or human)",
            m.decisions.clone(),
        );
        r.register(
            "decision_seconds",
            "From a request's recording to its decision",
            m.decision_seconds.clone(),
        );
        r.register(
            "run_transitions",
            "Run state changes, by the states left and entered",
            m.run_transitions.clone(),
        );
        r.register(
            "reaction_seconds",
            "From a chat message handed to Eagle to its answer stored for delivery",
            m.reaction_seconds.clone(),
        );
        r.register(
            "hook_seconds",
            "The runner's answer to one tool-call hook of a worker",
            m.hook_seconds.clone(),
        );
        r.register(
            "zulip_calls",
            "Zulip API calls, by endpoint and outcome",
            m.zulip_calls.clone(),
        );
        r.register(
            "zulip_rate_limited",
            "Zulip answers 429",
            m.zulip_rate_limited.clone(),
        );
        r.register(
            "zulip_pacer_wait_seconds",
            "Time spent waiting for Zulip's rate-limit budget",
            m.pacer_wait_seconds.clone(),
        );
        r.register(
            "plugin_calls",
            "Policy plugin calls, by plugin and outcome",
            m.plugin_calls.clone(),
        );
        r.register(
            "plugin_fuel",
            "Fuel the policy plugins consumed",
            m.plugin_fuel.clone(),
        );
        r.register(
            "github_calls",
            "GitHub API calls, by outcome",
            m.github_calls.clone(),
        );
        r.register(
            "github_rate_remaining",
            "GitHub's remaining rate-limit budget, by resource, as last answered",
            m.github_remaining.clone(),
        );
        r.register(
            "asana_calls",
            "Asana API calls, by outcome",
            m.asana_calls.clone(),
        );
        r.register(
            "sandbox_refusals",
            "Connections the sandbox's egress proxy refused",
            m.sandbox_refusals.clone(),
        );
        r.register(
            "transport_connected",
            "Whether each identity's chat transport is connected (its event queue answers)",
            m.transport_connected.clone(),
        );
        r.register(
            "database_up",
            "Whether the last scrape could read the database (1) or not (0)",
            m.database_up.clone(),
        );
        r.register("tasks", "Tasks, by status", m.tasks.clone());
        r.register("runs", "Runs, by state", m.runs.clone());
        r.register(
            "workers_running",
            "Workers running now (worker slots held), across every instance",
            m.workers_running.clone(),
        );
        r.register(
            "workers_limit",
            "The global worker limit (runner.max_workers)",
            m.workers_limit.clone(),
        );
        r.register(
            "escalations_waiting",
            "Requests escalated to a human and not answered yet",
            m.escalations_waiting.clone(),
        );
        r.register(
            "escalation_oldest_age_seconds",
            "How long the oldest waiting escalation has waited",
            m.escalation_oldest_seconds.clone(),
        );
        r.register(
            "outbox_depth",
            "Chat messages waiting for delivery",
            m.outbox_depth.clone(),
        );
        r.register(
            "outbox_oldest_age_seconds",
            "How long the oldest undelivered chat message has waited",
            m.outbox_oldest_seconds.clone(),
        );
        Metrics { registry, ..m }
    }

    /// The text exposition (OpenMetrics) of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// A decision, with how long its request waited for it.
    pub fn decided(&self, action: &str, outcome: &str, decided_by: &str, waited: Option<Duration>) {
        self.decisions
            .get_or_create(&DecisionLabels {
                action: action.to_string(),
                outcome: outcome.to_string(),
                decided_by: decided_by.to_string(),
            })
            .inc();
        if let Some(waited) = waited {
            let by = if decided_by == "human" {
                "human"
            } else {
                "policy"
            };
            self.decision_seconds
                .get_or_create(&DeciderLabels { by: by.into() })
                .observe(waited.as_secs_f64());
        }
    }

    /// Whether `identity`'s chat transport is connected.
    pub fn connected(&self, identity: &str, up: bool) {
        self.transport_connected
            .get_or_create(&NameLabels {
                name: identity.to_string(),
            })
            .set(i64::from(up));
    }

    /// Whether `identity`'s chat transport said it is connected.
    pub fn is_connected(&self, identity: &str) -> bool {
        self.transport_connected
            .get_or_create(&NameLabels {
                name: identity.to_string(),
            })
            .get()
            == 1
    }

    /// A call to Zulip and how it ended.
    pub fn zulip_call(&self, endpoint: &str, outcome: &str) {
        self.zulip_calls
            .get_or_create(&CallLabels {
                endpoint: endpoint.to_string(),
                outcome: outcome.to_string(),
            })
            .inc();
        if outcome == "rate_limited" {
            self.zulip_rate_limited.inc();
        }
    }

    /// A plugin call and its outcome, with the fuel it burnt.
    pub fn plugin_call(&self, plugin: &str, outcome: &str, fuel: u64) {
        self.plugin_calls
            .get_or_create(&PluginLabels {
                plugin: plugin.to_string(),
                outcome: outcome.to_string(),
            })
            .inc();
        if fuel > 0 {
            self.plugin_fuel
                .get_or_create(&NameLabels {
                    name: plugin.to_string(),
                })
                .inc_by(fuel);
        }
    }
}

/// Counts one call of an API by how it ended.
pub fn count(calls: &Family<OutcomeLabels, Counter>, outcome: &str) {
    calls
        .get_or_create(&OutcomeLabels {
            outcome: outcome.to_string(),
        })
        .inc();
}

/// The outcome label of an HTTP status.
pub fn http_outcome(status: u16) -> &'static str {
    match status {
        200..=399 => "ok",
        429 => "rate_limited",
        400..=499 => "client_error",
        _ => "server_error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exposition_names_each_family_with_its_labels() {
        let m = Metrics::new();
        m.decided(
            "merge_pr",
            "escalate",
            "default-approval",
            Some(Duration::from_millis(3)),
        );
        m.zulip_call("messages", "rate_limited");
        m.runs
            .get_or_create(&StateLabels { state: "pr".into() })
            .set(2);
        let text = m.encode();
        assert!(text.contains(
            "eagle_decisions_total{action=\"merge_pr\",outcome=\"escalate\",decided_by=\"default-approval\"} 1"
        ), "{text}");
        assert!(
            text.contains("eagle_decision_seconds_count{by=\"policy\"} 1"),
            "{text}"
        );
        assert!(text.contains("eagle_zulip_rate_limited_total 1"), "{text}");
        assert!(text.contains("eagle_runs{state=\"pr\"} 2"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
