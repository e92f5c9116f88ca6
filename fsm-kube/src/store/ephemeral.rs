//! In-memory records for Kubernetes objects, keyed by UID, with an optional
//! hook that recomputes the state from the world after a restart.

use std::sync::Arc;

use fsm_core::{
    BoxFuture, Commit, DecodeError, EphemeralStore, Fsm, Loaded, ObjectKey, StateRecord,
    StateStore, StoreError, Version,
};

use super::kind::StoreKind;
use super::{KubeStore, Target, report_corrupt_conditions};
use crate::KubeResource;

fn uid_key<K: KubeResource>(target: &Target<K>) -> ObjectKey {
    ObjectKey::cluster(target.uid.clone())
}

/// Records in process memory, keyed by the object's UID: lost on restart,
/// when every object starts again from the initial state. Conditions are
/// written to the object's status when they change.
impl<K: KubeResource> KubeStore<K> for EphemeralStore {
    fn load<'a>(&'a self, target: &'a Target<K>) -> BoxFuture<'a, Result<Loaded, StoreError>> {
        Box::pin(async move { StateStore::load(self, &uid_key(target)).await })
    }

    fn save<'a>(
        &'a self,
        target: &'a Target<K>,
        commit: Commit<'a>,
    ) -> BoxFuture<'a, Result<Version, StoreError>> {
        let Commit {
            record,
            status,
            expected,
        } = commit;
        Box::pin(async move {
            // The object's status gets the published fields, not the memory.
            let version =
                StateStore::save(self, &uid_key(target), Commit::new(record, expected)).await?;
            target.sync_status(record, status, false).await?;
            Ok(version)
        })
    }

    fn delete<'a>(
        &'a self,
        target: &'a Target<K>,
        expected: Option<&'a Version>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move { StateStore::delete(self, &uid_key(target), expected).await })
    }

    fn report_corrupt<'a>(
        &'a self,
        target: &'a Target<K>,
        error: &'a DecodeError,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(report_corrupt_conditions(target, error))
    }

    fn kind(&self) -> Option<StoreKind> {
        Some(StoreKind::Ephemeral)
    }
}

/// Recomputes a state from the world, for an object the store has no
/// record of (after a restart).
pub type DeriveHook<F> =
    Arc<dyn Fn(Arc<<F as Fsm>::Resource>) -> BoxFuture<'static, Option<F>> + Send + Sync>;

/// An in-memory store whose missing records are recomputed by a hook: after
/// a restart, the hook looks at the world (the object, what it owns) and
/// says which state the machine is in, instead of starting over.
///
/// ```no_run
/// # use std::sync::Arc;
/// # use fsm_kube::DerivingStore;
/// # fn demo<F: fsm_core::Fsm>(f: impl Fn(Arc<F::Resource>) -> Option<F> + Send + Sync + 'static) {
/// let store = DerivingStore::<F>::new(Arc::new(move |object| {
///     let state = f(object);
///     Box::pin(async move { state })
/// }));
/// # }
/// ```
pub struct DerivingStore<F: Fsm> {
    memory: EphemeralStore,
    derive: DeriveHook<F>,
}

impl<F: Fsm> DerivingStore<F> {
    /// A store that asks `derive` for the state of objects it has no record
    /// of.
    pub fn new(derive: DeriveHook<F>) -> Self {
        DerivingStore {
            memory: EphemeralStore::new(),
            derive,
        }
    }
}

impl<F: Fsm> std::fmt::Debug for DerivingStore<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DerivingStore")
            .field("records", &self.memory.len())
            .finish()
    }
}

impl<F> KubeStore<F::Resource> for DerivingStore<F>
where
    F: Fsm,
    F::Resource: KubeResource,
{
    fn load<'a>(
        &'a self,
        target: &'a Target<F::Resource>,
    ) -> BoxFuture<'a, Result<Loaded, StoreError>> {
        Box::pin(async move {
            let loaded = KubeStore::load(&self.memory, target).await?;
            if loaded.record.is_some() {
                return Ok(loaded);
            }
            let Some(state) = (self.derive)(target.object.clone()).await else {
                return Ok(loaded);
            };
            let mut record =
                StateRecord::new(&state, jiff::Timestamp::now()).map_err(StoreError::Encode)?;
            record.observed_generation = target.generation;
            tracing::info!(object = %target.key, state = state.state_name(), "state derived from the world");
            Ok(Loaded {
                record: Some(record.to_raw().map_err(StoreError::Encode)?),
                version: None,
            })
        })
    }

    fn save<'a>(
        &'a self,
        target: &'a Target<F::Resource>,
        commit: Commit<'a>,
    ) -> BoxFuture<'a, Result<Version, StoreError>> {
        KubeStore::save(&self.memory, target, commit)
    }

    fn delete<'a>(
        &'a self,
        target: &'a Target<F::Resource>,
        expected: Option<&'a Version>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        KubeStore::delete(&self.memory, target, expected)
    }

    fn report_corrupt<'a>(
        &'a self,
        target: &'a Target<F::Resource>,
        error: &'a DecodeError,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        KubeStore::report_corrupt(&self.memory, target, error)
    }

    fn kind(&self) -> Option<StoreKind> {
        Some(StoreKind::Ephemeral)
    }
}
