//! The benchmark workflow written with operator-fsm and `StatusStore`.
//!
//! ```text
//! KUBECONFIG=… bench-fsm-operator [--chain K]
//! ```
//!
//! `--chain K` sets `ReconcilerOptions::max_transitions` (default 1). The
//! machine batches commits, so with K > 1 a chain is one status write.
//!
//! The controller's cache keeps the apps without their `managedFields`
//! (`fsm_kube::watch::lean_controller`); with `BENCH_KEEP_MANAGED_FIELDS=1`
//! it keeps them, as `Controller::new` does (to measure what that costs).
//!
//! `BENCH_OWN_WRITE_WAIT_MS=N` sets `ReconcilerOptions::own_write_wait`
//! (0: the next step runs at once after a commit instead of on the watch
//! event of the commit, as before that option existed).

use std::sync::Arc;
use std::time::Duration;

use bench::workload::{self, BenchApp};
use fsm_kube::prelude::*;
use fsm_kube::{FsmReconciler, StatusStore};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use kube::runtime::{Controller, watcher};

/// The handlers' context.
struct Ctx {
    client: kube::Client,
}

#[derive(Debug, thiserror::Error)]
enum BenchError {
    #[error(transparent)]
    Kube(#[from] kube::Error),
}
impl Classify for BenchError {}

#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = BenchApp, context = Ctx, error = BenchError, batch_commits)]
enum AppState {
    #[fsm(initial, handler = create_config, next(CreatingDeployment))]
    CreatingConfig,
    #[fsm(handler = create_deployment, next(WaitingReady))]
    CreatingDeployment,
    #[fsm(handler = wait_ready, next(Annotating))]
    WaitingReady,
    #[fsm(handler = annotate, next(Ready))]
    Annotating,
    #[fsm(ready, handler = rest, next(CreatingConfig))]
    Ready,
    #[fsm(failed)]
    Failed,
}

type Out = Result<Transition<AppState>, BenchError>;

async fn create_config(cx: &mut Step<'_, AppState>) -> Out {
    workload::create_config_map(&cx.context().client, cx.resource()).await?;
    Ok(Transition::next(AppState::CreatingDeployment))
}

async fn create_deployment(cx: &mut Step<'_, AppState>) -> Out {
    workload::create_deployment(&cx.context().client, cx.resource()).await?;
    Ok(Transition::next(AppState::WaitingReady))
}

async fn wait_ready(cx: &mut Step<'_, AppState>) -> Out {
    if workload::deployment_ready(&cx.context().client, cx.resource()).await? {
        Ok(Transition::next(AppState::Annotating))
    } else {
        // The Deployment's own change wakes the object up sooner.
        Ok(Transition::wait(Duration::from_millis(500)))
    }
}

async fn annotate(cx: &mut Step<'_, AppState>) -> Out {
    workload::annotate(&cx.context().client, cx.resource()).await?;
    Ok(Transition::next(AppState::Ready))
}

async fn rest(_: &mut Step<'_, AppState>) -> Out {
    Ok(Transition::stay())
}

/// `BENCH_OWN_WRITE_WAIT_MS`, else the library's default.
fn own_write_wait() -> Duration {
    std::env::var("BENCH_OWN_WRITE_WAIT_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
        .map_or(fsm_kube::DEFAULT_OWN_WRITE_WAIT, Duration::from_millis)
}

fn chain() -> u32 {
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--chain" {
            return args.next().and_then(|v| v.parse().ok()).unwrap_or(1);
        }
    }
    1
}

#[tokio::main]
async fn main() -> Result<(), kube::Error> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let client = workload::client().await?;
    let fsm = FsmReconciler::<AppState>::builder(client.clone(), StatusStore::default())
        .options(
            ReconcilerOptions::default()
                // The other two publish no events either.
                .events(false)
                .poll_interval(Duration::from_secs(3600))
                .error_requeue(Duration::from_millis(500))
                .max_transitions(chain())
                .own_write_wait(own_write_wait()),
        )
        .build();
    let apps: Api<BenchApp> = Api::namespaced(client.clone(), workload::NAMESPACE);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), workload::NAMESPACE);
    let controller = if std::env::var_os("BENCH_KEEP_MANAGED_FIELDS").is_some() {
        Controller::new(apps, watcher::Config::default())
    } else {
        fsm_kube::watch::lean_controller(apps, watcher::Config::default())
    };
    controller
        .owns(deployments, watcher::Config::default())
        .run(
            fsm.reconcile(),
            fsm.error_policy(),
            Arc::new(Ctx { client }),
        )
        .for_each(|_| async {})
        .await;
    Ok(())
}
