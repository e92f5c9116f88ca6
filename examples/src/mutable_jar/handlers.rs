//! The handlers of [`JarState`]: each looks at the cluster, acts
//! idempotently, and says where the machine goes next.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};

use fsm_kube::prelude::*;

use super::crd::{BuildPlan, deployment, running_image};
use super::{JarError, JarState, Keycloak};
use crate::support::{JobPhase, create_or_get, job_phase, rolled_out};

type Result<T> = std::result::Result<T, JarError>;

fn namespace(keycloak: &Keycloak) -> Result<String> {
    keycloak.namespace().ok_or(JarError::NotNamespaced)
}

/// `Unknown`: start (or find) the build Job of the current spec.
pub(super) async fn start_augmentation(
    cx: &mut Step<'_, JarState>,
) -> Result<Transition<JarState>> {
    let keycloak = cx.resource();
    let ctx = cx.context();
    let plan = BuildPlan::for_keycloak(keycloak, &ctx.registry);
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &namespace(keycloak)?);
    create_or_get(&jobs, &plan.job_object(keycloak)).await?;
    Ok(Transition::next(JarState::AugmentationStarted {
        job: plan.job,
        image: plan.image,
    }))
}

/// `AugmentationStarted`: wait for the build Job.
pub(super) async fn watch_build(
    cx: &mut Step<'_, JarState>,
    job: &str,
    image: &str,
) -> Result<Transition<JarState>> {
    let ctx = cx.context();
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &namespace(cx.resource())?);
    let Some(found) = jobs.get_opt(job).await? else {
        // Deleted by someone: plan again.
        return Ok(Transition::next(JarState::Unknown));
    };
    Ok(match job_phase(&found) {
        JobPhase::Succeeded => Transition::next(JarState::AugmentationFinished {
            image: image.to_owned(),
        }),
        JobPhase::Failed => Transition::fail(format!("build job {job} failed")),
        JobPhase::Running => Transition::wait(ctx.poll),
    })
}

/// Compensation of `AugmentationStarted`: a workflow that fails (a build
/// that timed out) cancels its build.
pub(super) async fn cancel_build(
    cx: &mut Step<'_, JarState>,
    job: &str,
    _image: &str,
) -> Result<()> {
    let jobs: Api<Job> = Api::namespaced(cx.context().client.clone(), &namespace(cx.resource())?);
    match jobs.delete(job, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// `AugmentationFinished`: make the Deployment run `image`, and wait for
/// its rollout.
pub(super) async fn roll_out(
    cx: &mut Step<'_, JarState>,
    image: &str,
) -> Result<Transition<JarState>> {
    let keycloak = cx.resource();
    let ctx = cx.context();
    let api: Api<Deployment> = Api::namespaced(ctx.client.clone(), &namespace(keycloak)?);
    let wanted = deployment(keycloak, image);
    let current = match api.get_opt(&keycloak.name_any()).await? {
        None => api.create(&PostParams::default(), &wanted).await?,
        Some(current)
            if running_image(&current) != Some(image)
                || current.spec.as_ref().and_then(|s| s.replicas)
                    != Some(keycloak.spec.replicas) =>
        {
            let patch = serde_json::json!({ "spec": wanted.spec });
            api.patch(
                &keycloak.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?
        }
        Some(current) => current,
    };
    if rolled_out(&current) {
        Ok(Transition::next(JarState::Done {
            image: image.to_owned(),
        }))
    } else {
        Ok(Transition::wait(ctx.poll))
    }
}

/// `Done`: back to `Unknown` when the Deployment is gone or runs another
/// image than the one built.
pub(super) async fn check_drift(
    cx: &mut Step<'_, JarState>,
    image: &str,
) -> Result<Transition<JarState>> {
    let keycloak = cx.resource();
    let api: Api<Deployment> = Api::namespaced(cx.context().client.clone(), &namespace(keycloak)?);
    let drifted = match api.get_opt(&keycloak.name_any()).await? {
        None => true,
        Some(current) => running_image(&current) != Some(image),
    };
    if drifted {
        tracing::info!(keycloak = %keycloak.name_any(), %image, "deployment drifted from the augmented image");
        Ok(Transition::next(JarState::Unknown))
    } else {
        Ok(Transition::stay())
    }
}
