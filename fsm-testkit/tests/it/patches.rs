//! The patch types through `kube::Api`: JSON patch (with `test`), strategic
//! merge patch, server-side apply with field ownership, and kube-runtime's
//! finalizer helper, which relies on JSON patch `test`.

use crate::common;

use std::sync::Arc;

use common::{Widget, install, status, widget};
use fsm_testkit::ApiServer;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{Error as FinalizerError, Event, finalizer};
use serde_json::{Value, json};

fn json_patch(ops: Value) -> Patch<()> {
    Patch::Json(serde_json::from_value(ops).unwrap())
}

async fn configmap(server: &ApiServer, name: &str, data: Value) -> Api<ConfigMap> {
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let cm = serde_json::from_value(json!({"metadata": {"name": name}, "data": data})).unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    cms
}

fn data(cm: &ConfigMap) -> Value {
    serde_json::to_value(cm.data.clone().unwrap_or_default()).unwrap()
}

#[tokio::test]
async fn json_patch_operations_and_a_failing_test() {
    let server = ApiServer::new();
    let cms = configmap(&server, "j", json!({"a": "1", "b": "2", "c": "3"})).await;
    let pp = PatchParams::default();
    let cm = cms
        .patch(
            "j",
            &pp,
            &json_patch(json!([
                {"op": "test", "path": "/data/a", "value": "1"},
                {"op": "add", "path": "/data/d", "value": "4"},
                {"op": "remove", "path": "/data/b"},
                {"op": "replace", "path": "/data/c", "value": "three"},
                {"op": "move", "from": "/data/a", "path": "/data/moved"},
                {"op": "copy", "from": "/data/d", "path": "/data/copied"},
                {"op": "add", "path": "/metadata/annotations", "value": {}},
                // `~1` is `/` (a key with `~`, `~0`, is no valid annotation key).
                {"op": "add", "path": "/metadata/annotations/example.com~1a", "value": "1"},
            ])),
        )
        .await
        .unwrap();
    assert_eq!(
        data(&cm),
        json!({"c": "three", "d": "4", "moved": "1", "copied": "4"})
    );
    assert_eq!(cm.metadata.annotations.unwrap()["example.com/a"], "1");
    let rv = cm.metadata.resource_version;

    // A failing test fails the whole patch with 422, and nothing is written.
    let e = cms
        .patch(
            "j",
            &pp,
            &json_patch(json!([
                {"op": "add", "path": "/data/e", "value": "5"},
                {"op": "test", "path": "/data/c", "value": "3"},
            ])),
        )
        .await
        .unwrap_err();
    let s = status(e);
    assert_eq!(
        (s.code, s.reason.as_str()),
        (422, "Invalid"),
        "{}",
        s.message
    );
    // 1.20's generic message: what failed is not said.
    assert_eq!(
        s.message,
        "the server rejected our request due to an error in our request"
    );
    let after = cms.get("j").await.unwrap();
    assert_eq!(after.metadata.resource_version, rv);
    assert!(!after.data.unwrap().contains_key("e"));

    // A path that does not exist is 422 too; a malformed patch is 400.
    let e = cms
        .patch(
            "j",
            &pp,
            &json_patch(json!([{"op": "remove", "path": "/data/nope"}])),
        )
        .await
        .unwrap_err();
    assert_eq!(status(e).code, 422);
}

fn deployment() -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [
                    {"name": "app", "image": "app:1",
                     "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                     "ports": [{"containerPort": 80}]},
                    {"name": "sidecar", "image": "proxy:1"}
                ]}
            }
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn strategic_merge_patch_merges_containers_and_env_by_name() {
    let server = ApiServer::new();
    let deployments: Api<Deployment> = Api::default_namespaced(server.client());
    deployments
        .create(&PostParams::default(), &deployment())
        .await
        .unwrap();
    let patch = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "app", "image": "app:2",
         "env": [{"name": "B", "value": "two"}, {"name": "C", "value": "3"}, {"name": "A", "$patch": "delete"}],
         "ports": [{"containerPort": 8080}]},
        {"name": "sidecar", "$patch": "delete"},
        {"name": "logger", "image": "log:1"}
    ]}}}});
    let d = deployments
        .patch("web", &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .unwrap();
    let containers =
        serde_json::to_value(&d.spec.unwrap().template.spec.unwrap().containers).unwrap();
    assert_eq!(
        containers,
        json!([
            {"name": "app", "image": "app:2",
             "env": [{"name": "B", "value": "two"}, {"name": "C", "value": "3"}],
             // A new element goes first, as on the real server.
             "ports": [{"containerPort": 8080, "protocol": "TCP"},
                 {"containerPort": 80, "protocol": "TCP"}],
             "imagePullPolicy": "IfNotPresent", "resources": {},
             "terminationMessagePath": "/dev/termination-log",
             "terminationMessagePolicy": "File"},
            // The new container gets the defaults of a container.
            {"name": "logger", "image": "log:1",
             "imagePullPolicy": "IfNotPresent", "resources": {},
             "terminationMessagePath": "/dev/termination-log",
             "terminationMessagePolicy": "File"}
        ])
    );
    assert_eq!(d.metadata.generation, Some(2));
}

#[tokio::test]
async fn strategic_merge_patch_of_a_custom_resource_is_415() {
    let server = ApiServer::new();
    let client = server.client();
    install::<Widget>(&client).await;
    let widgets: Api<Widget> = Api::default_namespaced(client);
    widgets
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .unwrap();
    let e = widgets
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"size": 2}})),
        )
        .await
        .unwrap_err();
    let s = status(e);
    assert_eq!((s.code, s.reason.as_str()), (415, "UnsupportedMediaType"));
    assert!(
        s.message.contains("application/merge-patch+json"),
        "{}",
        s.message
    );
    // JSON patch works on custom resources.
    let w = widgets
        .patch(
            "w",
            &PatchParams::default(),
            &json_patch(json!([{"op": "replace", "path": "/spec/size", "value": 2}])),
        )
        .await
        .unwrap();
    assert_eq!(w.spec.size, 2);
}

fn managed(cm: &ConfigMap) -> Vec<Value> {
    cm.metadata
        .managed_fields
        .clone()
        .unwrap_or_default()
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect()
}

fn apply_cm(data: Value) -> Patch<Value> {
    Patch::Apply(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cfg"},
        "data": data,
    }))
}

#[tokio::test]
async fn server_side_apply_creates_updates_conflicts_and_forces() {
    let server = ApiServer::new();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let alice = PatchParams::apply("alice");
    let bob = PatchParams::apply("bob");

    // Create when absent, owned by alice.
    let cm = cms
        .patch("cfg", &alice, &apply_cm(json!({"k": "1", "mine": "a"})))
        .await
        .unwrap();
    assert_eq!(data(&cm), json!({"k": "1", "mine": "a"}));
    let fields = managed(&cm);
    assert_eq!(fields.len(), 1);
    assert_eq!(fields[0]["manager"], "alice");
    assert_eq!(fields[0]["operation"], "Apply");
    assert_eq!(fields[0]["apiVersion"], "v1");
    assert_eq!(fields[0]["fieldsType"], "FieldsV1");
    assert_eq!(
        fields[0]["fieldsV1"],
        json!({"f:data": {"f:k": {}, "f:mine": {}}})
    );

    // The same apply again changes nothing.
    let again = cms
        .patch("cfg", &alice, &apply_cm(json!({"k": "1", "mine": "a"})))
        .await
        .unwrap();
    assert_eq!(
        again.metadata.resource_version,
        cm.metadata.resource_version
    );

    // Alice updates: a new key, one dropped from her configuration is removed.
    let cm = cms
        .patch("cfg", &alice, &apply_cm(json!({"k": "1", "new": "n"})))
        .await
        .unwrap();
    assert_eq!(data(&cm), json!({"k": "1", "new": "n"}));

    // Bob applying the same value shares it; a different one conflicts.
    let cm = cms
        .patch("cfg", &bob, &apply_cm(json!({"k": "1", "b": "x"})))
        .await
        .unwrap();
    assert_eq!(managed(&cm).len(), 2);
    let e = cms
        .patch("cfg", &bob, &apply_cm(json!({"k": "2", "b": "x"})))
        .await
        .unwrap_err();
    let s = status(e);
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        s.message,
        "Apply failed with 1 conflict: conflict with \"alice\": .data.k"
    );
    let causes = s.details.unwrap().causes;
    assert_eq!(causes[0].field, ".data.k");
    assert_eq!(causes[0].reason, "FieldManagerConflict");
    assert_eq!(cms.get("cfg").await.unwrap().data.unwrap()["k"], "1");

    // Forced, bob takes the field from alice.
    let cm = cms
        .patch(
            "cfg",
            &bob.clone().force(),
            &apply_cm(json!({"k": "2", "b": "x"})),
        )
        .await
        .unwrap();
    assert_eq!(data(&cm)["k"], "2");
    let fields = managed(&cm);
    let of = |m: &str| {
        fields
            .iter()
            .find(|e| e["manager"] == m)
            .map(|e| e["fieldsV1"].clone())
    };
    assert_eq!(of("alice"), Some(json!({"f:data": {"f:new": {}}})));
    assert_eq!(of("bob"), Some(json!({"f:data": {"f:k": {}, "f:b": {}}})));

    // A merge patch by another manager is recorded as an Update, and takes
    // the field it changes; alice applying it again then conflicts with it.
    let cm = cms
        .patch(
            "cfg",
            &PatchParams {
                field_manager: Some("carol".into()),
                ..PatchParams::default()
            },
            &Patch::Merge(json!({"data": {"new": "carol's"}})),
        )
        .await
        .unwrap();
    let carol = managed(&cm)
        .into_iter()
        .find(|e| e["manager"] == "carol")
        .unwrap();
    assert_eq!(carol["operation"], "Update");
    assert_eq!(carol["fieldsV1"], json!({"f:data": {"f:new": {}}}));
    let e = cms
        .patch("cfg", &alice, &apply_cm(json!({"new": "n"})))
        .await
        .unwrap_err();
    assert_eq!(
        status(e).message,
        "Apply failed with 1 conflict: conflict with \"carol\" using v1: .data.new"
    );

    // An apply without a field manager is refused.
    let e = cms
        .patch("cfg", &PatchParams::default(), &apply_cm(json!({})))
        .await
        .unwrap_err();
    assert_eq!(status(e).code, 422);
}

#[tokio::test]
async fn server_side_apply_of_deployments_and_custom_resources() {
    let server = ApiServer::new();
    let client = server.client();
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    let mut config = serde_json::to_value(deployment()).unwrap();
    config["apiVersion"] = json!("apps/v1");
    config["kind"] = json!("Deployment");
    deployments
        .patch("web", &PatchParams::apply("ci"), &Patch::Apply(&config))
        .await
        .unwrap();
    // Another manager adds a container: the list merges by name.
    let extra = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"template": {"spec": {"containers": [{"name": "debug", "image": "busybox"}]}}}});
    let d = deployments
        .patch(
            "web",
            &PatchParams::apply("debugger"),
            &Patch::Apply(&extra),
        )
        .await
        .unwrap();
    let names: Vec<String> = d
        .spec
        .unwrap()
        .template
        .spec
        .unwrap()
        .containers
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names, ["app", "sidecar", "debug"]);
    // Changing the app's image from the debugger conflicts, naming the element.
    let steal = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"template": {"spec": {"containers": [{"name": "app", "image": "evil"}]}}}});
    let e = deployments
        .patch(
            "web",
            &PatchParams::apply("debugger"),
            &Patch::Apply(&steal),
        )
        .await
        .unwrap_err();
    assert_eq!(
        status(e).message,
        "Apply failed with 1 conflict: conflict with \"ci\": .spec.template.spec.containers[name=\"app\"].image"
    );

    // A custom resource: created by apply, its status applied separately.
    install::<Widget>(&client).await;
    let widgets: Api<Widget> = Api::default_namespaced(client);
    let w = widgets
        .patch(
            "w",
            &PatchParams::apply("op"),
            &Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": "w"}, "spec": {"size": 3}, "status": {"ready": true}})),
        )
        .await
        .unwrap();
    assert_eq!(w.spec.size, 3);
    assert!(
        w.status.is_none(),
        "status is not applied through the main resource"
    );
    let w = widgets
        .patch_status(
            "w",
            &PatchParams::apply("op"),
            &Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": "w"}, "status": {"ready": true}})),
        )
        .await
        .unwrap();
    assert!(w.status.unwrap().ready);
    let fields: Vec<Value> = w
        .metadata
        .managed_fields
        .unwrap()
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    assert_eq!(fields.len(), 2);
    assert_eq!(fields[1]["subresource"], "status");
    assert_eq!(fields[1]["fieldsV1"], json!({"f:status": {"f:ready": {}}}));
    assert_eq!(w.metadata.generation, Some(1));
}

#[derive(Debug, thiserror::Error)]
#[error("never")]
struct Never;

#[tokio::test]
async fn kube_runtime_finalizer_helper_end_to_end() {
    const NAME: &str = "example.com/cleanup";
    let server = ApiServer::new();
    let client = server.client();
    install::<Widget>(&client).await;
    let widgets: Api<Widget> = Api::default_namespaced(client);
    let w = widgets
        .create(&PostParams::default(), &widget("f", 1))
        .await
        .unwrap();

    // First pass: the helper adds its finalizer (test null, then add).
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = |seen: Arc<std::sync::Mutex<Vec<&'static str>>>| {
        move |event: Event<Widget>| async move {
            seen.lock().unwrap().push(match event {
                Event::Apply(_) => "apply",
                Event::Cleanup(_) => "cleanup",
            });
            Ok::<_, Never>(Action::await_change())
        }
    };
    finalizer(&widgets, NAME, Arc::new(w.clone()), record(seen.clone()))
        .await
        .unwrap();
    let w2 = widgets.get("f").await.unwrap();
    assert_eq!(
        w2.metadata.finalizers.as_deref(),
        Some(&[NAME.to_string()][..])
    );

    // With a stale object (no finalizers yet), the test fails: 422, and the
    // finalizer is not added twice.
    let e = finalizer(
        &widgets,
        "other.example.com/x",
        Arc::new(w),
        record(seen.clone()),
    )
    .await
    .unwrap_err();
    match e {
        FinalizerError::AddFinalizer(kube::Error::Api(s)) => assert_eq!(s.code, 422),
        other => panic!("expected AddFinalizer 422, got {other:?}"),
    }

    // Second pass: the reconciler's Apply runs.
    finalizer(&widgets, NAME, Arc::new(w2), record(seen.clone()))
        .await
        .unwrap();

    // Deleted: the object waits for the finalizer; Cleanup runs, the helper
    // removes its finalizer (test, then remove), and the object goes.
    widgets.delete("f", &DeleteParams::default()).await.unwrap();
    let deleting = widgets.get("f").await.unwrap();
    assert!(deleting.metadata.deletion_timestamp.is_some());
    finalizer(&widgets, NAME, Arc::new(deleting), record(seen.clone()))
        .await
        .unwrap();
    assert!(widgets.get_opt("f").await.unwrap().is_none());
    assert_eq!(*seen.lock().unwrap(), ["apply", "cleanup"]);
}

#[tokio::test]
async fn server_side_apply_merges_a_crd_list_map_by_its_keys() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};

    let server = ApiServer::new();
    let client = server.client();
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "routers.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "routers", "singular": "router", "kind": "Router"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "routes": {"type": "array", "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["host"],
                            "items": {"type": "object", "properties": {
                                "host": {"type": "string"}, "to": {"type": "string"}}}},
                        "tags": {"type": "array", "items": {"type": "string"}}}}}}}}]}
    }))
    .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Router"));
    let routers: Api<DynamicObject> = Api::default_namespaced_with(client, &ar);
    let config = |routes: Value, tags: Value| {
        Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Router",
            "metadata": {"name": "r"}, "spec": {"routes": routes, "tags": tags}}))
    };
    routers
        .patch(
            "r",
            &PatchParams::apply("team-a"),
            &config(json!([{"host": "a", "to": "x"}]), json!(["a"])),
        )
        .await
        .unwrap();
    let r = routers
        .patch(
            "r",
            &PatchParams::apply("team-b"),
            &config(json!([{"host": "b", "to": "y"}]), json!(["a"])),
        )
        .await
        .unwrap();
    // The list-map merges by host; the plain list is atomic and shared
    // (same value).
    assert_eq!(
        r.data["spec"],
        json!({"routes": [{"host": "a", "to": "x"}, {"host": "b", "to": "y"}], "tags": ["a"]})
    );
    let e = routers
        .patch(
            "r",
            &PatchParams::apply("team-b"),
            &config(json!([{"host": "a", "to": "z"}]), json!(["a"])),
        )
        .await
        .unwrap_err();
    assert_eq!(
        status(e).message,
        "Apply failed with 1 conflict: conflict with \"team-a\": .spec.routes[host=\"a\"].to"
    );
}
