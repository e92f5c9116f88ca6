//! Whether an apply would change anything, decided from the live object
//! alone, so that a converged set costs no write: the structural
//! comparison that [`matching`](super::matching) starts with. Pure.
//!
//! The rules (and their caveats) are documented on
//! [`converge`](super::converge), under *When nothing is written*.

use std::collections::BTreeSet;

use serde_json::Value;

type Path = Vec<String>;

/// Whether applying `config` as `manager` onto `live` would change
/// nothing, as far as the live object alone tells.
#[cfg(test)]
fn up_to_date(live: &Value, config: &Value, manager: &str) -> bool {
    holds(live, config) && stops_nothing(live, config, manager)
}

/// Whether `live` holds every field of `desired` with the same value
/// (objects key by key, lists element by element and of the same length,
/// owner references by UID).
pub(crate) fn holds(live: &Value, desired: &Value) -> bool {
    contains(live, desired, &mut Vec::new())
}

/// Whether `live` holds every field of `desired` with the same value.
fn contains(live: &Value, desired: &Value, path: &mut Vec<String>) -> bool {
    match (live, desired) {
        (_, Value::Null) => live.is_null(),
        (Value::Object(live), Value::Object(desired)) => desired.iter().all(|(k, d)| {
            path.push(k.clone());
            let same = match live.get(k) {
                Some(l) => contains(l, d, path),
                None => d.is_null() || is_empty_container(d),
            };
            path.pop();
            same
        }),
        (Value::Array(live), Value::Array(desired)) if is_owner_references(path) => {
            desired.iter().all(|d| {
                let uid = d.get("uid");
                live.iter()
                    .any(|l| l.get("uid") == uid && contains(l, d, &mut Vec::new()))
            })
        }
        (Value::Array(live), Value::Array(desired)) => {
            live.len() == desired.len()
                && live
                    .iter()
                    .zip(desired)
                    .all(|(l, d)| contains(l, d, &mut Vec::new()))
        }
        (Value::Number(l), Value::Number(d)) => l == d || l.as_f64() == d.as_f64(),
        _ => live == desired,
    }
}

/// Where `live` first fails to hold `desired`, as a JSON pointer (`None`
/// when it holds): for the log that says why an apply was not skipped.
pub(crate) fn first_difference(live: &Value, desired: &Value) -> Option<String> {
    let mut path = Vec::new();
    if contains(live, desired, &mut path) {
        return None;
    }
    // `contains` pops as it returns: walk down again to the first field
    // that does not hold.
    let mut at = (live, desired);
    let mut pointer = String::new();
    while let (Value::Object(l), Value::Object(d)) = at {
        let Some((key, next)) = d.iter().find(|(k, v)| match l.get(*k) {
            Some(lv) => !contains(lv, v, &mut vec![(*k).clone()]),
            None => !(v.is_null() || is_empty_container(v)),
        }) else {
            break;
        };
        pointer.push('/');
        pointer.push_str(key);
        match l.get(key) {
            Some(lv) => at = (lv, next),
            None => break,
        }
    }
    Some(pointer)
}

/// An empty object or list: the server drops it, so its absence matches.
fn is_empty_container(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.is_empty(),
        Value::Array(list) => list.is_empty(),
        _ => false,
    }
}

fn is_owner_references(path: &[String]) -> bool {
    matches!(path, [m, o] if m == "metadata" && o == "ownerReferences")
}

/// Whether every field `manager` applied before is still in `config`.
pub(crate) fn stops_nothing(live: &Value, config: &Value, manager: &str) -> bool {
    let owned = owned_paths(live, manager);
    if owned.is_empty() {
        return true;
    }
    let mut applied = BTreeSet::new();
    leaves(config, &mut Vec::new(), &mut applied);
    owned.iter().all(|o| {
        applied
            .iter()
            .any(|a| a.starts_with(o.as_slice()) || o.starts_with(a.as_slice()))
    })
}

/// The fields of `manager`'s `Apply` entry (main resource), as object
/// paths, stopping at lists.
fn owned_paths(live: &Value, manager: &str) -> BTreeSet<Path> {
    let mut out = BTreeSet::new();
    let entries = live
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array);
    for entry in entries.into_iter().flatten() {
        let field = |k: &str| entry.get(k).and_then(Value::as_str);
        if field("manager") == Some(manager)
            && field("operation") == Some("Apply")
            && field("subresource").is_none_or(str::is_empty)
            && let Some(fields) = entry.get("fieldsV1")
        {
            fields_v1(fields, &mut Vec::new(), &mut out);
        }
    }
    out
}

/// Flattens a `FieldsV1` set: `f:name` keys descend; a node with no `f:`
/// child (a leaf, or a list's `k:`/`v:`/`i:` elements) ends a path.
fn fields_v1(node: &Value, path: &mut Path, out: &mut BTreeSet<Path>) {
    let children: Vec<(&str, &Value)> = node
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| k.strip_prefix("f:").map(|name| (name, v)))
        .collect();
    if children.is_empty() {
        if !path.is_empty() {
            out.insert(path.clone());
        }
        return;
    }
    for (name, child) in children {
        path.push(name.to_owned());
        fields_v1(child, path, out);
        path.pop();
    }
}

/// The paths of a configuration's leaves, stopping at lists.
fn leaves(value: &Value, path: &mut Path, out: &mut BTreeSet<Path>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                path.push(k.clone());
                leaves(v, path, out);
                path.pop();
            }
        }
        _ => {
            out.insert(path.clone());
        }
    }
}

/// The field managers a server's apply conflict names (`conflict with
/// "kubectl-edit" using apps/v1: .spec.replicas`), from its message and
/// causes.
pub(crate) fn conflicting_managers(status: &kube::core::Status) -> Vec<String> {
    let mut texts = vec![status.message.as_str()];
    if let Some(details) = &status.details {
        texts.extend(details.causes.iter().map(|c| c.message.as_str()));
    }
    let mut managers: Vec<String> = Vec::new();
    for text in texts {
        // "conflicts with" contains no "conflict with": find both, in order.
        let mut found: Vec<(usize, usize)> = ["conflict with \"", "conflicts with \""]
            .iter()
            .flat_map(|marker| text.match_indices(marker).map(|(at, m)| (at, m.len())))
            .collect();
        found.sort_unstable();
        for (at, len) in found {
            let rest = &text[at + len..];
            if let Some(end) = rest.find('"') {
                let manager = rest[..end].to_owned();
                if !managers.contains(&manager) {
                    managers.push(manager);
                }
            }
        }
    }
    managers
}

/// Whether each of `managers` only ever updated `live` (`kubectl edit`,
/// `kubectl scale`, a merge patch): a change of a field we apply by such a
/// manager is drift, which our apply takes back with `force`. A manager
/// that applied is a second owner, whose conflict is not ours to settle.
pub(crate) fn only_updaters(live: &Value, managers: &[String]) -> bool {
    let entries: Vec<&Value> = live
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|e| e.iter().collect())
        .unwrap_or_default();
    !managers.is_empty()
        && managers.iter().all(|m| {
            let mine: Vec<&&Value> = entries
                .iter()
                .filter(|e| e.get("manager").and_then(Value::as_str) == Some(m.as_str()))
                .collect();
            !mine.is_empty()
                && mine
                    .iter()
                    .all(|e| e.get("operation").and_then(Value::as_str) == Some("Update"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_first_difference_is_named_by_its_pointer() {
        let live = json!({"kind": "ConfigMap", "data": {"x": "1", "y": "2"}});
        assert_eq!(first_difference(&live, &json!({"data": {"x": "1"}})), None);
        assert_eq!(
            first_difference(&live, &json!({"data": {"x": "1", "y": "3"}})).as_deref(),
            Some("/data/y")
        );
        assert_eq!(
            first_difference(&live, &json!({"apiVersion": "v1", "data": {"x": "1"}})).as_deref(),
            Some("/apiVersion")
        );
        assert_eq!(
            first_difference(&live, &json!({"data": {"z": "1"}})).as_deref(),
            Some("/data/z")
        );
    }

    fn live_with(fields: Value, operation: &str) -> Value {
        json!({
            "metadata": {
                "name": "c",
                "labels": {"a": "1", "b": "2"},
                "managedFields": [{"manager": "op", "operation": operation, "fieldsV1": fields}],
            },
            "data": {"x": "1", "y": "2"},
        })
    }

    #[test]
    fn a_live_object_holding_what_we_apply_needs_no_write() {
        let live = live_with(
            json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}}}, "f:data": {"f:x": {}}}),
            "Apply",
        );
        let config = json!({"metadata": {"name": "c", "labels": {"a": "1"}}, "data": {"x": "1"}});
        assert!(up_to_date(&live, &config, "op"));
    }

    #[test]
    fn a_changed_value_needs_a_write() {
        let live = live_with(json!({"f:data": {"f:x": {}}}), "Apply");
        let config = json!({"data": {"x": "2"}});
        assert!(!up_to_date(&live, &config, "op"));
    }

    #[test]
    fn a_field_we_stopped_applying_needs_a_write_to_be_removed() {
        let live = live_with(json!({"f:data": {"f:x": {}, "f:y": {}}}), "Apply");
        let config = json!({"data": {"x": "1"}});
        assert!(!up_to_date(&live, &config, "op"));
        // Another manager's fields are not ours to remove.
        assert!(up_to_date(&live, &config, "someone-else"));
    }

    #[test]
    fn lists_compare_by_length_and_owner_references_by_uid() {
        let live = json!({"metadata": {"ownerReferences": [{"uid": "other"}, {"uid": "u", "controller": true}]},
            "spec": {"ports": [{"port": 80, "protocol": "TCP"}]}});
        assert!(up_to_date(
            &live,
            &json!({"metadata": {"ownerReferences": [{"uid": "u", "controller": true}]}, "spec": {"ports": [{"port": 80}]}}),
            "op"
        ));
        assert!(!up_to_date(
            &live,
            &json!({"spec": {"ports": [{"port": 80}, {"port": 81}]}}),
            "op"
        ));
        assert!(!up_to_date(
            &live,
            &json!({"metadata": {"ownerReferences": [{"uid": "v"}]}}),
            "op"
        ));
    }

    #[test]
    fn empty_containers_match_absence() {
        assert!(up_to_date(
            &json!({}),
            &json!({"spec": {}, "list": []}),
            "op"
        ));
    }

    #[test]
    fn conflict_managers_are_read_from_the_message() {
        let status = kube::core::Status {
            message: r#"Apply failed with 2 conflicts: conflicts with "kubectl-edit" using apps/v1: .spec.replicas; conflict with "helm""#.into(),
            ..kube::core::Status::default()
        };
        assert_eq!(conflicting_managers(&status), ["kubectl-edit", "helm"]);
        let live = json!({"metadata": {"managedFields": [
            {"manager": "kubectl-edit", "operation": "Update"},
            {"manager": "helm", "operation": "Apply"},
        ]}});
        assert!(only_updaters(&live, &["kubectl-edit".to_owned()]));
        assert!(!only_updaters(
            &live,
            &["kubectl-edit".to_owned(), "helm".to_owned()]
        ));
        assert!(!only_updaters(&live, &[]));
    }
}
