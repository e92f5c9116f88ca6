//! Two replicas with leader election against the embedded API server (or
//! the real kube-apiserver named by `FSM_REAL_APISERVER_KUBECONFIG`): only
//! the leader reconciles; when it stops, the other takes over, and no
//! transition is committed twice.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use fsm_kube::StatusStore;
use fsm_kube::leader::{run_while_leader, run_while_leader_until};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kube::runtime::{Controller, watcher};

/// One replica: a controller for the test namespace's widgets, run only
/// while it holds the lease (in that namespace too).
fn replica(env: &Env, identity: &'static str, ctx: Arc<Ctx>) -> tokio::task::JoinHandle<()> {
    let client = env.client.clone();
    let ns = env.ns.clone();
    tokio::spawn(async move {
        let controller_client = client.clone();
        let widgets: Api<Widget> = Api::namespaced(client.clone(), &ns);
        let result = run_while_leader(
            client,
            &ns,
            "widget-operator",
            identity,
            Duration::from_secs(2),
            move |leadership| {
                let fsm = fsm_kube::FsmReconciler::<WidgetState>::builder(
                    controller_client.clone(),
                    StatusStore::new(),
                )
                .leadership(leadership)
                .build();
                let widgets = widgets.clone();
                let ctx = ctx.clone();
                async move {
                    Controller::new(widgets, watcher::Config::default())
                        .run(fsm.reconcile(), fsm.error_policy(), ctx)
                        .for_each(|_| async {})
                        .await;
                }
            },
        )
        .await;
        if let Err(error) = result {
            panic!("{identity}: leader election failed: {error}");
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_reconciles_and_the_other_takes_over() {
    let env = env().await;
    let client = env.client.clone();
    let (ctx_a, ctx_b) = (ctx(&client), ctx(&client));
    let a = replica(&env, "a", ctx_a.clone());
    let b = replica(&env, "b", ctx_b.clone());

    create_widget(&env, "first", WidgetSpec::colored("blue")).await;
    wait_for_status_state(&env, "first", "Ready").await;
    let (leader, follower, leader_ctx, follower_ctx) = if ctx_a.log().is_empty() {
        (b, a, ctx_b, ctx_a)
    } else {
        (a, b, ctx_a, ctx_b)
    };
    assert!(
        follower_ctx.log().is_empty(),
        "the follower reconciled: {:?}",
        follower_ctx.log()
    );

    // The leader stops (its lease is no longer renewed); the follower takes
    // over after the lease expires and finishes the new work.
    leader.abort();
    let _ = leader.await;
    let before = leader_ctx.log().len();
    create_widget(&env, "second", WidgetSpec::colored("red")).await;
    let second = wait_for_status_state(&env, "second", "Ready").await;
    follower.abort();

    assert_eq!(
        leader_ctx.log().len(),
        before,
        "the stopped leader did no more work"
    );
    assert!(follower_ctx.log().contains(&"start:second".to_owned()));
    for widget in [wait_for_status_state(&env, "first", "Ready").await, second] {
        let record = widget
            .status
            .unwrap()
            .fsm
            .unwrap()
            .record::<WidgetState>()
            .unwrap();
        let seqs: Vec<u64> = record.history.iter().map(|h| h.seq).collect();
        assert_eq!(seqs, [1, 2, 3], "each transition committed once");
    }
}

/// A replica told to stop (SIGTERM, in the CLI) stops acting, gives the
/// Lease up and returns; the other takes it without waiting the duration
/// out, and reconciles from there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_told_to_stop_hands_the_lease_over() {
    let env = env().await;
    let client = env.client.clone();
    let leases: Api<Lease> = Api::namespaced(client.clone(), &env.ns);
    let holder = |leases: Api<Lease>| async move {
        leases
            .get_opt("widget-operator")
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity)
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let ns = env.ns.clone();
    let a = tokio::spawn(async move {
        run_while_leader_until(
            client,
            &ns,
            "widget-operator",
            "a",
            Duration::from_secs(6),
            |_leadership| std::future::pending::<()>(),
            async {
                let _ = stopped.await;
            },
        )
        .await
    });
    eventually("a to hold the Lease", || {
        let leases = leases.clone();
        async move { (holder(leases).await.as_deref() == Some("a")).then_some(()) }
    })
    .await;
    let ctx_b = ctx(&env.client);
    let b = replica(&env, "b", ctx_b.clone());

    stop.send(()).unwrap();
    a.await.unwrap().unwrap();
    assert_ne!(
        holder(leases.clone()).await.as_deref(),
        Some("a"),
        "a gave the Lease up before it returned"
    );
    eventually("b to hold the Lease", || {
        let leases = leases.clone();
        async move { (holder(leases).await.as_deref() == Some("b")).then_some(()) }
    })
    .await;
    create_widget(&env, "after", WidgetSpec::colored("green")).await;
    wait_for_status_state(&env, "after", "Ready").await;
    assert!(ctx_b.log().contains(&"start:after".to_owned()));
    b.abort();
}
