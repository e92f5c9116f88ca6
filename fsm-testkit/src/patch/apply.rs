//! Server-side apply: merging a manager's configuration into the live
//! object, with field ownership and conflicts.
//!
//! # Semantics
//!
//! - The applied configuration's leaves (see [`super::managed_fields`])
//!   become the manager's `Apply` entry in `managedFields`.
//! - A leaf owned by another manager whose applied value differs from the
//!   live value is a conflict: `409 Conflict` naming each field and its
//!   owner, unless `force`, which takes the field from its owner. A leaf
//!   applied with the value it already has is shared: both managers own it.
//! - Objects merge field by field, but atomic maps (a label selector) are
//!   replaced; keyed lists merge element by element and sets element by
//!   element ([`super::list_rules`] for built-in kinds, the CRD's
//!   `x-kubernetes-list-type` for custom resources); other lists and
//!   scalars are replaced.
//! - Leaves the manager applied before and omits now are removed from the
//!   object, unless another manager owns them too; a list left empty goes.
//!
//! # Caveats
//!
//! - Ownership is by leaf: owning a map or an element of a list (`.`) is
//!   recorded for elements of keyed lists only, and removing an applied
//!   element removes it with its fields even if another manager owns
//!   some of them.
//! - No defaulting happens before the comparison, so applying a value a
//!   default would also produce is not a no-op as it is on a real cluster.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::list_rules;
use super::managed_fields::{
    self, Entry, FieldPath, ListKind, Operation, Scope, Writer, display, entries, leaves,
};
use crate::status::{ApiError, Cause};

/// The object after `writer` applies `config` onto `live` (`None` when the
/// object does not exist yet), with its `managedFields`.
///
/// # Errors
/// [`ApiError::ApplyConflict`] for conflicts with other managers, unless `force`.
pub fn apply(
    live: Option<&Value>,
    config: &Value,
    writer: &Writer<'_>,
    force: bool,
    scope: Scope<'_>,
) -> Result<Value, ApiError> {
    let empty = json!({});
    let live = live.unwrap_or(&empty);
    let applied = leaves(config, scope);
    let current = leaves(live, scope);
    let mut list = entries(live);

    let mut conflicts: Vec<(usize, FieldPath)> = Vec::new();
    for (i, e) in list.iter().enumerate() {
        if e.manager == writer.manager {
            continue;
        }
        for p in e.fields.iter().filter(|p| applied.contains_key(*p)) {
            if current.get(p) != applied.get(p) {
                conflicts.push((i, p.clone()));
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflict_error(&list, &conflicts));
    }
    for (i, p) in &conflicts {
        if let Some(e) = list.get_mut(*i) {
            e.fields.remove(p);
        }
    }

    let mut merged = live.clone();
    merge(&mut merged, &scoped(config, scope), &mut Vec::new(), scope);

    let is_mine = |e: &Entry| {
        e.manager == writer.manager
            && e.operation == Operation::Apply
            && e.subresource.as_deref() == writer.subresource
    };
    let others: BTreeSet<&FieldPath> = list
        .iter()
        .filter(|e| !is_mine(e))
        .flat_map(|e| e.fields.iter())
        .collect();
    let dropped: Vec<FieldPath> = list
        .iter()
        .filter(|e| is_mine(e))
        .flat_map(|e| e.fields.iter())
        .filter(|p| !applied.contains_key(*p) && !others.contains(p))
        .cloned()
        .collect();
    for p in &dropped {
        remove(&mut merged, p);
    }

    let fields: BTreeSet<FieldPath> = applied.into_keys().collect();
    let object_changed = merged != *live;
    match list.iter_mut().find(|e| is_mine(e)) {
        // A no-op apply leaves the object, and so the entry's time, alone.
        Some(e) if !object_changed && e.fields == fields && conflicts.is_empty() => {}
        Some(e) => {
            e.fields = fields;
            e.time = writer.time.to_string();
            e.api_version = writer.api_version.to_string();
        }
        None => list.push(Entry {
            manager: writer.manager.to_string(),
            operation: Operation::Apply,
            api_version: writer.api_version.to_string(),
            time: writer.time.to_string(),
            subresource: writer.subresource.map(String::from),
            fields,
        }),
    }
    if !merged.get("metadata").is_some_and(Value::is_object)
        && let Some(o) = merged.as_object_mut()
    {
        o.insert("metadata".into(), json!({}));
    }
    managed_fields::set_entries(&mut merged, &list);
    Ok(merged)
}

/// The part of `config` a write in `scope` applies.
fn scoped(config: &Value, scope: Scope<'_>) -> Value {
    let Some(top) = config.as_object() else {
        return config.clone();
    };
    let kept = top
        .iter()
        .filter(|(k, _)| match k.as_str() {
            "status" => !scope.without_status,
            "apiVersion" | "kind" | "metadata" => true,
            _ => !scope.status_only,
        })
        .map(|(k, v)| {
            let mut v = v.clone();
            if k == "metadata"
                && let Some(m) = v.as_object_mut()
            {
                m.remove("managedFields");
                if scope.status_only {
                    m.retain(|k, _| k == "name" || k == "namespace" || k == "resourceVersion");
                }
            }
            (k.clone(), v)
        })
        .collect();
    Value::Object(kept)
}

fn merge<'a>(target: &mut Value, config: &'a Value, names: &mut Vec<&'a str>, scope: Scope<'_>) {
    match config {
        Value::Object(c) if !managed_fields::atomic_map(names, scope) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            if let Value::Object(t) = target {
                for (k, v) in c {
                    names.push(k);
                    merge(t.entry(k.clone()).or_insert(Value::Null), v, names, scope);
                    names.pop();
                }
            }
        }
        Value::Array(items) => match (
            managed_fields::list_kind(names, scope),
            target.as_array_mut(),
        ) {
            (Some(ListKind::Keys(_)), Some(t))
                if items
                    .iter()
                    .all(|i| managed_fields::element_key(names, i, scope).is_some()) =>
            {
                for item in items {
                    let key = managed_fields::element_key(names, item, scope);
                    let same = |e: &Value| managed_fields::element_key(names, e, scope) == key;
                    match t.iter_mut().find(|e| same(e)) {
                        Some(slot) => merge(slot, item, names, scope),
                        None => t.push(item.clone()),
                    }
                }
            }
            (Some(ListKind::Set), Some(t)) => {
                for item in items {
                    if !t.contains(item) {
                        t.push(item.clone());
                    }
                }
            }
            _ => *target = config.clone(),
        },
        other => *target = other.clone(),
    }
}

/// Whether a list element matches a `k:{…}` step (a key field the
/// element leaves out counting with its default) or a `v:…` step.
fn matches_key(item: &Value, step: &str) -> bool {
    if let Some(v) = step.strip_prefix("v:") {
        return serde_json::from_str::<Value>(v).is_ok_and(|v| *item == v);
    }
    let Some(k) = step.strip_prefix("k:") else {
        return false;
    };
    serde_json::from_str::<Map<String, Value>>(k).is_ok_and(|fields| {
        fields.iter().all(|(f, v)| {
            item.get(f)
                .cloned()
                .or_else(|| list_rules::key_default(f))
                .as_ref()
                == Some(v)
        })
    })
}

fn step_mut<'a>(v: &'a mut Value, step: &str) -> Option<&'a mut Value> {
    if let Some(f) = step.strip_prefix("f:") {
        return v.as_object_mut()?.get_mut(f);
    }
    v.as_array_mut()?
        .iter_mut()
        .find(|item| matches_key(item, step))
}

/// Removes the field at `path` (a list element for a path ending in `.`
/// or in a `v:` step). A list left empty goes too, as on the real server
/// (an applier that drops its last `env` entry leaves no `env: []`).
fn remove(object: &mut Value, path: &FieldPath) {
    let path = match path.split_last() {
        Some((last, rest)) if last == "." => rest,
        _ => path.as_slice(),
    };
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    if !last.starts_with("f:") {
        // An element: remove it from its list, and the list if emptied.
        let Some((list_step, grand)) = parents.split_last() else {
            return;
        };
        let Some(holder) = walk_mut(object, grand) else {
            return;
        };
        let emptied = match step_mut(holder, list_step).and_then(Value::as_array_mut) {
            Some(items) => {
                items.retain(|item| !matches_key(item, last));
                items.is_empty()
            }
            None => false,
        };
        if emptied
            && let (Some(f), Some(m)) = (list_step.strip_prefix("f:"), holder.as_object_mut())
        {
            m.remove(f);
        }
        return;
    }
    if let (Some(node), Some(f)) = (walk_mut(object, parents), last.strip_prefix("f:"))
        && let Some(m) = node.as_object_mut()
    {
        m.remove(f);
    }
}

/// The value at `steps` of `object`.
fn walk_mut<'a>(object: &'a mut Value, steps: &[String]) -> Option<&'a mut Value> {
    let mut node = object;
    for step in steps {
        node = step_mut(node, step)?;
    }
    Some(node)
}

fn describe_manager(e: &Entry) -> String {
    let mut s = format!("{:?}", e.manager);
    if let Some(sub) = &e.subresource {
        s.push_str(&format!(" with subresource {sub:?}"));
    }
    if e.operation == Operation::Update {
        s.push_str(&format!(" using {}", e.api_version));
    }
    s
}

fn conflict_error(list: &[Entry], conflicts: &[(usize, FieldPath)]) -> ApiError {
    let causes: Vec<Cause> = conflicts
        .iter()
        .filter_map(|(i, p)| {
            let e = list.get(*i)?;
            Some(Cause {
                reason: "FieldManagerConflict".into(),
                message: format!("conflict with {}", describe_manager(e)),
                field: display(p),
            })
        })
        .collect();
    let message = if let [(i, p)] = conflicts {
        let who = list.get(*i).map(describe_manager).unwrap_or_default();
        format!(
            "Apply failed with 1 conflict: conflict with {who}: {}",
            display(p)
        )
    } else {
        let mut by_manager: Vec<(String, Vec<String>)> = Vec::new();
        for (i, p) in conflicts {
            let who = list.get(*i).map(describe_manager).unwrap_or_default();
            match by_manager.iter_mut().find(|(m, _)| *m == who) {
                Some((_, paths)) => paths.push(display(p)),
                None => by_manager.push((who, vec![display(p)])),
            }
        }
        by_manager.sort();
        let lines: Vec<String> = by_manager
            .iter()
            .flat_map(|(m, paths)| {
                std::iter::once(format!("conflicts with {m}:"))
                    .chain(paths.iter().map(|p| format!("- {p}")))
            })
            .collect();
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            lines.join("\n")
        )
    };
    ApiError::ApplyConflict(message, causes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CR: Scope<'static> = Scope {
        builtin: None,
        schema: None,
        status_only: false,
        without_status: true,
    };
    const NO_KIND: Scope<'static> = Scope {
        builtin: None,
        schema: None,
        status_only: false,
        without_status: true,
    };

    fn writer(manager: &str) -> Writer<'_> {
        Writer {
            manager,
            operation: Operation::Apply,
            api_version: "v1",
            subresource: None,
            time: "2026-01-01T00:00:00Z",
        }
    }

    #[test]
    fn create_update_conflict_force_and_removal() {
        let a = json!({"metadata": {"name": "x"}, "data": {"k": "1", "own": "a"}});
        let o = apply(None, &a, &writer("a"), false, CR).unwrap();
        assert_eq!(o["data"], json!({"k": "1", "own": "a"}));
        assert_eq!(
            o["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:data": {"f:k": {}, "f:own": {}}})
        );
        // b applies the same value: shared, no conflict.
        let b = json!({"metadata": {"name": "x"}, "data": {"k": "1"}});
        let o = apply(Some(&o), &b, &writer("b"), false, CR).unwrap();
        assert_eq!(o["metadata"]["managedFields"].as_array().unwrap().len(), 2);
        // b changes it: conflict naming the field and a.
        let b2 = json!({"metadata": {"name": "x"}, "data": {"k": "2"}});
        let e = apply(Some(&o), &b2, &writer("b"), false, CR).unwrap_err();
        assert_eq!(e.code().as_u16(), 409);
        assert_eq!(
            e.to_string(),
            "Apply failed with 1 conflict: conflict with \"a\": .data.k"
        );
        let s = e.to_status();
        assert_eq!(s["details"]["causes"][0]["field"], ".data.k");
        // Forced: b takes k from a.
        let o = apply(Some(&o), &b2, &writer("b"), true, CR).unwrap();
        assert_eq!(o["data"]["k"], "2");
        let list = entries(&o);
        assert_eq!(
            list[0].to_json()["fieldsV1"],
            json!({"f:data": {"f:own": {}}})
        );
        // a stops applying `own`: it is removed; k (now b's) stays.
        let a2 = json!({"metadata": {"name": "x"}, "data": {}});
        let o = apply(Some(&o), &a2, &writer("a"), false, CR).unwrap();
        assert_eq!(o["data"], json!({"k": "2"}));
    }

    #[test]
    fn custom_resource_lists_keyed_by_their_schema() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "routes": {"type": "array", "x-kubernetes-list-type": "map",
                       "x-kubernetes-list-map-keys": ["host", "port"],
                       "items": {"type": "object", "properties": {"tags": {"type": "array"}}}},
            "plain": {"type": "array"}}}}});
        let scope = Scope {
            schema: Some(&schema),
            ..CR
        };
        let a = json!({"spec": {"routes": [{"host": "a", "port": 1, "to": "x"}], "plain": [1]}});
        let o = apply(None, &a, &writer("a"), false, scope).unwrap();
        assert_eq!(
            o["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"],
            json!({"f:plain": {}, "f:routes": {"k:{\"host\":\"a\",\"port\":1}":
                {".": {}, "f:host": {}, "f:port": {}, "f:to": {}}}})
        );
        // Another manager's element merges in; its plain list would replace.
        let b = json!({"spec": {"routes": [{"host": "b", "port": 1, "to": "y"}]}});
        let o = apply(Some(&o), &b, &writer("b"), false, scope).unwrap();
        assert_eq!(o["spec"]["routes"].as_array().unwrap().len(), 2);
        let b2 = json!({"spec": {"routes": [{"host": "a", "port": 1, "to": "z"}]}});
        let e = apply(Some(&o), &b2, &writer("b"), false, scope).unwrap_err();
        assert!(
            e.to_string()
                .ends_with(".spec.routes[host=\"a\",port=1].to"),
            "{e}"
        );
    }

    #[test]
    fn keyed_lists_merge_and_drop_elements() {
        let pod = Scope {
            builtin: crate::internals::patch::builtin("Pod"),
            ..NO_KIND
        };
        let a = json!({"spec": {"containers": [{"name": "app", "image": "a:1"}, {"name": "side", "image": "s:1"}]}});
        let o = apply(None, &a, &writer("a"), false, pod).unwrap();
        let b = json!({"spec": {"containers": [{"name": "extra", "image": "e:1"}]}});
        let o = apply(Some(&o), &b, &writer("b"), false, pod).unwrap();
        assert_eq!(o["spec"]["containers"].as_array().unwrap().len(), 3);
        let a2 = json!({"spec": {"containers": [{"name": "app", "image": "a:2"}]}});
        let o = apply(Some(&o), &a2, &writer("a"), false, pod).unwrap();
        assert_eq!(
            o["spec"]["containers"],
            json!([{"name": "app", "image": "a:2"}, {"name": "extra", "image": "e:1"}])
        );
        let b2 = json!({"spec": {"containers": [{"name": "app", "image": "b:9"}]}});
        let e = apply(Some(&o), &b2, &writer("b"), false, pod).unwrap_err();
        assert!(
            e.to_string()
                .ends_with(".spec.containers[name=\"app\"].image"),
            "{e}"
        );
    }

    #[test]
    fn ports_keyed_with_protocol_and_an_emptied_list_goes() {
        // Seen on kube-apiserver 1.20: UDP and TCP port 53 are two ports;
        // an applier dropping its only env entry leaves no `env`.
        let service = Scope {
            builtin: crate::internals::patch::builtin("Service"),
            ..NO_KIND
        };
        let a = json!({"spec": {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]}});
        let o = apply(None, &a, &writer("a"), false, service).unwrap();
        assert_eq!(o["spec"]["ports"].as_array().unwrap().len(), 2);
        let pod = Scope {
            builtin: crate::internals::patch::builtin("Pod"),
            ..NO_KIND
        };
        let a =
            json!({"spec": {"containers": [{"name": "c", "env": [{"name": "A", "value": "1"}]}]}});
        let o = apply(None, &a, &writer("a"), false, pod).unwrap();
        let a2 = json!({"spec": {"containers": [{"name": "c"}]}});
        let o = apply(Some(&o), &a2, &writer("a"), false, pod).unwrap();
        assert_eq!(o["spec"]["containers"], json!([{"name": "c"}]));
    }
}
