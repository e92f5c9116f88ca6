//! A stand-in for kube-controller-manager: marks Jobs finished and
//! Deployments rolled out after a delay, by writing their status through the
//! API exactly as the real controllers would.
//!
//! The embedded API server stores objects but runs no controllers, so
//! without this nothing a Job or Deployment promises would ever happen.
//! Against a real cluster it is not started.
//!
//! Jobs succeed after [`SimulatorConfig::job_duration`] unless a
//! [`JobRule`] says otherwise (fail, or hang forever); Deployments report
//! every replica ready [`SimulatorConfig::rollout_duration`] after each new
//! `generation`.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::support::scoped_api;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// What happens to the Jobs a [`JobRule`] matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobOutcome {
    /// The Job fails (`status.failed = 1`, condition `Failed`).
    Fail,
    /// The Job never finishes.
    Hang,
}

/// Overrides the outcome of the first `times` Jobs whose name starts with
/// `name_prefix`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobRule {
    /// The prefix of the Jobs' names.
    pub name_prefix: String,
    /// What happens to them.
    pub outcome: JobOutcome,
    /// How many matching Jobs it applies to; later ones succeed.
    pub times: u32,
}

/// How the simulated controllers behave.
#[derive(Clone, Debug)]
pub struct SimulatorConfig {
    /// How long a Job runs before it finishes.
    pub job_duration: Duration,
    /// How long a Deployment takes to roll out a new generation.
    pub rollout_duration: Duration,
    /// How often the simulator looks at the cluster.
    pub tick: Duration,
    /// Jobs that do not simply succeed.
    pub job_rules: Vec<JobRule>,
}

impl Default for SimulatorConfig {
    fn default() -> Self {
        SimulatorConfig {
            job_duration: Duration::from_millis(1_500),
            rollout_duration: Duration::from_millis(1_000),
            tick: Duration::from_millis(100),
            job_rules: Vec::new(),
        }
    }
}

/// The simulated Job and Deployment controllers.
pub struct WorkloadSimulator {
    client: Client,
    config: SimulatorConfig,
    /// When each Job (by uid) was first seen, and its decided outcome.
    jobs: HashMap<String, (Instant, Option<JobOutcome>)>,
    /// When each Deployment generation (by uid) was first seen.
    rollouts: HashMap<String, (i64, Instant)>,
    /// How many Jobs each rule has been applied to.
    applied: Vec<u32>,
    /// The only namespace it acts in (`None`: every namespace).
    namespace: Option<String>,
}

impl WorkloadSimulator {
    /// A simulator acting through `client`.
    pub fn new(client: Client, config: SimulatorConfig) -> Self {
        let applied = vec![0; config.job_rules.len()];
        WorkloadSimulator {
            client,
            config,
            jobs: HashMap::new(),
            rollouts: HashMap::new(),
            applied,
            namespace: None,
        }
    }

    /// Acts on the Jobs and Deployments of `namespace` only, leaving other
    /// namespaces of a shared server alone.
    #[must_use]
    pub fn in_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Runs the simulator until the returned task is aborted.
    pub fn spawn(mut self) -> JoinHandle<()> {
        tokio::spawn(async move {
            loop {
                if let Err(error) = self.tick().await {
                    tracing::warn!(%error, "workload simulator: a pass failed; trying again");
                }
                tokio::time::sleep(self.config.tick).await;
            }
        })
    }

    /// One pass over Jobs and Deployments.
    ///
    /// # Errors
    /// The API's error; the next pass starts over.
    pub async fn tick(&mut self) -> Result<(), kube::Error> {
        self.jobs_pass().await?;
        self.deployments_pass().await
    }

    fn outcome_for(&mut self, name: &str) -> Option<JobOutcome> {
        for (i, rule) in self.config.job_rules.iter().enumerate() {
            if name.starts_with(&rule.name_prefix) && self.applied[i] < rule.times {
                self.applied[i] += 1;
                return Some(rule.outcome);
            }
        }
        None
    }

    async fn jobs_pass(&mut self) -> Result<(), kube::Error> {
        let api: Api<Job> = scoped_api(self.client.clone(), self.namespace.as_deref());
        for job in api.list(&ListParams::default()).await? {
            let status = job.status.clone().unwrap_or_default();
            if status.succeeded.unwrap_or(0) > 0 || status.failed.unwrap_or(0) > 0 {
                continue;
            }
            let uid = job.uid().unwrap_or_default();
            let name = job.name_any();
            let seen = match self.jobs.get(&uid) {
                Some(seen) => *seen,
                None => {
                    let seen = (Instant::now(), self.outcome_for(&name));
                    self.jobs.insert(uid.clone(), seen);
                    seen
                }
            };
            if seen.0.elapsed() < self.config.job_duration || seen.1 == Some(JobOutcome::Hang) {
                continue;
            }
            let now = jiff::Timestamp::now().to_string();
            let status = if seen.1 == Some(JobOutcome::Fail) {
                json!({"status": {"failed": 1, "startTime": now, "conditions": [
                    {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                     "message": "Job has reached the specified backoff limit",
                     "lastTransitionTime": now}]}})
            } else {
                json!({"status": {"succeeded": 1, "startTime": now, "completionTime": now,
                    "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": now}]}})
            };
            let ns = job.namespace().unwrap_or_default();
            let api: Api<Job> = Api::namespaced(self.client.clone(), &ns);
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await?;
            tracing::info!(job = %name, outcome = ?seen.1, "workload simulator: job finished");
        }
        Ok(())
    }

    async fn deployments_pass(&mut self) -> Result<(), kube::Error> {
        let api: Api<Deployment> = scoped_api(self.client.clone(), self.namespace.as_deref());
        for deployment in api.list(&ListParams::default()).await? {
            let generation = deployment.metadata.generation.unwrap_or(1);
            let replicas = deployment
                .spec
                .as_ref()
                .and_then(|s| s.replicas)
                .unwrap_or(1);
            let status = deployment.status.clone().unwrap_or_default();
            if status.observed_generation == Some(generation)
                && status.ready_replicas.unwrap_or(0) == replicas
            {
                continue;
            }
            let uid = deployment.uid().unwrap_or_default();
            let seen = match self.rollouts.get(&uid) {
                Some(&(g, at)) if g == generation => at,
                _ => {
                    let at = Instant::now();
                    self.rollouts.insert(uid, (generation, at));
                    at
                }
            };
            if seen.elapsed() < self.config.rollout_duration {
                continue;
            }
            let name = deployment.name_any();
            let ns = deployment.namespace().unwrap_or_default();
            let api: Api<Deployment> = Api::namespaced(self.client.clone(), &ns);
            let patch = json!({"status": {
                "observedGeneration": generation,
                "replicas": replicas,
                "updatedReplicas": replicas,
                "readyReplicas": replicas,
                "availableReplicas": replicas,
            }});
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            tracing::info!(deployment = %name, generation, "workload simulator: rollout complete");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::batch::v1::JobSpec;
    use kube::api::{ObjectMeta, PostParams};

    use super::*;
    use crate::support::{JobPhase, job_phase, rolled_out};
    use crate::testing::{NS, server};

    fn job(name: &str) -> Job {
        Job {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            spec: Some(JobSpec::default()),
            status: None,
        }
    }

    fn instant() -> SimulatorConfig {
        SimulatorConfig {
            job_duration: Duration::ZERO,
            rollout_duration: Duration::ZERO,
            ..SimulatorConfig::default()
        }
    }

    #[tokio::test]
    async fn jobs_finish_as_the_rules_say() {
        let (_server, client) = server().await;
        let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
        for name in ["flaky-1", "flaky-2", "stuck-1", "plain-1"] {
            jobs.create(&PostParams::default(), &job(name))
                .await
                .unwrap();
        }
        let mut config = instant();
        config.job_rules = vec![
            JobRule {
                name_prefix: "flaky-".into(),
                outcome: JobOutcome::Fail,
                times: 1,
            },
            JobRule {
                name_prefix: "stuck-".into(),
                outcome: JobOutcome::Hang,
                times: 1,
            },
        ];
        let mut simulator = WorkloadSimulator::new(client.clone(), config);
        simulator.tick().await.unwrap();
        simulator.tick().await.unwrap();

        let phase = |name: &'static str| {
            let jobs = jobs.clone();
            async move { job_phase(&jobs.get(name).await.unwrap()) }
        };
        let mut flaky = [phase("flaky-1").await, phase("flaky-2").await];
        flaky.sort_by_key(|p| format!("{p:?}"));
        assert_eq!(
            flaky,
            [JobPhase::Failed, JobPhase::Succeeded],
            "one flaky job fails"
        );
        assert_eq!(phase("stuck-1").await, JobPhase::Running);
        assert_eq!(phase("plain-1").await, JobPhase::Succeeded);
    }

    #[tokio::test]
    async fn each_new_generation_of_a_deployment_rolls_out() {
        let (_server, client) = server().await;
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
        let kc = crate::testing::create(
            &client,
            crate::mutable_jar::Keycloak::new(
                "sso",
                crate::mutable_jar::KeycloakSpec {
                    image: "keycloak".into(),
                    extensions: vec![],
                    replicas: 2,
                },
            ),
        )
        .await;
        let created = deployments
            .create(
                &PostParams::default(),
                &crate::mutable_jar::deployment(&kc, "a"),
            )
            .await
            .unwrap();
        assert!(!rolled_out(&created));
        let mut simulator = WorkloadSimulator::new(client.clone(), instant());
        simulator.tick().await.unwrap();
        let ready = deployments.get("sso").await.unwrap();
        assert!(rolled_out(&ready), "{:?}", ready.status);
        assert_eq!(ready.status.as_ref().unwrap().ready_replicas, Some(2));

        let edit = json!({"spec": {"replicas": 3}});
        let edited = deployments
            .patch("sso", &PatchParams::default(), &Patch::Merge(&edit))
            .await
            .unwrap();
        assert!(
            !rolled_out(&edited),
            "a new generation is not rolled out yet"
        );
        simulator.tick().await.unwrap();
        let ready = deployments.get("sso").await.unwrap();
        assert!(rolled_out(&ready), "{:?}", ready.status);
        assert_eq!(ready.status.as_ref().unwrap().ready_replicas, Some(3));
    }
}
