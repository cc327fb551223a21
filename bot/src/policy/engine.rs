//! The one wasmtime engine, its epoch ticker, and the compiled-component cache.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;

use wasmtime::component::Component;
use wasmtime::{Config, Engine};

/// How often the engine's epoch advances: the granularity of call timeouts.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);
/// The most wasm stack a plugin call may use; deeper recursion traps.
const MAX_WASM_STACK: usize = 512 << 10;

/// The engine plus what keeps its clock ticking.
pub struct PolicyEngine {
    pub engine: Engine,
    /// Identifies compiled artefacts this engine can load.
    pub engine_key: String,
    _ticker: Arc<()>,
}

impl PolicyEngine {
    pub fn new() -> anyhow::Result<PolicyEngine> {
        let mut config = Config::new();
        config
            .wasm_component_model(true)
            .consume_fuel(true)
            .epoch_interruption(true)
            .max_wasm_stack(MAX_WASM_STACK);
        let engine = Engine::new(&config)?;
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let engine_key = format!("{:016x}", hasher.finish());
        let alive = Arc::new(());
        spawn_ticker(engine.clone(), Arc::downgrade(&alive));
        Ok(PolicyEngine {
            engine,
            engine_key,
            _ticker: alive,
        })
    }

    /// Compiles `bytes`, or loads the artefact compiled earlier for the same
    /// content and engine from `cache_dir`. The cache lives in the profile's
    /// data directory, never beside the plugins: it is native code, and
    /// only Eagle writes it.
    pub fn compile(
        &self,
        bytes: &[u8],
        sha256: &str,
        cache_dir: Option<&Path>,
    ) -> anyhow::Result<(Component, CompileSource)> {
        let cached = cache_dir.map(|dir| dir.join(format!("{sha256}-{}.cwasm", self.engine_key)));
        if let Some(path) = cached.as_deref().filter(|p| p.is_file()) {
            // SAFETY: the file is in Eagle's own cache directory and was
            // written by `Component::serialize` of an engine with the same
            // compatibility hash (part of the file name). wasmtime still
            // checks the header and refuses an incompatible artefact.
            match unsafe { Component::deserialize_file(&self.engine, path) } {
                Ok(component) => return Ok((component, CompileSource::Cache)),
                Err(error) => {
                    tracing::warn!(path = %path.display(), %error, "ignoring an unusable cached plugin")
                }
            }
        }
        let component = Component::new(&self.engine, bytes)?;
        if let Some(path) = cached
            && let Err(error) = write_cache(&component, &path)
        {
            tracing::warn!(path = %path.display(), %error, "cannot cache a compiled plugin");
        }
        Ok((component, CompileSource::Compiled))
    }
}

/// Whether a component came from the cache or was compiled now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompileSource {
    Cache,
    Compiled,
}

fn write_cache(component: &Component, path: &PathBuf) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let bytes = component.serialize()?;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

/// Advances the epoch every tick until the engine's owner is gone.
fn spawn_ticker(engine: Engine, alive: Weak<()>) {
    let spawned = std::thread::Builder::new()
        .name("eagle-policy-epoch".into())
        .spawn(move || {
            while alive.strong_count() > 0 {
                std::thread::sleep(EPOCH_TICK);
                engine.increment_epoch();
            }
        });
    if let Err(error) = spawned {
        // Without the ticker, timeouts cannot fire; fuel still bounds every call.
        tracing::error!(%error, "cannot start the plugin epoch ticker");
    }
}
