//! Policy plugins through the real host: the default plugins' tables, the
//! hostile-plugin suite, composition, the cache, hot reload, the audit
//! trail, and `eagle policy`.

mod cache;
mod commands;
mod defaults;
mod hostile;
mod reload;

use std::path::Path;
use std::time::Duration;

use eagle::policy::{PolicyHost, PolicyRequest, PolicyTask, RequestKind};
use eagle::profile::{PluginLimits, PluginSource, PluginSpec, PolicySettings};

use crate::support::shared_plugin_cache;

fn spec(source: PluginSource, config: &str, limits: PluginLimits) -> PluginSpec {
    PluginSpec {
        source,
        config_json: config.into(),
        limits,
    }
}

fn builtin(name: &str, config: &str) -> PluginSpec {
    spec(
        PluginSource::Builtin(name.into()),
        config,
        PluginLimits::default(),
    )
}

fn file(path: &Path, limits: PluginLimits) -> PluginSpec {
    spec(PluginSource::File(path.to_path_buf()), "{}", limits)
}

fn settings(dir: &Path, plugins: Vec<PluginSpec>) -> PolicySettings {
    PolicySettings {
        dir: dir.to_path_buf(),
        load_all: false,
        exclude: Vec::new(),
        reload_interval: Duration::from_secs(3600),
        plugins,
    }
}

async fn host(plugins: Vec<PluginSpec>) -> PolicyHost {
    PolicyHost::load(
        &settings(Path::new("."), plugins),
        Some(shared_plugin_cache()),
    )
    .await
    .expect("policy host")
}

fn request(kind: RequestKind, action: &str) -> PolicyRequest {
    PolicyRequest {
        kind,
        action: action.into(),
        run_id: 42,
        request_id: 7,
        body: "details".into(),
        task: None,
        requested_by: "worker-1".into(),
    }
}

fn task() -> PolicyTask {
    PolicyTask {
        gid: "1200001".into(),
        source: "my_tasks_inbox".into(),
        title: "Tab preview sticks".into(),
        description: "The preview stays after the tab closes.".into(),
        platform: Some("macOS".into()),
        ..PolicyTask::default()
    }
}

async fn host_with(name: &str, config: &str) -> PolicyHost {
    host(vec![builtin(name, config)]).await
}
