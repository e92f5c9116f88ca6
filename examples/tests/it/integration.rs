//! The Camel K Integration operator through a real `Controller`.

use crate::common;

use common::{Env, options, quick_simulation, wait_for};
use examples::demo::observe::Kind;
use examples::integration::{
    self, Integration, IntegrationContext, IntegrationSpec, KIT_DIGEST_LABEL,
};
use examples::support::{JobPhase, job_phase};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use operator_fsm::core::StateRecord;
use operator_fsm::testkit::simulation::{JobOutcome, JobRule};
use serde_json::json;

fn spec(source: &str) -> IntegrationSpec {
    IntegrationSpec {
        source: source.into(),
        dependencies: vec!["camel:kafka".into()],
        replicas: 1,
    }
}

async fn failing_builds(prefix: &str, times: u32) -> Env {
    let mut simulation = quick_simulation();
    simulation
        .job_rules
        .push(JobRule::new(prefix, JobOutcome::Fail).times(times));
    Env::new(simulation).await
}

fn digest_of(record: &StateRecord) -> Option<String> {
    record
        .data
        .as_ref()?
        .get("digest")?
        .as_str()
        .map(str::to_owned)
}

async fn jobs(env: &Env) -> Vec<Job> {
    let api: Api<Job> = Api::namespaced(env.client.clone(), &env.ns);
    let mut jobs = api.list(&ListParams::default()).await.unwrap().items;
    jobs.sort_by_key(|j| j.name_any());
    jobs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_build_is_retried_and_only_a_new_digest_rebuilds() {
    let mut env = failing_builds("orders-kit-", 1).await;
    let client = env.client.clone();
    env.spawn(integration::run_in(
        client.clone(),
        env.scope(),
        IntegrationContext::new(client.clone()),
        options(),
    ));
    let api: Api<Integration> = Api::namespaced(client.clone(), &env.ns);
    let first = spec("- from: {uri: kafka:orders, steps: [{to: log:info}]}");
    api.create(
        &PostParams::default(),
        &Integration::new("orders", first.clone()),
    )
    .await
    .unwrap();

    let running = wait_for(&env, Kind::Integration, "orders", "Running", |_| true).await;
    assert_eq!(digest_of(&running), Some(first.kit_digest()));
    let path: Vec<&str> = running.history.iter().map(|h| h.to.as_str()).collect();
    assert_eq!(
        path,
        ["Initialization", "BuildingKit", "Deploying", "Running"]
    );
    let phases: Vec<JobPhase> = jobs(&env).await.iter().map(job_phase).collect();
    assert_eq!(
        phases,
        [JobPhase::Failed, JobPhase::Succeeded],
        "attempt 0 failed, attempt 1 built"
    );

    // New routes: a new digest, a new kit.
    let second = spec("- from: {uri: kafka:orders, steps: [{to: jdbc:orders}]}");
    let patch = json!({"spec": {"source": second.source}});
    api.patch("orders", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let rebuilt = wait_for(&env, Kind::Integration, "orders", "Running", |r| {
        digest_of(r) == Some(second.kit_digest())
    })
    .await;
    assert_eq!(rebuilt.observed_generation, Some(2));
    let selector = format!("{KIT_DIGEST_LABEL}={}", second.kit_digest());
    let kit_jobs: Api<Job> = Api::namespaced(client.clone(), &env.ns);
    let new_kit = kit_jobs
        .list(&ListParams::default().labels(&selector))
        .await
        .unwrap();
    assert_eq!(new_kit.items.len(), 1);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &env.ns);
    let image = |d: &Deployment| {
        d.spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .and_then(|p| p.containers.first()?.image.clone())
    };
    let deployment = deployments.get("orders").await.unwrap();
    assert_eq!(
        image(&deployment),
        Some(integration::kit_image(&second.kit_digest()))
    );

    // Only replicas: the same digest, no build, a redeploy.
    let patch = json!({"spec": {"replicas": 3}});
    api.patch("orders", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait_for(&env, Kind::Integration, "orders", "Running", |r| {
        r.observed_generation == Some(3)
    })
    .await;
    assert_eq!(jobs(&env).await.len(), 3, "no build for a replicas change");
    let deployment = deployments.get("orders").await.unwrap();
    assert_eq!(deployment.spec.and_then(|s| s.replicas), Some(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_build_gives_up_after_three_attempts() {
    let mut env = failing_builds("doomed-kit-", 10).await;
    let client = env.client.clone();
    env.spawn(integration::run_in(
        client.clone(),
        env.scope(),
        IntegrationContext::new(client.clone()),
        options(),
    ));
    let api: Api<Integration> = Api::namespaced(client.clone(), &env.ns);
    api.create(
        &PostParams::default(),
        &Integration::new("doomed", spec("- from: {uri: timer:x}")),
    )
    .await
    .unwrap();

    let error = wait_for(&env, Kind::Integration, "doomed", "Error", |_| true).await;
    let reason = error.last_error.unwrap_or_default();
    assert!(reason.contains("kit build doomed-kit-"), "{reason}");
    let phases: Vec<JobPhase> = jobs(&env).await.iter().map(job_phase).collect();
    assert_eq!(phases, [JobPhase::Failed; 3]);
    let last = error.history.last().unwrap();
    assert_eq!(
        (last.from.as_deref(), last.to.as_str()),
        (Some("BuildingKit"), "Error")
    );
}
