//! The handlers of [`JarState`]: each looks at the cluster, acts
//! idempotently, and says where the machine goes next. The build Job and
//! the Deployment are dependents: `cx.converge` creates or updates them
//! and says whether they are ready.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams};

use operator_fsm::dependents::{
    Dependent, DependentState, DesiredSet, StepDependents, converge_state,
};
use operator_fsm::prelude::*;

use super::crd::{BuildPlan, deployment, running_image};
use super::{JarError, JarState, Keycloak};

type Result<T> = std::result::Result<T, JarError>;

fn namespace(keycloak: &Keycloak) -> Result<String> {
    keycloak.namespace().ok_or(JarError::NotNamespaced)
}

/// The build of `plan` as a desired set.
fn build(keycloak: &Keycloak, plan: &BuildPlan) -> Result<DesiredSet> {
    let job = plan.job_object(keycloak);
    Ok(DesiredSet::builder()
        .dependent(Dependent::new("build", &job))
        .build()?)
}

/// `Unknown`: start (or find) the build Job of the current spec.
pub(super) async fn start_augmentation(
    cx: &mut Step<'_, JarState>,
) -> Result<Transition<JarState>> {
    let plan = BuildPlan::for_keycloak(cx.resource(), &cx.context().registry);
    cx.converge(&build(cx.resource(), &plan)?).await?;
    Ok(Transition::next(JarState::AugmentationStarted {
        job: plan.job,
        image: plan.image,
    }))
}

/// `AugmentationStarted`: wait for the build Job (created again if someone
/// deleted it).
pub(super) async fn watch_build(
    cx: &mut Step<'_, JarState>,
    job: &str,
    image: &str,
) -> Result<Transition<JarState>> {
    let plan = BuildPlan {
        job: job.to_owned(),
        image: image.to_owned(),
    };
    let convergence = cx.converge(&build(cx.resource(), &plan)?).await?;
    Ok(match convergence.state("build") {
        Some(DependentState::Ready) => Transition::next(JarState::AugmentationFinished {
            image: image.to_owned(),
        }),
        Some(DependentState::Failed(why)) => {
            Transition::fail(format!("build job {job} failed: {why}"))
        }
        _ => Transition::wait(cx.context().poll),
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
    let server = deployment(cx.resource(), image);
    let set = DesiredSet::builder()
        .dependent(Dependent::new("server", &server))
        .build()?;
    let done = JarState::Done {
        image: image.to_owned(),
    };
    Ok(converge_state(cx, &set, done).await?)
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

    use std::sync::Arc;

    use kube::Client;
    use kube::api::{ListParams, Patch, PatchParams, PostParams};
    use operator_fsm::core::Harness;
    use operator_fsm::dependents::DependentsRuntime;
    use serde_json::json;

    use super::*;
    use crate::mutable_jar::{JarContext, KeycloakSpec};
    use crate::testing::{NS, create, finish_job, server};

    async fn keycloak(client: &Client) -> Keycloak {
        let spec = KeycloakSpec {
            image: "quay.io/keycloak/keycloak:26.0".into(),
            extensions: vec!["metrics.jar".into()],
            replicas: 2,
        };
        create(client, Keycloak::new("sso", spec)).await
    }

    /// A harness for `kc` with the runtime a reconciler would lend: both
    /// the handlers' polls and the runtime's wait are 30 s.
    fn harness(client: &Client, kc: Keycloak) -> Harness<JarState> {
        let ctx = JarContext {
            poll: Duration::from_secs(30),
            ..JarContext::new(client.clone())
        };
        let runtime =
            DependentsRuntime::new(client.clone()).pending_requeue(Duration::from_secs(30));
        Harness::<JarState>::new(kc, ctx).with_extension(Arc::new(runtime))
    }

    #[tokio::test]
    async fn unknown_starts_one_build_job_however_often_it_runs() {
        let (_server, client) = server().await;
        let kc = keycloak(&client).await;
        let plan = BuildPlan::for_keycloak(&kc, "registry.local/keycloak");
        let harness = harness(&client, kc.clone());
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
    async fn the_build_is_waited_for_and_created_again_when_deleted() {
        let (_server, client) = server().await;
        let kc = keycloak(&client).await;
        let plan = BuildPlan::for_keycloak(&kc, "registry.local/keycloak");
        let started = JarState::AugmentationStarted {
            job: plan.job.clone(),
            image: plan.image.clone(),
        };
        let harness = harness(&client, kc.clone()).in_state(started.clone());
        let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
        for _ in 0..2 {
            assert_eq!(
                harness.run_handler().await.unwrap(),
                Transition::wait(Duration::from_secs(30))
            );
            assert!(jobs.get_opt(&plan.job).await.unwrap().is_some());
            jobs.delete(&plan.job, &DeleteParams::default())
                .await
                .unwrap();
        }
        assert_eq!(
            harness.run_handler().await.unwrap(),
            Transition::wait(Duration::from_secs(30))
        );
        finish_job(&client, &plan.job, true).await;
        assert_eq!(
            harness.run_handler().await.unwrap(),
            Transition::next(JarState::AugmentationFinished { image: plan.image })
        );
    }

    #[tokio::test]
    async fn a_failed_build_fails_the_workflow() {
        let (_server, client) = server().await;
        let kc = keycloak(&client).await;
        let plan = BuildPlan::for_keycloak(&kc, "registry.local/keycloak");
        let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
        jobs.create(&PostParams::default(), &plan.job_object(&kc))
            .await
            .unwrap();
        finish_job(&client, &plan.job, false).await;
        let started = JarState::AugmentationStarted {
            job: plan.job.clone(),
            image: plan.image.clone(),
        };
        let harness = harness(&client, kc).in_state(started);
        let Transition::Fail(reason) = harness.run_handler().await.unwrap() else {
            panic!("the build failed");
        };
        assert!(
            reason.starts_with(&format!("build job {} failed: the Job failed", plan.job)),
            "{reason}"
        );
    }

    #[tokio::test]
    async fn a_stuck_build_times_out_is_cancelled_and_rests_in_error() {
        let (_server, client) = server().await;
        let kc = keycloak(&client).await;
        let settled = harness(&client, kc).run_until_settled().await.unwrap();
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
        let harness = harness(&client, kc.clone()).in_state(JarState::AugmentationFinished {
            image: image.into(),
        });
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
        let harness = harness(&client, kc.clone()).in_state(JarState::Done {
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
