//! The table cells of the column types of claims, volumes, StorageClasses,
//! DaemonSets, ReplicaSets, ControllerRevisions, CronJobs and
//! PodDisruptionBudgets, as
//! kube-apiserver 1.20's printers (`pkg/printers/internalversion`) write
//! them. `crate::table` asks here first for a column's type and cell.

use serde_json::{Value, json};

use crate::time::age;

/// The annotation naming a claim's or a volume's class before
/// `storageClassName` (read first, as the printer does).
const BETA_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

/// The Table column type of a column type of this module, if it is one.
#[must_use]
pub fn column_type(type_: &str) -> Option<&'static str> {
    Some(match type_ {
        "phase" | "text" | "claimCapacity" | "claimAccessModes" | "storageClass" | "volumeMode"
        | "quantity" | "accessModes" | "claimRef" | "labels" | "controller" | "bool"
        | "ageOrNone" | "intOrPercentOrNA" => "string",
        "integer0" | "countInt" => "integer",
        "boolPtr" => "boolean",
        _ => return None,
    })
}

/// Whether a column of this type is printed after AGE with `-o wide`.
#[must_use]
pub fn wide(type_: &str) -> bool {
    type_ == "volumeMode"
}

/// The cell of column type `type_` of `object`, whose value at the
/// column's path is `value`, if the type is one of this module's.
#[must_use]
pub fn cell(type_: &str, object: &Value, value: &Value, now: jiff::Timestamp) -> Option<Value> {
    let at = || value.clone();
    let text = |v: Value| v.as_str().unwrap_or_default().to_string();
    Some(match type_ {
        "phase" if object["metadata"].get("deletionTimestamp").is_some() => json!("Terminating"),
        "phase" | "text" => json!(text(at())),
        // A PodDisruptionBudget's bound: the count or percentage, N/A.
        "intOrPercentOrNA" => match at() {
            Value::Null => json!("N/A"),
            Value::String(s) => json!(s),
            other => json!(other.to_string()),
        },
        "claimCapacity" | "claimAccessModes" => {
            if text(object["spec"]["volumeName"].clone()).is_empty() {
                json!("")
            } else if type_ == "claimCapacity" {
                json!(text(object["status"]["capacity"]["storage"].clone()))
            } else {
                json!(access_modes(&object["status"]["accessModes"]))
            }
        }
        "storageClass" => match object["metadata"]["annotations"].get(BETA_CLASS_ANNOTATION) {
            Some(class) => json!(text(class.clone())),
            None => json!(text(object["spec"]["storageClassName"].clone())),
        },
        "volumeMode" => match at() {
            Value::String(mode) => json!(mode),
            _ => json!("<unset>"),
        },
        "quantity" => match at() {
            Value::String(q) => json!(q),
            _ => json!("0"),
        },
        "accessModes" => json!(access_modes(&at())),
        "claimRef" => {
            let r = at();
            if r.is_object() {
                json!(format!(
                    "{}/{}",
                    text(r["namespace"].clone()),
                    text(r["name"].clone())
                ))
            } else {
                json!("")
            }
        }
        "labels" => json!(labels(&at())),
        "controller" => json!(controller(object)),
        "bool" => json!(at().as_bool().unwrap_or(false)),
        "boolPtr" => json!(match at().as_bool() {
            Some(true) => "True",
            Some(false) => "False",
            None => "<unset>",
        }),
        "ageOrNone" => match at() {
            Value::String(t) => json!(age(&t, now)),
            _ => json!("<none>"),
        },
        "integer0" => json!(at().as_i64().unwrap_or(0)),
        "countInt" => json!(at().as_array().map_or(0, Vec::len)),
        _ => return None,
    })
}

/// Access modes as the printer abbreviates them: `RWO`, `ROX`, `RWX`, in
/// that order, each once.
fn access_modes(modes: &Value) -> String {
    let has = |m: &str| modes.as_array().is_some_and(|a| a.iter().any(|x| x == m));
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
    ]
    .iter()
    .filter(|(mode, _)| has(mode))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

/// A label map as Go's `labels.FormatLabels`: `k=v` sorted by key, joined
/// by commas; `<none>` when empty.
fn labels(map: &Value) -> String {
    let Some(map) = map.as_object().filter(|m| !m.is_empty()) else {
        return "<none>".into();
    };
    let mut pairs: Vec<String> = map
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    pairs.sort();
    pairs.join(",")
}

/// The controller owner of `object` as `kind.group/name` in lower case,
/// or `<none>`.
fn controller(object: &Value) -> String {
    let owners = object["metadata"]["ownerReferences"].as_array();
    let Some(owner) = owners
        .into_iter()
        .flatten()
        .find(|r| r["controller"] == true)
    else {
        return "<none>".into();
    };
    let kind = owner["kind"].as_str().unwrap_or_default();
    let name = owner["name"].as_str().unwrap_or_default();
    let api_version = owner["apiVersion"].as_str().unwrap_or_default();
    let group = api_version
        .rsplit_once('/')
        .map(|(g, _)| g)
        .unwrap_or_default();
    if kind.is_empty() {
        return name.to_string();
    }
    let group_kind = if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    };
    format!("{}/{name}", group_kind.to_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cell of `type_` with the value at `path` (`.a.b`) of `object`.
    fn cell_at(type_: &str, object: &Value, path: &str, now: jiff::Timestamp) -> Option<Value> {
        let pointer = path.replace('.', "/");
        let value = object.pointer(&pointer).cloned().unwrap_or(Value::Null);
        cell(type_, object, &value, now)
    }

    fn now() -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_800_000_000).unwrap()
    }

    #[test]
    fn claims_print_capacity_and_modes_once_bound() {
        let pending = json!({"metadata": {}, "spec": {"storageClassName": "fast"},
            "status": {"phase": "Pending"}});
        assert_eq!(
            cell_at("claimCapacity", &pending, "", now()),
            Some(json!(""))
        );
        assert_eq!(
            cell_at("storageClass", &pending, "", now()),
            Some(json!("fast"))
        );
        assert_eq!(
            cell_at("volumeMode", &pending, ".spec.volumeMode", now()),
            Some(json!("<unset>"))
        );
        let bound = json!({"metadata": {"annotations": {BETA_CLASS_ANNOTATION: "old"}},
            "spec": {"volumeName": "pv1", "storageClassName": "fast"},
            "status": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany", "ReadWriteOnce"]}});
        assert_eq!(
            cell_at("claimCapacity", &bound, "", now()),
            Some(json!("1Gi"))
        );
        assert_eq!(
            cell_at("claimAccessModes", &bound, "", now()),
            Some(json!("RWO,RWX"))
        );
        assert_eq!(
            cell_at("storageClass", &bound, "", now()),
            Some(json!("old"))
        );
    }

    #[test]
    fn controllers_labels_and_booleans_as_the_printer() {
        let revision = json!({"metadata": {"ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "controller": true}]}});
        assert_eq!(
            cell_at("controller", &revision, "", now()),
            Some(json!("daemonset.apps/d"))
        );
        assert_eq!(
            cell_at("controller", &json!({"metadata": {}}), "", now()),
            Some(json!("<none>"))
        );
        let ds = json!({"spec": {"nodeSelector": {"b": "2", "a": "1"}}});
        assert_eq!(
            cell_at("labels", &ds, ".spec.nodeSelector", now()),
            Some(json!("a=1,b=2"))
        );
        assert_eq!(
            cell_at("labels", &ds, ".spec.none", now()),
            Some(json!("<none>"))
        );
        assert_eq!(
            cell_at("boolPtr", &ds, ".spec.suspend", now()),
            Some(json!("<unset>"))
        );
        assert_eq!(
            cell_at("ageOrNone", &ds, ".status.lastScheduleTime", now()),
            Some(json!("<none>"))
        );
        assert_eq!(cell_at("other", &ds, "", now()), None);
        assert_eq!(column_type("integer0"), Some("integer"));
    }
}
