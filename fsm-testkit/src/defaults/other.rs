//! The small defaults of the other kinds served: a PodDisruptionBudget's
//! status as the real server encodes a new one, a NetworkPolicy's policy
//! types and port protocols (1.20's `SetDefaults_NetworkPolicy`).

use serde_json::{Value, json};

use super::apps::empty_status;
use super::{items_of, object_at, set_absent};
use crate::resources::ResourceDef;

/// Every write of a PodDisruptionBudget: a status of zeros until the
/// disruption controller reports.
pub fn pod_disruption_budget(_def: &ResourceDef, pdb: &mut Value) {
    empty_status(
        pdb,
        json!({"currentHealthy": 0, "desiredHealthy": 0, "disruptionsAllowed": 0, "expectedPods": 0}),
    );
}

/// Every write of a NetworkPolicy: its ports' protocol `TCP`, and its
/// policy types, when it names none: `Ingress`, and `Egress` if it has
/// egress rules.
pub fn network_policy(_def: &ResourceDef, policy: &mut Value) {
    let Some(spec) = object_at(policy, &["spec"]) else {
        return;
    };
    for direction in ["ingress", "egress"] {
        for rule in items_of(spec, direction) {
            items_of(rule, "ports").for_each(|p| set_absent(p, &[("protocol", json!("TCP"))]));
        }
    }
    let named = spec
        .get("policyTypes")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty());
    if !named {
        let egress = spec
            .get("egress")
            .and_then(Value::as_array)
            .is_some_and(|e| !e.is_empty());
        let types = if egress {
            json!(["Ingress", "Egress"])
        } else {
            json!(["Ingress"])
        };
        spec.insert("policyTypes".into(), types);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_types_and_protocols() {
        let def = crate::builtins::registry()
            .get("networking.k8s.io", "v1", "networkpolicies")
            .unwrap()
            .clone();
        let mut p = json!({"spec": {"podSelector": {}, "egress": [{"ports": [{"port": 53}]}]}});
        network_policy(&def, &mut p);
        assert_eq!(p["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
        assert_eq!(p["spec"]["egress"][0]["ports"][0]["protocol"], "TCP");
        let mut q = json!({"spec": {"podSelector": {}}});
        network_policy(&def, &mut q);
        assert_eq!(q["spec"]["policyTypes"], json!(["Ingress"]));
    }

    #[test]
    fn a_new_budget_has_a_status_of_zeros() {
        let def = crate::builtins::registry()
            .get("policy", "v1", "poddisruptionbudgets")
            .unwrap()
            .clone();
        let mut pdb = json!({"spec": {"minAvailable": 1}});
        pod_disruption_budget(&def, &mut pdb);
        assert_eq!(pdb["status"]["disruptionsAllowed"], 0);
    }
}
