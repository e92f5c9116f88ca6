//! How often, and in what order, 1.20 lists the causes it finds in an
//! object's metadata: on create once, labels and annotations before owner
//! references and finalizers; on update as many times as its checks run
//! (every update's common checks, then the kind's own update validation,
//! which differs by kind).

use integration_tests::{Fallible, Scene};
use serde_json::{Value, json};

/// Invalid labels, annotations and finalizers.
fn bad_metadata() -> Value {
    json!({"labels": {"a b": "c"}, "annotations": {"x y": "z"}, "finalizers": ["no good"]})
}

/// A pod template whose labels are `app: web`.
fn template() -> Value {
    json!({"metadata": {"labels": {"app": "web"}},
           "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
}

/// What an update's 422 says: its causes' fields and messages.
fn causes(reply: &integration_tests::Reply) -> Value {
    json!({
        "code": reply.code,
        "reason": reply.body["reason"],
        "message": reply.body["message"],
        "causes": reply.body["details"]["causes"],
    })
}

/// Create: one pass, in `ValidateObjectMeta`'s order. Update: the causes of
/// each kind's checks, repeated as by 1.20 (a ConfigMap's six times for a
/// label, a Deployment's three).
pub async fn metadata_causes_order_and_repeats(s: &mut Scene) -> Fallible {
    let ns = s.ns.clone();
    let mut created = json!({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": bad_metadata()});
    created["metadata"]["name"] = json!("bad");
    let reply = s.post(&s.core("configmaps"), created).await?.expect(422)?;
    s.record("create", causes(&reply));
    let selector = json!({"matchLabels": {"app": "web"}});
    let kinds: Vec<(String, Value)> = vec![
        (
            s.core("configmaps"),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "m"}}),
        ),
        (
            s.core("services"),
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "m"},
                   "spec": {"ports": [{"port": 80}]}}),
        ),
        (
            format!("/apis/apps/v1/namespaces/{ns}/deployments"),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "m"},
                   "spec": {"selector": selector, "template": template()}}),
        ),
        (
            format!("/apis/apps/v1/namespaces/{ns}/daemonsets"),
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "m"},
                   "spec": {"selector": selector, "template": template()}}),
        ),
        (
            format!("/apis/batch/v1/namespaces/{ns}/jobs"),
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "m"},
                   "spec": {"template": {"spec": {"restartPolicy": "Never",
                            "containers": [{"name": "c", "image": "busybox"}]}}}}),
        ),
        (
            s.core("persistentvolumeclaims"),
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "m"},
                   "spec": {"accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}}}}),
        ),
        (
            format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": "m"}, "rules": []}),
        ),
    ];
    for (path, body) in kinds {
        let kind = body["kind"].as_str().unwrap_or_default().to_owned();
        s.post(&path, body).await?.expect(201)?;
        let reply = s
            .merge(&format!("{path}/m"), json!({"metadata": bad_metadata()}))
            .await?
            .expect(422)?;
        s.record(format!("{kind} update"), causes(&reply));
    }
    Ok(())
}
