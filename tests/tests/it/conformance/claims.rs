//! PersistentVolumeClaims as 1.20 validates them: access modes and a
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
