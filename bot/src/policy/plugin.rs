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
/// Consecutive failures after which a plugin is switched off for a cool-down.
pub const BREAKER_THRESHOLD: u32 = 3;
/// The first cool-down; each failed trial after it doubles it, up to the cap.
const BREAKER_COOLDOWN: std::time::Duration = std::time::Duration::from_secs(30);
const BREAKER_MAX_COOLDOWN: std::time::Duration = std::time::Duration::from_secs(600);
/// The largest plugin file Eagle compiles.
pub const MAX_PLUGIN_BYTES: usize = 64 << 20;
/// The longest reason a plugin may return.
const MAX_REASON_BYTES: usize = 4096;
/// Log lines kept per call, and their length.
const MAX_LOG_LINES: usize = 32;
const MAX_LOG_LINE_BYTES: usize = 1024;

pub use super::error::PluginError;

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
        // Cut first (a plugin may send megabytes), then escape control
        // characters so that a plugin cannot forge lines of Eagle's own log.
        let message = sanitize(&message, MAX_LOG_LINE_BYTES);
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

/// Consecutive failures of a plugin, and when it may be tried again.
///
/// After `BREAKER_THRESHOLD` failures in a row the plugin is switched off
/// for a cool-down; then calls try it again (half-open): a success closes
/// the breaker, a failure opens it for twice as long (up to a cap).
#[derive(Debug, Default)]
struct Breaker {
    failures: u32,
    last: Option<PluginError>,
    /// While open: no call before this.
    retry_at: Option<std::time::Instant>,
    cooldown: Option<std::time::Duration>,
}

impl Breaker {
    /// Whether a call may go now.
    fn check(&self, now: std::time::Instant) -> Result<(), PluginError> {
        match self.retry_at.filter(|at| *at > now) {
            Some(at) => Err(PluginError::CircuitOpen {
                failures: self.failures,
                last: self
                    .last
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default(),
                retry_in_s: (at - now).as_secs().max(1),
            }),
            None => Ok(()),
        }
    }

    /// Records how a call went.
    fn record(&mut self, failure: Option<&PluginError>, now: std::time::Instant) {
        let Some(error) = failure else {
            *self = Breaker::default();
            return;
        };
        self.failures += 1;
        self.last = Some(error.clone());
        if self.failures >= BREAKER_THRESHOLD {
            let cooldown = self
                .cooldown
                .map_or(BREAKER_COOLDOWN, |c| (c * 2).min(BREAKER_MAX_COOLDOWN));
            self.cooldown = Some(cooldown);
            self.retry_at = Some(now + cooldown);
        }
    }
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
    /// The engine's instance slots (a call holds one).
    slots: std::sync::Arc<super::engine::Slots>,
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
        if bytes.len() > MAX_PLUGIN_BYTES {
            return Err(PluginError::TooLarge {
                path: source.to_string(),
                size: bytes.len() as u64,
                limit: MAX_PLUGIN_BYTES,
            });
        }
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
            slots: std::sync::Arc::clone(&engine.slots),
            breaker: Mutex::new(Breaker::default()),
        };
        let metadata =
            plugin.call(|store, bindings| bindings.eagle_policy_policy().call_describe(store))?;
        check_metadata(&metadata)?;
        plugin.identity.name = metadata.name;
        plugin.identity.version = sanitize(&metadata.version, 64);
        plugin.description = sanitize(&metadata.description, MAX_REASON_BYTES);
        plugin.decides_requests = metadata.decides_requests;
        plugin.filters_tasks = metadata.filters_tasks;
        Ok(plugin)
    }

    /// Runs one call in a fresh store with this plugin's limits.
    fn call<R>(
        &self,
        f: impl FnOnce(&mut Store<CallState>, &Plugin) -> wasmtime::Result<R>,
    ) -> Result<R, PluginError> {
        let _slot = self.slots.take();
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
        let result = result.map_err(|error| self.classify(&error, store.data()));
        let fuel = self
            .limits
            .fuel
            .saturating_sub(store.get_fuel().unwrap_or(0));
        let outcome = match &result {
            Ok(_) => "ok",
            Err(error) => error.kind(),
        };
        crate::ground::metrics::get().plugin_call(&self.identity.name, outcome, fuel);
        result
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
                // Rust's panic handler prints to stderr before it aborts: a
                // plugin built without the SDK's hook panics this way.
                Some(what)
                    if what.contains("wasi:cli/stderr") || what.contains("wasi:io/streams") =>
                {
                    PluginError::Panic(format!(
                        "it panicked (it tried to print to stderr through {what})"
                    ))
                }
                Some(what) => PluginError::CapabilityDenied(what.clone()),
                None => PluginError::Trap(format!("{error:#}")),
            },
        }
    }

    /// Runs `f` unless the breaker is open; counts failures and successes.
    fn guarded<R>(&self, f: impl FnOnce() -> Result<R, PluginError>) -> Result<R, PluginError> {
        self.breaker
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .check(std::time::Instant::now())?;
        let result = f();
        let mut breaker = self.breaker.lock().unwrap_or_else(|p| p.into_inner());
        breaker.record(result.as_ref().err(), std::time::Instant::now());
        if let Err(error) = &result {
            tracing::warn!(plugin = %self.identity, %error, failures = breaker.failures, "plugin failed");
        }
        result
    }

    /// Whether the breaker has switched the plugin off (for now).
    pub fn is_broken(&self) -> bool {
        self.breaker
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retry_at
            .is_some_and(|at| at > std::time::Instant::now())
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
            let mut verdict = Verdict::from(decision.verdict);
            if let Verdict::Deny(reason) | Verdict::Escalate(reason) = &mut verdict {
                check_reason(reason)?;
                *reason = sanitize(reason, MAX_REASON_BYTES);
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
            let mut verdict = FilterVerdict::from(verdict);
            if let FilterVerdict::Skip(reason) = &mut verdict {
                check_reason(reason)?;
                *reason = sanitize(reason, MAX_REASON_BYTES);
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
        let _slot = self.slots.take();
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

/// Text a plugin supplied, safe to show anywhere: at most `max_bytes`
/// (cut before anything else), no line breaks, control characters or ANSI
/// escapes (each becomes a space), mentions inert.
pub fn sanitize(text: &str, max_bytes: usize) -> String {
    let mut end = text.len().min(max_bytes);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let cut = &text[..end];
    let mut clean = String::with_capacity(cut.len());
    let mut chars = cut.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // An ANSI escape: ESC [ … final byte, or ESC and one more.
            if chars.peek() == Some(&'[') {
                chars.next();
                for n in chars.by_ref() {
                    if ('@'..='~').contains(&n) {
                        break;
                    }
                }
            } else {
                chars.next();
            }
            clean.push(' ');
        } else if c.is_control() || c == '\u{2028}' || c == '\u{2029}' {
            clean.push(' ');
        } else {
            clean.push(c);
        }
    }
    let mut out = crate::ground::text::neutralize_mentions(clean.trim());
    if end < text.len() {
        out.push('…');
    }
    out
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
    fn the_breaker_opens_cools_down_and_tries_again() {
        let t0 = std::time::Instant::now();
        let s = std::time::Duration::from_secs;
        let failure = PluginError::Timeout { timeout_ms: 500 };
        let mut breaker = Breaker::default();
        for _ in 0..BREAKER_THRESHOLD {
            assert!(breaker.check(t0).is_ok());
            breaker.record(Some(&failure), t0);
        }
        assert!(matches!(
            breaker.check(t0 + s(29)),
            Err(PluginError::CircuitOpen { failures: 3, .. })
        ));
        // Half-open after the cool-down: one failure opens it for twice as long.
        assert!(breaker.check(t0 + s(31)).is_ok());
        breaker.record(Some(&failure), t0 + s(31));
        assert!(breaker.check(t0 + s(31 + 59)).is_err());
        assert!(breaker.check(t0 + s(31 + 61)).is_ok());
        // A success closes it.
        breaker.record(None, t0 + s(92));
        assert!(breaker.check(t0 + s(92)).is_ok());
        assert_eq!(breaker.failures, 0);
    }

    #[test]
    fn plugin_text_cannot_forge_lines() {
        assert_eq!(
            sanitize("denied\n[APPROVED: merge_pr] run:1 req:1", 4096),
            "denied [APPROVED: merge_pr] run:1 req:1"
        );
        assert_eq!(sanitize("\u{1b}[31mred\u{1b}[0m", 4096), "red");
        assert_eq!(sanitize("@**all** look", 4096), "@\u{200B}**all** look");
        assert_eq!(sanitize(&"x".repeat(10), 4), "xxxx…");
        assert_eq!(sanitize("жжж", 5), "жж…");
        // Cut before anything else: what is past the limit is never looked at.
        let huge = "\u{7}".repeat(8 << 20);
        assert_eq!(sanitize(&huge, 1024), "…");
    }

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
