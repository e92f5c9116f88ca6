//! Defaults 1.20 writes deep in a pod template: a `resourceFieldRef`'s
//! `divisor: "0"` (a Quantity, never omitted) in an environment variable
//! and in a downward API volume, next to a `fieldRef`'s `apiVersion`.

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
