//! A resource moves its storage from `v1alpha1` to `v1`: `preflight`'s
//! API versions check blocks a build that drops `v1alpha1` while objects
//! may be stored at it (and the server refuses such a CRD), and after
//! `migrate-storage` (every object rewritten, `storedVersions` cut to
//! `v1`) the check allows it and the server accepts the CRD without
//! `v1alpha1`, every object still readable. Against the embedded server or
//! the real kube-apiserver named by `FSM_REAL_APISERVER_KUBECONFIG`.

use crate::common::*;

use fsm_kube::cli::ApiVersions;
use fsm_kube::cli::migrate_storage::migrate_storage;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};

/// The test's CRD, its group unique to the test's namespace, with
/// `versions` (name, storage) served, no conversion (the schemas agree).
fn crd(group: &str, versions: &[(&str, bool)]) -> CustomResourceDefinition {
    let versions: Vec<serde_json::Value> = versions
        .iter()
        .map(|(name, storage)| {
            serde_json::json!({
                "name": name, "served": true, "storage": storage,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                }}},
            })
        })
        .collect();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("databases.{group}")},
        "spec": {
            "group": group,
            "names": {"kind": "Database", "plural": "databases", "listKind": "DatabaseList", "singular": "database"},
            "scope": "Namespaced",
            "versions": versions,
        },
    }))
    .expect("a CRD")
}

fn databases(env: &Env, group: &str, version: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, "Database"),
        "databases",
    );
    Api::namespaced_with(env.client.clone(), &env.ns, &resource)
}

async fn create(api: &Api<DynamicObject>, group: &str, version: &str, name: &str, size: i64) {
    let object: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": format!("{group}/{version}"),
        "kind": "Database",
        "metadata": {"name": name},
        "spec": {"size": size},
    }))
    .expect("an object");
    api.create(&PostParams::default(), &object)
        .await
        .expect("created");
}

#[tokio::test]
async fn migrate_storage_lets_a_build_drop_the_old_version() {
    let env = env().await;
    let group = format!("{}.migrate.operator-fsm.io", env.ns);
    let crds: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    let name = format!("databases.{group}");

    // Objects written while v1alpha1 is the storage version.
    env.cluster
        .install_crd(&crd(&group, &[("v1alpha1", true)]))
        .await
        .unwrap();
    let old = databases(&env, &group, "v1alpha1");
    for (i, object) in ["a", "b", "c"].into_iter().enumerate() {
        create(&old, &group, "v1alpha1", object, i as i64).await;
    }
    // The next build stores at v1 and still serves v1alpha1.
    env.cluster
        .install_crd(&crd(&group, &[("v1alpha1", false), ("v1", true)]))
        .await
        .unwrap();
    create(&databases(&env, &group, "v1"), &group, "v1", "d", 3).await;
    let cluster = crds.get(&name).await.unwrap();
    let stored = cluster
        .status
        .as_ref()
        .and_then(|s| s.stored_versions.clone());
    assert_eq!(stored, Some(vec!["v1alpha1".to_owned(), "v1".to_owned()]));

    // A build that drops v1alpha1: the check blocks it, the server refuses it.
    let v1_only = crd(&group, &[("v1", true)]);
    let check = ApiVersions::judge(&cluster, &v1_only, 4);
    assert!(!check.allows_this_build(), "{}", check.describe());
    assert_eq!(check.dropped_while_stored, ["v1alpha1"]);
    let mut dropped = cluster.clone();
    dropped.spec = v1_only.spec.clone();
    let refused = crds
        .replace(&name, &PostParams::default(), &dropped)
        .await
        .expect_err("the server refuses a CRD without a stored version");
    assert!(
        matches!(&refused, kube::Error::Api(status) if status.code == 422),
        "{refused:?}"
    );

    // A dry run counts and writes nothing.
    let dry = migrate_storage(&env.client, &name, true).await.unwrap();
    assert_eq!((dry.rewritten, dry.dry_run), (4, true));
    let unchanged = crds.get(&name).await.unwrap();
    assert_eq!(
        unchanged.status.and_then(|s| s.stored_versions),
        Some(vec!["v1alpha1".to_owned(), "v1".to_owned()])
    );

    let migration = migrate_storage(&env.client, &name, false).await.unwrap();
    assert_eq!(
        migration.rewritten + migration.written_since,
        4,
        "{migration:?}"
    );
    assert_eq!(migration.gone, 0);
    assert_eq!(migration.stored_after, ["v1"]);
    let migrated = crds.get(&name).await.unwrap();
    assert_eq!(
        migrated
            .status
            .as_ref()
            .and_then(|s| s.stored_versions.clone()),
        Some(vec!["v1".to_owned()])
    );
    assert!(ApiVersions::judge(&migrated, &v1_only, 4).allows_this_build());

    // Now the server takes the CRD without v1alpha1, and every object is
    // there at v1 with its data.
    env.cluster.install_crd(&v1_only).await.unwrap();
    let mut sizes: Vec<(String, i64)> = databases(&env, &group, "v1")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|o| {
            (
                o.metadata.name.clone().unwrap_or_default(),
                o.data["spec"]["size"].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    sizes.sort();
    assert_eq!(
        sizes,
        [
            ("a".into(), 0),
            ("b".into(), 1),
            ("c".into(), 2),
            ("d".into(), 3)
        ]
    );
    // A second run has nothing left to cut.
    let again = migrate_storage(&env.client, &name, false).await.unwrap();
    assert_eq!(again.stored_before, ["v1"]);
    assert_eq!(again.stored_after, ["v1"]);
    crds.delete(&name, &Default::default()).await.unwrap();
}
