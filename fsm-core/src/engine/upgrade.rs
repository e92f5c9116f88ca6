//! The load of a record another build of the machine wrote: renamed and
//! migrated records are written back before anything runs; a newer build's
//! record is refused untouched.

use crate::engine::{Effect, ReconcileError};
use crate::record::{DecodeError, RawRecord, StateRecord};
use crate::store::{Commit, ObjectKey, StateStore, Version};
use crate::{engine::Report, fsm::Fsm};

/// Reads a stored record as this build of the machine does
/// ([`RawRecord::upgrade`]); one written by an earlier build is written
/// back, upgraded, before anything runs — conditionally on `version`, as
/// every commit, so a conflict commits nothing — and reported with
/// [`Effect::Upgraded`].
///
/// # Errors
/// [`ReconcileError::NewerRecord`] for a newer build's record,
/// [`ReconcileError::Corrupt`] for one that does not read (both left
/// untouched); [`ReconcileError::Conflict`] or [`ReconcileError::Store`]
/// when the write-back fails.
pub(super) async fn load_upgraded<S: Fsm>(
    store: &dyn StateStore,
    key: &ObjectKey,
    raw: &RawRecord,
    version: &mut Option<Version>,
    report: &mut Report,
) -> Result<StateRecord, ReconcileError> {
    let upgraded = raw.upgrade::<S>().map_err(|error| match error {
        DecodeError::NewerMachine { found, supported } => {
            ReconcileError::NewerRecord { found, supported }
        }
        other => ReconcileError::Corrupt(other),
    })?;
    if !upgraded.changed {
        return Ok(upgraded.record);
    }
    let effect = Effect::Upgraded {
        from: upgraded.stored_state,
        to: upgraded.record.state.clone(),
        from_version: upgraded.stored_version,
        to_version: S::machine().version(),
    };
    tracing::info!(machine = S::machine().name(), object = %key, ?effect, "record upgraded");
    let saved = store
        .save(key, Commit::new(&upgraded.record, version.as_ref()))
        .await?;
    *version = Some(saved);
    report.commits += 1;
    report.effects.push(effect);
    Ok(upgraded.record)
}
