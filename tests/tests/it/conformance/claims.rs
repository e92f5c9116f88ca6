//! PersistentVolumeClaims (and NetworkPolicies, below) as 1.20 validates them: access modes and a
//! positive storage request required, supported modes only; and an update
//! changes nothing of an unbound claim's spec (the real message ends with
//! a Go diff of the two specs, not compared: the cause's field and the
//! message's first line are).

use integration_tests::{Fallible, Reply, Scene};
use serde_json::{Value, json};

/// A claim named `name` with `spec`.
fn claim(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
           "metadata": {"name": name}, "spec": spec})
}

/// A write's code, reason and causes, each message up to its first line.
fn outcome(reply: &Reply) -> Value {
    let causes: Vec<Value> = reply.body["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let message = c["message"].as_str().unwrap_or_default();
            json!({"field": c["field"], "reason": c["reason"],
                   "message": message.lines().next().unwrap_or_default()})
        })
        .collect();
    json!({"code": reply.code, "reason": reply.body["reason"], "causes": causes})
}

/// Invalid claims are 422; an unbound claim's spec does not change.
pub async fn claims_are_validated_and_immutable(s: &mut Scene) -> Fallible {
    let path = s.core("persistentvolumeclaims");
    for (label, spec) in [
        ("empty spec", json!({})),
        (
            "unknown mode, negative size",
            json!({"accessModes": ["Foo"], "resources": {"requests": {"storage": "-1"}}}),
        ),
        (
            "zero size, bad class, bad volume mode",
            json!({"accessModes": ["ReadWriteOnce"], "storageClassName": "Not_A_Name",
                   "volumeMode": "Disk", "resources": {"requests": {"storage": "0"}}}),
        ),
    ] {
        let reply = s.post(&path, claim("bad", spec)).await?;
        s.record(label, outcome(&reply));
    }
    s.post(
        &path,
        claim(
            "data",
            json!({"accessModes": ["ReadWriteOnce"],
                   "resources": {"requests": {"storage": "1Gi"}}}),
        ),
    )
    .await?
    .expect(201)?;
    let target = format!("{path}/data");
    for (label, patch) in [
        (
            "grow unbound",
            json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}}),
        ),
        (
            "access modes",
            json!({"spec": {"accessModes": ["ReadWriteMany"]}}),
        ),
        (
            "storage class",
            json!({"spec": {"storageClassName": "fast"}}),
        ),
        ("labels", json!({"metadata": {"labels": {"a": "b"}}})),
    ] {
        let reply = s.merge(&target, patch).await?;
        s.record(label, outcome(&reply));
    }
    Ok(())
}

/// NetworkPolicies as 1.20 validates them: ports, peers, IP blocks and
/// policy types.
pub async fn network_policies_are_validated(s: &mut Scene) -> Fallible {
    let path = format!(
        "/apis/networking.k8s.io/v1/namespaces/{}/networkpolicies",
        s.ns
    );
    let cases = [
        (
            "valid",
            json!({"podSelector": {}, "ingress": [{"ports": [{"port": 80}],
            "from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}]}]}),
        ),
        (
            "ports, CIDR, type",
            json!({"podSelector": {}, "ingress": [{
            "ports": [{"port": 0, "protocol": "XTCP"}], "from": [{"ipBlock": {"cidr": "nope"}}]}],
            "policyTypes": ["Foo"]}),
        ),
        (
            "peers",
            json!({"podSelector": {}, "egress": [{"ports": [{"port": "Bad_Name"}],
            "to": [{}, {"ipBlock": {"cidr": "10.0.0.0/16",
                                    "except": ["10.0.0.0/8", "11.0.0.0/24"]}},
                   {"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}}]}]}),
        ),
        (
            "three types",
            json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress", "Foo"]}),
        ),
        (
            "two unknown types",
            json!({"podSelector": {}, "policyTypes": ["Foo", "Bar"]}),
        ),
    ];
    for (i, (label, spec)) in cases.into_iter().enumerate() {
        let reply = s
            .post(
                &path,
                json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                       "metadata": {"name": format!("p{i}")}, "spec": spec}),
            )
            .await?;
        let seen = if reply.code == 201 {
            json!({"code": reply.code, "spec": reply.body["spec"]})
        } else {
            // 1.20 names the kind NetworkPolicy.extensions, as it does an
            // Ingress (VERSION_INGRESS_INVALID_GROUP): the causes say the rest.
            json!({"code": reply.code, "causes": reply.body["details"]["causes"]})
        };
        s.record(label, seen);
    }
    Ok(())
}
