//! The Eagle policy plugin SDK.
//!
//! A plugin is a type that implements [`Policy`] and is exported with
//! [`export_policy!`]:
//!
//! ```ignore
//! use eagle_policy_sdk::{Config, Decision, Policy, Request, Metadata, export_policy};
//!
//! struct NoMerges;
//!
//! impl Policy for NoMerges {
//!     fn metadata() -> Metadata {
//!         Metadata::new("no-merges", env!("CARGO_PKG_VERSION"), "denies every merge_pr request")
//!             .deciding()
//!     }
//!     fn decide(_config: &Config, request: &Request) -> Decision {
//!         if request.action == "merge_pr" {
//!             Decision::deny("merging is for humans")
//!         } else {
//!             Decision::abstain()
//!         }
//!     }
//! }
//!
//! export_policy!(NoMerges);
//! ```
//!
//! Build it as a `cdylib` for `wasm32-wasip2` and drop the `.wasm` into
//! Eagle's plugin directory. Every method but `metadata` has a default that
//! abstains, so a plugin implements only what it judges.

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "plugin",
        pub_export_macro: true,
        default_bindings_module: "eagle_policy_sdk::bindings",
    });
}

pub use bindings::eagle::policy::host::Level;
pub use bindings::eagle::policy::types::{
    Decision, FilterVerdict, Metadata, Request, RequestKind, Task, TaskState, Verdict,
};

/// Writes a line to Eagle's log, tagged with this plugin.
pub fn log(level: Level, message: &str) {
    bindings::eagle::policy::host::log(level, message);
}

/// The plugin's configuration: the JSON object from the profile.
#[derive(Debug, Clone, Default)]
pub struct Config {
    value: serde_json::Value,
}

impl Config {
    /// Parses the configuration text Eagle passes in. Text that is not a
    /// JSON object gives an empty configuration (and a log line), so a
    /// plugin falls back to its defaults rather than failing.
    pub fn parse(text: &str) -> Config {
        match serde_json::from_str::<serde_json::Value>(text) {
            Ok(value @ serde_json::Value::Object(_)) => Config { value },
            _ => {
                log(
                    Level::Warn,
                    "configuration is not a JSON object; using defaults",
                );
                Config::default()
            }
        }
    }

    /// The raw JSON value.
    pub fn json(&self) -> &serde_json::Value {
        &self.value
    }

    /// A string setting.
    pub fn str(&self, key: &str) -> Option<&str> {
        self.value.get(key)?.as_str()
    }

    /// A list-of-strings setting (a single string counts as a list of one).
    pub fn strings(&self, key: &str) -> Option<Vec<String>> {
        match self.value.get(key)? {
            serde_json::Value::String(s) => Some(vec![s.clone()]),
            serde_json::Value::Array(items) => Some(
                items
                    .iter()
                    .filter_map(|i| i.as_str().map(str::to_string))
                    .collect(),
            ),
            _ => None,
        }
    }

    /// A boolean setting.
    pub fn bool(&self, key: &str) -> Option<bool> {
        self.value.get(key)?.as_bool()
    }
}

impl Metadata {
    /// Metadata for a plugin that neither decides nor filters yet; chain
    /// [`Metadata::deciding`] and [`Metadata::filtering`].
    pub fn new(name: &str, version: &str, description: &str) -> Metadata {
        Metadata {
            name: name.into(),
            version: version.into(),
            description: description.into(),
            decides_requests: false,
            filters_tasks: false,
        }
    }

    /// Says the plugin votes on requests.
    pub fn deciding(mut self) -> Metadata {
        self.decides_requests = true;
        self
    }

    /// Says the plugin votes on tasks.
    pub fn filtering(mut self) -> Metadata {
        self.filters_tasks = true;
        self
    }
}

impl Decision {
    pub fn approve() -> Decision {
        Decision {
            verdict: Verdict::Approve,
            notify_owner: false,
        }
    }
    pub fn deny(reason: impl Into<String>) -> Decision {
        Decision {
            verdict: Verdict::Deny(reason.into()),
            notify_owner: false,
        }
    }
    pub fn escalate(reason: impl Into<String>) -> Decision {
        Decision {
            verdict: Verdict::Escalate(reason.into()),
            notify_owner: false,
        }
    }
    pub fn abstain() -> Decision {
        Decision {
            verdict: Verdict::Abstain,
            notify_owner: false,
        }
    }
    /// Also tell the owner (the notes' "deny and notify").
    pub fn notify_owner(mut self) -> Decision {
        self.notify_owner = true;
        self
    }
}

/// A policy plugin. Only `metadata` is required; the rest abstain by default.
pub trait Policy {
    /// Who the plugin is.
    fn metadata() -> Metadata;

    /// Votes on a worker's request.
    fn decide(config: &Config, request: &Request) -> Decision {
        let _ = (config, request);
        Decision::abstain()
    }

    /// Votes on whether to take a task.
    fn filter(config: &Config, task: &Task) -> FilterVerdict {
        let _ = (config, task);
        FilterVerdict::Abstain
    }
}

/// Connects a [`Policy`] to the component's exports.
#[doc(hidden)]
pub struct Adapter<P>(core::marker::PhantomData<P>);

impl<P: Policy> bindings::exports::eagle::policy::policy::Guest for Adapter<P> {
    fn describe() -> Metadata {
        install_panic_hook();
        P::metadata()
    }
    fn decide(config: String, request: Request) -> Decision {
        install_panic_hook();
        P::decide(&Config::parse(&config), &request)
    }
    fn filter(config: String, task: Task) -> FilterVerdict {
        install_panic_hook();
        P::filter(&Config::parse(&config), &task)
    }
}

/// A panic's message goes to Eagle's log before the instance traps, so that
/// Eagle can say why a plugin failed (it has no stderr to print to).
fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            log(Level::Error, &format!("panic: {info}"));
        }));
    });
}

/// Exports a [`Policy`] implementation as the plugin's `eagle:policy/policy`.
#[macro_export]
macro_rules! export_policy {
    ($policy:ty) => {
        type __EaglePolicyAdapter = $crate::Adapter<$policy>;
        $crate::bindings::export!(__EaglePolicyAdapter with_types_in $crate::bindings);
    };
}
