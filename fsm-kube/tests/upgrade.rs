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

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Env, Widget, WidgetSpec, env, eventually};
use fsm_kube::cli::{Command, Error, Operator, OutputFormat, PreflightArgs, StoreKind};
use fsm_kube::fsm_core::{EphemeralStore, Fsm, ObjectKey, RawRecord};
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
use kube::{Client, ResourceExt};
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
            Where::Status => return Some(widget.status?.fsm?.0),
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
    let events: Api<Event> = Api::namespaced(env.client.clone(), &env.ns);
    events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .collect()
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
