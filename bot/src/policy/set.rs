//! The plugin set of a profile, hot reload, and the [`PolicyHost`] API.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use arc_swap::ArcSwap;

use super::compose::{self, Decision, FilterDecision};
use super::dropin::{Origin, unsafe_reason, wanted};
use super::engine::{CompileSource, PolicyEngine};
use super::plugin::{LoadedPlugin, PluginError, failed_decision, failed_filter};
use super::{PluginIdentity, PolicyRequest, PolicyTask};
use crate::profile::{PluginLimits, PluginSource, PluginSpec, PolicySettings};

/// The plugins compiled into the binary.
const BUILTINS: &[(&str, &[u8])] = &[
    (
        "default-approval",
        include_bytes!(concat!(env!("OUT_DIR"), "/default-approval.wasm")),
    ),
    (
        "default-filter",
        include_bytes!(concat!(env!("OUT_DIR"), "/default-filter.wasm")),
    ),
];

/// The bytes of a built-in plugin.
pub fn builtin(name: &str) -> Option<&'static [u8]> {
    BUILTINS.iter().find(|(n, _)| *n == name).map(|(_, b)| *b)
}

/// What a file looked like when last read: a cheap change detector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(path).ok()?;
    Some(Stamp {
        modified: meta.modified().ok(),
        len: meta.len(),
    })
}

/// A plugin's state in the set.
#[derive(Debug, Clone)]
pub enum SlotState {
    Ready(Arc<LoadedPlugin>),
    /// It could not be loaded; it votes escalate / keep until a good file appears.
    Failed {
        sha256: Option<String>,
        error: PluginError,
    },
}

#[derive(Debug, Clone)]
struct Slot {
    origin: Origin,
    limits: PluginLimits,
    config_json: String,
    state: SlotState,
    stamp: Option<Stamp>,
    /// A newer file that was refused, while the previous version stays in place.
    rejected: Option<String>,
}

impl Slot {
    fn label(&self) -> String {
        match &self.origin {
            Origin::Builtin(name) => format!("builtin:{name}"),
            Origin::File(path) => path.display().to_string(),
        }
    }

    /// This slot's vote on a request: the plugin's, or escalate if it never loaded.
    fn decide(&self, request: &PolicyRequest) -> super::Vote<super::Verdict> {
        match &self.state {
            SlotState::Ready(plugin) => plugin.decide(request),
            SlotState::Failed { error, .. } => failed_decision(self.identity(), error.clone()),
        }
    }

    /// This slot's vote on a task: the plugin's, or keep if it never loaded.
    fn filter(&self, task: &PolicyTask) -> super::Vote<super::FilterVerdict> {
        match &self.state {
            SlotState::Ready(plugin) => plugin.filter(task),
            SlotState::Failed { error, .. } => failed_filter(self.identity(), error.clone()),
        }
    }

    /// Who votes for this slot: the plugin, or its source if it never loaded.
    fn identity(&self) -> PluginIdentity {
        match &self.state {
            SlotState::Ready(plugin) => plugin.identity.clone(),
            SlotState::Failed { sha256, .. } => PluginIdentity {
                name: self.label(),
                version: "?".into(),
                sha256: sha256.clone().unwrap_or_else(|| "-".into()),
                source: self.label(),
            },
        }
    }
}

/// What `eagle policy list` shows of one plugin.
#[derive(Debug, Clone)]
pub struct PluginStatus {
    pub identity: PluginIdentity,
    pub description: String,
    pub interface_version: Option<String>,
    /// `ready`, `ready (cached)`, `switched off …`, or `failed: …`.
    pub state: String,
    /// Whether the plugin loaded (a failed one votes escalate / keep).
    pub loaded: bool,
    pub limits: PluginLimits,
    /// A newer file refused while this version stays in place.
    pub rejected: Option<String>,
}

/// One immutable generation of plugins.
#[derive(Debug, Default)]
struct PluginSet {
    slots: Vec<Slot>,
}

struct Inner {
    engine: PolicyEngine,
    settings: PolicySettings,
    cache_dir: Option<PathBuf>,
    set: ArcSwap<PluginSet>,
    /// Reloads run one at a time.
    reload_lock: tokio::sync::Mutex<()>,
}

/// Decides on requests and tasks with a profile's plugins. Cheap to clone.
#[derive(Clone)]
pub struct PolicyHost {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for PolicyHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyHost").finish_non_exhaustive()
    }
}

impl PolicyHost {
    /// Loads every plugin of `settings`. Never fails because of a plugin: one
    /// that cannot load is kept as a failed slot that votes escalate / keep.
    /// Compiled components are cached in `cache_dir`.
    pub async fn load(
        settings: &PolicySettings,
        cache_dir: Option<PathBuf>,
    ) -> anyhow::Result<PolicyHost> {
        let engine = PolicyEngine::new()?;
        let inner = Arc::new(Inner {
            engine,
            settings: settings.clone(),
            cache_dir,
            set: ArcSwap::from_pointee(PluginSet::default()),
            reload_lock: tokio::sync::Mutex::new(()),
        });
        let host = PolicyHost { inner };
        host.reload().await;
        Ok(host)
    }

    /// The host for a profile's plugins, with its compiled-plugin cache.
    pub async fn for_profile(profile: &crate::profile::Profile) -> anyhow::Result<PolicyHost> {
        PolicyHost::load(&profile.eagle.policy, Some(profile.plugin_cache_dir())).await
    }

    /// A host for one plugin file with default limits (`eagle policy test --plugin`).
    pub async fn single_file_with_config(
        path: &Path,
        config_json: &str,
        cache_dir: Option<PathBuf>,
    ) -> anyhow::Result<PolicyHost> {
        let path = std::path::absolute(path)?;
        let settings = PolicySettings {
            dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
            load_all: false,
            exclude: Vec::new(),
            reload_interval: std::time::Duration::from_secs(3600),
            plugins: vec![PluginSpec {
                source: PluginSource::File(path.to_path_buf()),
                config_json: config_json.into(),
                limits: PluginLimits::default(),
            }],
        };
        PolicyHost::load(&settings, cache_dir).await
    }

    /// Runs `f` on the current generation of plugins, off the async
    /// threads (a plugin call may take up to its timeout). Decisions that
    /// started keep their generation even if a reload swaps in another.
    async fn evaluate<D: Send + 'static>(
        &self,
        f: impl FnOnce(&PluginSet) -> D + Send + 'static,
    ) -> Result<D, String> {
        let set = self.inner.set.load_full();
        let run = move || {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&set)))
                .map_err(|panic| crate::ground::text::panic_message(panic.as_ref()))
        };
        // On the multi-threaded runtime the call runs right here, the
        // thread's other tasks moving elsewhere meanwhile (a hop to a
        // blocking thread costs more than a decision); elsewhere it hops.
        match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
            Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(run),
            _ => tokio::task::spawn_blocking(run)
                .await
                .map_err(|error| error.to_string())
                .and_then(|result| result),
        }
    }

    /// The votes of every plugin on a request, composed.
    pub async fn decide(&self, request: &PolicyRequest) -> Decision {
        let request = request.clone();
        let evaluated = self
            .evaluate(move |set| {
                compose::decide(set.slots.iter().map(|slot| slot.decide(&request)).collect())
            })
            .await;
        evaluated.unwrap_or_else(|error| {
            // A host bug, not a plugin's: still never approve.
            tracing::error!(%error, "a policy evaluation failed");
            compose::decide(vec![failed_decision(
                host_identity(),
                PluginError::Trap(format!("the evaluation failed: {error}")),
            )])
        })
    }

    /// The votes of every plugin on a task, composed.
    pub async fn filter(&self, task: &PolicyTask) -> FilterDecision {
        let task = task.clone();
        let evaluated = self
            .evaluate(move |set| {
                compose::filter(set.slots.iter().map(|slot| slot.filter(&task)).collect())
            })
            .await;
        evaluated.unwrap_or_else(|error| {
            // Never drop a task because of a host bug: keep it.
            tracing::error!(%error, "a policy evaluation failed");
            compose::filter(vec![])
        })
    }

    /// For benchmarks: `n` decisions by the first loaded plugin in one
    /// instance, reused (the "warm" cost, without a fresh store per call).
    pub fn warm_decisions(
        &self,
        request: &PolicyRequest,
        n: u32,
    ) -> Option<Result<std::time::Duration, PluginError>> {
        let set = self.inner.set.load();
        set.slots.iter().find_map(|slot| match &slot.state {
            SlotState::Ready(plugin) => Some(plugin.warm_decisions(request, n)),
            SlotState::Failed { .. } => None,
        })
    }

    /// For benchmarks: `n` decisions by the first loaded plugin, each in a
    /// fresh store (as the bot makes them) but on this thread: the cost of
    /// a decision without the hop to a blocking thread.
    pub fn fresh_decisions(&self, request: &PolicyRequest, n: u32) -> Option<std::time::Duration> {
        let set = self.inner.set.load();
        let plugin = set.slots.iter().find_map(|slot| match &slot.state {
            SlotState::Ready(plugin) => Some(plugin),
            SlotState::Failed { .. } => None,
        })?;
        let started = std::time::Instant::now();
        for _ in 0..n {
            plugin.decide(request);
        }
        Some(started.elapsed())
    }

    /// The plugins and their states.
    pub fn plugins(&self) -> Vec<PluginStatus> {
        let set = self.inner.set.load();
        set.slots
            .iter()
            .map(|slot| {
                let (description, interface_version, state) = match &slot.state {
                    SlotState::Ready(plugin) => (
                        plugin.description.clone(),
                        Some(plugin.interface_version.clone()),
                        if plugin.is_broken() {
                            "switched off after repeated failures".to_string()
                        } else if plugin.compiled == CompileSource::Cache {
                            "ready (cached)".to_string()
                        } else {
                            "ready".to_string()
                        },
                    ),
                    SlotState::Failed { error, .. } => {
                        (String::new(), None, format!("failed: {error}"))
                    }
                };
                PluginStatus {
                    identity: slot.identity(),
                    description,
                    interface_version,
                    state,
                    loaded: matches!(slot.state, SlotState::Ready(_)),
                    limits: slot.limits,
                    rejected: slot.rejected.clone(),
                }
            })
            .collect()
    }

    /// Checks the plugin files and swaps in a new set if any changed. A file
    /// that changed is compiled off the hot path; in-flight decisions finish
    /// on the set they started with. Returns what changed, for the log.
    pub async fn reload(&self) -> Vec<String> {
        let _one_at_a_time = self.inner.reload_lock.lock().await;
        let inner = Arc::clone(&self.inner);
        let current = inner.set.load_full();
        let work = move || next_generation(&inner, &current);
        match tokio::task::spawn_blocking(work).await {
            Ok(Some((set, changes))) => {
                self.inner.set.store(Arc::new(set));
                changes
            }
            Ok(None) => Vec::new(),
            Err(error) => {
                tracing::error!(%error, "plugin reload failed");
                Vec::new()
            }
        }
    }

    /// How often the plugin directory is looked at for changes.
    pub fn reload_interval(&self) -> std::time::Duration {
        self.inner.settings.reload_interval
    }
}

fn host_identity() -> PluginIdentity {
    PluginIdentity {
        name: "eagle".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        sha256: "-".into(),
        source: "host".into(),
    }
}

/// Builds the next set from the current one, reading only what changed.
/// `None` when nothing changed.
fn next_generation(inner: &Inner, current: &PluginSet) -> Option<(PluginSet, Vec<String>)> {
    let mut changes = Vec::new();
    let mut slots = Vec::new();
    let wanted = wanted(&inner.settings);
    for (origin, limits, config_json) in wanted {
        let previous = current
            .slots
            .iter()
            .find(|s| s.origin == origin && s.limits == limits && s.config_json == config_json);
        let slot = match (&origin, previous) {
            (Origin::Builtin(_), Some(previous)) => previous.clone(),
            (Origin::Builtin(name), None) => {
                let bytes = builtin(name).unwrap_or_default();
                let state = load_state(
                    inner,
                    bytes,
                    &format!("builtin:{name}"),
                    limits,
                    &config_json,
                );
                changes.push(describe_load(&format!("builtin:{name}"), &state));
                Slot {
                    origin: origin.clone(),
                    limits,
                    config_json,
                    state,
                    stamp: None,
                    rejected: None,
                }
            }
            (Origin::File(path), previous) => {
                let now = stamp(path);
                // Judged on every look: a chmod changes neither size nor mtime.
                if let Some(reason) = unsafe_reason(&inner.settings.dir, path) {
                    let error = PluginError::Unsafe {
                        path: path.display().to_string(),
                        reason,
                    };
                    let same = previous.is_some_and(|p| {
                        matches!(&p.state, SlotState::Failed { error: old, .. } if *old == error)
                    });
                    if !same {
                        tracing::error!(plugin = %path.display(), %error, "a policy plugin was refused; it votes escalate (keep for tasks)");
                        changes.push(format!("{}: {error}", path.display()));
                    }
                    slots.push(Slot {
                        origin: origin.clone(),
                        limits,
                        config_json,
                        state: SlotState::Failed {
                            sha256: None,
                            error,
                        },
                        stamp: now,
                        rejected: None,
                    });
                    continue;
                }
                // A file refused as unsafe is read again once it is safe.
                let previous = previous.filter(|p| {
                    !matches!(
                        &p.state,
                        SlotState::Failed {
                            error: PluginError::Unsafe { .. },
                            ..
                        }
                    )
                });
                match previous {
                    Some(previous) if previous.stamp == now && now.is_some() => previous.clone(),
                    Some(previous) if now.is_none() && previous.stamp.is_none() => previous.clone(),
                    _ => {
                        let (slot, change) =
                            reload_file(inner, path, previous, now, limits, &config_json);
                        changes.extend(change);
                        slot
                    }
                }
            }
        };
        slots.push(slot);
    }
    let same_shape = slots.len() == current.slots.len()
        && slots
            .iter()
            .zip(&current.slots)
            .all(|(a, b)| a.origin == b.origin);
    if changes.is_empty() && same_shape && !current.slots.is_empty() {
        // Stamps may have moved without content changes; keep them fresh.
        let stamps_moved = slots
            .iter()
            .zip(&current.slots)
            .any(|(a, b)| a.stamp != b.stamp);
        if !stamps_moved {
            return None;
        }
    }
    if !same_shape {
        changes.push(format!("{} plugin(s) configured", slots.len()));
    }
    Some((PluginSet { slots }, changes))
}

fn reload_file(
    inner: &Inner,
    path: &Path,
    previous: Option<&Slot>,
    now: Option<Stamp>,
    limits: PluginLimits,
    config_json: &str,
) -> (Slot, Option<String>) {
    let label = path.display().to_string();
    let read = match std::fs::metadata(path) {
        // Refused before it is read or compiled.
        Ok(meta) if meta.len() > super::plugin::MAX_PLUGIN_BYTES as u64 => {
            Err(PluginError::TooLarge {
                path: label.clone(),
                size: meta.len(),
                limit: super::plugin::MAX_PLUGIN_BYTES,
            })
        }
        _ => std::fs::read(path).map_err(|error| {
            if error.kind() == std::io::ErrorKind::NotFound {
                PluginError::Missing {
                    path: label.clone(),
                }
            } else {
                PluginError::Read {
                    path: label.clone(),
                    message: error.to_string(),
                }
            }
        }),
    };
    let bytes = match read {
        Ok(bytes) => bytes,
        // A configured plugin that is gone votes escalate (missing), never
        // its old code for ever.
        Err(error @ PluginError::Missing { .. }) => {
            let change = Some(format!("{label}: {error}"));
            let slot = Slot {
                origin: Origin::File(path.to_path_buf()),
                limits,
                config_json: config_json.to_string(),
                state: SlotState::Failed {
                    sha256: None,
                    error,
                },
                stamp: now,
                rejected: None,
            };
            return (slot, change);
        }
        Err(error) => {
            return match previous {
                Some(
                    previous @ Slot {
                        state: SlotState::Ready(_),
                        ..
                    },
                ) => {
                    let mut kept = previous.clone();
                    kept.stamp = now;
                    kept.rejected = Some(error.to_string());
                    (
                        kept,
                        Some(format!("{label}: {error}; the previous version stays")),
                    )
                }
                _ => {
                    let change = Some(format!("{label}: {error}"));
                    let slot = Slot {
                        origin: Origin::File(path.to_path_buf()),
                        limits,
                        config_json: config_json.to_string(),
                        state: SlotState::Failed {
                            sha256: None,
                            error,
                        },
                        stamp: now,
                        rejected: None,
                    };
                    (slot, change)
                }
            };
        }
    };
    let sha256 = super::content_hash(&bytes);
    if let Some(previous) = previous {
        let same_content = match &previous.state {
            SlotState::Ready(plugin) => plugin.identity.sha256 == sha256,
            SlotState::Failed { sha256: old, .. } => old.as_deref() == Some(sha256.as_str()),
        };
        if same_content {
            let mut kept = previous.clone();
            kept.stamp = now;
            return (kept, None);
        }
    }
    let state = load_state(inner, &bytes, &label, limits, config_json);
    match (&state, previous) {
        (
            SlotState::Failed { error, .. },
            Some(
                previous @ Slot {
                    state: SlotState::Ready(_),
                    ..
                },
            ),
        ) => {
            let mut kept = previous.clone();
            kept.stamp = now;
            kept.rejected = Some(error.to_string());
            tracing::error!(plugin = %label, %error, "a changed plugin was refused; the previous version stays");
            (
                kept,
                Some(format!(
                    "{label}: refused ({error}); the previous version stays"
                )),
            )
        }
        _ => {
            let change = describe_load(&label, &state);
            let slot = Slot {
                origin: Origin::File(path.to_path_buf()),
                limits,
                config_json: config_json.to_string(),
                state,
                stamp: now,
                rejected: None,
            };
            (slot, Some(change))
        }
    }
}

fn load_state(
    inner: &Inner,
    bytes: &[u8],
    label: &str,
    limits: PluginLimits,
    config_json: &str,
) -> SlotState {
    match LoadedPlugin::load(
        &inner.engine,
        bytes,
        label,
        limits,
        config_json,
        inner.cache_dir.as_deref(),
    ) {
        Ok(plugin) => SlotState::Ready(Arc::new(plugin)),
        Err(error) => {
            tracing::error!(plugin = label, %error, "a policy plugin failed to load; it votes escalate (keep for tasks)");
            SlotState::Failed {
                sha256: Some(super::content_hash(bytes)),
                error,
            }
        }
    }
}

fn describe_load(label: &str, state: &SlotState) -> String {
    match state {
        SlotState::Ready(plugin) => format!("{label}: loaded {}", plugin.identity),
        SlotState::Failed { error, .. } => format!("{label}: failed to load: {error}"),
    }
}
