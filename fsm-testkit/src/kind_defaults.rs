//! The defaults of the kinds served for issue 32 (claims and volumes,
//! StorageClasses, DaemonSets, ReplicaSets, CronJobs), each kind's a table
//! of `(path, value)` set where the object has nothing, as kube-apiserver
//! 1.20's `SetDefaults_…` functions and its encoding leave them (the
//! `status` fields Go always writes, `phase: Pending` of a new claim or
//! volume). What the pod templates inside them get is not here (the pod
//! template's own defaulting).

use serde_json::{Value, json};

use crate::resources::ResourceDef;

/// One default: a path of object keys from the root, and the value set
/// there when absent (the maps on the way are made).
type Default = (&'static [&'static str], fn() -> Value);

/// A PersistentVolumeClaim's.
const CLAIM: &[Default] = &[
    (&["spec", "volumeMode"], || json!("Filesystem")),
    (&["status", "phase"], || json!("Pending")),
];

/// A PersistentVolume's.
const VOLUME: &[Default] = &[
    (&["spec", "persistentVolumeReclaimPolicy"], || {
        json!("Retain")
    }),
    (&["spec", "volumeMode"], || json!("Filesystem")),
    (&["status", "phase"], || json!("Pending")),
];

/// A StorageClass's.
const STORAGE_CLASS: &[Default] = &[
    (&["reclaimPolicy"], || json!("Delete")),
    (&["volumeBindingMode"], || json!("Immediate")),
];

/// A DaemonSet's (1.20: no `maxSurge`).
const DAEMON_SET: &[Default] = &[
    (&["spec", "revisionHistoryLimit"], || json!(10)),
    (&["spec", "updateStrategy", "type"], || {
        json!("RollingUpdate")
    }),
    (&["status", "currentNumberScheduled"], || json!(0)),
    (&["status", "desiredNumberScheduled"], || json!(0)),
    (&["status", "numberMisscheduled"], || json!(0)),
    (&["status", "numberReady"], || json!(0)),
];

/// A ReplicaSet's.
const REPLICA_SET: &[Default] = &[
    (&["spec", "replicas"], || json!(1)),
    (&["status", "replicas"], || json!(0)),
];

/// A CronJob's (both versions).
const CRON_JOB: &[Default] = &[
    (&["spec", "concurrencyPolicy"], || json!("Allow")),
    (&["spec", "suspend"], || json!(false)),
    (&["spec", "successfulJobsHistoryLimit"], || json!(3)),
    (&["spec", "failedJobsHistoryLimit"], || json!(1)),
    (&["status"], || json!({})),
];

/// Sets each of `defaults` that `object` lacks. A path through something
/// that is not a map (a client's wrong type, refused later) is left alone.
fn fill(object: &mut Value, defaults: &[Default]) {
    for (path, value) in defaults {
        set_absent(object, path, *value);
    }
}

fn set_absent(at: &mut Value, path: &[&str], value: fn() -> Value) {
    let (Some(map), Some((first, rest))) = (at.as_object_mut(), path.split_first()) else {
        return;
    };
    if rest.is_empty() {
        map.entry(*first).or_insert_with(value);
    } else {
        set_absent(map.entry(*first).or_insert_with(|| json!({})), rest, value);
    }
}

/// Every write of a PersistentVolumeClaim.
pub fn claim(_def: &ResourceDef, object: &mut Value) {
    fill(object, CLAIM);
}

/// Every write of a PersistentVolume: a `hostPath` source gets its
/// `type: ""`, as the volume sources' defaulting writes it, and an empty
/// `storageClassName` is left out (a plain string with `omitempty` in a
/// volume, unlike a claim's, which is a pointer and kept).
pub fn volume(_def: &ResourceDef, object: &mut Value) {
    fill(object, VOLUME);
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut)
        && spec.get("storageClassName").is_some_and(|c| c == "")
    {
        spec.remove("storageClassName");
    }
    if let Some(host_path) = object["spec"]
        .get_mut("hostPath")
        .and_then(Value::as_object_mut)
    {
        host_path.entry("type").or_insert_with(|| json!(""));
    }
}

/// Every write of a StorageClass.
pub fn storage_class(_def: &ResourceDef, object: &mut Value) {
    fill(object, STORAGE_CLASS);
}

/// Every write of a DaemonSet: a rolling update strategy gets its
/// `maxUnavailable: 1`.
pub fn daemon_set(_def: &ResourceDef, object: &mut Value) {
    fill(object, DAEMON_SET);
    template_defaults(object, "/spec/template");
    let strategy = &mut object["spec"]["updateStrategy"];
    if strategy["type"] == "RollingUpdate"
        && let Some(map) = strategy.as_object_mut()
    {
        let rolling = map.entry("rollingUpdate").or_insert_with(|| json!({}));
        if let Some(rolling) = rolling.as_object_mut() {
            rolling.entry("maxUnavailable").or_insert_with(|| json!(1));
        }
    }
}

/// Every write of a ReplicaSet.
pub fn replica_set(_def: &ResourceDef, object: &mut Value) {
    fill(object, REPLICA_SET);
    template_defaults(object, "/spec/template");
}

/// Every write of a CronJob: its job template's metadata as Go encodes
/// an empty `ObjectMeta` (`creationTimestamp: null`).
pub fn cron_job(_def: &ResourceDef, object: &mut Value) {
    fill(object, CRON_JOB);
    if let Some(template) = object
        .pointer_mut("/spec/jobTemplate")
        .and_then(Value::as_object_mut)
    {
        let meta = template.entry("metadata").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.entry("creationTimestamp").or_insert(Value::Null);
        }
    }
    template_defaults(object, "/spec/jobTemplate/spec/template");
}

/// The pod template at `pointer`, if there is one, defaulted as every
/// workload's is.
fn template_defaults(object: &mut Value, pointer: &str) {
    if let Some(template) = object.pointer_mut(pointer) {
        crate::defaults::pod_template(template);
    }
}

/// The finalizer the admission plugin `StorageObjectInUseProtection`
/// gives claims (lifted by `cluster::storage_protection`).
pub const CLAIM_PROTECTION: &str = "kubernetes.io/pvc-protection";
/// The finalizer it gives volumes.
pub const VOLUME_PROTECTION: &str = "kubernetes.io/pv-protection";

/// Adds `finalizer` to a new object's finalizers unless it is there.
fn add_finalizer(object: &mut Value, finalizer: &str) {
    let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let list = meta.entry("finalizers").or_insert_with(|| json!([]));
    if let Some(list) = list.as_array_mut()
        && !list.iter().any(|f| f == finalizer)
    {
        list.push(json!(finalizer));
    }
}

/// A new claim: the admission plugin's finalizer.
pub fn protect_claim(object: &mut Value, _sequence: u64) {
    add_finalizer(object, CLAIM_PROTECTION);
}

/// A new volume: the admission plugin's finalizer.
pub fn protect_volume(object: &mut Value, _sequence: u64) {
    add_finalizer(object, VOLUME_PROTECTION);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def() -> ResourceDef {
        ResourceDef::builtin(
            "",
            "v1",
            "PersistentVolumeClaim",
            "persistentvolumeclaims",
            true,
        )
    }

    #[test]
    fn absent_fields_get_their_defaults_and_given_ones_stay() {
        let mut pvc = json!({"spec": {"volumeMode": "Block"}});
        claim(&def(), &mut pvc);
        assert_eq!(
            pvc,
            json!({"spec": {"volumeMode": "Block"}, "status": {"phase": "Pending"}})
        );
        let mut ds = json!({"spec": {}});
        daemon_set(&def(), &mut ds);
        assert_eq!(
            ds["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}})
        );
        let mut on_delete = json!({"spec": {"updateStrategy": {"type": "OnDelete"}}});
        daemon_set(&def(), &mut on_delete);
        assert_eq!(
            on_delete["spec"]["updateStrategy"],
            json!({"type": "OnDelete"})
        );
    }

    #[test]
    fn an_empty_class_is_left_out_of_a_volume_only() {
        let mut pv = json!({"spec": {"storageClassName": ""}});
        volume(&def(), &mut pv);
        assert_eq!(pv["spec"].get("storageClassName"), None);
        let mut named = json!({"spec": {"storageClassName": "fast"}});
        volume(&def(), &mut named);
        assert_eq!(named["spec"]["storageClassName"], "fast");
        let mut pvc = json!({"spec": {"storageClassName": ""}});
        claim(&def(), &mut pvc);
        assert_eq!(pvc["spec"]["storageClassName"], "");
    }

    #[test]
    fn a_path_through_a_wrong_type_is_left_alone() {
        let mut rs = json!({"spec": "not a map"});
        replica_set(&def(), &mut rs);
        assert_eq!(rs, json!({"spec": "not a map", "status": {"replicas": 0}}));
    }
}
