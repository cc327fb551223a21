//! Logging: `tracing` to standard error, filtered by `RUST_LOG` as usual, as
//! readable text or, for a log shipper, one JSON object per line.
//!
//! The format is chosen twice: by `--log-format` (or `EAGLE_LOG_FORMAT`)
//! when the process starts, and by the profile's `[ops] log_format` once it
//! is read ([`use_profile_format`]), unless the command line chose. A JSON
//! line carries the event's fields at the top level and the spans it
//! happened in (`loop`, `message`, `run`, `request`, with their `profile`,
//! `message`, `task`, `run` and `request` fields) as a list, so that one
//! run is followed across both identities' logs by its `run` field.

use std::sync::OnceLock;

use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer, Registry, reload};

pub use crate::profile::LogFormat;

type Boxed = Box<dyn Layer<Registry> + Send + Sync>;

struct Installed {
    handle: reload::Handle<Boxed, Registry>,
    filter: String,
    colour: bool,
    /// Whether the command line chose the format (a profile does not override it).
    chosen: bool,
}

static INSTALLED: OnceLock<Installed> = OnceLock::new();

/// Installs the subscriber. `rust_log` is the value of `RUST_LOG` (`main`
/// reads it); `default_filter` applies when it is unset or invalid (an
/// invalid value is reported, not fatal). `colour`: ANSI colours, for a
/// person at a terminal (never in JSON). `format`: the command line's
/// choice, if it made one.
pub fn init(default_filter: &str, rust_log: Option<&str>, colour: bool, format: Option<LogFormat>) {
    let (filter, bad) = match rust_log {
        Some(value) if !value.trim().is_empty() => match EnvFilter::try_new(value) {
            Ok(_) => (value.to_string(), None),
            Err(e) => (default_filter.to_string(), Some(format!("{value:?}: {e}"))),
        },
        _ => (default_filter.to_string(), None),
    };
    let (layer, handle) = reload::Layer::new(layer(format.unwrap_or_default(), &filter, colour));
    if tracing_subscriber::registry()
        .with(layer)
        .try_init()
        .is_err()
    {
        return;
    }
    let _ = INSTALLED.set(Installed {
        handle,
        filter,
        colour,
        chosen: format.is_some(),
    });
    if let Some(bad) = bad {
        tracing::warn!("ignoring RUST_LOG {bad}");
    }
}

/// Switches to the profile's format, unless the command line chose one.
pub fn use_profile_format(format: Option<LogFormat>) {
    let (Some(installed), Some(format)) = (INSTALLED.get(), format) else {
        return;
    };
    if installed.chosen {
        return;
    }
    let _ = installed
        .handle
        .reload(layer(format, &installed.filter, installed.colour));
}

fn layer(format: LogFormat, filter: &str, colour: bool) -> Boxed {
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let base = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    match format {
        LogFormat::Text => base.with_ansi(colour).with_filter(filter).boxed(),
        LogFormat::Json => base
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(true)
            .with_filter(filter)
            .boxed(),
    }
}
