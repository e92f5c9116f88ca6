//! The CronJob controller in the embedded server
//! ([`ApiServer::simulate`](crate::ApiServer::simulate)): every
//! [`TICK`], the decisions of [`cronjobs::sync`] for each stored CronJob,
//! carried out as the server's own writes (neither logged nor subject to
//! faults, with watch events).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::Value;
use tokio::task::JoinHandle;

use super::cronjobs::{self, RequestFailed};
use super::{State, stopped};
use crate::cluster::{DeleteOptions, Part, Propagation};
use crate::resources::GroupResource;
use crate::state::Shared;

/// How often the controller runs (kube-controller-manager 1.20's runs
/// every 10 s; a shorter pass only starts Jobs closer to their time).
pub(super) const TICK: Duration = Duration::from_secs(1);

fn batch(resource: &str) -> GroupResource {
    GroupResource {
        group: "batch".into(),
        resource: resource.into(),
    }
}

/// Runs the controller on `shared`'s cluster until it is gone or the
/// simulation stops.
pub(super) fn start(shared: Weak<Shared>, state: Arc<Mutex<State>>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if stopped(&state) {
                return;
            }
            let Some(strong) = shared.upgrade() else {
                return;
            };
            let (cron_jobs, jobs) = {
                let cluster = strong.cluster();
                (
                    cluster.store.list(&batch("cronjobs"), None),
                    cluster.store.list(&batch("jobs"), None),
                )
            };
            drop(strong);
            let mut by_parent: HashMap<&str, Vec<&Value>> = HashMap::new();
            for job in &jobs {
                if let Some(parent) = cronjobs::parent_uid(job) {
                    by_parent.entry(parent).or_default().push(job);
                }
            }
            let mut api = Local {
                shared: shared.clone(),
            };
            for cron_job in &cron_jobs {
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

/// The controller's requests as writes of the embedded server.
struct Local {
    shared: Weak<Shared>,
}

impl Local {
    /// Runs `f` on the cluster with the definition of `batch/<resource>`
    /// at `version` (the preferred one when `None` or not served).
    fn with_cluster<T>(
        &self,
        resource: &str,
        version: Option<&str>,
        f: impl FnOnce(
            &mut crate::cluster::Cluster,
            &crate::resources::ResourceDef,
        ) -> Result<T, crate::status::ApiError>,
    ) -> Result<T, RequestFailed> {
        let shared = self
            .shared
            .upgrade()
            .ok_or_else(|| RequestFailed("the server is gone".into()))?;
        let mut cluster = shared.cluster();
        let def = version
            .and_then(|v| cluster.registry.get("batch", v, resource))
            .or_else(|| cluster.registry.preferred(&batch(resource)))
            .ok_or_else(|| RequestFailed(format!("batch/{resource} is not served")))?;
        f(&mut cluster, &def).map_err(|e| RequestFailed(e.to_string()))
    }
}

fn meta<'v>(object: &'v Value, field: &str) -> &'v str {
    object["metadata"][field].as_str().unwrap_or_default()
}

impl cronjobs::Api for Local {
    async fn replace_status(&mut self, cron_job: &Value) -> Result<Value, RequestFailed> {
        let (ns, name) = (meta(cron_job, "namespace"), meta(cron_job, "name"));
        // Stored as written: the body goes back at the version it was read.
        let version = cron_job["apiVersion"]
            .as_str()
            .and_then(|v| v.strip_prefix("batch/"));
        self.with_cluster("cronjobs", version, |cluster, def| {
            let part = if def.status_subresource {
                Part::Status
            } else {
                Part::Main
            };
            let now = jiff::Timestamp::now();
            cluster.update(def, ns, name, cron_job.clone(), part, false, now)
        })
    }

    async fn get_job(&mut self, namespace: &str, name: &str) -> Result<Value, RequestFailed> {
        self.with_cluster("jobs", None, |cluster, def| {
            cluster.get(def, namespace, name)
        })
    }

    async fn create_job(&mut self, namespace: &str, job: Value) -> Result<Value, RequestFailed> {
        self.with_cluster("jobs", None, |cluster, def| {
            cluster.create(def, namespace, job, false, jiff::Timestamp::now())
        })
    }

    async fn delete_job(&mut self, namespace: &str, name: &str) -> Result<(), RequestFailed> {
        let options = DeleteOptions {
            propagation: Some(Propagation::Background),
            ..DeleteOptions::default()
        };
        self.with_cluster("jobs", None, |cluster, def| {
            cluster
                .delete(def, namespace, name, &options, jiff::Timestamp::now())
                .map(|_| ())
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::api::batch::v1::{CronJob, Job};
    use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
    use serde_json::json;

    use crate::ApiServer;
    use crate::simulation::{OUTCOME_LABEL, Simulation, SimulationConfig};

    fn cron_job(name: &str, policy: &str, outcome: &str, kept: i32) -> CronJob {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"schedule": "@every 1s", "concurrencyPolicy": policy,
                "successfulJobsHistoryLimit": kept,
                "jobTemplate": {"metadata": {"labels": {OUTCOME_LABEL: outcome}},
                    "spec": {"template": {"spec": {"restartPolicy": "Never",
                        "containers": [{"name": "main", "image": "busybox"}]}}}}},
        }))
        .expect("a valid CronJob")
    }

    /// The Jobs of the CronJob `name`, by name.
    async fn jobs_of(jobs: &Api<Job>, name: &str) -> Vec<Job> {
        let mut list: Vec<Job> = jobs
            .list(&ListParams::default())
            .await
            .expect("listed")
            .items
            .into_iter()
            .filter(|j| {
                j.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with(&format!("{name}-")))
            })
            .collect();
        list.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        list
    }

    /// Waits until `done` holds for the CronJob's Jobs (at most 15 s).
    async fn until(jobs: &Api<Job>, name: &str, done: impl Fn(&[Job]) -> bool) -> Vec<Job> {
        for _ in 0..150 {
            let list = jobs_of(jobs, name).await;
            if done(&list) {
                return list;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("never: {:?}", jobs_of(jobs, name).await);
    }

    fn suffix(job: &Job) -> i64 {
        job.metadata
            .name
            .as_deref()
            .and_then(|n| n.rsplit('-').next())
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    }

    /// Jobs start every second, finish, and only the newest `kept` of the
    /// finished stay; the CronJob's status names the active one.
    async fn history_is_kept(server: &ApiServer) {
        let cron_jobs: Api<CronJob> = Api::namespaced(server.client(), "default");
        let jobs: Api<Job> = Api::namespaced(server.client(), "default");
        cron_jobs
            .create(
                &PostParams::default(),
                &cron_job("tick", "Allow", "succeed", 2),
            )
            .await
            .expect("created");
        let first = until(&jobs, "tick", |l| !l.is_empty()).await;
        let first = suffix(&first[0]);
        let later = until(&jobs, "tick", |l| l.iter().any(|j| suffix(j) >= first + 4)).await;
        let finished = later
            .iter()
            .filter(|j| j.status.as_ref().and_then(|s| s.succeeded).is_some())
            .count();
        assert!(
            finished <= 3,
            "at most the kept two (and one being deleted): {later:?}"
        );
        assert!(
            later.iter().all(|j| suffix(j) > first),
            "the oldest were deleted: {later:?}"
        );
        let owner = &later[0].metadata.owner_references.as_ref().expect("owned")[0];
        assert_eq!(
            (
                owner.api_version.as_str(),
                owner.kind.as_str(),
                owner.controller
            ),
            ("batch/v1beta1", "CronJob", Some(true))
        );
        let status = cron_jobs
            .get("tick")
            .await
            .expect("read")
            .status
            .expect("status");
        assert!(status.last_schedule_time.is_some());
    }

    /// With `Forbid`, a Job that never finishes keeps the next from
    /// starting. Created at `batch/v1beta1`, as 1.20's clients write.
    async fn forbid_waits(server: &ApiServer) {
        let cron_jobs: Api<CronJob> = Api::namespaced(server.client(), "default");
        let jobs: Api<Job> = Api::namespaced(server.client(), "default");
        let v1beta1 = ApiResource {
            group: "batch".into(),
            version: "v1beta1".into(),
            api_version: "batch/v1beta1".into(),
            kind: "CronJob".into(),
            plural: "cronjobs".into(),
        };
        let mut body = serde_json::to_value(cron_job("one", "Forbid", "hang", 3)).expect("JSON");
        body["apiVersion"] = json!("batch/v1beta1");
        body["kind"] = json!("CronJob");
        let body: DynamicObject = serde_json::from_value(body).expect("an object");
        Api::<DynamicObject>::namespaced_with(server.client(), "default", &v1beta1)
            .create(&PostParams::default(), &body)
            .await
            .expect("created");
        let started = until(&jobs, "one", |l| !l.is_empty()).await;
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        assert_eq!(jobs_of(&jobs, "one").await.len(), 1, "no second Job");
        let status = cron_jobs
            .get("one")
            .await
            .expect("read")
            .status
            .expect("status");
        let active = status.active.expect("an active Job");
        assert_eq!(
            (
                active.len(),
                active[0].name.as_deref(),
                active[0].kind.as_deref()
            ),
            (1, started[0].metadata.name.as_deref(), Some("Job"))
        );
    }

    /// With `Replace`, each new Job takes the place of the running one.
    async fn replace_deletes_the_running_job(server: &ApiServer) {
        let cron_jobs: Api<CronJob> = Api::namespaced(server.client(), "default");
        let jobs: Api<Job> = Api::namespaced(server.client(), "default");
        cron_jobs
            .create(
                &PostParams::default(),
                &cron_job("swap", "Replace", "hang", 3),
            )
            .await
            .expect("created");
        let first = until(&jobs, "swap", |l| !l.is_empty()).await;
        let first = suffix(&first[0]);
        let later = until(&jobs, "swap", |l| l.iter().any(|j| suffix(j) >= first + 2)).await;
        assert_eq!(later.len(), 1, "only the newest runs: {later:?}");
        let active = cron_jobs
            .get("swap")
            .await
            .expect("read")
            .status
            .and_then(|s| s.active)
            .unwrap_or_default();
        assert!(active.len() <= 1, "{active:?}");
    }

    fn quick() -> SimulationConfig {
        SimulationConfig {
            rollout_delay: Duration::ZERO,
            job_duration: Duration::from_millis(100),
            job_rules: Vec::new(),
        }
    }

    #[tokio::test]
    async fn cron_jobs_run_in_the_embedded_server() {
        let server = ApiServer::new();
        let sim = server.simulate(quick());
        history_is_kept(&server).await;
        forbid_waits(&server).await;
        replace_deletes_the_running_job(&server).await;
        sim.stop();
    }

    #[tokio::test]
    async fn cron_jobs_run_through_a_client() {
        let server = ApiServer::new();
        let sim = Simulation::through(server.client(), Some("default"), quick());
        history_is_kept(&server).await;
        forbid_waits(&server).await;
        sim.stop();
    }
}
