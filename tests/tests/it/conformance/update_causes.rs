//! An update that both changes what may not change and breaks another
//! rule: 1.20 lists every cause at once, the immutable ones first for a
//! ConfigMap, a Secret or a Service, last for a Deployment or a Job.

use integration_tests::{Fallible, Scene};
use serde_json::{Value, json};

/// Each kind's combined answer.
pub async fn updates_list_immutable_and_field_causes(s: &mut Scene) -> Fallible {
    let ns = s.ns.clone();
    let template = |restart: &str| {
        json!({"metadata": {"labels": {"app": "web"}},
               "spec": {"restartPolicy": restart,
                        "containers": [{"name": "c", "image": "nginx:1"}]}})
    };
    let cases: Vec<(&str, String, Value, Value)> = vec![
        (
            "ConfigMap",
            s.core("configmaps"),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "u"},
                   "data": {"a": "b"}, "immutable": true}),
            json!({"data": {"a": "c", "b c": "d"}}),
        ),
        (
            "Secret",
            s.core("secrets"),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "u"},
                   "data": {"a": "Yg=="}}),
            json!({"type": "kubernetes.io/tls"}),
        ),
        (
            "Service",
            s.core("services"),
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "u"},
                   "spec": {"clusterIP": "None", "ports": [{"port": 80}]}}),
            json!({"spec": {"clusterIP": "", "sessionAffinity": "Bogus"}}),
        ),
        (
            "Deployment",
            format!("/apis/apps/v1/namespaces/{ns}/deployments"),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "u"},
                   "spec": {"selector": {"matchLabels": {"app": "web"}},
                            "template": template("Always")}}),
            json!({"spec": {"replicas": -1, "selector": {"matchLabels": {"x": "y"}}}}),
        ),
        (
            "Job",
            format!("/apis/batch/v1/namespaces/{ns}/jobs"),
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "u"},
                   "spec": {"template": {"spec": {"restartPolicy": "Never",
                            "containers": [{"name": "c", "image": "busybox"}]}}}}),
            json!({"spec": {"parallelism": -1, "completions": 5}}),
        ),
    ];
    for (kind, path, body, patch) in cases {
        s.post(&path, body).await?.expect(201)?;
        let reply = s.merge(&format!("{path}/u"), patch).await?.expect(422)?;
        s.record(
            kind,
            json!({"message": reply.body["message"], "causes": reply.body["details"]["causes"]}),
        );
    }
    Ok(())
}

/// Kinds whose update validation checks the new object twice (as on
/// create, then for the update) list each field cause twice.
pub async fn updates_list_field_causes_as_often_as_checked(s: &mut Scene) -> Fallible {
    let ns = s.ns.clone();
    let template = json!({"metadata": {"labels": {"app": "web"}},
                          "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}});
    let selector = json!({"matchLabels": {"app": "web"}});
    let cases: Vec<(&str, String, Value, Value)> = vec![
        (
            "DaemonSet",
            format!("/apis/apps/v1/namespaces/{ns}/daemonsets"),
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "u"},
                   "spec": {"selector": selector, "template": template}}),
            json!({"spec": {"minReadySeconds": -1}}),
        ),
        (
            "ReplicaSet",
            format!("/apis/apps/v1/namespaces/{ns}/replicasets"),
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "u"},
                   "spec": {"selector": selector, "template": template}}),
            json!({"spec": {"replicas": -1, "minReadySeconds": -1}}),
        ),
        (
            "PersistentVolumeClaim",
            s.core("persistentvolumeclaims"),
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "u"},
                   "spec": {"accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}}}}),
            json!({"spec": {"accessModes": ["Foo"]}}),
        ),
        (
            "Role",
            format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": "u"},
                   "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}),
            json!({"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": []}]}),
        ),
        (
            "ConfigMap (once)",
            s.core("configmaps"),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "u"}}),
            json!({"data": {"a b": "c"}}),
        ),
    ];
    for (kind, path, body, patch) in cases {
        s.post(&path, body).await?.expect(201)?;
        let reply = s.merge(&format!("{path}/u"), patch).await?.expect(422)?;
        let fields: Vec<Value> = reply.body["details"]["causes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| json!([c["field"], c["reason"]]))
            .collect();
        s.record(kind, fields);
    }
    Ok(())
}
