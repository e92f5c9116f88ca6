//! The status subresource of the workloads, as 1.20 validates what a
//! controller writes there: counts not negative, not above
//! `status.replicas`, available not above ready, a collision count not
//! decremented; the spec and labels sent with it ignored.

use integration_tests::{Fallible, Scene};
use serde_json::{Value, json};

/// A pod template labelled `app: web`.
fn template(restart: &str) -> Value {
    json!({"metadata": {"labels": {"app": "web"}},
           "spec": {"restartPolicy": restart,
                    "containers": [{"name": "c", "image": "nginx"}]}})
}

/// What a status write answered.
fn outcome(reply: &integration_tests::Reply) -> Value {
    json!({
        "code": reply.code,
        "status": if reply.code == 200 { reply.body["status"].clone() } else { Value::Null },
        "spec.replicas": reply.body["spec"]["replicas"],
        "written label": reply.body["metadata"]["labels"]["written"],
        "message": reply.body["message"],
        "causes": reply.body["details"]["causes"],
    })
}

/// Each workload kind's status writes, valid and not.
pub async fn workload_status_is_validated(s: &mut Scene) -> Fallible {
    let ns = s.ns.clone();
    let selector = json!({"matchLabels": {"app": "web"}});
    let kinds = [
        (
            "apps/v1",
            "Deployment",
            "deployments",
            json!({"selector": selector, "template": template("Always")}),
        ),
        (
            "apps/v1",
            "StatefulSet",
            "statefulsets",
            json!({"serviceName": "web", "selector": selector, "template": template("Always")}),
        ),
        (
            "apps/v1",
            "ReplicaSet",
            "replicasets",
            json!({"selector": selector, "template": template("Always")}),
        ),
        (
            "apps/v1",
            "DaemonSet",
            "daemonsets",
            json!({"selector": selector, "template": template("Always")}),
        ),
        (
            "batch/v1",
            "Job",
            "jobs",
            json!({"template": template("Never")}),
        ),
    ];
    let statuses = [
        (
            "counts",
            json!({"replicas": 2, "readyReplicas": 5, "availableReplicas": -1,
                          "currentReplicas": -1, "updatedReplicas": 3,
                          "fullyLabeledReplicas": 4, "numberReady": -2, "active": -1,
                          "succeeded": -2, "observedGeneration": -1}),
        ),
        (
            "available over ready",
            json!({"replicas": 3, "readyReplicas": 1,
                                        "availableReplicas": 2}),
        ),
        ("collision count", json!({"collisionCount": 2})),
        ("collision count decremented", json!({"collisionCount": 1})),
        (
            "valid",
            json!({"replicas": 1, "readyReplicas": 1, "availableReplicas": 1,
                         "currentNumberScheduled": 1, "active": 1}),
        ),
    ];
    for (api_version, kind, plural, spec) in kinds {
        let path = format!("/apis/{api_version}/namespaces/{ns}/{plural}");
        s.post(
            &path,
            json!({"apiVersion": api_version, "kind": kind,
                             "metadata": {"name": "w"}, "spec": spec}),
        )
        .await?
        .expect(201)?;
        for (label, status) in &statuses {
            // 1.20's StatefulSet status has no availableReplicas (1.22).
            let mut status = status.clone();
            if kind == "StatefulSet"
                && let Some(map) = status.as_object_mut()
            {
                map.remove("availableReplicas");
            }
            let reply = s
                .merge(
                    &format!("{path}/w/status"),
                    json!({"metadata": {"labels": {"written": "with-status"}},
                           "spec": {"replicas": 9}, "status": status}),
                )
                .await?;
            s.record(format!("{kind} {label}"), outcome(&reply));
        }
    }
    Ok(())
}
