//! The plugin reloader: picks up plugins dropped into or changed in the
//! plugin directory every `policy.reload_interval`, and tells the owner of
//! each file plugin it loads or refuses.
//!
//! The telling is kept in the audit log (`plugin.loaded` / `plugin.refused`,
//! subject `plugin:<file>`, with the plugin's name, version and content
//! hash), and a line is posted in the executor channel's `plugins` topic
//! with the owner's mention only when a file's state differs from its last
//! entry: a restart says nothing new, a plugin dropped in while Eagle was
//! down is told once it is loaded.

use crate::ground::text::{neutralize_mentions, one_line};
use crate::policy::{PluginStatus, PolicyHost};
use crate::runtime::background::{BackgroundLoop, Next, Tick, Wake};
use crate::runtime::posts::{People, Poster};
use crate::store::{NewAuditEntry, Store};

/// The topic plugin news goes to.
pub const TOPIC: &str = "plugins";

/// Who is told about plugins, and where.
#[derive(Debug, Clone)]
pub struct Announce {
    pub store: Store,
    pub poster: Poster,
    pub people: People,
}

/// The reloader loop.
#[derive(Debug)]
pub struct PluginReload {
    pub host: PolicyHost,
    /// `None`: changes are only logged.
    pub announce: Option<Announce>,
}

impl BackgroundLoop for PluginReload {
    const NAME: &'static str = "plugin reloader";
    const WAKE: Wake = Wake::Timer;

    async fn tick(&mut self, _: &mut Tick<'_>) -> anyhow::Result<Next> {
        for change in self.host.reload().await {
            tracing::info!(change, "policy plugins changed");
        }
        if let Some(announce) = &self.announce {
            announce.tell(&self.host.plugins()).await?;
        }
        Ok(Next::After(self.host.reload_interval()))
    }
}

impl Announce {
    /// Tells the owner of every file plugin whose state is new.
    pub async fn tell(&self, plugins: &[PluginStatus]) -> anyhow::Result<()> {
        for plugin in plugins {
            let source = &plugin.identity.source;
            if source.starts_with("builtin:") || source == "host" {
                continue;
            }
            let subject = format!("plugin:{source}");
            let id = &plugin.identity;
            let (action, decision, line) = if plugin.loaded {
                (
                    "plugin.loaded",
                    format!("loaded {} {} {}", id.name, id.version, id.sha256),
                    format!(
                        "Policy plugin **{}** {} (sha256 `{}`) is loaded from `{}`: it votes from now on.",
                        id.name,
                        id.version,
                        id.sha256,
                        quote(source)
                    ),
                )
            } else {
                (
                    "plugin.refused",
                    plugin.state.clone(),
                    format!(
                        "Policy plugin `{}` is not used: {}. It votes escalate (keep for tasks) \
                         until that is fixed.",
                        quote(source),
                        quote(plugin.state.trim_start_matches("failed: "))
                    ),
                )
            };
            let mut tx = self.store.begin_write().await?;
            let told = tx.audit_log().audit_trail(&subject).await?;
            if told.last().and_then(|e| e.decision.as_deref()) == Some(decision.as_str()) {
                continue;
            }
            tx.audit_log()
                .audit(&NewAuditEntry {
                    actor: "eagle".into(),
                    action: action.into(),
                    subject,
                    decision: Some(decision),
                    reason: Some(plugin.state.clone()),
                    plugin_name: Some(id.name.clone()),
                    plugin_version: Some(id.version.clone()),
                    plugin_hash: Some(id.sha256.clone()),
                    ..NewAuditEntry::default()
                })
                .await?;
            let owner = self
                .people
                .owner_of(None)
                .map(|o| format!("{o} "))
                .unwrap_or_default();
            self.poster
                .post(&mut tx, TOPIC, &format!("{owner}{line}"))
                .await?;
            tx.commit().await?;
        }
        Ok(())
    }
}

/// A path or a state, safe to post.
fn quote(text: &str) -> String {
    neutralize_mentions(&one_line(text, 300)).replace('`', "'")
}
