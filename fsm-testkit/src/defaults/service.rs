//! A Service's defaults (1.20's `SetDefaults_Service`), how its strategy
//! reconciles `clusterIP` with `clusterIPs` and wipes what a new type no
//! longer uses (`NormalizeClusterIPs`, `dropTypeDependentFields`), and
//! what its storage allocates: a cluster IP and node ports.

use serde_json::{Map, Value, json};

use super::apps::empty_status;
use super::{items_of, object_at, set_absent};
use crate::resources::ResourceDef;

/// How long `ClientIP` session affinity sticks by default (3 hours).
const CLIENT_IP_AFFINITY_SECONDS: i64 = 10_800;
/// The first port of the node port range.
const NODE_PORT_BASE: u64 = 30_000;
/// The size of the node port range (30000-32767).
const NODE_PORT_RANGE: u64 = 2_768;

/// Every write of a Service.
pub fn on_write(_def: &ResourceDef, service: &mut Value) {
    if let Some(spec) = object_at(service, &["spec"]) {
        set_absent(
            spec,
            &[
                ("sessionAffinity", json!("None")),
                ("type", json!("ClusterIP")),
            ],
        );
        match spec.get("sessionAffinity").and_then(Value::as_str) {
            Some("None") => {
                spec.remove("sessionAffinityConfig");
            }
            Some("ClientIP") => {
                let timeout = spec
                    .get("sessionAffinityConfig")
                    .and_then(|c| c.pointer("/clientIP/timeoutSeconds"));
                if timeout.is_none_or(Value::is_null) {
                    spec.insert(
                        "sessionAffinityConfig".into(),
                        json!({"clientIP": {"timeoutSeconds": CLIENT_IP_AFFINITY_SECONDS}}),
                    );
                }
            }
            _ => {}
        }
        for port in items_of(spec, "ports") {
            set_absent(port, &[("protocol", json!("TCP"))]);
            let unset = match port.get("targetPort") {
                None | Some(Value::Null) => true,
                Some(Value::Number(n)) => n.as_i64() == Some(0),
                Some(Value::String(s)) => s.is_empty(),
                Some(_) => false,
            };
            if unset && let Some(p) = port.get("port").cloned() {
                port.insert("targetPort".into(), p);
            }
        }
        if needs_node_ports(spec) {
            set_absent(spec, &[("externalTrafficPolicy", json!("Cluster"))]);
        }
    }
    empty_status(service, json!({"loadBalancer": {}}));
}

/// A new Service: `clusterIPs` from a `clusterIP` sent alone.
pub fn on_create(service: &mut Value, _sequence: u64) {
    if let Some(spec) = object_at(service, &["spec"])
        && let Some(ip) = text(spec, "clusterIP")
        && ips(spec).is_empty()
    {
        spec.insert("clusterIPs".into(), json!([ip]));
    }
}

/// An update of a Service from `old`: `clusterIPs` follow a changed or
/// cleared `clusterIP` (or are kept when a client that knows only
/// `clusterIP` leaves them out), and what the new type does not use and
/// the client did not change is wiped: the cluster IPs when it becomes
/// `ExternalName`, the node ports and `externalTrafficPolicy` when it
/// stops being `NodePort` or `LoadBalancer`.
pub fn on_update(service: &mut Value, old: &Value) {
    let (Some(spec), Some(old_spec)) = (
        object_at(service, &["spec"]),
        old.get("spec").and_then(Value::as_object),
    ) else {
        return;
    };
    let (old_ip, old_ips) = (text(old_spec, "clusterIP"), ips(old_spec));
    if !old_ips.is_empty() && ips(spec).is_empty() && text(spec, "clusterIP") == old_ip {
        spec.insert("clusterIPs".into(), json!(old_ips));
    }
    let new_ip = text(spec, "clusterIP");
    if new_ip != old_ip && ips(spec) == old_ips {
        match new_ip {
            None if old_ip.is_some() => {
                spec.remove("clusterIPs");
            }
            Some(ip) => {
                spec.insert("clusterIPs".into(), json!([ip]));
            }
            None => {}
        }
    }
    if needs_cluster_ip(old_spec)
        && !needs_cluster_ip(spec)
        && text(spec, "clusterIP") == old_ip
        && ips(spec) == old_ips
    {
        spec.remove("clusterIP");
        spec.remove("clusterIPs");
    }
    if needs_node_ports(old_spec) && !needs_node_ports(spec) {
        if node_ports(spec) == node_ports(old_spec) {
            for port in items_of(spec, "ports") {
                port.remove("nodePort");
            }
        }
        if spec.get("externalTrafficPolicy") == old_spec.get("externalTrafficPolicy") {
            spec.remove("externalTrafficPolicy");
        }
    }
}

/// What a Service's storage allocates on a write that is not a dry run:
/// a cluster IP for a new Service (or one no longer `ExternalName`)
/// without one, and a node port for each port of a `NodePort` or
/// `LoadBalancer` Service without one; both from `sequence`, a count of
/// writes.
pub fn allocate(service: &mut Value, old: Option<&Value>, sequence: u64) {
    let was_external = old
        .and_then(|o| o.get("spec"))
        .and_then(Value::as_object)
        .is_some_and(|s| !needs_cluster_ip(s));
    let Some(spec) = object_at(service, &["spec"]) else {
        return;
    };
    if (old.is_none() || was_external)
        && needs_cluster_ip(spec)
        && text(spec, "clusterIP").is_none()
    {
        let ip = cluster_ip(sequence);
        spec.insert("clusterIP".into(), json!(ip));
        spec.insert("clusterIPs".into(), json!([ip]));
    }
    if needs_node_ports(spec) {
        for (i, port) in items_of(spec, "ports").enumerate() {
            if port.get("nodePort").and_then(Value::as_u64).unwrap_or(0) == 0 {
                let offset = (sequence * 7 + i as u64) % NODE_PORT_RANGE;
                port.insert("nodePort".into(), json!(NODE_PORT_BASE + offset));
            }
        }
    }
}

/// The cluster IP of the `sequence`th allocation.
fn cluster_ip(sequence: u64) -> String {
    format!("10.96.{}.{}", (sequence / 250) % 250, 1 + sequence % 250)
}

/// The non-empty string at `key`.
fn text(spec: &Map<String, Value>, key: &str) -> Option<String> {
    spec.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// `clusterIPs`.
fn ips(spec: &Map<String, Value>) -> Vec<String> {
    spec.get("clusterIPs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

/// The ports' node ports.
fn node_ports(spec: &Map<String, Value>) -> Vec<Value> {
    spec.get("ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|p| p.get("nodePort").cloned().unwrap_or(Value::Null))
        .collect()
}

/// Whether the type has a cluster IP (all but `ExternalName`).
fn needs_cluster_ip(spec: &Map<String, Value>) -> bool {
    spec.get("type").and_then(Value::as_str) != Some("ExternalName")
}

/// Whether the type has node ports.
fn needs_node_ports(spec: &Map<String, Value>) -> bool {
    matches!(
        spec.get("type").and_then(Value::as_str),
        Some("NodePort" | "LoadBalancer")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def() -> ResourceDef {
        crate::builtins::registry()
            .get("", "v1", "services")
            .unwrap()
            .as_ref()
            .clone()
    }

    fn created(mut svc: Value, sequence: u64) -> Value {
        on_create(&mut svc, sequence);
        on_write(&def(), &mut svc);
        allocate(&mut svc, None, sequence);
        svc
    }

    fn updated(old: &Value, mut svc: Value) -> Value {
        on_write(&def(), &mut svc);
        on_update(&mut svc, old);
        allocate(&mut svc, Some(old), 9);
        svc
    }

    #[test]
    fn a_new_service_is_defaulted_and_gets_an_ip() {
        let svc = created(json!({"spec": {"ports": [{"port": 80}]}}), 3);
        assert_eq!(
            svc["spec"],
            json!({"ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}],
                "sessionAffinity": "None", "type": "ClusterIP",
                "clusterIP": "10.96.0.4", "clusterIPs": ["10.96.0.4"]})
        );
        assert_eq!(svc["status"], json!({"loadBalancer": {}}));
        let headless = created(
            json!({"spec": {"clusterIP": "None", "sessionAffinity": "ClientIP"}}),
            1,
        );
        assert_eq!(headless["spec"]["clusterIPs"], json!(["None"]));
        assert_eq!(
            headless["spec"]["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"],
            10_800
        );
        let node_port = created(
            json!({"spec": {"type": "NodePort", "ports": [{"port": 80}]}}),
            1,
        );
        assert_eq!(node_port["spec"]["externalTrafficPolicy"], "Cluster");
        assert!(
            node_port["spec"]["ports"][0]["nodePort"]
                .as_u64()
                .is_some_and(|p| (30_000..32_768).contains(&p))
        );
    }

    #[test]
    fn a_type_change_wipes_what_the_new_type_does_not_use() {
        let node_port = created(
            json!({"spec": {"type": "NodePort", "ports": [{"port": 80}]}}),
            1,
        );
        let mut back = node_port.clone();
        back["spec"]["type"] = json!("ClusterIP");
        let back = updated(&node_port, back);
        assert!(back["spec"]["ports"][0].get("nodePort").is_none());
        assert!(back["spec"].get("externalTrafficPolicy").is_none());
        assert_eq!(back["spec"]["clusterIP"], node_port["spec"]["clusterIP"]);
        let mut external = back.clone();
        external["spec"]["type"] = json!("ExternalName");
        let external = updated(&back, external);
        assert!(external["spec"].get("clusterIP").is_none());
        let mut again = external.clone();
        again["spec"]["type"] = json!("ClusterIP");
        let again = updated(&external, again);
        assert_eq!(again["spec"]["clusterIP"], "10.96.0.10");
    }

    #[test]
    fn cluster_ips_follow_cluster_ip() {
        let svc = created(json!({"spec": {"ports": [{"port": 80}]}}), 1);
        let mut without = svc.clone();
        without["spec"]
            .as_object_mut()
            .unwrap()
            .remove("clusterIPs");
        assert_eq!(
            updated(&svc, without)["spec"]["clusterIPs"],
            svc["spec"]["clusterIPs"]
        );
        let mut changed = svc.clone();
        changed["spec"]["clusterIP"] = json!("10.0.0.9");
        assert_eq!(
            updated(&svc, changed)["spec"]["clusterIPs"],
            json!(["10.0.0.9"])
        );
        let mut cleared = svc.clone();
        cleared["spec"].as_object_mut().unwrap().remove("clusterIP");
        assert!(updated(&svc, cleared)["spec"].get("clusterIPs").is_none());
    }
}
