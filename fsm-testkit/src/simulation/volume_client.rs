//! The PersistentVolume controller through a `kube::Client`
//! ([`Simulation::through`]): the same plan as in the embedded server
//! ([`volumes::plan`]), made on the caches of its watches after any change
//! they report and carried out with `PUT` requests, one round at a time.
//!
//! [`Simulation::through`]: super::Simulation::through

use std::sync::{Arc, Mutex};

use futures::FutureExt;
use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::Store;
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher::{self, watcher};
use serde_json::Value;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::volumes::{self, Object, Step};
use super::{State, stopped};

/// How many times a write is tried when another writer got there first.
const ATTEMPTS: usize = 5;

/// The APIs the controller watches: volumes and classes of the cluster,
/// claims and Pods of `namespace` (all when `None`), each with its
/// resource.
fn watched_apis(
    client: &Client,
    namespace: Option<&str>,
) -> [(Api<DynamicObject>, ApiResource); 4] {
    let scoped = |resource: ApiResource| {
        let api = match namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        (api, resource)
    };
    let cluster = |resource: ApiResource| (Api::all_with(client.clone(), &resource), resource);
    [
        cluster(volume_resource()),
        scoped(claim_resource()),
        scoped(ApiResource::erase::<Pod>(&())),
        cluster(ApiResource::erase::<StorageClass>(&())),
    ]
}

/// What the watches' caches hold, as JSON: volumes, claims, Pods and
/// classes; `None` until every watch has listed.
fn world(stores: &[Store<DynamicObject>; 4]) -> Option<[Vec<Value>; 4]> {
    let listed = |store: &Store<DynamicObject>| {
        matches!(store.wait_until_ready().now_or_never(), Some(Ok(())))
    };
    if !stores.iter().all(listed) {
        return None;
    }
    Some(stores.each_ref().map(|store| {
        store
            .state()
            .iter()
            .filter_map(|o| serde_json::to_value(o.as_ref()).ok())
            .collect()
    }))
}

fn volume_resource() -> ApiResource {
    ApiResource::erase::<PersistentVolume>(&())
}

fn claim_resource() -> ApiResource {
    ApiResource::erase::<PersistentVolumeClaim>(&())
}

/// Binds claims until aborted: a round after each change to a volume, a
/// claim, a Pod or a class (changes during a round make one more round).
pub(super) fn start(
    client: Client,
    namespace: Option<String>,
    state: Arc<Mutex<State>>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let changed = Arc::new(Notify::new());
        let watched = watched_apis(&client, namespace.as_deref());
        let writers = watched
            .each_ref()
            .map(|(_, resource)| Writer::new(resource.clone()));
        let stores = writers.each_ref().map(Writer::as_reader);
        let watches = watched.into_iter().zip(writers).map(|((api, _), writer)| {
            watcher(api, watcher::Config::default())
                .default_backoff()
                .reflect(writer)
                .boxed()
        });
        let notify = changed.clone();
        let watching = tokio::spawn(async move {
            let mut events = stream::select_all(watches);
            while let Some(event) = events.next().await {
                match event {
                    Ok(_) => notify.notify_one(),
                    Err(error) => {
                        tracing::warn!(%error, "simulation: watching volumes failed; retrying");
                    }
                }
            }
        });
        let _abort_watching = AbortOnDrop(watching);
        loop {
            changed.notified().await;
            if stopped(&state) {
                return;
            }
            round(&client, &stores, &state).await;
        }
    })
}

/// Aborts a task when dropped (the watches end with the binder).
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One round: plans on what the caches hold and makes each write.
async fn round(client: &Client, stores: &[Store<DynamicObject>; 4], state: &Mutex<State>) {
    let Some([volume_list, claim_list, pod_list, class_list]) = world(stores) else {
        return;
    };
    let world = volumes::World {
        volumes: volume_list.iter().collect(),
        claims: claim_list.iter().collect(),
        pods: pod_list.iter().collect(),
        classes: class_list.iter().collect(),
    };
    for group in volumes::plan(&world) {
        for step in group {
            if stopped(state) {
                return;
            }
            if !write(client, &step).await {
                break;
            }
        }
    }
}

/// Applies a step's edit to the object as read and replaces it (or its
/// status); a conflict reads it again. Whether it was written (no: the
/// object is gone, replaced, no longer fits the step, or the request
/// failed).
async fn write(client: &Client, step: &Step) -> bool {
    let api: Api<DynamicObject> = match step.object {
        Object::Volume => Api::all_with(client.clone(), &volume_resource()),
        Object::Claim => Api::namespaced_with(client.clone(), &step.namespace, &claim_resource()),
    };
    let name = step.name.as_str();
    for _ in 0..ATTEMPTS {
        let current = match api.get_opt(name).await {
            Ok(Some(current)) => current,
            Ok(None) => return false,
            Err(error) => {
                tracing::warn!(%error, %name, "simulation: reading for the volume binder failed");
                return false;
            }
        };
        if current.metadata.uid.as_deref() != Some(step.uid.as_str()) {
            return false;
        }
        let Ok(mut object) = serde_json::to_value(&current) else {
            return false;
        };
        if !step.edit.fits(&object) {
            return false;
        }
        step.edit.apply(&mut object);
        let Ok(next) = serde_json::from_value::<DynamicObject>(object) else {
            return false;
        };
        let pp = PostParams::default();
        let written = if step.status {
            api.replace_status(name, &pp, &next).await
        } else {
            api.replace(name, &pp, &next).await
        };
        match written {
            Ok(_) => return true,
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => {
                tracing::warn!(%error, %name, "simulation: binding a claim failed");
                return false;
            }
        }
    }
    tracing::warn!(%name, "simulation: binding a claim kept conflicting; gave up");
    false
}
