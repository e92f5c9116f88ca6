//! The defaults of the `apps/v1` kinds served (1.20's
//! `SetDefaults_Deployment` and `_StatefulSet`), with their pod
//! templates' and the status the real server encodes for a new one; a
//! DaemonSet's template generation, which `apps/v1` carries in an
//! annotation.

use serde_json::{Value, json};

use super::{child, items_of, object_at, pod_template, set_absent};
use crate::resources::ResourceDef;

/// Every write of a Deployment: one replica, a `RollingUpdate` strategy
/// of 25% each way, 10 old ReplicaSets kept, 600 s to progress.
pub fn deployment(_def: &ResourceDef, deployment: &mut Value) {
    if let Some(spec) = object_at(deployment, &["spec"]) {
        set_absent(
            spec,
            &[
                ("replicas", json!(1)),
                ("revisionHistoryLimit", json!(10)),
                ("progressDeadlineSeconds", json!(600)),
            ],
        );
        if let Some(strategy) = child(spec, "strategy") {
            set_absent(strategy, &[("type", json!("RollingUpdate"))]);
            if strategy.get("type") == Some(&json!("RollingUpdate"))
                && let Some(rolling) = child(strategy, "rollingUpdate")
            {
                set_absent(
                    rolling,
                    &[("maxUnavailable", json!("25%")), ("maxSurge", json!("25%"))],
                );
            }
        }
    }
    workload_template(deployment);
    empty_status(deployment, json!({}));
}

/// Every write of a StatefulSet: `OrderedReady`, a `RollingUpdate` from
/// partition 0, one replica, 10 revisions kept; its claim templates as
/// the real server encodes them.
pub fn stateful_set(_def: &ResourceDef, set: &mut Value) {
    if let Some(spec) = object_at(set, &["spec"]) {
        set_absent(
            spec,
            &[
                ("podManagementPolicy", json!("OrderedReady")),
                ("replicas", json!(1)),
                ("revisionHistoryLimit", json!(10)),
            ],
        );
        if let Some(strategy) = child(spec, "updateStrategy") {
            if strategy.get("type").is_none_or(Value::is_null) {
                strategy.insert("type".into(), json!("RollingUpdate"));
                set_absent(strategy, &[("rollingUpdate", json!({}))]);
            }
            if strategy.get("type") == Some(&json!("RollingUpdate"))
                && let Some(rolling) = strategy
                    .get_mut("rollingUpdate")
                    .and_then(Value::as_object_mut)
            {
                set_absent(rolling, &[("partition", json!(0))]);
            }
        }
        for claim in items_of(spec, "volumeClaimTemplates") {
            set_absent(
                claim,
                &[
                    ("apiVersion", json!("v1")),
                    ("kind", json!("PersistentVolumeClaim")),
                ],
            );
            if let Some(meta) = child(claim, "metadata") {
                meta.entry("creationTimestamp").or_insert(Value::Null);
            }
            if let Some(claim_spec) = child(claim, "spec") {
                set_absent(claim_spec, &[("volumeMode", json!("Filesystem"))]);
            }
            if let Some(status) = child(claim, "status") {
                set_absent(status, &[("phase", json!("Pending"))]);
            }
        }
    }
    workload_template(set);
    empty_status(set, json!({"replicas": 0}));
}

/// The annotation in which `apps/v1` carries a DaemonSet's template
/// generation (`spec.templateGeneration` of the internal type).
const TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";

/// A DaemonSet's template generation as the annotation says, if it says
/// one.
fn template_generation(set: &Value) -> Option<i64> {
    set["metadata"]["annotations"][TEMPLATE_GENERATION]
        .as_str()
        .and_then(|g| g.parse().ok())
}

/// A DaemonSet whose template-generation annotation is not an integer
/// does not decode (400, as 1.20's conversion of `apps/v1` refuses it).
///
/// # Errors
/// `BadRequest` with the real server's message.
pub fn check_daemon_set(
    def: &crate::resources::ResourceDef,
    set: &Value,
) -> Result<(), crate::status::ApiError> {
    match set["metadata"]["annotations"][TEMPLATE_GENERATION].as_str() {
        Some(text) if text.parse::<i64>().is_err() => {
            Err(crate::status::ApiError::BadRequest(format!(
                "DaemonSet in version \"{}\" cannot be handled as a DaemonSet: \
                 strconv.ParseInt: parsing {text:?}: invalid syntax",
                def.version
            )))
        }
        _ => Ok(()),
    }
}

/// Writes `generation` into a DaemonSet's annotation.
fn set_template_generation(set: &mut Value, generation: i64) {
    if let Some(meta) = object_at(set, &["metadata"])
        && let Some(annotations) = child(meta, "annotations")
    {
        annotations.insert(TEMPLATE_GENERATION.into(), json!(generation.to_string()));
    }
}

/// A new DaemonSet: its template generation is the one sent, 1 at least.
pub fn daemon_set_create(set: &mut Value, _sequence: u64) {
    let generation = template_generation(set).unwrap_or(0).max(1);
    set_template_generation(set, generation);
}

/// An updated DaemonSet keeps the stored template generation, one more
/// when its template changes (what a client sends is ignored).
pub fn daemon_set_update(set: &mut Value, stored: &Value) {
    let before = template_generation(stored).unwrap_or(1);
    let changed = set.pointer("/spec/template") != stored.pointer("/spec/template");
    set_template_generation(set, before + i64::from(changed));
}

/// The pod template of a workload, at `spec.template`.
pub(crate) fn workload_template(workload: &mut Value) {
    if let Some(spec) = object_at(workload, &["spec"])
        && let Some(template) = spec.get_mut("template")
    {
        pod_template(template);
    }
}

/// The status the real server encodes for an object that has none yet
/// (its fields without `omitempty`).
pub(crate) fn empty_status(object: &mut Value, status: Value) {
    if let Some(o) = object.as_object_mut() {
        match o.get("status") {
            Some(s) if !s.is_null() => {}
            _ => {
                o.insert("status".into(), status);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(plural: &str) -> ResourceDef {
        crate::builtins::registry()
            .get("apps", "v1", plural)
            .unwrap()
            .as_ref()
            .clone()
    }

    #[test]
    fn a_deployment_is_defaulted_as_by_1_20() {
        let mut d = json!({"spec": {"selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
        deployment(&def("deployments"), &mut d);
        let spec = &d["spec"];
        assert_eq!(spec["replicas"], 1);
        assert_eq!(
            spec["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        assert_eq!(
            spec["template"]["spec"]["containers"][0]["imagePullPolicy"],
            "Always"
        );
        assert_eq!(d["status"], json!({}));
        let mut recreate = json!({"spec": {"strategy": {"type": "Recreate"}}});
        deployment(&def("deployments"), &mut recreate);
        assert_eq!(recreate["spec"]["strategy"], json!({"type": "Recreate"}));
    }

    #[test]
    fn a_stateful_set_is_defaulted_as_by_1_20() {
        let mut s =
            json!({"spec": {"volumeClaimTemplates": [{"metadata": {"name": "d"}, "spec": {}}]}});
        stateful_set(&def("statefulsets"), &mut s);
        let spec = &s["spec"];
        assert_eq!(
            spec["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
        );
        assert_eq!(spec["podManagementPolicy"], "OrderedReady");
        assert_eq!(
            spec["volumeClaimTemplates"][0]["status"],
            json!({"phase": "Pending"})
        );
        assert_eq!(s["status"], json!({"replicas": 0}));
        let mut on_delete = json!({"spec": {"updateStrategy": {"type": "OnDelete"}}});
        stateful_set(&def("statefulsets"), &mut on_delete);
        assert_eq!(
            on_delete["spec"]["updateStrategy"],
            json!({"type": "OnDelete"})
        );
    }
}
