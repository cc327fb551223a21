//! Why a plugin could not be used, and each failure's kind as a metric label.

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
        "is switched off after {failures} failures in a row (last: {last}); it is tried again in {retry_in_s} s, or when its file changes"
    )]
    CircuitOpen {
        failures: u32,
        last: String,
        retry_in_s: u64,
    },
    #[error("{path} is refused: {reason}")]
    Unsafe { path: String, reason: String },
    #[error("{path} is missing (it was deleted or moved)")]
    Missing { path: String },
    #[error("{path} is {size} bytes; plugins may be at most {limit} bytes")]
    TooLarge {
        path: String,
        size: u64,
        limit: usize,
    },
}

impl PluginError {
    /// The failure's kind, as a metric label.
    pub fn kind(&self) -> &'static str {
        match self {
            PluginError::Read { .. } => "read",
            PluginError::NotComponent(_) => "not_component",
            PluginError::Incompatible { .. } => "incompatible",
            PluginError::ForbiddenImport { .. } => "forbidden_import",
            PluginError::Load(_) => "load",
            PluginError::Timeout { .. } => "timeout",
            PluginError::OutOfFuel { .. } => "fuel",
            PluginError::Memory { .. } => "memory",
            PluginError::StackOverflow => "stack",
            PluginError::Panic(_) => "panic",
            PluginError::CapabilityDenied(_) => "capability_denied",
            PluginError::Trap(_) => "trap",
            PluginError::Garbage(_) => "garbage",
            PluginError::CircuitOpen { .. } => "circuit_open",
            PluginError::Unsafe { .. } => "unsafe",
            PluginError::Missing { .. } => "missing",
            PluginError::TooLarge { .. } => "too_large",
        }
    }
}
