//! `database`: provisioning through an external, non-idempotent HTTP API.
//!
//! [`cloud`] is the API (started on loopback by the demo and the tests),
//! [`client`] its HTTP client. The workflow validates the spec, creates an
//! instance at most once (a checkpointed request id: the create-pending
//! pattern; the id also goes as the create's idempotency key, which closes
//! the gap the pattern leaves when two processes act at once), waits for it (two minutes at most), seeds it, and publishes
//! credentials in a Secret. A seed the API rejects fails the workflow, and
//! the compensations delete the instance. The record lives in a Secret
//! beside the Database ([`SecretStore`]), since a state holds the password.

pub mod client;
pub mod cloud;
mod crd;
mod handlers;
mod state;

use std::sync::Arc;
use std::time::Duration;

use crate::support::scoped_api;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::runtime::watcher;
use operator_fsm::core::{AuthorityLost, CheckpointError};
use operator_fsm::prelude::*;

pub use client::{CloudClient, CloudError};
pub use crd::{
    Database, DatabaseSpec, DatabaseStatus, ENGINES, SIZES, connection_secret,
    connection_secret_name,
};
pub use state::DbState;

/// What the handlers share.
#[derive(Clone)]
pub struct DbContext {
    /// The Kubernetes API client.
    pub client: Client,
    /// The cloud API.
    pub cloud: CloudClient,
    /// How often to look at an instance being created.
    pub poll: Duration,
}

impl DbContext {
    /// A context for the cloud API at `cloud_url`, polling every 300 ms.
    pub fn new(client: Client, cloud_url: impl Into<String>) -> Self {
        DbContext {
            client,
            cloud: CloudClient::new(cloud_url),
            poll: Duration::from_millis(300),
        }
    }
}

/// Why a handler failed.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// The Kubernetes API refused or failed; retried.
    #[error("Kubernetes API call failed")]
    Kube(#[from] kube::Error),
    /// The cloud API failed (retried) or refused (permanent).
    #[error(transparent)]
    Cloud(#[from] CloudError),
    /// The request id could not be recorded; retried.
    #[error("the request id could not be recorded")]
    Checkpoint(#[from] CheckpointError),
    /// The instance was deleted behind the operator's back; permanent.
    #[error("instance {0} no longer exists")]
    InstanceGone(String),
    /// The Database has no namespace; permanent.
    #[error("the Database has no namespace")]
    NotNamespaced,
    /// A Secret of the connection Secret's name exists and is not this
    /// Database's: it is left alone, and the Database waits (spending no
    /// attempt) until a person deletes or renames it.
    #[error(
        "Secret {0} exists and is not this Database's (no controller reference to it); it is \
         left alone: delete or rename it, and the credentials are published"
    )]
    SecretNotOurs(String),
    /// This replica no longer holds the Lease: it stops before calling the
    /// cloud (the engine records nothing of it; the leader carries on).
    #[error(transparent)]
    NotLeading(#[from] AuthorityLost),
}

impl Classify for DbError {
    fn class(&self) -> ErrorClass {
        match self {
            // A failing or busy API server spends no attempt.
            DbError::Kube(e) => operator_fsm::classify_kube_error(e),
            DbError::Checkpoint(_) | DbError::NotLeading(_) => ErrorClass::RETRYABLE,
            // Waits for a person, without failing (and compensating) a
            // healthy database over a name.
            DbError::SecretNotOurs(_) => ErrorClass::RetryWithoutAttempt {
                retry_after: Some(std::time::Duration::from_secs(2)),
            },
            DbError::Cloud(e) if e.is_retryable() => ErrorClass::RETRYABLE,
            DbError::Cloud(_) | DbError::InstanceGone(_) | DbError::NotNamespaced => {
                ErrorClass::Permanent
            }
        }
    }
}

/// Runs the operator: a `Controller` for Databases, records in Secrets,
/// until the future is dropped.
pub async fn run(client: Client, ctx: DbContext, options: ReconcilerOptions) {
    run_in(client, None, ctx, options).await;
}

/// Runs the operator as [`run`] does, for the Databases of `namespace` only
/// (every namespace when `None`).
pub async fn run_in(
    client: Client,
    namespace: Option<String>,
    ctx: DbContext,
    options: ReconcilerOptions,
) {
    // Records of one namespace are watched in that namespace only, so a
    // Role there is enough.
    let store = match &namespace {
        Some(ns) => SecretStore::namespaced(client.clone(), ns.clone()),
        None => SecretStore::new(client.clone()),
    };
    let fsm = FsmReconciler::<DbState>::builder(client.clone(), store)
        .options(options)
        .build();
    run_with(fsm, client, namespace, ctx).await;
}

/// Runs the operator with `fsm`, a reconciler built elsewhere (by the
/// command line's `RunContext::reconciler`, in the `database-operator`
/// binary), for the Databases of `namespace` (every namespace when `None`).
pub async fn run_with(
    fsm: FsmReconciler<DbState>,
    client: Client,
    namespace: Option<String>,
    ctx: DbContext,
) {
    // The cache keeps the Databases without their managedFields, and a
    // Database that does not decode is reported as the reconciler writes.
    fsm.decode_reporter()
        .lean_controller(
            scoped_api::<Database>(client.clone(), namespace.as_deref()),
            watcher::Config::default(),
        )
        .owns(
            scoped_api::<Secret>(client, namespace.as_deref()),
            watcher::Config::default(),
        )
        .run(fsm.reconcile(), fsm.error_policy(), Arc::new(ctx))
        .for_each(|_| async {})
        .await;
}
