//! The status store's record path on the operator's side, without a
//! server: loading a record and decoding it as the engine does, and
//! committing one (encoding, diffing, the patch request and its answer),
//! on a realistic record: 20 history entries, state data, a trail entry.
//! A commit is measured over the watched copy (the usual case: the watch
//! delivered the last commit before the next step ran) and over a copy
//! from before the store's own last commit (the later commits of a chain
//! under `max_transitions`, or a watch lagging past `own_write_wait`).
//!
//! The API is answered in-process (a `tower` service that returns a new
//! `resourceVersion`), so what is measured is this crate's and the
//! engine's work alone. Figures are meant to be read as instruction counts
//! under callgrind (repeatable on a loaded machine):
//!
//! ```text
//! cargo bench -p fsm-kube --bench record_path --no-run
//! valgrind --tool=callgrind --collect-atstart=no \
//!     --toggle-collect='record_path::measure_*' target/release/deps/record_path-* commit_transition 1000
//! ```
//!
//! Run plainly (`cargo bench -p fsm-kube --bench record_path`), it prints
//! the wall time per operation of every scenario.

use std::convert::Infallible;
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use tokio::runtime::Runtime;

use fsm_core::{Fsm, HistoryEntry, StateRecord, TrailEntry, Version};
use fsm_kube::prelude::*;
use fsm_kube::{KubeStore, StatusStore, Target};
use kube::api::{Api, ApiResource, ObjectMeta};
use kube::{Client, CustomResource};

/// The benchmark's resource.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "bench.operator-fsm.io",
    version = "v1",
    kind = "Gadget",
    namespaced
)]
#[kube(status = "GadgetStatus")]
pub struct GadgetSpec {
    /// How big.
    pub size: u32,
}

/// Its status: the record.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GadgetStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The record.
    pub fsm: Option<FsmStatus>,
}

/// The handlers' error (never returned).
#[derive(Debug, thiserror::Error)]
#[error("never")]
pub struct Never;
impl Classify for Never {}

/// The machine: its handlers never run here.
#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = Gadget, context = (), error = Never)]
pub enum GadgetState {
    #[fsm(initial, handler = step, next(Provisioning))]
    /// Waiting.
    Pending,
    #[fsm(handler = provisioning, compensate = undo, next(Ready))]
    /// Being provisioned.
    Provisioning {
        /// The instance.
        id: String,
        /// Where.
        zone: String,
        /// How many.
        replicas: u32,
    },
    #[fsm(ready, handler = ready, next(Pending))]
    /// Serving.
    Ready {
        /// The instance.
        id: String,
        /// Where it answers.
        endpoint: String,
    },
    #[fsm(failed)]
    /// Given up.
    Failed,
}

async fn step(_: &mut Step<'_, GadgetState>) -> Result<Transition<GadgetState>, Never> {
    Ok(Transition::stay())
}

async fn provisioning(
    _: &mut Step<'_, GadgetState>,
    _: &str,
    _: &str,
    _: &u32,
) -> Result<Transition<GadgetState>, Never> {
    Ok(Transition::stay())
}

async fn ready(
    _: &mut Step<'_, GadgetState>,
    _: &str,
    _: &str,
) -> Result<Transition<GadgetState>, Never> {
    Ok(Transition::stay())
}

async fn undo(_: &mut Step<'_, GadgetState>, _: &str, _: &str, _: &u32) -> Result<(), Never> {
    Ok(())
}

/// A record after `transitions` transitions, with the last 20 in its
/// history.
fn record(transitions: u64) -> StateRecord {
    let at = |n: u64| {
        jiff::Timestamp::from_second(1_700_000_000 + i64::try_from(n).unwrap_or(0) * 60)
            .expect("a valid time")
    };
    let names = ["Pending", "Provisioning", "Ready"];
    let name = |n: u64| names[usize::try_from(n % 3).unwrap_or(0)].to_owned();
    let state = GadgetState::Provisioning {
        id: "i-0123456789abcdef".into(),
        zone: "eu-west-1a".into(),
        replicas: 3,
    };
    let mut record = StateRecord::new(&state, at(transitions)).expect("encodes");
    record.transitions = transitions;
    record.observed_generation = Some(4);
    record.history = (transitions.saturating_sub(19)..=transitions)
        .map(|seq| HistoryEntry {
            seq,
            from: (seq > 1).then(|| name(seq - 1)),
            to: name(seq),
            at: at(seq),
            reason: (seq % 5 == 0).then(|| "spec changed".to_owned()),
        })
        .collect();
    record.trail = vec![TrailEntry {
        state: "Provisioning".into(),
        data: record.data.clone(),
        entered_at: at(transitions),
        closed: true,
    }];
    record
}

/// A client whose every request is answered with a new `resourceVersion`.
fn answering_client() -> Client {
    let next = Arc::new(AtomicU64::new(1000));
    let service = tower::service_fn(move |_: http::Request<kube::client::Body>| {
        let version = next.fetch_add(1, Ordering::Relaxed);
        async move {
            let body = format!(r#"{{"metadata":{{"resourceVersion":"{version}"}}}}"#);
            Ok::<_, Infallible>(http::Response::new(kube::client::Body::from(
                body.into_bytes(),
            )))
        }
    });
    Client::new(service, "default")
}

/// The store's view of a Gadget holding `stored` at `resource_version`.
fn target(client: &Client, stored: &StateRecord, resource_version: &str) -> Target<Gadget> {
    let mut gadget = Gadget::new("g1", GadgetSpec { size: 3 });
    gadget.metadata = ObjectMeta {
        name: Some("g1".into()),
        namespace: Some("default".into()),
        uid: Some("5a1f7c3e-0000-4000-8000-000000000001".into()),
        resource_version: Some(resource_version.into()),
        generation: Some(4),
        ..ObjectMeta::default()
    };
    let status = serde_json::json!({ "fsm": stored });
    gadget.status = serde_json::from_value(status).ok();
    let resource = ApiResource::erase::<Gadget>(&());
    let api = Api::namespaced_with(client.clone(), "default", &resource);
    Target::new(Arc::new(gadget), api, GadgetState::machine()).with_field_manager("bench")
}

/// A load and the engine's decoding of what it loaded.
#[inline(never)]
async fn scenario_load(store: &StatusStore, target: &Target<Gadget>) -> StateRecord {
    let loaded = store.load(target).await.expect("loads");
    let raw = loaded.record.expect("a record");
    raw.upgrade::<GadgetState>().expect("decodes").record
}

/// Loads of a version the store did not write: decoded from the status.
#[inline(never)]
async fn scenario_load_miss(client: &Client, iterations: u64) {
    let stored = record(40);
    let target = target(client, &stored, "500");
    let store = StatusStore::new();
    for _ in 0..iterations {
        black_box(scenario_load(&store, &target).await);
    }
}

/// Commits alternating between `b` over the watched copy holding `a`, and
/// `a` over the one holding `b`: each over the copy the watch delivered.
async fn watched_commits(client: &Client, a: &StateRecord, b: &StateRecord, iterations: u64) {
    let holding_a = target(client, a, "500");
    let holding_b = target(client, b, "501");
    let store = StatusStore::new();
    for n in 0..iterations {
        let (over, record) = if n % 2 == 0 {
            (&holding_a, b)
        } else {
            (&holding_b, a)
        };
        let expected = Version(over.resource_version().to_owned());
        black_box(
            store
                .save(over, fsm_core::Commit::new(record, Some(&expected)))
                .await
                .expect("commits"),
        );
        // What the store keeps of its commit is for a copy from before it;
        // the next copy is the watched one.
        store.delete(over, None).await.expect("forgets");
    }
}

/// Commits alternating between `a` and `b`, all over one copy holding `a`
/// from before the first: the store's own last commit is what the server
/// holds each time (a chain's later commits).
async fn chained_commits(client: &Client, a: &StateRecord, b: &StateRecord, iterations: u64) {
    let target = target(client, a, "500");
    let store = StatusStore::new();
    let expected = Version("500".into());
    for n in 0..iterations {
        let record = if n % 2 == 0 { b } else { a };
        black_box(
            store
                .save(&target, fsm_core::Commit::new(record, Some(&expected)))
                .await
                .expect("commits"),
        );
    }
}

/// A failed attempt's record: the history stays as it is.
fn failed_attempt(a: &StateRecord) -> StateRecord {
    let mut b = a.clone();
    b.attempt = 1;
    b.last_error = Some("the cloud is busy".into());
    b
}

/// Commits of a failed attempt over the watched copy.
#[inline(never)]
async fn scenario_commit_attempt(client: &Client, iterations: u64) {
    let a = record(40);
    watched_commits(client, &a, &failed_attempt(&a), iterations).await;
}

/// Commits of a transition (a history entry in, the oldest out) over the
/// watched copy.
#[inline(never)]
async fn scenario_commit_transition(client: &Client, iterations: u64) {
    watched_commits(client, &record(40), &record(41), iterations).await;
}

/// Commits of a failed attempt over a copy from before the last commit.
#[inline(never)]
async fn scenario_commit_attempt_chained(client: &Client, iterations: u64) {
    let a = record(40);
    chained_commits(client, &a, &failed_attempt(&a), iterations).await;
}

/// Commits of a transition over a copy from before the last commit.
#[inline(never)]
async fn scenario_commit_transition_chained(client: &Client, iterations: u64) {
    chained_commits(client, &record(40), &record(41), iterations).await;
}

const SCENARIOS: [&str; 5] = [
    "load_miss",
    "commit_attempt",
    "commit_transition",
    "commit_attempt_chained",
    "commit_transition_chained",
];

/// Runs one scenario to its end. Each is a function of its own (named
/// `measure_<scenario>`), so that callgrind can count it alone.
fn run(runtime: &Runtime, client: &Client, scenario: &str, iterations: u64) {
    match scenario {
        "load_miss" => measure_load_miss(runtime, client, iterations),
        "commit_attempt" => measure_commit_attempt(runtime, client, iterations),
        "commit_transition" => measure_commit_transition(runtime, client, iterations),
        "commit_attempt_chained" => measure_commit_attempt_chained(runtime, client, iterations),
        "commit_transition_chained" => {
            measure_commit_transition_chained(runtime, client, iterations);
        }
        other => panic!("unknown scenario {other}; one of {SCENARIOS:?}"),
    }
}

#[inline(never)]
fn measure_load_miss(runtime: &Runtime, client: &Client, iterations: u64) {
    runtime.block_on(scenario_load_miss(client, iterations));
}

#[inline(never)]
fn measure_commit_attempt(runtime: &Runtime, client: &Client, iterations: u64) {
    runtime.block_on(scenario_commit_attempt(client, iterations));
}

#[inline(never)]
fn measure_commit_transition(runtime: &Runtime, client: &Client, iterations: u64) {
    runtime.block_on(scenario_commit_transition(client, iterations));
}

#[inline(never)]
fn measure_commit_attempt_chained(runtime: &Runtime, client: &Client, iterations: u64) {
    runtime.block_on(scenario_commit_attempt_chained(client, iterations));
}

#[inline(never)]
fn measure_commit_transition_chained(runtime: &Runtime, client: &Client, iterations: u64) {
    runtime.block_on(scenario_commit_transition_chained(client, iterations));
}

fn main() {
    // `cargo bench` passes `--bench`; a scenario name and a count select
    // one scenario (for callgrind).
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    // The client's request queue is a task: it needs the runtime.
    let client = runtime.block_on(async { answering_client() });
    match args.as_slice() {
        [scenario, iterations] => {
            let iterations = iterations.parse().expect("a count");
            run(&runtime, &client, scenario, iterations);
        }
        _ => {
            let iterations = 20_000;
            for scenario in SCENARIOS {
                let start = Instant::now();
                run(&runtime, &client, scenario, iterations);
                let each = start.elapsed() / u32::try_from(iterations).unwrap_or(1);
                println!("{scenario:<26} {each:>10.2?} per operation ({iterations} operations)");
            }
        }
    }
}
