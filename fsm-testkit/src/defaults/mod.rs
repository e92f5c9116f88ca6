//! The defaults kube-apiserver 1.20 gives the built-in kinds, as its
//! decoder sets them on every create and update (`SetDefaults_*` of
//! `pkg/apis/*/v1/defaults.go`), as its strategies prepare a new or
//! updated object (a Job's generated selector, a Service's cluster IP and
//! node ports) and as its admission plugins complete a Pod (service
//! account, priority, default tolerations).
//!
//! One module per concern: the pod spec every kind with a pod template
//! shares ([`pod_template`]), a bare Pod's own ([`pod`]), the `apps` kinds
//! ([`apps`]), Jobs ([`batch`]), Services ([`service`]), the other kinds'
//! small ones ([`other`]). Each kind's entry in the kinds' table
//! (`builtins`) names the functions it takes.
//!
//! Defaults are written where a field is absent only: what a client sent
//! is kept, and defaulting an object twice changes nothing (the real
//! server defaults the stored object again on every read).

pub mod apps;
pub mod batch;
pub mod other;
pub mod pod;
pub mod pod_spec;
pub mod service;

use serde_json::{Map, Value};

pub(crate) use pod_spec::pod_template;

/// The object at `path` below `object`, if it is a JSON object.
pub(crate) fn object_at<'a>(
    object: &'a mut Value,
    path: &[&str],
) -> Option<&'a mut Map<String, Value>> {
    let mut at = object;
    for key in path {
        at = at.get_mut(*key)?;
    }
    at.as_object_mut()
}

/// Sets each `(key, value)` of `defaults` that `map` lacks (or holds as
/// `null`).
pub(crate) fn set_absent(map: &mut Map<String, Value>, defaults: &[(&str, Value)]) {
    for (key, value) in defaults {
        match map.get(*key) {
            Some(v) if !v.is_null() => {}
            _ => {
                map.insert((*key).to_string(), value.clone());
            }
        }
    }
}

/// The JSON objects of the list at `key` of `map`.
pub(crate) fn items_of<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    map.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

/// The JSON object at `key` of `map`, created empty if absent or `null`.
pub(crate) fn child<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
) -> Option<&'a mut Map<String, Value>> {
    let entry = map.entry(key.to_string()).or_insert(Value::Null);
    if entry.is_null() {
        *entry = Value::Object(Map::new());
    }
    entry.as_object_mut()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn absent_and_null_fields_are_defaulted_present_ones_kept() {
        let mut v = json!({"a": 1, "b": null});
        let map = v.as_object_mut().unwrap();
        set_absent(map, &[("a", json!(2)), ("b", json!(3)), ("c", json!(4))]);
        assert_eq!(v, json!({"a": 1, "b": 3, "c": 4}));
    }

    #[test]
    fn children_are_created_and_lists_walked() {
        let mut v = json!({"l": [{"x": 1}, 2, {"x": 3}]});
        let map = v.as_object_mut().unwrap();
        let xs: Vec<Value> = items_of(map, "l").map(|m| m["x"].clone()).collect();
        assert_eq!(xs, [json!(1), json!(3)]);
        child(map, "c").unwrap().insert("k".into(), json!(true));
        assert_eq!(object_at(&mut v, &["c"]).unwrap()["k"], true);
    }
}
