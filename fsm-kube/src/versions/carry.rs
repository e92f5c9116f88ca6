//! What the framework carries through a conversion whatever the user's
//! code does: the object's `metadata` and the machine's record
//! (`.status.fsm`) verbatim, and the `apiVersion` asked for.

use serde_json::{Map, Value};

/// `converted`, with `original`'s `kind`, `metadata` and `.status.fsm`
/// (or none, when `original` has none) and `apiVersion` set to
/// `api_version`.
///
/// The metadata keeps annotations, labels, finalizers, owner references
/// and managed fields exactly as stored, including records other stores
/// keep there; `.status.fsm` is the record a newer or older build wrote,
/// with fields neither version's type may know.
pub(crate) fn carry_through(original: &Value, converted: Value, api_version: &str) -> Value {
    let mut out = match converted {
        Value::Object(map) => map,
        // A version type always serializes to an object; anything else is
        // replaced by what is carried.
        _ => Map::new(),
    };
    out.insert(
        "apiVersion".to_owned(),
        Value::String(api_version.to_owned()),
    );
    for key in ["kind", "metadata"] {
        match original.get(key) {
            Some(value) => out.insert(key.to_owned(), value.clone()),
            None => out.remove(key),
        };
    }
    let record = original.get("status").and_then(|status| status.get("fsm"));
    match record {
        Some(record) => {
            let status = out
                .entry("status")
                .or_insert_with(|| Value::Object(Map::new()));
            if !status.is_object() {
                *status = Value::Object(Map::new());
            }
            if let Value::Object(status) = status {
                status.insert("fsm".to_owned(), record.clone());
            }
        }
        None => {
            let emptied = match out.get_mut("status") {
                Some(Value::Object(status)) => {
                    status.remove("fsm");
                    status.is_empty() && original.get("status").is_none()
                }
                _ => false,
            };
            if emptied {
                out.remove("status");
            }
        }
    }
    Value::Object(out)
}

/// `namespace/name` of `object` (`name` when it has no namespace), for
/// messages; `<unnamed>` when it has no name.
pub(crate) fn object_name(object: &Value) -> String {
    let metadata = object.get("metadata");
    let field = |key: &str| {
        metadata
            .and_then(|m| m.get(key))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let name = field("name")
        .or_else(|| field("generateName"))
        .unwrap_or("<unnamed>");
    match field("namespace") {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn metadata_and_the_record_come_from_the_original() {
        let original = json!({
            "apiVersion": "example.io/v1alpha1", "kind": "Database",
            "metadata": {"name": "db", "namespace": "shop", "annotations": {"a": "1"}},
            "spec": {"size": 1},
            "status": {"fsm": {"state": "Serving", "future": [1, 2]}, "phase": "x"},
        });
        let converted = json!({
            "apiVersion": "example.io/v1", "kind": "Database",
            "metadata": {"name": "db"},
            "spec": {"sizeGi": 1},
            "status": {"fsm": null, "phase": "x"},
        });
        let out = carry_through(&original, converted, "example.io/v1");
        assert_eq!(out["apiVersion"], "example.io/v1");
        assert_eq!(out["metadata"], original["metadata"]);
        assert_eq!(out["status"]["fsm"], original["status"]["fsm"]);
        assert_eq!(out["spec"], json!({"sizeGi": 1}));
    }

    #[test]
    fn no_record_is_invented() {
        let original = json!({"apiVersion": "example.io/v1alpha1", "kind": "Database",
            "metadata": {"name": "db"}, "spec": {}});
        let converted = json!({"apiVersion": "example.io/v1", "kind": "Database",
            "metadata": {"name": "db"}, "spec": {}, "status": {"fsm": null}});
        let out = carry_through(&original, converted, "example.io/v1");
        assert!(out.get("status").is_none(), "{out}");
        assert_eq!(object_name(&original), "db");
    }
}
