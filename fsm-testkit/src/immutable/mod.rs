//! What an update may not change, per kind, as kube-apiserver 1.20's
//! update validation refuses it (422 with one cause per field, the real
//! field path and message): a Deployment's, ReplicaSet's and DaemonSet's
//! selector; a Job's completions,
//! selector and pod template; a StatefulSet's spec but for its replicas,
//! template and update strategy; a Service's cluster IPs; a Secret's type;
//! the data of a ConfigMap or Secret marked `immutable`, and the mark.
//!
//! Each kind's rules are a table of [`Field`]s (a JSON pointer, the path
//! reported, how the value prints), plus the few rules a table does not
//! say. The kinds' table (`builtins`) names each kind's function here.

pub mod go_syntax;
pub mod pod;

use serde_json::{Map, Value};

use crate::status::Cause;

/// The message of a changed field.
const IMMUTABLE: &str = "field is immutable";
/// The message of data changed under `immutable: true`.
const IMMUTABLE_WHEN_SET: &str = "field is immutable when `immutable` is set";
/// The message of a changed StatefulSet spec.
const STATEFUL_SET_SPEC: &str = "updates to statefulset spec for fields other than 'replicas', \
                                 'template', and 'updateStrategy' are forbidden";

/// A field an update may not change.
struct Field {
    /// Where it is, as a JSON pointer.
    pointer: &'static str,
    /// The path the cause names.
    path: &'static str,
    /// How the real server prints its new value.
    shown: fn(Option<&Value>) -> String,
}

/// A `FieldValueInvalid` cause whose value is printed already.
fn invalid(field: &str, shown: &str, why: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {shown}: {why}"),
        field: field.into(),
    }
}

/// The causes of `fields` an update from `old` to `new` changes.
fn changed(fields: &[Field], old: &Value, new: &Value) -> Vec<Cause> {
    fields
        .iter()
        .filter(|f| old.pointer(f.pointer) != new.pointer(f.pointer))
        .map(|f| invalid(f.path, &(f.shown)(new.pointer(f.pointer)), IMMUTABLE))
        .collect()
}

/// A pod template as the embedded server prints it (its JSON: the real
/// server prints Go's dump of its internal type).
fn json_text(value: Option<&Value>) -> String {
    format!("{:?}", value.unwrap_or(&Value::Null).to_string())
}

/// A Deployment of `apps/v1`: its selector.
#[must_use]
pub fn deployment(old: &Value, new: &Value) -> Vec<Cause> {
    changed(
        &[Field {
            pointer: "/spec/selector",
            path: "spec.selector",
            shown: go_syntax::label_selector,
        }],
        old,
        new,
    )
}

/// A ReplicaSet of `apps/v1`: its selector, as a Deployment's.
#[must_use]
pub fn replica_set(old: &Value, new: &Value) -> Vec<Cause> {
    deployment(old, new)
}

/// A DaemonSet of `apps/v1`: its selector, as a Deployment's.
#[must_use]
pub fn daemon_set(old: &Value, new: &Value) -> Vec<Cause> {
    deployment(old, new)
}

/// A Job: its completions, selector and pod template (the template may
/// change while the Job is suspended, as later versions allow).
#[must_use]
pub fn job(old: &Value, new: &Value) -> Vec<Cause> {
    let suspended = |job: &Value| job.pointer("/spec/suspend") == Some(&Value::Bool(true));
    let mut fields = vec![
        Field {
            pointer: "/spec/completions",
            path: "spec.completions",
            shown: go_syntax::scalar,
        },
        Field {
            pointer: "/spec/selector",
            path: "spec.selector",
            shown: go_syntax::label_selector,
        },
    ];
    if !suspended(old) && !suspended(new) {
        fields.push(Field {
            pointer: "/spec/template",
            path: "spec.template",
            shown: json_text,
        });
    }
    changed(&fields, old, new)
}

/// A StatefulSet: nothing of its spec but `replicas`, `template` and
/// `updateStrategy` (one `Forbidden` cause on `spec`).
#[must_use]
pub fn stateful_set(old: &Value, new: &Value) -> Vec<Cause> {
    let rest = |set: &Value| -> Map<String, Value> {
        let mut spec = set
            .get("spec")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        for mutable in ["replicas", "template", "updateStrategy"] {
            spec.remove(mutable);
        }
        spec
    };
    if rest(old) == rest(new) {
        Vec::new()
    } else {
        vec![Cause::forbidden("spec", STATEFUL_SET_SPEC)]
    }
}

/// A ConfigMap: under `immutable: true`, the mark, its data and binary data.
#[must_use]
pub fn config_map(old: &Value, new: &Value) -> Vec<Cause> {
    locked_data(old, new, &["data", "binaryData"])
}

/// A Secret: its type; under `immutable: true`, the mark and its data.
#[must_use]
pub fn secret(old: &Value, new: &Value) -> Vec<Cause> {
    let mut causes = changed(
        &[Field {
            pointer: "/type",
            path: "type",
            shown: go_syntax::scalar,
        }],
        old,
        new,
    );
    causes.extend(locked_data(old, new, &["data"]));
    causes
}

/// Under an old `immutable: true`: the mark kept, and each of `fields`
/// unchanged (absent and empty are the same).
fn locked_data(old: &Value, new: &Value, fields: &[&str]) -> Vec<Cause> {
    let locked = |o: &Value| o.get("immutable") == Some(&Value::Bool(true));
    if !locked(old) {
        return Vec::new();
    }
    let mut causes = Vec::new();
    if !locked(new) {
        causes.push(Cause::forbidden("immutable", IMMUTABLE_WHEN_SET));
    }
    let empty = Value::Object(Map::new());
    for field in fields {
        let value = |o: &Value| {
            o.get(*field)
                .filter(|v| !v.is_null())
                .cloned()
                .unwrap_or_else(|| empty.clone())
        };
        if value(old) != value(new) {
            causes.push(Cause::forbidden(field, IMMUTABLE_WHEN_SET));
        }
    }
    causes
}

/// A Service: its cluster IPs may be added to but neither changed nor
/// removed, unless it is or was `ExternalName`, or stays headless.
#[must_use]
pub fn service(old: &Value, new: &Value) -> Vec<Cause> {
    let (old_spec, new_spec) = (old.get("spec"), new.get("spec"));
    let text = |spec: Option<&Value>, key: &str| {
        spec.and_then(|s| s.get(key))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let external = |spec: Option<&Value>| text(spec, "type").as_deref() == Some("ExternalName");
    let headless = |spec: Option<&Value>| text(spec, "clusterIP").as_deref() == Some("None");
    if external(old_spec) || external(new_spec) || (headless(old_spec) && headless(new_spec)) {
        return Vec::new();
    }
    let ips = |spec: Option<&Value>| -> Vec<String> {
        spec.and_then(|s| s.get("clusterIPs"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    };
    let (old_ips, new_ips) = (ips(old_spec), ips(new_spec));
    let shown = go_syntax::string_slice(&new_ips);
    let at = |i: usize| format!("spec.clusterIPs[{i}]");
    if old_ips.len() == new_ips.len() {
        return old_ips
            .iter()
            .zip(&new_ips)
            .enumerate()
            .filter(|(_, (o, n))| o != n)
            .map(|(i, _)| invalid(&at(i), &shown, "may not change once set"))
            .collect();
    }
    if old_ips.len() > new_ips.len() {
        return match new_ips.first() {
            None => vec![invalid(
                &at(0),
                &shown,
                "primary clusterIP can not be unset",
            )],
            Some(first) if Some(first) != old_ips.first() => {
                vec![invalid(&at(0), &shown, "may not change once set")]
            }
            Some(_) => Vec::new(),
        };
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn update(old: &Value, new: &Value, rule: fn(&Value, &Value) -> Vec<Cause>) -> Vec<Cause> {
        rule(old, new)
    }

    #[test]
    fn a_deployments_selector_is_immutable() {
        let d =
            |app: &str| json!({"spec": {"selector": {"matchLabels": {"app": app}}, "replicas": 1}});
        assert!(update(&d("a"), &d("a"), deployment).is_empty());
        let causes = update(&d("a"), &d("b"), deployment);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "spec.selector");
        assert!(
            causes[0].message.ends_with(": field is immutable"),
            "{}",
            causes[0].message
        );
    }

    #[test]
    fn a_jobs_completions_and_template_are_immutable() {
        let j = |n: i64, image: &str| json!({"spec": {"completions": n, "template": {"spec": {"containers": [{"image": image}]}}}});
        let causes = update(&j(1, "a"), &j(3, "b"), job);
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["spec.completions", "spec.template"]);
        assert_eq!(causes[0].message, "Invalid value: 3: field is immutable");
        let mut suspended = j(1, "b");
        suspended["spec"]["suspend"] = json!(true);
        assert!(update(&j(1, "a"), &suspended, job).is_empty());
    }

    #[test]
    fn a_stateful_sets_spec_is_frozen_but_for_three_fields() {
        let s = |replicas: i64, service: &str| json!({"spec": {"replicas": replicas, "serviceName": service}});
        assert!(update(&s(1, "a"), &s(3, "a"), stateful_set).is_empty());
        let causes = update(&s(1, "a"), &s(1, "b"), stateful_set);
        assert_eq!(causes[0].field, "spec");
        assert_eq!(causes[0].reason, "FieldValueForbidden");
    }

    #[test]
    fn immutable_data_and_secret_types() {
        let cm = |v: &str, locked: Option<bool>| {
            let mut o = json!({"data": {"a": v}});
            if let Some(l) = locked {
                o["immutable"] = json!(l);
            }
            o
        };
        assert!(update(&cm("1", None), &cm("2", None), config_map).is_empty());
        let causes = update(&cm("1", Some(true)), &cm("2", Some(false)), config_map);
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["immutable", "data"]);
        let causes = update(
            &json!({"type": "Opaque"}),
            &json!({"type": "Other"}),
            secret,
        );
        assert_eq!(
            causes[0].message,
            "Invalid value: \"Other\": field is immutable"
        );
    }

    #[test]
    fn cluster_ips_may_not_change_or_go() {
        let svc = |ips: &[&str]| json!({"spec": {"type": "ClusterIP", "clusterIPs": ips}});
        assert!(update(&svc(&["10.0.0.1"]), &svc(&["10.0.0.1"]), service).is_empty());
        let causes = update(&svc(&["10.0.0.1"]), &svc(&["10.0.0.2"]), service);
        assert_eq!(causes[0].field, "spec.clusterIPs[0]");
        assert_eq!(
            causes[0].message,
            "Invalid value: []string{\"10.0.0.2\"}: may not change once set"
        );
        let causes = update(&svc(&["10.0.0.1"]), &svc(&[]), service);
        assert_eq!(
            causes[0].message,
            "Invalid value: []string(nil): primary clusterIP can not be unset"
        );
        let external = json!({"spec": {"type": "ExternalName"}});
        assert!(update(&svc(&["10.0.0.1"]), &external, service).is_empty());
    }
}
