//! Saga scopes through a real `Controller`, on the embedded API server or
//! the real kube-apiserver named by `FSM_REAL_APISERVER_KUBECONFIG`: a
//! `Shop` whose deployment (a ConfigMap holding the version it runs) is
//! upgraded a hundred times under `on_spec_change = continue`. A failed
//! upgrade after finished ones rolls back only itself, the record's trail
//! stays bounded, reverting the spec recovers the failed shop, and
//! deleting it undoes the latest upgrade and the provisioning, once each.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fsm_kube::fsm_core::StateRecord;
use fsm_kube::prelude::*;
use fsm_kube::{FsmReconciler, FsmStatus, StatusStore};
use fsm_testkit::TestCluster;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::{Controller, watcher};
use kube::{Client, CustomResource, CustomResourceExt, ResourceExt};

use crate::common::eventually;

/// The version the shop should run, and the versions whose migration
/// fails (a stand-in for a schema migration that breaks).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "test.operator-fsm.io",
    version = "v1",
    kind = "Shop",
    namespaced
)]
#[kube(status = "ShopStatus")]
pub struct ShopSpec {
    pub version: u32,
    #[serde(default)]
    pub broken: Vec<u32>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ShopStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fsm: Option<FsmStatus>,
}

#[derive(Debug, thiserror::Error)]
enum ShopError {
    #[error("migration to v{0} failed")]
    Migration(u32),
    #[error(transparent)]
    Kube(#[from] kube::Error),
}

impl Classify for ShopError {
    fn class(&self) -> ErrorClass {
        match self {
            ShopError::Migration(_) => ErrorClass::Permanent,
            ShopError::Kube(_) => ErrorClass::Retryable { retry_after: None },
        }
    }
}

struct Ctx {
    client: Client,
    log: Mutex<Vec<String>>,
}

#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = Shop, context = Ctx, error = ShopError)]
#[fsm(on_spec_change = continue, on_delete = compensate)]
enum ShopState {
    #[fsm(initial, handler = provision, compensate = deprovision, next(Serving))]
    Provisioning,
    #[fsm(handler = migrate, compensate = roll_back, next(Serving))]
    Migrating { from: u32, to: u32 },
    #[fsm(ready, handler = serve, next(Migrating))]
    Serving { version: u32 },
    #[fsm(failed)]
    Failed,
}

/// The shop's deployment: its namespace's ConfigMaps and the name of its
/// own.
fn app(cx: &Step<'_, ShopState>) -> (Api<ConfigMap>, String) {
    let shop = cx.resource();
    let api = Api::namespaced(
        cx.context().client.clone(),
        &shop.namespace().unwrap_or_default(),
    );
    (api, format!("{}-app", shop.name_any()))
}

/// Runs `version` on the shop's deployment: server-side apply, so a
/// repeated call changes nothing.
async fn deploy((api, name): (Api<ConfigMap>, String), version: u32) -> Result<(), ShopError> {
    let app = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"version": version.to_string()},
    });
    api.patch(
        &name,
        &PatchParams::apply("shop-operator").force(),
        &Patch::Apply(&app),
    )
    .await?;
    Ok(())
}

fn note(cx: &Step<'_, ShopState>, line: String) {
    cx.context().log.lock().unwrap().push(line);
}

async fn provision(cx: &mut Step<'_, ShopState>) -> Result<Transition<ShopState>, ShopError> {
    let version = cx.resource().spec.version;
    deploy(app(cx), version).await?;
    note(cx, format!("provision v{version}"));
    Ok(Transition::next(ShopState::Serving { version }))
}

async fn deprovision(cx: &mut Step<'_, ShopState>) -> Result<(), ShopError> {
    let (api, name) = app(cx);
    match api.delete(&name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => return Err(e.into()),
    }
    note(cx, "deprovision".to_owned());
    Ok(())
}

async fn migrate(
    cx: &mut Step<'_, ShopState>,
    from: &u32,
    to: &u32,
) -> Result<Transition<ShopState>, ShopError> {
    // The migration gets half way (the new version is deployed) before
    // it finds out it cannot finish.
    deploy(app(cx), *to).await?;
    if cx.resource().spec.broken.contains(to) {
        return Err(ShopError::Migration(*to));
    }
    note(cx, format!("migrate v{from}->v{to}"));
    Ok(Transition::next(ShopState::Serving { version: *to }))
}

async fn roll_back(cx: &mut Step<'_, ShopState>, from: &u32, to: &u32) -> Result<(), ShopError> {
    deploy(app(cx), *from).await?;
    note(cx, format!("roll back v{to}->v{from}"));
    Ok(())
}

async fn serve(
    cx: &mut Step<'_, ShopState>,
    version: &u32,
) -> Result<Transition<ShopState>, ShopError> {
    let wanted = cx.resource().spec.version;
    if wanted == *version {
        return Ok(Transition::stay());
    }
    Ok(Transition::next(ShopState::Migrating {
        from: *version,
        to: wanted,
    }))
}

/// The shop's record as its status holds it.
async fn record(shops: &Api<Shop>, name: &str) -> Option<StateRecord> {
    let shop = shops.get(name).await.ok()?;
    shop.status?.fsm?.record::<ShopState>().ok()
}

/// Waits until the shop's record is in `state` with `observed_generation`
/// at least `generation`.
async fn wait_for(shops: &Api<Shop>, name: &str, state: &str, generation: i64) -> StateRecord {
    eventually(
        &format!("{name} in {state} for generation {generation}"),
        || async {
            let r = record(shops, name).await?;
            (r.state == state && r.observed_generation >= Some(generation)).then_some(r)
        },
    )
    .await
}

/// The version the shop's deployment runs, if it exists.
async fn deployed(client: &Client, ns: &str, name: &str) -> Option<String> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let app = api.get_opt(&format!("{name}-app")).await.ok()??;
    app.data?.get("version").cloned()
}

/// Asks for `version` (with `broken` migrations); the new generation.
async fn ask_for(shops: &Api<Shop>, name: &str, version: u32, broken: &[u32]) -> i64 {
    let patch = serde_json::json!({"spec": {"version": version, "broken": broken}});
    let shop = shops
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    shop.metadata.generation.expect("a generation")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_lived_object_undoes_only_the_upgrade_that_failed_and_recovers() {
    crate::common::init_tracing();
    let cluster = TestCluster::from_env().await.unwrap();
    cluster.install_crd(&Shop::crd()).await.unwrap();
    let ns = cluster.create_namespace("fsm-kube-scopes").await.unwrap();
    let client = cluster.client();
    let shops: Api<Shop> = Api::namespaced(client.clone(), &ns);

    let ctx = Arc::new(Ctx {
        client: client.clone(),
        log: Mutex::new(Vec::new()),
    });
    let fsm = FsmReconciler::<ShopState>::builder(client.clone(), StatusStore::default())
        .options(
            ReconcilerOptions::default()
                .poll_interval(Duration::from_secs(3600))
                .error_requeue(Duration::from_millis(100)),
        )
        .build();
    let controller = tokio::spawn(
        Controller::new(shops.clone(), watcher::Config::default())
            .run(fsm.reconcile(), fsm.error_policy(), ctx.clone())
            .for_each(|_| async {}),
    );
    let take_log = || std::mem::take(&mut *ctx.log.lock().unwrap());

    let shop = Shop::new(
        "corner",
        ShopSpec {
            version: 1,
            broken: Vec::new(),
        },
    );
    let created = shops.create(&PostParams::default(), &shop).await.unwrap();
    wait_for(
        &shops,
        "corner",
        "Serving",
        created.metadata.generation.unwrap(),
    )
    .await;

    // A hundred upgrades that finish: each closes its scope, and the trail
    // keeps one closed entry per compensable state.
    const LAST: u32 = 101;
    let last = LAST.to_string();
    for version in 2..=LAST {
        let generation = ask_for(&shops, "corner", version, &[]).await;
        let r = wait_for(&shops, "corner", "Serving", generation).await;
        assert_eq!(r.data, Some(serde_json::json!({"version": version})));
        let trail: Vec<(&str, bool)> = r
            .trail
            .iter()
            .map(|e| (e.state.as_str(), e.closed))
            .collect();
        assert_eq!(
            trail,
            [("Provisioning", true), ("Migrating", true)],
            "after v{version}"
        );
    }
    assert_eq!(deployed(&client, &ns, "corner").await, Some(last.clone()));
    assert_eq!(
        take_log().len(),
        LAST as usize,
        "provision and a hundred migrations"
    );

    // v101 -> v102 fails half way: only it is rolled back.
    let generation = ask_for(&shops, "corner", LAST + 1, &[LAST + 1]).await;
    let failed = wait_for(&shops, "corner", "Failed", generation).await;
    assert_eq!(
        failed.last_error.as_deref(),
        Some("migration to v102 failed")
    );
    assert_eq!(take_log(), ["roll back v102->v101"]);
    assert_eq!(deployed(&client, &ns, "corner").await, Some(last.clone()));

    // A person reverts the spec: the failed shop recovers
    // (`on_failed_spec_change = restart`, the default): the workflow
    // starts again for the new spec and adopts the deployment.
    let generation = ask_for(&shops, "corner", LAST, &[]).await;
    let recovered = wait_for(&shops, "corner", "Serving", generation).await;
    assert_eq!(recovered.data, Some(serde_json::json!({"version": LAST})));
    assert_eq!(recovered.last_error, None);
    assert_eq!(take_log(), ["provision v101"]);
    assert_eq!(deployed(&client, &ns, "corner").await, Some(last.clone()));

    // Deleting the shop undoes the latest finished upgrade and the
    // provisioning, once each, the last built first.
    shops
        .delete("corner", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the shop gone", || async {
        shops
            .get_opt("corner")
            .await
            .ok()
            .and_then(|s| s.is_none().then_some(()))
    })
    .await;
    assert_eq!(take_log(), ["roll back v101->v100", "deprovision"]);
    assert_eq!(deployed(&client, &ns, "corner").await, None);
    controller.abort();
}
