//! `webpage`: java-operator-sdk's WebPage sample, written with dependent
//! resources.
//!
//! A `WebPage` holds some HTML; the operator serves it with nginx: a
//! ConfigMap with the HTML, a Deployment mounting it, a Service in front,
//! and an Ingress only while `spec.exposed` ([`desired`]). Two operators
//! share that set:
//! - [`run_in`]: dependents only, no machine
//!   ([`DependentsReconciler`]); the page's `DependentsReady` condition
//!   says how far it got;
//! - [`run_machine_in`]: the machine [`PageState`] converges the set in a
//!   state, then runs a smoke test once per version of the HTML, a
//!   workflow step the set alone cannot express.

mod crd;
mod desired;
mod machine;

use std::sync::Arc;

use futures::StreamExt;
use kube::Client;
use kube::runtime::{Controller, watcher};
use operator_fsm::dependents::{DependentsReconciler, DependentsRuntime, owns_dependents};
use operator_fsm::{FsmReconciler, ReconcilerOptions, StatusStore};

use crate::support::scoped_api;

pub use crd::{WebPage, WebPageSpec, WebPageStatus};
pub use desired::{NGINX_IMAGE, desired, html_config_map_name, kinds};
pub use machine::{PageError, PageState, SMOKE_TEST_IMAGE, html_digest};

/// The field manager of the operators' applies.
pub const FIELD_MANAGER: &str = "webpage-operator";

/// Runs the dependents-only operator for the WebPages of `namespace`
/// (every namespace when `None`) until the future is dropped.
pub async fn run_in(client: Client, namespace: Option<String>, runtime: DependentsRuntime) {
    let reconciler =
        DependentsReconciler::<WebPage, ()>::with_runtime(runtime.clone(), |page, _| desired(page));
    controller(&client, &runtime, namespace.as_deref())
        .run(
            reconciler.reconcile(),
            reconciler.error_policy(),
            Arc::new(()),
        )
        .for_each(|_| async {})
        .await;
}

/// Runs the [`PageState`] machine for the WebPages of `namespace` (every
/// namespace when `None`), its record in the page's status, until the
/// future is dropped.
pub async fn run_machine_in(
    client: Client,
    namespace: Option<String>,
    runtime: DependentsRuntime,
    options: ReconcilerOptions,
) {
    let fsm = FsmReconciler::<PageState>::builder(client.clone(), StatusStore::new())
        .options(options)
        .dependents(runtime.clone())
        .build();
    controller(&client, &runtime, namespace.as_deref())
        .run(fsm.reconcile(), fsm.error_policy(), Arc::new(()))
        .for_each(|_| async {})
        .await;
}

/// The runtime both operators use by default: field manager
/// [`FIELD_MANAGER`].
pub fn runtime(client: Client) -> DependentsRuntime {
    DependentsRuntime::new(client).field_manager(FIELD_MANAGER)
}

/// A controller of WebPages woken by changes of their dependents (and of
/// the machine's smoke-test Jobs), whose watches are `runtime`'s caches.
fn controller(
    client: &Client,
    runtime: &DependentsRuntime,
    namespace: Option<&str>,
) -> Controller<WebPage> {
    // The cache keeps the WebPages without their managedFields (the
    // dependents' caches keep theirs: the diff reads them).
    let pages = operator_fsm::watch::lean_controller(
        scoped_api::<WebPage>(client.clone(), namespace),
        watcher::Config::default(),
    );
    let smoke_tests =
        operator_fsm::dependents::DependentKind::of::<k8s_openapi::api::batch::v1::Job>();
    owns_dependents(
        pages,
        runtime,
        namespace,
        kinds().into_iter().chain([smoke_tests]),
    )
}
