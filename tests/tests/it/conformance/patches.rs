//! Lists in patches and server-side apply, as the built-in types' OpenAPI
//! extensions say: the order a strategic merge patch leaves a merged list
//! in, `$retainKeys`, an unknown `$patch`; list-map keys with more than
//! one field (a Service's port and protocol), a key field filled in with
//! its default, an atomic selector, a set, and a list an applier empties.
//!
//! Each scenario observes the fields it is about, not whole objects: the
//! built-in kinds' defaults are another scenario's subject.

use integration_tests::{Fallible, Scene};
use serde_json::{Value, json};

const SMP: &str = "application/strategic-merge-patch+json";
const APPLY: &str = "application/apply-patch+yaml";

fn deployments(s: &Scene) -> String {
    s.core("deployments").replace("/api/v1/", "/apis/apps/v1/")
}

fn deployment(name: &str, env: &[&str]) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}}, "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "c", "image": "busybox:1",
                "env": env.iter().map(|n| json!({"name": n, "value": "1"})).collect::<Vec<_>>()}]}}}
    })
}

/// The names of the first container's env entries.
fn env_names(v: &Value) -> Vec<String> {
    v["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["name"].as_str().map(String::from))
        .collect()
}

/// A strategic merge patch puts a list's new elements first, leaves the
/// order of the live ones, merges finalizers as a set in the same way,
/// honours `$retainKeys`, and refuses an unknown `$patch` with `500`.
pub async fn strategic_merge_patch_order_and_directives(s: &mut Scene) -> Fallible {
    let path = deployments(s);
    let item = format!("{path}/ordered");
    s.post(&path, deployment("ordered", &["A", "B"]))
        .await?
        .expect(201)?;
    let env = |names: &[&str]| {
        json!({"spec": {"template": {"spec": {"containers": [{"name": "c",
            "env": names.iter().map(|n| json!({"name": n, "value": "2"})).collect::<Vec<_>>()}]}}}})
    };
    let patched = s.patch(&item, SMP, env(&["C"])).await?.expect(200)?;
    assert_eq!(env_names(&patched.body), ["C", "A", "B"]);
    s.record("a new element goes first", env_names(&patched.body));
    let patched = s.patch(&item, SMP, env(&["A", "D"])).await?.expect(200)?;
    assert_eq!(env_names(&patched.body), ["C", "A", "D", "B"]);
    s.record(
        "a patch naming a live element and a new one",
        env_names(&patched.body),
    );

    let finalizers = |f: &[&str]| json!({"metadata": {"finalizers": f}});
    s.patch(&item, SMP, finalizers(&["p/1", "p/2"]))
        .await?
        .expect(200)?;
    let patched = s
        .patch(&item, SMP, finalizers(&["p/0", "p/2", "p/3"]))
        .await?
        .expect(200)?;
    assert_eq!(
        patched.body["metadata"]["finalizers"],
        json!(["p/0", "p/1", "p/2", "p/3"])
    );
    s.record("finalizers merged", &patched.body["metadata"]["finalizers"]);
    let removed = s
        .patch(
            &item,
            SMP,
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["p/0", "p/1", "p/2", "p/3"]}}),
        )
        .await?
        .expect(200)?;
    assert!(removed.body["metadata"].get("finalizers").is_none());
    s.record(
        "finalizers after removing every one",
        &removed.body["metadata"]["finalizers"],
    );

    s.patch(
        &item,
        SMP,
        json!({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2, "maxUnavailable": 1}}}}),
    )
    .await?
    .expect(200)?;
    let retained = s
        .patch(
            &item,
            SMP,
            json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}),
        )
        .await?
        .expect(200)?;
    assert_eq!(
        retained.body["spec"]["strategy"],
        json!({"type": "Recreate"})
    );
    s.record("$retainKeys", &retained.body["spec"]["strategy"]);

    let unknown = s
        .patch(
            &item,
            SMP,
            json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "$patch": "bogus"}]}}}}),
        )
        .await?
        .expect(500)?;
    assert_eq!(
        unknown.body["message"],
        "unknown patch type: bogus in map: map[$patch:bogus name:c]"
    );
    s.record("an unknown $patch", &unknown);
    Ok(())
}

/// The `fieldsV1` of `manager`'s entry.
fn fields_of(object: &Value, manager: &str) -> Value {
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["manager"] == manager)
        .map(|e| e["fieldsV1"].clone())
        .unwrap_or(Value::Null)
}

/// Server-side apply keys a Service's ports by port and protocol (a UDP
/// and a TCP port 53 are two ports), a container's ports by containerPort
/// and protocol (the protocol, left out, keyed as its default `TCP`), owns
/// a Deployment's selector as one field and finalizers one by one, and
/// removes a list an applier empties (env, finalizers) rather than
/// leaving `[]`.
pub async fn server_side_apply_list_keys(s: &mut Scene) -> Fallible {
    let services = s.core("services");
    let service = |ports: Value| {
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "dns"},
               "spec": {"selector": {"app": "dns"}, "ports": ports}})
    };
    let applied = s
        .patch(
            &format!("{services}/dns?fieldManager=alice"),
            APPLY,
            service(json!([
                {"name": "dns", "port": 53, "protocol": "UDP"},
                {"name": "dns-tcp", "port": 53, "protocol": "TCP"}
            ])),
        )
        .await?
        .expect(201)?;
    let ports: Vec<Value> = applied.body["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| json!([p["name"], p["port"], p["protocol"]]))
        .collect();
    assert_eq!(ports.len(), 2, "{ports:?}");
    s.record("two ports 53", ports);
    let fields = fields_of(&applied.body, "alice");
    assert!(
        fields["f:spec"]["f:ports"]
            .get("k:{\"port\":53,\"protocol\":\"UDP\"}")
            .is_some(),
        "{fields}"
    );
    s.record("a Service's port keys", &fields["f:spec"]["f:ports"]);

    let path = deployments(s);
    let item = format!("{path}/applied?fieldManager=alice");
    let mut config = deployment("applied", &["A"]);
    config["metadata"]["finalizers"] = json!(["x/y"]);
    config["spec"]["template"]["spec"]["containers"][0]["ports"] = json!([{"containerPort": 80}]);
    let applied = s.patch(&item, APPLY, config.clone()).await?.expect(201)?;
    let fields = fields_of(&applied.body, "alice");
    assert_eq!(fields["f:spec"]["f:selector"], json!({}));
    assert_eq!(
        fields["f:metadata"]["f:finalizers"],
        json!({"v:\"x/y\"": {}})
    );
    let container = &fields["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"c\"}"];
    assert_eq!(
        container["f:ports"],
        json!({"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}})
    );
    s.record("the selector, a set and a port's key", &fields);

    if let Some(c) = config["spec"]["template"]["spec"]["containers"][0].as_object_mut() {
        c.remove("env");
    }
    if let Some(m) = config["metadata"].as_object_mut() {
        m.remove("finalizers");
    }
    let applied = s.patch(&item, APPLY, config).await?.expect(200)?;
    let container = &applied.body["spec"]["template"]["spec"]["containers"][0];
    assert!(container.get("env").is_none(), "{container}");
    assert!(applied.body["metadata"].get("finalizers").is_none());
    s.record(
        "env after the applier drops it",
        &applied.body["spec"]["template"]["spec"]["containers"][0]["env"],
    );
    Ok(())
}
