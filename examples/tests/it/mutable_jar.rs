//! The Keycloak augmentation operator through a real `Controller`.

use crate::common;

use common::{Env, options, quick_simulation, wait_for};
use examples::demo::observe::Kind;
use examples::mutable_jar::{self, BuildPlan, JarContext, Keycloak, KeycloakSpec, running_image};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use operator_fsm::testkit::simulation::{JobOutcome, JobRule};
use serde_json::json;

fn spec() -> KeycloakSpec {
    KeycloakSpec {
        image: "quay.io/keycloak/keycloak:26.0".into(),
        extensions: vec!["metrics.jar".into(), "theme.jar".into()],
        replicas: 2,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_is_built_rolled_out_and_restored_after_drift() {
    let mut env = Env::new(quick_simulation()).await;
    let client = env.client.clone();
    env.spawn(mutable_jar::run_in(
        client.clone(),
        env.scope(),
        JarContext::new(client.clone()),
        options(),
    ));
    let keycloaks: Api<Keycloak> = Api::namespaced(client.clone(), &env.ns);
    let kc = keycloaks
        .create(&PostParams::default(), &Keycloak::new("sso", spec()))
        .await
        .unwrap();
    let plan = BuildPlan::for_keycloak(&kc, &JarContext::new(client.clone()).registry);

    let done = wait_for(&env, Kind::Keycloak, "sso", "Done", |_| true).await;
    let path: Vec<&str> = done.history.iter().map(|h| h.to.as_str()).collect();
    assert_eq!(
        path,
        [
            "Unknown",
            "AugmentationStarted",
            "AugmentationFinished",
            "Done"
        ]
    );
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &env.ns);
    let deployment = deployments.get("sso").await.unwrap();
    assert_eq!(running_image(&deployment), Some(plan.image.as_str()));

    // Someone rolls the stock image back in: drift.
    let edit = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "keycloak", "image": "quay.io/keycloak/keycloak:26.0"}]}}}});
    deployments
        .patch("sso", &PatchParams::default(), &Patch::Merge(&edit))
        .await
        .unwrap();
    let repaired = wait_for(&env, Kind::Keycloak, "sso", "Done", |r| {
        r.transitions > done.transitions
    })
    .await;
    let drift = repaired
        .history
        .iter()
        .any(|h| h.from.as_deref() == Some("Done") && h.to == "Unknown");
    assert!(drift, "{:?}", repaired.history);
    let deployment = deployments.get("sso").await.unwrap();
    assert_eq!(running_image(&deployment), Some(plan.image.as_str()));
    // The image of an unchanged spec is not built twice.
    let jobs: Api<Job> = Api::namespaced(client, &env.ns);
    assert_eq!(
        jobs.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_build_rests_in_error_with_its_job_cancelled() {
    let mut simulation = quick_simulation();
    simulation
        .job_rules
        .push(JobRule::new("broken-augment-", JobOutcome::Fail).times(1));
    let mut env = Env::new(simulation).await;
    let client = env.client.clone();
    env.spawn(mutable_jar::run_in(
        client.clone(),
        env.scope(),
        JarContext::new(client.clone()),
        options(),
    ));
    let keycloaks: Api<Keycloak> = Api::namespaced(client.clone(), &env.ns);
    keycloaks
        .create(&PostParams::default(), &Keycloak::new("broken", spec()))
        .await
        .unwrap();

    let error = wait_for(&env, Kind::Keycloak, "broken", "Error", |_| true).await;
    let reason = error.last_error.unwrap_or_default();
    assert!(reason.contains("build job broken-augment-"), "{reason}");
    let jobs: Api<Job> = Api::namespaced(client.clone(), &env.ns);
    assert!(
        jobs.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let kc = keycloaks.get("broken").await.unwrap();
    let conditions = kc.status.and_then(|s| s.conditions).unwrap_or_default();
    let ready = conditions.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(ready.status, "False");
}
