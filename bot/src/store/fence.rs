//! The fence of a runner's claim: after a runner claims a run, everything
//! it writes about the run is conditional on `(lease_owner, attempt)`. A
//! runner that lost its claim (its lease expired and another took the run,
//! or a human cancelled it) gets [`StoreError::Fenced`] and stops, never
//! overwriting the newer state.
//!
//! Every fenced write is one [`fenced_update!`]; a write that must first
//! read the run (a transition, a worker's end, a request) locks the row and
//! checks it with [`Tx::check_fence`].

use super::{Result, Run, StoreError, Tx};

/// A runner's claim on a run: every write it makes is conditional on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    pub run: i64,
    pub owner: String,
    pub attempt: i64,
}

/// The one fenced write: `UPDATE executor_runs SET <set> WHERE id = $1 AND
/// lease_owner = $2 AND attempt = $3`, with `$1..$3` bound from the fence
/// and the `set` clause's own parameters numbered from `$4`, bound in the
/// order given. Evaluates to `Err(StoreError::Fenced)` when no row changed:
/// the claim has moved on.
///
/// A macro rather than a function so that the extra parameters are bound
/// to each backend's query (like [`on_tx!`](super::on_tx)), and so
/// type-checked against both drivers.
macro_rules! fenced_update {
    ($tx:expr, $fence:expr, $op:literal, $set:literal $(, $arg:expr)* $(,)?) => {{
        let fence: &$crate::store::Fence = $fence;
        let changed = $crate::store::on_tx!($tx, conn => {
            sqlx::query(concat!(
                "UPDATE executor_runs SET ",
                $set,
                " WHERE id = $1 AND lease_owner = $2 AND attempt = $3"
            ))
            .bind(fence.run)
            .bind(&fence.owner)
            .bind(fence.attempt)
            $(.bind($arg))*
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
        });
        $crate::store::QueryContext::op(changed, $op)
            .and_then(|changed| $crate::store::fence::fenced(changed, fence))
    }};
}
pub(super) use fenced_update;

impl Tx {
    /// Whether `fence` still holds `run` (read under the row's lock): `Fenced`
    /// if a fence is given and the run's claim has moved on.
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

/// `Fenced` when a write conditional on `fence` changed no row.
pub(super) fn fenced(changed: u64, fence: &Fence) -> Result<()> {
    if changed == 0 {
        Err(StoreError::Fenced(format!("run {}", fence.run)))
    } else {
        Ok(())
    }
}
