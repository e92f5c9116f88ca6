//! What an update may not change (issue 32, item 3): each rule of
//! kube-apiserver 1.20's update validation, refused with 422 and the real
//! cause (field path, reason, message), and the changes the same kinds
//! allow.

use integration_tests::scene::Reply;
use integration_tests::{Fallible, Scene};
use serde_json::{Value, json};

/// A refusal as compared: code, reason, causes.
fn refusal(reply: &Reply) -> Value {
    json!([reply.code, reply.reason(), reply.body["details"]["causes"]])
}

/// A refusal's causes without their messages (where the real server
/// prints a Go dump of an internal type).
fn refusal_fields(reply: &Reply) -> Value {
    let causes: Vec<Value> = reply.body["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| json!([c["field"], c["reason"]]))
        .collect();
    json!([reply.code, reply.reason(), causes])
}

/// The collection of `plural` of `group/v1` in the scene's namespace.
fn path(s: &Scene, group: &str, plural: &str) -> String {
    s.core(plural)
        .replace("/api/v1/", &format!("/apis/{group}/v1/"))
}

/// A Deployment's selector (apps/v1) is immutable; its replicas and
/// template are not.
pub async fn deployment_selector_is_immutable(s: &mut Scene) -> Fallible {
    let deployments = path(s, "apps", "deployments");
    let item = format!("{deployments}/web");
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1"}]}}}
    });
    s.post(&deployments, deployment).await?.expect(201)?;
    let reselected = s
        .merge(
            &item,
            json!({"spec": {"selector": {"matchLabels": {"app": "web", "tier": "front"}},
                "template": {"metadata": {"labels": {"app": "web", "tier": "front"}}}}}),
        )
        .await?
        .expect(422)?;
    s.record("a changed selector", refusal(&reselected));
    let expression = s
        .merge(
            &item,
            json!({"spec": {"selector": {"matchExpressions": [
                {"key": "app", "operator": "In", "values": ["web"]}]}}}),
        )
        .await?
        .expect(422)?;
    s.record("a selector expression added", refusal(&expression));
    let scaled = s
        .merge(
            &item,
            json!({"spec": {"replicas": 3, "template": {"metadata": {"labels": {"extra": "x"}}}}}),
        )
        .await?
        .expect(200)?;
    s.record(
        "replicas and template changed",
        scaled.body["spec"]["replicas"].clone(),
    );
    Ok(())
}

/// A Job's completions, selector and template are immutable; its
/// parallelism, retries and deadline are not.
pub async fn job_spec_is_immutable(s: &mut Scene) -> Fallible {
    let jobs = path(s, "batch", "jobs");
    let item = format!("{jobs}/once");
    let job = json!({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once"},
        "spec": {"completions": 2, "template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "m", "image": "busybox:1"}]}}}
    });
    s.post(&jobs, job).await?.expect(201)?;
    let completions = s
        .merge(&item, json!({"spec": {"completions": 3}}))
        .await?
        .expect(422)?;
    s.record("completions changed", refusal(&completions));
    let template = s
        .merge(
            &item,
            json!({"spec": {"template": {"spec": {"activeDeadlineSeconds": 5}}}}),
        )
        .await?
        .expect(422)?;
    s.record("template changed", refusal_fields(&template));
    let tuned = s
        .merge(
            &item,
            json!({"spec": {"parallelism": 2, "backoffLimit": 1, "activeDeadlineSeconds": 600}}),
        )
        .await?
        .expect(200)?;
    s.record(
        "parallelism, retries and deadline changed",
        json!([
            tuned.body["spec"]["parallelism"],
            tuned.body["spec"]["backoffLimit"],
            tuned.body["spec"]["activeDeadlineSeconds"]
        ]),
    );
    Ok(())
}

/// A StatefulSet's spec may change only in replicas, template and update
/// strategy.
pub async fn statefulset_spec_is_frozen(s: &mut Scene) -> Fallible {
    let sets = path(s, "apps", "statefulsets");
    let item = format!("{sets}/db");
    let set = json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
        "spec": {"serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}},
                "spec": {"containers": [{"name": "db", "image": "postgres:13"}]}}}
    });
    s.post(&sets, set).await?.expect(201)?;
    for (what, patch) in [
        ("service name", json!({"spec": {"serviceName": "other"}})),
        (
            "pod management",
            json!({"spec": {"podManagementPolicy": "Parallel"}}),
        ),
        (
            "history limit",
            json!({"spec": {"revisionHistoryLimit": 3}}),
        ),
        (
            "selector",
            json!({"spec": {"selector": {"matchLabels": {"app": "db", "x": "y"}},
            "template": {"metadata": {"labels": {"app": "db", "x": "y"}}}}}),
        ),
    ] {
        let refused = s.merge(&item, patch).await?.expect(422)?;
        s.record(format!("{what} changed"), refusal(&refused));
    }
    let allowed = s
        .merge(
            &item,
            json!({"spec": {"replicas": 2, "updateStrategy": {"type": "OnDelete", "rollingUpdate": null},
                "template": {"spec": {"containers": [{"name": "db", "image": "postgres:14"}]}}}}),
        )
        .await?
        .expect(200)?;
    s.record(
        "replicas, strategy and template changed",
        json!([
            allowed.body["spec"]["replicas"],
            allowed.body["spec"]["updateStrategy"]
        ]),
    );
    Ok(())
}

/// A Service's cluster IP may be neither changed nor removed (a PUT
/// without it removes it), but goes with a change to `ExternalName`.
pub async fn service_cluster_ip_is_immutable(s: &mut Scene) -> Fallible {
    let services = s.core("services");
    let item = format!("{services}/web");
    let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}});
    let created = s.post(&services, service.clone()).await?.expect(201)?;
    let changed = s
        .merge(&item, json!({"spec": {"clusterIP": "10.0.0.99"}}))
        .await?
        .expect(422)?;
    s.record("clusterIP changed", refusal(&changed));
    let both = s
        .merge(
            &item,
            json!({"spec": {"clusterIP": "10.0.0.99", "clusterIPs": ["10.0.0.99"]}}),
        )
        .await?
        .expect(422)?;
    s.record("clusterIP and clusterIPs changed", refusal(&both));
    let cleared = s
        .merge(&item, json!({"spec": {"clusterIP": null}}))
        .await?
        .expect(422)?;
    s.record("clusterIP removed", refusal(&cleared));
    let mut put = service.clone();
    put["metadata"]["resourceVersion"] = json!(created.rv());
    let replaced = s.put(&item, put).await?.expect(422)?;
    s.record("a PUT without clusterIP", refusal(&replaced));
    // A Service's update validation wants a resourceVersion (1.20's
    // storage does not fill it in), and lists its cause twice.
    let mut unversioned = service.clone();
    unversioned["spec"]["clusterIP"] = created.body["spec"]["clusterIP"].clone();
    let unconditional = s.put(&item, unversioned).await?.expect(422)?;
    s.record("a PUT without resourceVersion", refusal(&unconditional));
    let bare = s.put(&item, service.clone()).await?.expect(422)?;
    s.record("a PUT without resourceVersion or clusterIP", refusal(&bare));
    let mut applied = service.clone();
    // (1.20's apply needs the protocol, a key of the ports' list.)
    applied["spec"]["ports"] = json!([{"port": 80, "name": "http", "protocol": "TCP"}]);
    let applied = s
        .patch(
            &format!("{item}?fieldManager=immutability&force=true"),
            "application/apply-patch+yaml",
            applied,
        )
        .await?
        .expect(200)?;
    s.record(
        "an apply without clusterIP keeps it",
        applied.body["spec"]["clusterIP"] == created.body["spec"]["clusterIP"],
    );
    let kept = s
        .merge(
            &item,
            json!({"spec": {"clusterIPs": null, "ports": [{"port": 8080}]}}),
        )
        .await?
        .expect(200)?;
    assert_eq!(
        kept.body["spec"]["clusterIP"],
        created.body["spec"]["clusterIP"]
    );
    s.record(
        "clusterIPs left out by an old client",
        kept.body["spec"]["clusterIPs"] == created.body["spec"]["clusterIPs"],
    );
    let headless = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "headless"},
        "spec": {"clusterIP": "None", "ports": [{"port": 80}]}});
    s.post(&services, headless).await?.expect(201)?;
    let given = s
        .merge(
            &format!("{services}/headless"),
            json!({"spec": {"clusterIP": "10.0.0.98"}}),
        )
        .await?
        .expect(422)?;
    s.record("a headless Service given an IP", refusal(&given));
    Ok(())
}

/// A ConfigMap or Secret marked `immutable` keeps its data and the mark
/// (its metadata may change); a Secret's type never changes.
pub async fn immutable_configmaps_and_secrets(s: &mut Scene) -> Fallible {
    let maps = s.core("configmaps");
    let frozen = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "frozen"},
        "data": {"a": "1"}, "immutable": true});
    s.post(&maps, frozen).await?.expect(201)?;
    let item = format!("{maps}/frozen");
    for (what, patch) in [
        ("data", json!({"data": {"a": "2"}})),
        ("binaryData", json!({"binaryData": {"b": "YQ=="}})),
        ("the mark", json!({"immutable": false})),
        ("the mark removed", json!({"immutable": null})),
        (
            "the mark and data",
            json!({"immutable": false, "data": {"a": "2"}}),
        ),
    ] {
        let refused = s.merge(&item, patch).await?.expect(422)?;
        s.record(format!("a frozen ConfigMap's {what}"), refusal(&refused));
    }
    let labelled = s
        .merge(&item, json!({"metadata": {"labels": {"x": "y"}}}))
        .await?
        .expect(200)?;
    s.record(
        "a frozen ConfigMap labelled",
        labelled.body["metadata"]["labels"].clone(),
    );
    let thawed = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "thawed"},
        "data": {"a": "1"}});
    s.post(&maps, thawed).await?.expect(201)?;
    let locked = s
        .merge(
            &format!("{maps}/thawed"),
            json!({"data": {"a": "2"}, "immutable": true}),
        )
        .await?
        .expect(200)?;
    s.record(
        "a ConfigMap frozen by an update",
        json!([locked.body["data"], locked.body["immutable"]]),
    );

    let secrets = s.core("secrets");
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "key"},
        "stringData": {"a": "1"}});
    s.post(&secrets, secret).await?.expect(201)?;
    let key = format!("{secrets}/key");
    let retyped = s
        .merge(&key, json!({"type": "example.com/other"}))
        .await?
        .expect(422)?;
    s.record("a Secret's type changed", refusal(&retyped));
    s.merge(&key, json!({"immutable": true}))
        .await?
        .expect(200)?;
    let rewritten = s
        .merge(&key, json!({"data": {"a": "Mg=="}}))
        .await?
        .expect(422)?;
    s.record("a frozen Secret's data", refusal(&rewritten));
    let same = s
        .merge(&key, json!({"stringData": {"a": "1"}}))
        .await?
        .expect(200)?;
    s.record(
        "a frozen Secret written the same",
        same.body["data"].clone(),
    );
    Ok(())
}
