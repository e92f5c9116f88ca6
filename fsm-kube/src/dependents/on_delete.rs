//! Ordered teardown for a [`DependentsReconciler`](super::DependentsReconciler):
//! its finalizer, and the last set computed for each owner (torn down
//! when the desired function cannot compute one for a deleted owner).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use kube::api::{Api, ApiResource, DynamicObject, PatchParams};

use super::error::DependentsError;
use super::object::Owner;
use super::runtime::DependentsRuntime;
use super::set::DesiredSet;
use crate::{KubeResource, finalizer};

/// The finalizer
/// [`DependentsReconciler::teardown_on_delete`](super::DependentsReconciler::teardown_on_delete)
/// puts on owners: removed once their dependents are torn down.
pub const TEARDOWN_FINALIZER: &str = "operator-fsm.io/dependents-teardown";

/// How many owners' last sets are kept; past it the memory starts over
/// (an owner forgotten and then deleted with a set that cannot be
/// computed is left to the garbage collector).
const MAX_REMEMBERED_SETS: usize = 10_000;

/// The finalizer and the last set computed per owner UID, shared by the
/// clones of a reconciler.
#[derive(Clone, Debug, Default)]
pub(crate) struct TeardownOnDelete {
    last: Arc<Mutex<HashMap<String, Arc<DesiredSet>>>>,
}

impl TeardownOnDelete {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Arc<DesiredSet>>> {
        // Plain data: a panic elsewhere leaves it usable.
        self.last.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remembers `set` as the last computed for owner `uid`.
    pub(crate) fn remember(&self, uid: &str, set: Arc<DesiredSet>) {
        let mut last = self.lock();
        if last.len() >= MAX_REMEMBERED_SETS && !last.contains_key(uid) {
            last.clear();
        }
        last.insert(uid.to_owned(), set);
    }

    /// The last set computed for owner `uid` in this process.
    pub(crate) fn last(&self, uid: &str) -> Option<Arc<DesiredSet>> {
        self.lock().get(uid).cloned()
    }

    /// `object` with the finalizer on it (added with its
    /// `resourceVersion` as a precondition when missing).
    ///
    /// # Errors
    /// [`DependentsError::Finalizer`], 409 when the object changed
    /// meanwhile (the next reconcile tries again).
    pub(crate) async fn hold<K: KubeResource>(
        &self,
        runtime: &DependentsRuntime,
        object: Arc<K>,
    ) -> Result<Arc<K>, DependentsError> {
        if finalizer::has(object.as_ref(), TEARDOWN_FINALIZER) {
            return Ok(object);
        }
        let owner = Owner::of(object.as_ref())?;
        let held = finalizer::add(
            &owner_api::<K>(runtime, &owner),
            object.as_ref(),
            TEARDOWN_FINALIZER,
            &params(runtime),
        )
        .await
        .map_err(DependentsError::Finalizer)?;
        Ok(Arc::new(held))
    }

    /// Removes the finalizer from `object` (the owner goes) and forgets
    /// its set. An owner already gone is fine.
    ///
    /// # Errors
    /// [`DependentsError::Finalizer`].
    pub(crate) async fn release<K: KubeResource>(
        &self,
        runtime: &DependentsRuntime,
        object: &K,
        owner: &Owner,
    ) -> Result<(), DependentsError> {
        let api = owner_api::<K>(runtime, owner);
        match finalizer::remove(&api, object, TEARDOWN_FINALIZER, &params(runtime)).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => return Err(DependentsError::Finalizer(error)),
        }
        self.lock().remove(&owner.uid);
        tracing::info!(owner = %owner.name, "dependents torn down; finalizer removed");
        Ok(())
    }
}

/// The dynamic API of `owner`'s kind `K`, where it lives.
pub(crate) fn owner_api<K: KubeResource>(
    runtime: &DependentsRuntime,
    owner: &Owner,
) -> Api<DynamicObject> {
    let resource = ApiResource::erase::<K>(&());
    match &owner.namespace {
        Some(ns) => Api::namespaced_with(runtime.client.clone(), ns, &resource),
        None => Api::all_with(runtime.client.clone(), &resource),
    }
}

/// Patch parameters naming the runtime's field manager.
pub(crate) fn params(runtime: &DependentsRuntime) -> PatchParams {
    PatchParams {
        field_manager: Some(runtime.field_manager.clone()),
        ..PatchParams::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_set_is_kept_per_owner_and_the_memory_is_bounded() {
        let memory = TeardownOnDelete::default();
        let set = DesiredSet::default();
        memory.remember("a", Arc::new(set.clone()));
        assert!(memory.last("a").is_some());
        assert!(memory.last("b").is_none());
        for i in 0..MAX_REMEMBERED_SETS {
            memory.remember(&i.to_string(), Arc::new(set.clone()));
        }
        assert!(memory.lock().len() <= MAX_REMEMBERED_SETS);
    }
}
