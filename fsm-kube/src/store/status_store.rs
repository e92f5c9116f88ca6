//! `StatusStore`: the record in the CR's `.status.fsm`, written together
//! with `.status.conditions` and `.status.observedGeneration` in one status
//! patch per commit.

use std::borrow::Cow;
use std::sync::Arc;

use fsm_core::{
    BoxFuture, Commit, DecodeError, DecodedRecord, Loaded, RawRecord, StateRecord, StatusFields,
    StoreError, Version,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;
use kube::api::Patch;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::time::Instant;

use super::kind::{RecordPlace, StoreKind};
use super::{KubeStore, Target, report_corrupt_conditions, size};
use crate::KubeResource;
use crate::cache::WrittenCache;
use crate::decoded::DecodedCache;
use crate::{conditions, merge_patch};

/// Keeps the record at `.status.fsm` of the custom resource (the default).
///
/// # Expected flow
/// Loading reads the watched object: no API call. A commit is one merge
/// patch of the status subresource carrying the record, the conditions,
/// `observedGeneration` (the generation the machine has acted on, which
/// kstatus compares with `metadata.generation`) and the object's
/// `resourceVersion` as a precondition, so a concurrent write answers 409
/// and nothing is committed.
///
/// # Assumptions
/// The CRD has the `status` subresource and its status schema declares
/// `fsm` (use [`FsmStatus`](crate::FsmStatus)), `conditions` and
/// `observedGeneration` (an integer; without it the API server prunes the
/// field, and kstatus cannot tell a spec the machine has not taken yet).
///
/// # Caching
/// The store keeps the record it committed, decoded and keyed by the
/// object's UID and the `resourceVersion` the commit produced, until the
/// next load of the object (up to 1,024 objects): that load, usually the
/// reconcile the runtime's own write wakes up, hands the engine the record
/// without decoding the status again. Any other version (someone else
/// wrote) and any later load are decoded from the status as usual; a
/// deleted object or a record reported corrupt is forgotten.
///
/// # Caveats
/// The version token is the whole object's: a spec edit between the load
/// and the commit is a conflict too, and the reconcile runs again on the
/// new spec, which is what the spec-change policy wants anyway.
#[derive(Debug, Default)]
pub struct StatusStore {
    written: WrittenCache,
    decoded: DecodedCache,
}

impl StatusStore {
    /// Where this store keeps records: the object's `.status.fsm`.
    pub const PLACE: RecordPlace = RecordPlace::Status;

    /// A status store.
    pub fn new() -> Self {
        Self::default()
    }
}

impl<K: KubeResource> KubeStore<K> for StatusStore {
    fn load<'a>(&'a self, target: &'a Target<K>) -> BoxFuture<'a, Result<Loaded, StoreError>> {
        let decoded = |version: &str| {
            self.decoded
                .take(&target.uid, version)
                .map(|record| RawRecord::Decoded(DecodedRecord::new(target.machine, record)))
        };
        let loaded = match self.written.resolve(&target.uid, &target.resource_version) {
            Some(written) => Loaded {
                record: decoded(&written.version.0).or_else(|| Some(written.record.clone())),
                version: Some(written.version.clone()),
            },
            None => Loaded {
                record: decoded(&target.resource_version).or_else(|| {
                    target
                        .status
                        .get("fsm")
                        .filter(|v| !v.is_null())
                        .cloned()
                        .map(RawRecord::Json)
                }),
                version: Some(Version(target.resource_version.clone())),
            },
        };
        Box::pin(async move { Ok(loaded) })
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
            // What the server holds now: our last commit while the watch
            // lags, else the watched object.
            let written = self.written.resolve(&target.uid, &target.resource_version);
            let (stored, previous) = match &written {
                Some(written) => (
                    match &written.record {
                        RawRecord::Json(value) => Cow::Borrowed(value),
                        other => Cow::Owned(other.as_json()),
                    },
                    written.conditions.clone().unwrap_or_default(),
                ),
                None => (
                    Cow::Borrowed(target.status.get("fsm").unwrap_or(&Value::Null)),
                    target.current_conditions(),
                ),
            };
            let value = serde_json::to_value(record).map_err(StoreError::Encode)?;
            let object_size = size::object_with_record(target.object.as_ref(), &value);
            size::check("the object", object_size, size::OBJECT_LIMIT)?;
            let patch = StatusPatch {
                target,
                record,
                status,
                value: &value,
                stored: stored.as_ref(),
            };
            let mut write = patch.write(&previous, expected);
            if !write.changes
                && let Some(expected) = expected
            {
                // Nothing the object does not already hold: no write.
                return Ok(expected.clone());
            }
            let mut superseded = expected.cloned();
            let mut rebases = 0;
            let (version, conditions) = loop {
                match patch_status(target, &write.patch).await {
                    Ok(version) => break (version, write.conditions),
                    Err(kube::Error::Api(e)) if e.is_conflict() && rebases < MAX_REBASES => {
                        // Someone else wrote the object since it was read;
                        // when only outside the record and the spec (the
                        // handler publishing on its own object, a label),
                        // the decision still holds: write it over the new
                        // version without running the handler again.
                        let Some(fresh) = patch.rebase_onto().await? else {
                            return Err(StoreError::Conflict);
                        };
                        rebases += 1;
                        tracing::debug!(
                            object = %target.key,
                            version = %fresh.version,
                            "status write rebased over a change outside the record and the spec"
                        );
                        write = patch.write(&fresh.conditions, Some(&fresh.version));
                        if !write.changes {
                            return Ok(fresh.version);
                        }
                        superseded = Some(fresh.version);
                    }
                    Err(e) => {
                        let whole = size::whole_object_with_record(target.object.as_ref(), &value);
                        return Err(size::refused(
                            e,
                            "the object",
                            whole.max(object_size),
                            size::OBJECT_LIMIT,
                        ));
                    }
                }
            };
            self.decoded
                .remember(&target.uid, version.clone(), Arc::new(record.clone()));
            // As compact text: the entry lives until the watch delivers
            // the commit (seconds on a loaded server), a record as a
            // `Value` is several times its text, and it is read back only
            // by a copy the watch has not caught up with.
            let written = RawRecord::Text(value.to_string());
            self.written.remember(
                &target.uid,
                superseded.as_ref(),
                version.clone(),
                written,
                conditions,
            );
            Ok(version)
        })
    }

    fn delete<'a>(
        &'a self,
        target: &'a Target<K>,
        _: Option<&'a Version>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        // The record goes with the object.
        self.written.forget(&target.uid);
        self.decoded.forget(&target.uid);
        Box::pin(async { Ok(()) })
    }

    fn report_corrupt<'a>(
        &'a self,
        target: &'a Target<K>,
        error: &'a DecodeError,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        self.written.forget(&target.uid);
        self.decoded.forget(&target.uid);
        Box::pin(report_corrupt_conditions(target, error))
    }

    /// A commit is a status patch of the object: the watch sees it.
    fn commits_write_the_object(&self) -> bool {
        true
    }

    fn own_commit_in_flight(&self, uid: &str, resource_version: &str) -> Option<Instant> {
        self.written.superseded_at(uid, resource_version)
    }

    fn kind(&self) -> Option<StoreKind> {
        Some(StoreKind::Status)
    }
}

/// How many times one commit is rebased over writes outside the record
/// and the spec before it gives up with a conflict.
const MAX_REBASES: u32 = 5;

/// One commit of a record (and published status fields) to the object's
/// status, and what it was decided from.
struct StatusPatch<'a, K: KubeResource> {
    target: &'a Target<K>,
    record: &'a StateRecord,
    status: Option<&'a StatusFields>,
    /// The record as JSON.
    value: &'a Value,
    /// The record the decision was made from, as the server holds it.
    stored: &'a Value,
}

/// A status patch of a commit, and the conditions it writes.
struct Write {
    patch: Value,
    conditions: Option<Vec<Condition>>,
    /// Whether it changes anything the object holds.
    changes: bool,
}

/// The object as a rebase finds it.
struct Fresh {
    version: Version,
    conditions: Vec<Condition>,
}

impl<K: KubeResource> StatusPatch<'_, K> {
    /// The status patch that writes this commit over an object whose
    /// conditions are `previous`, with `version` as its precondition; it
    /// `changes` nothing when the object already holds the record, the
    /// conditions and the published fields.
    fn write(&self, previous: &[Condition], version: Option<&Version>) -> Write {
        let record_diff = merge_patch::diff(self.stored, self.value);
        let conditions = self.conditions(previous);
        let (_, generation_changes) = super::observed_generation(&self.target.status, self.record);
        let changes = record_diff.as_object().is_none_or(|d| !d.is_empty())
            || generation_changes
            || conditions
                .as_ref()
                .is_some_and(|c| !conditions::same(previous, c))
            || self.status.is_some_and(|fields| {
                merge_patch::changes(&self.target.status, &Value::Object(fields.clone()))
            });
        let (patch, conditions) =
            self.build(record_diff, conditions, version.map(|v| v.0.as_str()));
        Write {
            patch,
            conditions,
            changes,
        }
    }

    fn conditions(&self, previous: &[Condition]) -> Option<Vec<Condition>> {
        self.target.conditions.then(|| {
            let now = jiff::Timestamp::now();
            let wanted = conditions::from_record(
                self.target.machine,
                self.record,
                self.target.generation,
                previous,
                now,
            );
            self.target
                .reported
                .merge_into(&self.target.uid, wanted, self.target.generation, now)
        })
    }

    fn build(
        &self,
        record_diff: Value,
        conditions: Option<Vec<Condition>>,
        version: Option<&str>,
    ) -> (Value, Option<Vec<Condition>>) {
        // Built by moving values in: `json!` would copy each through
        // serialisation, the whole record diff included.
        let mut status = self.status.cloned().unwrap_or_default();
        status.insert("fsm".to_owned(), record_diff);
        // kstatus compares it with `metadata.generation`: written with
        // every commit (a no-op in the merge when it holds already).
        if let Some(generation) = self.record.observed_generation {
            status.insert(super::OBSERVED_GENERATION.to_owned(), json!(generation));
        }
        if let Some(conditions) = &conditions {
            status.insert("conditions".to_owned(), json!(conditions));
        }
        let mut patch = Map::new();
        patch.insert("status".to_owned(), Value::Object(status));
        if let Some(version) = version {
            patch.insert("metadata".to_owned(), json!({ "resourceVersion": version }));
        }
        (Value::Object(patch), conditions)
    }

    /// Reads the object again after a conflict. `Some` when the write can
    /// be made over the new version: the same object (UID), the same spec
    /// (generation), the same deletion state, and the record this commit
    /// was decided from; `None` when the conflict means the decision may
    /// no longer hold (reconcile again).
    async fn rebase_onto(&self) -> Result<Option<Fresh>, StoreError> {
        let fresh = match self.target.api.get(&self.target.object.name_any()).await {
            Ok(fresh) => fresh,
            Err(kube::Error::Api(e)) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(super::store_error(e)),
        };
        let meta = self.target.object.meta();
        let same_object = fresh.metadata.uid == meta.uid
            && fresh.metadata.generation == self.target.generation
            && fresh.metadata.deletion_timestamp.is_some() == meta.deletion_timestamp.is_some();
        let status = fresh.data.get("status");
        let record = status.and_then(|s| s.get("fsm")).unwrap_or(&Value::Null);
        if !same_object || record != self.stored {
            return Ok(None);
        }
        let conditions = status
            .and_then(|s| s.get("conditions"))
            .and_then(|c| Vec::<Condition>::deserialize(c).ok())
            .unwrap_or_default();
        Ok(fresh.metadata.resource_version.map(|v| Fresh {
            version: Version(v),
            conditions,
        }))
    }
}

/// Merge-patches the status of the target and returns the object's new
/// `resourceVersion`.
///
/// The answer is the whole object, `managedFields` included; only its
/// `resourceVersion` is read (serde skips the rest without building it),
/// where decoding it whole was a large part of a commit's cost on the
/// operator's side.
async fn patch_status<K: KubeResource>(
    target: &Target<K>,
    patch: &Value,
) -> Result<Version, kube::Error> {
    #[derive(Deserialize)]
    struct Written {
        metadata: WrittenMeta,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct WrittenMeta {
        resource_version: Option<String>,
    }
    let mut request = kube::core::Request::new(target.api.resource_url())
        .patch_subresource(
            "status",
            &target.object.name_any(),
            &target.patch_params(),
            &Patch::Merge(patch),
        )
        .map_err(kube::Error::BuildRequest)?;
    // The name kube's own `Api::patch_status` gives the request.
    request.extensions_mut().insert("patch_status");
    let written: Written = target.api.clone().into_client().request(request).await?;
    Ok(Version(
        written.metadata.resource_version.unwrap_or_default(),
    ))
}
