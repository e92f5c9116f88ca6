//! A bare Pod's own defaults: on every write, its pod spec's (see
//! `pod_spec`), requests copied from limits and `enableServiceLinks`
//! (1.20's `SetDefaults_Pod`, which pod templates do not get); on create,
//! what 1.20's admission plugins add (the `default` service account,
//! priority 0 and its preemption policy, the `DefaultTolerationSeconds`
//! tolerations) and the initial status with the QoS class its resources
//! give.

use serde_json::{Map, Value, json};

use super::pod_spec::pod_spec;
use super::{items_of, object_at, set_absent};
use crate::quantity;

/// How long a Pod stays bound to a node that is not ready or unreachable
/// (`DefaultTolerationSeconds`' default).
const DEFAULT_TOLERATION_SECONDS: i64 = 300;
/// The taints `DefaultTolerationSeconds` tolerates for that long.
const NODE_CONDITION_TAINTS: [&str; 2] = [
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
];

/// Every write of a Pod: its pod spec's defaults, requests from limits,
/// `enableServiceLinks: true`.
pub fn on_write(_def: &crate::resources::ResourceDef, pod: &mut Value) {
    default_requests(pod);
    if let Some(spec) = object_at(pod, &["spec"]) {
        set_absent(spec, &[("enableServiceLinks", json!(true))]);
        pod_spec(spec);
        // The DefaultTolerationSeconds admission plugin admits updates
        // too: tolerations it added and an update dropped come back.
        default_tolerations(spec);
    }
}

/// A new Pod: what the admission plugins add, then `Pending` with its QoS
/// class.
pub fn on_create(pod: &mut Value, _sequence: u64) {
    default_requests(pod);
    let qos = object_at(pod, &["spec"]).map_or("BestEffort", |spec| qos_class(spec));
    if let Some(spec) = object_at(pod, &["spec"]) {
        admit(spec);
    }
    if let Some(o) = pod.as_object_mut() {
        o.insert(
            "status".into(),
            json!({"phase": "Pending", "qosClass": qos}),
        );
    }
}

/// Each container's requests defaulted from its limits (what the QoS
/// class is computed from).
fn default_requests(pod: &mut Value) {
    if let Some(spec) = object_at(pod, &["spec"]) {
        for list in ["containers", "initContainers"] {
            items_of(spec, list).for_each(requests_from_limits);
        }
    }
}

/// What 1.20's admission plugins add to a new Pod's spec.
fn admit(spec: &mut Map<String, Value>) {
    let account = spec
        .get("serviceAccountName")
        .or_else(|| spec.get("serviceAccount"))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or("default")
        .to_string();
    spec.insert("serviceAccountName".into(), json!(account));
    spec.insert("serviceAccount".into(), json!(account));
    set_absent(
        spec,
        &[
            ("priority", json!(0)),
            ("preemptionPolicy", json!("PreemptLowerPriority")),
        ],
    );
    default_tolerations(spec);
}

/// Adds a `NoExecute` toleration of each node condition taint that no
/// toleration of the Pod tolerates already.
fn default_tolerations(spec: &mut Map<String, Value>) {
    let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
    let Some(list) = tolerations.as_array_mut() else {
        return;
    };
    for taint in NODE_CONDITION_TAINTS {
        let tolerated = list.iter().any(|t| {
            let key = t.get("key").and_then(Value::as_str).unwrap_or_default();
            let effect = t.get("effect").and_then(Value::as_str).unwrap_or_default();
            let exists = t.get("operator").and_then(Value::as_str) == Some("Exists");
            (key == taint || (key.is_empty() && exists))
                && (effect.is_empty() || effect == "NoExecute")
        });
        if !tolerated {
            list.push(
                json!({"key": taint, "operator": "Exists", "effect": "NoExecute",
                "tolerationSeconds": DEFAULT_TOLERATION_SECONDS}),
            );
        }
    }
}

/// A container's requests: each limit it does not request, requested.
fn requests_from_limits(c: &mut Map<String, Value>) {
    let Some(resources) = c.get_mut("resources").and_then(Value::as_object_mut) else {
        return;
    };
    let Some(limits) = resources.get("limits").and_then(Value::as_object).cloned() else {
        return;
    };
    let requests = resources.entry("requests").or_insert_with(|| json!({}));
    if let Some(requests) = requests.as_object_mut() {
        for (name, value) in limits {
            requests.entry(name).or_insert(value);
        }
    }
}

/// The QoS class of a pod spec's containers, as 1.20's `GetPodQOS`
/// computes it from their CPU and memory: `BestEffort` without any
/// request or limit, `Guaranteed` when every container limits both and
/// requests what it limits, else `Burstable`.
fn qos_class(spec: &Map<String, Value>) -> &'static str {
    let positive = |resources: Option<&Value>| -> Vec<(String, String)> {
        resources
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter(|(name, _)| *name == "cpu" || *name == "memory")
            .filter_map(|(name, q)| {
                let text = q
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| q.to_string());
                let canonical = quantity::canonical(&text).unwrap_or(text);
                (canonical != "0" && !canonical.starts_with('-')).then(|| (name.clone(), canonical))
            })
            .collect()
    };
    let (mut any, mut guaranteed) = (false, true);
    for list in ["containers", "initContainers"] {
        for c in spec
            .get(list)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let requests = positive(c.pointer("/resources/requests"));
            let limits = positive(c.pointer("/resources/limits"));
            any |= !requests.is_empty() || !limits.is_empty();
            let limited = |name: &str| limits.iter().any(|(n, _)| n == name);
            if !(limited("cpu") && limited("memory")) {
                guaranteed = false;
            }
            if requests.len() != limits.len() || requests.iter().any(|r| !limits.contains(r)) {
                guaranteed = false;
            }
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn created(containers: Value) -> Value {
        let mut pod = json!({"spec": {"containers": containers}});
        on_create(&mut pod, 1);
        let def = crate::builtins::registry().get("", "v1", "pods").unwrap();
        on_write(&def, &mut pod);
        pod
    }

    #[test]
    fn the_qos_class_follows_requests_and_limits() {
        let pod = created(json!([{"name": "c", "image": "x"}]));
        assert_eq!(
            pod["status"],
            json!({"phase": "Pending", "qosClass": "BestEffort"})
        );
        let pod = created(json!([{"name": "c", "image": "x",
            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]));
        assert_eq!(pod["status"]["qosClass"], "Guaranteed");
        assert_eq!(
            pod["spec"]["containers"][0]["resources"]["requests"],
            json!({"cpu": "1", "memory": "1Gi"})
        );
        let pod = created(json!([{"name": "c", "image": "x",
            "resources": {"requests": {"cpu": "100m"}}}]));
        assert_eq!(pod["status"]["qosClass"], "Burstable");
    }

    #[test]
    fn admission_adds_account_priority_and_tolerations() {
        let pod = created(json!([{"name": "c", "image": "x"}]));
        let spec = &pod["spec"];
        assert_eq!(spec["serviceAccountName"], "default");
        assert_eq!(spec["serviceAccount"], "default");
        assert_eq!(spec["priority"], 0);
        assert_eq!(spec["enableServiceLinks"], true);
        assert_eq!(spec["tolerations"].as_array().map(Vec::len), Some(2));
        let mut tolerant = json!({"spec": {"containers": [],
            "tolerations": [{"operator": "Exists"}]}});
        on_create(&mut tolerant, 1);
        assert_eq!(
            tolerant["spec"]["tolerations"],
            json!([{"operator": "Exists"}])
        );
    }
}
