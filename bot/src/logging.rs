//! Logging: `tracing` to standard error, filtered by `RUST_LOG` as usual.

use tracing_subscriber::EnvFilter;

/// Installs the subscriber. `rust_log` is the value of `RUST_LOG` (`main`
/// reads it); `default_filter` applies when it is unset or invalid (an
/// invalid value is reported, not fatal). `colour`: ANSI colours, for a
/// person at a terminal.
pub fn init(default_filter: &str, rust_log: Option<&str>, colour: bool) {
    let (filter, bad) = match rust_log {
        Some(value) if !value.trim().is_empty() => match EnvFilter::try_new(value) {
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
        .with_ansi(colour)
        .init();
    if let Some(bad) = bad {
        tracing::warn!("ignoring RUST_LOG {bad}");
    }
}
