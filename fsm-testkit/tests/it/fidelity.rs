//! Details where the embedded server once differed from a real
//! kube-apiserver (found by the workspace's differential conformance suite):
//! each is pinned here so it does not come back.

use crate::common;

use std::collections::BTreeMap;

use common::{Gadget, GadgetSpec, Widget, install, status, widget};
use fsm_testkit::ApiServer;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::response::StatusSummary;
use serde_json::{Value, json};

async fn raw(server: &ApiServer, method: &str, path: &str) -> Result<Value, kube::Error> {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .body(Vec::new())
        .unwrap();
    server.client().request::<Value>(req).await
}

fn cm(name: &str) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.into());
    c
}

#[tokio::test]
async fn delete_answers_a_status_unless_the_kind_returns_the_object() {
    let server = ApiServer::new();
    let client = server.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let created = cms.create(&PostParams::default(), &cm("a")).await.unwrap();
    let answer = cms
        .delete("a", &DeleteParams::default())
        .await
        .unwrap()
        .right()
        .expect("a ConfigMap removed at once is answered with a Status");
    assert_eq!(answer.status, Some(StatusSummary::Success));
    let details = answer.details.unwrap();
    assert_eq!(
        (details.name.as_str(), details.kind.as_str()),
        ("a", "configmaps")
    );
    assert_eq!(Some(details.uid), created.metadata.uid);

    install::<Widget>(&client).await;
    let widgets: Api<Widget> = Api::default_namespaced(client.clone());
    widgets
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .unwrap();
    let answer = widgets
        .delete("w", &DeleteParams::default())
        .await
        .unwrap()
        .right()
        .expect("custom resources too");
    assert_eq!(answer.details.unwrap().group, "example.com");

    let pods: Api<Pod> = Api::default_namespaced(client);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let answer = pods.delete("p", &DeleteParams::default()).await.unwrap();
    assert!(answer.is_left(), "pods answer with the deleted object");
}

#[tokio::test]
async fn status_of_a_resource_without_that_subresource_is_not_found() {
    let server = ApiServer::new();
    let client = server.client();
    install::<Gadget>(&client).await;
    let gadgets: Api<Gadget> = Api::all(client);
    gadgets
        .create(
            &PostParams::default(),
            &Gadget::new(
                "g",
                GadgetSpec {
                    color: "red".into(),
                },
            ),
        )
        .await
        .unwrap();
    let s = status(
        raw(&server, "GET", "/apis/example.com/v1/gadgets/g/status")
            .await
            .unwrap_err(),
    );
    assert_eq!(s.code, 404);
    assert_eq!(s.message, r#"gadgets.example.com "g" not found"#);

    // Gadget's schema declares no status: a status patched in is dropped
    // (as on the real server: "patched (no change)", generation 1). With a
    // declared status, the change counts for generation (the conformance
    // suite's generation_without_status_subresource).
    let patched = gadgets
        .patch(
            "g",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"seen": true}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.metadata.generation, Some(1));
    let raw_object = raw(&server, "GET", "/apis/example.com/v1/gadgets/g")
        .await
        .unwrap();
    assert!(raw_object.get("status").is_none(), "{raw_object}");
}

#[tokio::test]
async fn label_keys_and_values_are_validated() {
    let server = ApiServer::new();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let before = server.revision();
    for (key, value) in [("app", "has space"), ("bad key", "v"), ("app", "-edge")] {
        let mut c = cm("labelled");
        c.metadata.labels = Some(BTreeMap::from([(key.to_string(), value.to_string())]));
        let s = status(cms.create(&PostParams::default(), &c).await.unwrap_err());
        assert_eq!(
            (s.code, s.reason.as_str()),
            (422, "Invalid"),
            "{key}={value}"
        );
        assert_eq!(s.details.unwrap().causes[0].field, "metadata.labels");
    }
    assert_eq!(server.revision(), before, "nothing was stored");
    let created = cms.create(&PostParams::default(), &cm("ok")).await.unwrap();
    let e = status(
        cms.patch(
            "ok",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "a/b"}}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, 422);
    assert_eq!(
        cms.get("ok").await.unwrap().metadata.resource_version,
        created.metadata.resource_version
    );
}

#[tokio::test]
async fn empty_maps_are_dropped_as_omitempty_does() {
    let server = ApiServer::new();
    let created = raw_post(
        &server,
        "/api/v1/namespaces/default/configmaps",
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "e", "labels": {}, "annotations": {}}, "data": {}}),
    )
    .await;
    assert!(created.get("data").is_none(), "{created}");
    assert!(created["metadata"].get("labels").is_none(), "{created}");
    assert!(
        created["metadata"].get("annotations").is_none(),
        "{created}"
    );
}

async fn raw_post(server: &ApiServer, path: &str, body: Value) -> Value {
    let req = http::Request::builder()
        .method("POST")
        .uri(path)
        .header("content-type", "application/json")
        .body(body.to_string().into_bytes())
        .unwrap();
    server.client().request::<Value>(req).await.unwrap()
}

#[tokio::test]
async fn list_shapes() {
    let server = ApiServer::new();
    let client = server.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    for n in ["a", "b", "c"] {
        cms.create(&PostParams::default(), &cm(n)).await.unwrap();
    }
    let list = raw(&server, "GET", "/api/v1/namespaces/default/configmaps")
        .await
        .unwrap();
    assert_eq!(list["kind"], "ConfigMapList");
    assert!(
        list["items"][0].get("kind").is_none(),
        "built-in items carry no kind"
    );
    assert!(list["items"][0].get("apiVersion").is_none());

    let paged = raw(
        &server,
        "GET",
        "/api/v1/namespaces/default/configmaps?limit=1",
    )
    .await
    .unwrap();
    assert_eq!(paged["metadata"]["remainingItemCount"], 2);
    let selected = raw(
        &server,
        "GET",
        "/api/v1/namespaces/default/configmaps?limit=1&fieldSelector=metadata.name%21%3Dz",
    )
    .await
    .unwrap();
    assert!(selected["metadata"]["continue"].is_string());
    assert!(
        selected["metadata"].get("remainingItemCount").is_none(),
        "unknowable under a selector"
    );

    let deleted = raw(
        &server,
        "DELETE",
        "/api/v1/namespaces/default/configmaps?labelSelector=x",
    )
    .await
    .unwrap();
    assert_eq!(deleted["kind"], "ConfigMapList");
    assert_eq!(deleted["items"].as_array().unwrap().len(), 0);
    let deleted = raw(&server, "DELETE", "/api/v1/namespaces/default/configmaps")
        .await
        .unwrap();
    assert_eq!(deleted["items"].as_array().unwrap().len(), 3);
    assert!(deleted["items"][0].get("kind").is_none(), "{deleted}");

    install::<Widget>(&client).await;
    let widgets: Api<Widget> = Api::default_namespaced(client);
    widgets
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .unwrap();
    let crs = raw(
        &server,
        "GET",
        "/apis/example.com/v1/namespaces/default/widgets",
    )
    .await
    .unwrap();
    assert_eq!(crs["metadata"]["continue"], "");
    assert_eq!(crs["items"][0]["kind"], "Widget");
    let listed = widgets.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);

    let discovery = raw(&server, "GET", "/apis/example.com/v1").await.unwrap();
    let widgets_entry = &discovery["resources"][0];
    assert_eq!(
        widgets_entry["verbs"],
        json!([
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "create",
            "update",
            "watch"
        ])
    );
    assert_eq!(
        widgets_entry["storageVersionHash"].as_str().unwrap().len(),
        12
    );
}

#[tokio::test]
async fn error_details_and_messages() {
    let server = ApiServer::new();
    let s = status(
        raw(&server, "GET", "/api/v1/namespaces/default/gizmos")
            .await
            .unwrap_err(),
    );
    assert_eq!(s.code, 404);
    assert!(s.details.is_some(), "details: {{}} is present");

    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    cms.create(&PostParams::default(), &cm("a")).await.unwrap();
    let wrong_uid = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: Some("x".into()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let s = status(cms.delete("a", &wrong_uid).await.unwrap_err());
    assert_eq!(s.code, 409);
    assert!(
        s.message
            .contains("the UID in the precondition (x) does not match the UID in record"),
        "{}",
        s.message
    );
    assert_eq!(s.details.unwrap().kind, "ConfigMap");

    let e = status(
        cms.list(&ListParams::default().fields("data.k=v"))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        e.message,
        r#""data.k" is not a known field selector: only "metadata.name", "metadata.namespace""#
    );
}
