//! One plugin: loading (compile or cache, interface version, imports) and
//! calling it in a fresh, bounded store per call.

use std::sync::Mutex;

use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, Linker, ResourceType};
use wasmtime::{ResourceLimiter, Store, Trap};

use super::bindings::{self, Level, Metadata, Plugin, PluginPre};
use super::engine::{CompileSource, EPOCH_TICK, PolicyEngine};
use super::{
    FilterVerdict, PluginIdentity, PolicyRequest, PolicyTask, SUPPORTED_VERSIONS, Verdict, Vote,
};
use crate::profile::PluginLimits;

/// The package whose interfaces plugins export and import.
const PACKAGE: &str = "eagle:policy";
/// WASI interfaces a plugin is refused for importing: capabilities it is never granted.
const FORBIDDEN_IMPORTS: &[&str] = &["wasi:filesystem", "wasi:sockets", "wasi:http"];
/// Consecutive failures after which a plugin is not called again until its file changes.
pub const BREAKER_THRESHOLD: u32 = 3;
/// The longest reason a plugin may return.
const MAX_REASON_BYTES: usize = 4096;
/// Log lines kept per call, and their length.
const MAX_LOG_LINES: usize = 32;
const MAX_LOG_LINE_BYTES: usize = 1024;

/// Why a plugin could not be used. Every one makes the plugin vote
/// escalate (requests) or keep (tasks).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PluginError {
    #[error("cannot read {path}: {message}")]
    Read { path: String, message: String },
    #[error("not a WebAssembly component: {0}")]
    NotComponent(String),
    #[error("{plugin} implements eagle:policy {found}; this Eagle supports {supported}")]
    Incompatible {
        plugin: String,
        found: String,
        supported: String,
    },
    #[error("{plugin} imports {import}, a capability plugins are never granted")]
    ForbiddenImport { plugin: String, import: String },
    #[error("cannot load: {0}")]
    Load(String),
    #[error("ran out of time ({timeout_ms} ms)")]
    Timeout { timeout_ms: u64 },
    #[error("ran out of fuel ({fuel} units)")]
    OutOfFuel { fuel: u64 },
    #[error("exceeded its memory limit of {limit_mib} MiB (asked for {asked} bytes)")]
    Memory { limit_mib: usize, asked: usize },
    #[error("overflowed its stack (too deep a recursion)")]
    StackOverflow,
    #[error("panicked: {0}")]
    Panic(String),
    #[error("was denied a capability it called: {0}")]
    CapabilityDenied(String),
    #[error("trapped: {0}")]
    Trap(String),
    #[error("returned garbage: {0}")]
    Garbage(String),
    #[error(
        "is switched off after {failures} failures in a row (last: {last}); it comes back when its file changes"
    )]
    CircuitOpen { failures: u32, last: String },
}

/// What a store carries for one call.
pub struct CallState {
    plugin: String,
    limits: PluginLimits,
    /// Linear memory in use across every memory of the call's instances:
    /// the cap is on the total, so many small memories cannot add up past it.
    memory_in_use: usize,
    /// Set when the plugin asked for more memory than its limit.
    memory_denied: Option<usize>,
    /// Log lines seen this call (more than are kept are counted, not written).
    log_lines: usize,
    /// Set when the plugin called a denied WASI function.
    denied: Option<String>,
    logs: Vec<(Level, String)>,
}

impl CallState {
    fn new(plugin: &str, limits: PluginLimits) -> Self {
        CallState {
            plugin: plugin.to_string(),
            limits,
            memory_in_use: 0,
            memory_denied: None,
            log_lines: 0,
            denied: None,
            logs: Vec::new(),
        }
    }

    fn panic_message(&self) -> Option<String> {
        self.logs
            .iter()
            .find_map(|(_, line)| line.strip_prefix("panic: "))
            .map(|message| {
                let message = message.replace("\\n", " ");
                message.split_whitespace().collect::<Vec<_>>().join(" ")
            })
    }
}

impl ResourceLimiter for CallState {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = self.memory_in_use - current.min(self.memory_in_use) + desired;
        if total > self.limits.memory_bytes {
            self.memory_denied = Some(total);
            wasmtime::bail!(
                "memory limit of {} bytes exceeded",
                self.limits.memory_bytes
            );
        }
        self.memory_in_use = total;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }

    fn instances(&self) -> usize {
        64
    }

    fn tables(&self) -> usize {
        64
    }

    fn memories(&self) -> usize {
        64
    }
}

/// The `types` interface has no functions; the world still wants it implemented.
impl bindings::TypesHost for CallState {}

impl bindings::Host for CallState {
    fn log(&mut self, level: Level, message: String) {
        self.log_lines += 1;
        if self.log_lines > MAX_LOG_LINES {
            if self.log_lines == MAX_LOG_LINES + 1 {
                tracing::warn!(plugin = %self.plugin, "the plugin logs too much; the rest of this call's lines are dropped");
            }
            return;
        }
        // Bounded, and with control characters escaped so that a plugin
        // cannot forge lines of Eagle's own log.
        let mut message: String = message
            .chars()
            .flat_map(|c| {
                if c.is_control() {
                    c.escape_default().collect::<Vec<_>>()
                } else {
                    vec![c]
                }
            })
            .collect();
        if message.len() > MAX_LOG_LINE_BYTES {
            let mut end = MAX_LOG_LINE_BYTES;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
            message.push('…');
        }
        let plugin = self.plugin.as_str();
        match level {
            Level::Debug => tracing::debug!(plugin, "{message}"),
            Level::Info => tracing::info!(plugin, "{message}"),
            Level::Warn => tracing::warn!(plugin, "{message}"),
            Level::Error => tracing::error!(plugin, "{message}"),
        }
        self.logs.push((level, message));
    }
}

/// Consecutive failures of a plugin.
#[derive(Debug, Default)]
struct Breaker {
    failures: u32,
    last: Option<PluginError>,
}

/// A loaded, callable plugin.
pub struct LoadedPlugin {
    pub identity: PluginIdentity,
    pub description: String,
    pub decides_requests: bool,
    pub filters_tasks: bool,
    /// The interface version the plugin was built against.
    pub interface_version: String,
    pub limits: PluginLimits,
    pub config_json: String,
    pub compiled: CompileSource,
    pre: PluginPre<CallState>,
    engine: wasmtime::Engine,
    breaker: Mutex<Breaker>,
}

impl std::fmt::Debug for LoadedPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedPlugin")
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

/// The version in an `eagle:policy/<iface>@x.y.z` name, if the name is one.
fn policy_version(name: &str) -> Option<&str> {
    let rest = name.strip_prefix(PACKAGE)?.strip_prefix('/')?;
    Some(rest.split_once('@').map_or("", |(_, v)| v))
}

/// Whether a plugin built against `version` runs on this host.
fn compatible(version: &str) -> bool {
    let ours: Vec<u64> = super::WIT_VERSION
        .split('.')
        .filter_map(|p| p.parse().ok())
        .collect();
    let theirs: Vec<u64> = version.split('.').filter_map(|p| p.parse().ok()).collect();
    if theirs.len() != 3 || ours.len() != 3 {
        return false;
    }
    // 0.x: the minor number is the breaking one.
    if ours[0] == 0 {
        theirs[0] == 0 && theirs[1] == ours[1]
    } else {
        theirs[0] == ours[0]
    }
}

/// Stubs every function and resource of a `wasi:*` instance import with a
/// trap that names the denied capability. Only `wasi:` names are stubbed:
/// stubbing everything would also hide a mismatched `eagle:policy/host`.
fn deny_wasi(
    linker: &mut Linker<CallState>,
    component: &Component,
    engine: &wasmtime::Engine,
) -> anyhow::Result<()> {
    for (name, item) in component.component_type().imports(engine) {
        if !name.starts_with("wasi:") {
            continue;
        }
        let ComponentItem::ComponentInstance(instance) = item.ty else {
            anyhow::bail!("unexpected WASI import {name}");
        };
        let mut scope = linker.instance(name)?;
        for (export, kind) in instance.exports(engine) {
            match kind.ty {
                ComponentItem::ComponentFunc(_) => {
                    let what = format!("{name}#{export}");
                    scope.func_new(export, move |mut store, _ty, _params, _results| {
                        store.data_mut().denied = Some(what.clone());
                        wasmtime::bail!("capability denied: {what}")
                    })?;
                }
                ComponentItem::Resource(_) => {
                    scope.resource(export, ResourceType::host::<()>(), |_, _| Ok(()))?;
                }
                _ => {}
            }
        }
    }
    Ok(())
}

impl LoadedPlugin {
    /// Loads a plugin from its bytes: compile (or cache), check the
    /// interface version and imports, link, and ask it who it is.
    pub fn load(
        engine: &PolicyEngine,
        bytes: &[u8],
        source: &str,
        limits: PluginLimits,
        config_json: &str,
        cache_dir: Option<&std::path::Path>,
    ) -> Result<LoadedPlugin, PluginError> {
        let sha256 = super::content_hash(bytes);
        if !bytes.starts_with(b"\0asm") {
            return Err(PluginError::NotComponent(format!(
                "{source} does not start with the WebAssembly magic bytes"
            )));
        }
        let (component, compiled) = engine
            .compile(bytes, &sha256, cache_dir)
            .map_err(|e| PluginError::NotComponent(format!("{source}: {e:#}")))?;
        let wasm = &engine.engine;
        let ty = component.component_type();
        let mut interface_version = None;
        let mut exports = Vec::new();
        for (name, _) in ty.exports(wasm) {
            if let Some(version) = policy_version(name)
                && name.starts_with("eagle:policy/policy")
            {
                interface_version = Some(version.to_string());
            }
            exports.push(name.to_string());
        }
        let Some(version) = interface_version else {
            return Err(PluginError::Load(format!(
                "{source} does not export eagle:policy/policy (it exports: {})",
                if exports.is_empty() {
                    "nothing".into()
                } else {
                    exports.join(", ")
                }
            )));
        };
        if !compatible(&version) {
            return Err(PluginError::Incompatible {
                plugin: source.to_string(),
                found: if version.is_empty() {
                    "(unversioned)".into()
                } else {
                    version
                },
                supported: SUPPORTED_VERSIONS.to_string(),
            });
        }
        for (name, _) in ty.imports(wasm) {
            if let Some(forbidden) = FORBIDDEN_IMPORTS.iter().find(|f| name.starts_with(**f)) {
                let _ = forbidden;
                return Err(PluginError::ForbiddenImport {
                    plugin: source.to_string(),
                    import: name.to_string(),
                });
            }
            if let Some(found) = policy_version(name)
                && !compatible(found)
            {
                return Err(PluginError::Incompatible {
                    plugin: source.to_string(),
                    found: format!("{found} (in its import {name})"),
                    supported: SUPPORTED_VERSIONS.to_string(),
                });
            }
        }
        let mut linker: Linker<CallState> = Linker::new(wasm);
        Plugin::add_to_linker::<CallState, wasmtime::component::HasSelf<CallState>>(
            &mut linker,
            |state| state,
        )
        .map_err(|e| PluginError::Load(format!("{e:#}")))?;
        deny_wasi(&mut linker, &component, wasm)
            .map_err(|e| PluginError::Load(format!("{e:#}")))?;
        let pre = linker
            .instantiate_pre(&component)
            .and_then(PluginPre::new)
            .map_err(|e| PluginError::Load(format!("{source}: {e:#}")))?;
        let mut plugin = LoadedPlugin {
            identity: PluginIdentity {
                name: source.to_string(),
                version: "?".into(),
                sha256,
                source: source.to_string(),
            },
            description: String::new(),
            decides_requests: false,
            filters_tasks: false,
            interface_version: version,
            limits,
            config_json: config_json.to_string(),
            compiled,
            pre,
            engine: wasm.clone(),
            breaker: Mutex::new(Breaker::default()),
        };
        let metadata =
            plugin.call(|store, bindings| bindings.eagle_policy_policy().call_describe(store))?;
        check_metadata(&metadata)?;
        plugin.identity.name = metadata.name;
        plugin.identity.version = metadata.version;
        plugin.description = metadata.description;
        plugin.decides_requests = metadata.decides_requests;
        plugin.filters_tasks = metadata.filters_tasks;
        Ok(plugin)
    }

    /// Runs one call in a fresh store with this plugin's limits.
    fn call<R>(
        &self,
        f: impl FnOnce(&mut Store<CallState>, &Plugin) -> wasmtime::Result<R>,
    ) -> Result<R, PluginError> {
        let mut store = Store::new(
            &self.engine,
            CallState::new(&self.identity.name, self.limits),
        );
        store.limiter(|state| state);
        let ticks = (self.limits.timeout.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64;
        store.set_epoch_deadline(ticks);
        store
            .set_fuel(self.limits.fuel)
            .map_err(|e| PluginError::Load(format!("{e:#}")))?;
        let result = self
            .pre
            .instantiate(&mut store)
            .and_then(|bindings| f(&mut store, &bindings));
        result.map_err(|error| self.classify(&error, store.data()))
    }

    /// Turns a wasmtime error into the failure it stands for.
    fn classify(&self, error: &wasmtime::Error, state: &CallState) -> PluginError {
        if let Some(asked) = state.memory_denied {
            return PluginError::Memory {
                limit_mib: self.limits.memory_bytes >> 20,
                asked,
            };
        }
        if let Some(message) = state.panic_message() {
            return PluginError::Panic(message);
        }
        match error.downcast_ref::<Trap>() {
            Some(Trap::OutOfFuel) => PluginError::OutOfFuel {
                fuel: self.limits.fuel,
            },
            Some(Trap::Interrupt) => PluginError::Timeout {
                timeout_ms: self.limits.timeout.as_millis() as u64,
            },
            Some(Trap::StackOverflow) => PluginError::StackOverflow,
            // Rust keeps large frames in a stack inside linear memory; running
            // off its end reads out of bounds.
            Some(Trap::MemoryOutOfBounds) => PluginError::Trap(
                "out-of-bounds memory access (a stack overflow inside the plugin, or a bug)".into(),
            ),
            Some(Trap::UnreachableCodeReached) => {
                PluginError::Panic("unreachable code reached (a Rust panic or abort)".into())
            }
            Some(trap) => PluginError::Trap(trap.to_string()),
            None => match &state.denied {
                Some(what) => PluginError::CapabilityDenied(what.clone()),
                None => PluginError::Trap(format!("{error:#}")),
            },
        }
    }

    /// Runs `f` unless the breaker is open; counts failures and successes.
    fn guarded<R>(&self, f: impl FnOnce() -> Result<R, PluginError>) -> Result<R, PluginError> {
        {
            let breaker = self.breaker.lock().unwrap_or_else(|p| p.into_inner());
            if breaker.failures >= BREAKER_THRESHOLD {
                return Err(PluginError::CircuitOpen {
                    failures: breaker.failures,
                    last: breaker
                        .last
                        .as_ref()
                        .map(ToString::to_string)
                        .unwrap_or_default(),
                });
            }
        }
        let result = f();
        let mut breaker = self.breaker.lock().unwrap_or_else(|p| p.into_inner());
        match &result {
            Ok(_) => *breaker = Breaker::default(),
            Err(error) => {
                breaker.failures += 1;
                breaker.last = Some(error.clone());
                tracing::warn!(plugin = %self.identity, %error, failures = breaker.failures, "plugin failed");
            }
        }
        result
    }

    /// Whether the breaker has switched the plugin off.
    pub fn is_broken(&self) -> bool {
        self.breaker
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .failures
            >= BREAKER_THRESHOLD
    }

    /// This plugin's vote on a request; a failure votes escalate.
    pub fn decide(&self, request: &PolicyRequest) -> Vote<Verdict> {
        let wit_request = bindings::exports::eagle::policy::policy::Request::from(request);
        let result = self.guarded(|| {
            let decision = self.call(|store, plugin| {
                plugin
                    .eagle_policy_policy()
                    .call_decide(store, &self.config_json, &wit_request)
            })?;
            let verdict = Verdict::from(decision.verdict);
            if let Verdict::Deny(reason) | Verdict::Escalate(reason) = &verdict {
                check_reason(reason)?;
            }
            Ok((verdict, decision.notify_owner))
        });
        match result {
            Ok((verdict, notify_owner)) => Vote {
                plugin: self.identity.clone(),
                verdict,
                notify_owner,
                failure: None,
            },
            Err(error) => failed_decision(self.identity.clone(), error),
        }
    }

    /// This plugin's vote on a task; a failure votes keep.
    pub fn filter(&self, task: &PolicyTask) -> Vote<FilterVerdict> {
        let wit_task = bindings::exports::eagle::policy::policy::Task::from(task);
        let result = self.guarded(|| {
            let verdict = self.call(|store, plugin| {
                plugin
                    .eagle_policy_policy()
                    .call_filter(store, &self.config_json, &wit_task)
            })?;
            let verdict = FilterVerdict::from(verdict);
            if let FilterVerdict::Skip(reason) = &verdict {
                check_reason(reason)?;
            }
            Ok(verdict)
        });
        match result {
            Ok(verdict) => Vote {
                plugin: self.identity.clone(),
                verdict,
                notify_owner: false,
                failure: None,
            },
            Err(error) => failed_filter(self.identity.clone(), error),
        }
    }
}

impl LoadedPlugin {
    /// For benchmarks: `n` decisions in one store and instance (no fresh
    /// instance per call), with unbounded fuel. Returns the total time.
    pub fn warm_decisions(
        &self,
        request: &PolicyRequest,
        n: u32,
    ) -> Result<std::time::Duration, PluginError> {
        let wit_request = bindings::exports::eagle::policy::policy::Request::from(request);
        let limits = PluginLimits {
            fuel: u64::MAX / 2,
            ..self.limits
        };
        let mut store = Store::new(&self.engine, CallState::new(&self.identity.name, limits));
        store.limiter(|state| state);
        store.set_epoch_deadline(u64::MAX / 2);
        store
            .set_fuel(limits.fuel)
            .map_err(|e| PluginError::Load(format!("{e:#}")))?;
        let plugin = self
            .pre
            .instantiate(&mut store)
            .map_err(|e| self.classify(&e, store.data()))?;
        let started = std::time::Instant::now();
        for _ in 0..n {
            plugin
                .eagle_policy_policy()
                .call_decide(&mut store, &self.config_json, &wit_request)
                .map_err(|e| self.classify(&e, store.data()))?;
        }
        Ok(started.elapsed())
    }
}

/// The fail-closed vote on a request: escalate, naming the failure.
pub fn failed_decision(plugin: PluginIdentity, error: PluginError) -> Vote<Verdict> {
    let text = error.to_string();
    // Load errors name the plugin themselves.
    let reason = if text.contains(&plugin.name) {
        format!("plugin failed: {text}")
    } else {
        format!("plugin {} {text}", plugin.name)
    };
    Vote {
        verdict: Verdict::Escalate(reason),
        plugin,
        notify_owner: true,
        failure: Some(error),
    }
}

/// The fail-closed vote on a task: keep (never silently drop a task).
pub fn failed_filter(plugin: PluginIdentity, error: PluginError) -> Vote<FilterVerdict> {
    Vote {
        plugin,
        verdict: FilterVerdict::Keep,
        notify_owner: false,
        failure: Some(error),
    }
}

fn check_reason(reason: &str) -> Result<(), PluginError> {
    if reason.len() > MAX_REASON_BYTES {
        return Err(PluginError::Garbage(format!(
            "a reason of {} bytes (the limit is {MAX_REASON_BYTES})",
            reason.len()
        )));
    }
    Ok(())
}

fn check_metadata(metadata: &Metadata) -> Result<(), PluginError> {
    let name_ok = !metadata.name.is_empty()
        && metadata.name.len() <= 64
        && metadata
            .name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !name_ok {
        return Err(PluginError::Garbage(format!(
            "its name {:?} is not 1-64 lower-case letters, digits, '-' or '_'",
            metadata.name.chars().take(80).collect::<String>()
        )));
    }
    if metadata.version.is_empty() || metadata.version.len() > 64 {
        return Err(PluginError::Garbage(
            "its version is empty or longer than 64 bytes".into(),
        ));
    }
    if metadata.description.len() > MAX_REASON_BYTES {
        return Err(PluginError::Garbage(format!(
            "a description of {} bytes (the limit is {MAX_REASON_BYTES})",
            metadata.description.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_versions() {
        assert_eq!(policy_version("eagle:policy/policy@0.1.0"), Some("0.1.0"));
        assert_eq!(policy_version("eagle:policy/host@0.2.3"), Some("0.2.3"));
        assert_eq!(policy_version("eagle:policy/policy"), Some(""));
        assert_eq!(policy_version("wasi:io/streams@0.2.6"), None);
        assert!(compatible("0.1.0"));
        assert!(compatible("0.1.7"));
        assert!(!compatible("0.2.0"));
        assert!(!compatible("0.0.9"));
        assert!(!compatible("1.1.0"));
        assert!(!compatible(""));
        assert!(!compatible("0.1"));
    }
}
