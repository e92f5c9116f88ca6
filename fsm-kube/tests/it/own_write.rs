//! What wakes the next step after a commit, on the embedded API server or
//! the real kube-apiserver named by `FSM_REAL_APISERVER_KUBECONFIG`: a
//! status-store commit is delivered by the controller's own watch, so the
//! requeue after it only stands in for an event that does not come
//! (`ReconcilerOptions::own_write_wait`); the other stores' commits wake
//! nothing and requeue at once.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use fsm_kube::prelude::*;
use fsm_kube::{ConfigMapStore, DEFAULT_OWN_WRITE_WAIT, FsmReconciler, KubeStore, StatusStore};
use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::{Controller, WatchStreamExt, predicates, reflector, watcher};

fn reconciler(
    env: &Env,
    store: impl KubeStore<Widget>,
    options: ReconcilerOptions,
) -> FsmReconciler<WidgetState> {
    FsmReconciler::<WidgetState>::builder(env.client.clone(), store)
        .options(
            options
                .poll_interval(Duration::from_secs(3600))
                .events(false),
        )
        .build()
}

async fn fetch(env: &Env, name: &str) -> Arc<Widget> {
    let widgets: Api<Widget> = Api::namespaced(env.client.clone(), &env.ns);
    Arc::new(widgets.get(name).await.unwrap())
}

/// Creates widget `name` with the reconciler's finalizer already on it, so
/// that one copy of it serves several reconciles.
async fn create_finalized_widget(env: &Env, name: &str) -> Arc<Widget> {
    create_widget(env, name, WidgetSpec::colored("blue")).await;
    let widgets: Api<Widget> = Api::namespaced(env.client.clone(), &env.ns);
    let finalizer = ReconcilerOptions::default().finalizer;
    let patch = serde_json::json!({"metadata": {"finalizers": [finalizer]}});
    widgets
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    fetch(env, name).await
}

fn runs(ctx: &Ctx, line: &str) -> usize {
    ctx.log().iter().filter(|l| *l == line).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_store_transition_waits_for_its_watch_event_and_other_stores_requeue_at_once() {
    let env = env().await;
    let ctx = ctx(&env.client);

    // The status store: the transition's write is the object's, so the
    // next step waits for the watch (at most `own_write_wait`).
    let widget = create_finalized_widget(&env, "status").await;
    let fsm = reconciler(&env, StatusStore::new(), ReconcilerOptions::default());
    let action = fsm.reconcile_object(widget, ctx.clone()).await.unwrap();
    assert_eq!(action, Action::requeue(DEFAULT_OWN_WRITE_WAIT));
    let widget = wait_for_status_state(&env, "status", "Configuring").await;
    // The copy with the commit runs the next step; resting in `Ready`
    // then waits the poll interval, as before.
    let action = fsm
        .reconcile_object(Arc::new(widget), ctx.clone())
        .await
        .unwrap();
    assert_eq!(action, Action::requeue(DEFAULT_OWN_WRITE_WAIT));
    let widget = wait_for_status_state(&env, "status", "Ready").await;
    let action = fsm
        .reconcile_object(Arc::new(widget), ctx.clone())
        .await
        .unwrap();
    assert_eq!(action, Action::requeue(Duration::from_secs(3600)));
    assert_eq!(runs(&ctx, "configure:status"), 1);

    // Zero: at once, as a controller that filters status changes wants.
    create_widget(&env, "zero", WidgetSpec::colored("blue")).await;
    let fsm = reconciler(
        &env,
        StatusStore::new(),
        ReconcilerOptions::default().own_write_wait(Duration::ZERO),
    );
    let action = fsm
        .reconcile_object(fetch(&env, "zero").await, ctx.clone())
        .await
        .unwrap();
    assert_eq!(action, Action::requeue(Duration::ZERO));

    // A ConfigMap store's commit does not touch the object: at once.
    create_widget(&env, "cm", WidgetSpec::colored("blue")).await;
    let fsm = reconciler(
        &env,
        ConfigMapStore::new(env.client.clone()),
        ReconcilerOptions::default(),
    );
    let action = fsm
        .reconcile_object(fetch(&env, "cm").await, ctx.clone())
        .await
        .unwrap();
    assert_eq!(action, Action::requeue(Duration::ZERO));
}

/// Something else wakes the object (an owned object's event) before the
/// watch has delivered the runtime's own commit: that copy runs nothing and
/// waits for the event, for the rest of `own_write_wait`; past it, the step
/// runs on that copy (the store answers with the record it committed). The
/// wait is long enough that a loaded machine still reconciles the copy
/// again within it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_from_before_the_runtimes_own_commit_waits_for_its_event() {
    let env = env().await;
    let ctx = ctx(&env.client);
    let wait = Duration::from_secs(2);
    let stale = create_finalized_widget(&env, "w").await;
    let fsm = reconciler(
        &env,
        StatusStore::new(),
        ReconcilerOptions::default().own_write_wait(wait),
    );
    let action = fsm
        .reconcile_object(stale.clone(), ctx.clone())
        .await
        .unwrap();
    assert_eq!(action, Action::requeue(wait));

    let action = fsm
        .reconcile_object(stale.clone(), ctx.clone())
        .await
        .unwrap();
    // The rest of the wait: neither at once, nor the whole wait again.
    assert_ne!(action, Action::requeue(Duration::ZERO));
    assert_ne!(action, Action::requeue(wait));
    assert_ne!(action, Action::await_change());
    assert_eq!(runs(&ctx, "configure:w"), 0, "the stale copy ran the step");

    tokio::time::sleep(wait).await;
    let action = fsm.reconcile_object(stale, ctx.clone()).await.unwrap();
    assert_eq!(action, Action::requeue(wait));
    assert_eq!(runs(&ctx, "configure:w"), 1);
    wait_for_status_state(&env, "w", "Ready").await;
}

/// With a wait far longer than the test, the workflow still completes:
/// each step after the first was woken by the watch event of the commit
/// before it, not by the requeue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watch_event_of_a_commit_runs_the_next_step() {
    let env = env().await;
    let ctx = ctx(&env.client);
    let fsm = reconciler(
        &env,
        StatusStore::new(),
        ReconcilerOptions::default().own_write_wait(Duration::from_secs(3600)),
    );
    let widgets: Api<Widget> = Api::namespaced(env.client.clone(), &env.ns);
    let controller = Controller::new(widgets, watcher::Config::default())
        .run(fsm.reconcile(), fsm.error_policy(), ctx.clone())
        .for_each(|_| async {});
    let controller = tokio::spawn(controller);
    create_widget(&env, "w", WidgetSpec::colored("blue")).await;
    wait_for_status_state(&env, "w", "Ready").await;
    controller.abort();
    assert_eq!(ctx.log(), ["start:w", "configure:w"]);
}

/// A controller whose watch drops status changes (a generation predicate)
/// never sees the commits: the requeue after each runs the next step, and
/// the workflow completes in about one `own_write_wait` per transition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_that_filters_out_status_changes_still_completes_the_workflow() {
    let env = env().await;
    let ctx = ctx(&env.client);
    let wait = Duration::from_millis(300);
    let fsm = reconciler(
        &env,
        StatusStore::new(),
        ReconcilerOptions::default().own_write_wait(wait),
    );
    let widgets: Api<Widget> = Api::namespaced(env.client.clone(), &env.ns);
    let (reader, writer) = reflector::store();
    let changes = watcher(widgets, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .applied_objects()
        .predicate_filter(predicates::generation, Default::default());
    let controller = Controller::for_stream(changes, reader)
        .run(fsm.reconcile(), fsm.error_policy(), ctx.clone())
        .for_each(|_| async {});
    let controller = tokio::spawn(controller);
    let started = Instant::now();
    create_widget(&env, "w", WidgetSpec::colored("blue")).await;
    wait_for_status_state(&env, "w", "Ready").await;
    let took = started.elapsed();
    controller.abort();
    assert_eq!(ctx.log(), ["start:w", "configure:w"]);
    // Two transitions, the second woken only by the requeue after the
    // first: at least one wait.
    assert!(took >= wait, "completed in {took:?}, before the requeue");
}
