//! Simulated workloads observed through `kube::Api`, bounded in time.

use crate::common;

use std::time::Duration;

use common::within;
use fsm_testkit::ApiServer;
use fsm_testkit::simulation::{JobOutcome, JobRule, OUTCOME_LABEL, SimulationConfig};
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::wait::{Condition, await_condition};
use serde_json::json;

fn fast() -> SimulationConfig {
    SimulationConfig {
        rollout_delay: Duration::from_millis(200),
        job_duration: Duration::from_millis(200),
        job_rules: Vec::new(),
    }
}

fn pod_template(app: &str) -> serde_json::Value {
    json!({"metadata": {"labels": {"app": app}},
           "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
}

fn deployment(name: &str, replicas: i32) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": pod_template(name)}
    }))
    .unwrap()
}

fn job(name: &str, outcome: Option<&str>) -> Job {
    let mut j = json!({"metadata": {"name": name},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox"}]}}}});
    if let Some(o) = outcome {
        j["metadata"]["labels"] = json!({ OUTCOME_LABEL: o });
    }
    serde_json::from_value(j).unwrap()
}

fn deployment_ready(replicas: i32) -> impl Condition<Deployment> {
    move |d: Option<&Deployment>| {
        d.and_then(|d| {
            let s = d.status.as_ref()?;
            let available = s
                .conditions
                .as_ref()?
                .iter()
                .any(|c| c.type_ == "Available" && c.status == "True");
            Some(
                s.observed_generation == d.metadata.generation
                    && s.ready_replicas == Some(replicas)
                    && s.updated_replicas == Some(replicas)
                    && s.available_replicas == Some(replicas)
                    && available,
            )
        })
        .unwrap_or(false)
    }
}

fn job_condition(ty: &'static str) -> impl Condition<Job> {
    move |j: Option<&Job>| {
        j.and_then(|j| j.status.as_ref()?.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == ty && c.status == "True"))
    }
}

#[tokio::test]
async fn nothing_happens_without_the_simulation() {
    let server = ApiServer::new();
    let deployments: Api<Deployment> = Api::default_namespaced(server.client());
    deployments
        .create(&PostParams::default(), &deployment("idle", 1))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Still the empty status of a new Deployment.
    assert_eq!(
        deployments.get("idle").await.unwrap().status,
        Some(Default::default())
    );
}

#[tokio::test]
async fn deployments_become_ready_after_the_delay_for_each_generation() {
    let server = ApiServer::new();
    let _sim = server.simulate(fast());
    let deployments: Api<Deployment> = Api::default_namespaced(server.client());
    let started = std::time::Instant::now();
    deployments
        .create(&PostParams::default(), &deployment("web", 2))
        .await
        .unwrap();
    // Progressing first: observed, not yet updated.
    let progressing = |d: Option<&Deployment>| {
        d.and_then(|d| d.status.as_ref())
            .is_some_and(|s| s.observed_generation == Some(1) && s.updated_replicas == Some(0))
    };
    within(5, await_condition(deployments.clone(), "web", progressing))
        .await
        .unwrap();
    within(
        5,
        await_condition(deployments.clone(), "web", deployment_ready(2)),
    )
    .await
    .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(200));

    let scale = json!({"spec": {"replicas": 3}});
    deployments
        .patch("web", &PatchParams::default(), &Patch::Merge(&scale))
        .await
        .unwrap();
    within(
        5,
        await_condition(deployments.clone(), "web", deployment_ready(3)),
    )
    .await
    .unwrap();
    let d = deployments.get("web").await.unwrap();
    assert_eq!(d.status.unwrap().observed_generation, Some(2));
}

#[tokio::test]
async fn statefulsets_become_ready() {
    let server = ApiServer::new();
    server.simulate(fast());
    let sets: Api<StatefulSet> = Api::default_namespaced(server.client());
    let set: StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": "db"},
        "spec": {"replicas": 3, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                 "template": pod_template("db")}
    }))
    .unwrap();
    sets.create(&PostParams::default(), &set).await.unwrap();
    let ready = |s: Option<&StatefulSet>| {
        s.and_then(|s| s.status.as_ref()).is_some_and(|st| {
            st.ready_replicas == Some(3) && st.current_revision == st.update_revision
        })
    };
    within(5, await_condition(sets.clone(), "db", ready))
        .await
        .unwrap();
    let st = sets.get("db").await.unwrap().status.unwrap();
    assert_eq!(st.observed_generation, Some(1));
    assert_eq!(st.available_replicas, Some(3));
}

#[tokio::test]
async fn jobs_succeed_or_fail_as_asked() {
    let server = ApiServer::new();
    let mut config = fast();
    config.job_rules = vec![JobRule::new("flaky-", JobOutcome::Fail).times(1)];
    let sim = server.simulate(config);
    sim.add_job_rule(JobRule::new("stuck-", JobOutcome::Hang));
    let jobs: Api<Job> = Api::default_namespaced(server.client());
    let pp = PostParams::default();
    for j in [
        job("plain", None),
        job("flaky-1", None),
        job("flaky-2", None),
        job("labelled", Some("fail")),
        job("stuck-1", None),
    ] {
        jobs.create(&pp, &j).await.unwrap();
    }
    within(
        5,
        await_condition(jobs.clone(), "plain", job_condition("Complete")),
    )
    .await
    .unwrap();
    let plain = jobs.get("plain").await.unwrap().status.unwrap();
    assert_eq!(plain.succeeded, Some(1));
    assert!(plain.completion_time.is_some() && plain.start_time.is_some());

    within(
        5,
        await_condition(jobs.clone(), "flaky-1", job_condition("Failed")),
    )
    .await
    .unwrap();
    within(
        5,
        await_condition(jobs.clone(), "flaky-2", job_condition("Complete")),
    )
    .await
    .unwrap();
    within(
        5,
        await_condition(jobs.clone(), "labelled", job_condition("Failed")),
    )
    .await
    .unwrap();
    let failed = jobs.get("labelled").await.unwrap().status.unwrap();
    assert_eq!(failed.failed, Some(7), "backoffLimit (6) + 1 failed pods");

    // The hanging job started and never finishes.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let stuck = jobs.get("stuck-1").await.unwrap().status.unwrap();
    assert_eq!(stuck.active, Some(1));
    assert!(stuck.conditions.is_none());

    // Stopped: new jobs stay as created.
    sim.stop();
    jobs.create(&pp, &job("after", None)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    // Still the empty status of a new Job.
    assert_eq!(
        jobs.get("after").await.unwrap().status,
        Some(Default::default())
    );
}

#[tokio::test]
async fn workloads_created_before_the_simulation_are_picked_up() {
    let server = ApiServer::new();
    let deployments: Api<Deployment> = Api::default_namespaced(server.client());
    deployments
        .create(&PostParams::default(), &deployment("early", 1))
        .await
        .unwrap();
    let mut config = fast();
    config.rollout_delay = Duration::ZERO;
    server.simulate(config);
    within(
        5,
        await_condition(deployments.clone(), "early", deployment_ready(1)),
    )
    .await
    .unwrap();
}
