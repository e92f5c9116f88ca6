//! Strategic merge patch for the built-in kinds.
//!
//! A strategic merge patch is a merge patch (objects merge key by key,
//! `null` removes) in which some lists merge instead of being replaced: the
//! lists the Kubernetes types declare with a `patchMergeKey`. The real
//! server reads those from the Go types; this server knows them by field
//! name (see [`merge_key`]):
//!
//! | list | merge key |
//! |------|-----------|
//! | `containers`, `initContainers`, `ephemeralContainers` | `name` |
//! | `env`, `volumes`, `imagePullSecrets`, `resourceClaims` | `name` |
//! | `ports` of a container | `containerPort` |
//! | `ports` elsewhere (a Service's) | `port` |
//! | `volumeMounts` | `mountPath` |
//! | `volumeDevices` | `devicePath` |
//! | `conditions` (every status) | `type` |
//! | `hostAliases` | `ip` |
//! | `topologySpreadConstraints` | `topologyKey` |
//! | `metadata.ownerReferences` | `uid` |
//!
//! `metadata.finalizers` merges as a set of strings. Every other list is
//! replaced as a whole, as in a merge patch.
//!
//! Directives: `$patch: delete` in a list element removes the element with
//! its merge key, and in an object removes the object; `$patch: replace` in an object or list element replaces
//! the object or the whole list; `$deleteFromPrimitiveList/<list>` removes
//! strings from a merged string list; `$setElementOrder/<list>` and
//! `$retainKeys` are accepted and ignored (element order is that of the
//! object, then of the patch).
//!
//! Custom resources have no Go types, and the real server answers `415`
//! for a strategic merge patch of one; so does this one.

use serde_json::{Map, Value};

/// The merge key of the list at `path` (the object keys from the root,
/// ending with the list's field name), if it is merged by key.
#[must_use]
pub fn merge_key(path: &[&str]) -> Option<&'static str> {
    let (last, parents) = path.split_last()?;
    Some(match *last {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "resourceClaims" => "name",
        "ports"
            if parents
                .iter()
                .any(|p| matches!(*p, "containers" | "initContainers" | "ephemeralContainers")) =>
        {
            "containerPort"
        }
        "ports" => "port",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "conditions" => "type",
        "hostAliases" => "ip",
        "topologySpreadConstraints" => "topologyKey",
        "ownerReferences" if parents == ["metadata"] => "uid",
        _ => return None,
    })
}

/// Whether the list at `path` is a list of strings merged as a set.
fn merged_primitive_list(path: &[&str]) -> bool {
    path == ["metadata", "finalizers"]
}

/// Applies the strategic merge patch `patch` (an object) to `target`.
pub fn apply(target: &mut Value, patch: &Value) {
    merge_object(target, patch, &mut Vec::new());
}

fn merge_object<'a>(target: &mut Value, patch: &'a Value, path: &mut Vec<&'a str>) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if p.get("$patch").and_then(Value::as_str) == Some("replace") {
        *target = Value::Object(strip_directives(p));
        return;
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(t) = target else {
        return;
    };
    for (k, v) in p {
        if let Some(list) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(items)), Value::Array(gone)) = (t.get_mut(list), v) {
                items.retain(|i| !gone.contains(i));
            }
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        if v.is_null() || v.get("$patch").and_then(Value::as_str) == Some("delete") {
            t.remove(k);
            continue;
        }
        path.push(k);
        let slot = t.entry(k.clone()).or_insert(Value::Null);
        match v {
            Value::Array(items) => merge_list(slot, items, path),
            Value::Object(_) => merge_object(slot, v, path),
            other => *slot = other.clone(),
        }
        path.pop();
    }
}

fn merge_list<'a>(target: &mut Value, items: &'a [Value], path: &mut Vec<&'a str>) {
    let replace = items
        .iter()
        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"));
    if replace {
        *target = Value::Array(
            items
                .iter()
                .filter(|i| i.get("$patch").is_none())
                .map(strip_all)
                .collect(),
        );
        return;
    }
    if merged_primitive_list(path) {
        if !target.is_array() {
            *target = Value::Array(Vec::new());
        }
        if let Value::Array(t) = target {
            for i in items {
                if !t.contains(i) {
                    t.push(i.clone());
                }
            }
        }
        return;
    }
    let Some(key) = merge_key(path) else {
        *target = Value::Array(items.iter().map(strip_all).collect());
        return;
    };
    if !target.is_array() {
        *target = Value::Array(Vec::new());
    }
    let Value::Array(t) = target else {
        return;
    };
    for item in items {
        let Some(id) = item.get(key) else {
            // An element without its merge key cannot be matched: append it.
            t.push(strip_all(item));
            continue;
        };
        let position = t.iter().position(|e| e.get(key) == Some(id));
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (position, delete) {
            (Some(i), true) => {
                t.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => {
                if let Some(slot) = t.get_mut(i) {
                    merge_object(slot, item, path);
                }
            }
            (None, false) => t.push(strip_all(item)),
        }
    }
}

fn strip_directives(m: &Map<String, Value>) -> Map<String, Value> {
    m.iter()
        .filter(|(k, v)| !k.starts_with('$') && !v.is_null())
        .map(|(k, v)| (k.clone(), strip_all(v)))
        .collect()
}

/// A patch value as a plain value: directives and nulls removed.
fn strip_all(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(strip_directives(m)),
        Value::Array(a) => Value::Array(
            a.iter()
                .filter(|i| i.get("$patch").is_none())
                .map(strip_all)
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn patched(mut target: Value, patch: Value) -> Value {
        apply(&mut target, &patch);
        target
    }

    #[test]
    fn containers_and_env_merge_by_name() {
        let d = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
            {"name": "side", "image": "side:1"}
        ]}}}});
        let p = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "app", "image": "app:2", "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}, {"name": "A", "$patch": "delete"}]},
            {"name": "new", "image": "new:1"}
        ]}}}});
        assert_eq!(
            patched(d, p),
            json!({"spec": {"template": {"spec": {"containers": [
                {"name": "app", "image": "app:2", "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}]},
                {"name": "side", "image": "side:1"},
                {"name": "new", "image": "new:1"}
            ]}}}})
        );
    }

    #[test]
    fn keys_by_place() {
        assert_eq!(
            merge_key(&["spec", "containers", "ports"]),
            Some("containerPort")
        );
        assert_eq!(merge_key(&["spec", "ports"]), Some("port"));
        assert_eq!(merge_key(&["status", "conditions"]), Some("type"));
        assert_eq!(merge_key(&["spec", "args"]), None);
        assert_eq!(merge_key(&["spec", "ownerReferences"]), None);
    }

    #[test]
    fn directives_and_plain_lists() {
        let d = json!({"metadata": {"finalizers": ["a"], "labels": {"x": "1", "y": "2"}},
                       "spec": {"args": ["1", "2"], "ports": [{"port": 80, "name": "http"}]}});
        let p = json!({"metadata": {"finalizers": ["b", "a"], "labels": {"x": null}},
                       "spec": {"args": ["3"], "ports": [{"$patch": "replace"}, {"port": 443}]}});
        assert_eq!(
            patched(d, p),
            json!({"metadata": {"finalizers": ["a", "b"], "labels": {"y": "2"}},
                   "spec": {"args": ["3"], "ports": [{"port": 443}]}})
        );
        let d = json!({"metadata": {"finalizers": ["a", "b"]}, "spec": {"selector": {"a": "1"}}, "status": {"x": 1}});
        let p = json!({"$setElementOrder/x": [], "metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]},
                       "status": {"$patch": "delete"},
                       "spec": {"selector": {"$patch": "replace", "b": "2"}}});
        assert_eq!(
            patched(d, p),
            json!({"metadata": {"finalizers": ["b"]}, "spec": {"selector": {"b": "2"}}})
        );
    }
}
