//! DaemonSets and ReplicaSets as 1.20 serves them: their specs validated
//! (a selector matching the template's labels, pods that restart
//! `Always`, a DaemonSet's update strategy), their selectors immutable,
//! and a DaemonSet's template generation, which `apps/v1` carries in the
//! annotation `deprecated.daemonset.template.generation`.

use integration_tests::{Fallible, Scene};
use serde_json::{Value, json};

/// An `apps/v1` object of `kind` named `name` selecting `app: web`, its
/// template labelled `labels`, `spec` merged over it.
fn set(kind: &str, name: &str, labels: Value, spec: Value) -> Value {
    let mut body = json!({"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    if let (Some(to), Some(from)) = (body["spec"].as_object_mut(), spec.as_object()) {
        to.extend(from.clone());
    }
    body
}

/// What a write answered: the code, and the object's generation and
/// annotations or the Status's message and causes.
fn outcome(reply: &integration_tests::Reply) -> Value {
    json!({
        "code": reply.code,
        "generation": reply.body["metadata"]["generation"],
        "annotations": reply.body["metadata"]["annotations"],
        "message": reply.body["message"],
        "causes": reply.body["details"]["causes"],
    })
}

/// Invalid DaemonSets and ReplicaSets are 422 with 1.20's causes; a
/// selector does not change; a DaemonSet's template generation follows
/// its template, whatever a client writes into the annotation.
pub async fn daemon_sets_and_replica_sets(s: &mut Scene) -> Fallible {
    let ns = s.ns.clone();
    let daemon_sets = format!("/apis/apps/v1/namespaces/{ns}/daemonsets");
    let replica_sets = format!("/apis/apps/v1/namespaces/{ns}/replicasets");
    let web = json!({"app": "web"});
    let invalid = [
        ("DaemonSet", "mismatch", json!({"app": "db"}), json!({})),
        (
            "DaemonSet",
            "restart",
            web.clone(),
            json!({"template": {"metadata": {"labels": web},
                   "spec": {"restartPolicy": "OnFailure",
                            "containers": [{"name": "c", "image": "nginx"}]}}}),
        ),
        (
            "DaemonSet",
            "unavailable",
            web.clone(),
            json!({"updateStrategy": {"type": "RollingUpdate",
                                      "rollingUpdate": {"maxUnavailable": 0}}}),
        ),
        (
            "DaemonSet",
            "percent",
            web.clone(),
            json!({"updateStrategy": {"rollingUpdate": {"maxUnavailable": "120%"}},
                   "minReadySeconds": -1}),
        ),
        ("ReplicaSet", "mismatch", json!({"app": "db"}), json!({})),
        (
            "ReplicaSet",
            "negative",
            web.clone(),
            json!({"replicas": -1}),
        ),
        ("ReplicaSet", "empty", web.clone(), json!({"selector": {}})),
    ];
    for (kind, name, labels, spec) in invalid {
        let path = if kind == "DaemonSet" {
            &daemon_sets
        } else {
            &replica_sets
        };
        let reply = s.post(path, set(kind, name, labels, spec)).await?;
        s.record(format!("{kind} {name}"), outcome(&reply));
    }
    // A DaemonSet's template generation.
    let created = s
        .post(&daemon_sets, set("DaemonSet", "ds", web.clone(), json!({})))
        .await?
        .expect(201)?;
    s.record("DaemonSet created", &created);
    let ds = format!("{daemon_sets}/ds");
    let patches = [
        (
            "template changed",
            json!({"spec": {"template": {"metadata": {"labels": {"app": "web", "v": "2"}}}}}),
        ),
        ("spec changed", json!({"spec": {"minReadySeconds": 3}})),
        (
            "annotation written",
            json!({"metadata": {"annotations": {"deprecated.daemonset.template.generation": "7"}}}),
        ),
        (
            "selector changed",
            json!({"spec": {"selector": {"matchLabels": {"app": "db"}},
                            "template": {"metadata": {"labels": {"app": "db"}}}}}),
        ),
    ];
    for (label, patch) in patches {
        let reply = s.merge(&ds, patch).await?;
        s.record(label, outcome(&reply));
    }
    // A template generation that is not a number does not decode.
    let mut bad = set("DaemonSet", "bad", web.clone(), json!({}));
    bad["metadata"]["annotations"] = json!({"deprecated.daemonset.template.generation": "x"});
    let reply = s.post(&daemon_sets, bad).await?;
    s.record(
        "created with a template generation not a number",
        outcome(&reply),
    );
    let mut seven = set("DaemonSet", "seven", web.clone(), json!({}));
    seven["metadata"]["annotations"] = json!({"deprecated.daemonset.template.generation": "7"});
    let reply = s.post(&daemon_sets, seven).await?;
    s.record("created with template generation 7", outcome(&reply));
    // A ReplicaSet's selector.
    s.post(
        &replica_sets,
        set("ReplicaSet", "rs", web.clone(), json!({})),
    )
    .await?
    .expect(201)?;
    let reply = s
        .merge(
            &format!("{replica_sets}/rs"),
            json!({"spec": {"selector": {"matchLabels": {"app": "db"}},
                            "template": {"metadata": {"labels": {"app": "db"}}}}}),
        )
        .await?
        .expect(422)?;
    s.record("ReplicaSet selector changed", outcome(&reply));
    Ok(())
}

/// A Deployment's generation follows its annotations as well as its spec
/// (1.20 copies them to its ReplicaSets), not its labels; a ReplicaSet's
/// and a DaemonSet's follow their spec only.
pub async fn generation_follows_deployment_annotations(s: &mut Scene) -> Fallible {
    let ns = s.ns.clone();
    let web = json!({"app": "web"});
    for (kind, plural) in [
        ("Deployment", "deployments"),
        ("ReplicaSet", "replicasets"),
        ("DaemonSet", "daemonsets"),
    ] {
        let path = format!("/apis/apps/v1/namespaces/{ns}/{plural}");
        s.post(&path, set(kind, "g", web.clone(), json!({})))
            .await?
            .expect(201)?;
        let target = format!("{path}/g");
        let mut seen = Vec::new();
        for patch in [
            json!({"metadata": {"labels": {"x": "y"}}}),
            json!({"metadata": {"annotations": {"note": "hi"}}}),
            json!({"metadata": {"annotations": {"note": null}}}),
            json!({"spec": {"minReadySeconds": 2}}),
        ] {
            let reply = s.merge(&target, patch).await?.expect(200)?;
            seen.push(reply.body["metadata"]["generation"].clone());
        }
        let status = s
            .merge(
                &format!("{target}/status"),
                json!({"metadata": {"annotations": {"by": "status"}}, "status": {}}),
            )
            .await?
            .expect(200)?;
        seen.push(status.body["metadata"]["generation"].clone());
        s.record(kind, seen);
    }
    Ok(())
}
