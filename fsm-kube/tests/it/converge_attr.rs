//! `#[fsm(converge = desired_fn, next(S))]` with a `DesiredSet`, against
//! the embedded API server (or the real kube-apiserver named by
//! `FSM_REAL_APISERVER_KUBECONFIG`): the derived machine's converge state
//! applies the set, waits while a dependent is not ready, and moves to its
//! next state once every dependent is.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use fsm_kube::dependents::{Dependent, DependentsError, DependentsRuntime, DesiredSet, SetError};
use fsm_kube::prelude::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use serde_json::json;

#[derive(Debug, thiserror::Error)]
enum RolloutError {
    #[error(transparent)]
    Dependents(#[from] DependentsError),
    #[error(transparent)]
    Set(#[from] SetError),
}

impl Classify for RolloutError {
    fn class(&self) -> ErrorClass {
        match self {
            RolloutError::Dependents(e) => e.class(),
            RolloutError::Set(_) => ErrorClass::Permanent,
        }
    }
}

#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = Widget, error = RolloutError)]
enum Rollout {
    #[fsm(initial, converge = desired, next(Running), timeout = "10m")]
    Deploying,
    #[fsm(ready, final)]
    Running,
    #[fsm(failed)]
    Failed,
}

fn cm(name: String, data: serde_json::Value) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name),
            ..ObjectMeta::default()
        },
        data: serde_json::from_value(data).ok(),
        ..ConfigMap::default()
    }
}

/// A config with the widget's color, and a gate after it, ready once
/// someone adds `open` to it.
fn desired(cx: &Step<'_, Rollout>) -> Result<DesiredSet, RolloutError> {
    let widget = cx.resource();
    let name = widget.name_any();
    let config = cm(
        format!("{name}-config"),
        json!({ "color": widget.spec.color }),
    );
    let gate = cm(format!("{name}-gate"), json!({}));
    Ok(DesiredSet::builder()
        .dependent(Dependent::new("config", &config))
        .dependent(
            Dependent::new("gate", &gate)
                .depends_on(["config"])
                .ready_as(|live: &ConfigMap| {
                    live.data.as_ref().is_some_and(|d| d.contains_key("open"))
                }),
        )
        .build()?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_derived_converge_state_waits_for_its_dependents_then_moves_on() {
    let env = env().await;
    let widget = create_widget(
        &env,
        "rollout",
        WidgetSpec {
            color: "teal".into(),
            ..WidgetSpec::default()
        },
    )
    .await;
    let runtime = DependentsRuntime::new(env.client.clone())
        .field_manager("converge-attr-test")
        .pending_requeue(Duration::from_secs(7));
    let harness = Harness::<Rollout>::new(widget, ()).with_extension(Arc::new(runtime));

    // The gate is not open: the state stays, looking again after the
    // runtime's requeue, with both dependents applied.
    let report = harness.reconcile().await.unwrap();
    assert_eq!(report.state, "Deploying");
    assert_eq!(report.requeue, Some(Duration::from_secs(7)));
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    let config = configmaps.get("rollout-config").await.unwrap();
    assert_eq!(config.data.unwrap()["color"], "teal");
    assert!(configmaps.get_opt("rollout-gate").await.unwrap().is_some());

    // Open the gate: the next round finds every dependent ready.
    configmaps
        .patch(
            "rollout-gate",
            &PatchParams {
                field_manager: Some("opener".into()),
                ..PatchParams::default()
            },
            &Patch::Merge(&json!({"data": {"open": "yes"}})),
        )
        .await
        .unwrap();
    let settled = harness.run_until_settled().await.unwrap();
    assert_eq!(settled.path(), ["Deploying", "Running"]);
    assert_eq!(settled.state, Rollout::Running);
}
