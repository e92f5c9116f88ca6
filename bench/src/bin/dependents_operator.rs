//! The dependents workload: each `BenchApp` owns four dependents (a
//! ConfigMap, a Secret, a Deployment mounting both, a Service), converged
//! by a `DependentsReconciler`; the app is ready when its
//! `DependentsReady` condition is `True`.
//!
//! ```text
//! KUBECONFIG=… bench-dependents-operator
//! ```
//!
//! `SIGUSR1` re-syncs every app (kube's `Controller::reconcile_all_on`):
//! the driver measures what a re-sync of a converged set costs.

use std::sync::Arc;

use bench::workload::{self, BenchApp};
use fsm_kube::dependents::{DependentsReconciler, DependentsRuntime, owns_dependents};
use futures::StreamExt;
use kube::api::Api;
use kube::runtime::{Controller, watcher};
use tokio::signal::unix::{SignalKind, signal};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let client = workload::client().await?;
    let runtime = DependentsRuntime::new(client.clone()).field_manager("bench-dependents");
    let reconciler =
        DependentsReconciler::<BenchApp, ()>::with_runtime(runtime.clone(), |app, _| {
            workload::dependents(app)
        });
    let signals = signal(SignalKind::user_defined1())?;
    let resync = futures::stream::unfold(signals, |mut signals| async move {
        signals.recv().await.map(|()| ((), signals))
    });
    let apps: Api<BenchApp> = Api::namespaced(client.clone(), workload::NAMESPACE);
    let controller = Controller::new(apps, watcher::Config::default()).reconcile_all_on(resync);
    // The runtime: the dependents' watches are also its caches.
    owns_dependents(
        controller,
        &runtime,
        Some(workload::NAMESPACE),
        workload::dependent_kinds(),
    )
    .run(
        reconciler.reconcile(),
        reconciler.error_policy(),
        Arc::new(()),
    )
    .for_each(|_| async {})
    .await;
    Ok(())
}
