//! `[[policy.plugins]]`: one plugin entry of a profile, validated.

use std::path::PathBuf;
use std::time::Duration;

use super::field::BUILTIN_PLUGINS;
use super::raw::RawPlugin;
use super::{PluginLimits, PluginSource, PluginSpec};

pub(super) fn plugin_spec(raw: RawPlugin) -> Result<PluginSpec, String> {
    let source = match (raw.builtin, raw.file) {
        (Some(name), None) => {
            if !BUILTIN_PLUGINS.contains(&name.as_str()) {
                return Err(format!(
                    "builtin {name:?} does not exist (built in: {})",
                    BUILTIN_PLUGINS.join(", ")
                ));
            }
            PluginSource::Builtin(name)
        }
        (None, Some(file)) if file.trim().is_empty() => return Err("file is empty".into()),
        (None, Some(file)) => PluginSource::File(PathBuf::from(file.trim())),
        (Some(_), Some(_)) => return Err("give either builtin or file, not both".into()),
        (None, None) => return Err("give builtin = \"NAME\" or file = \"PATH.wasm\"".into()),
    };
    let defaults = PluginLimits::default();
    let memory_mib = raw
        .memory_mib
        .unwrap_or((defaults.memory_bytes >> 20) as u64);
    let max_mib = (super::MAX_PLUGIN_MEMORY_BYTES >> 20) as u64;
    if !(1..=max_mib).contains(&memory_mib) {
        return Err(format!("memory_mib {memory_mib} is outside 1..={max_mib}"));
    }
    let timeout_ms = raw
        .timeout_ms
        .unwrap_or(defaults.timeout.as_millis() as u64);
    if !(1..=60_000).contains(&timeout_ms) {
        return Err(format!("timeout_ms {timeout_ms} is outside 1..=60000"));
    }
    let fuel = raw.fuel.unwrap_or(defaults.fuel);
    if fuel == 0 {
        return Err("fuel must be above 0".into());
    }
    let config_json = match raw.config {
        None => "{}".to_string(),
        Some(value @ serde_json::Value::Object(_)) => value.to_string(),
        Some(_) => return Err("config must be a table".into()),
    };
    Ok(PluginSpec {
        source,
        config_json,
        limits: PluginLimits {
            fuel,
            memory_bytes: (memory_mib as usize) << 20,
            timeout: Duration::from_millis(timeout_ms),
        },
    })
}
