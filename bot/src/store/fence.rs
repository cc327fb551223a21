//! The fence of a runner's claim: after a runner claims a run, everything
//! it writes about the run is conditional on `(lease_owner, attempt)`. A
//! runner that lost its claim (its lease expired and another took the run,
//! or a human cancelled it) gets [`StoreError::Fenced`] and stops, never
//! overwriting the newer state.

use super::{Result, Run, StoreError, Tx};

/// A runner's claim on a run: every write it makes is conditional on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    pub run: i64,
    pub owner: String,
    pub attempt: i64,
}

impl Tx {
    pub(super) fn check_fence(run: &Run, fence: Option<&Fence>) -> Result<()> {
        match fence {
            Some(f)
                if run.lease_owner.as_deref() != Some(f.owner.as_str())
                    || run.attempt != f.attempt =>
            {
                Err(StoreError::Fenced(format!("run {}", run.id)))
            }
            _ => Ok(()),
        }
    }
}

pub(super) fn fenced(changed: u64, fence: &Fence) -> Result<()> {
    if changed == 0 {
        Err(StoreError::Fenced(format!("run {}", fence.run)))
    } else {
        Ok(())
    }
}
