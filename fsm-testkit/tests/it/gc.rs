//! Owner references and garbage collection through `kube::Api`.

use crate::common;

use common::{Widget, install, widget, within};
use fsm_testkit::ApiServer;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Resource, ResourceExt};
use serde_json::json;

fn owned_cm(name: &str, owner: &Widget, block: bool) -> ConfigMap {
    let mut oref = owner.controller_owner_ref(&()).unwrap();
    oref.block_owner_deletion = Some(block);
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.metadata.owner_references = Some(vec![oref]);
    cm
}

fn owned_deployment(name: &str, owner: &Widget) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name, "ownerReferences": [owner.controller_owner_ref(&()).unwrap()]},
        "spec": {"selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
    }))
    .unwrap()
}

async fn setup() -> (ApiServer, Api<Widget>, Api<ConfigMap>, Api<Deployment>) {
    let server = ApiServer::new();
    let client = server.client();
    install::<Widget>(&client).await;
    (
        server,
        Api::default_namespaced(client.clone()),
        Api::default_namespaced(client.clone()),
        Api::default_namespaced(client),
    )
}

#[tokio::test]
async fn background_deletion_collects_a_crs_configmap_and_deployment() {
    let (_server, widgets, cms, deployments) = setup().await;
    let owner = widgets
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .unwrap();
    let pp = PostParams::default();
    cms.create(&pp, &owned_cm("w-config", &owner, false))
        .await
        .unwrap();
    deployments
        .create(&pp, &owned_deployment("w-app", &owner))
        .await
        .unwrap();
    let mut bystander = ConfigMap::default();
    bystander.metadata.name = Some("unowned".into());
    cms.create(&pp, &bystander).await.unwrap();

    // The default policy is background.
    widgets.delete("w", &DeleteParams::default()).await.unwrap();
    let uid = owner.uid().unwrap();
    within(5, async {
        await_condition(widgets.clone(), "w", conditions::is_deleted(&uid))
            .await
            .unwrap();
    })
    .await;
    assert!(cms.get_opt("w-config").await.unwrap().is_none());
    assert!(deployments.get_opt("w-app").await.unwrap().is_none());
    assert!(cms.get_opt("unowned").await.unwrap().is_some());
}

#[tokio::test]
async fn a_dependent_with_another_owner_left_only_loses_the_reference() {
    let (_server, widgets, cms, _) = setup().await;
    let pp = PostParams::default();
    let a = widgets.create(&pp, &widget("a", 1)).await.unwrap();
    let b = widgets.create(&pp, &widget("b", 1)).await.unwrap();
    let mut cm = owned_cm("shared", &a, false);
    let mut bref: OwnerReference = b.controller_owner_ref(&()).unwrap();
    bref.controller = None;
    cm.metadata
        .owner_references
        .get_or_insert_with(Vec::new)
        .push(bref);
    cms.create(&pp, &cm).await.unwrap();
    widgets
        .delete("a", &DeleteParams::background())
        .await
        .unwrap();
    let left = cms.get("shared").await.unwrap();
    let refs = left.owner_references();
    assert_eq!(refs.len(), 1);
    assert_eq!(refs[0].uid, b.uid().unwrap());
    widgets.delete("b", &DeleteParams::default()).await.unwrap();
    assert!(cms.get_opt("shared").await.unwrap().is_none());
}

#[tokio::test]
async fn foreground_deletion_waits_for_blocking_dependents() {
    let (_server, widgets, cms, deployments) = setup().await;
    let pp = PostParams::default();
    let owner = widgets.create(&pp, &widget("w", 1)).await.unwrap();
    // A blocking dependent held by its own finalizer, and a non-blocking one.
    let mut held = owned_cm("held", &owner, true);
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    cms.create(&pp, &held).await.unwrap();
    deployments
        .create(&pp, &owned_deployment("w-app", &owner))
        .await
        .unwrap();

    let answer = widgets
        .delete("w", &DeleteParams::foreground())
        .await
        .unwrap();
    let deleting = answer.left().expect("foreground answers the held owner");
    assert_eq!(deleting.finalizers(), ["foregroundDeletion"]);
    assert!(deleting.meta().deletion_timestamp.is_some());

    // The non-blocking dependent is gone, the blocking one is terminating,
    // and the owner waits for it.
    assert!(deployments.get_opt("w-app").await.unwrap().is_none());
    let terminating = cms.get("held").await.unwrap();
    assert!(terminating.meta().deletion_timestamp.is_some());
    let waiting = widgets.get("w").await.unwrap();
    assert_eq!(waiting.finalizers(), ["foregroundDeletion"]);

    // Releasing the dependent releases the owner.
    let release = json!({"metadata": {"finalizers": null}});
    cms.patch("held", &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap();
    assert!(cms.get_opt("held").await.unwrap().is_none());
    assert!(widgets.get_opt("w").await.unwrap().is_none());
}

#[tokio::test]
async fn foreground_deletion_without_dependents_still_goes() {
    let (_server, widgets, _, _) = setup().await;
    widgets
        .create(&PostParams::default(), &widget("alone", 1))
        .await
        .unwrap();
    let answer = widgets
        .delete("alone", &DeleteParams::foreground())
        .await
        .unwrap();
    assert!(answer.is_left());
    assert!(widgets.get_opt("alone").await.unwrap().is_none());
}

#[tokio::test]
async fn orphan_deletion_strips_the_owner_reference() {
    let (_server, widgets, cms, deployments) = setup().await;
    let pp = PostParams::default();
    let owner = widgets.create(&pp, &widget("w", 1)).await.unwrap();
    cms.create(&pp, &owned_cm("w-config", &owner, true))
        .await
        .unwrap();
    deployments
        .create(&pp, &owned_deployment("w-app", &owner))
        .await
        .unwrap();
    let answer = widgets.delete("w", &DeleteParams::orphan()).await.unwrap();
    let held = answer
        .left()
        .expect("the owner, held by the orphan finalizer");
    assert_eq!(held.finalizers(), ["orphan"]);
    assert!(widgets.get_opt("w").await.unwrap().is_none());
    let cm = cms.get("w-config").await.unwrap();
    assert!(cm.metadata.owner_references.is_none(), "{cm:?}");
    let d = deployments.get("w-app").await.unwrap();
    assert!(d.metadata.owner_references.is_none());
}

#[tokio::test]
async fn an_unknown_policy_is_invalid() {
    let (server, _, cms, _) = setup().await;
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("x".into());
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let request = http::Request::delete("/api/v1/namespaces/default/configmaps/x")
        .header("content-type", "application/json")
        .body(br#"{"propagationPolicy":"Sideways"}"#.to_vec())
        .unwrap();
    let e = server
        .client()
        .request::<serde_json::Value>(request)
        .await
        .unwrap_err();
    let status = common::status(e);
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    assert!(cms.get_opt("x").await.unwrap().is_some());
    // The same policy as a query parameter (kubectl's `--cascade` sends
    // it so) is refused the same way.
    let request =
        http::Request::delete("/api/v1/namespaces/default/configmaps/x?propagationPolicy=Sideways")
            .body(Vec::new())
            .unwrap();
    let e = server
        .client()
        .request::<serde_json::Value>(request)
        .await
        .unwrap_err();
    assert_eq!(common::status(e).code, 422);
    assert!(cms.get_opt("x").await.unwrap().is_some());
}

/// A ConfigMap whose one owner reference names `uid` under `name` (a
/// Widget that may not exist).
fn cm_owned_by(name: &str, owners: &[(&str, &str)]) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.metadata.owner_references = Some(
        owners
            .iter()
            .map(|(owner, uid)| OwnerReference {
                api_version: "example.com/v1".into(),
                kind: "Widget".into(),
                name: (*owner).into(),
                uid: (*uid).into(),
                ..OwnerReference::default()
            })
            .collect(),
    );
    cm
}

#[tokio::test]
async fn a_written_dangling_reference_is_collected() {
    let (_server, widgets, cms, _) = setup().await;
    let owner = widgets
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .unwrap();
    let live = owner.uid().unwrap();
    let pp = PostParams::default();
    cms.create(&pp, &cm_owned_by("gone", &[("ghost", "no-such-uid")]))
        .await
        .unwrap();
    cms.create(
        &pp,
        &cm_owned_by("kept", &[("w", &live), ("ghost", "no-such-uid")]),
    )
    .await
    .unwrap();
    // The right uid under another name is not the owner either.
    cms.create(&pp, &cm_owned_by("misnamed", &[("other", &live)]))
        .await
        .unwrap();
    within(5, async {
        loop {
            let kept = cms.get("kept").await.unwrap();
            if cms.get_opt("gone").await.unwrap().is_none()
                && cms.get_opt("misnamed").await.unwrap().is_none()
                && kept.metadata.owner_references.as_ref().map(Vec::len) == Some(1)
            {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await;
    let refs = cms.get("kept").await.unwrap().metadata.owner_references;
    assert_eq!(refs.unwrap()[0].uid, live);
}

#[tokio::test]
async fn the_collector_looks_at_each_written_object_once_however_many_are_stored() {
    // Issue 19: the collector swept every stored object after each write
    // of a dependent, so converging N owners' dependents cost O(N²).
    let (server, widgets, cms, _) = setup().await;
    let owner = widgets
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .unwrap();
    let writes: u64 = 40;
    let pp = PostParams::default();
    for i in 0..writes {
        cms.create(&pp, &owned_cm(&format!("cm-{i}"), &owner, false))
            .await
            .unwrap();
    }
    // Unowned objects are never looked at.
    let mut bystander = ConfigMap::default();
    bystander.metadata.name = Some("unowned".into());
    cms.create(&pp, &bystander).await.unwrap();
    within(5, async {
        while server.cluster().garbage_collector_checks() < writes {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await;
    // One look per write and no more (a sweep of every stored object
    // after each write would have made 40 × 41 / 2 = 820 and more).
    assert_eq!(server.cluster().garbage_collector_checks(), writes);
    assert_eq!(cms.list(&Default::default()).await.unwrap().items.len(), 41);
}
