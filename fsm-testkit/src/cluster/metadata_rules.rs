//! The rules of every object's metadata: what `ObjectMeta` has (other
//! fields are dropped) and the causes the real server finds in labels,
//! annotations, owner references and finalizers, on create and (as often
//! as 1.20 checks them) on update.

use serde_json::Value;

use super::gc;
use crate::builtins::MetaCheck;
use crate::resources::ResourceDef;
use crate::status::Cause;

/// The fields of `ObjectMeta`: others in a body's metadata are dropped.
const OBJECT_META_FIELDS: [&str; 16] = [
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
    "clusterName",
];

/// The causes the real server finds in an object's metadata on create, in
/// its order (core validation's `ValidateObjectMeta`): label keys and
/// values, annotation keys (qualified names, the prefix lowercased) and
/// their total size, owner references, finalizers; then, for a built-in
/// kind, each finalizer that is neither standard nor qualified.
pub(super) fn metadata_causes(
    def: &ResourceDef,
    meta: &serde_json::Map<String, Value>,
) -> Vec<Cause> {
    let mut causes = generic_causes(meta);
    causes.extend(gc::kube_finalizer_causes(def, meta));
    causes
}

/// The causes of an update's metadata, each check as many times as 1.20
/// runs it: every update's common checks (apimachinery's full metadata
/// validation, then its update validation), then those of the kind's own
/// update validation, `checks` in order (core validation's update or full
/// metadata validation, each with the finalizer names of a built-in kind).
/// The real server's message lists each cause once; its causes repeat.
pub(super) fn update_metadata_causes(
    def: &ResourceDef,
    meta: &serde_json::Map<String, Value>,
    checks: &[MetaCheck],
) -> Vec<Cause> {
    let mut causes = generic_causes(meta);
    causes.extend(generic_update_causes(meta));
    for check in checks {
        match check {
            MetaCheck::Update => causes.extend(generic_update_causes(meta)),
            MetaCheck::Full => causes.extend(generic_causes(meta)),
        }
        causes.extend(gc::kube_finalizer_causes(def, meta));
    }
    causes
}

/// apimachinery's `ValidateObjectMetaAccessor`, but names: labels,
/// annotations, owner references, finalizers.
fn generic_causes(meta: &serde_json::Map<String, Value>) -> Vec<Cause> {
    let mut causes = generic_update_causes(meta);
    causes.extend(gc::finalizer_causes(meta));
    causes
}

/// apimachinery's `ValidateObjectMetaAccessorUpdate`, but what may not
/// change: labels, annotations, owner references.
fn generic_update_causes(meta: &serde_json::Map<String, Value>) -> Vec<Cause> {
    let mut causes = label_causes(meta);
    causes.extend(annotation_causes(meta));
    causes.extend(gc::owner_reference_causes(meta));
    causes
}

/// Label keys (qualified names) and values.
fn label_causes(meta: &serde_json::Map<String, Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    if let Some(labels) = meta.get("labels").and_then(Value::as_object) {
        for (k, v) in labels {
            for problem in crate::validation::qualified_name_problems(k) {
                causes.push(Cause::invalid("metadata.labels", k, &problem));
            }
            match v.as_str() {
                Some(text) => {
                    if let Some(problem) = crate::validation::label_value_problem(text) {
                        causes.push(Cause::invalid("metadata.labels", text, &problem));
                    }
                }
                None => causes.push(Cause::invalid(
                    "metadata.labels",
                    &v.to_string(),
                    "label values must be strings",
                )),
            }
        }
    }
    causes
}

/// Annotation keys (qualified names, the prefix lowercased) and the
/// annotations' total size.
fn annotation_causes(meta: &serde_json::Map<String, Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    if let Some(annotations) = meta.get("annotations").and_then(Value::as_object) {
        let mut total = 0;
        for (k, v) in annotations {
            for problem in crate::validation::qualified_name_problems(&k.to_lowercase()) {
                causes.push(Cause::invalid("metadata.annotations", k, &problem));
            }
            total += k.len() + v.as_str().map_or(0, str::len);
        }
        if total > crate::validation::TOTAL_ANNOTATION_BYTES {
            causes.push(Cause {
                reason: "FieldValueTooLong".into(),
                message: format!(
                    "Too long: must have at most {} bytes",
                    crate::validation::TOTAL_ANNOTATION_BYTES
                ),
                field: "metadata.annotations".into(),
            });
        }
    }
    causes
}

/// Drops what a body's metadata carries beyond `ObjectMeta`'s fields, as
/// decoding into `ObjectMeta` does on the real server.
pub(super) fn drop_unknown_metadata(meta: &mut serde_json::Map<String, Value>) {
    meta.retain(|k, _| OBJECT_META_FIELDS.contains(&k.as_str()));
}
