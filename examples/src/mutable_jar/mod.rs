//! `mutable_jar`: a Keycloak operator that augments the server image with
//! provider jars before rolling it out, in the shape of the Java proof of
//! concept this project answers.
//!
//! A build Job named after the spec's digest produces the augmented image
//! (`Unknown` → `AugmentationStarted`); once it succeeds the Deployment is
//! rolled out with it (`AugmentationFinished` → `Done`). A build has five
//! minutes; a stuck one is cancelled and the workflow rests in `Error`.
//! From `Done`, a Deployment edited to run another image is drift: the
//! machine goes back to `Unknown`, finds the image already built, and rolls
//! it out again.
//!
//! The record lives in the Keycloak's status ([`StatusStore`]).

mod crd;
mod handlers;
mod state;

use std::time::Duration;

use crate::support::run_owning_workloads;
use kube::Client;
use operator_fsm::prelude::*;

pub use crd::{BuildPlan, Keycloak, KeycloakSpec, KeycloakStatus, deployment, running_image};
pub use state::JarState;

/// What the handlers share.
#[derive(Clone)]
pub struct JarContext {
    /// The API client.
    pub client: Client,
    /// The registry the augmented images are pushed to.
    pub registry: String,
    /// How often to look at a running build or rollout.
    pub poll: Duration,
}

/// The registry [`JarContext::new`] pushes the augmented images to.
pub const REGISTRY: &str = "registry.local/keycloak";

impl JarContext {
    /// A context pushing to [`REGISTRY`], polling every 500 ms.
    pub fn new(client: Client) -> Self {
        JarContext {
            client,
            registry: REGISTRY.to_owned(),
            poll: Duration::from_millis(500),
        }
    }
}

/// Why a handler failed.
#[derive(Debug, thiserror::Error)]
pub enum JarError {
    /// The API refused or failed; retried.
    #[error("Kubernetes API call failed")]
    Kube(#[from] kube::Error),
    /// Converging the build or the Deployment could not run, or the
    /// Deployment failed; retried.
    #[error(transparent)]
    Dependents(#[from] operator_fsm::dependents::DependentsError),
    /// A desired set is malformed; permanent.
    #[error(transparent)]
    Set(#[from] operator_fsm::dependents::SetError),
    /// The Keycloak has no namespace (the CRD is namespaced, so only a
    /// hand-made object in a test can); permanent.
    #[error("the Keycloak has no namespace")]
    NotNamespaced,
}

impl Classify for JarError {
    fn class(&self) -> ErrorClass {
        match self {
            // A failing or busy API server spends no attempt.
            JarError::Kube(e) => operator_fsm::classify_kube_error(e),
            JarError::Dependents(e) => e.class(),
            JarError::NotNamespaced | JarError::Set(_) => ErrorClass::Permanent,
        }
    }
}

/// Runs the operator: a `Controller` for Keycloaks that also watches the
/// Jobs and Deployments they own, until the future is dropped.
pub async fn run(client: Client, ctx: JarContext, options: ReconcilerOptions) {
    run_in(client, None, ctx, options).await;
}

/// Runs the operator as [`run`] does, for the Keycloaks of `namespace` only
/// (every namespace when `None`).
pub async fn run_in(
    client: Client,
    namespace: Option<String>,
    ctx: JarContext,
    options: ReconcilerOptions,
) {
    run_owning_workloads::<JarState>(client, namespace.as_deref(), ctx, options).await;
}
