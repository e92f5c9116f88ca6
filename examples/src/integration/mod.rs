//! `integration`: the phases of an Apache Camel K Integration.
//!
//! `Initialization` computes the digest of what goes into the integration
//! kit (the routes and their dependencies); `BuildingKit` runs a build Job
//! for it, tried up to three times, or reuses a kit already built with that
//! digest; `Deploying` rolls a Deployment out with the kit's image;
//! `Running` watches it. A spec change restarts the workflow: a new digest
//! means a new kit, an unchanged one (only `replicas` changed) a redeploy
//! without a build.
//!
//! The record lives in the Integration's status ([`StatusStore`]).

mod crd;
mod handlers;
mod state;

use std::time::Duration;

use crate::support::run_owning_workloads;
use kube::Client;
use operator_fsm::prelude::*;

pub use crd::{
    BUILDER_IMAGE, Integration, IntegrationSpec, IntegrationStatus, KIT_DIGEST_LABEL,
    integration_deployment, kit_image, kit_job, kit_job_name,
};
pub use state::IntegrationPhase;

/// What the handlers share.
#[derive(Clone)]
pub struct IntegrationContext {
    /// The API client.
    pub client: Client,
    /// How often to look at a running build or rollout.
    pub poll: Duration,
}

impl IntegrationContext {
    /// A context polling every 500 ms.
    pub fn new(client: Client) -> Self {
        IntegrationContext {
            client,
            poll: Duration::from_millis(500),
        }
    }
}

/// Why a handler failed.
#[derive(Debug, thiserror::Error)]
pub enum IntegrationError {
    /// The API refused or failed; retried.
    #[error("Kubernetes API call failed")]
    Kube(#[from] kube::Error),
    /// Converging the Deployment could not run, or it failed; retried.
    #[error(transparent)]
    Dependents(#[from] operator_fsm::dependents::DependentsError),
    /// The desired set is malformed; permanent.
    #[error(transparent)]
    Set(#[from] operator_fsm::dependents::SetError),
    /// A kit build Job failed; retried with a new Job.
    #[error("kit build {job} failed")]
    BuildFailed {
        /// The failed Job.
        job: String,
    },
    /// The spec snapshot in the record does not decode; permanent.
    #[error("the recorded spec snapshot does not decode")]
    Snapshot(#[from] serde_json::Error),
    /// The Integration has no namespace; permanent.
    #[error("the Integration has no namespace")]
    NotNamespaced,
}

impl Classify for IntegrationError {
    fn class(&self) -> ErrorClass {
        match self {
            // A failing or busy API server spends no attempt.
            IntegrationError::Kube(e) => operator_fsm::classify_kube_error(e),
            IntegrationError::Dependents(e) => e.class(),
            IntegrationError::Set(_) => ErrorClass::Permanent,
            IntegrationError::BuildFailed { .. } => ErrorClass::RETRYABLE,
            IntegrationError::Snapshot(_) | IntegrationError::NotNamespaced => {
                ErrorClass::Permanent
            }
        }
    }
}

/// Runs the operator: a `Controller` for Integrations that also watches the
/// Jobs and Deployments they own, until the future is dropped.
pub async fn run(client: Client, ctx: IntegrationContext, options: ReconcilerOptions) {
    run_in(client, None, ctx, options).await;
}

/// Runs the operator as [`run`] does, for the Integrations of `namespace` only
/// (every namespace when `None`).
pub async fn run_in(
    client: Client,
    namespace: Option<String>,
    ctx: IntegrationContext,
    options: ReconcilerOptions,
) {
    run_owning_workloads::<IntegrationPhase>(client, namespace.as_deref(), ctx, options).await;
}
