//! The benchmark workflow written by hand with a kube-rs `Controller`, the
//! way most Rust operators are written: a `phase` in the status, one step
//! per reconcile, one status patch per phase change.
//!
//! As most operators are, its controller's cache keeps the apps whole,
//! `managedFields` included; with `BENCH_STRIP_MANAGED_FIELDS=1` it drops
//! them as the fsm operator does (the same few lines of kube-rs, here
//! borrowed from `fsm_kube::watch`), to compare like with like.

use std::sync::Arc;
use std::time::Duration;

use bench::workload::{self, BenchApp};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::{Controller, watcher};

/// The reconciler's context.
struct Ctx {
    client: kube::Client,
}

async fn reconcile(app: Arc<BenchApp>, ctx: Arc<Ctx>) -> Result<Action, kube::Error> {
    let client = &ctx.client;
    let phase = app
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("CreatingConfig");
    let next = match phase {
        "CreatingConfig" => {
            workload::create_config_map(client, &app).await?;
            "CreatingDeployment"
        }
        "CreatingDeployment" => {
            workload::create_deployment(client, &app).await?;
            "WaitingReady"
        }
        "WaitingReady" => {
            if !workload::deployment_ready(client, &app).await? {
                return Ok(Action::requeue(Duration::from_millis(500)));
            }
            "Annotating"
        }
        "Annotating" => {
            workload::annotate(client, &app).await?;
            "Ready"
        }
        _ => return Ok(Action::requeue(Duration::from_secs(3600))),
    };
    let api: Api<BenchApp> = Api::namespaced(client.clone(), workload::NAMESPACE);
    let patch = serde_json::json!({"status": {"phase": next}});
    api.patch_status(
        &app.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    // The status change comes back through the watch and runs the next step.
    Ok(Action::await_change())
}

fn error_policy(app: Arc<BenchApp>, error: &kube::Error, _: Arc<Ctx>) -> Action {
    tracing::warn!(app = %app.name_any(), %error, "reconcile failed");
    Action::requeue(Duration::from_millis(500))
}

#[tokio::main]
async fn main() -> Result<(), kube::Error> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let client = workload::client().await?;
    let apps: Api<BenchApp> = Api::namespaced(client.clone(), workload::NAMESPACE);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), workload::NAMESPACE);
    let controller = if std::env::var_os("BENCH_STRIP_MANAGED_FIELDS").is_some() {
        fsm_kube::watch::lean_controller(apps, watcher::Config::default())
    } else {
        Controller::new(apps, watcher::Config::default())
    };
    controller
        .owns(deployments, watcher::Config::default())
        .run(reconcile, error_policy, Arc::new(Ctx { client }))
        .for_each(|_| async {})
        .await;
    Ok(())
}
