//! Strategic merge patch for the built-in kinds.
//!
//! A strategic merge patch is a merge patch (objects merge key by key,
//! `null` removes) in which some lists merge instead of being replaced:
//! the lists whose patch strategy is `merge`, by their patch merge key
//! (a list of scalars without one merges as a set). The real server reads
//! those from its Go types; this server from the same types' OpenAPI
//! extensions ([`super::list_rules`]), field by field: a Service's
//! `spec.ports` by `port`, a container's `ports` by `containerPort`,
//! `containers`, `env` and `volumes` by `name`, `conditions` by `type`
//! where the status declares it, `metadata.ownerReferences` by `uid`,
//! `metadata.finalizers` as a set. Every other list is replaced as a
//! whole, as in a merge patch.
//!
//! A merged list is ordered as the real server orders it: the elements
//! the patch names (in the patch's order, or `$setElementOrder/<list>`'s)
//! and the live elements it does not name (in their live order) are
//! merged, an element of either going first unless both are live
//! elements, which keep their live order; so new elements come first and
//! a patch of existing ones leaves the order alone.
//!
//! Directives: `$patch: delete` in a list element removes the element with
//! its merge key, and in an object removes the object; `$patch: replace`
//! in an object or list element replaces the object or the whole list;
//! `$patch: merge` is the default; any other `$patch` is refused as the
//! real server refuses it (`500`, "unknown patch type: … in map: …").
//! `$deleteFromPrimitiveList/<list>` removes scalars from a list;
//! `$retainKeys` in an object keeps only the keys it lists (after the
//! merge).
//!
//! Custom resources have no Go types, and the real server answers `415`
//! for a strategic merge patch of one; so does this one.

use serde_json::{Map, Value};

use super::list_rules::{self, FieldRule};
use crate::resources::ResourceDef;
use crate::status::ApiError;

/// Applies the strategic merge patch `patch` (an object) to `target`, an
/// object of the built-in kind `def`.
///
/// # Errors
/// [`ApiError::Storage`] (`500` without a reason, as the real server
/// answers) for a `$patch` directive the real server does not know.
pub fn apply(def: &ResourceDef, target: &mut Value, patch: &Value) -> Result<(), ApiError> {
    check_directives(patch)?;
    merge_object(def, target, patch, &mut Vec::new());
    Ok(())
}

/// Refuses an unknown `$patch` anywhere in `patch`.
fn check_directives(patch: &Value) -> Result<(), ApiError> {
    match patch {
        Value::Object(m) => {
            if let Some(directive) = m.get("$patch") {
                let known = directive
                    .as_str()
                    .is_some_and(|d| matches!(d, "replace" | "delete" | "merge"));
                if !known {
                    return Err(ApiError::Storage(format!(
                        "unknown patch type: {} in map: {}",
                        go_format(directive),
                        go_format(patch)
                    )));
                }
            }
            m.values().try_for_each(check_directives)
        }
        Value::Array(items) => items.iter().try_for_each(check_directives),
        _ => Ok(()),
    }
}

/// A JSON value as Go's `%v` prints the decoded value (`map[k:v]`,
/// `[a b]`), as the real server's messages quote patches.
fn go_format(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::String(s) => s.clone(),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let inner: Vec<String> = keys
                .iter()
                .map(|k| format!("{k}:{}", go_format(&m[*k])))
                .collect();
            format!("map[{}]", inner.join(" "))
        }
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(go_format).collect();
            format!("[{}]", inner.join(" "))
        }
        other => other.to_string(),
    }
}

fn merge_object<'a>(
    def: &ResourceDef,
    target: &mut Value,
    patch: &'a Value,
    path: &mut Vec<&'a str>,
) {
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
                if items.is_empty() {
                    t.remove(list);
                }
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
            Value::Array(items) => {
                let order = p
                    .get(&format!("$setElementOrder/{k}"))
                    .and_then(Value::as_array);
                merge_list(def, slot, items, order, path);
            }
            Value::Object(_) => merge_object(def, slot, v, path),
            other => *slot = other.clone(),
        }
        path.pop();
    }
    if let Some(Value::Array(retained)) = p.get("$retainKeys") {
        t.retain(|k, _| retained.iter().any(|r| r.as_str() == Some(k)));
    }
}

fn merge_list<'a>(
    def: &ResourceDef,
    target: &mut Value,
    items: &'a [Value],
    order: Option<&'a Vec<Value>>,
    path: &mut Vec<&'a str>,
) {
    let replace = items
        .iter()
        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"));
    let rule = list_rules::at(def, path).unwrap_or_default();
    let merging = rule.smp_merges_scalars() || rule.smp_merge_key().is_some();
    if replace || !merging {
        *target = Value::Array(
            items
                .iter()
                .filter(|i| i.get("$patch").is_none())
                .map(strip_all)
                .collect(),
        );
        return;
    }
    let live: Vec<Value> = match target.take() {
        Value::Array(live) => live,
        _ => Vec::new(),
    };
    let id = |v: &Value| identity(&rule, v);
    let mut merged = live.clone();
    for item in items {
        let Some(key) = id(item) else {
            // An element without its merge key cannot be matched: add it.
            merged.push(strip_all(item));
            continue;
        };
        let position = merged.iter().position(|e| id(e).as_ref() == Some(&key));
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (position, delete) {
            (Some(i), true) => {
                merged.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => {
                if let Some(slot) = merged.get_mut(i)
                    && item.is_object()
                {
                    merge_object(def, slot, item, path);
                }
            }
            (None, false) => merged.push(strip_all(item)),
        }
    }
    let named: Vec<Value> = order
        .map(|o| o.iter().filter_map(&id).collect())
        .unwrap_or_else(|| {
            items
                .iter()
                .filter(|i| i.get("$patch").is_none())
                .filter_map(&id)
                .collect()
        });
    let live_ids: Vec<Option<Value>> = live.iter().map(&id).collect();
    *target = Value::Array(ordered(merged, &named, &live_ids, &id));
}

/// What identifies a merged list's element: its merge key's value, or
/// the scalar itself.
fn identity(rule: &FieldRule, v: &Value) -> Option<Value> {
    match rule.smp_merge_key() {
        Some(key) => v.get(key).cloned(),
        None => Some(strip_all(v)),
    }
}

/// `merged` in the real server's order: the elements the patch names (in
/// `named`'s order) merged with the others (in live order), the live
/// order deciding between two live elements and any element the live
/// list lacks going first.
fn ordered(
    merged: Vec<Value>,
    named: &[Value],
    live: &[Option<Value>],
    id: &dyn Fn(&Value) -> Option<Value>,
) -> Vec<Value> {
    let rank = |v: &Value| -> Option<usize> {
        let key = id(v)?;
        live.iter().position(|l| l.as_ref() == Some(&key))
    };
    let place_in = |v: &Value| -> Option<usize> {
        let key = id(v)?;
        named.iter().position(|n| n == &key)
    };
    let (mut patch, mut server): (Vec<Value>, Vec<Value>) =
        merged.into_iter().partition(|v| place_in(v).is_some());
    patch.sort_by_key(|v| place_in(v).unwrap_or(usize::MAX));
    server.sort_by_key(|v| rank(v).unwrap_or(usize::MAX));
    let mut out = Vec::with_capacity(patch.len() + server.len());
    let (mut p, mut s) = (patch.into_iter().peekable(), server.into_iter().peekable());
    loop {
        let take_server = match (s.peek(), p.peek()) {
            (Some(sv), Some(pv)) => matches!((rank(sv), rank(pv)), (Some(a), Some(b)) if a < b),
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        let next = if take_server { s.next() } else { p.next() };
        out.extend(next);
    }
    out
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
    use crate::builtins;
    use serde_json::json;

    fn kind(kind: &str) -> &'static ResourceDef {
        &builtins::table()
            .iter()
            .find(|k| k.def.kind == kind && !k.def.group.starts_with("events"))
            .unwrap_or_else(|| panic!("no built-in kind {kind}"))
            .def
    }

    fn patched(kind_name: &str, mut target: Value, patch: Value) -> Value {
        apply(kind(kind_name), &mut target, &patch).unwrap();
        target
    }

    #[test]
    fn containers_and_env_merge_by_name_new_elements_first() {
        let d = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
            {"name": "side", "image": "side:1"}
        ]}}}});
        let p = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "app", "image": "app:2", "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}, {"name": "A", "$patch": "delete"}]},
            {"name": "new", "image": "new:1"}
        ]}}}});
        assert_eq!(
            patched("Deployment", d, p),
            json!({"spec": {"template": {"spec": {"containers": [
                {"name": "app", "image": "app:2", "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}]},
                {"name": "new", "image": "new:1"},
                {"name": "side", "image": "side:1"}
            ]}}}})
        );
    }

    #[test]
    fn order_is_the_real_servers() {
        // Seen on kube-apiserver 1.20: [A, B, C] patched with [B, D] is
        // [A, B, D, C]; [A, B] patched with [C] is [C, A, B].
        let env = |names: &[&str]| {
            json!({"spec": {"containers": [{"name": "c", "env":
                names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>()}]}})
        };
        assert_eq!(
            patched("Pod", env(&["A", "B", "C"]), env(&["B", "D"])),
            env(&["A", "B", "D", "C"])
        );
        assert_eq!(
            patched("Pod", env(&["A", "B"]), env(&["C"])),
            env(&["C", "A", "B"])
        );
        let fin = |f: &[&str]| json!({"metadata": {"finalizers": f}});
        assert_eq!(
            patched("ConfigMap", fin(&["p/1", "p/2"]), fin(&["p/2", "p/3"])),
            fin(&["p/1", "p/2", "p/3"])
        );
        assert_eq!(
            patched("ConfigMap", fin(&["x/y"]), fin(&["a/b"])),
            fin(&["a/b", "x/y"])
        );
    }

    #[test]
    fn service_ports_merge_by_port() {
        let d = json!({"spec": {"ports": [{"port": 53, "protocol": "UDP", "name": "dns"}]}});
        let p = json!({"spec": {"ports": [{"port": 53, "protocol": "TCP", "name": "dns-tcp"}]}});
        // The patch merge key is `port` alone (the list-map keys, port and
        // protocol, are server-side apply's).
        assert_eq!(
            patched("Service", d, p),
            json!({"spec": {"ports": [{"port": 53, "protocol": "TCP", "name": "dns-tcp"}]}})
        );
    }

    #[test]
    fn directives_and_plain_lists() {
        let d = json!({"metadata": {"finalizers": ["a"], "labels": {"x": "1", "y": "2"}},
                       "spec": {"template": {"spec": {"containers": [{"name": "c", "args": ["1", "2"]}]}}}});
        let p = json!({"metadata": {"finalizers": ["b", "a"], "labels": {"x": null}},
                       "spec": {"template": {"spec": {"containers": [{"name": "c", "args": ["3"]}]}}}});
        assert_eq!(
            patched("Deployment", d, p),
            json!({"metadata": {"finalizers": ["b", "a"], "labels": {"y": "2"}},
                   "spec": {"template": {"spec": {"containers": [{"name": "c", "args": ["3"]}]}}}})
        );
        let d = json!({"metadata": {"finalizers": ["a", "b"]}, "spec": {"selector": {"a": "1"}, "ports": [{"port": 80}]}, "status": {"x": 1}});
        let p = json!({"$setElementOrder/x": [], "metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]},
                       "status": {"$patch": "delete"},
                       "spec": {"selector": {"$patch": "replace", "b": "2"}, "ports": [{"$patch": "replace"}, {"port": 443}]}});
        assert_eq!(
            patched("Service", d, p),
            json!({"metadata": {"finalizers": ["b"]}, "spec": {"selector": {"b": "2"}, "ports": [{"port": 443}]}})
        );
    }

    #[test]
    fn retain_keys_keeps_only_the_listed_keys() {
        let d = json!({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}});
        let p = json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}});
        assert_eq!(
            patched("Deployment", d, p),
            json!({"spec": {"strategy": {"type": "Recreate"}}})
        );
    }

    #[test]
    fn an_unknown_patch_directive_is_refused_as_the_real_server_does() {
        let mut d = json!({"spec": {"template": {"spec": {"containers": [{"name": "busybox"}]}}}});
        let p = json!({"spec": {"template": {"spec": {"containers": [{"name": "busybox", "$patch": "bogus"}]}}}});
        let e = apply(kind("Deployment"), &mut d, &p).unwrap_err();
        assert_eq!(
            e,
            ApiError::Storage(
                "unknown patch type: bogus in map: map[$patch:bogus name:busybox]".into()
            )
        );
    }
}
