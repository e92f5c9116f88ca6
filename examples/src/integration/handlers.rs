//! The handlers of [`IntegrationPhase`].

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};

use fsm_kube::prelude::*;

use super::crd::{KIT_DIGEST_LABEL, integration_deployment, kit_image, kit_job, kit_job_name};
use super::{Integration, IntegrationError, IntegrationPhase, IntegrationSpec};
use crate::support::{JobPhase, create_or_get, job_phase, rolled_out};

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
/// attempt's build Job and wait for it. A failed build is a retryable
/// error: the next attempt starts a new Job.
pub(super) async fn build_kit(
    cx: &mut Step<'_, IntegrationPhase>,
    digest: &str,
) -> Result<Transition<IntegrationPhase>> {
    let integration = cx.resource();
    let ctx = cx.context();
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &namespace(integration)?);
    let built = jobs
        .list(&ListParams::default().labels(&format!("{KIT_DIGEST_LABEL}={digest}")))
        .await?
        .items
        .iter()
        .any(|job| job_phase(job) == JobPhase::Succeeded);
    if built {
        return Ok(Transition::next(IntegrationPhase::Deploying {
            digest: digest.to_owned(),
        }));
    }
    let job = create_or_get(&jobs, &kit_job(integration, digest, cx.attempt())).await?;
    match job_phase(&job) {
        JobPhase::Succeeded => Ok(Transition::next(IntegrationPhase::Deploying {
            digest: digest.to_owned(),
        })),
        JobPhase::Failed => Err(IntegrationError::BuildFailed {
            job: kit_job_name(integration, digest, cx.attempt()),
        }),
        JobPhase::Running => Ok(Transition::wait(ctx.poll)),
    }
}

/// `Deploying`: make the Deployment run the kit with the spec's replicas,
/// and wait for the rollout.
pub(super) async fn deploy(
    cx: &mut Step<'_, IntegrationPhase>,
    digest: &str,
) -> Result<Transition<IntegrationPhase>> {
    let integration = cx.resource();
    let ctx = cx.context();
    let api: Api<Deployment> = Api::namespaced(ctx.client.clone(), &namespace(integration)?);
    let image = kit_image(digest);
    let wanted = integration_deployment(integration, &image);
    let current = match api.get_opt(&integration.name_any()).await? {
        None => api.create(&PostParams::default(), &wanted).await?,
        Some(current) if current.spec != wanted.spec => {
            let patch = serde_json::json!({ "spec": wanted.spec });
            api.patch(
                &integration.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?
        }
        Some(current) => current,
    };
    Ok(if rolled_out(&current) {
        Transition::next(IntegrationPhase::Running {
            digest: digest.to_owned(),
        })
    } else {
        Transition::wait(ctx.poll)
    })
}

/// `Running`: redeploy when the Deployment is gone or runs another image.
pub(super) async fn monitor(
    cx: &mut Step<'_, IntegrationPhase>,
    digest: &str,
) -> Result<Transition<IntegrationPhase>> {
    let integration = cx.resource();
    let api: Api<Deployment> =
        Api::namespaced(cx.context().client.clone(), &namespace(integration)?);
    let image = kit_image(digest);
    let healthy = api
        .get_opt(&integration.name_any())
        .await?
        .is_some_and(|d| first_image(&d) == Some(image.as_str()));
    Ok(if healthy {
        Transition::stay()
    } else {
        Transition::next(IntegrationPhase::Deploying {
            digest: digest.to_owned(),
        })
    })
}
