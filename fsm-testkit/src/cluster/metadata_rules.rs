//! The rules of every object's metadata: what `ObjectMeta` has (other
//! fields are dropped) and the causes the real server finds in labels,
//! annotations, owner references and finalizers.

use serde_json::Value;

use super::gc;
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

/// The causes the real server finds in an object's metadata: label keys
/// and values, annotation keys (qualified names, the prefix lowercased),
/// the annotations' total size, and invalid owner references and
/// finalizers ([`gc::metadata_causes`]).
pub(super) fn metadata_causes(
    def: &ResourceDef,
    meta: &serde_json::Map<String, Value>,
) -> Vec<Cause> {
    let mut causes = gc::metadata_causes(def, meta);
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
