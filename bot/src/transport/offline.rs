//! No chat at all: the transport of the one-off passes (`eagle analyze`,
//! `eagle import`) and of the benchmarks. Posts wait in the outbox under
//! each profile's own identity, naming people as Zulip does, so that the
//! next `eagle run` delivers them as if it had written them.

use tokio_util::sync::CancellationToken;

use crate::daemon::{Daemon, Transport, Voice};
use crate::profile::Profile;

/// No chat: posts wait in the outbox under each profile's own identity,
/// naming people as `eagle run` does on Zulip, which delivers them (the
/// one-off passes of `eagle analyze` and `eagle import`, benchmarks).
#[derive(Debug, Clone, Copy, Default)]
pub struct Offline;

impl Transport for Offline {
    async fn voice(&mut self, profile: &Profile) -> Voice {
        Voice {
            history: None,
            poster: crate::runtime::posts::Poster {
                identity: profile.name.clone(),
                channel: profile.executor_channel.clone(),
            },
            people: crate::runtime::posts::People {
                owner_fallback: profile
                    .owner
                    .as_ref()
                    .map(crate::transport::zulip::bot::fallback_mention),
                approvers: profile.approvers.clone(),
                naming: std::sync::Arc::new(crate::transport::zulip::ZulipNaming),
            },
        }
    }

    /// Nothing to listen to: waits until stopped.
    async fn listen(&mut self, _: &Daemon, stop: &CancellationToken) -> anyhow::Result<()> {
        stop.cancelled().await;
        Ok(())
    }

    async fn finish(self, _: &Daemon) -> anyhow::Result<()> {
        Ok(())
    }
}
