//! The CronJob controller through a `kube::Client`
//! ([`Simulation::through`]): every [`TICK`], the CronJobs
//! (`batch/v1beta1`, the version kube-apiserver 1.20 serves) and Jobs of
//! the simulated namespace are listed and [`cronjobs::sync`] makes its
//! requests, as kube-controller-manager's controller lists and writes.
//!
//! [`Simulation::through`]: super::Simulation::through

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::batch::v1::Job;
use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, PostParams, TypeMeta};
use serde_json::Value;
use tokio::task::JoinHandle;

use super::cron_local::TICK;
use super::cronjobs::{self, RequestFailed};
use super::{State, stopped};

fn cron_job_resource() -> ApiResource {
    ApiResource {
        group: "batch".into(),
        version: "v1beta1".into(),
        api_version: "batch/v1beta1".into(),
        kind: "CronJob".into(),
        plural: "cronjobs".into(),
    }
}

/// Runs the controller through `client` on the CronJobs of `namespace`
/// (all when `None`) until aborted or stopped.
pub(super) fn start(
    client: Client,
    namespace: Option<String>,
    state: Arc<Mutex<State>>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let scoped = |resource: &ApiResource| -> Api<DynamicObject> {
            match &namespace {
                Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
                None => Api::all_with(client.clone(), resource),
            }
        };
        let cron_jobs = scoped(&cron_job_resource());
        let jobs = scoped(&ApiResource::erase::<Job>(&()));
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut api = Remote {
            client: client.clone(),
        };
        loop {
            tick.tick().await;
            if stopped(&state) {
                return;
            }
            let (Some(cron_list), Some(job_list)) = (list(&cron_jobs).await, list(&jobs).await)
            else {
                continue;
            };
            let mut by_parent: HashMap<&str, Vec<&Value>> = HashMap::new();
            for job in &job_list {
                if let Some(parent) = cronjobs::parent_uid(job) {
                    by_parent.entry(parent).or_default().push(job);
                }
            }
            for cron_job in &cron_list {
                if stopped(&state) {
                    return;
                }
                let uid = cron_job["metadata"]["uid"].as_str().unwrap_or_default();
                let owned = by_parent.get(uid).map_or(&[][..], Vec::as_slice);
                cronjobs::sync(&mut api, cron_job, owned, jiff::Timestamp::now()).await;
            }
        }
    })
}

/// Every object `api` lists, as JSON; `None` (logged) when the list
/// fails.
async fn list(api: &Api<DynamicObject>) -> Option<Vec<Value>> {
    match api.list(&ListParams::default()).await {
        Ok(list) => Some(
            list.items
                .iter()
                .filter_map(|o| serde_json::to_value(o).ok())
                .collect(),
        ),
        Err(error) => {
            tracing::warn!(%error, "simulation: listing CronJobs or Jobs failed");
            None
        }
    }
}

/// The controller's requests, sent through a client.
struct Remote {
    client: Client,
}

impl Remote {
    fn jobs(&self, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(
            self.client.clone(),
            namespace,
            &ApiResource::erase::<Job>(&()),
        )
    }
}

fn failed(error: impl std::fmt::Display) -> RequestFailed {
    RequestFailed(error.to_string())
}

/// `object` as a `DynamicObject` of `resource`'s type.
fn typed(object: &Value, resource: &ApiResource) -> Result<DynamicObject, RequestFailed> {
    let mut dynamic: DynamicObject = serde_json::from_value(object.clone()).map_err(failed)?;
    dynamic.types = Some(TypeMeta {
        api_version: resource.api_version.clone(),
        kind: resource.kind.clone(),
    });
    Ok(dynamic)
}

fn json(object: &DynamicObject) -> Result<Value, RequestFailed> {
    serde_json::to_value(object).map_err(failed)
}

impl cronjobs::Api for Remote {
    async fn replace_status(&mut self, cron_job: &Value) -> Result<Value, RequestFailed> {
        let resource = cron_job_resource();
        let ns = cron_job["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default();
        let name = cron_job["metadata"]["name"].as_str().unwrap_or_default();
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), ns, &resource);
        let body = typed(cron_job, &resource)?;
        let written = api
            .replace_status(name, &PostParams::default(), &body)
            .await
            .map_err(failed)?;
        json(&written)
    }

    async fn get_job(&mut self, namespace: &str, name: &str) -> Result<Value, RequestFailed> {
        json(&self.jobs(namespace).get(name).await.map_err(failed)?)
    }

    async fn create_job(&mut self, namespace: &str, job: Value) -> Result<Value, RequestFailed> {
        let body = typed(&job, &ApiResource::erase::<Job>(&()))?;
        let created = self
            .jobs(namespace)
            .create(&PostParams::default(), &body)
            .await
            .map_err(failed)?;
        json(&created)
    }

    async fn delete_job(&mut self, namespace: &str, name: &str) -> Result<(), RequestFailed> {
        self.jobs(namespace)
            .delete(name, &DeleteParams::background())
            .await
            .map(|_| ())
            .map_err(failed)
    }
}
