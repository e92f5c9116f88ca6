//! The `scale` subresource (issue 32, item 5), as `kubectl scale` and a
//! HorizontalPodAutoscaler use it: the `autoscaling/v1` `Scale` of
//! Deployments, StatefulSets and ReplicaSets, and of custom resources
//! whose CRD declares `subresources.scale` (their paths, a missing
//! replicas field), read, replaced and patched; its refusals (negative
//! replicas, a stale resourceVersion, another name, a verb it does not
//! take, a kind without it) and its place in discovery.

use http::Method;
use integration_tests::{Fallible, Scene};
use serde_json::{Value, json};

/// A workload of `kind` named `web` with `replicas`.
fn workload(kind: &str, replicas: i64) -> Value {
    let mut spec = json!({
        "replicas": replicas,
        "selector": {"matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "edge"]}]},
        "template": {"metadata": {"labels": {"app": "web", "tier": "front"}},
            "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}},
    });
    if kind == "StatefulSet" {
        spec["serviceName"] = json!("web");
    }
    json!({"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": "web"}, "spec": spec})
}

/// What a write of a Scale answered: the code and, for an error, its
/// `Status` without the message's printed values.
fn outcome(reply: &integration_tests::Reply) -> Value {
    if reply.code < 300 {
        return json!({"code": reply.code, "scale": reply.body});
    }
    json!({"code": reply.code, "status": reply.body})
}

/// The Scale of each built-in workload; a Deployment scaled by PUT, merge
/// and JSON patch (its generation follows), and every refusal.
pub async fn scale_of_workloads(s: &mut Scene) -> Fallible {
    let apps = s.core("").replace("/api/v1/", "/apis/apps/v1/");
    for (kind, plural) in [
        ("Deployment", "deployments"),
        ("StatefulSet", "statefulsets"),
        ("ReplicaSet", "replicasets"),
    ] {
        s.post(&format!("{apps}{plural}"), workload(kind, 2))
            .await?
            .expect(201)?;
        let scale = s
            .get(&format!("{apps}{plural}/web/scale"))
            .await?
            .expect(200)?;
        assert_eq!(scale.body["kind"], "Scale");
        assert_eq!(scale.body["spec"]["replicas"], 2);
        s.record(format!("{plural} scale"), &scale.body);
    }
    let deployment = format!("{apps}deployments/web");
    let scale_path = format!("{deployment}/scale");
    let current = s.get(&scale_path).await?.expect(200)?;

    let no_namespace = s
        .put(
            &scale_path,
            json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                "metadata": {"name": "web"}, "spec": {"replicas": -3}}),
        )
        .await?
        .expect(422)?;
    s.record("a put without namespace", outcome(&no_namespace));
    let put = s
        .put(
            &scale_path,
            json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                "metadata": {"name": "web", "namespace": s.ns, "resourceVersion": current.rv()},
                "spec": {"replicas": 3}}),
        )
        .await?
        .expect(200)?;
    s.record("put", outcome(&put));
    let scaled = s.get(&deployment).await?.expect(200)?;
    assert_eq!(scaled.body["spec"]["replicas"], 3);
    s.record(
        "the deployment after put",
        json!([
            scaled.body["spec"]["replicas"],
            scaled.body["metadata"]["generation"]
        ]),
    );

    let merged = s
        .merge(&scale_path, json!({"spec": {"replicas": 0}}))
        .await?
        .expect(200)?;
    assert_eq!(merged.body["spec"], json!({}), "0 replicas are left out");
    s.record("merge patch", outcome(&merged));
    let patched = s
        .patch(
            &scale_path,
            "application/json-patch+json",
            json!([{"op": "add", "path": "/spec/replicas", "value": 4}]),
        )
        .await?
        .expect(200)?;
    s.record("json patch", outcome(&patched));
    let strategic = s
        .patch(
            &scale_path,
            "application/strategic-merge-patch+json",
            json!({"spec": {"replicas": 5}}),
        )
        .await?
        .expect(200)?;
    s.record("strategic merge patch", outcome(&strategic));

    let negative = s
        .merge(&scale_path, json!({"spec": {"replicas": -1}}))
        .await?
        .expect(422)?;
    s.record("negative replicas", outcome(&negative));
    let stale = s
        .put(
            &scale_path,
            json!({"metadata": {"name": "web", "namespace": s.ns, "resourceVersion": current.rv()},
                "spec": {"replicas": 1}}),
        )
        .await?
        .expect(409)?;
    s.record("a stale resourceVersion", outcome(&stale));
    let other = s
        .put(
            &scale_path,
            json!({"metadata": {"name": "db", "namespace": s.ns}, "spec": {"replicas": 1}}),
        )
        .await?
        .expect(400)?;
    s.record("another name", outcome(&other));
    let elsewhere = s
        .put(
            &scale_path,
            json!({"metadata": {"name": "web", "namespace": "elsewhere"}, "spec": {"replicas": 1}}),
        )
        .await?;
    s.record("another namespace", outcome(&elsewhere));
    let wrong_kind = s
        .put(
            &scale_path,
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}),
        )
        .await?;
    s.record(
        "a body of another kind",
        json!([wrong_kind.code, wrong_kind.reason()]),
    );
    let deleted = s.delete(&scale_path).await?;
    s.record("delete of a scale", json!([deleted.code, deleted.reason()]));
    let missing = s.get(&format!("{apps}deployments/none/scale")).await?;
    s.record("the scale of a missing deployment", outcome(&missing));
    let missing_put = s
        .put(
            &format!("{apps}deployments/none/scale"),
            json!({"metadata": {"name": "none", "namespace": s.ns}, "spec": {"replicas": 1}}),
        )
        .await?;
    s.record(
        "a put of a missing deployment's scale",
        outcome(&missing_put),
    );
    let missing_patch = s
        .merge(
            &format!("{apps}deployments/none/scale"),
            json!({"spec": {"replicas": 1}}),
        )
        .await?;
    s.record(
        "a patch of a missing deployment's scale",
        outcome(&missing_patch),
    );
    s.post(
        &s.core("configmaps"),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web"}}),
    )
    .await?
    .expect(201)?;
    let no_scale = s
        .get(&format!("{}/web/scale", s.core("configmaps")))
        .await?;
    s.record("a kind without scale", no_scale.code);

    let discovery = s.get("/apis/apps/v1").await?.expect(200)?;
    let scales: Vec<Value> = discovery.body["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| {
            let name = r["name"].as_str().unwrap_or_default();
            name.starts_with("deployments") || name.ends_with("/scale")
        })
        .map(|r| json!([r["name"], r["group"], r["version"], r["kind"], r["verbs"]]))
        .collect();
    s.record("discovery", scales);
    Ok(())
}

/// A CRD whose versions declare a scale (and a status) subresource.
fn scalable_crd() -> Value {
    json!({
        "spec": {
            "scope": "Namespaced",
            "names": {"plural": "pools", "singular": "pool", "kind": "Pool", "listKind": "PoolList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}, "scale": {
                    "specReplicasPath": ".spec.size",
                    "statusReplicasPath": ".status.ready",
                    "labelSelectorPath": ".status.selector"}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                    "status": {"type": "object", "properties": {
                        "ready": {"type": "integer"}, "selector": {"type": "string"}}}}}}
            }]
        }
    })
}

/// The Scale of custom resources: from the CRD's paths, written back to
/// `specReplicasPath`; a resource without its replicas field; discovery.
pub async fn scale_of_custom_resources(s: &mut Scene) -> Fallible {
    s.install_crd(scalable_crd()).await?;
    let pools = s.custom("v1", "pools");
    s.post(
        &pools,
        json!({"apiVersion": format!("{}/v1", s.group()), "kind": "Pool",
            "metadata": {"name": "a"}, "spec": {"size": 2}}),
    )
    .await?
    .expect(201)?;
    s.merge(
        &format!("{pools}/a/status"),
        json!({"status": {"ready": 1, "selector": "app=a"}}),
    )
    .await?
    .expect(200)?;
    let scale_path = format!("{pools}/a/scale");
    let scale = s.get(&scale_path).await?.expect(200)?;
    assert_eq!(
        scale.body["status"],
        json!({"replicas": 1, "selector": "app=a"})
    );
    s.record("scale", &scale.body);
    let put = s
        .put(
            &scale_path,
            json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                "metadata": {"name": "a"}, "spec": {"replicas": 5}}),
        )
        .await?
        .expect(200)?;
    s.record("put", outcome(&put));
    let merged = s
        .merge(&scale_path, json!({"spec": {"replicas": 7}}))
        .await?
        .expect(200)?;
    s.record("merge patch", outcome(&merged));
    let pool = s.get(&format!("{pools}/a")).await?.expect(200)?;
    assert_eq!(pool.body["spec"]["size"], 7);
    s.record(
        "the resource",
        json!([
            pool.body["spec"],
            pool.body["status"],
            pool.body["metadata"]["generation"]
        ]),
    );
    let negative = s
        .merge(&scale_path, json!({"spec": {"replicas": -2}}))
        .await?
        .expect(422)?;
    s.record("negative replicas", outcome(&negative));
    let negative_size = s
        .merge(&format!("{pools}/a"), json!({"spec": {"size": -1}}))
        .await?
        .expect(422)?;
    s.record(
        "negative replicas written to the resource",
        outcome(&negative_size),
    );

    s.post(
        &pools,
        json!({"apiVersion": format!("{}/v1", s.group()), "kind": "Pool",
            "metadata": {"name": "empty"}, "spec": {}}),
    )
    .await?
    .expect(201)?;
    let empty_scale = format!("{pools}/empty/scale");
    let unread = s.get(&empty_scale).await?;
    s.record("the scale of a resource without replicas", outcome(&unread));
    let unset = s
        .merge(&empty_scale, json!({"metadata": {"labels": {"x": "y"}}}))
        .await?;
    s.record("a patch that sets no replicas", outcome(&unset));
    let set = s
        .merge(&empty_scale, json!({"spec": {"replicas": 1}}))
        .await?
        .expect(200)?;
    s.record("a patch that sets them", outcome(&set));
    let posted = s
        .request(
            Method::POST,
            &scale_path,
            Some("application/json"),
            Some(json!({})),
        )
        .await?;
    s.record("post to a scale", json!([posted.code, posted.reason()]));

    let discovery = s
        .get(&format!("/apis/{}/v1", s.group()))
        .await?
        .expect(200)?;
    let names: Vec<Value> = discovery.body["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| json!([r["name"], r["group"], r["kind"], r["verbs"]]))
        .collect();
    s.record("discovery", names);
    Ok(())
}
