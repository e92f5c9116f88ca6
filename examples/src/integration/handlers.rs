//! The handlers of [`IntegrationPhase`].

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use operator_fsm::dependents::{
    Dependent, DependentState, DependentsError, DesiredSet, Readiness, Reads, StepDependents,
    converge_state,
};
use operator_fsm::prelude::*;

use super::crd::{KIT_DIGEST_LABEL, integration_deployment, kit_image, kit_job, kit_job_name};
use super::{Integration, IntegrationError, IntegrationPhase, IntegrationSpec};
use crate::support::{JobPhase, job_phase};

type Result<T> = std::result::Result<T, IntegrationError>;

fn namespace(integration: &Integration) -> Result<String> {
    integration
        .namespace()
        .ok_or(IntegrationError::NotNamespaced)
}

fn first_image(deployment: &Deployment) -> Option<&str> {
    deployment
        .spec
        .as_ref()?
        .template
        .spec
        .as_ref()?
        .containers
        .first()?
        .image
        .as_deref()
}

/// `Initialization`: the kit's digest, from the spec the workflow started
/// from (the record's snapshot), or the live spec when there is none.
pub(super) async fn initialize(
    cx: &mut Step<'_, IntegrationPhase>,
) -> Result<Transition<IntegrationPhase>> {
    let spec: IntegrationSpec = match cx.spec_snapshot() {
        Some(snapshot) => serde_json::from_value(snapshot.clone())?,
        None => cx.resource().spec.clone(),
    };
    Ok(Transition::next(IntegrationPhase::BuildingKit {
        digest: spec.kit_digest(),
    }))
}

/// `BuildingKit`: reuse a kit already built for `digest`, or run this
/// attempt's build Job (a per-attempt dependent: created once, then only
/// read) and wait for it. A failed build is a retryable error: the next
/// attempt starts a new Job.
pub(super) async fn build_kit(
    cx: &mut Step<'_, IntegrationPhase>,
    digest: &str,
) -> Result<Transition<IntegrationPhase>> {
    let integration = cx.resource();
    let jobs: Api<Job> = Api::namespaced(cx.context().client.clone(), &namespace(integration)?);
    let built = jobs
        .list(&ListParams::default().labels(&format!("{KIT_DIGEST_LABEL}={digest}")))
        .await?
        .items
        .iter()
        .any(|job| job_phase(job) == JobPhase::Succeeded);
    let deploying = IntegrationPhase::Deploying {
        digest: digest.to_owned(),
    };
    if built {
        return Ok(Transition::next(deploying));
    }
    let build = Dependent::per_attempt("kit-build", &kit_job(integration, digest), cx.attempt())
        .ready_as(kit_built);
    let convergence = cx
        .converge(&DesiredSet::builder().dependent(build).build()?)
        .await?;
    match convergence.state("kit-build") {
        Some(DependentState::Ready) => Ok(Transition::next(deploying)),
        Some(DependentState::Failed(why)) => {
            tracing::warn!(integration = %integration.name_any(), %why, "kit build failed");
            Err(IntegrationError::BuildFailed {
                job: kit_job_name(integration, digest, cx.attempt()),
            })
        }
        _ => Ok(Transition::wait(cx.context().poll)),
    }
}

/// A build Job is ready once a pod succeeded, failed once one failed.
fn kit_built(job: &Job) -> Readiness {
    match job_phase(job) {
        JobPhase::Succeeded => Readiness::Ready,
        JobPhase::Failed => Readiness::Failed("the build failed".to_owned()),
        JobPhase::Running => Readiness::pending("building"),
    }
}

/// `Deploying`: make the Deployment (a dependent) run the kit with the
/// spec's replicas, and wait for the rollout.
pub(super) async fn deploy(
    cx: &mut Step<'_, IntegrationPhase>,
    digest: &str,
) -> Result<Transition<IntegrationPhase>> {
    let wanted = integration_deployment(cx.resource(), &kit_image(digest));
    let set = DesiredSet::builder()
        .dependent(Dependent::new("deployment", &wanted))
        .build()?;
    let running = IntegrationPhase::Running {
        digest: digest.to_owned(),
    };
    Ok(converge_state(cx, &set, running).await?)
}

/// `Running`: redeploy when the Deployment is gone or runs another image.
pub(super) async fn monitor(
    cx: &mut Step<'_, IntegrationPhase>,
    digest: &str,
) -> Result<Transition<IntegrationPhase>> {
    let integration = cx.resource();
    let image = kit_image(digest);
    // Read through the dependents' runtime (its watch cache of Deployments
    // when it has one, else a GET). An API that cannot answer is no reason
    // to fail a running integration: look again later.
    let found = match read_deployment(cx.reads(), &integration.name_any()).await {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!(integration = %integration.name_any(), error = %e, "cannot check the deployment; looking again later");
            return Ok(Transition::stay());
        }
    };
    let healthy = found.is_some_and(|d| first_image(&d) == Some(image.as_str()));
    Ok(if healthy {
        Transition::stay()
    } else {
        Transition::next(IntegrationPhase::Deploying {
            digest: digest.to_owned(),
        })
    })
}

/// The Deployment `name` in the integration's namespace, through the
/// dependents' runtime (`reads`: the step's, taken before the await, as
/// the step itself is not `Sync`).
async fn read_deployment(
    reads: std::result::Result<Reads, DependentsError>,
    name: &str,
) -> std::result::Result<Option<Deployment>, Box<dyn std::error::Error + Send + Sync>> {
    Ok(reads?.get_opt::<Deployment>(name).await?)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use kube::Client;
    use kube::api::{Patch, PatchParams, PostParams};
    use operator_fsm::core::{Harness, RunHandlerError};
    use serde_json::json;

    use super::*;
    use crate::integration::IntegrationContext;
    use crate::testing::{NS, create, server, set_job_status};

    fn spec(source: &str) -> IntegrationSpec {
        IntegrationSpec {
            source: source.into(),
            dependencies: vec!["camel:kafka".into()],
            replicas: 1,
        }
    }

    /// A harness for `it` with a dependents runtime, as the reconciler
    /// installs one.
    fn harness(it: &Integration, client: &Client) -> Harness<IntegrationPhase> {
        let runtime = operator_fsm::dependents::DependentsRuntime::new(client.clone())
            .pending_requeue(Duration::from_secs(5));
        Harness::<IntegrationPhase>::new(it.clone(), ctx(client))
            .with_extension(std::sync::Arc::new(runtime))
    }

    fn ctx(client: &Client) -> IntegrationContext {
        IntegrationContext {
            poll: Duration::from_secs(5),
            ..IntegrationContext::new(client.clone())
        }
    }

    #[test]
    fn the_kit_digest_covers_source_and_dependencies_not_replicas() {
        let a = spec("from: timer:a");
        let more = IntegrationSpec {
            replicas: 3,
            ..a.clone()
        };
        let other = spec("from: timer:b");
        assert_eq!(a.kit_digest(), more.kit_digest());
        assert_ne!(a.kit_digest(), other.kit_digest());
    }

    #[tokio::test]
    async fn initialization_digests_the_spec() {
        let (_server, client) = server().await;
        let it = create(&client, Integration::new("orders", spec("from: timer:a"))).await;
        let out = Harness::<IntegrationPhase>::new(it.clone(), ctx(&client))
            .run_handler()
            .await
            .unwrap();
        assert_eq!(
            out,
            Transition::next(IntegrationPhase::BuildingKit {
                digest: it.spec.kit_digest()
            })
        );
    }

    #[tokio::test]
    async fn each_attempt_builds_with_a_new_job_and_a_failed_build_is_retryable() {
        let (_server, client) = server().await;
        let it = create(&client, Integration::new("orders", spec("from: timer:a"))).await;
        let digest = it.spec.kit_digest();
        let building = IntegrationPhase::BuildingKit {
            digest: digest.clone(),
        };
        let first = harness(&it, &client).in_state(building.clone());
        assert_eq!(
            first.run_handler().await.unwrap(),
            Transition::wait(Duration::from_secs(5))
        );
        let job0 = kit_job_name(&it, &digest, 0);
        set_job_status(&client, &job0, json!({"failed": 1})).await;
        let err = first.run_handler().await.unwrap_err();
        assert!(
            matches!(&err, RunHandlerError::Handler(IntegrationError::BuildFailed { job }) if *job == job0),
            "{err:?}"
        );
        assert_eq!(err.class(), ErrorClass::RETRYABLE);

        // The engine counted the failure: the next attempt starts job 1.
        let second = harness(&it, &client).in_state(building).attempt(1);
        assert_eq!(
            second.run_handler().await.unwrap(),
            Transition::wait(Duration::from_secs(5))
        );
        let job1 = kit_job_name(&it, &digest, 1);
        set_job_status(&client, &job1, json!({"succeeded": 1})).await;
        assert_eq!(
            second.run_handler().await.unwrap(),
            Transition::next(IntegrationPhase::Deploying { digest })
        );
    }

    #[tokio::test]
    async fn a_kit_already_built_is_reused() {
        let (_server, client) = server().await;
        let it = create(&client, Integration::new("orders", spec("from: timer:a"))).await;
        let digest = it.spec.kit_digest();
        let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
        let mut job = kit_job(&it, &digest);
        job.metadata.name = Some(kit_job_name(&it, &digest, 2));
        jobs.create(&PostParams::default(), &job).await.unwrap();
        set_job_status(
            &client,
            &kit_job_name(&it, &digest, 2),
            json!({"succeeded": 1}),
        )
        .await;

        let out = harness(&it, &client)
            .in_state(IntegrationPhase::BuildingKit {
                digest: digest.clone(),
            })
            .run_handler()
            .await
            .unwrap();
        assert_eq!(
            out,
            Transition::next(IntegrationPhase::Deploying { digest })
        );
        assert_eq!(
            jobs.list(&ListParams::default()).await.unwrap().items.len(),
            1
        );
    }

    #[tokio::test]
    async fn deploying_rolls_out_the_kit_and_running_redeploys_on_drift() {
        let (_server, client) = server().await;
        let it = create(&client, Integration::new("orders", spec("from: timer:a"))).await;
        let digest = it.spec.kit_digest();
        let deploying = harness(&it, &client).in_state(IntegrationPhase::Deploying {
            digest: digest.clone(),
        });
        assert_eq!(
            deploying.run_handler().await.unwrap(),
            Transition::wait(Duration::from_secs(5))
        );
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
        let created = deployments.get("orders").await.unwrap();
        assert_eq!(first_image(&created), Some(kit_image(&digest).as_str()));
        let ready = json!({"status": {"observedGeneration": created.metadata.generation.unwrap_or(1),
            "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1}});
        deployments
            .patch_status("orders", &PatchParams::default(), &Patch::Merge(&ready))
            .await
            .unwrap();
        assert_eq!(
            deploying.run_handler().await.unwrap(),
            Transition::next(IntegrationPhase::Running {
                digest: digest.clone()
            })
        );

        // The runtime the reconciler installs: `Running` reads through it.
        let running = harness(&it, &client).in_state(IntegrationPhase::Running {
            digest: digest.clone(),
        });
        assert_eq!(running.run_handler().await.unwrap(), Transition::stay());
        deployments
            .delete("orders", &Default::default())
            .await
            .unwrap();
        assert_eq!(
            running.run_handler().await.unwrap(),
            Transition::next(IntegrationPhase::Deploying { digest })
        );
    }
}
