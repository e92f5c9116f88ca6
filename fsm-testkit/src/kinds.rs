//! The defaults the real server gives particular built-in kinds on write
//! (the kinds' table, `builtins`, says which kind takes which): initial
//! status (`Namespace` phase `Active`, `Pod` phase `Pending`, an
//! `Ingress`'s empty load balancer), `Secret.stringData` folded into
//! `data`, a `Service` cluster IP; and what every kind's encoding drops
//! ([`drop_empty`]); and a rule of updates: a Job's pod template does not
//! change ([`job_template_unchanged`]). The RBAC kinds' defaults are in `rbac`.

use serde_json::{Map, Value, json};

use crate::resources::ResourceDef;
use crate::status::{ApiError, Cause, Subject};

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

/// A new Pod: `Pending`, `BestEffort`.
pub fn pod_defaults(object: &mut Value, _sequence: u64) {
    object["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
}

/// A new Service: type `ClusterIP`, and (but for an `ExternalName` one
/// or one that names its own) a cluster IP from `sequence`, the count of
/// creates.
pub fn service_defaults(object: &mut Value, sequence: u64) {
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
        let ty = spec
            .entry("type")
            .or_insert_with(|| json!("ClusterIP"))
            .as_str()
            .unwrap_or_default()
            .to_string();
        if ty != "ExternalName" && !spec.contains_key("clusterIP") {
            let ip = format!("10.96.{}.{}", (sequence / 250) % 250, 1 + sequence % 250);
            spec.insert("clusterIP".into(), json!(ip));
            spec.insert("clusterIPs".into(), json!([ip]));
        }
    }
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

/// An update of Job `name` from `old` to `new` keeps `spec.template`, as
/// the real server's Job validation requires (`422`, `spec.template:
/// field is immutable`). A create, and an update of a suspended Job (whose
/// scheduling directives later versions let change), are not checked.
///
/// # Errors
/// [`ApiError::Invalid`] naming `spec.template`.
pub fn job_template_unchanged(
    name: &str,
    old: Option<&Value>,
    new: &Value,
) -> Result<(), ApiError> {
    let Some(old) = old else {
        return Ok(());
    };
    let template = |job: &Value| job.pointer("/spec/template").cloned();
    let suspended = |job: &Value| job.pointer("/spec/suspend") == Some(&Value::Bool(true));
    if suspended(old) || suspended(new) || template(old) == template(new) {
        return Ok(());
    }
    let shown = template(new).unwrap_or(Value::Null).to_string();
    Err(ApiError::Invalid(
        Subject::new("batch", "Job", name),
        vec![Cause::invalid(
            "spec.template",
            &shown,
            "field is immutable",
        )],
    ))
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
    fn initial_status_and_cluster_ip() {
        let mut ns = json!({"metadata": {"name": "x"}});
        namespace_defaults(&mut ns, 0);
        assert_eq!(ns["status"]["phase"], "Active");
        let mut svc = json!({"spec": {"ports": []}});
        service_defaults(&mut svc, 3);
        assert_eq!(svc["spec"]["clusterIP"], "10.96.0.4");
        assert_eq!(svc["spec"]["type"], "ClusterIP");
    }

    #[test]
    fn a_jobs_template_cannot_change() {
        let job = |image: &str| json!({"spec": {"template": {"spec": {"containers": [{"name": "m", "image": image}]}}}});
        assert!(job_template_unchanged("j", None, &job("a")).is_ok());
        assert!(job_template_unchanged("j", Some(&job("a")), &job("a")).is_ok());
        let err = job_template_unchanged("j", Some(&job("a")), &job("b")).unwrap_err();
        assert_eq!(err.code().as_u16(), 422);
        assert!(err.to_string().contains("spec.template"), "{err}");
        assert!(err.to_string().contains("field is immutable"), "{err}");
        let mut suspended = job("b");
        suspended["spec"]["suspend"] = json!(true);
        assert!(job_template_unchanged("j", Some(&job("a")), &suspended).is_ok());
    }
}
