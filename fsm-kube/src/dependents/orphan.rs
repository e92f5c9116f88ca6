//! Releasing a kept dependent ([`Dependent::keep_on_prune`](super::Dependent::keep_on_prune))
//! instead of deleting it: the owner's reference, labels and the keep
//! annotation come off, the object stays.

use kube::api::{Patch, PatchParams};
use serde_json::{Map, Value, json};

use super::kind::DependentKind;
use super::object::{DEPENDENT_LABEL, Owner, Placement};
use super::runtime::DependentsRuntime;
use crate::store::{MANAGED_BY_LABEL, OWNER_UID_LABEL};

/// The annotation (value `orphan`) a kept dependent's objects carry, so
/// that pruning, which sees only live objects, releases them instead of
/// deleting them.
pub const KEEP_ANNOTATION: &str = "operator-fsm.io/deletion-policy";

/// The value of [`KEEP_ANNOTATION`].
const ORPHAN: &str = "orphan";

/// Adds [`KEEP_ANNOTATION`] to an object about to be applied or created.
pub(crate) fn mark(body: &mut Value) {
    let Some(metadata) = body.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let annotations = metadata
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(annotations) = annotations.as_object_mut() {
        annotations.insert(KEEP_ANNOTATION.into(), ORPHAN.into());
    }
}

/// Whether the live object is to be released rather than deleted.
pub(crate) fn is_kept(live: &Value) -> bool {
    live.pointer("/metadata/annotations")
        .and_then(|a| a.get(KEEP_ANNOTATION))
        .and_then(Value::as_str)
        == Some(ORPHAN)
}

/// [`is_kept`], read from typed metadata.
pub(crate) fn is_kept_meta(meta: &kube::api::ObjectMeta) -> bool {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(KEEP_ANNOTATION))
        .map(String::as_str)
        == Some(ORPHAN)
}

/// The merge patch releasing `live` from `owner`: its other owner
/// references kept, the owner's labels and the keep annotation removed,
/// and the resource version it was read at, so that a concurrent change
/// of its owner references is not overwritten (the server answers 409).
pub(crate) fn release_patch(live: &Value, owner: &Owner) -> Value {
    let others: Vec<&Value> = live
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|r| r.get("uid").and_then(Value::as_str) != Some(owner.uid.as_str()))
        .collect();
    let references = if others.is_empty() {
        Value::Null
    } else {
        json!(others)
    };
    json!({
        "metadata": {
            "resourceVersion": live.pointer("/metadata/resourceVersion"),
            "ownerReferences": references,
            "labels": {
                MANAGED_BY_LABEL.0: null,
                OWNER_UID_LABEL: null,
                DEPENDENT_LABEL: null,
            },
            "annotations": { KEEP_ANNOTATION: null },
        }
    })
}

/// Releases the object at `place` (read as `live`) from `owner`, and
/// publishes an `Orphaned` event.
pub(crate) async fn release(
    runtime: &DependentsRuntime,
    owner: &Owner,
    kind: &DependentKind,
    place: &Placement,
    live: &Value,
) -> Result<(), kube::Error> {
    let api = runtime.api(kind, place.namespace.as_deref());
    let params = PatchParams {
        field_manager: Some(runtime.field_manager.clone()),
        ..PatchParams::default()
    };
    let patch = Patch::Merge(release_patch(live, owner));
    match api.patch(&place.name, &params, &patch).await {
        Ok(released) => {
            if let Ok(released) = serde_json::to_value(released) {
                runtime.wrote(place, &released);
            }
        }
        // Gone meanwhile: nothing left to keep.
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
        Err(error) => return Err(error),
    }
    runtime.count(kind, "orphaned");
    tracing::info!(object = %place.display(), "released from its owner (kept)");
    runtime
        .event(
            owner,
            "Orphaned",
            "Orphan",
            place,
            format!(
                "released {} from {}: kept, no longer owned",
                place.display(),
                owner.display()
            ),
        )
        .await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dependents::object::test_owner;

    fn owner() -> Owner {
        test_owner(Some("ns"))
    }

    #[test]
    fn a_marked_object_is_kept_and_its_release_removes_only_the_owners_marks() {
        let mut body = json!({"metadata": {"name": "x"}});
        assert!(!is_kept(&body));
        mark(&mut body);
        assert!(is_kept(&body));
        let meta = |body: &Value| {
            serde_json::from_value::<kube::api::ObjectMeta>(body["metadata"].clone())
                .unwrap_or_default()
        };
        assert!(is_kept_meta(&meta(&body)));
        assert!(!is_kept_meta(&meta(&json!({"metadata": {"name": "x"}}))));
        let live = json!({"metadata": {"name": "x", "resourceVersion": "7",
            "ownerReferences": [{"uid": "u-1"}, {"uid": "other"}]}});
        let patch = release_patch(&live, &owner());
        assert_eq!(
            patch["metadata"]["ownerReferences"],
            json!([{"uid": "other"}])
        );
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        assert_eq!(patch["metadata"]["labels"][DEPENDENT_LABEL], Value::Null);
        assert_eq!(
            patch["metadata"]["annotations"],
            json!({ KEEP_ANNOTATION: null })
        );
        let alone = json!({"metadata": {"ownerReferences": [{"uid": "u-1"}]}});
        assert_eq!(
            release_patch(&alone, &owner())["metadata"]["ownerReferences"],
            Value::Null
        );
    }
}
