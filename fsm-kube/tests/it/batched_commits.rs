//! Batched commits through a real `Controller` against the embedded API
//! server, or the real kube-apiserver named by
//! `FSM_REAL_APISERVER_KUBECONFIG`: the benchmark's five-step workload
//! (`Configuring` → `Deploying` → `WaitingReady`, which waits, →
//! `Annotating` → `Ready`) under `max_transitions(5)`, side by side with
//! and without `#[fsm(batch_commits)]`, counting the status writes in the
//! embedded server's request log.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use fsm_kube::prelude::*;
use fsm_kube::{FsmReconciler, StatusStore};
use futures::StreamExt;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::{Controller, watcher};

/// The five-step machine, declared with the enum attributes given: the
/// same handlers with and without batching.
macro_rules! five_steps {
    ($module:ident $(, $batch:ident)?) => {
        mod $module {
            use super::*;

            #[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
            #[fsm(resource = Widget, context = Ctx, error = WidgetError $(, $batch)?)]
            pub enum Chain {
                #[fsm(initial, handler = configure, next(Deploying))]
                Configuring,
                #[fsm(handler = deploy, next(WaitingReady))]
                Deploying,
                /// Waits while the widget carries the `hold` annotation,
                /// as the benchmark waits for its Deployment to roll out.
                #[fsm(handler = wait_ready, next(Annotating))]
                WaitingReady,
                #[fsm(handler = annotate, next(Ready))]
                Annotating,
                #[fsm(final, ready)]
                Ready,
                #[fsm(failed)]
                Failed,
            }

            fn note(cx: &Step<'_, Chain>, step: &str) {
                cx.context()
                    .log
                    .lock()
                    .unwrap()
                    .push(format!("{step}:{}", cx.resource().name_any()));
            }

            async fn configure(cx: &mut Step<'_, Chain>) -> Result<Transition<Chain>, WidgetError> {
                note(cx, "configure");
                Ok(Transition::next(Chain::Deploying))
            }

            async fn deploy(cx: &mut Step<'_, Chain>) -> Result<Transition<Chain>, WidgetError> {
                note(cx, "deploy");
                Ok(Transition::next(Chain::WaitingReady))
            }

            async fn wait_ready(cx: &mut Step<'_, Chain>) -> Result<Transition<Chain>, WidgetError> {
                if cx.resource().annotations().contains_key("hold") {
                    return Ok(Transition::stay());
                }
                note(cx, "ready");
                Ok(Transition::next(Chain::Annotating))
            }

            async fn annotate(cx: &mut Step<'_, Chain>) -> Result<Transition<Chain>, WidgetError> {
                note(cx, "annotate");
                Ok(Transition::next(Chain::Ready))
            }
        }
    };
}

five_steps!(batched, batch_commits);
five_steps!(one_by_one);

/// Runs a controller of machine `S` for the widgets of `env`'s namespace,
/// with up to five transitions per reconcile.
fn run_chained<S>(env: &Env, ctx: Arc<Ctx>) -> tokio::task::JoinHandle<()>
where
    S: Fsm<Resource = Widget, Context = Ctx>,
{
    let fsm = FsmReconciler::<S>::builder(env.client.clone(), StatusStore::new())
        .options(
            ReconcilerOptions::default()
                .max_transitions(5)
                .poll_interval(Duration::from_secs(3600))
                .error_requeue(Duration::from_millis(100)),
        )
        .build();
    let widgets: Api<Widget> = Api::namespaced(env.client.clone(), &env.ns);
    let controller = Controller::new(widgets, watcher::Config::default())
        .run(fsm.reconcile(), fsm.error_policy(), ctx)
        .for_each(|_| async {});
    tokio::spawn(controller)
}

/// Status writes of widgets so far (the embedded server only).
fn status_patches(env: &Env) -> Option<usize> {
    env.embedded().map(|server| {
        server
            .request_log()
            .records()
            .iter()
            .filter(|r| {
                r.verb == "patch"
                    && r.resource == "widgets"
                    && r.subresource.as_deref() == Some("status")
            })
            .count()
    })
}

/// Drives one held widget to `Ready` under machine `S`; the status writes
/// when it waits in `WaitingReady` and when it is `Ready`, and what ran.
async fn run_workload<S>() -> (Option<usize>, Option<usize>, Vec<String>, Vec<String>)
where
    S: Fsm<Resource = Widget, Context = Ctx>,
{
    let env = env().await;
    let ctx = ctx(&env.client);
    let controller = run_chained::<S>(&env, ctx.clone());
    create_held_widget(&env, "w").await;
    wait_for_status_state(&env, "w", "WaitingReady").await;
    // Let the controller settle (any stray reconcile would write now).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let waiting = status_patches(&env);
    release_hold(&env, "w").await;
    let widget = wait_for_status_state(&env, "w", "Ready").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ready = status_patches(&env);
    controller.abort();
    let record = widget
        .status
        .and_then(|s| s.fsm)
        .expect("a record")
        .record::<S>()
        .expect("a readable record");
    let path = record.history.iter().map(|h| h.to.clone()).collect();
    (waiting, ready, path, ctx.log())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_commits_write_the_five_step_workload_twice() {
    let (waiting, ready, path, log) = run_workload::<batched::Chain>().await;
    assert_eq!(
        path,
        [
            "Configuring",
            "Deploying",
            "WaitingReady",
            "Annotating",
            "Ready"
        ]
    );
    assert_eq!(log, ["configure:w", "deploy:w", "ready:w", "annotate:w"]);
    // Counted on the embedded server; a real kube-apiserver has no request
    // log, and there the rest of the test still runs.
    if let (Some(waiting), Some(ready)) = (waiting, ready) {
        // The initial entry, two transitions and the entry of WaitingReady
        // in one write; WaitingReady -> Annotating -> Ready in the second.
        assert_eq!(waiting, 1, "one write up to WaitingReady");
        assert_eq!(ready, 2, "one more write to Ready");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_batching_each_chained_transition_is_a_write() {
    assert_eq!(
        one_by_one::Chain::MERMAID,
        batched::Chain::MERMAID,
        "the same machine, batching aside"
    );
    let (waiting, ready, path, _) = run_workload::<one_by_one::Chain>().await;
    assert_eq!(
        path,
        [
            "Configuring",
            "Deploying",
            "WaitingReady",
            "Annotating",
            "Ready"
        ]
    );
    if let (Some(waiting), Some(ready)) = (waiting, ready) {
        // The initial entry rides with the first transition; every other
        // transition is a write of its own.
        assert_eq!(waiting, 2);
        assert_eq!(ready, 4);
    }
}
