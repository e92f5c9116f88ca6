//! `StatusStore`: the record in the CR's `.status.fsm`, written together
//! with `.status.conditions` in one status patch per commit.

use std::borrow::Cow;

use fsm_core::{BoxFuture, DecodeError, Loaded, RawRecord, StateRecord, StoreError, Version};
use kube::ResourceExt;
use kube::api::Patch;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{KubeStore, Target, report_corrupt_conditions, size};
use crate::KubeResource;
use crate::cache::WrittenCache;
use crate::{conditions, merge_patch};

/// Keeps the record at `.status.fsm` of the custom resource (the default).
///
/// # Expected flow
/// Loading reads the watched object: no API call. A commit is one merge
/// patch of the status subresource carrying the record, the conditions and
/// the object's `resourceVersion` as a precondition, so a concurrent write
/// answers 409 and nothing is committed.
///
/// # Assumptions
/// The CRD has the `status` subresource and its status schema declares
/// `fsm` (use [`FsmStatus`](crate::FsmStatus)) and `conditions`.
///
/// # Caveats
/// The version token is the whole object's: a spec edit between the load
/// and the commit is a conflict too, and the reconcile runs again on the
/// new spec, which is what the spec-change policy wants anyway.
#[derive(Debug, Default)]
pub struct StatusStore {
    written: WrittenCache,
}

impl StatusStore {
    /// A status store.
    pub fn new() -> Self {
        Self::default()
    }
}

impl<K: KubeResource> KubeStore<K> for StatusStore {
    fn load<'a>(&'a self, target: &'a Target<K>) -> BoxFuture<'a, Result<Loaded, StoreError>> {
        let loaded = match self.written.resolve(&target.uid, &target.resource_version) {
            Some(written) => Loaded {
                record: Some(written.record.clone()),
                version: Some(written.version.clone()),
            },
            None => Loaded {
                record: target
                    .status
                    .get("fsm")
                    .filter(|v| !v.is_null())
                    .cloned()
                    .map(RawRecord::Json),
                version: Some(Version(target.resource_version.clone())),
            },
        };
        Box::pin(async move { Ok(loaded) })
    }

    fn save<'a>(
        &'a self,
        target: &'a Target<K>,
        record: &'a StateRecord,
        expected: Option<&'a Version>,
    ) -> BoxFuture<'a, Result<Version, StoreError>> {
        Box::pin(async move {
            // What the server holds now: our last commit while the watch
            // lags, else the watched object.
            let written = self.written.resolve(&target.uid, &target.resource_version);
            let (stored, previous) = match &written {
                Some(written) => (
                    match &written.record {
                        RawRecord::Json(value) => Cow::Borrowed(value),
                        text @ RawRecord::Text(_) => Cow::Owned(text.as_json()),
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
            let mut status = json!({ "fsm": merge_patch::diff(&stored, &value) });
            let conditions = target.conditions.then(|| {
                conditions::from_record(
                    target.machine,
                    record,
                    target.generation,
                    &previous,
                    jiff::Timestamp::now(),
                )
            });
            if let Some(conditions) = &conditions {
                status["conditions"] = json!(conditions);
            }
            let mut patch = json!({ "status": status });
            if let Some(expected) = expected {
                patch["metadata"] = json!({ "resourceVersion": expected.0 });
            }
            let version = patch_status(target, &patch).await.map_err(|e| {
                let whole = size::whole_object_with_record(target.object.as_ref(), &value);
                size::refused(e, "the object", whole.max(object_size), size::OBJECT_LIMIT)
            })?;
            let written = RawRecord::Json(value);
            self.written
                .remember(&target.uid, expected, version.clone(), written, conditions);
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
        Box::pin(async { Ok(()) })
    }

    fn report_corrupt<'a>(
        &'a self,
        target: &'a Target<K>,
        error: &'a DecodeError,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        self.written.forget(&target.uid);
        Box::pin(report_corrupt_conditions(target, error))
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
