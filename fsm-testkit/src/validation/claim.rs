//! A PersistentVolumeClaim, as 1.20 validates it
//! (`ValidatePersistentVolumeClaimSpec`) and what an update may change
//! (`ValidatePersistentVolumeClaimUpdate`: nothing of the spec but a bound
//! claim's storage request, which may only grow, and a `volumeName` not
//! set before).

use std::cmp::Ordering;

use serde_json::Value;

use super::field::FieldErrors;
use super::name_problems;
use crate::quantity;
use crate::resources::{NameRule, ResourceDef};
use crate::status::Cause;

/// The access modes 1.20 supports, as its message lists them (sorted).
const ACCESS_MODES: [&str; 3] = ["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce"];
/// The volume modes 1.20 supports, sorted.
const VOLUME_MODES: [&str; 2] = ["Block", "Filesystem"];
/// The message of a changed spec (1.20 adds a Go diff of the two specs,
/// which no client can expect; left out).
const SPEC_IMMUTABLE: &str =
    "spec is immutable after creation except resources.requests for bound claims";

/// The causes of a claim's spec.
#[must_use]
pub fn claim_causes(_def: &ResourceDef, object: &Value) -> Vec<Cause> {
    let mut e = FieldErrors::new();
    let spec = &object["spec"];
    let modes: Vec<&str> = spec["accessModes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| m.as_str().unwrap_or_default())
        .collect();
    if modes.is_empty() {
        e.required("spec.accessModes", "at least 1 access mode is required");
    }
    if !spec["selector"].is_null() {
        super::pod::selector(&spec["selector"], "spec.selector", &mut e);
    }
    for mode in &modes {
        if !ACCESS_MODES.contains(mode) {
            e.not_supported("spec.accessModes", mode, &ACCESS_MODES);
        }
    }
    let storage_path = "spec.resources[storage]";
    match spec["resources"]["requests"]["storage"].as_str() {
        None => e.required(storage_path, ""),
        Some(size) => {
            if quantity::compare(size, "0").is_some_and(|o| o != Ordering::Greater) {
                e.invalid(
                    storage_path,
                    &format!("{size:?}"),
                    "must be greater than zero",
                );
            }
        }
    }
    if let Some(class) = spec["storageClassName"].as_str().filter(|c| !c.is_empty()) {
        for problem in name_problems(NameRule::Subdomain, class) {
            e.invalid("spec.storageClassName", &format!("{class:?}"), &problem);
        }
    }
    if let Some(mode) = spec["volumeMode"].as_str()
        && !VOLUME_MODES.contains(&mode)
    {
        e.not_supported("spec.volumeMode", mode, &VOLUME_MODES);
    }
    e.into_causes()
}

/// What an update from `old` to `new` changes of a claim's spec that may
/// not change.
#[must_use]
pub fn claim_immutable(old: &Value, new: &Value) -> Vec<Cause> {
    let mut before = old["spec"].clone();
    let mut after = new["spec"].clone();
    // A volume name may be set once.
    if before["volumeName"].as_str().is_none_or(str::is_empty) {
        copy(&after, &mut before, "volumeName");
    }
    let storage = |spec: &Value| {
        spec["resources"]["requests"]["storage"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let (old_size, new_size) = (storage(&old["spec"]), storage(&new["spec"]));
    if new["status"]["phase"] == "Bound"
        && let Some(requests) = after
            .pointer_mut("/resources/requests")
            .and_then(Value::as_object_mut)
    {
        requests.insert("storage".into(), Value::String(old_size.clone()));
    }
    let mut causes = Vec::new();
    if before != after {
        causes.push(Cause::forbidden("spec", SPEC_IMMUTABLE));
    }
    if quantity::compare(&new_size, &old_size) == Some(Ordering::Less) {
        causes.push(Cause::forbidden(
            "spec.resources.requests.storage",
            "field can not be less than previous value",
        ));
    }
    causes
}

/// Sets `to[key]` to `from[key]` (removed when absent).
fn copy(from: &Value, to: &mut Value, key: &str) {
    if let Some(map) = to.as_object_mut() {
        match from.get(key) {
            Some(v) => map.insert(key.into(), v.clone()),
            None => map.remove(key),
        };
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn def() -> ResourceDef {
        ResourceDef::builtin(
            "",
            "v1",
            "PersistentVolumeClaim",
            "persistentvolumeclaims",
            true,
        )
    }

    fn claim(spec: Value) -> Value {
        json!({"spec": spec})
    }

    #[test]
    fn a_claim_needs_access_modes_and_a_positive_size() {
        let fields = |spec: Value| -> Vec<String> {
            claim_causes(&def(), &claim(spec))
                .into_iter()
                .map(|c| c.message)
                .collect()
        };
        assert_eq!(
            fields(json!({})),
            [
                "Required value: at least 1 access mode is required",
                "Required value"
            ]
        );
        assert_eq!(
            fields(json!({"accessModes": ["Foo"], "resources": {"requests": {"storage": "-1"}}})),
            [
                "Unsupported value: \"Foo\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\"",
                "Invalid value: \"-1\": must be greater than zero"
            ]
        );
        assert!(
            fields(json!({"accessModes": ["ReadWriteOnce"],
                          "resources": {"requests": {"storage": "1Gi"}}}))
            .is_empty()
        );
    }

    #[test]
    fn only_a_bound_claim_grows() {
        let spec = |size: &str| {
            json!({"accessModes": ["ReadWriteOnce"],
                   "resources": {"requests": {"storage": size}}})
        };
        let old = json!({"spec": spec("1Gi"), "status": {"phase": "Pending"}});
        let grown = json!({"spec": spec("2Gi"), "status": {"phase": "Pending"}});
        assert_eq!(claim_immutable(&old, &grown).len(), 1);
        let bound = json!({"spec": spec("2Gi"), "status": {"phase": "Bound"}});
        assert!(claim_immutable(&old, &bound).is_empty());
        let shrunk = json!({"spec": spec("512Mi"), "status": {"phase": "Bound"}});
        assert_eq!(
            claim_immutable(&old, &shrunk)[0].field,
            "spec.resources.requests.storage"
        );
        let named = json!({"spec": {"accessModes": ["ReadWriteOnce"], "volumeName": "pv",
                           "resources": {"requests": {"storage": "1Gi"}}}});
        assert!(claim_immutable(&old, &named).is_empty());
    }
}
