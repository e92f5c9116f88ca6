//! kube-rs integration of operator-fsm: drive a state machine from an
//! ordinary `kube::runtime::Controller`, keeping its record in the custom
//! resource's status, a ConfigMap, a Secret or memory, with a finalizer,
//! conditions, events and metrics.
//!
//! ```no_run
//! use std::sync::Arc;
//! use futures::StreamExt;
//! use fsm_kube::{FsmReconciler, StatusStore};
//! use kube::runtime::{Controller, watcher};
//!
//! # async fn run<F>(client: kube::Client, ctx: F::Context)
//! # where F: fsm_core::Fsm, F::Resource: fsm_kube::KubeResource {
//! let fsm = FsmReconciler::<F>::new(client.clone(), StatusStore::new());
//! Controller::new(kube::Api::<F::Resource>::all(client), watcher::Config::default())
//!     .run(fsm.reconcile(), fsm.error_policy(), Arc::new(ctx))
//!     .for_each(|_| async {})
//!     .await;
//! # }
//! ```
//!
//! # What is where
//!
//! | path | what | feature |
//! | --- | --- | --- |
//! | [`FsmReconciler`], [`ReconcilerBuilder`], [`ReconcilerOptions`], [`Error`] | the reconciler a `Controller` runs, and how it behaves | |
//! | [`StatusStore`], [`ConfigMapStore`], [`SecretStore`], [`ObjectStore`], [`DerivingStore`], [`KubeStore`], [`store`] | where records live | |
//! | [`FsmStatus`], [`conditions`], [`events`], [`FsmMetrics`] | what the runtime reports on the object and to Prometheus | |
//! | [`HandlerError`], [`classify_kube_error`] | Kubernetes errors in handlers, classed for retries | |
//! | [`dependents`] | the objects an owner should have, converged and torn down | |
//! | [`Admission`], [`judge_admission`] | the validating webhook derived from the machine: fields immutable or grow-only in a state, deletion refused, `.status.fsm` the operator's | |
//! | [`leader`], [`shard`] | one replica at a time, or replicas sharing the objects | |
//! | [`watch`] | the controller's watch: lean caches, objects that do not decode | |
//! | [`records`] | the read side, without the machine's type: where a record is and how to read it, rows of objects and their changes, the annotation commands arrive in; what `kubectl fsm` and the web view read through | |
//! | [`Versions`], [`VersionOptions`], [`WebhookTarget`] | several versions of the resource: the multi-version CRD, conversion hub and spoke, a `ConversionReview` answered | |
//! | `http` | `/metrics`, `/healthz`, `/readyz` and readiness holds; `http::webhook`, the conversion webhook over TLS | `http`; `webhook` |
//! | `view` | the web view | `view` (with `http`) |
//! | `cli` | the operator binary's command line | `cli` (with `view`), default |
//! | [`prelude`] | everything an operator's author needs | |
//!
//! # Features
//!
//! The rule: the runtime (everything above without a feature) compiles no
//! HTTP server and no command-line parser. `http` adds the endpoints'
//! server (axum), `view` the web view, `webhook` the conversion webhook
//! over TLS (rustls, rcgen), `cli` the operator binary's command line
//! (clap and YAML output); `cli` is the default and brings the other
//! three. An operator that embeds the reconciler in a program of its own
//! depends on `operator-fsm` (or `fsm-kube`) with `default-features =
//! false`.
//!
//! The guide lives in the repository's `docs/`, not in these pages:
//! `docs/concepts.md` names the pieces and how they fit, then the
//! tutorial, the attribute reference, semantics, stores, testing,
//! observability, deploying and troubleshooting (`docs/README.md` lists
//! them all). Its code blocks are compiled as this crate's doc tests.
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

mod admission;
mod cache;
mod classify;
#[cfg(feature = "cli")]
pub mod cli;
pub mod conditions;
mod decoded;
pub mod dependents;
pub mod events;
mod fields;
mod finalizer;
mod fsm_status;
#[cfg(doctest)]
mod guide;
#[cfg(feature = "http")]
pub mod http;
pub mod leader;
mod merge_patch;
mod metrics;
mod newer_record;
mod options;
mod reconciler;
pub mod records;
pub mod shard;
pub mod store;
mod versions;
#[cfg(feature = "view")]
pub mod view;
pub mod watch;

#[cfg(feature = "http")]
pub use admission::admission_router;
pub use admission::{
    Admission, AdmissionChange, AdmissionClient, AdmissionOperation, AdmissionRefusal,
    VALIDATE_PATH, admission_policy, judge_admission, validating_webhook_configuration,
};
pub use classify::{HandlerError, classify_kube_error};
pub use fsm_core;
pub use fsm_status::FsmStatus;
pub use metrics::FsmMetrics;
pub use options::{DEFAULT_OWN_WRITE_WAIT, ReconcilerOptions};
pub use reconciler::{Error, FsmReconciler, ReconcileFuture, ReconcilerBuilder};
pub use store::{
    ConfigMapStore, DerivingStore, KubeStore, ObjectStore, SecretStore, StatusStore, Target,
};
pub use versions::{
    ConversionError, ReviewOutcome, VersionOptions, Versions, VersionsError, WebhookTarget,
};

/// What a resource needs to be driven by a machine: a `kube::Resource` with
/// static type information that serde can read and write.
pub trait KubeResource:
    kube::Resource<DynamicType = ()>
    + Clone
    + std::fmt::Debug
    + serde::Serialize
    + serde::de::DeserializeOwned
    + Send
    + Sync
    + 'static
{
}

impl<T> KubeResource for T where
    T: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::Serialize
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static
{
}

/// Everything an operator's author needs: `use fsm_kube::prelude::*;`.
pub mod prelude {
    pub use fsm_core::prelude::*;
    pub use schemars::JsonSchema;

    pub use crate::dependents::StepDependents;
    pub use crate::store::{RecordObject, record_object_name_for};
    pub use crate::{
        ConfigMapStore, FsmMetrics, FsmReconciler, FsmStatus, HandlerError, ObjectStore,
        ReconcilerOptions, SecretStore, StatusStore, classify_kube_error,
    };
}
