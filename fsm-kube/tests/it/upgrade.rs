//! Upgrading an operator whose objects are half-way through their
//! workflows, on the embedded API server or the real kube-apiserver named
//! by `FSM_REAL_APISERVER_KUBECONFIG`: two builds of one machine (v1, and
//! v2 with a state renamed, a state removed and migrated, a field added).
//! Every store round-trips the record's machine version and writes a
//! migrated record back once; a v1 replica leaves a v2 record untouched
//! and says so on the object; replicas of both builds hand the Lease over
//! back and forth (a rolling update, then a rollback, then the update
//! again) and every object ends where v2 takes it, with nothing that must
//! run once run twice; `preflight` judges a mix of records without
//! writing.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Env, Widget, WidgetSpec, env, eventually};
use fsm_kube::cli::preflight::Verdict;
use fsm_kube::cli::{Command, Error, Operator, OutputFormat, PreflightArgs, StoreKind};
use fsm_kube::fsm_core::{EphemeralStore, Fsm, ObjectKey};
use fsm_kube::leader::run_while_leader_until;
use fsm_kube::prelude::*;
use fsm_kube::store::{
    MANAGED_BY_LABEL, OWNER_LABEL, OWNER_UID_LABEL, RecordObject, record_object_name_for,
};
use fsm_kube::{ConfigMapStore, FsmReconciler, KubeStore, SecretStore, StatusStore, conditions};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::{Controller, watcher};
use kube::{Client, Resource, ResourceExt};
use serde_json::{Value, json};

/// The world both builds act on: which objects' instances have booted,
/// which may be seeded, and how often each once-only call ran.
#[derive(Default)]
pub struct Cloud {
    booted: Mutex<BTreeSet<String>>,
    seedable: Mutex<BTreeSet<String>>,
    calls: Mutex<BTreeMap<String, u32>>,
}

impl Cloud {
    fn once(&self, call: &str, object: &str) {
        *self
            .calls
            .lock()
            .unwrap()
            .entry(format!("{call} {object}"))
            .or_default() += 1;
    }
    fn calls(&self) -> BTreeMap<String, u32> {
        self.calls.lock().unwrap().clone()
    }
    fn booted(&self, object: &str) -> bool {
        self.booted.lock().unwrap().contains(object)
    }
    fn seedable(&self, object: &str) -> bool {
        self.seedable.lock().unwrap().contains(object)
    }
    fn boot(&self, objects: &[&str]) {
        let mut booted = self.booted.lock().unwrap();
        booted.extend(objects.iter().map(|o| (*o).to_owned()));
    }
    fn allow_seeding(&self, objects: &[&str]) {
        let mut seedable = self.seedable.lock().unwrap();
        seedable.extend(objects.iter().map(|o| (*o).to_owned()));
    }
}

#[derive(Debug, thiserror::Error)]
#[error("the cloud failed")]
/// The handlers' error (never returned).
pub struct CloudError;
impl Classify for CloudError {}

/// How long a gated handler waits before it looks again.
const GATE: Duration = Duration::from_millis(30);

/// Build 1: Requested → Provisioning (until booted) → Seeding (until it may
/// seed; seeds and leaves in one step) → Ready.
mod v1 {
    use super::*;

    #[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
    #[fsm(resource = Widget, context = Cloud, error = CloudError)]
    pub enum Deploy {
        #[fsm(initial, handler = request, next(Provisioning))]
        Requested,
        #[fsm(handler = provisioning, next(Seeding))]
        Provisioning { id: String },
        #[fsm(handler = seeding, next(Ready))]
        Seeding { id: String },
        #[fsm(final, ready)]
        Ready { id: String },
        #[fsm(failed)]
        Failed,
    }

    async fn request(cx: &mut Step<'_, Deploy>) -> Result<Transition<Deploy>, CloudError> {
        let name = cx.resource().name_any();
        cx.context().once("create", &name);
        Ok(Transition::next(Deploy::Provisioning {
            id: format!("i-{name}"),
        }))
    }

    async fn provisioning(
        cx: &mut Step<'_, Deploy>,
        id: &str,
    ) -> Result<Transition<Deploy>, CloudError> {
        Ok(if cx.context().booted(&cx.resource().name_any()) {
            Transition::next(Deploy::Seeding { id: id.to_owned() })
        } else {
            Transition::wait(GATE)
        })
    }

    async fn seeding(
        cx: &mut Step<'_, Deploy>,
        id: &str,
    ) -> Result<Transition<Deploy>, CloudError> {
        let name = cx.resource().name_any();
        if !cx.context().seedable(&name) {
            return Ok(Transition::wait(GATE));
        }
        cx.context().once("seed", &name);
        Ok(Transition::next(Deploy::Ready { id: id.to_owned() }))
    }
}

/// Build 2: `Provisioning` renamed `Starting`; `Seeding` removed for
/// `Loading` (the migration maps one onto the other: a `Seeding` record
/// had not seeded yet); `Ready` gained a field with a serde default.
mod v2 {
    use super::*;
    use fsm_kube::fsm_core::{Migrated, MigrationError, OldRecord};

    #[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
    #[fsm(resource = Widget, context = Cloud, error = CloudError)]
    #[fsm(version = 2, migrate = migrate)]
    pub enum Deploy {
        #[fsm(initial, handler = request, next(Starting))]
        Requested,
        #[fsm(handler = starting, next(Loading), renamed_from = "Provisioning")]
        Starting { id: String },
        #[fsm(handler = loading, next(Ready))]
        Loading { id: String, batch: u32 },
        #[fsm(final, ready)]
        Ready {
            id: String,
            #[serde(default)]
            tier: String,
        },
        #[fsm(failed)]
        Failed,
    }

    fn migrate(old: OldRecord<'_>) -> Result<Migrated<Deploy>, MigrationError> {
        match (old.version, old.state) {
            (1, "Seeding") => {
                let id = old
                    .data
                    .and_then(|d| d.get("id"))
                    .and_then(Value::as_str)
                    .ok_or_else(|| MigrationError::new("Seeding without an id"))?;
                Ok(Migrated::To(Deploy::Loading {
                    id: id.to_owned(),
                    batch: 0,
                }))
            }
            _ => Ok(Migrated::Keep),
        }
    }

    async fn request(cx: &mut Step<'_, Deploy>) -> Result<Transition<Deploy>, CloudError> {
        let name = cx.resource().name_any();
        cx.context().once("create", &name);
        Ok(Transition::next(Deploy::Starting {
            id: format!("i-{name}"),
        }))
    }

    async fn starting(
        cx: &mut Step<'_, Deploy>,
        id: &str,
    ) -> Result<Transition<Deploy>, CloudError> {
        Ok(if cx.context().booted(&cx.resource().name_any()) {
            Transition::next(Deploy::Loading {
                id: id.to_owned(),
                batch: 0,
            })
        } else {
            Transition::wait(GATE)
        })
    }

    async fn loading(
        cx: &mut Step<'_, Deploy>,
        id: &str,
        _batch: &u32,
    ) -> Result<Transition<Deploy>, CloudError> {
        let name = cx.resource().name_any();
        if !cx.context().seedable(&name) {
            return Ok(Transition::wait(GATE));
        }
        cx.context().once("seed", &name);
        Ok(Transition::next(Deploy::Ready {
            id: id.to_owned(),
            tier: "standard".to_owned(),
        }))
    }
}

// ------------------------------------------------------------ helpers

/// Where a test keeps its records.
#[derive(Clone)]
enum Where {
    Status,
    ConfigMap,
    Secret,
    /// Process memory, shared by the replicas of the test (as if one
    /// process ran both builds, which is the only way memory outlives a
    /// build).
    Memory(Arc<EphemeralStore>),
}

impl Where {
    /// A store: a new one per replica (its own caches), but the same
    /// memory.
    fn store(&self, client: &Client) -> Arc<dyn KubeStore<Widget>> {
        match self {
            Where::Status => Arc::new(StatusStore::new()),
            Where::ConfigMap => Arc::new(ConfigMapStore::new(client.clone())),
            Where::Secret => Arc::new(SecretStore::new(client.clone())),
            Where::Memory(memory) => memory.clone(),
        }
    }

    /// The stored record of widget `name`, as JSON.
    async fn record(&self, env: &Env, name: &str) -> Option<Value> {
        let widgets: Api<Widget> = Api::namespaced(env.client.clone(), &env.ns);
        let widget = widgets.get_opt(name).await.ok()??;
        let text = match self {
            Where::Status => return Some(widget.status?.fsm?.to_value()),
            Where::ConfigMap => record_text::<ConfigMap>(env, name).await?,
            Where::Secret => record_text::<Secret>(env, name).await?,
            Where::Memory(memory) => {
                let key = ObjectKey::cluster(widget.metadata.uid?);
                return Some(memory.get_raw(&key)?.as_json());
            }
        };
        serde_json::from_str(&text).ok()
    }
}

async fn record_text<O: RecordObject>(env: &Env, name: &str) -> Option<String> {
    let api: Api<O> = Api::namespaced(env.client.clone(), &env.ns);
    let object = api
        .get_opt(&record_object_name_for::<v1::Deploy>(name))
        .await
        .ok()??;
    object.record_text()?.ok()
}

fn state(record: &Value) -> &str {
    record["state"].as_str().unwrap_or_default()
}

/// The record's machine version (absent: 1).
fn version(record: &Value) -> u64 {
    record
        .get("machineVersion")
        .map_or(1, |v| v.as_u64().unwrap())
}

fn reconciler<S>(env: &Env, place: &Where) -> FsmReconciler<S>
where
    S: Fsm<Resource = Widget, Context = Cloud>,
{
    FsmReconciler::<S>::builder(env.client.clone(), place.store(&env.client))
        .options(
            ReconcilerOptions::default()
                .poll_interval(Duration::from_secs(3600))
                .error_requeue(Duration::from_millis(100)),
        )
        .build()
}

async fn widget(env: &Env, name: &str) -> Arc<Widget> {
    let widgets: Api<Widget> = Api::namespaced(env.client.clone(), &env.ns);
    Arc::new(widgets.get(name).await.unwrap())
}

/// Reconciles `name` with `fsm` until its record is in `wanted` (at most
/// 20 times; the watch of an object store may lag a reconcile or two).
async fn drive<S>(
    fsm: &FsmReconciler<S>,
    env: &Env,
    place: &Where,
    cloud: &Arc<Cloud>,
    name: &str,
    wanted: &str,
) -> Value
where
    S: Fsm<Resource = Widget, Context = Cloud>,
{
    for _ in 0..40 {
        if let Some(record) = place.record(env, name).await
            && state(&record) == wanted
        {
            return record;
        }
        fsm.reconcile_object(widget(env, name).await, cloud.clone())
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!(
        "{name} did not reach {wanted}: {:?}",
        place.record(env, name).await
    );
}

/// The events of `reason` about widget `name`.
async fn events(env: &Env, name: &str, reason: &str) -> Vec<Event> {
    common::events_about(&env.client, &env.ns, name, reason).await
}

/// The `Degraded` condition of widget `name`.
async fn degraded(env: &Env, name: &str) -> Option<(String, String)> {
    let widget = widget(env, name).await;
    common::condition(&widget, "Degraded").map(|c| (c.status.clone(), c.reason.clone()))
}

// ------------------------------------------------------------ stores

/// Build 1 leaves an object in `Seeding`; build 2 migrates its record to
/// `Loading`, written back once with machine version 2; build 1 then
/// leaves that record untouched and says so (condition, one event); build
/// 2 takes the object to its end and clears what build 1 said.
async fn each_store_keeps_the_version_and_writes_a_migration_back_once(place: Where) {
    let env = env().await;
    let cloud = Arc::new(Cloud::default());
    common::create_widget(&env, "w", WidgetSpec::colored("blue")).await;
    cloud.boot(&["w"]);

    let old = reconciler::<v1::Deploy>(&env, &place);
    let seeding = drive(&old, &env, &place, &cloud, "w", "Seeding").await;
    assert_eq!(seeding.get("machineVersion"), None, "version 1 is left out");

    let new = reconciler::<v2::Deploy>(&env, &place);
    let loading = drive(&new, &env, &place, &cloud, "w", "Loading").await;
    assert_eq!(version(&loading), 2, "{loading}");
    assert_eq!(loading["data"], json!({"id": "i-w", "batch": 0}));
    let states: Vec<&str> = loading["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["to"].as_str().unwrap())
        .collect();
    assert_eq!(
        states,
        ["Requested", "Provisioning", "Seeding"],
        "the history keeps the names written"
    );
    // Loading waits to seed: more reconciles, no second write back.
    for _ in 0..3 {
        new.reconcile_object(widget(&env, "w").await, cloud.clone())
            .await
            .unwrap();
    }
    let upgraded = events(&env, "w", "RecordUpgraded").await;
    assert_eq!(upgraded.len(), 1, "{upgraded:#?}");
    assert_eq!(upgraded[0].series, None, "written back once: {upgraded:#?}");

    // A replica of build 1 (a rollback) meets the record of build 2.
    let rolled_back = reconciler::<v1::Deploy>(&env, &place);
    for _ in 0..3 {
        rolled_back
            .reconcile_object(widget(&env, "w").await, cloud.clone())
            .await
            .unwrap();
    }
    assert_eq!(place.record(&env, "w").await.unwrap(), loading, "untouched");
    assert_eq!(
        degraded(&env, "w").await,
        Some((
            "True".to_owned(),
            conditions::NEWER_RECORD_REASON.to_owned()
        ))
    );
    let newer = events(&env, "w", "RecordFromNewerVersion").await;
    assert_eq!(newer.len(), 1, "{newer:#?}");
    assert_eq!(newer[0].series, None, "one event, not one per reconcile");

    cloud.allow_seeding(&["w"]);
    let ready = drive(&new, &env, &place, &cloud, "w", "Ready").await;
    assert_eq!(ready["data"], json!({"id": "i-w", "tier": "standard"}));
    eventually("Degraded cleared", || {
        let env = &env;
        async move {
            let (status, _) = degraded(env, "w").await?;
            (status == "False").then_some(())
        }
    })
    .await;
    assert_eq!(
        cloud.calls(),
        BTreeMap::from([("create w".to_owned(), 1), ("seed w".to_owned(), 1)])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_store_keeps_the_version_and_writes_a_migration_back_once() {
    each_store_keeps_the_version_and_writes_a_migration_back_once(Where::Status).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_configmap_store_keeps_the_version_and_writes_a_migration_back_once() {
    each_store_keeps_the_version_and_writes_a_migration_back_once(Where::ConfigMap).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_secret_store_keeps_the_version_and_writes_a_migration_back_once() {
    each_store_keeps_the_version_and_writes_a_migration_back_once(Where::Secret).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_keeps_the_version_and_writes_a_migration_back_once() {
    each_store_keeps_the_version_and_writes_a_migration_back_once(Where::Memory(Arc::default()))
        .await;
}

/// Build 1 again, with a cleanup: it wants a finalizer on its objects.
mod v1_with_cleanup {
    use super::*;

    #[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
    #[fsm(resource = Widget, context = Cloud, error = CloudError, cleanup = cleanup)]
    pub enum Deploy {
        #[fsm(initial, final, ready)]
        Requested,
        #[fsm(failed)]
        Failed,
    }

    async fn cleanup(_: &mut Step<'_, Deploy>, _: &Deploy) -> Result<(), CloudError> {
        Ok(())
    }
}

#[tokio::test]
async fn an_older_build_adds_no_finalizer_to_an_object_of_a_newer_one() {
    let env = &env().await;
    let widgets: Api<Widget> = Api::namespaced(env.client.clone(), &env.ns);
    common::create_widget(env, "w", WidgetSpec::colored("blue")).await;
    let record = json!({
        "schemaVersion": 1, "machineVersion": 2, "state": "Starting",
        "data": {"id": "i-w"}, "enteredAt": "2026-01-01T00:00:00Z",
    });
    let patch = json!({ "status": { "fsm": record } });
    widgets
        .patch_status("w", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert!(v1_with_cleanup::Deploy::machine().needs_finalizer());

    let old = reconciler::<v1_with_cleanup::Deploy>(env, &Where::Status);
    let cloud = Arc::new(Cloud::default());
    let action = old
        .reconcile_object(widget(env, "w").await, cloud)
        .await
        .unwrap();
    assert_eq!(
        action,
        kube::runtime::controller::Action::requeue(Duration::from_secs(3600))
    );
    let after = widget(env, "w").await;
    assert!(after.finalizers().is_empty(), "{:?}", after.finalizers());
    assert_eq!(
        after
            .status
            .as_ref()
            .unwrap()
            .fsm
            .as_ref()
            .unwrap()
            .to_value(),
        record
    );
    assert_eq!(
        degraded(env, "w").await,
        Some((
            "True".to_owned(),
            conditions::NEWER_RECORD_REASON.to_owned()
        ))
    );
}

// ------------------------------------------------------------ rolling update

/// A replica of build `S` with leader election, until [`Replica::stop`].
struct Replica {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Replica {
    fn start<S>(env: &Env, identity: &str, cloud: Arc<Cloud>) -> Self
    where
        S: Fsm<Resource = Widget, Context = Cloud>,
    {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let client = env.client.clone();
        let ns = env.ns.clone();
        let identity = identity.to_owned();
        let task = tokio::spawn(async move {
            let widgets: Api<Widget> = Api::namespaced(client.clone(), &ns);
            let controller_client = client.clone();
            let result = run_while_leader_until(
                client,
                &ns,
                "deploy-operator",
                &identity,
                Duration::from_secs(2),
                move |leadership| {
                    let fsm =
                        FsmReconciler::<S>::builder(controller_client.clone(), StatusStore::new())
                            .options(
                                ReconcilerOptions::default()
                                    .poll_interval(Duration::from_secs(3600))
                                    .error_requeue(Duration::from_millis(100)),
                            )
                            .leadership(leadership)
                            .build();
                    let widgets = widgets.clone();
                    let cloud = cloud.clone();
                    async move {
                        Controller::new(widgets, watcher::Config::default())
                            .run(fsm.reconcile(), fsm.error_policy(), cloud)
                            .for_each(|_| async {})
                            .await;
                    }
                },
                async {
                    let _ = stopped.await;
                },
            )
            .await;
            if let Err(error) = result {
                panic!("{identity}: leader election failed: {error}");
            }
        });
        Replica { stop, task }
    }

    /// Stops the replica: it gives the Lease up and returns.
    async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.unwrap();
    }
}

/// Waits until `identity` holds the Lease.
async fn holds_lease(env: &Env, identity: &str) {
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(env.client.clone(), &env.ns);
    eventually(&format!("{identity} to hold the Lease"), || {
        let leases = leases.clone();
        async move {
            let holder = leases
                .get_opt("deploy-operator")
                .await
                .ok()??
                .spec?
                .holder_identity?;
            (holder == identity).then_some(())
        }
    })
    .await;
}

/// Waits until widget `name`'s record (status store) is in `wanted` at
/// machine version `machine_version`, and returns it.
async fn settles(env: &Env, name: &str, wanted: &str, machine_version: u64) -> Value {
    eventually(
        &format!("{name} in {wanted} v{machine_version}"),
        || async move {
            let record = Where::Status.record(env, name).await?;
            (state(&record) == wanted && version(&record) == machine_version).then_some(record)
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_update_a_rollback_and_the_update_again_lose_and_repeat_nothing() {
    let env = &env().await;
    let cloud = Arc::new(Cloud::default());

    // Build 1 alone: `a` finishes, `b` waits to seed, `c` to boot.
    let v1_first = Replica::start::<v1::Deploy>(env, "v1-first", cloud.clone());
    holds_lease(env, "v1-first").await;
    for name in ["a", "b", "c"] {
        common::create_widget(env, name, WidgetSpec::colored(name)).await;
    }
    cloud.boot(&["a", "b"]);
    cloud.allow_seeding(&["a"]);
    settles(env, "a", "Ready", 1).await;
    settles(env, "b", "Seeding", 1).await;
    settles(env, "c", "Provisioning", 1).await;

    // The rolling update: a build 2 replica starts beside it, build 1
    // stops and hands the Lease over. Every record is upgraded once.
    let v2_first = Replica::start::<v2::Deploy>(env, "v2-first", cloud.clone());
    v1_first.stop().await;
    holds_lease(env, "v2-first").await;
    settles(env, "a", "Ready", 2).await;
    settles(env, "b", "Loading", 2).await;
    settles(env, "c", "Starting", 2).await;
    common::create_widget(env, "d", WidgetSpec::colored("d")).await;
    settles(env, "d", "Starting", 2).await;
    let mut upgraded = BTreeMap::new();
    for name in ["a", "b", "c", "d"] {
        upgraded.insert(name, Where::Status.record(env, name).await.unwrap());
    }

    // The rollback: build 1 again. It runs what it can read (a new
    // object) and leaves build 2's records untouched, saying so.
    let v1_again = Replica::start::<v1::Deploy>(env, "v1-again", cloud.clone());
    v2_first.stop().await;
    holds_lease(env, "v1-again").await;
    common::create_widget(env, "e", WidgetSpec::colored("e")).await;
    settles(env, "e", "Provisioning", 1).await;
    for name in ["a", "b", "c", "d"] {
        eventually(
            &format!("{name} to say its record is newer"),
            || async move {
                let (status, reason) = degraded(env, name).await?;
                (status == "True" && reason == conditions::NEWER_RECORD_REASON).then_some(())
            },
        )
        .await;
    }
    for (name, record) in &upgraded {
        assert_eq!(
            &Where::Status.record(env, name).await.unwrap(),
            record,
            "build 1 changed build 2's record of {name}"
        );
        let told = events(env, name, "RecordFromNewerVersion").await;
        assert_eq!(told.len(), 1, "{name}: {told:#?}");
        assert_eq!(told[0].series, None, "{name}: told once: {told:#?}");
    }

    // The update again: build 2 takes every object to its end.
    let v2_again = Replica::start::<v2::Deploy>(env, "v2-again", cloud.clone());
    v1_again.stop().await;
    holds_lease(env, "v2-again").await;
    let all = ["a", "b", "c", "d", "e"];
    cloud.boot(&all);
    cloud.allow_seeding(&all);
    for name in all {
        let record = settles(env, name, "Ready", 2).await;
        assert_eq!(record["data"]["id"], format!("i-{name}"), "{record}");
        let history = record["history"].as_array().unwrap();
        let seqs: Vec<u64> = history.iter().map(|h| h["seq"].as_u64().unwrap()).collect();
        let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
        assert_eq!(seqs, expected, "{name}: each transition committed once");
        let entered: BTreeSet<&str> = history.iter().map(|h| h["to"].as_str().unwrap()).collect();
        assert_eq!(
            entered.len(),
            history.len(),
            "{name}: a state entered twice: {record}"
        );
        eventually(&format!("{name}'s Degraded cleared"), || async move {
            let (status, _) = degraded(env, name).await?;
            (status == "False").then_some(())
        })
        .await;
    }
    v2_again.stop().await;
    let once: BTreeMap<String, u32> = all
        .iter()
        .flat_map(|name| [format!("create {name}"), format!("seed {name}")])
        .map(|call| (call, 1))
        .collect();
    assert_eq!(cloud.calls(), once, "every once-only call ran once");
}

// ------------------------------------------------------------ preflight

/// A stored record of `state` (with `data`) written by machine version
/// `machine_version` (`None`: before machines had versions).
fn stored(state: &str, data: Option<Value>, machine_version: Option<u32>) -> Value {
    let mut record = json!({
        "schemaVersion": 1,
        "state": state,
        "enteredAt": "2026-01-01T00:00:00Z",
    });
    if let Some(data) = data {
        record["data"] = data;
    }
    if let Some(v) = machine_version {
        record["machineVersion"] = json!(v);
    }
    record
}

/// The objects of the pre-flight check and their records: one that runs
/// as is, one written before versions (restamped), a renamed state, a
/// migrated one, a newer build's, a state no build has, and no record.
fn mix() -> Vec<(&'static str, Option<Value>)> {
    let id = |name: &str| Some(json!({ "id": format!("i-{name}") }));
    vec![
        ("current", Some(stored("Starting", id("current"), Some(2)))),
        ("unversioned", Some(stored("Requested", None, None))),
        ("renamed", Some(stored("Provisioning", id("renamed"), None))),
        ("migrated", Some(stored("Seeding", id("migrated"), Some(1)))),
        ("newer", Some(stored("Starting", id("newer"), Some(3)))),
        ("unknown", Some(stored("Vanished", None, Some(2)))),
        ("fresh", None),
    ]
}

/// The verdict of each object's record, by name.
fn verdicts(report: &fsm_kube::cli::preflight::Preflight) -> BTreeMap<String, Verdict> {
    report
        .records
        .iter()
        .filter(|r| !r.owner_gone)
        .map(|r| (r.object.name.clone(), r.verdict.clone()))
        .collect()
}

/// What build 2 makes of [`mix`].
fn judged_by_v2() -> BTreeMap<String, Verdict> {
    BTreeMap::from([
        ("current".to_owned(), Verdict::Runs { writes_back: false }),
        (
            "unversioned".to_owned(),
            Verdict::Runs { writes_back: true },
        ),
        (
            "renamed".to_owned(),
            Verdict::Renamed {
                from: "Provisioning".into(),
                to: "Starting".into(),
            },
        ),
        (
            "migrated".to_owned(),
            Verdict::Migrates {
                from_version: 1,
                from_state: "Seeding".into(),
                to_state: "Loading".into(),
                to_version: 2,
            },
        ),
        (
            "newer".to_owned(),
            Verdict::Newer {
                version: 3,
                supported: 2,
            },
        ),
        (
            "unknown".to_owned(),
            Verdict::Unreadable {
                reason:
                    "the stored record names state Vanished, which machine Deploy does not have"
                        .into(),
            },
        ),
    ])
}

/// The `resourceVersion` of every widget, ConfigMap and Secret of the
/// test's namespace: what a write would change.
async fn versions(env: &Env) -> BTreeMap<String, String> {
    let mut all = BTreeMap::new();
    let lp = ListParams::default();
    let widgets: Api<Widget> = Api::namespaced(env.client.clone(), &env.ns);
    for w in widgets.list(&lp).await.unwrap() {
        all.insert(
            format!("widget {}", w.name_any()),
            w.resource_version().unwrap(),
        );
    }
    let maps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    for m in maps.list(&lp).await.unwrap() {
        all.insert(
            format!("configmap {}", m.name_any()),
            m.resource_version().unwrap(),
        );
    }
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), &env.ns);
    for s in secrets.list(&lp).await.unwrap() {
        all.insert(
            format!("secret {}", s.name_any()),
            s.resource_version().unwrap(),
        );
    }
    all
}

/// Runs `check` (which must only read) and asserts that it wrote nothing:
/// no write in the embedded server's request log, and no object of the
/// namespace changed (on either server).
async fn writes_nothing<T>(env: &Env, check: impl std::future::Future<Output = T>) -> T {
    let before = versions(env).await;
    let since = env.embedded().map(|s| s.request_log().records_since(0).0);
    let result = check.await;
    if let (Some(server), Some(since)) = (env.embedded(), since) {
        let (_, requests) = server.request_log().records_since(since);
        let writes: Vec<_> = requests
            .iter()
            .filter(|r| !matches!(r.verb.as_str(), "get" | "list" | "watch"))
            .collect();
        assert!(writes.is_empty(), "preflight wrote: {writes:#?}");
        assert!(
            requests.iter().all(|r| r.verb != "get"
                || r.resource.is_empty()
                || r.name.is_none()
                || r.resource == "customresourcedefinitions"),
            "list requests only (and the CRD's, for its stored versions), no GET per object: \
             {requests:#?}"
        );
    }
    assert_eq!(versions(env).await, before, "an object changed");
    result
}

/// A kubeconfig for `env`'s server: the real server's own, or one written
/// for the embedded server served over loopback HTTP (up while the
/// returned server lives).
async fn kubeconfig_of(env: &Env) -> (Option<fsm_testkit::HttpServer>, String) {
    match (env.embedded(), env.cluster.kubeconfig()) {
        (Some(server), _) => {
            let http = server.serve_http().await.unwrap();
            let path = http.kubeconfig().to_str().unwrap().to_owned();
            (Some(http), path)
        }
        (None, Some(path)) => (None, path.to_str().unwrap().to_owned()),
        (None, None) => panic!("a real cluster without a kubeconfig"),
    }
}

fn preflight_args(env: &Env) -> PreflightArgs {
    PreflightArgs {
        namespace: Some(env.ns.clone()),
        ..PreflightArgs::default()
    }
}

#[tokio::test]
async fn preflight_judges_status_records_without_writing_and_fails_on_what_cannot_run() {
    let env = &env().await;
    let widgets: Api<Widget> = Api::namespaced(env.client.clone(), &env.ns);
    for (name, record) in mix() {
        common::create_widget(env, name, WidgetSpec::colored(name)).await;
        if let Some(record) = record {
            let patch = json!({ "status": { "fsm": record } });
            widgets
                .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .unwrap();
        }
    }

    // Build 2 before the upgrade.
    let upgrade = Operator::<v2::Deploy>::new("deploy-operator", StoreKind::Status);
    let report = writes_nothing(env, upgrade.preflight(&env.client, &preflight_args(env))).await;
    let report = report.unwrap();
    assert_eq!(verdicts(&report), judged_by_v2());
    assert_eq!(report.without_record, 1);
    assert_eq!(report.cannot_run(), 2);
    let migrated = report
        .records
        .iter()
        .find(|r| r.object.name == "migrated")
        .unwrap();
    assert_eq!(migrated.stored_state.as_deref(), Some("Seeding"));
    assert_eq!(migrated.stored_version, Some(1));
    assert_eq!(migrated.object.record, ".status.fsm");
    let text = report.render_text();
    assert!(
        text.ends_with("Deploy version 2: 6 record(s), 4 can run, 2 cannot; 1 object(s) without a record yet.\n"),
        "{text}"
    );
    let ns = &env.ns;
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("Widget {ns}/migrated ")))
        .unwrap();
    assert!(line.contains("Seeding v1"), "{line}");
    assert!(
        line.ends_with("migrates: Seeding (v1) → Loading (v2)"),
        "{line}"
    );

    // Through the command line, as JSON: the report, then exit status 3.
    let (_http, kubeconfig) = kubeconfig_of(env).await;
    let command = upgrade
        .parse_from([
            "deploy-operator",
            "preflight",
            "-n",
            ns,
            "-o",
            "json",
            "--kubeconfig",
            &kubeconfig,
        ])
        .unwrap()
        .command;
    assert!(matches!(
        command,
        Command::Preflight(PreflightArgs {
            output: OutputFormat::Json,
            ..
        })
    ));
    let mut out = Vec::new();
    let no_run = |_: fsm_kube::cli::RunContext<v2::Deploy>| std::future::ready(());
    let result = writes_nothing(env, upgrade.execute(command, no_run, &mut out)).await;
    let error = result.unwrap_err();
    assert!(
        matches!(error, Error::CannotRun { cannot: 2, .. }),
        "{error:?}"
    );
    assert_eq!(error.exit_status(), 3);
    let json: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(json["machine"], "Deploy");
    assert_eq!(json["machineVersion"], 2);
    let newer = json["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["object"]["name"] == "newer")
        .unwrap();
    assert_eq!(newer["verdict"], "newer");
    assert_eq!(newer["version"], 3);
    assert_eq!(newer["storedState"], "Starting");

    // Build 1 before a rollback: build 2's records would stall.
    let rollback = Operator::<v1::Deploy>::new("deploy-operator", StoreKind::Status);
    let report = rollback
        .preflight(&env.client, &preflight_args(env))
        .await
        .unwrap();
    let by_v1 = verdicts(&report);
    assert_eq!(
        by_v1["current"],
        Verdict::Newer {
            version: 2,
            supported: 1
        }
    );
    assert_eq!(
        by_v1["unknown"],
        Verdict::Newer {
            version: 2,
            supported: 1
        }
    );
    assert_eq!(by_v1["renamed"], Verdict::Runs { writes_back: false });
    assert_eq!(by_v1["migrated"], Verdict::Runs { writes_back: false });
    assert_eq!(report.cannot_run(), 3);

    // Once the stalled records are gone, build 2 may be rolled out.
    for name in ["newer", "unknown"] {
        widgets.delete(name, &Default::default()).await.unwrap();
    }
    eventually("the deletions", || async {
        let left = widgets.list(&ListParams::default()).await.ok()?.items.len();
        (left == 5).then_some(())
    })
    .await;
    let report = upgrade
        .preflight(&env.client, &preflight_args(env))
        .await
        .unwrap();
    assert!(report.all_can_run(), "{}", report.render_text());
    let mut out = Vec::new();
    let command = upgrade
        .parse_from([
            "deploy-operator",
            "preflight",
            "-n",
            ns,
            "--kubeconfig",
            &kubeconfig,
        ])
        .unwrap()
        .command;
    upgrade.execute(command, no_run, &mut out).await.unwrap();
    assert!(
        String::from_utf8(out)
            .unwrap()
            .contains("4 can run, 0 cannot")
    );
}

/// A record object of widget `owner` (UID `uid`) named `name`, labelled as
/// the stores label theirs.
fn record_object_meta(env: &Env, name: &str, owner: &str, uid: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(env.ns.clone()),
        labels: Some(BTreeMap::from([
            (MANAGED_BY_LABEL.0.to_owned(), MANAGED_BY_LABEL.1.to_owned()),
            (OWNER_LABEL.to_owned(), owner.to_owned()),
            (OWNER_UID_LABEL.to_owned(), uid.to_owned()),
        ])),
        ..ObjectMeta::default()
    }
}

#[tokio::test]
async fn preflight_judges_configmap_records_and_lists_those_whose_object_is_gone() {
    let env = &env().await;
    let maps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    let put = |metadata: ObjectMeta, record: &Value| ConfigMap {
        metadata,
        data: Some(BTreeMap::from([("record".to_owned(), record.to_string())])),
        ..ConfigMap::default()
    };
    for (name, record) in mix() {
        let widget = common::create_widget(env, name, WidgetSpec::colored(name)).await;
        let Some(record) = record else { continue };
        let uid = widget.uid().unwrap();
        let metadata = if name == "renamed" {
            // Under the legacy name, owned through its owner reference.
            let mut legacy = record_object_meta(env, &format!("{name}-fsm"), name, &uid);
            legacy.labels.as_mut().unwrap().remove(OWNER_UID_LABEL);
            legacy.owner_references = Some(vec![widget.controller_owner_ref(&()).unwrap()]);
            legacy
        } else {
            record_object_meta(env, &record_object_name_for::<v2::Deploy>(name), name, &uid)
        };
        maps.create(&PostParams::default(), &put(metadata, &record))
            .await
            .unwrap();
    }
    // A widget deleted before garbage collection removed its record.
    let ghost = record_object_meta(
        env,
        &record_object_name_for::<v2::Deploy>("ghost"),
        "ghost",
        "0a1b2c3d-0000-0000-0000-000000000000",
    );
    maps.create(
        &PostParams::default(),
        &put(ghost, &stored("Vanished", None, Some(9))),
    )
    .await
    .unwrap();

    let upgrade = Operator::<v2::Deploy>::new("deploy-operator", StoreKind::ConfigMap);
    let report = writes_nothing(env, upgrade.preflight(&env.client, &preflight_args(env)))
        .await
        .unwrap();
    assert_eq!(verdicts(&report), judged_by_v2());
    assert_eq!(report.cannot_run(), 2, "the ghost's record does not count");
    let ns = &env.ns;
    let renamed = report
        .records
        .iter()
        .find(|r| r.object.name == "renamed")
        .unwrap();
    assert_eq!(renamed.object.record, format!("ConfigMap {ns}/renamed-fsm"));
    let ghost = report.records.iter().find(|r| r.owner_gone).unwrap();
    assert_eq!(ghost.object.name, "ghost");
    assert_eq!(
        ghost.verdict,
        Verdict::Newer {
            version: 9,
            supported: 2
        }
    );
    assert!(
        report.render_text().contains("[object gone"),
        "{}",
        report.render_text()
    );

    // The Secret store finds none of them.
    let secrets = Operator::<v2::Deploy>::new("deploy-operator", StoreKind::Secret);
    let report = secrets
        .preflight(&env.client, &preflight_args(env))
        .await
        .unwrap();
    assert!(report.records.is_empty(), "{report:?}");
    assert_eq!(report.without_record, 7);
    assert!(report.all_can_run());

    let memory = Operator::<v2::Deploy>::new("deploy-operator", StoreKind::Ephemeral);
    let refused = memory.preflight(&env.client, &preflight_args(env)).await;
    assert!(
        matches!(
            refused,
            Err(Error::Read(fsm_kube::records::ReadError::MemoryStore))
        ),
        "{refused:?}"
    );
}
