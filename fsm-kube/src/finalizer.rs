//! The runtime's finalizer: added when the machine has something to run on
//! deletion, removed once it has run.

use kube::api::{DynamicObject, Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use crate::KubeResource;

/// Whether `object` carries `finalizer`.
pub(crate) fn has<K: Resource>(object: &K, finalizer: &str) -> bool {
    object.finalizers().iter().any(|f| f == finalizer)
}

/// Adds `finalizer` to `object` with its `resourceVersion` as a
/// precondition, returning the updated object.
///
/// # Errors
/// The API's, 409 when the object changed meanwhile.
pub(crate) async fn add<K: KubeResource>(
    api: &Api<DynamicObject>,
    object: &K,
    finalizer: &str,
    params: &PatchParams,
) -> Result<K, kube::Error> {
    let mut finalizers = object.finalizers().to_vec();
    finalizers.push(finalizer.to_owned());
    patch(api, object, finalizers, params).await
}

/// Removes `finalizer` from `object` (precondition: its `resourceVersion`).
///
/// # Errors
/// The API's, 409 when the object changed meanwhile.
pub(crate) async fn remove<K: KubeResource>(
    api: &Api<DynamicObject>,
    object: &K,
    finalizer: &str,
    params: &PatchParams,
) -> Result<K, kube::Error> {
    let finalizers = object
        .finalizers()
        .iter()
        .filter(|f| *f != finalizer)
        .cloned()
        .collect();
    patch(api, object, finalizers, params).await
}

async fn patch<K: KubeResource>(
    api: &Api<DynamicObject>,
    object: &K,
    finalizers: Vec<String>,
    params: &PatchParams,
) -> Result<K, kube::Error> {
    let body = json!({
        "metadata": {
            "finalizers": finalizers,
            "resourceVersion": object.resource_version(),
        }
    });
    let updated = api
        .patch(&object.name_any(), params, &Patch::Merge(&body))
        .await?;
    let value = serde_json::to_value(updated).map_err(kube::Error::SerdeError)?;
    serde_json::from_value(value).map_err(kube::Error::SerdeError)
}
