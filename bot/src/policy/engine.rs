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

/// Plugin calls that may run at once: the pool's size (more wait for a slot).
pub const POOL_SLOTS: u32 = 32;

fn pool() -> wasmtime::PoolingAllocationConfig {
    let mut pool = wasmtime::PoolingAllocationConfig::new();
    pool.total_component_instances(POOL_SLOTS)
        .max_core_instances_per_component(16)
        .total_core_instances(POOL_SLOTS * 8)
        .max_memories_per_component(8)
        .total_memories(POOL_SLOTS * 2)
        .max_tables_per_component(16)
        .total_tables(POOL_SLOTS * 8)
        // The largest memory a plugin may be given (`memory_mib`).
        .max_memory_size(crate::profile::MAX_PLUGIN_MEMORY_BYTES)
        .linear_memory_keep_resident(LINEAR_MEMORY_KEEP_RESIDENT)
        .table_keep_resident(16 << 10);
    pool
}

/// Bytes of each pooled memory reset with `memset` rather than given back
/// (and faulted in again by the next call).
const LINEAR_MEMORY_KEEP_RESIDENT: usize = 256 << 10;

/// A counting semaphore over the pool's slots, for the blocking threads
/// that run plugin calls: a call waits for a slot rather than fail.
#[derive(Debug)]
pub struct Slots {
    free: std::sync::Mutex<u32>,
    freed: std::sync::Condvar,
}

impl Slots {
    pub fn new(count: u32) -> Slots {
        Slots {
            free: std::sync::Mutex::new(count),
            freed: std::sync::Condvar::new(),
        }
    }

    /// Takes a slot until the guard is dropped.
    pub fn take(&self) -> SlotGuard<'_> {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        while *free == 0 {
            free = self.freed.wait(free).unwrap_or_else(|p| p.into_inner());
        }
        *free -= 1;
        SlotGuard { slots: self }
    }
}

pub struct SlotGuard<'a> {
    slots: &'a Slots,
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        *self.slots.free.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        self.slots.freed.notify_one();
    }
}

/// The engine plus what keeps its clock ticking.
pub struct PolicyEngine {
    pub engine: Engine,
    /// The instance slots plugin calls share.
    pub slots: Arc<Slots>,
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
        // Every call gets a fresh instance. From a pool of slots mapped once,
        // with the first pages of each memory reset by `memset`, that costs
        // microseconds; from fresh mappings, a hundred or more.
        let mut pooled = config.clone();
        pooled.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool()));
        let engine = match Engine::new(&pooled) {
            Ok(engine) => engine,
            Err(error) => {
                // E.g. a tight `ulimit -v`: the pool reserves address space.
                tracing::warn!(%error, "cannot reserve the plugin instance pool; allocating per call");
                Engine::new(&config)?
            }
        };
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let engine_key = format!("{:016x}", hasher.finish());
        let alive = Arc::new(());
        spawn_ticker(engine.clone(), Arc::downgrade(&alive));
        Ok(PolicyEngine {
            engine,
            slots: Arc::new(Slots::new(POOL_SLOTS)),
            engine_key,
            _ticker: alive,
        })
    }

    /// Compiles `bytes`, or loads the artefact compiled earlier for the same
    /// content and engine from `cache_dir`. The cache lives in the profile's
    /// data directory, never beside the plugins: it is native code. It is
    /// trusted only if it is private to Eagle's user, and an artefact only
    /// if its keyed hash (over the source's hash, the engine and the
    /// artefact's bytes) matches: a truncated or swapped file is compiled
    /// again, never loaded.
    pub fn compile(
        &self,
        bytes: &[u8],
        sha256: &str,
        cache_dir: Option<&Path>,
    ) -> anyhow::Result<(Component, CompileSource)> {
        let cache = cache_dir.and_then(|dir| match Cache::open(dir) {
            Ok(cache) => Some(cache),
            Err(error) => {
                tracing::warn!(dir = %dir.display(), %error, "not using the compiled-plugin cache");
                None
            }
        });
        let name = format!("{sha256}-{}", self.engine_key);
        if let Some(cache) = &cache {
            if let Some(component) = cache.load(&self.engine, &name) {
                return Ok((component, CompileSource::Cache));
            }
            // Compiling takes far more memory than the compiled code: a
            // child process does it, and this one loads the result.
            if let Some(exe) = COMPILER.get() {
                match compile_in_child(exe, bytes, sha256, &cache.dir) {
                    Ok(()) => match cache.load(&self.engine, &name) {
                        Some(component) => return Ok((component, CompileSource::Compiled)),
                        None => tracing::warn!(
                            "a plugin compiled in a child process did not load; compiling it here"
                        ),
                    },
                    Err(error) => {
                        tracing::warn!(%error, "cannot compile a plugin in a child process; compiling it here")
                    }
                }
            }
        }
        let component = Component::new(&self.engine, bytes)?;
        if let Some(cache) = &cache
            && let Err(error) = cache.store(&component, &name)
        {
            tracing::warn!(%error, "cannot cache a compiled plugin");
        }
        Ok((component, CompileSource::Compiled))
    }
}

/// The executable that compiles plugins into the cache in a child process
/// (`eagle policy compile-into-cache`), if set.
static COMPILER: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Compiles plugins in child processes of `exe` (Eagle's own binary) from
/// now on, so that this process never holds the compiler's memory. Without
/// it (in tests, in a library), plugins compile in-process.
pub fn compile_in_child_processes(exe: PathBuf) {
    let _ = COMPILER.set(exe);
}

/// Runs `exe policy compile-into-cache` with the plugin on its stdin.
fn compile_in_child(exe: &Path, bytes: &[u8], sha256: &str, dir: &Path) -> anyhow::Result<()> {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    let mut child = Command::new(exe)
        .args(["policy", "compile-into-cache", "--sha256", sha256, "--dir"])
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let written = child
        .stdin
        .take()
        .map(|mut stdin| stdin.write_all(bytes))
        .unwrap_or(Ok(()));
    let output = child.wait_with_output()?;
    written?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        anyhow::bail!(
            "{} ({})",
            output.status,
            crate::ground::text::one_line(stderr.trim(), 300)
        );
    }
    Ok(())
}

/// `eagle policy compile-into-cache`: compiles the component on `input`,
/// whose content hash must be `sha256`, into the cache in `dir`.
pub fn compile_into_cache(input: &[u8], sha256: &str, dir: &Path) -> anyhow::Result<()> {
    if input.len() > super::MAX_PLUGIN_BYTES {
        anyhow::bail!(
            "the plugin is larger than {} bytes",
            super::MAX_PLUGIN_BYTES
        );
    }
    if super::content_hash(input) != sha256 {
        anyhow::bail!("the plugin's content does not have the hash given");
    }
    let engine = PolicyEngine::new()?;
    let cache = Cache::open(dir)?;
    let component = Component::new(&engine.engine, input)?;
    cache.store(&component, &format!("{sha256}-{}", engine.engine_key))
}

/// Whether a component came from the cache or was compiled now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompileSource {
    Cache,
    Compiled,
}

/// The largest compiled artefact read back from the cache.
const MAX_ARTEFACT_BYTES: u64 = 512 << 20;

/// The compiled-plugin cache: a directory private to Eagle's user, with a
/// key of its own (`.key`, made on first use) that authenticates every
/// artefact in it.
struct Cache {
    dir: PathBuf,
    key: Vec<u8>,
}

type Mac = hmac::Hmac<sha2::Sha256>;

impl Cache {
    fn open(dir: &Path) -> anyhow::Result<Cache> {
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
        std::fs::create_dir_all(dir)?;
        let meta = std::fs::symlink_metadata(dir)?;
        // SAFETY: geteuid cannot fail.
        let me = unsafe { libc::geteuid() };
        if !meta.is_dir() || meta.uid() != me {
            anyhow::bail!("it is not a directory owned by Eagle's user (uid {me})");
        }
        if meta.permissions().mode() & 0o077 != 0 {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        }
        let key_path = dir.join(".key");
        let key = match std::fs::symlink_metadata(&key_path) {
            Ok(meta) => {
                if !meta.is_file() || meta.uid() != me || meta.permissions().mode() & 0o077 != 0 {
                    anyhow::bail!(
                        "its key {} is not a file private to Eagle's user",
                        key_path.display()
                    );
                }
                std::fs::read(&key_path)?
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut key = vec![0u8; 32];
                std::fs::File::open("/dev/urandom")
                    .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut key))?;
                let mut file = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&key_path)?;
                std::io::Write::write_all(&mut file, &key)?;
                key
            }
            Err(e) => return Err(e.into()),
        };
        if key.len() < 32 {
            anyhow::bail!("its key {} is too short", key_path.display());
        }
        Ok(Cache {
            dir: dir.to_path_buf(),
            key,
        })
    }

    fn mac(&self, name: &str, artefact: &[u8]) -> Mac {
        use hmac::Mac as _;
        let mut mac =
            <Mac as hmac::KeyInit>::new_from_slice(&self.key).expect("HMAC takes any key length");
        mac.update(&(name.len() as u64).to_le_bytes());
        mac.update(name.as_bytes());
        mac.update(artefact);
        mac
    }

    /// The artefact named `name`, if its bytes are the ones this cache wrote.
    fn load(&self, engine: &Engine, name: &str) -> Option<Component> {
        use hmac::Mac as _;
        let path = self.dir.join(format!("{name}.cwasm"));
        let tag_path = self.dir.join(format!("{name}.mac"));
        let bytes = {
            let file = std::fs::File::open(&path).ok()?;
            let len = file.metadata().ok()?.len();
            if len > MAX_ARTEFACT_BYTES {
                return None;
            }
            let mut bytes = Vec::with_capacity(len as usize);
            std::io::Read::read_to_end(
                &mut std::io::Read::take(file, MAX_ARTEFACT_BYTES),
                &mut bytes,
            )
            .ok()?;
            bytes
        };
        let tag = std::fs::read_to_string(&tag_path).unwrap_or_default();
        let tag = decode_hex(tag.trim());
        // The bytes checked are the bytes loaded: nothing is read twice.
        let genuine = tag.is_some_and(|tag| self.mac(name, &bytes).verify_slice(&tag).is_ok());
        if !genuine {
            tracing::warn!(path = %path.display(), "a cached plugin does not match its record; compiling it again");
            let _ = std::fs::remove_file(&path);
            let _ = std::fs::remove_file(&tag_path);
            return None;
        }
        // SAFETY: deserialising is loading native code. These bytes were
        // written by `Component::serialize` of this cache (their keyed hash,
        // made with a key only Eagle's user can read, matches), for an
        // engine with the same compatibility hash (part of the name);
        // wasmtime still checks the header.
        match unsafe { Component::deserialize(engine, &bytes) } {
            Ok(component) => Some(component),
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "ignoring an unusable cached plugin");
                None
            }
        }
    }

    fn store(&self, component: &Component, name: &str) -> anyhow::Result<()> {
        use hmac::Mac as _;
        let bytes = component.serialize()?;
        let tag = crate::ground::text::hex(&self.mac(name, &bytes).finalize().into_bytes());
        let unique = format!("{}-{:016x}", std::process::id(), fastrand::u64(..));
        for (suffix, content) in [("cwasm", bytes.as_slice()), ("mac", tag.as_bytes())] {
            let tmp = self.dir.join(format!(".{name}.{suffix}.{unique}.tmp"));
            std::fs::write(&tmp, content)?;
            std::fs::rename(&tmp, self.dir.join(format!("{name}.{suffix}")))?;
        }
        Ok(())
    }
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
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
