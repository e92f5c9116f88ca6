//! A person's commands through the object, as `kubectl fsm` sends them (the
//! `operator-fsm.io/commands` annotation), through a real `Controller` on
//! the embedded API server or the real kube-apiserver named by
//! `FSM_REAL_APISERVER_KUBECONFIG`: taken once each, in order; a paused
//! release runs nothing whatever happens to it; a refused command says so
//! in an event and in the record; an unreadable list applies nothing.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fsm_kube::fsm_core::{Command, CommandAction, StateRecord};
use fsm_kube::prelude::*;
use fsm_kube::records::COMMANDS_ANNOTATION;
use fsm_kube::{FsmReconciler, FsmStatus, StatusStore};
use fsm_testkit::TestCluster;
use futures::StreamExt;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{Controller, watcher};
use kube::{Client, CustomResource, CustomResourceExt};

use crate::common::eventually;

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "test.operator-fsm.io",
    version = "v1",
    kind = "Rollout",
    namespaced
)]
#[kube(status = "RolloutStatus")]
pub struct RolloutSpec {
    pub image: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RolloutStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fsm: Option<FsmStatus>,
}

#[derive(Debug, thiserror::Error)]
#[error("never")]
struct Never;

impl Classify for Never {}

/// Every handler call, by state.
struct Ctx {
    log: Mutex<Vec<String>>,
}

/// A rollout that waits for a person's approval, then serves.
#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = Rollout, context = Ctx, error = Never, on_spec_change = continue)]
enum RolloutState {
    #[fsm(initial, handler = plan, next(AwaitingApproval))]
    Planning,
    #[fsm(handler = wait, on_signal(approve = Serving, reject = Rejected))]
    AwaitingApproval,
    #[fsm(ready, handler = serve, next(Planning))]
    Serving,
    #[fsm(failed)]
    Rejected,
}

fn note(cx: &Step<'_, RolloutState>, what: &str) {
    cx.context().log.lock().unwrap().push(what.to_owned());
}

async fn plan(cx: &mut Step<'_, RolloutState>) -> Result<Transition<RolloutState>, Never> {
    note(cx, "plan");
    Ok(Transition::next(RolloutState::AwaitingApproval))
}

async fn wait(cx: &mut Step<'_, RolloutState>) -> Result<Transition<RolloutState>, Never> {
    note(cx, "wait");
    // Looks often, so that a handler running while paused would show.
    Ok(Transition::wait(Duration::from_millis(100)))
}

async fn serve(cx: &mut Step<'_, RolloutState>) -> Result<Transition<RolloutState>, Never> {
    note(cx, "serve");
    Ok(Transition::stay())
}

struct Env {
    rollouts: Api<Rollout>,
    client: Client,
    ns: String,
    ctx: Arc<Ctx>,
    controller: tokio::task::JoinHandle<()>,
    _cluster: TestCluster,
}

impl Drop for Env {
    fn drop(&mut self) {
        self.controller.abort();
    }
}

async fn env(ns: &str) -> Env {
    crate::common::init_tracing();
    let cluster = TestCluster::from_env().await.unwrap();
    cluster.install_crd(&Rollout::crd()).await.unwrap();
    let ns = cluster.create_namespace(ns).await.unwrap();
    let client = cluster.client();
    let rollouts: Api<Rollout> = Api::namespaced(client.clone(), &ns);
    let ctx = Arc::new(Ctx {
        log: Mutex::new(Vec::new()),
    });
    let fsm = FsmReconciler::<RolloutState>::builder(client.clone(), StatusStore::default())
        .options(ReconcilerOptions::default().error_requeue(Duration::from_millis(100)))
        .build();
    let controller = tokio::spawn(
        Controller::new(rollouts.clone(), watcher::Config::default())
            .run(fsm.reconcile(), fsm.error_policy(), ctx.clone())
            .for_each(|_| async {}),
    );
    Env {
        rollouts,
        client,
        ns,
        ctx,
        controller,
        _cluster: cluster,
    }
}

impl Env {
    fn take_log(&self) -> Vec<String> {
        std::mem::take(&mut *self.ctx.log.lock().unwrap())
    }

    async fn create(&self, name: &str) {
        let rollout = Rollout::new(
            name,
            RolloutSpec {
                image: "shop:1".into(),
            },
        );
        self.rollouts
            .create(&PostParams::default(), &rollout)
            .await
            .unwrap();
    }

    async fn record(&self, name: &str) -> Option<StateRecord> {
        let rollout = self.rollouts.get(name).await.ok()?;
        rollout.status?.fsm?.record::<RolloutState>().ok()
    }

    async fn wait_until(
        &self,
        name: &str,
        what: &str,
        test: impl Fn(&StateRecord) -> bool,
    ) -> StateRecord {
        eventually(&format!("{name}: {what}"), || async {
            self.record(name).await.filter(|r| test(r))
        })
        .await
    }

    /// Writes the object's command list, as `kubectl fsm` does.
    async fn send(&self, name: &str, commands: &[Command]) {
        self.annotate(name, &Command::list_to_text(commands)).await;
    }

    async fn annotate(&self, name: &str, text: &str) {
        let patch = serde_json::json!({
            "metadata": {"annotations": {COMMANDS_ANNOTATION: text}}
        });
        self.rollouts
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }

    async fn events(&self, name: &str, reason: &str) -> Vec<Event> {
        crate::common::events_about(&self.client, &self.ns, name, reason).await
    }
}

fn command(seq: u64, action: CommandAction) -> Command {
    Command::new(seq, action).by("alice")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_are_taken_once_in_order_and_a_paused_rollout_runs_nothing() {
    let env = env("fsm-kube-commands").await;
    env.create("web").await;
    env.wait_until("web", "awaiting approval", |r| {
        r.state == "AwaitingApproval"
    })
    .await;

    let mut sent = vec![command(1, CommandAction::Pause)];
    env.send("web", &sent).await;
    let paused = env
        .wait_until("web", "paused", |r| r.paused.is_some())
        .await;
    assert_eq!(paused.paused.unwrap().by.as_deref(), Some("alice"));

    // Paused: a spec change, a second of 100 ms waits, nothing runs.
    env.take_log();
    let patch = serde_json::json!({"spec": {"image": "shop:2"}});
    env.rollouts
        .patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        env.take_log(),
        Vec::<String>::new(),
        "no handler while paused"
    );
    let still = env.record("web").await.unwrap();
    assert_eq!(still.state, "AwaitingApproval");
    assert_eq!(still.observed_generation, Some(1), "the spec change waits");

    // Resume, a signal the state does not take, and the approval: one write.
    sent.extend([
        command(2, CommandAction::Resume),
        command(3, CommandAction::Signal("ship".into())),
        command(4, CommandAction::Signal("approve".into())),
    ]);
    env.send("web", &sent).await;
    // Commands come before the spec change, which is taken after them.
    let serving = env
        .wait_until("web", "serving generation 2", |r| {
            r.state == "Serving" && r.observed_generation == Some(2)
        })
        .await;
    let log: Vec<(u64, &str, Option<&str>)> = serving
        .commands
        .iter()
        .map(|c| (c.seq, c.command.as_str(), c.refused.as_deref()))
        .collect();
    assert_eq!(
        log,
        [
            (1, "pause", None),
            (2, "resume", None),
            (
                3,
                "signal ship",
                Some("AwaitingApproval takes no signal 'ship'; it takes: approve, reject")
            ),
            (4, "signal approve", None),
        ]
    );
    assert_eq!(serving.command_seq, 4);
    let approved = serving.history.last().unwrap();
    assert_eq!(
        approved.reason.as_deref(),
        Some("signal approve (command 4 by alice)")
    );
    let refused = eventually("the refusal's event", || async {
        let events = env.events("web", "CommandRefused").await;
        (!events.is_empty()).then_some(events)
    })
    .await;
    let note = refused[0].note.clone().unwrap_or_default();
    assert!(
        note.contains("command 3 (signal ship) by alice refused"),
        "{note}"
    );

    // The list stays on the object; the record's number keeps every
    // command from being taken again, whatever wakes the rollout.
    let again = serde_json::json!({"metadata": {"labels": {"touched": "yes"}}});
    env.rollouts
        .patch("web", &PatchParams::default(), &Patch::Merge(&again))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = env.record("web").await.unwrap();
    assert_eq!(after.commands.len(), 4);
    assert_eq!(after.state, "Serving");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_command_list_applies_nothing_and_says_so() {
    let env = env("fsm-kube-commands-bad").await;
    env.create("api").await;
    env.wait_until("api", "awaiting approval", |r| {
        r.state == "AwaitingApproval"
    })
    .await;
    env.annotate("api", "approve it please").await;
    let events = eventually("the unreadable list's event", || async {
        let events = env.events("api", "CommandsUnreadable").await;
        (!events.is_empty()).then_some(events)
    })
    .await;
    let note = events[0].note.clone().unwrap_or_default();
    assert!(note.contains(COMMANDS_ANNOTATION), "{note}");
    let record = env.record("api").await.unwrap();
    assert_eq!(record.command_seq, 0);
    assert_eq!(record.state, "AwaitingApproval");

    // Fixed, it is applied.
    env.send("api", &[command(1, CommandAction::Signal("reject".into()))])
        .await;
    let rejected = env
        .wait_until("api", "rejected", |r| r.state == "Rejected")
        .await;
    assert_eq!(
        rejected.last_error.as_deref(),
        Some("signal reject (command 1 by alice)")
    );

    // A failed rollout is retried by a command: it starts again.
    env.send(
        "api",
        &[
            command(1, CommandAction::Signal("reject".into())),
            command(2, CommandAction::Retry),
        ],
    )
    .await;
    let retried = env
        .wait_until("api", "retried", |r| {
            r.command_seq == 2 && r.state == "AwaitingApproval"
        })
        .await;
    assert_eq!(retried.last_error, None);
}
