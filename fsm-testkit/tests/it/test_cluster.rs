//! `TestCluster`'s own set-up helpers, on the embedded server or, when
//! `FSM_REAL_APISERVER_KUBECONFIG` is set, on a real kube-apiserver: tests
//! that run side by side install the same CRDs and must not trip over each
//! other.

use std::time::{SystemTime, UNIX_EPOCH};

use fsm_testkit::TestCluster;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use kube::discovery::ApiResource;

/// A group no earlier run used, so that on a shared real server the CRD is
/// brand new, as it is in CI's first test.
fn fresh_group() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("g{}x{nanos}.testkit.operator-fsm.io", std::process::id())
}

/// A namespaced CRD of kind `Probe` in `group`, whose spec has `fields`.
fn probe_crd(group: &str, fields: &[&str]) -> CustomResourceDefinition {
    let properties: serde_json::Map<String, serde_json::Value> = fields
        .iter()
        .map(|f| ((*f).to_owned(), serde_json::json!({ "type": "string" })))
        .collect();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": format!("probes.{group}") },
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": { "plural": "probes", "singular": "probe", "kind": "Probe", "listKind": "ProbeList" },
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "schema": { "openAPIV3Schema": {
                    "type": "object",
                    "properties": { "spec": { "type": "object", "properties": properties } }
                } }
            }]
        }
    }))
    .expect("a well-formed CRD")
}

fn probes(cluster: &TestCluster, group: &str) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: group.to_owned(),
        version: "v1".to_owned(),
        api_version: format!("{group}/v1"),
        kind: "Probe".to_owned(),
        plural: "probes".to_owned(),
    };
    Api::all_with(cluster.client(), &resource)
}

/// The failure CI met on the real server: two tests installing one new CRD
/// at once, the second's replace refused with 409 because the server had
/// just updated the definition's status. Every installer must succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_tests_installing_one_new_crd_at_once_all_succeed() {
    let cluster = TestCluster::from_env().await.unwrap();
    let group = fresh_group();
    let crd = probe_crd(&group, &["color"]);
    let installs = (0..8).map(|_| cluster.install_crd(&crd));
    for result in futures::future::join_all(installs).await {
        result.unwrap();
    }
    probes(&cluster, &group)
        .list(&ListParams::default())
        .await
        .unwrap();

    // A later install with a changed spec replaces the definition.
    let changed = probe_crd(&group, &["color", "size"]);
    cluster.install_crd(&changed).await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client());
    let stored = crds.get(&format!("probes.{group}")).await.unwrap();
    let schema = serde_json::to_value(&stored.spec.versions[0].schema).unwrap();
    assert_eq!(
        schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["size"]["type"], "string",
        "the changed schema is stored: {schema}"
    );

    crds.delete(&format!("probes.{group}"), &DeleteParams::default())
        .await
        .unwrap();
}

/// Namespaces made from one prefix never collide.
#[tokio::test]
async fn namespaces_from_one_prefix_are_distinct() {
    let cluster = TestCluster::from_env().await.unwrap();
    let first = cluster.create_namespace("twins").await.unwrap();
    let second = cluster.create_namespace("twins").await.unwrap();
    assert_ne!(first, second);
    assert!(first.starts_with("twins-"), "{first}");
}
