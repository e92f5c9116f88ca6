//! Where the record lives, for objects of the Kubernetes API: the CR's
//! status, a ConfigMap, a Secret, or memory.

mod ephemeral;
mod kind;
mod object;
mod registry;
pub mod size;
mod status_store;

use std::sync::Arc;

use fsm_core::{
    BoxFuture, Commit, DecodeError, Loaded, Machine, ObjectKey, StateRecord, StateStore,
    StatusFields, StoreError, Version,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::DynamicObject;
use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::time::Instant;

pub use ephemeral::DerivingStore;
pub use kind::{RecordObjectKind, RecordPlace, StoreKind};
pub use object::{
    ConfigMapStore, MANAGED_BY_LABEL, OWNER_KIND_LABEL, OWNER_LABEL, OWNER_UID_LABEL, ObjectStore,
    RECORD_KEY, RecordObject, SecretStore, legacy_record_object_name, record_object_name,
    record_object_name_for,
};
pub(crate) use object::{belongs_to, legacy_belongs_to};
pub use status_store::StatusStore;

use crate::KubeResource;
use crate::conditions;

/// The object a reconcile works on, with what the stores need of it: the
/// reconciler makes one per reconcile; [`Target::new`] makes one to call a
/// store directly (a store's own tests, a benchmark).
pub struct Target<K: KubeResource> {
    /// The object, as the watch delivered it (or as the last write
    /// returned it).
    object: Arc<K>,
    /// The API of the object's kind, in its namespace (dynamic, so that one
    /// code path serves namespaced and cluster-scoped kinds).
    api: Api<DynamicObject>,
    /// The object's namespace and name.
    key: ObjectKey,
    /// The object's UID (the key of in-memory state).
    uid: String,
    /// The object's `resourceVersion`.
    resource_version: String,
    /// The object's `metadata.generation`.
    generation: Option<i64>,
    /// The object's `status`, as JSON (`Null` when absent).
    status: Value,
    /// The machine, for the conditions.
    machine: &'static Machine,
    /// The field manager of writes.
    field_manager: String,
    /// Whether to maintain conditions on the object.
    conditions: bool,
    /// Conditions reported during the step (`DependentsReady`), written
    /// with the record's.
    reported: conditions::ReportedConditions,
}

impl<K: KubeResource> Target<K> {
    /// A target for `object`, written through `api` (the API of its kind in
    /// its namespace), whose record is of `machine`: writes as field
    /// manager `operator-fsm`, and maintains conditions.
    pub fn new(object: Arc<K>, api: Api<DynamicObject>, machine: &'static Machine) -> Self {
        let (status, _) = crate::fields::status_and_spec(object.as_ref(), false);
        Self::from_parts(object, api, machine, status)
    }

    /// As [`new`](Self::new), with the status already read from the object.
    pub(crate) fn from_parts(
        object: Arc<K>,
        api: Api<DynamicObject>,
        machine: &'static Machine,
        status: Value,
    ) -> Self {
        let meta = object.meta();
        let name = object.name_any();
        let key = match meta.namespace.clone() {
            Some(ns) => ObjectKey::namespaced(ns, name),
            None => ObjectKey::cluster(name),
        };
        Target {
            uid: meta.uid.clone().unwrap_or_else(|| key.to_string()),
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            generation: meta.generation,
            key,
            status,
            api,
            object,
            machine,
            field_manager: "operator-fsm".to_owned(),
            conditions: true,
            reported: conditions::ReportedConditions::default(),
        }
    }

    /// The same target, writing as field manager `name`.
    pub fn with_field_manager(mut self, name: impl Into<String>) -> Self {
        self.field_manager = name.into();
        self
    }

    /// The same target, maintaining the object's conditions or not.
    pub fn with_conditions(mut self, maintain: bool) -> Self {
        self.conditions = maintain;
        self
    }

    /// The same target, merging the conditions the step's dependents
    /// reported into those it writes.
    pub(crate) fn with_reported(mut self, reported: conditions::ReportedConditions) -> Self {
        self.reported = reported;
        self
    }

    /// The object, as the watch delivered it (or as the last write
    /// returned it).
    pub fn object(&self) -> &Arc<K> {
        &self.object
    }

    /// The API of the object's kind, in its namespace.
    pub fn api(&self) -> &Api<DynamicObject> {
        &self.api
    }

    /// The object's namespace and name.
    pub fn key(&self) -> &ObjectKey {
        &self.key
    }

    /// The object's UID (its name, for an object without one).
    pub fn uid(&self) -> &str {
        &self.uid
    }

    /// The object's `resourceVersion`: the version token of a store whose
    /// commits write the object.
    pub fn resource_version(&self) -> &str {
        &self.resource_version
    }

    /// The object's `metadata.generation`.
    pub fn generation(&self) -> Option<i64> {
        self.generation
    }

    /// The object's `status`, as JSON (`Null` when absent).
    pub fn status(&self) -> &Value {
        &self.status
    }

    /// The machine whose record the stores keep.
    pub fn machine(&self) -> &'static Machine {
        self.machine
    }

    /// The field manager of the stores' writes.
    pub fn field_manager(&self) -> &str {
        &self.field_manager
    }

    /// Whether the stores maintain conditions on the object.
    pub fn maintains_conditions(&self) -> bool {
        self.conditions
    }
    /// The conditions currently on the object.
    pub fn current_conditions(&self) -> Vec<Condition> {
        self.status
            .get("conditions")
            .and_then(|c| Vec::<Condition>::deserialize(c).ok())
            .unwrap_or_default()
    }

    fn patch_params(&self) -> PatchParams {
        PatchParams {
            field_manager: Some(self.field_manager.clone()),
            ..PatchParams::default()
        }
    }

    /// Writes `wanted` conditions to the object's status unless they say
    /// what `current` says. Returns whether it wrote.
    pub(crate) async fn write_conditions(
        &self,
        current: &[Condition],
        wanted: &[Condition],
    ) -> Result<bool, StoreError> {
        if !self.conditions || conditions::same(current, wanted) {
            return Ok(false);
        }
        let patch = json!({ "status": { "conditions": wanted } });
        self.api
            .patch_status(
                &self.object.name_any(),
                &self.patch_params(),
                &Patch::Merge(&patch),
            )
            .await
            .map_err(store_error)?;
        Ok(true)
    }

    /// Reports on the object that its next record would exceed a size
    /// limit (the `Degraded` condition, reason `RecordTooLarge`), without
    /// touching the record. Returns whether it wrote: not when the object
    /// already says so (whatever size it named), so that a record whose
    /// size varies cannot make each reconcile write and wake the next.
    pub(crate) async fn report_too_large(&self, error: &StoreError) -> Result<bool, StoreError> {
        let current = self.current_conditions();
        let reported = current.iter().any(|c| {
            c.type_ == "Degraded" && c.status == "True" && c.reason == conditions::TOO_LARGE_REASON
        });
        if reported {
            return Ok(false);
        }
        let wanted =
            conditions::too_large(error, self.generation, &current, jiff::Timestamp::now());
        self.write_conditions(&current, &wanted).await
    }

    /// Reports on the object that its record was written by machine
    /// version `found`, newer than this build's `supported` (the
    /// `Degraded` condition, reason `RecordFromNewerVersion`), without
    /// touching the record. Returns whether it wrote (not when the object
    /// already says so).
    pub(crate) async fn report_newer_record(
        &self,
        found: u32,
        supported: u32,
    ) -> Result<bool, StoreError> {
        let current = self.current_conditions();
        let wanted = conditions::newer_record(
            found,
            supported,
            self.generation,
            &current,
            jiff::Timestamp::now(),
        );
        self.write_conditions(&current, &wanted).await
    }

    /// Writes the conditions for `record`, `status.observedGeneration` and
    /// the status fields a step published (stores that keep the record
    /// elsewhere, and the reconciler's refresh after a step that committed
    /// nothing), in one status patch, only when the object does not
    /// already hold them. With `precondition`, the patch carries the
    /// object's `resourceVersion` (the copy the conditions were computed
    /// against): a concurrent write answers 409
    /// ([`StoreError::Conflict`]). Returns whether it wrote.
    pub(crate) async fn sync_status(
        &self,
        record: &StateRecord,
        published: Option<&StatusFields>,
        precondition: bool,
    ) -> Result<bool, StoreError> {
        let mut status = serde_json::Map::new();
        let mut changes = false;
        if let Some(fields) = published {
            let fields = Value::Object(fields.clone());
            if crate::merge_patch::changes(&self.status, &fields)
                && let Value::Object(fields) = fields
            {
                status = fields;
                changes = true;
            }
        }
        if self.conditions {
            let current = self.current_conditions();
            let now = jiff::Timestamp::now();
            let wanted =
                conditions::from_record(self.machine, record, self.generation, &current, now);
            let wanted = self
                .reported
                .merge_into(&self.uid, wanted, self.generation, now);
            if !conditions::same(&current, &wanted) {
                status.insert("conditions".to_owned(), json!(wanted));
                changes = true;
            }
        }
        let (generation, generation_changes) = observed_generation(&self.status, record);
        changes |= generation_changes;
        if !changes {
            return Ok(false);
        }
        if let Some(generation) = generation {
            status.insert(OBSERVED_GENERATION.to_owned(), generation);
        }
        let mut patch = json!({ "status": status });
        if precondition {
            patch["metadata"] = json!({ "resourceVersion": self.resource_version });
        }
        self.api
            .patch_status(
                &self.object.name_any(),
                &self.patch_params(),
                &Patch::Merge(&patch),
            )
            .await
            .map_err(store_error)?;
        Ok(true)
    }
}

/// The top-level status field kstatus compares with `metadata.generation`.
pub const OBSERVED_GENERATION: &str = "observedGeneration";

/// `status.observedGeneration` for `record` (the generation the machine
/// has acted on: [`StateRecord::observed_generation`]), to write with the
/// next status patch, and whether writing it is a change by itself: when
/// the object holds another number there. An object that holds none is
/// given it with its next write of anything else, never by a write of its
/// own: a CRD whose status schema does not declare the field has it
/// pruned by the API server, and counting that absence as a change would
/// write the object on every re-sync.
pub(crate) fn observed_generation(status: &Value, record: &StateRecord) -> (Option<Value>, bool) {
    let Some(generation) = record.observed_generation else {
        return (None, false);
    };
    let held = status.get(OBSERVED_GENERATION).and_then(Value::as_i64);
    let changes = held.is_some_and(|held| held != generation);
    (Some(json!(generation)), changes)
}

/// Maps kube's errors onto the store's: 409 is a conflict, the rest the
/// backend's.
pub(crate) fn store_error(e: kube::Error) -> StoreError {
    match &e {
        kube::Error::Api(status) if status.is_conflict() || status.is_already_exists() => {
            StoreError::Conflict
        }
        _ => StoreError::Backend(Box::new(e)),
    }
}

/// A store of records for objects of kind `K`.
///
/// # Guarantees expected of an implementation
/// As for [`fsm_core::StateStore`]: `save` writes only over the expected
/// version and fails with [`StoreError::Conflict`] otherwise.
pub trait KubeStore<K: KubeResource>: Send + Sync + 'static {
    /// Loads the record of `target`.
    fn load<'a>(&'a self, target: &'a Target<K>) -> BoxFuture<'a, Result<Loaded, StoreError>>;

    /// Saves `commit.record` for `target` over version `commit.expected`,
    /// with the object's conditions and the status fields a step published
    /// (`commit.status`), in the same write where the record lives in the
    /// status.
    fn save<'a>(
        &'a self,
        target: &'a Target<K>,
        commit: Commit<'a>,
    ) -> BoxFuture<'a, Result<Version, StoreError>>;

    /// Deletes the record of `target` (deletion is complete).
    fn delete<'a>(
        &'a self,
        target: &'a Target<K>,
        expected: Option<&'a Version>,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Reports on the object that its record cannot be decoded (the
    /// `Degraded` condition), without touching the record. Returns whether
    /// it wrote (false when the object already says so).
    fn report_corrupt<'a>(
        &'a self,
        target: &'a Target<K>,
        error: &'a DecodeError,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;

    /// Whether every commit writes the reconciled object itself and the
    /// versions [`save`](KubeStore::save) returns are the object's
    /// `resourceVersion`s, as with [`StatusStore`]. The controller's watch
    /// of the object then delivers each commit, and that event wakes the
    /// next step; other stores' writes wake nothing, so the reconciler
    /// requeues at once after their commits (see
    /// [`ReconcilerOptions::own_write_wait`](crate::ReconcilerOptions::own_write_wait)).
    /// Default `false`.
    fn commits_write_the_object(&self) -> bool {
        false
    }

    /// When this store's own last commit to the object of UID `uid` was
    /// made, if the copy at `resource_version` is from before it (the watch
    /// has not delivered that commit yet); `None` otherwise. Only stores whose
    /// [commits write the object](KubeStore::commits_write_the_object)
    /// answer: the reconciler then lets the commit's event run the next
    /// step rather than run it twice. Default `None`.
    fn own_commit_in_flight(&self, uid: &str, resource_version: &str) -> Option<Instant> {
        let _ = (uid, resource_version);
        None
    }

    /// The [`StoreKind`] this store is, which tells the command line and
    /// the read side where its records are; `None` (the default) for a
    /// store no kind describes.
    fn kind(&self) -> Option<StoreKind> {
        None
    }
}

/// A store shared by several reconcilers: memory that two builds of a
/// machine read in one process, or a store chosen at run time
/// (`Arc<dyn KubeStore<K>>`).
impl<K: KubeResource, S: KubeStore<K> + ?Sized> KubeStore<K> for Arc<S> {
    fn load<'a>(&'a self, target: &'a Target<K>) -> BoxFuture<'a, Result<Loaded, StoreError>> {
        S::load(self, target)
    }

    fn save<'a>(
        &'a self,
        target: &'a Target<K>,
        commit: Commit<'a>,
    ) -> BoxFuture<'a, Result<Version, StoreError>> {
        S::save(self, target, commit)
    }

    fn delete<'a>(
        &'a self,
        target: &'a Target<K>,
        expected: Option<&'a Version>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        S::delete(self, target, expected)
    }

    fn report_corrupt<'a>(
        &'a self,
        target: &'a Target<K>,
        error: &'a DecodeError,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        S::report_corrupt(self, target, error)
    }

    fn commits_write_the_object(&self) -> bool {
        S::commits_write_the_object(self)
    }

    fn own_commit_in_flight(&self, uid: &str, resource_version: &str) -> Option<Instant> {
        S::own_commit_in_flight(self, uid, resource_version)
    }

    fn kind(&self) -> Option<StoreKind> {
        S::kind(self)
    }
}

/// A [`KubeStore`] bound to one object: the engine's [`StateStore`].
pub(crate) struct Bound<'a, K: KubeResource> {
    pub store: &'a dyn KubeStore<K>,
    pub target: &'a Target<K>,
}

impl<K: KubeResource> StateStore for Bound<'_, K> {
    fn load<'a>(&'a self, _: &'a ObjectKey) -> BoxFuture<'a, Result<Loaded, StoreError>> {
        self.store.load(self.target)
    }

    fn save<'a>(
        &'a self,
        _: &'a ObjectKey,
        commit: Commit<'a>,
    ) -> BoxFuture<'a, Result<Version, StoreError>> {
        self.store.save(self.target, commit)
    }

    fn delete<'a>(
        &'a self,
        _: &'a ObjectKey,
        expected: Option<&'a Version>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.store.delete(self.target, expected)
    }
}

/// The corrupt-record report shared by the stores: a `Degraded` condition
/// with reason `CorruptRecord` on the object.
pub(crate) async fn report_corrupt_conditions<K: KubeResource>(
    target: &Target<K>,
    error: &DecodeError,
) -> Result<bool, StoreError> {
    let current = target.current_conditions();
    let wanted = conditions::corrupt(error, target.generation, &current, jiff::Timestamp::now());
    target.write_conditions(&current, &wanted).await
}

/// The object's namespace, required by stores that keep a namespaced
/// object beside it.
pub(crate) fn namespace_of<K: Resource>(object: &K) -> Result<String, StoreError> {
    object.namespace().ok_or_else(|| {
        StoreError::Backend(
            "this store keeps its record in a namespaced object; the resource is cluster-scoped"
                .into(),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(observed: Option<i64>) -> StateRecord {
        let mut record: StateRecord = serde_json::from_value(json!({
            "schemaVersion": 1, "state": "Ready", "enteredAt": "2026-01-01T00:00:00Z"
        }))
        .unwrap();
        record.observed_generation = observed;
        record
    }

    #[test]
    fn observed_generation_is_a_change_only_over_another_number() {
        let r = record(Some(3));
        assert_eq!(
            observed_generation(&json!({"observedGeneration": 3}), &r),
            (Some(json!(3)), false)
        );
        assert_eq!(
            observed_generation(&json!({"observedGeneration": 2}), &r),
            (Some(json!(3)), true)
        );
        // Absent (a new object, or pruned by a schema that does not
        // declare it): written with the next change, never on its own.
        assert_eq!(observed_generation(&json!({}), &r), (Some(json!(3)), false));
        assert_eq!(
            observed_generation(&Value::Null, &r),
            (Some(json!(3)), false)
        );
        assert_eq!(
            observed_generation(&json!({"observedGeneration": 3}), &record(None)),
            (None, false)
        );
    }
}
