//! What an update of a Pod may change (1.20's `ValidatePodUpdate`): its
//! containers' and init containers' images, a shorter
//! `activeDeadlineSeconds` (or a first one), its tolerations; nothing else
//! of its spec. The real message ends with a Go diff of the specs, left
//! out here.

use serde_json::Value;

use crate::status::Cause;

/// The message of any other change.
const OTHER_FIELDS: &str = "pod updates may not change fields other than \
    `spec.containers[*].image`, `spec.initContainers[*].image`, \
    `spec.activeDeadlineSeconds` or `spec.tolerations` (only additions to existing tolerations)";

/// The causes of an update of a Pod from `old` to `new`.
#[must_use]
pub fn pod(old: &Value, new: &Value) -> Vec<Cause> {
    let (old_spec, new_spec) = (&old["spec"], &new["spec"]);
    for list in ["containers", "initContainers"] {
        let count = |spec: &Value| spec[list].as_array().map_or(0, Vec::len);
        if count(old_spec) != count(new_spec) {
            return vec![Cause::forbidden(
                &format!("spec.{list}"),
                "pod updates may not add or remove containers",
            )];
        }
    }
    let deadline = "spec.activeDeadlineSeconds";
    match (
        old_spec["activeDeadlineSeconds"].as_i64(),
        new_spec["activeDeadlineSeconds"].as_i64(),
    ) {
        (_, Some(n)) if !(0..=i64::from(i32::MAX)).contains(&n) => {
            return vec![super::invalid(
                deadline,
                &n.to_string(),
                "must be between 0 and 2147483647, inclusive",
            )];
        }
        (Some(before), Some(n)) if before < n => {
            return vec![super::invalid(
                deadline,
                &n.to_string(),
                "must be less than or equal to previous value",
            )];
        }
        (Some(_), None) => {
            return vec![super::invalid(
                deadline,
                "\"null\"",
                "must not update from a positive integer to nil value",
            )];
        }
        _ => {}
    }
    let mut munged = new_spec.clone();
    for list in ["containers", "initContainers"] {
        if let Some(items) = munged.get_mut(list).and_then(Value::as_array_mut) {
            for (i, item) in items.iter_mut().enumerate() {
                if let Some(item) = item.as_object_mut() {
                    match old_spec[list][i].get("image") {
                        Some(image) => item.insert("image".into(), image.clone()),
                        None => item.remove("image"),
                    };
                }
            }
        }
    }
    if let Some(spec) = munged.as_object_mut() {
        for key in ["activeDeadlineSeconds", "tolerations"] {
            match old_spec.get(key) {
                Some(v) => spec.insert(key.into(), v.clone()),
                None => spec.remove(key),
            };
        }
    }
    if &munged == old_spec {
        Vec::new()
    } else {
        vec![Cause::forbidden("spec", OTHER_FIELDS)]
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod_of(spec: Value) -> Value {
        json!({"spec": spec})
    }

    #[test]
    fn only_images_deadlines_and_tolerations_change() {
        let old = pod_of(json!({"containers": [{"name": "c", "image": "a:1"}],
                                "restartPolicy": "Always"}));
        let image = pod_of(json!({"containers": [{"name": "c", "image": "a:2"}],
                                  "restartPolicy": "Always", "activeDeadlineSeconds": 5}));
        assert!(pod(&old, &image).is_empty());
        let policy = pod_of(json!({"containers": [{"name": "c", "image": "a:1"}],
                                   "restartPolicy": "Never"}));
        assert_eq!(pod(&old, &policy)[0].field, "spec");
        let added = pod_of(json!({"containers": [{"name": "c", "image": "a:1"},
                                                 {"name": "d", "image": "b"}]}));
        assert_eq!(pod(&old, &added)[0].field, "spec.containers");
    }
}
