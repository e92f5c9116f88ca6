//! Defaulting of built-in kinds (issue 32, item 1): what kube-apiserver
//! 1.20 adds to an object it stores, compared whole. Each scenario writes
//! a minimal object and records the answer, masking only what a server
//! picks (uids, cluster IPs, node ports); defaults apply on create, on
//! update, through patches and server-side apply, and in a dry run.
//!
//! The answers are those of the write itself, before the real cluster's
//! controllers act (a Deployment's revision annotation, a Job's start).

use integration_tests::scene::Reply;
use integration_tests::{Fallible, Scene};
use serde_json::{Value, json};

/// The collection of `plural` of `group/v1` in the scene's namespace.
fn path(s: &Scene, group: &str, plural: &str) -> String {
    let core = s.core(plural);
    if group.is_empty() {
        core
    } else {
        core.replace("/api/v1/", &format!("/apis/{group}/v1/"))
    }
}

/// `job` without its `metadata.generation`: 1.34 counts a Job's (and a
/// Pod's) generations, 1.20 does not.
fn without_generation(mut object: Value) -> Value {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("generation");
    }
    object
}

/// `value` with every occurrence of `secret` (a uid both servers pick)
/// in its strings replaced by `shown`.
fn mask(value: &Value, secret: &str, shown: &str) -> Value {
    match value {
        Value::String(s) if !secret.is_empty() => Value::String(s.replace(secret, shown)),
        Value::Array(items) => Value::Array(items.iter().map(|v| mask(v, secret, shown)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), mask(v, secret, shown)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// A Service's answer with what the server allocates (cluster IPs, node
/// ports) shown by whether it is there.
fn allocated_masked(reply: &Reply) -> Value {
    let mut body = reply.body.clone();
    if let Some(spec) = body.get_mut("spec").and_then(Value::as_object_mut) {
        for key in ["clusterIP", "clusterIPs"] {
            if let Some(v) = spec.get_mut(key)
                && v != &json!("None")
                && v != &json!(["None"])
            {
                *v = json!("<allocated>");
            }
        }
        for port in spec
            .get_mut("ports")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(p) = port.get_mut("nodePort") {
                *p = json!("<allocated>");
            }
        }
    }
    body
}

/// A Deployment that names only what is required, with a container
/// using every part of a pod spec that has defaults.
fn minimal_deployment(name: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "serviceAccount": "robot",
                    "containers": [{
                        "name": "web", "image": "nginx",
                        "ports": [{"containerPort": 80}, {"containerPort": 53, "protocol": "UDP"}],
                        "livenessProbe": {"httpGet": {"port": 80}},
                        "readinessProbe": {"tcpSocket": {"port": 80}, "periodSeconds": 5},
                        "lifecycle": {"preStop": {"httpGet": {"port": 80, "path": "/stop"}}},
                        "env": [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                        "volumeMounts": [{"name": "config", "mountPath": "/config"}]
                    }, {
                        "name": "pinned", "image": "registry.local:5000/tools/sidecar:1.2"
                    }],
                    "initContainers": [{"name": "init", "image": "busybox@sha256:0000000000000000000000000000000000000000000000000000000000000000"}],
                    "volumes": [
                        {"name": "config", "configMap": {"name": "config"}},
                        {"name": "secret", "secret": {"secretName": "secret"}},
                        {"name": "scratch"},
                        {"name": "host", "hostPath": {"path": "/var/log"}},
                        {"name": "info", "downwardAPI": {"items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}},
                        {"name": "all", "projected": {"sources": [
                            {"configMap": {"name": "config"}},
                            {"serviceAccountToken": {"path": "token"}}
                        ]}}
                    ]
                }
            }
        }
    })
}

/// A Deployment POSTed, dry-run and for real, comes back with 1.20's
/// defaults: replicas, strategy, history, deadline, and the whole pod
/// template's (pull policies by tag, termination message, protocols,
/// probes, volume modes, the service account alias).
pub async fn deployment_defaults(s: &mut Scene) -> Fallible {
    let deployments = path(s, "apps", "deployments");
    let dry = s
        .post(
            &format!("{deployments}?dryRun=All"),
            minimal_deployment("web"),
        )
        .await?
        .expect(201)?;
    s.record("a dry-run create", &dry.body);
    let created = s
        .post(&deployments, minimal_deployment("web"))
        .await?
        .expect(201)?;
    let spec = &created.body["spec"];
    assert_eq!(spec["replicas"], 1);
    assert_eq!(spec["strategy"]["rollingUpdate"]["maxSurge"], "25%");
    assert_eq!(
        spec["template"]["spec"]["containers"][0]["imagePullPolicy"],
        "Always"
    );
    assert_eq!(
        spec["template"]["spec"]["containers"][1]["imagePullPolicy"],
        "IfNotPresent"
    );
    s.record("a create", &created.body);

    // The minimal body again: defaulted to the stored spec, no new generation.
    let again = s
        .put(&format!("{deployments}/web"), minimal_deployment("web"))
        .await?
        .expect(200)?;
    assert_eq!(again.body["metadata"]["generation"], 1);
    s.record(
        "the minimal body put again",
        json!([again.body["metadata"]["generation"], again.body["spec"]]),
    );

    // Recreate has no rolling update; a strategy left out is defaulted again.
    let recreate = s
        .merge(
            &format!("{deployments}/web"),
            json!({"spec": {"strategy": {"type": "Recreate", "rollingUpdate": null},
                "revisionHistoryLimit": null}}),
        )
        .await?
        .expect(200)?;
    assert_eq!(
        recreate.body["spec"]["strategy"],
        json!({"type": "Recreate"})
    );
    s.record(
        "a merge patch to Recreate, history limit removed",
        json!([
            recreate.body["metadata"]["generation"],
            recreate.body["spec"]["strategy"],
            recreate.body["spec"]["revisionHistoryLimit"]
        ]),
    );

    // Server-side apply stores the defaults too.
    let applied = s
        .patch(
            &format!("{deployments}/applied?fieldManager=defaults"),
            "application/apply-patch+yaml",
            minimal_deployment("applied"),
        )
        .await?
        .expect(201)?;
    s.record("an apply", &applied.body);
    Ok(())
}

/// A StatefulSet: its policies, update strategy, replicas, history and
/// claim templates (as the real server encodes them).
pub async fn statefulset_defaults(s: &mut Scene) -> Fallible {
    let sets = path(s, "apps", "statefulsets");
    let set = |name: &str, strategy: Value| {
        json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name},
            "spec": {
                "serviceName": name,
                "selector": {"matchLabels": {"app": name}},
                "updateStrategy": strategy,
                "template": {"metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "db", "image": "postgres:13"}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                    "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]
            }
        })
    };
    let created = s.post(&sets, set("db", json!(null))).await?.expect(201)?;
    assert_eq!(created.body["spec"]["podManagementPolicy"], "OrderedReady");
    s.record("a create", &created.body);
    let partitioned = s
        .post(
            &sets,
            set(
                "partitioned",
                json!({"type": "RollingUpdate", "rollingUpdate": {}}),
            ),
        )
        .await?
        .expect(201)?;
    s.record(
        "an empty rolling update",
        &partitioned.body["spec"]["updateStrategy"],
    );
    let on_delete = s
        .post(&sets, set("manual", json!({"type": "OnDelete"})))
        .await?
        .expect(201)?;
    s.record("on delete", &on_delete.body["spec"]["updateStrategy"]);
    Ok(())
}

/// A Job: one completion at a time, 6 retries, and (unless it selects its
/// pods itself) a selector on its uid and its template's labels as its own.
pub async fn job_defaults(s: &mut Scene) -> Fallible {
    let jobs = path(s, "batch", "jobs");
    let job = json!({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "m", "image": "busybox:1"}]}}}
    });
    let created = s.post(&jobs, job).await?.expect(201)?;
    let uid = created.body["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(
        created.body["spec"]["selector"]["matchLabels"]["controller-uid"],
        uid.as_str()
    );
    s.record(
        "a create",
        without_generation(mask(&created.body, &uid, "<job-uid>")),
    );

    let manual = json!({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "manual", "labels": {"own": "label"}},
        "spec": {"manualSelector": true, "parallelism": 2,
            "selector": {"matchLabels": {"job": "manual"}},
            "template": {"metadata": {"labels": {"job": "manual"}},
                "spec": {"restartPolicy": "OnFailure",
                "containers": [{"name": "m", "image": "busybox:1"}]}}}
    });
    let manual = s.post(&jobs, manual).await?.expect(201)?;
    assert!(manual.body["spec"].get("completions").is_none());
    s.record("a manual selector", without_generation(manual.body));
    Ok(())
}

/// Services of each type: session affinity, protocols, target ports,
/// the traffic policy of node ports; what the server allocates, and what
/// a type change wipes or allocates.
pub async fn service_defaults(s: &mut Scene) -> Fallible {
    let services = s.core("services");
    let service = |name: &str, spec: Value| json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec});
    let dry = s
        .post(
            &format!("{services}?dryRun=All"),
            service(
                "web",
                json!({"selector": {"app": "web"}, "ports": [{"port": 80}]}),
            ),
        )
        .await?
        .expect(201)?;
    assert!(
        dry.body["spec"].get("clusterIP").is_none(),
        "a dry run allocates nothing"
    );
    s.record("a dry-run create", &dry.body);
    for (name, spec) in [
        (
            "web",
            json!({"selector": {"app": "web"}, "ports": [{"port": 80}]}),
        ),
        (
            "nodes",
            json!({"type": "NodePort", "ports": [
            {"name": "http", "port": 80, "targetPort": "http"},
            {"name": "dns", "port": 53, "protocol": "UDP"}]}),
        ),
        (
            "balanced",
            json!({"type": "LoadBalancer", "ports": [{"port": 443}]}),
        ),
        (
            "headless",
            json!({"clusterIP": "None", "sessionAffinity": "ClientIP", "ports": [{"port": 80}]}),
        ),
        (
            "external",
            json!({"type": "ExternalName", "externalName": "db.example.com"}),
        ),
    ] {
        let created = s.post(&services, service(name, spec)).await?.expect(201)?;
        s.record(format!("a create: {name}"), allocated_masked(&created));
    }

    let nodes = format!("{services}/nodes");
    let to_cluster_ip = s
        .merge(&nodes, json!({"spec": {"type": "ClusterIP"}}))
        .await?
        .expect(200)?;
    assert!(
        to_cluster_ip.body["spec"]["ports"][0]
            .get("nodePort")
            .is_none()
    );
    s.record("NodePort to ClusterIP", allocated_masked(&to_cluster_ip));
    let to_external = s
        .merge(
            &nodes,
            json!({"spec": {"type": "ExternalName", "externalName": "x.example.com"}}),
        )
        .await?
        .expect(200)?;
    assert!(to_external.body["spec"].get("clusterIP").is_none());
    s.record("ClusterIP to ExternalName", allocated_masked(&to_external));
    let back = s
        .merge(
            &nodes,
            json!({"spec": {"type": "NodePort", "externalName": null}}),
        )
        .await?
        .expect(200)?;
    assert!(back.body["spec"].get("clusterIP").is_some());
    s.record("ExternalName to NodePort", allocated_masked(&back));
    Ok(())
}

/// A bare Pod: its spec's defaults and its own (requests from limits,
/// service links), what admission adds (the `default` account, priority,
/// the tolerations of unready and unreachable nodes) and its QoS class.
/// The Pods do not mount a token (`automountServiceAccountToken: false`):
/// the token volume names a Secret of the real cluster's token controller.
pub async fn pod_defaults(s: &mut Scene) -> Fallible {
    let pods = s.core("pods");
    // Admission needs the namespace's default account, which a
    // controller makes shortly after the namespace.
    s.default_service_account().await?;
    let pod = |name: &str, resources: Value| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"automountServiceAccountToken": false,
                "tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                    "effect": "NoExecute", "tolerationSeconds": 60}],
                "containers": [{"name": "c", "image": "nginx:latest", "resources": resources}]}})
    };
    for (name, resources, qos) in [
        ("free", json!({}), "BestEffort"),
        (
            "capped",
            json!({"limits": {"cpu": "1", "memory": "1Gi"}}),
            "Guaranteed",
        ),
        (
            "asking",
            json!({"requests": {"cpu": "100m"}, "limits": {"memory": "1Gi"}}),
            "Burstable",
        ),
    ] {
        let created = s.post(&pods, pod(name, resources)).await?.expect(201)?;
        assert_eq!(created.body["status"]["qosClass"], qos);
        s.record(
            format!("a create: {name}"),
            without_generation(created.body),
        );
    }
    Ok(())
}

/// A NetworkPolicy names the policy types it has rules for, and its
/// ports' protocol.
pub async fn network_policy_defaults(s: &mut Scene) -> Fallible {
    let policies = path(s, "networking.k8s.io", "networkpolicies");
    let policy = |name: &str, spec: Value| {
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": name}, "spec": spec})
    };
    let ingress = s
        .post(
            &policies,
            policy(
                "in",
                json!({"podSelector": {}, "ingress": [{"ports": [{"port": 80}]}]}),
            ),
        )
        .await?
        .expect(201)?;
    s.record("ingress rules", &ingress.body["spec"]);
    let egress = s
        .post(
            &policies,
            policy(
                "out",
                json!({"podSelector": {}, "egress": [{"ports": [{"port": 53}]}]}),
            ),
        )
        .await?
        .expect(201)?;
    s.record("egress rules", &egress.body["spec"]);
    Ok(())
}
