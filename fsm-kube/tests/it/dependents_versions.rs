//! A dependent whose owner reference was written at an older version of
//! the owner's type (before the operator moved from `v1alpha1` to `v1`)
//! still wakes its owner: `owns_dependents` matches references on group
//! and kind, where kube's `Controller::owns` matches the exact
//! `apiVersion`. Against the embedded server or the real kube-apiserver
//! named by `FSM_REAL_APISERVER_KUBECONFIG`.

use crate::common::*;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use fsm_kube::dependents::{DEPENDENT_LABEL, DependentsRuntime};
use fsm_kube::store::{MANAGED_BY_LABEL, OWNER_UID_LABEL};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use tokio::sync::mpsc;

/// A ConfigMap labelled as `owner`'s dependent, its controller owner
/// reference written at `api_version`.
fn dependent_of(owner: &Widget, name: &str, api_version: &str) -> ConfigMap {
    let uid = owner.uid().unwrap_or_default();
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([
                (MANAGED_BY_LABEL.0.to_owned(), MANAGED_BY_LABEL.1.to_owned()),
                (DEPENDENT_LABEL.to_owned(), "config".to_owned()),
                (OWNER_UID_LABEL.to_owned(), uid.clone()),
            ])),
            owner_references: Some(vec![OwnerReference {
                api_version: api_version.into(),
                kind: Widget::kind(&()).into_owned(),
                name: owner.name_any(),
                uid,
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("v".to_owned(), "1".to_owned())])),
        ..ConfigMap::default()
    }
}

/// The next Widget reconciled, by name, within 30 s.
async fn next_reconciled(rx: &mut mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .expect("a reconcile within 30 s")
        .expect("the controller runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependent_referencing_an_older_version_of_its_owner_wakes_it() {
    let env = env().await;
    let owner = create_widget(&env, "upgraded", WidgetSpec::colored("c")).await;
    let group = Widget::group(&());
    let old_version = format!("{group}/v1alpha1");
    assert_ne!(old_version, Widget::api_version(&()), "an older version");
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    configmaps
        .create(
            &PostParams::default(),
            &dependent_of(&owner, "upgraded-config", &old_version),
        )
        .await
        .unwrap();

    let runtime = DependentsRuntime::new(env.client.clone()).field_manager("versions-test");
    let (tx, mut rx) = mpsc::unbounded_channel();
    let controller = widgets_owning_configmaps(&env.client, &env.ns, &runtime)
        .run(
            move |widget: Arc<Widget>, _| {
                let tx = tx.clone();
                async move {
                    let _ = tx.send(widget.name_any());
                    Ok::<_, kube::Error>(Action::await_change())
                }
            },
            |_, _, _| Action::await_change(),
            Arc::new(()),
        )
        .for_each(|_| async {});
    let controller = tokio::spawn(controller);

    // Every object is reconciled once when the controller starts.
    assert_eq!(next_reconciled(&mut rx).await, "upgraded");
    // Then only a change wakes it: the dependent's, through its old
    // reference.
    configmaps
        .patch(
            "upgraded-config",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "data": { "v": "2" } })),
        )
        .await
        .unwrap();
    assert_eq!(next_reconciled(&mut rx).await, "upgraded");
    controller.abort();
}
