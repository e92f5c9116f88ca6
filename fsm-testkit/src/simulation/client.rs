//! The simulation through a `kube::Client` ([`Simulation::through`]): the
//! same decisions as in the embedded server ([`State::react`]), observed
//! with a watch and written with `PUT …/status` requests.
//!
//! [`Simulation::through`]: super::Simulation::through

use std::sync::{Arc, Mutex};

use futures::{StreamExt, stream};
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use serde_json::Value;
use tokio::task::JoinHandle;

use super::{Kind, Reaction, State, Target, lock, stopped};

/// How many times a status write is tried when another writer got there
/// first (409 Conflict).
const ATTEMPTS: usize = 5;

/// Watches the workloads of `namespace` (all when `None`) and reacts to
/// each change until aborted.
pub(super) fn start(
    client: Client,
    namespace: Option<String>,
    state: Arc<Mutex<State>>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let watches = Kind::ALL.map(|kind| {
            let resource = api_resource(kind);
            let api: Api<DynamicObject> = match &namespace {
                Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
                None => Api::all_with(client.clone(), &resource),
            };
            watcher(api, watcher::Config::default())
                .default_backoff()
                .map(move |event| (kind, event))
                .boxed()
        });
        let mut events = stream::select_all(watches);
        while let Some((kind, event)) = events.next().await {
            match event {
                Ok(Event::Apply(object) | Event::InitApply(object)) => {
                    observe(&client, &state, kind, &object);
                }
                Ok(Event::Delete(_) | Event::Init | Event::InitDone) => {}
                Err(error) => {
                    tracing::warn!(%error, ?kind, "simulation: watching workloads failed; retrying");
                }
            }
        }
    })
}

/// Reacts to the current state of a workload: its writes run in a task of
/// their own, in order.
fn observe(client: &Client, state: &Arc<Mutex<State>>, kind: Kind, object: &DynamicObject) {
    let Ok(object) = serde_json::to_value(object) else {
        return;
    };
    let Some(reaction) = lock(state).react(kind, &object) else {
        return;
    };
    let (client, state) = (client.clone(), state.clone());
    tokio::spawn(async move {
        let Reaction {
            target,
            now,
            delay,
            finish,
        } = reaction;
        if let Some(now) = now {
            write_status(&client, &state, &target, |_| now.clone()).await;
        }
        let Some(finish) = finish else { return };
        tokio::time::sleep(delay).await;
        write_status(&client, &state, &target, |o| finish.status(target.kind, o)).await;
    });
}

/// Replaces the status of the target with the one `f` computes from the
/// object as read, if it is still the target and the simulation has not
/// stopped; a conflict reads it again.
async fn write_status(
    client: &Client,
    state: &Mutex<State>,
    target: &Target,
    f: impl Fn(&Value) -> Value,
) {
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &target.namespace,
        &api_resource(target.kind),
    );
    let name = target.name.as_str();
    for _ in 0..ATTEMPTS {
        if stopped(state) {
            return;
        }
        let mut current = match api.get_opt(name).await {
            Ok(Some(current)) => current,
            Ok(None) => return,
            Err(error) => {
                tracing::warn!(%error, %name, "simulation: reading a workload failed");
                return;
            }
        };
        let Ok(read) = serde_json::to_value(&current) else {
            return;
        };
        if !target.matches(&read) {
            return;
        }
        current.data["status"] = f(&read);
        match api
            .replace_status(name, &PostParams::default(), &current)
            .await
        {
            Ok(_) => return,
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => {
                tracing::warn!(%error, %name, "simulation: writing a status failed");
                return;
            }
        }
    }
    tracing::warn!(%name, "simulation: writing a status kept conflicting; gave up");
}

fn api_resource(kind: Kind) -> ApiResource {
    match kind {
        Kind::Deployment => ApiResource::erase::<Deployment>(&()),
        Kind::StatefulSet => ApiResource::erase::<StatefulSet>(&()),
        Kind::Job => ApiResource::erase::<Job>(&()),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::api::apps::v1::DeploymentStatus;
    use k8s_openapi::api::batch::v1::JobStatus;
    use kube::api::{Patch, PatchParams};
    use serde_json::json;

    use super::*;
    use crate::ApiServer;
    use crate::simulation::{JobOutcome, JobRule, Simulation, SimulationConfig};

    fn job(name: &str) -> Job {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox"}],
            }}},
        }))
        .expect("a valid Job")
    }

    fn deployment(name: &str, replicas: i32) -> Deployment {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "main", "image": "nginx"}]},
                },
            },
        }))
        .expect("a valid Deployment")
    }

    async fn job_status(jobs: &Api<Job>, name: &str) -> JobStatus {
        jobs.get(name).await.unwrap().status.unwrap_or_default()
    }

    async fn deployment_status(deployments: &Api<Deployment>, name: &str) -> DeploymentStatus {
        deployments
            .get(name)
            .await
            .unwrap()
            .status
            .unwrap_or_default()
    }

    /// Polls `get` until `done` holds (at most 10 s).
    async fn eventually<T: std::fmt::Debug>(
        what: &str,
        get: impl AsyncFn() -> T,
        done: impl Fn(&T) -> bool,
    ) -> T {
        for _ in 0..200 {
            let value = get().await;
            if done(&value) {
                return value;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{what}: never happened, last {:?}", get().await);
    }

    fn instant() -> SimulationConfig {
        SimulationConfig {
            rollout_delay: Duration::ZERO,
            job_duration: Duration::ZERO,
            job_rules: Vec::new(),
        }
    }

    #[tokio::test]
    async fn jobs_finish_through_the_client_as_the_rules_say() {
        let server = ApiServer::new();
        let jobs: Api<Job> = Api::namespaced(server.client(), "default");
        let sim = Simulation::through(server.client(), Some("default"), instant());
        sim.add_job_rule(JobRule::new("flaky-", JobOutcome::Fail).times(1));
        sim.add_job_rule(JobRule::new("stuck-", JobOutcome::Hang));
        for name in ["flaky-1", "stuck-1", "plain-1"] {
            jobs.create(&PostParams::default(), &job(name))
                .await
                .unwrap();
        }
        let failed = eventually(
            "flaky-1 fails",
            async || job_status(&jobs, "flaky-1").await,
            |s| s.failed.is_some(),
        )
        .await;
        assert_eq!(failed.succeeded, None);
        eventually(
            "plain-1 succeeds",
            async || job_status(&jobs, "plain-1").await,
            |s| s.succeeded == Some(1),
        )
        .await;
        let stuck = eventually(
            "stuck-1 starts",
            async || job_status(&jobs, "stuck-1").await,
            |s| s.active == Some(1),
        )
        .await;
        assert_eq!((stuck.succeeded, stuck.failed), (None, None), "it hangs");
        sim.stop();
    }

    #[tokio::test]
    async fn each_generation_rolls_out_in_the_simulated_namespace_only() {
        let server = ApiServer::new();
        let client = server.client();
        let mine: Api<Deployment> = Api::namespaced(client.clone(), "default");
        let other: Api<Deployment> = Api::namespaced(client.clone(), "kube-system");
        let config = SimulationConfig {
            rollout_delay: Duration::from_millis(100),
            ..instant()
        };
        let sim = Simulation::through(client, Some("default"), config);
        mine.create(&PostParams::default(), &deployment("web", 2))
            .await
            .unwrap();
        other
            .create(&PostParams::default(), &deployment("dns", 1))
            .await
            .unwrap();
        let web = async || deployment_status(&mine, "web").await;
        let ready = eventually("web rolls out", web, |s| s.ready_replicas == Some(2)).await;
        assert_eq!(
            (ready.observed_generation, ready.updated_replicas),
            (Some(1), Some(2))
        );

        let edit = json!({"spec": {"replicas": 3}});
        mine.patch("web", &PatchParams::default(), &Patch::Merge(&edit))
            .await
            .unwrap();
        let ready = eventually("generation 2 rolls out", web, |s| {
            s.observed_generation == Some(2) && s.ready_replicas == Some(3)
        })
        .await;
        assert_eq!(ready.updated_replicas, Some(3));
        let dns = deployment_status(&other, "dns").await;
        assert_eq!(
            dns.observed_generation, None,
            "another namespace is left alone"
        );
        sim.stop();
    }

    #[tokio::test]
    async fn a_pending_completion_is_not_written_after_stop() {
        let server = ApiServer::new();
        let jobs: Api<Job> = Api::namespaced(server.client(), "default");
        let config = SimulationConfig {
            job_duration: Duration::from_secs(60),
            ..instant()
        };
        let sim = Simulation::through(server.client(), None, config);
        jobs.create(&PostParams::default(), &job("late"))
            .await
            .unwrap();
        eventually(
            "late starts",
            async || job_status(&jobs, "late").await,
            |s| s.active == Some(1),
        )
        .await;
        sim.stop();
        // Paused, the clock jumps to each timer in turn: the completion's
        // first, then this sleep's.
        tokio::time::pause();
        tokio::time::sleep(Duration::from_secs(120)).await;
        let status = job_status(&jobs, "late").await;
        assert_eq!((status.succeeded, status.failed), (None, None));
    }
}
