//! `[store]`: how long what may be pruned is kept (`prune_after`), by
//! `eagle db prune` and Eagle's daily pruner alike. The older
//! `zulip.retention` (handled messages and delivered replies) still works:
//! without `store.prune_after`, it is the time kept.

use std::time::Duration;

use super::ProfileError;
use super::field::{Origins, duration};

/// What is kept at least, whatever a profile or `--older-than` says: the
/// back-fill after a gap and the late-command window are within a day.
pub const SHORTEST_PRUNE_AFTER: Duration = Duration::from_secs(24 * 3600);

/// The default time kept.
pub const DEFAULT_PRUNE_AFTER: Duration = Duration::from_secs(90 * 24 * 3600);

pub use super::pool::RawStore;

/// Checks a time kept: at least [`SHORTEST_PRUNE_AFTER`].
pub fn check_prune_after(text: &str) -> Result<Duration, String> {
    let kept = duration(Some(text), DEFAULT_PRUNE_AFTER)?;
    if kept < SHORTEST_PRUNE_AFTER {
        return Err(format!(
            "{text:?} is shorter than a day: handled messages must outlive the back-fill window"
        ));
    }
    Ok(kept)
}

/// The profile's time kept: `store.prune_after`, else `zulip.retention`,
/// else 90 days.
pub(super) fn prune_after(
    store: &RawStore,
    retention: Option<&str>,
    origins: &Origins<'_>,
) -> Result<Duration, ProfileError> {
    if let Some(text) = store.prune_after.as_deref() {
        return check_prune_after(text)
            .map_err(|why| origins.error("store.prune_after", None, why));
    }
    if let Some(text) = retention {
        return check_prune_after(text).map_err(|why| origins.error("zulip.retention", None, why));
    }
    Ok(DEFAULT_PRUNE_AFTER)
}
