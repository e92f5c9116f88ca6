//! Custom resources pruned and validated by their CRD's schema, through
//! `kube::Api`, on create, update, patch and the status subresource.

use crate::common;

use common::{Widget, install, status, widget};
use fsm_testkit::ApiServer;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

async fn setup() -> (ApiServer, Api<Widget>, Api<DynamicObject>) {
    let server = ApiServer::new();
    let client = server.client();
    install::<Widget>(&client).await;
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"));
    (
        server,
        Api::default_namespaced(client.clone()),
        Api::default_namespaced_with(client, &ar),
    )
}

fn raw(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": name}, "spec": spec, "topLevel": "dropped"
    }))
    .unwrap()
}

#[tokio::test]
async fn unknown_fields_are_pruned_on_create_update_and_patch() {
    let (_server, _, dynamic) = setup().await;
    let created = dynamic
        .create(
            &PostParams::default(),
            &raw("p", json!({"size": 1, "unknown": "x"})),
        )
        .await
        .unwrap();
    assert_eq!(created.data["spec"], json!({"size": 1}));
    assert!(created.data.get("topLevel").is_none());

    let mut edited = created.clone();
    edited.data["spec"]["alsoUnknown"] = json!(true);
    edited.data["spec"]["size"] = json!(2);
    let updated = dynamic
        .replace("p", &PostParams::default(), &edited)
        .await
        .unwrap();
    assert_eq!(updated.data["spec"], json!({"size": 2}));

    let patch = json!({"spec": {"size": 3, "bogus": 1}});
    let patched = dynamic
        .patch("p", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(patched.data["spec"], json!({"size": 3}));
    // Only `size` changed each time the generation moved.
    assert_eq!(patched.metadata.generation, Some(3));
}

#[tokio::test]
async fn wrong_types_and_missing_fields_are_422_naming_the_field() {
    let (_server, _, dynamic) = setup().await;
    let e = dynamic
        .create(&PostParams::default(), &raw("bad", json!({"size": "big"})))
        .await
        .unwrap_err();
    let s = status(e);
    assert_eq!(s.code, 422);
    assert_eq!(s.reason, "Invalid");
    assert_eq!(
        s.message,
        r#"Widget.example.com "bad" is invalid: spec.size: Invalid value: "string": spec.size in body must be of type integer: "string""#
    );
    let e = dynamic
        .create(&PostParams::default(), &raw("empty", json!({})))
        .await
        .unwrap_err();
    let s = status(e);
    assert_eq!(s.code, 422);
    assert!(
        s.message.ends_with("spec.size: Required value"),
        "{}",
        s.message
    );

    // A patch that breaks the schema is refused and changes nothing.
    dynamic
        .create(&PostParams::default(), &raw("ok", json!({"size": 1})))
        .await
        .unwrap();
    let patch = json!({"spec": {"size": [1]}});
    let e = dynamic
        .patch("ok", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_err();
    assert_eq!(status(e).code, 422);
    assert_eq!(dynamic.get("ok").await.unwrap().data["spec"]["size"], 1);
}

#[tokio::test]
async fn a_status_field_absent_from_the_schema_is_dropped() {
    let (_server, widgets, _) = setup().await;
    widgets
        .create(&PostParams::default(), &widget("s", 1))
        .await
        .unwrap();
    let write = json!({"status": {"ready": true, "phase": "Running", "observedGeneration": 1}});
    let patched = widgets
        .patch_status("s", &PatchParams::default(), &Patch::Merge(&write))
        .await
        .unwrap();
    let back = widgets.get_status("s").await.unwrap();
    assert_eq!(patched.status, back.status);
    let raw: Value = serde_json::to_value(&back).unwrap();
    assert_eq!(
        raw["status"],
        json!({"ready": true}),
        "undeclared fields (phase, observedGeneration in camelCase) are lost"
    );
    let wrong = json!({"status": {"ready": "yes"}});
    let e = widgets
        .patch_status("s", &PatchParams::default(), &Patch::Merge(&wrong))
        .await
        .unwrap_err();
    let s = status(e);
    assert_eq!(s.code, 422);
    assert!(
        s.message
            .contains("status.ready in body must be of type boolean"),
        "{}",
        s.message
    );
}

#[tokio::test]
async fn preserve_unknown_fields_keeps_what_it_covers() {
    let server = ApiServer::new();
    let client = server.client();
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    let crd = serde_json::from_value(json!({
        "metadata": {"name": "things.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "things", "kind": "Thing"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "mode": {"type": "string", "enum": ["fast", "slow"]},
                        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}
    }))
    .unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Thing"));
    let things: Api<DynamicObject> = Api::default_namespaced_with(client, &ar);
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t"},
        "spec": {"mode": "fast", "extra": {"kept": {"deep": true}}, "dropped": 1}
    }))
    .unwrap();
    let created = things.create(&PostParams::default(), &obj).await.unwrap();
    assert_eq!(
        created.data["spec"],
        json!({"mode": "fast", "extra": {"kept": {"deep": true}}})
    );
    let write = json!({"status": {"anything": {"goes": [1, 2]}}});
    let patched = things
        .patch_status("t", &PatchParams::default(), &Patch::Merge(&write))
        .await
        .unwrap();
    assert_eq!(patched.data["status"], write["status"]);
    let mut bad = obj.clone();
    bad.metadata.name = Some("u".into());
    bad.data["spec"]["mode"] = json!("medium");
    let e = things
        .create(&PostParams::default(), &bad)
        .await
        .unwrap_err();
    let s = status(e);
    assert_eq!(s.code, 422);
    assert!(
        s.message.ends_with(
            r#"spec.mode: Unsupported value: "medium": supported values: "fast", "slow""#
        ),
        "{}",
        s.message
    );
}
