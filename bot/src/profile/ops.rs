//! `[ops]`: what an operator's tools read. The metrics and health listener
//! (off unless `listen` names an address; a loopback one unless
//! `beyond_loopback = true` says otherwise) and the log format.

use std::net::SocketAddr;

use serde::Deserialize;

use super::ProfileError;
use super::field::Origins;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawOps {
    pub listen: Option<String>,
    pub beyond_loopback: Option<bool>,
    pub log_format: Option<String>,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// For a person: one readable line per event.
    #[default]
    Text,
    /// For a log shipper: one JSON object per line, with the span fields.
    Json,
}

impl LogFormat {
    pub fn parse(text: &str) -> Option<LogFormat> {
        match text.trim().to_ascii_lowercase().as_str() {
            "text" => Some(LogFormat::Text),
            "json" => Some(LogFormat::Json),
            _ => None,
        }
    }
}

/// `[ops]`, validated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpsSettings {
    /// Where `/metrics`, `/healthz` and `/readyz` are served; none by default.
    pub listen: Option<SocketAddr>,
    /// The profile's log format (`--log-format` overrides it).
    pub log_format: Option<LogFormat>,
}

pub(super) fn ops(raw: RawOps, origins: &Origins<'_>) -> Result<OpsSettings, ProfileError> {
    let listen = match raw.listen.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(text) => {
            let addr: SocketAddr = text.parse().map_err(|_| {
                origins.error(
                    "ops.listen",
                    None,
                    format!("{text:?} is not an address and port such as \"127.0.0.1:9464\""),
                )
            })?;
            if !addr.ip().is_loopback() && raw.beyond_loopback != Some(true) {
                return Err(origins.error(
                    "ops.listen",
                    None,
                    format!(
                        "{addr} is reachable from other hosts, and the metrics tell about every task and run: \
                         use a loopback address, or set ops.beyond_loopback = true to serve it there on purpose"
                    ),
                ));
            }
            Some(addr)
        }
    };
    let log_format = match raw.log_format.as_deref() {
        None => None,
        Some(text) => Some(LogFormat::parse(text).ok_or_else(|| {
            origins.error(
                "ops.log_format",
                None,
                format!("{text:?} is not a log format: \"text\" or \"json\""),
            )
        })?),
    };
    Ok(OpsSettings { listen, log_format })
}
