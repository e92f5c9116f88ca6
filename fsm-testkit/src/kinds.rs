//! The defaults the real server gives particular built-in kinds on write
//! (the kinds' table, `builtins`, says which kind takes which): initial
//! status (`Namespace` phase `Active`, an `Ingress`'s empty load
//! balancer), `Secret.stringData` folded into `data`; and what every
//! kind's encoding drops ([`drop_empty`]). The workloads', Services' and
//! Pods' defaults are in `defaults`, the RBAC kinds' in `rbac`, what
//! updates may not change in `immutable`.

use serde_json::{Map, Value, json};

use crate::resources::ResourceDef;

/// A new Namespace: phase `Active`, and the `kubernetes` finalizer.
pub fn namespace_defaults(object: &mut Value, _sequence: u64) {
    object["status"] = json!({"phase": "Active"});
    if let Some(spec) = object.as_object_mut() {
        spec.entry("spec")
            .or_insert_with(|| json!({"finalizers": ["kubernetes"]}));
    }
}

/// A new Ingress: an empty load balancer.
pub fn ingress_defaults(object: &mut Value, _sequence: u64) {
    object["status"] = json!({"loadBalancer": {}});
}

/// Every write of a Secret: `stringData` folded into `data`, type `Opaque`
/// unless given.
pub fn secret_defaults(_def: &ResourceDef, object: &mut Value) {
    fold_string_data(object);
    if let Some(o) = object.as_object_mut() {
        o.entry("type").or_insert_with(|| json!("Opaque"));
    }
}

/// Drops what Go's `omitempty` drops when the real server encodes the
/// object: empty metadata maps and lists for every kind, and empty
/// top-level data maps for built-in kinds.
pub fn drop_empty(def: &ResourceDef, object: &mut Value) {
    let is_empty = |v: &Value| match v {
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Null => true,
        _ => false,
    };
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in ["labels", "annotations", "finalizers", "ownerReferences"] {
            if meta.get(k).is_some_and(is_empty) {
                meta.remove(k);
            }
        }
    }
    if !def.custom
        && let Some(obj) = object.as_object_mut()
    {
        for k in ["data", "binaryData"] {
            if obj.get(k).is_some_and(is_empty) {
                obj.remove(k);
            }
        }
    }
}

fn fold_string_data(secret: &mut Value) {
    let Some(obj) = secret.as_object_mut() else {
        return;
    };
    let Some(Value::Object(string_data)) = obj.remove("stringData") else {
        return;
    };
    let data = obj
        .entry("data")
        .or_insert_with(|| Value::Object(Map::new()));
    if !data.is_object() {
        *data = Value::Object(Map::new());
    }
    if let Value::Object(data) = data {
        for (k, v) in string_data {
            let text = v.as_str().unwrap_or_default();
            data.insert(k, Value::String(crate::base64::encode(text.as_bytes())));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_string_data_is_folded() {
        let r = crate::builtins::registry();
        let def = r.get("", "v1", "secrets").unwrap();
        let mut s = json!({"data": {"a": "YQ=="}, "stringData": {"b": "hi"}});
        secret_defaults(&def, &mut s);
        assert_eq!(
            s,
            json!({"data": {"a": "YQ==", "b": "aGk="}, "type": "Opaque"})
        );
    }

    #[test]
    fn a_new_namespace_is_active() {
        let mut ns = json!({"metadata": {"name": "x"}});
        namespace_defaults(&mut ns, 0);
        assert_eq!(ns["status"]["phase"], "Active");
    }
}
