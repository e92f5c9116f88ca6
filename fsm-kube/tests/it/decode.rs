//! Objects that do not decode (`fsm_kube::watch`): one stored object
//! whose spec no longer fits the Rust type must not stop the operator.
//! The CRD's schema lets any spec through (as after a field's type changed
//! in an upgrade); one Knob's `size` is a string where the Rust type wants
//! a `u32`. Through `run` and `RunContext::lean_controller`, the valid
//! Knobs reconcile, the bad one gets the `Degraded` condition and one
//! event naming the field, the log says so once in one bounded line, and
//! the fixed Knob reconciles. On the embedded API server, or the real
//! kube-apiserver named by `FSM_REAL_APISERVER_KUBECONFIG`.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use fsm_kube::cli::{Cli, Command, Operator, RunContext, StoreKind};
use fsm_kube::prelude::*;
use fsm_testkit::TestCluster;
use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{CustomResource, CustomResourceExt};
use serde_json::json;

use crate::common::events_about;

/// The spec as this build reads it: `size` is a number.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "decode.test.operator-fsm.io",
    version = "v1",
    kind = "Knob",
    namespaced
)]
#[kube(status = "KnobStatus")]
pub struct KnobSpec {
    pub size: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KnobStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fsm: Option<FsmStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}

#[derive(Debug, thiserror::Error)]
#[error("never")]
pub struct KnobError;
impl Classify for KnobError {}

pub struct KnobCtx;

#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = Knob, context = KnobCtx, error = KnobError)]
pub enum KnobState {
    #[fsm(initial, handler = start, next(Ready))]
    Pending,
    #[fsm(final, ready)]
    Ready { size: u32 },
    #[fsm(failed)]
    Failed,
}

async fn start(cx: &mut Step<'_, KnobState>) -> Result<Transition<KnobState>, KnobError> {
    Ok(Transition::next(KnobState::Ready {
        size: cx.resource().spec.size,
    }))
}

/// The Knob CRD with a spec schema that takes anything, as a schema
/// loosened (or a field retyped) in an upgrade does.
fn loose_crd() -> CustomResourceDefinition {
    let mut crd = serde_json::to_value(Knob::crd()).unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] =
        json!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true });
    serde_json::from_value(crd).unwrap()
}

/// What the operator logs, captured.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn lines(&self) -> Vec<String> {
        String::from_utf8_lossy(&self.0.lock().unwrap())
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

/// Waits up to `secs` for `probe`.
async fn within<T, Fut>(secs: u64, what: &str, mut probe: impl FnMut() -> Fut) -> T
where
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {secs} s waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn state_of(knobs: &Api<Knob>, name: &str) -> Option<String> {
    let knob = knobs.get(name).await.ok()?;
    knob.status?.fsm?.state_name()
}

fn undecodable(object: &DynamicObject) -> Option<Condition> {
    let conditions: Vec<Condition> =
        serde_json::from_value(object.data["status"]["conditions"].clone()).ok()?;
    conditions
        .into_iter()
        .find(|c| c.type_ == "Degraded" && c.status == "True" && c.reason == "Undecodable")
}

// The operator runs on this thread (a current-thread runtime), so that the
// capturing subscriber, set for this thread only, sees all it logs and
// nothing of the tests running beside it.
#[tokio::test]
async fn one_object_that_does_not_decode_is_reported_and_the_others_reconcile() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_writer({
            let captured = captured.clone();
            move || captured.clone()
        })
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let cluster = TestCluster::from_env().await.unwrap();
    cluster.install_crd(&loose_crd()).await.unwrap();
    let ns = cluster.create_namespace("decode").await.unwrap();
    let client = cluster.client();
    let knobs: Api<Knob> = Api::namespaced(client.clone(), &ns);
    let resource = ApiResource::erase::<Knob>(&());
    let raw: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource);

    // The bad Knob is there before the operator starts (its first list
    // holds it), the valid ones beside it.
    let bad: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "decode.test.operator-fsm.io/v1", "kind": "Knob",
        "metadata": { "name": "bad" },
        "spec": { "size": "three" }
    }))
    .unwrap();
    raw.create(&PostParams::default(), &bad).await.unwrap();
    for (name, size) in [("good-1", 1), ("good-2", 2)] {
        let knob = Knob::new(name, KnobSpec { size });
        knobs.create(&PostParams::default(), &knob).await.unwrap();
    }

    let http = match cluster.embedded_server() {
        Some(server) => Some(server.serve_http().await.unwrap()),
        None => None,
    };
    let kubeconfig = match (&http, cluster.kubeconfig()) {
        (Some(http), _) => http.kubeconfig().to_str().unwrap().to_owned(),
        (None, Some(path)) => path.to_str().unwrap().to_owned(),
        (None, None) => panic!("a real cluster without a kubeconfig"),
    };
    let command: Command = Cli::try_parse_from([
        "knob-operator",
        "run",
        "--kubeconfig",
        &kubeconfig,
        "-n",
        &ns,
    ])
    .unwrap()
    .command;
    let op: Operator<KnobState> = Operator::new("knob-operator", StoreKind::Status)
        .reconciler_options(ReconcilerOptions::default().field_manager("knob-operator"));
    let started = Instant::now();
    let operator = tokio::spawn(async move {
        let run = |run: RunContext<KnobState>| async move {
            let fsm = run.reconciler();
            run.lean_controller::<Knob>()
                .run(fsm.reconcile(), fsm.error_policy(), Arc::new(KnobCtx))
                .for_each(|_| async {})
                .await;
        };
        let mut out = Vec::new();
        op.execute(command, run, &mut out).await
    });

    // Every valid Knob reconciles, the bad one notwithstanding.
    for name in ["good-1", "good-2"] {
        within(30, &format!("{name} Ready"), || async {
            (state_of(&knobs, name).await.as_deref() == Some("Ready")).then_some(())
        })
        .await;
    }
    let valid_reconciled = started.elapsed();
    // So does one created while it runs.
    knobs
        .create(
            &PostParams::default(),
            &Knob::new("good-3", KnobSpec { size: 3 }),
        )
        .await
        .unwrap();
    within(30, "good-3 Ready", || async {
        (state_of(&knobs, "good-3").await.as_deref() == Some("Ready")).then_some(())
    })
    .await;

    // The bad one says why, naming the field, and is told nothing else.
    let condition = within(30, "bad's Degraded condition", || async {
        undecodable(&raw.get("bad").await.ok()?)
    })
    .await;
    assert!(
        condition
            .message
            .contains(r#"spec.size: invalid type: string "three", expected u32"#),
        "{}",
        condition.message
    );
    assert!(condition.message.len() < 1024, "{}", condition.message);
    let bad_now = raw.get("bad").await.unwrap();
    assert!(
        bad_now.data["status"].get("fsm").is_none(),
        "no record for an object that does not decode"
    );
    within(30, "bad's event", || async {
        let events = events_about(&client, &ns, "bad", "Undecodable").await;
        (!events.is_empty()).then_some(())
    })
    .await;

    // Quiet afterwards: a relisting watch, the condition's own write and
    // an unrelated change of the object (a label: same generation) report
    // nothing again.
    raw.patch(
        "bad",
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "labels": { "touched": "yes" } } })),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let events = events_about(&client, &ns, "bad", "Undecodable").await;
    assert_eq!(events.len(), 1, "one event: {events:?}");
    assert_eq!(events[0].type_.as_deref(), Some("Warning"));
    let lines = captured.lines();
    let reports: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("does not decode") && l.contains("WARN"))
        .collect();
    assert_eq!(
        reports.len(),
        1,
        "one log line for the bad object: {reports:#?}"
    );
    assert!(
        reports[0].contains("decode/bad") || reports[0].contains("/bad"),
        "{}",
        reports[0]
    );
    let longest = lines.iter().map(String::len).max().unwrap_or(0);
    assert!(
        longest < 2048,
        "no log line carries a list response: the longest is {longest} bytes"
    );
    eprintln!(
        "valid objects reconciled {valid_reconciled:?} after the start; the report's log line: \
         {} bytes ({}); {} log lines, {} bytes in all",
        reports[0].len(),
        reports[0],
        lines.len(),
        lines.iter().map(|l| l.len() + 1).sum::<usize>()
    );

    // Fixed, it reconciles, and the reconciler's conditions replace the
    // report.
    raw.patch(
        "bad",
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": { "size": 4 } })),
    )
    .await
    .unwrap();
    within(30, "the fixed Knob Ready", || async {
        (state_of(&knobs, "bad").await.as_deref() == Some("Ready")).then_some(())
    })
    .await;
    within(30, "the report cleared", || async {
        let fixed = raw.get("bad").await.ok()?;
        undecodable(&fixed).is_none().then_some(())
    })
    .await;

    operator.abort();
    drop(http);
}
