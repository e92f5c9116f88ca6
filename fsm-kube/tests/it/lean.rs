//! The lean controller (`fsm_kube::watch::lean_controller`): a machine runs to `Ready` on a
//! controller whose cache holds the widgets without their `managedFields`,
//! while the server still keeps them; on the embedded API server, or the
//! real kube-apiserver named by `FSM_REAL_APISERVER_KUBECONFIG`.

use crate::common;

use std::time::Duration;

use common::*;
use fsm_kube::StatusStore;
use fsm_kube::prelude::*;
use futures::StreamExt;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::watcher;

#[tokio::test]
async fn a_machine_runs_on_a_lean_cache_that_holds_no_managed_fields() {
    init_tracing();
    let env = env().await;
    let ctx = ctx(&env.client);
    let fsm = FsmReconciler::<WidgetState>::builder(env.client(), StatusStore::new())
        .options(
            ReconcilerOptions::default()
                .poll_interval(Duration::from_secs(3600))
                .error_requeue(Duration::from_millis(100)),
        )
        .build();
    let widgets: Api<Widget> = Api::namespaced(env.client(), env.ns());
    let controller = fsm_kube::watch::lean_controller(widgets.clone(), watcher::Config::default());
    let cache = controller.store();
    let running = tokio::spawn(
        controller
            .run(fsm.reconcile(), fsm.error_policy(), ctx.clone())
            .for_each(|_| async {}),
    );

    create_widget(&env, "lean", WidgetSpec::colored("green")).await;
    let ready = wait_for_status_state(&env, "lean", "Ready").await;

    // The server keeps who wrote what (the create, and the runtime's
    // finalizer and status patches)...
    assert!(
        !ready.managed_fields().is_empty(),
        "the server records managedFields"
    );
    // ...and the controller's cache does not.
    let cached = eventually("the cache to show Ready", || {
        let cache = cache.clone();
        async move {
            cache.state().into_iter().find(|w| {
                w.name_any() == "lean"
                    && w.status
                        .as_ref()
                        .and_then(|s| s.fsm.as_ref())
                        .and_then(|r| r.state_name())
                        .as_deref()
                        == Some("Ready")
            })
        }
    })
    .await;
    assert_eq!(cached.metadata.managed_fields, None);
    assert_eq!(cached.spec.color, "green");
    assert_eq!(cached.uid(), ready.uid(), "the rest is the server's");
    assert_eq!(
        ctx.log(),
        ["start:lean", "configure:lean"],
        "one run of each handler"
    );
    running.abort();
}
