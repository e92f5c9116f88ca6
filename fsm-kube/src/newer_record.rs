//! Records written by a newer version of the machine (a rolling update, a
//! rollback): what the reconciler says on the object, once, and clears
//! when a replica that reads the record comes back.

use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard, PoisonError};

use fsm_core::{Fsm, RecordCompatibility, StoreError};
use kube::runtime::events::Event;

use crate::store::{KubeStore, Target};
use crate::{KubeResource, events};

/// The objects a reconciler has told that their record is a newer
/// build's, by UID and record version: one event each, not one per
/// reconcile.
///
/// # Guarantees
/// - The record is never written: the report is the `Degraded` condition
///   (reason [`crate::conditions::NEWER_RECORD_REASON`]), a status patch of the
///   conditions alone, written only when the object does not say so
///   already.
/// - One event per object and record version for the life of the
///   reconciler, until the object's record is read again.
#[derive(Debug, Default)]
pub(crate) struct NewerRecords {
    told: Mutex<HashSet<(String, u32)>>,
}

/// A newer build's record: its machine version and this build's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Newer {
    pub found: u32,
    pub supported: u32,
}

impl NewerRecords {
    fn lock(&self) -> MutexGuard<'_, HashSet<(String, u32)>> {
        self.told.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `target`'s stored record is a newer build's, read without
    /// decoding it as this build's (for a decision taken before the
    /// engine loads it, such as adding the finalizer).
    pub(crate) async fn peek<F>(
        store: &dyn KubeStore<F::Resource>,
        target: &Target<F::Resource>,
    ) -> Result<Option<Newer>, StoreError>
    where
        F: Fsm,
        F::Resource: KubeResource,
    {
        let loaded = store.load(target).await?;
        Ok(match loaded.record.map(|raw| raw.compatibility::<F>()) {
            Some(RecordCompatibility::Newer { version, supported }) => Some(Newer {
                found: version,
                supported,
            }),
            _ => None,
        })
    }

    /// Says on the object that its record is a newer build's (the
    /// condition), and returns the event to publish the first time.
    ///
    /// # Errors
    /// The condition could not be written.
    pub(crate) async fn report<K: KubeResource>(
        &self,
        target: &Target<K>,
        newer: Newer,
    ) -> Result<Option<Event>, StoreError> {
        tracing::warn!(
            record_version = newer.found,
            machine_version = newer.supported,
            "the record was written by a newer version of the machine; it is left untouched"
        );
        target
            .report_newer_record(newer.found, newer.supported)
            .await?;
        let first = self.lock().insert((target.uid().to_owned(), newer.found));
        Ok(first.then(|| events::for_newer_record(newer.found, newer.supported)))
    }

    /// After a reconcile that read `target`'s record: forgets having told
    /// the object. When the object still says its record is a newer
    /// build's (an older replica said so), the reconciler's refresh of the
    /// conditions after a step that committed nothing writes them from the
    /// record again (a commit rewrites them anyway).
    pub(crate) fn clear<K: KubeResource>(&self, target: &Target<K>) {
        let mut told = self.lock();
        if !told.is_empty() {
            told.retain(|(uid, _)| uid != target.uid());
        }
    }
}
