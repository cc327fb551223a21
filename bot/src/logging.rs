//! Logging: `tracing` to standard error, filtered by `RUST_LOG` as usual.

use std::io::IsTerminal as _;

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
    // Colours only for a person at a terminal: a file, a pipe or the
    // journal gets plain text (and `NO_COLOR` is honoured).
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .init();
    if let Some(bad) = bad {
        tracing::warn!("ignoring RUST_LOG {bad}");
    }
}
