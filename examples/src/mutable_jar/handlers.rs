//! The handlers of [`JarState`]: each looks at the cluster, acts
//! idempotently, and says where the machine goes next.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};

use operator_fsm::prelude::*;

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
    // An API that cannot answer is no drift, and no reason to fail a
    // healthy Keycloak: look again later.
    let found = match api.get_opt(&keycloak.name_any()).await {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!(keycloak = %keycloak.name_any(), error = %e, "cannot check for drift; looking again later");
            return Ok(Transition::stay());
        }
    };
    let drifted = match found {
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use kube::Client;
    use kube::api::ListParams;
    use operator_fsm::core::Harness;
    use serde_json::json;

    use super::*;
    use crate::mutable_jar::{JarContext, KeycloakSpec};
    use crate::testing::{NS, create, server, set_job_status};

    async fn keycloak(client: &Client) -> Keycloak {
        let spec = KeycloakSpec {
            image: "quay.io/keycloak/keycloak:26.0".into(),
            extensions: vec!["metrics.jar".into()],
            replicas: 2,
        };
        create(client, Keycloak::new("sso", spec)).await
    }

    fn ctx(client: &Client) -> JarContext {
        JarContext {
            poll: Duration::from_secs(30),
            ..JarContext::new(client.clone())
        }
    }

    #[tokio::test]
    async fn unknown_starts_one_build_job_however_often_it_runs() {
        let (_server, client) = server().await;
        let kc = keycloak(&client).await;
        let plan = BuildPlan::for_keycloak(&kc, "registry.local/keycloak");
        let harness = Harness::<JarState>::new(kc.clone(), ctx(&client));
        let expected = Transition::next(JarState::AugmentationStarted {
            job: plan.job.clone(),
            image: plan.image.clone(),
        });
        assert_eq!(harness.run_handler().await.unwrap(), expected);
        assert_eq!(harness.run_handler().await.unwrap(), expected);

        let jobs: Api<Job> = Api::namespaced(client, NS);
        let all = jobs.list(&ListParams::default()).await.unwrap().items;
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].name_any(), plan.job);
        let owner = &all[0].owner_references()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("Keycloak", kc.uid().unwrap().as_str())
        );
    }

    #[tokio::test]
    async fn the_build_is_waited_for_then_left_or_failed() {
        let (_server, client) = server().await;
        let kc = keycloak(&client).await;
        let plan = BuildPlan::for_keycloak(&kc, "registry.local/keycloak");
        let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
        jobs.create(&PostParams::default(), &plan.job_object(&kc))
            .await
            .unwrap();
        let started = JarState::AugmentationStarted {
            job: plan.job.clone(),
            image: plan.image.clone(),
        };
        let harness = Harness::<JarState>::new(kc.clone(), ctx(&client)).in_state(started.clone());
        assert_eq!(
            harness.run_handler().await.unwrap(),
            Transition::wait(Duration::from_secs(30))
        );

        set_job_status(&client, &plan.job, json!({"failed": 1})).await;
        assert_eq!(
            harness.run_handler().await.unwrap(),
            Transition::fail(format!("build job {} failed", plan.job))
        );

        set_job_status(&client, &plan.job, json!({"failed": 0, "succeeded": 1})).await;
        assert_eq!(
            harness.run_handler().await.unwrap(),
            Transition::next(JarState::AugmentationFinished { image: plan.image })
        );

        jobs.delete(&plan.job, &DeleteParams::default())
            .await
            .unwrap();
        assert_eq!(
            harness.run_handler().await.unwrap(),
            Transition::next(JarState::Unknown)
        );
    }

    #[tokio::test]
    async fn a_stuck_build_times_out_is_cancelled_and_rests_in_error() {
        let (_server, client) = server().await;
        let kc = keycloak(&client).await;
        let settled = Harness::<JarState>::new(kc, ctx(&client))
            .run_until_settled()
            .await
            .unwrap();
        assert_eq!(settled.state, JarState::Error);
        assert_eq!(settled.path(), ["Unknown", "AugmentationStarted", "Error"]);
        // Five minutes of the manual clock, in 30 s polls.
        assert!(
            settled.elapsed >= Duration::from_secs(300),
            "{:?}",
            settled.elapsed
        );
        let last = settled.history.last().unwrap();
        assert!(
            last.reason
                .as_deref()
                .unwrap_or_default()
                .contains("timed out"),
            "{last:?}"
        );
        // The compensation deleted the build.
        let jobs: Api<Job> = Api::namespaced(client, NS);
        assert!(
            jobs.list(&ListParams::default())
                .await
                .unwrap()
                .items
                .is_empty()
        );
    }

    #[tokio::test]
    async fn the_rollout_creates_the_deployment_then_waits_for_it() {
        let (_server, client) = server().await;
        let kc = keycloak(&client).await;
        let image = "registry.local/keycloak/sso-augmented:abc";
        let harness = Harness::<JarState>::new(kc.clone(), ctx(&client)).in_state(
            JarState::AugmentationFinished {
                image: image.into(),
            },
        );
        assert_eq!(
            harness.run_handler().await.unwrap(),
            Transition::wait(Duration::from_secs(30))
        );

        let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
        let created = deployments.get("sso").await.unwrap();
        assert_eq!(running_image(&created), Some(image));
        assert_eq!(created.spec.as_ref().unwrap().replicas, Some(2));

        let generation = created.metadata.generation.unwrap_or(1);
        let ready = json!({"status": {"observedGeneration": generation, "replicas": 2,
            "updatedReplicas": 2, "readyReplicas": 2, "availableReplicas": 2}});
        deployments
            .patch_status("sso", &PatchParams::default(), &Patch::Merge(&ready))
            .await
            .unwrap();
        assert_eq!(
            harness.run_handler().await.unwrap(),
            Transition::next(JarState::Done {
                image: image.into()
            })
        );
    }

    #[tokio::test]
    async fn a_deployment_running_another_image_is_drift() {
        let (_server, client) = server().await;
        let kc = keycloak(&client).await;
        let image = "registry.local/keycloak/sso-augmented:abc";
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
        deployments
            .create(&PostParams::default(), &deployment(&kc, image))
            .await
            .unwrap();
        let harness = Harness::<JarState>::new(kc.clone(), ctx(&client)).in_state(JarState::Done {
            image: image.into(),
        });
        assert_eq!(harness.run_handler().await.unwrap(), Transition::stay());

        let edit = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "keycloak", "image": "quay.io/keycloak/keycloak:26.0"}]}}}});
        deployments
            .patch("sso", &PatchParams::default(), &Patch::Merge(&edit))
            .await
            .unwrap();
        assert_eq!(
            harness.run_handler().await.unwrap(),
            Transition::next(JarState::Unknown)
        );

        deployments
            .delete("sso", &DeleteParams::default())
            .await
            .unwrap();
        assert_eq!(
            harness.run_handler().await.unwrap(),
            Transition::next(JarState::Unknown)
        );
    }
}
