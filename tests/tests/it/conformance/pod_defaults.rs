//! Defaults 1.20 writes deep in a pod template: a `resourceFieldRef`'s
//! `divisor: "0"` (a Quantity, never omitted) in an environment variable
//! and in a downward API volume, next to a `fieldRef`'s `apiVersion`; and
//! what an update of a Pod may change.

use integration_tests::{Fallible, Scene};
use serde_json::json;

/// A Deployment's template with resource and field references.
pub async fn resource_field_refs_get_a_divisor(s: &mut Scene) -> Fallible {
    let path = format!("/apis/apps/v1/namespaces/{}/deployments", s.ns);
    let created = s
        .post(
            &path,
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                "spec": {"selector": {"matchLabels": {"app": "d"}},
                    "template": {"metadata": {"labels": {"app": "d"}}, "spec": {
                        "containers": [{"name": "c", "image": "nginx:1", "env": [
                            {"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                            {"name": "B", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
                            {"name": "C", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory",
                                                                             "divisor": "1Mi"}}}]}],
                        "volumes": [{"name": "info", "downwardAPI": {"items": [
                            {"path": "cpu", "resourceFieldRef": {"containerName": "c",
                                                                 "resource": "requests.cpu"}},
                            {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}}]}}}}),
        )
        .await?
        .expect(201)?;
    let spec = &created.body["spec"]["template"]["spec"];
    s.record("env", &spec["containers"][0]["env"]);
    s.record("volumes", &spec["volumes"]);
    Ok(())
}

/// What an update of a Pod may change, as 1.20 allows it: images, a
/// shorter deadline, tolerations (the admission plugin's defaults come
/// back); not the rest of the spec, nor the number of containers. The
/// real `spec` cause ends with a Go diff: only its first line is compared.
pub async fn pod_updates_change_images_deadlines_and_tolerations(s: &mut Scene) -> Fallible {
    let path = s.core("pods");
    // A Pod needs its namespace's default account (no token mounted).
    s.default_service_account().await?;
    s.post(
        &path,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
               "spec": {"automountServiceAccountToken": false,
                        "containers": [{"name": "c", "image": "nginx:1"}]}}),
    )
    .await?
    .expect(201)?;
    let target = format!("{path}/p");
    let patches = [
        (
            "restart policy",
            json!({"spec": {"restartPolicy": "Never"}}),
        ),
        (
            "image",
            json!({"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}),
        ),
        (
            "first deadline",
            json!({"spec": {"activeDeadlineSeconds": 10}}),
        ),
        (
            "longer deadline",
            json!({"spec": {"activeDeadlineSeconds": 20}}),
        ),
        (
            "no deadline",
            json!({"spec": {"activeDeadlineSeconds": null}}),
        ),
        (
            "tolerations",
            json!({"spec": {"tolerations": [{"key": "x", "operator": "Exists"}]}}),
        ),
    ];
    for (label, patch) in patches {
        let reply = s
            .patch(&target, "application/strategic-merge-patch+json", patch)
            .await?;
        let seen = if reply.code == 200 {
            json!({"code": 200, "image": reply.body["spec"]["containers"][0]["image"],
                   "deadline": reply.body["spec"]["activeDeadlineSeconds"],
                   "tolerations": reply.body["spec"]["tolerations"]})
        } else {
            let causes: Vec<serde_json::Value> = reply.body["details"]["causes"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| {
                    let message = c["message"].as_str().unwrap_or_default();
                    json!([c["field"], message.lines().next().unwrap_or_default()])
                })
                .collect();
            json!({"code": reply.code, "causes": causes})
        };
        s.record(label, seen);
    }
    let reply = s
        .patch(
            &target,
            "application/json-patch+json",
            json!([{"op": "add", "path": "/spec/containers/-",
                    "value": {"name": "d", "image": "busybox"}}]),
        )
        .await?;
    s.record("another container", &reply);
    Ok(())
}
