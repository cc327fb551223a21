//! Logging: `tracing` to standard error, filtered by `RUST_LOG` as usual.

use tracing_subscriber::EnvFilter;

/// Installs the subscriber. `default_filter` applies when `RUST_LOG` is unset
/// or invalid (an invalid value is reported, not fatal).
pub fn init(default_filter: &str) {
    let (filter, bad) = match std::env::var("RUST_LOG") {
        Ok(value) if !value.trim().is_empty() => match EnvFilter::try_new(&value) {
            Ok(filter) => (filter, None),
            Err(e) => (
                EnvFilter::new(default_filter),
                Some(format!("{value:?}: {e}")),
            ),
        },
        _ => (EnvFilter::new(default_filter), None),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    if let Some(bad) = bad {
        tracing::warn!("ignoring RUST_LOG {bad}");
    }
}
