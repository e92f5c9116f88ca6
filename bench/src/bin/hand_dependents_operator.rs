//! The dependents workload written by hand with kube-rs, no fsm-kube: the
//! baseline of `bench-dependents-operator`. Each `BenchApp` owns the same
//! four objects (`bench::workload::dependent_objects`), server-side
//! applied with a controller owner reference, the Deployment once the
//! ConfigMap and Secret are applied; the app's `DependentsReady` condition
//! says whether the Deployment has rolled out.
//!
//! Written the way a kube-rs author would: one reflector per kind, whose
//! stores the reconciler reads and whose streams wake the owners (the
//! Deployments' only when their generation or readiness changes); an
//! annotation with a hash of the desired object tells whether the cached
//! object is current, so a converged app costs no request; the caches
//! keep no `managedFields`; the condition is written when its status or
//! reason changes.
//!
//! ```text
//! KUBECONFIG=… bench-hand-dependents-operator
//! ```
//!
//! `SIGUSR1` re-syncs every app, as for `bench-dependents-operator`.

use std::collections::hash_map::DefaultHasher;
use std::fmt::Debug;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use bench::workload::{self, BenchApp};
use futures::{Stream, StreamExt};
use jiff::Timestamp;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::signal::unix::{SignalKind, signal};

const MANAGER: &str = "bench-hand-dependents";
const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", MANAGER);
const SPEC_HASH: &str = "bench.operator-fsm.io/spec-hash";
const CONDITION: &str = "DependentsReady";
const PENDING_REQUEUE: Duration = Duration::from_secs(10);
const RESYNC: Duration = Duration::from_secs(300);

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error("the app has no UID")]
    NoUid,
}

struct Ctx {
    client: kube::Client,
    configs: Store<ConfigMap>,
    secrets: Store<Secret>,
    deployments: Store<Deployment>,
    services: Store<Service>,
}

/// `object` as this operator applies it: in the app's namespace, owned
/// by it, labelled, with the hash of the desired object.
fn prepare<T: Resource + Serialize>(mut object: T, app: &BenchApp) -> Result<T, Error> {
    let mut hasher = DefaultHasher::new();
    serde_json::to_string(&object)
        .unwrap_or_default()
        .hash(&mut hasher);
    let hash = format!("{:x}", hasher.finish());
    let owner = app.controller_owner_ref(&()).ok_or(Error::NoUid)?;
    let meta = object.meta_mut();
    meta.namespace = app.namespace();
    meta.owner_references = Some(vec![owner]);
    meta.labels
        .get_or_insert_default()
        .insert(MANAGED_BY.0.into(), MANAGED_BY.1.into());
    meta.annotations
        .get_or_insert_default()
        .insert(SPEC_HASH.into(), hash);
    Ok(object)
}

/// The object as it is once `desired` is applied: the cached one when it
/// carries the desired hash, else what the server returns from the apply.
async fn ensure<T>(client: &kube::Client, store: &Store<T>, desired: T) -> Result<Arc<T>, Error>
where
    T: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Serialize
        + DeserializeOwned
        + Debug,
{
    let name = desired.name_any();
    let namespace = desired.namespace().unwrap_or_default();
    let hash = desired.annotations().get(SPEC_HASH).cloned();
    if let Some(cached) = store.get(&ObjectRef::new(&name).within(&namespace))
        && cached.annotations().get(SPEC_HASH) == hash.as_ref()
        && cached.meta().deletion_timestamp.is_none()
    {
        return Ok(cached);
    }
    let api: Api<T> = Api::namespaced(client.clone(), &namespace);
    let params = PatchParams::apply(MANAGER).force();
    Ok(Arc::new(
        api.patch(&name, &params, &Patch::Apply(&desired)).await?,
    ))
}

fn rolled_out(deployment: &Deployment) -> bool {
    let (Some(spec), Some(status)) = (&deployment.spec, &deployment.status) else {
        return false;
    };
    let wanted = spec.replicas.unwrap_or(1);
    status.observed_generation >= deployment.metadata.generation
        && status.updated_replicas.unwrap_or(0) == wanted
        && status.ready_replicas.unwrap_or(0) == wanted
        && status.available_replicas.unwrap_or(0) == wanted
}

async fn reconcile(app: Arc<BenchApp>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    if app.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let objects = workload::dependent_objects(&app);
    let client = &ctx.client;
    let (config, secret, service) = (
        prepare(objects.config, &app)?,
        prepare(objects.secret, &app)?,
        prepare(objects.service, &app)?,
    );
    // The Deployment mounts the ConfigMap and the Secret: applied after them.
    futures::try_join!(
        ensure(client, &ctx.configs, config),
        ensure(client, &ctx.secrets, secret),
        ensure(client, &ctx.services, service),
    )?;
    let deployment = ensure(client, &ctx.deployments, prepare(objects.deployment, &app)?).await?;
    let ready = rolled_out(&deployment);
    let (status, reason, message) = if ready {
        ("True", "Ready", "all 4 dependents ready")
    } else {
        ("False", "Pending", "app: rolling out")
    };
    let current = app
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == CONDITION));
    let same = current.is_some_and(|c| {
        c.status == status && c.reason == reason && c.observed_generation == app.metadata.generation
    });
    if !same {
        let condition = Condition {
            type_: CONDITION.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
            observed_generation: app.metadata.generation,
            last_transition_time: Time(Timestamp::now()),
        };
        let api: Api<BenchApp> = Api::namespaced(client.clone(), workload::NAMESPACE);
        let patch = serde_json::json!({"status": {"conditions": [condition]}});
        let params = PatchParams {
            field_manager: Some(MANAGER.into()),
            ..PatchParams::default()
        };
        api.patch_status(&app.name_any(), &params, &Patch::Merge(&patch))
            .await?;
    }
    Ok(Action::requeue(if ready {
        RESYNC
    } else {
        PENDING_REQUEUE
    }))
}

fn error_policy(app: Arc<BenchApp>, error: &Error, _: Arc<Ctx>) -> Action {
    tracing::warn!(app = %app.name_any(), %error, "reconcile failed");
    Action::requeue(PENDING_REQUEUE)
}

/// A reflector of `T` labelled by this operator, without `managedFields`:
/// its store and the stream of its changed objects.
fn reflect<T>(
    client: &kube::Client,
) -> (
    Store<T>,
    impl Stream<Item = Result<T, watcher::Error>> + Send + 'static,
)
where
    T: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static,
{
    let api: Api<T> = Api::namespaced(client.clone(), workload::NAMESPACE);
    let config = watcher::Config::default().labels(&format!("{}={}", MANAGED_BY.0, MANAGED_BY.1));
    let (reader, writer) = reflector::store();
    let stream = watcher(api, config)
        .default_backoff()
        .modify(|o: &mut T| o.managed_fields_mut().clear())
        .reflect(writer)
        .touched_objects();
    (reader, stream)
}

/// What of a Deployment should wake its app: its spec (generation),
/// metadata and whether it has rolled out; not each rollout step.
fn deployment_wake(d: &Deployment) -> Option<u64> {
    let mut hasher = DefaultHasher::new();
    d.metadata.generation.hash(&mut hasher);
    d.metadata.deletion_timestamp.is_some().hash(&mut hasher);
    d.annotations().get(SPEC_HASH).hash(&mut hasher);
    rolled_out(d).hash(&mut hasher);
    Some(hasher.finish())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let client = workload::client().await?;
    let (configs, config_changes) = reflect::<ConfigMap>(&client);
    let (secrets, secret_changes) = reflect::<Secret>(&client);
    let (deployments, deployment_changes) = reflect::<Deployment>(&client);
    let (services, service_changes) = reflect::<Service>(&client);
    let deployment_changes =
        deployment_changes.predicate_filter(deployment_wake, Default::default());
    let signals = signal(SignalKind::user_defined1())?;
    let resync = futures::stream::unfold(signals, |mut signals| async move {
        signals.recv().await.map(|()| ((), signals))
    });
    let apps: Api<BenchApp> = Api::namespaced(client.clone(), workload::NAMESPACE);
    let ctx = Arc::new(Ctx {
        client,
        configs,
        secrets,
        deployments,
        services,
    });
    Controller::new(apps, watcher::Config::default())
        .owns_stream(config_changes)
        .owns_stream(secret_changes)
        .owns_stream(deployment_changes)
        .owns_stream(service_changes)
        .reconcile_all_on(resync)
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
    Ok(())
}
