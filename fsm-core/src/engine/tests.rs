//! The semantics of docs/semantics.md, rule by rule, on a hand-written machine whose
//! handlers follow a script.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proptest::prelude::*;
use serde::{Deserialize, Serialize};

use crate::prelude::*;
use crate::{
    Commit, Effect, Engine, EngineOptions, EphemeralStore, Loaded, ObjectKey, Observed, RawRecord,
    ReconcileError, SeededRandom, StateRecord, StateStore, StoreError, Version,
};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
enum Flow {
    Start,
    Provision { id: String },
    Wait { id: String },
    Ready { id: String },
    Parked,
    Failed,
}

/// What a scripted handler call does.
#[derive(Clone, Debug, PartialEq)]
enum Act {
    /// The state's normal progress.
    Go,
    Stay,
    WaitFor(Duration),
    Retry,
    RetryAfter(Duration),
    /// A failure of the world around the handler (spends no attempt).
    Transient,
    Permanent,
    Fail,
    Sleep(Duration),
    Goto(Flow),
    Checkpoint(Flow),
}

#[derive(Debug, thiserror::Error)]
enum FlowError {
    #[error("temporary trouble")]
    Temporary(Option<Duration>),
    #[error("broken for good")]
    Broken,
    #[error("the API server is unavailable")]
    Unavailable,
    #[error(transparent)]
    Checkpoint(#[from] crate::CheckpointError),
}

impl Classify for FlowError {
    fn class(&self) -> ErrorClass {
        match self {
            FlowError::Temporary(None) | FlowError::Checkpoint(_) => ErrorClass::RETRYABLE,
            FlowError::Temporary(Some(d)) => ErrorClass::retry_after(*d),
            FlowError::Broken => ErrorClass::Permanent,
            FlowError::Unavailable => ErrorClass::RETRY_WITHOUT_ATTEMPT,
        }
    }
}

#[derive(Default)]
struct Script {
    handler: Mutex<VecDeque<Act>>,
    compensation: Mutex<VecDeque<Act>>,
    cleanup: Mutex<VecDeque<Act>>,
    log: Mutex<Vec<String>>,
}

impl Script {
    fn with(acts: impl IntoIterator<Item = Act>) -> Arc<Self> {
        let s = Script::default();
        s.handler.lock().unwrap().extend(acts);
        Arc::new(s)
    }
    fn compensations(self: &Arc<Self>, acts: impl IntoIterator<Item = Act>) -> Arc<Self> {
        self.compensation.lock().unwrap().extend(acts);
        self.clone()
    }
    fn cleanups(self: &Arc<Self>, acts: impl IntoIterator<Item = Act>) -> Arc<Self> {
        self.cleanup.lock().unwrap().extend(acts);
        self.clone()
    }
    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

static STATES: [StateMeta; 6] = [
    StateMeta::new("Start")
        .initial()
        .with_handler()
        .next(&["Provision"]),
    StateMeta::new("Provision")
        .with_handler()
        .with_data()
        .with_compensation()
        .retry(
            match RetryPolicy::new(3, Duration::from_secs(1), 2.0, Duration::from_secs(10)) {
                Ok(p) => p,
                Err(_) => panic!("invalid policy"),
            },
        )
        .next(&["Wait", "Failed"]),
    StateMeta::new("Wait")
        .with_handler()
        .with_data()
        .with_compensation()
        .timeout(Duration::from_secs(600))
        .attempt_timeout(Duration::from_secs(30))
        .on_exhausted("Parked")
        .next(&["Ready"]),
    StateMeta::new("Ready")
        .ready()
        .with_handler()
        .with_data()
        .next(&["Start"]),
    StateMeta::new("Parked").final_state(),
    StateMeta::new("Failed").failed(),
];
static MACHINE: Machine = Machine::new("Flow", &STATES)
    .on_delete(OnDelete::Compensate)
    .with_cleanup();

impl Flow {
    fn id(&self) -> &str {
        match self {
            Flow::Provision { id } | Flow::Wait { id } | Flow::Ready { id } => id,
            _ => "",
        }
    }

    fn progress(&self) -> Transition<Flow> {
        match self {
            Flow::Start => Transition::next(Flow::Provision { id: "i-1".into() }),
            Flow::Provision { id } => Transition::next(Flow::Wait { id: id.clone() }),
            Flow::Wait { id } => Transition::next(Flow::Ready { id: id.clone() }),
            _ => Transition::stay(),
        }
    }
}

async fn act(
    cx: &mut Step<'_, Flow>,
    state: &Flow,
    act: Act,
) -> Result<Transition<Flow>, FlowError> {
    match act {
        Act::Go => Ok(state.progress()),
        Act::Stay => Ok(Transition::stay()),
        Act::WaitFor(d) => Ok(Transition::wait(d)),
        Act::Retry => Err(FlowError::Temporary(None)),
        Act::RetryAfter(d) => Err(FlowError::Temporary(Some(d))),
        Act::Transient => Err(FlowError::Unavailable),
        Act::Permanent => Err(FlowError::Broken),
        Act::Fail => Ok(Transition::fail("asked to fail")),
        Act::Sleep(d) => {
            tokio::time::sleep(d).await;
            Ok(state.progress())
        }
        Act::Goto(s) => Ok(Transition::next(s)),
        Act::Checkpoint(s) => {
            cx.checkpoint(s).await?;
            Err(FlowError::Temporary(None))
        }
    }
}

/// What a scripted compensation or cleanup call does.
fn unwinding_act(act: Act) -> Result<(), FlowError> {
    match act {
        Act::Retry => Err(FlowError::Temporary(None)),
        Act::Transient => Err(FlowError::Unavailable),
        Act::Permanent => Err(FlowError::Broken),
        _ => Ok(()),
    }
}

impl Fsm for Flow {
    type Resource = ();
    type Context = Arc<Script>;
    type Error = FlowError;

    fn machine() -> &'static Machine {
        &MACHINE
    }
    fn state_name(&self) -> &'static str {
        match self {
            Flow::Start => "Start",
            Flow::Provision { .. } => "Provision",
            Flow::Wait { .. } => "Wait",
            Flow::Ready { .. } => "Ready",
            Flow::Parked => "Parked",
            Flow::Failed => "Failed",
        }
    }
    fn unit_state(name: &str) -> Option<Self> {
        match name {
            "Start" => Some(Flow::Start),
            "Parked" => Some(Flow::Parked),
            "Failed" => Some(Flow::Failed),
            _ => None,
        }
    }
    fn handle<'a>(
        &'a self,
        cx: &'a mut Step<'_, Self>,
    ) -> BoxFuture<'a, Result<Transition<Self>, FlowError>> {
        Box::pin(async move {
            let next = cx
                .context()
                .handler
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or(Act::Go);
            cx.context().log.lock().unwrap().push(format!(
                "handle:{}:{}",
                self.state_name(),
                cx.attempt()
            ));
            act(cx, self, next).await
        })
    }
    fn compensate<'a>(
        &'a self,
        cx: &'a mut Step<'_, Self>,
    ) -> BoxFuture<'a, Result<(), FlowError>> {
        Box::pin(async move {
            let next = cx
                .context()
                .compensation
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or(Act::Go);
            cx.context().log.lock().unwrap().push(format!(
                "compensate:{}:{}",
                self.state_name(),
                self.id()
            ));
            unwinding_act(next)
        })
    }
    fn cleanup<'a>(&'a self, cx: &'a mut Step<'_, Self>) -> BoxFuture<'a, Result<(), FlowError>> {
        Box::pin(async move {
            let next = cx
                .context()
                .cleanup
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or(Act::Go);
            cx.context().log.lock().unwrap().push(format!(
                "cleanup:{}:{}",
                self.state_name(),
                self.id()
            ));
            unwinding_act(next)
        })
    }
}

fn t0() -> Timestamp {
    "2026-06-01T00:00:00Z".parse().unwrap()
}

fn engine(clock: &ManualClock) -> Engine<Flow> {
    Engine::<Flow>::new()
        .unwrap()
        .with_clock(Arc::new(clock.clone()))
        .with_random(Arc::new(SeededRandom::new(9)))
}

fn observed() -> Observed {
    Observed {
        commands: Vec::new(),
        key: ObjectKey::namespaced("ns", "db"),
        generation: Some(1),
        deleting: false,
        spec: None,
    }
}

fn record_in(store: &EphemeralStore) -> StateRecord {
    store
        .get_raw(&observed().key)
        .unwrap()
        .decode::<Flow>()
        .unwrap()
}

/// Reconciles until the machine rests, advancing the clock by requeues.
async fn settle(
    engine: &Engine<Flow>,
    clock: &ManualClock,
    store: &EphemeralStore,
    script: &Arc<Script>,
    obs: &Observed,
) -> Vec<Effect> {
    let mut effects = Vec::new();
    for _ in 0..200 {
        let report = engine.reconcile(store, obs, &(), script).await.unwrap();
        effects.extend(report.effects);
        match report.requeue {
            None => return effects,
            Some(d) if d >= Duration::from_secs(60) && report.commits == 0 => return effects,
            Some(d) => clock.advance(d),
        }
    }
    panic!("did not settle");
}

fn entered(effects: &[Effect]) -> Vec<String> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Entered { to, .. } => Some(to.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_workflow_commits_one_write_per_transition() {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    let script = Script::with([]);
    let effects = settle(&engine(&clock), &clock, &store, &script, &observed()).await;
    assert_eq!(entered(&effects), ["Start", "Provision", "Wait", "Ready"]);
    let record = record_in(&store);
    assert_eq!(record.state, "Ready");
    assert_eq!(record.transitions, 4);
    let seqs: Vec<u64> = record.history.iter().map(|h| h.seq).collect();
    assert_eq!(seqs, [1, 2, 3, 4]);
    assert_eq!(record.observed_generation, Some(1));
    // 4 entries, 3 saves (the version counter is the number of writes): the
    // initial entry is committed with the first transition.
    assert_eq!(
        store.load(&observed().key).await.unwrap().version,
        Some(Version("3".into()))
    );
}

#[tokio::test]
async fn retries_back_off_geometrically_and_honour_retry_after() {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    let script = Script::with([Act::Go, Act::Retry, Act::Retry, Act::Go]);
    let engine = engine(&clock);
    let mut delays = Vec::new();
    // Start → Provision, two retries, → Wait.
    for _ in 0..4 {
        let report = engine
            .reconcile(&store, &observed(), &(), &script)
            .await
            .unwrap();
        for e in &report.effects {
            if let Effect::RetryScheduled { delay, attempt, .. } = e {
                delays.push((*attempt, *delay));
            }
        }
        clock.advance(report.requeue.unwrap_or_default());
    }
    assert_eq!(
        delays,
        [(1, Duration::from_secs(1)), (2, Duration::from_secs(2))]
    );
    assert_eq!(record_in(&store).state, "Wait");

    let script = Script::with([Act::Go, Act::RetryAfter(Duration::from_secs(42))]);
    let store = EphemeralStore::new();
    engine
        .reconcile(&store, &observed(), &(), &script)
        .await
        .unwrap();
    let report = engine
        .reconcile(&store, &observed(), &(), &script)
        .await
        .unwrap();
    assert_eq!(report.requeue, Some(Duration::from_secs(42)));
}

#[tokio::test]
async fn a_scheduled_retry_runs_no_handler_before_its_time() {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    let script = Script::with([Act::Go, Act::Retry]);
    let engine = engine(&clock);
    // Start → Provision, then a retry scheduled 1 s later.
    for _ in 0..2 {
        engine
            .reconcile(&store, &observed(), &(), &script)
            .await
            .unwrap();
    }
    clock.advance(Duration::from_millis(400));
    let report = engine
        .reconcile(&store, &observed(), &(), &script)
        .await
        .unwrap();
    assert_eq!(report.requeue, Some(Duration::from_millis(600)));
    assert_eq!(report.commits, 0);
    assert_eq!(script.log(), ["handle:Start:0", "handle:Provision:0"]);
}

#[tokio::test]
async fn exhaustion_takes_on_exhausted_without_compensation() {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    let mut acts = vec![Act::Go, Act::Go];
    acts.extend(std::iter::repeat_n(Act::Retry, 5));
    let script = Script::with(acts);
    let effects = settle(&engine(&clock), &clock, &store, &script, &observed()).await;
    assert_eq!(entered(&effects), ["Start", "Provision", "Wait", "Parked"]);
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, Effect::RetriesExhausted { state, .. } if state == "Wait"))
    );
    assert!(!script.log().iter().any(|l| l.starts_with("compensate")));
    let record = record_in(&store);
    assert!(
        record
            .last_error
            .unwrap()
            .contains("retries exhausted in Wait after 5 attempts")
    );
}

#[tokio::test]
async fn exhaustion_without_target_fails_and_compensates() {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    let script = Script::with([Act::Go, Act::Retry, Act::Retry, Act::Retry]);
    let effects = settle(&engine(&clock), &clock, &store, &script, &observed()).await;
    assert_eq!(entered(&effects), ["Start", "Provision", "Failed"]);
    assert_eq!(
        script
            .log()
            .iter()
            .filter(|l| l.starts_with("compensate"))
            .collect::<Vec<_>>(),
        ["compensate:Provision:i-1"]
    );
    // max_attempts = 3 counts the first attempt: three handler calls.
    assert_eq!(
        script
            .log()
            .iter()
            .filter(|l| l.starts_with("handle:Provision"))
            .count(),
        3
    );
}

#[tokio::test]
async fn state_timeout_survives_a_restart_and_compensates_in_reverse_order() {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    let script = Script::with([Act::Go, Act::Go, Act::Stay]);
    let first = engine(&clock);
    // Start → Provision → Wait.
    for _ in 0..2 {
        first
            .reconcile(&store, &observed(), &(), &script)
            .await
            .unwrap();
    }
    let report = first
        .reconcile(&store, &observed(), &(), &script)
        .await
        .unwrap();
    assert_eq!(report.state, "Wait");
    // Stay inside a timed state: look again by the deadline at the latest.
    assert_eq!(report.requeue, Some(Duration::from_secs(60)));
    drop(first);

    // A new engine (a restarted operator), same record, 11 minutes later.
    clock.advance(Duration::from_secs(660));
    let second = engine(&clock);
    let effects = settle(&second, &clock, &store, &script, &observed()).await;
    assert!(effects.contains(&Effect::TimedOut {
        state: "Wait".into()
    }));
    assert_eq!(entered(&effects), ["Failed"]);
    let compensations: Vec<_> = script
        .log()
        .into_iter()
        .filter(|l| l.starts_with("compensate"))
        .collect();
    assert_eq!(
        compensations,
        ["compensate:Wait:i-1", "compensate:Provision:i-1"]
    );
    let record = record_in(&store);
    assert!(
        record
            .last_error
            .unwrap()
            .starts_with("timed out in Wait after 10m")
    );
    assert!(record.trail.is_empty());
}

#[tokio::test]
async fn attempt_timeout_drops_the_handler_and_retries() {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    // The handler waits an hour of real time; the attempt timeout is 30 s
    // of the engine's (manual) clock.
    let script = Script::with([Act::Go, Act::Go, Act::Sleep(Duration::from_secs(3600))]);
    let engine = engine(&clock);
    // Start → Provision → Wait.
    for _ in 0..2 {
        engine
            .reconcile(&store, &observed(), &(), &script)
            .await
            .unwrap();
    }
    let obs = observed();
    let reconcile = engine.reconcile(&store, &obs, &(), &script);
    let time_passes = async {
        // Once the handler is waiting, 29 s pass: not yet; then the 30th.
        while clock.next_sleep().is_none() {
            tokio::task::yield_now().await;
        }
        clock.advance(Duration::from_secs(29));
        tokio::task::yield_now().await;
        clock.advance(Duration::from_secs(1));
    };
    let (report, ()) = tokio::time::timeout(Duration::from_secs(20), async {
        tokio::join!(reconcile, time_passes)
    })
    .await
    .expect("the attempt timeout is measured on the manual clock, not in real time");
    let report = report.unwrap();
    assert_eq!(
        clock.now(),
        crate::clock::add(t0(), Duration::from_secs(30))
    );
    assert_eq!(report.state, "Wait");
    let record = record_in(&store);
    assert_eq!(record.attempt, 1);
    assert_eq!(
        record.last_error.as_deref(),
        Some("attempt timed out after 30s")
    );
    let [
        Effect::RetryScheduled {
            attempt: 1, delay, ..
        },
    ] = report.effects[..]
    else {
        panic!("one retry scheduled: {:?}", report.effects);
    };
    // What follows is decided when the attempt ended, not when it began.
    assert_eq!(
        record.next_attempt_at,
        Some(crate::clock::add(clock.now(), delay))
    );
}

#[tokio::test]
async fn stay_and_wait_commit_nothing() {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    let script = Script::with([
        Act::Go,
        Act::Go,
        Act::Go,
        Act::Stay,
        Act::WaitFor(Duration::from_secs(7)),
    ]);
    let engine = engine(&clock);
    // Start → Provision → Wait → Ready.
    for _ in 0..3 {
        engine
            .reconcile(&store, &observed(), &(), &script)
            .await
            .unwrap();
    }
    let before = store.get_raw(&observed().key);
    let stay = engine
        .reconcile(&store, &observed(), &(), &script)
        .await
        .unwrap();
    let wait = engine
        .reconcile(&store, &observed(), &(), &script)
        .await
        .unwrap();
    assert_eq!((stay.commits, wait.commits), (0, 0));
    assert_eq!(stay.requeue, Some(Duration::from_secs(60)));
    assert_eq!(wait.requeue, Some(Duration::from_secs(7)));
    assert_eq!(store.get_raw(&observed().key), before);
}

#[tokio::test]
async fn an_undeclared_transition_is_reported_and_counted_as_a_failure() {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    let script = Script::with([Act::Goto(Flow::Ready { id: "x".into() })]);
    let engine = engine(&clock);
    // The first reconcile enters the initial state and runs its handler.
    let report = engine
        .reconcile(&store, &observed(), &(), &script)
        .await
        .unwrap();
    assert_eq!(report.state, "Start");
    assert_eq!(report.commits, 1);
    assert_eq!(entered(&report.effects), ["Start"]);
    assert_eq!(
        report.effects[1],
        Effect::UndeclaredTransition {
            from: "Start".into(),
            to: "Ready".into()
        }
    );
    let record = record_in(&store);
    assert_eq!(record.attempt, 1);
    assert_eq!(
        record.last_error.as_deref(),
        Some("handler of Start asked for undeclared transition to Ready")
    );
}

#[tokio::test]
async fn compensation_resumes_after_a_crash_mid_chain() {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    let script = Script::with([Act::Go, Act::Go, Act::Fail]);
    let first = engine(&clock);
    // Start → Provision → Wait, fail, the first compensation.
    for _ in 0..4 {
        first
            .reconcile(&store, &observed(), &(), &script)
            .await
            .unwrap();
    }
    // Failing started the chain; the first compensation (Wait) is committed.
    let record = record_in(&store);
    assert!(record.is_unwinding());
    assert_eq!(record.trail.len(), 1);
    assert_eq!(record.state, "Wait");
    drop(first);

    let second = engine(&clock);
    let effects = settle(&second, &clock, &store, &script, &observed()).await;
    assert_eq!(entered(&effects), ["Failed"]);
    let compensations: Vec<_> = script
        .log()
        .into_iter()
        .filter(|l| l.starts_with("compensate"))
        .collect();
    assert_eq!(
        compensations,
        ["compensate:Wait:i-1", "compensate:Provision:i-1"]
    );
}

#[tokio::test]
async fn compensation_retries_then_records_permanent_failures_and_goes_on() {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    let script = Script::with([Act::Go, Act::Go, Act::Permanent])
        .compensations([Act::Retry, Act::Permanent]);
    let effects = settle(&engine(&clock), &clock, &store, &script, &observed()).await;
    let compensations: Vec<_> = script
        .log()
        .into_iter()
        .filter(|l| l.starts_with("compensate"))
        .collect();
    // Wait: retried once then failed for good; Provision still compensated.
    assert_eq!(
        compensations,
        [
            "compensate:Wait:i-1",
            "compensate:Wait:i-1",
            "compensate:Provision:i-1"
        ]
    );
    assert!(effects.contains(&Effect::CompensationFailed {
        step: "Wait".into(),
        error: "broken for good".into()
    }));
    assert!(effects.contains(&Effect::CompensationFinished { failures: 1 }));
    let record = record_in(&store);
    assert_eq!(record.state, "Failed");
    assert_eq!(record.compensation.unwrap().failures.len(), 1);
}

#[tokio::test]
async fn a_handler_moving_to_a_failed_state_compensates_first() {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    let script = Script::with([Act::Go, Act::Goto(Flow::Failed)]);
    let effects = settle(&engine(&clock), &clock, &store, &script, &observed()).await;
    assert_eq!(entered(&effects), ["Start", "Provision", "Failed"]);
    assert!(
        script
            .log()
            .contains(&"compensate:Provision:i-1".to_owned())
    );
}

#[tokio::test]
async fn corrupt_records_are_reported_and_left_byte_identical() {
    let clock = ManualClock::at(t0());
    let script = Script::with([]);
    let good = serde_json::to_value(StateRecord::new(&Flow::Start, t0()).unwrap()).unwrap();
    let mut unknown = good.clone();
    unknown["state"] = "Vanished".into();
    let mut newer = good.clone();
    newer["schemaVersion"] = 99.into();
    let mut bad_data = good.clone();
    bad_data["state"] = "Wait".into();
    bad_data["data"] = serde_json::json!({"id": 5});
    let cases = [
        (RawRecord::Text("{not json".into()), "malformed"),
        (RawRecord::Json(unknown), "does not have"),
        (RawRecord::Json(newer), "schema version 99"),
        (RawRecord::Json(bad_data), "does not fit"),
        (
            RawRecord::Json(serde_json::json!({"schemaVersion": 1, "state": 3})),
            "malformed",
        ),
    ];
    for (raw, needle) in cases {
        let store = EphemeralStore::new();
        store.insert_raw(observed().key, raw.clone());
        let err = engine(&clock)
            .reconcile(&store, &observed(), &(), &script)
            .await
            .unwrap_err();
        assert!(matches!(err, ReconcileError::Corrupt(_)), "{err:?}");
        assert!(err.source_text().contains(needle), "{}", err.source_text());
        assert_eq!(store.get_raw(&observed().key), Some(raw));
    }
    assert!(script.log().is_empty());
}

trait SourceText {
    fn source_text(&self) -> String;
}
impl SourceText for ReconcileError {
    fn source_text(&self) -> String {
        match self {
            ReconcileError::Corrupt(e) => e.to_string(),
            other => other.to_string(),
        }
    }
}

#[tokio::test]
async fn spec_change_restarts_without_compensation() {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    let script = Script::with([]);
    let engine = engine(&clock);
    for _ in 0..3 {
        engine
            .reconcile(&store, &observed(), &(), &script)
            .await
            .unwrap();
    }
    let changed = Observed {
        commands: Vec::new(),
        generation: Some(2),
        ..observed()
    };
    let report = engine
        .reconcile(&store, &changed, &(), &script)
        .await
        .unwrap();
    assert_eq!(report.state, "Start");
    assert!(
        report
            .effects
            .contains(&Effect::SpecChanged { generation: 2 })
    );
    let record = record_in(&store);
    assert_eq!(record.observed_generation, Some(2));
    assert!(record.trail.is_empty());
    assert!(!script.log().iter().any(|l| l.starts_with("compensate")));
    assert_eq!(
        record.history.last().unwrap().reason.as_deref(),
        Some("spec changed (generation 2)")
    );
}

#[tokio::test]
async fn deletion_compensates_cleans_up_and_releases() {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    let script = Script::with([]).compensations([Act::Retry]);
    let engine = engine(&clock);
    for _ in 0..4 {
        engine
            .reconcile(&store, &observed(), &(), &script)
            .await
            .unwrap();
    }
    let deleting = Observed {
        commands: Vec::new(),
        deleting: true,
        ..observed()
    };
    let mut released = false;
    for _ in 0..10 {
        let report = engine
            .reconcile(&store, &deleting, &(), &script)
            .await
            .unwrap();
        if report.released {
            released = true;
            break;
        }
        clock.advance(report.requeue.unwrap_or_default());
    }
    assert!(released);
    let log: Vec<_> = script
        .log()
        .into_iter()
        .filter(|l| !l.starts_with("handle"))
        .collect();
    assert_eq!(
        log,
        [
            "compensate:Wait:i-1",
            "compensate:Wait:i-1",
            "compensate:Provision:i-1",
            // The state the machine was in when deletion began, with its data.
            "cleanup:Ready:i-1"
        ]
    );
    assert!(store.is_empty());
}

#[tokio::test]
async fn checkpoints_commit_data_for_the_current_state() {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    let script = Script::with([
        Act::Go,
        Act::Checkpoint(Flow::Provision { id: "req-7".into() }),
        Act::Go,
        Act::Fail,
    ]);
    let effects = settle(&engine(&clock), &clock, &store, &script, &observed()).await;
    assert!(effects.contains(&Effect::Checkpointed {
        state: "Provision".into()
    }));
    // The retry saw the checkpointed data, and so did the compensation.
    assert!(script.log().contains(&"compensate:Wait:req-7".to_owned()));
    assert!(
        script
            .log()
            .contains(&"compensate:Provision:req-7".to_owned())
    );
}

#[tokio::test]
async fn a_checkpoint_of_another_state_is_refused() {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    let script = Script::with([Act::Checkpoint(Flow::Parked)]);
    let engine = engine(&clock);
    for _ in 0..2 {
        engine
            .reconcile(&store, &observed(), &(), &script)
            .await
            .unwrap();
    }
    let record = record_in(&store);
    assert_eq!(record.state, "Start");
    assert_eq!(
        record.last_error.as_deref(),
        Some("a checkpoint must stay in state Start, not move to Parked")
    );
}

#[tokio::test]
async fn cheap_states_chain_within_one_reconcile_when_allowed() {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    let script = Script::with([]);
    let engine = engine(&clock).with_options(EngineOptions {
        max_transitions: 3,
        ..EngineOptions::default()
    });
    let report = engine
        .reconcile(&store, &observed(), &(), &script)
        .await
        .unwrap();
    assert_eq!(
        entered(&report.effects),
        ["Start", "Provision", "Wait", "Ready"]
    );
    // Three transitions chained, three commits: the initial entry rides
    // with the first.
    assert_eq!(report.commits, 3);
}

/// A store that, on request, refuses the next save (a crash before the
/// commit) or lets another writer in first (a conflict), and keeps every
/// committed record.
#[derive(Default)]
struct FaultyStore {
    inner: EphemeralStore,
    next_fault: Mutex<Option<Fault>>,
    committed: Mutex<Vec<StateRecord>>,
}

#[derive(Clone, Copy, Debug)]
enum Fault {
    Crash,
    Conflict,
}

impl StateStore for FaultyStore {
    fn load<'a>(&'a self, key: &'a ObjectKey) -> BoxFuture<'a, Result<Loaded, StoreError>> {
        self.inner.load(key)
    }
    fn save<'a>(
        &'a self,
        key: &'a ObjectKey,
        commit: Commit<'a>,
    ) -> BoxFuture<'a, Result<Version, StoreError>> {
        Box::pin(async move {
            match self.next_fault.lock().unwrap().take() {
                Some(Fault::Crash) => {
                    return Err(StoreError::Backend("crashed before commit".into()));
                }
                Some(Fault::Conflict) => {
                    if let Some(raw) = self.inner.get_raw(key) {
                        self.inner.insert_raw(key.clone(), raw);
                    }
                }
                None => {}
            }
            let version = self.inner.save(key, commit).await?;
            self.committed.lock().unwrap().push(commit.record.clone());
            Ok(version)
        })
    }
    fn delete<'a>(
        &'a self,
        key: &'a ObjectKey,
        expected: Option<&'a Version>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.inner.delete(key, expected)
    }
}

fn any_act() -> impl Strategy<Value = Act> {
    prop_oneof![
        4 => Just(Act::Go),
        1 => Just(Act::Stay),
        3 => Just(Act::Retry),
        2 => Just(Act::Transient),
        1 => Just(Act::Permanent),
        1 => Just(Act::Fail),
    ]
}

fn any_fault() -> impl Strategy<Value = Option<Fault>> {
    prop_oneof![6 => Just(None), 1 => Just(Some(Fault::Crash)), 1 => Just(Some(Fault::Conflict))]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Whatever the handlers do and whatever the store suffers, no committed
    /// transition is lost or applied twice, attempts stay within the policy,
    /// delays within their bounds, and a failure compensates the open saga
    /// scope in reverse order of entry.
    #[test]
    fn the_engine_keeps_its_invariants(
        acts in proptest::collection::vec(any_act(), 0..40),
        comp_acts in proptest::collection::vec(prop_oneof![Just(Act::Go), Just(Act::Retry), Just(Act::Transient), Just(Act::Permanent)], 0..6),
        faults in proptest::collection::vec(any_fault(), 60),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        runtime.block_on(async {
            let clock = ManualClock::at(t0());
            let store = FaultyStore::default();
            let script = Script::with(acts).compensations(comp_acts);
            let engine = engine(&clock);
            let mut effects = Vec::new();
            for fault in faults {
                *store.next_fault.lock().unwrap() = fault;
                match engine.reconcile(&store, &observed(), &(), &script).await {
                    Ok(report) => {
                        effects.extend(report.effects);
                        if let Some(d) = report.requeue { clock.advance(d.max(Duration::from_millis(1))) }
                    }
                    Err(ReconcileError::Conflict | ReconcileError::Store(_)) => {}
                    Err(other) => return Err(TestCaseError::fail(format!("{other:?}"))),
                }
            }
            let committed = store.committed.lock().unwrap().clone();
            // Transitions: each commit continues the previous one's history.
            let mut last: Option<&StateRecord> = None;
            for record in &committed {
                let policy = MACHINE.retry_policy(MACHINE.state(&record.state).unwrap());
                prop_assert!(record.attempt <= policy.max_attempts(), "attempt {} in {}", record.attempt, record.state);
                if let Some(prev) = last {
                    prop_assert!(record.transitions >= prev.transitions);
                    let new: Vec<_> = record.history.iter().filter(|h| h.seq > prev.transitions).collect();
                    prop_assert_eq!(new.len() as u64, record.transitions - prev.transitions);
                    let mut from = prev.state.clone();
                    for (i, h) in new.iter().enumerate() {
                        prop_assert_eq!(h.seq, prev.transitions + 1 + i as u64);
                        prop_assert_eq!(h.from.as_deref(), Some(from.as_str()));
                        from = h.to.clone();
                    }
                } else {
                    // The first commit holds the initial entry, alone or
                    // with the first transition.
                    prop_assert!((1..=2).contains(&record.transitions));
                    prop_assert_eq!(record.history[0].seq, 1);
                    prop_assert_eq!(record.history[0].from.as_deref(), None);
                    prop_assert_eq!(record.history[0].to.as_str(), "Start");
                    for (i, h) in record.history.iter().enumerate().skip(1) {
                        prop_assert_eq!(h.seq, 1 + i as u64);
                        prop_assert_eq!(h.from.as_deref(), Some(record.history[i - 1].to.as_str()));
                    }
                }
                last = Some(record);
            }
            for e in &effects {
                if let Effect::RetryScheduled { delay, .. } | Effect::RetryWithoutAttempt { delay, .. } = e {
                    prop_assert!(*delay <= Duration::from_secs(300));
                }
            }
            // Compensation order: the states compensated (retries and
            // re-runs after a crash collapsed) are the compensable states
            // entered in the open scope, latest first.
            let mut compensated: Vec<String> = script.log().into_iter().filter(|l| l.starts_with("compensate")).collect();
            compensated.dedup();
            let final_record = committed.last();
            if let Some(record) = final_record.filter(|r| r.state == "Failed") {
                // Only the open scope: what was entered since the workflow
                // last reached a state that closes it.
                let open_since = record.history.iter()
                    .rposition(|h| h.to == "Ready" || h.to == "Parked")
                    .map_or(0, |i| i + 1);
                let entered: Vec<String> = record.history[open_since..].iter()
                    .filter(|h| h.to == "Provision" || h.to == "Wait")
                    .map(|h| format!("compensate:{}:i-1", h.to))
                    .collect();
                let mut expected = entered.clone();
                expected.reverse();
                expected.dedup();
                prop_assert_eq!(compensated, expected);
            }
            Ok(())
        })?;
    }
}

#[test]
fn spec_change_continue_keeps_the_state_and_goto_moves() {
    static CONTINUE: Machine = Machine::new("Flow", &STATES).on_spec_change(SpecChange::Continue);
    static GOTO: Machine = Machine::new("Flow", &STATES).on_spec_change(SpecChange::Goto("Parked"));
    let random = SeededRandom::new(1);
    let decider = |machine: &'static Machine| crate::engine::Decider {
        machine,
        now: t0(),
        random: &random,
        history_limit: 20,
        poll_interval: Duration::from_secs(60),
    };
    let mut record = StateRecord::new(&Flow::Wait { id: "i".into() }, t0()).unwrap();
    record.observed_generation = Some(1);
    record.transitions = 3;

    let kept = decider(&CONTINUE)
        .spec_changed::<Flow>(record.clone(), 2, &observed())
        .unwrap();
    assert_eq!(
        kept.then,
        crate::engine::Then::Proceed,
        "continue goes on to run the handler in the same reconcile"
    );
    assert_eq!(kept.record.state, "Wait");
    assert_eq!(kept.record.observed_generation, Some(2));
    assert_eq!(kept.record.transitions, 3);

    let moved = decider(&GOTO)
        .spec_changed::<Flow>(record, 2, &observed())
        .unwrap();
    assert_eq!(
        moved.then,
        crate::engine::Then::Commit {
            requeue: Some(Duration::ZERO)
        }
    );
    assert_eq!(moved.record.state, "Parked");
    assert_eq!(
        moved.record.history.last().unwrap().from.as_deref(),
        Some("Wait")
    );
}

#[tokio::test]
async fn a_spec_change_restart_is_a_single_write() {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    let script = Script::with([]);
    let engine = engine(&clock);
    engine
        .reconcile(&store, &observed(), &(), &script)
        .await
        .unwrap();
    let mut record = record_in(&store);
    assert_eq!(record.state, "Provision");
    record.observed_generation = Some(0);
    store.insert_raw(observed().key, record.to_raw().unwrap());
    // The Flow machine restarts on spec change (generation 0 → 1).
    let report = engine
        .reconcile(&store, &observed(), &(), &script)
        .await
        .unwrap();
    assert_eq!(report.commits, 1);
    assert_eq!(report.state, "Start");
}

#[test]
fn bad_data_of_a_sensitive_state_is_not_quoted_in_errors() {
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    enum Vault {
        Start,
        Holding { password: u32 },
        Failed,
    }
    static VAULT: [StateMeta; 3] = [
        StateMeta::new("Start")
            .initial()
            .with_handler()
            .next(&["Holding"]),
        StateMeta::new("Holding")
            .sensitive()
            .with_data()
            .final_state(),
        StateMeta::new("Failed").failed(),
    ];
    static VAULT_MACHINE: Machine = Machine::new("Vault", &VAULT);
    impl Fsm for Vault {
        type Resource = ();
        type Context = ();
        type Error = std::convert::Infallible;
        fn machine() -> &'static Machine {
            &VAULT_MACHINE
        }
        fn state_name(&self) -> &'static str {
            match self {
                Vault::Start => "Start",
                Vault::Holding { .. } => "Holding",
                Vault::Failed => "Failed",
            }
        }
        fn unit_state(name: &str) -> Option<Self> {
            match name {
                "Start" => Some(Vault::Start),
                "Failed" => Some(Vault::Failed),
                _ => None,
            }
        }
        fn handle<'a>(
            &'a self,
            _: &'a mut Step<'_, Self>,
        ) -> BoxFuture<'a, Result<Transition<Self>, Self::Error>> {
            Box::pin(async { Ok(Transition::stay()) })
        }
    }
    let raw = RawRecord::Json(serde_json::json!({
        "schemaVersion": 1,
        "state": "Holding",
        "data": {"password": "hunter2"},
        "enteredAt": "2026-01-01T00:00:00Z",
    }));
    let error = raw.decode::<Vault>().unwrap_err().to_string();
    assert!(!error.contains("hunter2"), "{error}");
    assert!(error.contains("details withheld"), "{error}");
}

/// An authority that allows `n` checks, then is lost: a Lease that
/// expires while the process is busy.
struct Countdown(std::sync::atomic::AtomicU32);

impl Countdown {
    fn allowing(n: u32) -> Arc<Countdown> {
        Arc::new(Countdown(std::sync::atomic::AtomicU32::new(n)))
    }
}

impl crate::Authority for Countdown {
    fn check(&self) -> Result<(), crate::AuthorityLost> {
        use std::sync::atomic::Ordering;
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .map(drop)
            .map_err(|_| crate::AuthorityLost::new("the lease expired"))
    }
}

/// Reconciles once, expecting the engine to refuse for lost authority.
async fn reconcile_without_authority(
    engine: &Engine<Flow>,
    store: &EphemeralStore,
    script: &Arc<Script>,
) -> crate::AuthorityLost {
    match engine.reconcile(store, &observed(), &(), script).await {
        Err(ReconcileError::AuthorityLost(lost)) => lost,
        other => panic!("expected AuthorityLost, got {other:?}"),
    }
}

#[tokio::test]
async fn without_authority_no_handler_runs_and_nothing_is_committed() {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    let script = Script::with([]);
    let engine = engine(&clock).with_authority(Countdown::allowing(0));
    let lost = reconcile_without_authority(&engine, &store, &script).await;
    assert_eq!(lost.reason(), "the lease expired");
    assert_eq!(script.log(), Vec::<String>::new(), "no handler ran");
    assert!(
        store.get_raw(&observed().key).is_none(),
        "nothing committed"
    );
}

#[tokio::test]
async fn authority_lost_while_checkpointing_stops_the_handler_and_records_no_failure() {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    let script = Script::with([
        Act::Go,
        Act::Checkpoint(Flow::Provision { id: "req-7".into() }),
    ]);
    // Reconcile 1: one check before Start's handler. Reconcile 2: before
    // Provision's handler, before its checkpoint; the check after the
    // checkpoint's write finds the authority gone.
    let engine = engine(&clock).with_authority(Countdown::allowing(3));
    engine
        .reconcile(&store, &observed(), &(), &script)
        .await
        .unwrap();
    let before = store.load(&observed().key).await.unwrap().version;
    reconcile_without_authority(&engine, &store, &script).await;
    let record = record_in(&store);
    // The checkpoint was written (the next leader finds the request id) …
    assert_eq!(record.state, "Provision");
    assert_eq!(record.data, Some(serde_json::json!({ "id": "req-7" })));
    assert_ne!(store.load(&observed().key).await.unwrap().version, before);
    // … but the handler's failure after it is not this process's to count.
    assert_eq!(record.attempt, 0);
    assert_eq!(record.last_error, None);
    assert_eq!(record.next_attempt_at, None);
}

#[tokio::test]
async fn a_transition_returned_after_authority_is_lost_is_still_committed() {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    let script = Script::with([Act::Go]);
    // The one check before the handler passes; the lease expires while it
    // runs. Its work is done: committing it (conditionally) spares the next
    // leader a re-run.
    let engine = engine(&clock).with_authority(Countdown::allowing(1));
    let report = engine
        .reconcile(&store, &observed(), &(), &script)
        .await
        .unwrap();
    assert_eq!(report.state, "Provision");
    assert_eq!(record_in(&store).state, "Provision");
}

#[tokio::test]
async fn without_authority_no_compensation_runs() {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    let script = Script::with([Act::Go, Act::Fail]);
    // Start, then Provision fails; its compensation would be next.
    let engine = engine(&clock).with_authority(Countdown::allowing(2));
    for _ in 0..2 {
        engine
            .reconcile(&store, &observed(), &(), &script)
            .await
            .unwrap();
    }
    reconcile_without_authority(&engine, &store, &script).await;
    assert!(
        !script.log().iter().any(|l| l.starts_with("compensate")),
        "{:?}",
        script.log()
    );
}

#[tokio::test]
async fn transient_failures_spend_no_attempt_and_back_off_to_the_cap() {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    // Provision allows 3 attempts, backoff 1 s × 2 up to 10 s: twelve
    // transient failures in a row would have exhausted it four times over.
    let mut acts = vec![Act::Go];
    acts.extend(std::iter::repeat_n(Act::Transient, 12));
    acts.push(Act::Retry);
    let script = Script::with(acts);
    let effects = settle(&engine(&clock), &clock, &store, &script, &observed()).await;
    let transient: Vec<(u32, Duration)> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::RetryWithoutAttempt {
                failures, delay, ..
            } => Some((*failures, *delay)),
            _ => None,
        })
        .collect();
    let secs = Duration::from_secs;
    assert_eq!(
        transient,
        (1..=12)
            .zip([1, 2, 4, 8, 10, 10, 10, 10, 10, 10, 10, 10].map(secs))
            .collect::<Vec<_>>()
    );
    // The one counted failure after them is the first attempt spent.
    assert!(effects.contains(&Effect::RetryScheduled {
        state: "Provision".into(),
        attempt: 1,
        delay: secs(1),
        error: "temporary trouble".into(),
    }));
    assert!(!effects.iter().any(|e| matches!(
        e,
        Effect::RetriesExhausted { .. } | Effect::CompensationStarted { .. }
    )));
    let record = record_in(&store);
    assert_eq!(record.state, "Ready");
    assert_eq!((record.attempt, record.failures_without_attempt), (0, 0));
}

#[tokio::test]
async fn a_state_timeout_ends_transient_failures() {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    // Wait (timeout 10 min, no on_timeout: fail and compensate) never gets
    // through to its API.
    let mut acts = vec![Act::Go, Act::Go];
    acts.extend(std::iter::repeat_n(Act::Transient, 200));
    let script = Script::with(acts);
    let effects = settle(&engine(&clock), &clock, &store, &script, &observed()).await;
    assert!(effects.contains(&Effect::TimedOut {
        state: "Wait".into()
    }));
    let record = record_in(&store);
    assert_eq!(record.state, "Failed");
    assert_eq!(record.attempt, 0, "no attempt was spent");
    assert!(
        script.log().contains(&"compensate:Wait:i-1".to_owned()),
        "{:?}",
        script.log()
    );
}

#[tokio::test]
async fn a_transient_failure_in_compensation_spends_an_attempt_so_unwinding_ends() {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    let script =
        Script::with([Act::Go, Act::Fail]).compensations(std::iter::repeat_n(Act::Transient, 50));
    let effects = settle(&engine(&clock), &clock, &store, &script, &observed()).await;
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, Effect::CompensationFailed { step, .. } if step == "Provision"))
    );
    assert_eq!(record_in(&store).state, "Failed");
}

#[test]
fn a_record_without_transient_failures_does_not_mention_them() {
    let record = StateRecord::new(&Flow::Start, t0()).unwrap();
    let json = serde_json::to_value(&record).unwrap();
    assert!(json.get("transientFailures").is_none(), "{json}");
    let mut failing = record;
    failing.failures_without_attempt = 3;
    let json = serde_json::to_value(&failing).unwrap();
    assert_eq!(json["transientFailures"], 3);
    let back: StateRecord = serde_json::from_value(json).unwrap();
    assert_eq!(back.failures_without_attempt, 3);
}

/// A machine whose initial state carries data (and checkpoints), which
/// compensates then restarts on a spec change, and whose cleanup reads the
/// state it is given.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
enum Saga {
    Begin { request_id: Option<String> },
    Build { id: String },
    Done { id: String },
    Failed,
}

static SAGA_STATES: [StateMeta; 4] = [
    StateMeta::new("Begin")
        .initial()
        .with_handler()
        .with_data()
        .with_compensation()
        .next(&["Build"]),
    StateMeta::new("Build")
        .with_handler()
        .with_data()
        .with_compensation()
        .next(&["Done"]),
    StateMeta::new("Done").with_data().final_state().ready(),
    StateMeta::new("Failed").failed(),
];
static SAGA: Machine = Machine::new("Saga", &SAGA_STATES)
    .on_spec_change(SpecChange::CompensateAndRestart)
    .snapshot_spec()
    .with_cleanup();

/// What the saga's functions did, and how many compensation calls fail
/// (retryably) before they succeed.
#[derive(Default)]
struct SagaWorld {
    log: Mutex<Vec<String>>,
    failing_compensations: Mutex<u32>,
}

impl SagaWorld {
    fn note(&self, line: String) {
        self.log.lock().unwrap().push(line);
    }
    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

impl Saga {
    fn id(&self) -> String {
        match self {
            Saga::Begin { request_id } => request_id.clone().unwrap_or_else(|| "-".into()),
            Saga::Build { id } | Saga::Done { id } => id.clone(),
            Saga::Failed => "-".into(),
        }
    }
}

impl Fsm for Saga {
    type Resource = ();
    type Context = Arc<SagaWorld>;
    type Error = FlowError;

    fn machine() -> &'static Machine {
        &SAGA
    }
    fn state_name(&self) -> &'static str {
        match self {
            Saga::Begin { .. } => "Begin",
            Saga::Build { .. } => "Build",
            Saga::Done { .. } => "Done",
            Saga::Failed => "Failed",
        }
    }
    fn unit_state(name: &str) -> Option<Self> {
        (name == "Failed").then_some(Saga::Failed)
    }
    fn initial_state() -> Option<Self> {
        Some(Saga::Begin { request_id: None })
    }
    fn handle<'a>(
        &'a self,
        cx: &'a mut Step<'_, Self>,
    ) -> BoxFuture<'a, Result<Transition<Self>, FlowError>> {
        Box::pin(async move {
            cx.context()
                .note(format!("handle:{}:{}", self.state_name(), self.id()));
            Ok(match self {
                // The create-pending pattern in the first state: commit the
                // request id, then make the (non-idempotent) call.
                Saga::Begin { request_id: None } => {
                    cx.checkpoint(Saga::Begin {
                        request_id: Some("req-1".into()),
                    })
                    .await?;
                    Transition::next(Saga::Build {
                        id: "b-req-1".into(),
                    })
                }
                Saga::Begin {
                    request_id: Some(id),
                } => Transition::next(Saga::Build {
                    id: format!("b-{id}"),
                }),
                Saga::Build { id } => Transition::next(Saga::Done { id: id.clone() }),
                Saga::Done { .. } | Saga::Failed => Transition::stay(),
            })
        })
    }
    fn compensate<'a>(
        &'a self,
        cx: &'a mut Step<'_, Self>,
    ) -> BoxFuture<'a, Result<(), FlowError>> {
        Box::pin(async move {
            let world = cx.context();
            world.note(format!("compensate:{}:{}", self.state_name(), self.id()));
            let mut failing = world.failing_compensations.lock().unwrap();
            if *failing > 0 {
                *failing -= 1;
                return Err(FlowError::Temporary(None));
            }
            Ok(())
        })
    }
    fn cleanup<'a>(&'a self, cx: &'a mut Step<'_, Self>) -> BoxFuture<'a, Result<(), FlowError>> {
        Box::pin(async move {
            cx.context()
                .note(format!("cleanup:{}:{}", self.state_name(), self.id()));
            Ok(())
        })
    }
}

fn saga_engine(clock: &ManualClock) -> Engine<Saga> {
    Engine::<Saga>::new()
        .unwrap()
        .with_clock(Arc::new(clock.clone()))
        .with_random(Arc::new(SeededRandom::new(9)))
}

fn saga_observed(generation: i64) -> Observed {
    Observed {
        commands: Vec::new(),
        generation: Some(generation),
        spec: Some(serde_json::json!({ "size": generation })),
        ..observed()
    }
}

fn saga_record(store: &EphemeralStore) -> StateRecord {
    store
        .get_raw(&observed().key)
        .unwrap()
        .decode::<Saga>()
        .unwrap()
}

/// Reconciles `saga` until it rests, advancing the clock by requeues.
async fn settle_saga(
    engine: &Engine<Saga>,
    clock: &ManualClock,
    store: &dyn StateStore,
    world: &Arc<SagaWorld>,
    obs: &Observed,
) -> Vec<Effect> {
    let mut effects = Vec::new();
    for _ in 0..50 {
        let report = engine.reconcile(store, obs, &(), world).await.unwrap();
        effects.extend(report.effects);
        match report.requeue {
            None => return effects,
            Some(d) => clock.advance(d),
        }
    }
    panic!("did not settle");
}

#[tokio::test]
async fn compensate_and_restart_undoes_the_entered_states_latest_first_then_starts_the_new_generation()
 {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    let world = Arc::new(SagaWorld::default());
    let engine = saga_engine(&clock);
    settle_saga(&engine, &clock, &store, &world, &saga_observed(1)).await;
    assert_eq!(saga_record(&store).state, "Done");
    // The compensation of Build fails once: it is retried under its policy.
    *world.failing_compensations.lock().unwrap() = 1;
    world.log.lock().unwrap().clear();

    // The spec change starts the chain; nothing is undone yet.
    let report = engine
        .reconcile(&store, &saga_observed(2), &(), &world)
        .await
        .unwrap();
    assert_eq!(
        report.effects,
        [
            Effect::SpecChanged { generation: 2 },
            Effect::CompensationStarted {
                reason: "spec changed (generation 2)".into()
            }
        ]
    );
    let record = saga_record(&store);
    assert!(record.is_unwinding());
    assert!(record.compensation.as_ref().unwrap().restart);
    assert_eq!(record.trail.len(), 2);

    // One step per reconcile, progress committed after each.
    let mut trail_lengths = Vec::new();
    let mut effects = Vec::new();
    for _ in 0..10 {
        let report = engine
            .reconcile(&store, &saga_observed(2), &(), &world)
            .await
            .unwrap();
        effects.extend(report.effects);
        let record = saga_record(&store);
        trail_lengths.push(record.trail.len());
        if !record.is_unwinding() {
            break;
        }
        clock.advance(report.requeue.unwrap());
    }
    // The last entry is the initial state's, entered again.
    assert_eq!(trail_lengths, [2, 1, 1]);
    assert_eq!(
        world.log(),
        [
            "compensate:Build:b-req-1",
            "compensate:Build:b-req-1",
            // The initial state's data is its checkpointed request id.
            "compensate:Begin:req-1"
        ]
    );
    assert!(effects.contains(&Effect::CompensationFinished { failures: 0 }));
    let record = saga_record(&store);
    assert_eq!(record.state, "Begin");
    // Entered again with its starting data, for the new generation.
    assert_eq!(record.data, Some(serde_json::json!({ "request_id": null })));
    assert_eq!(record.observed_generation, Some(2));
    assert_eq!(record.spec_snapshot, Some(serde_json::json!({ "size": 2 })));
    assert_eq!(record.last_error, None);
    assert_eq!(
        record.history.last().unwrap().reason.as_deref(),
        Some("spec changed (generation 2)")
    );
    // The new workflow runs from the start, and its trail is its own.
    settle_saga(&engine, &clock, &store, &world, &saga_observed(2)).await;
    assert_eq!(saga_record(&store).state, "Done");
    assert_eq!(saga_record(&store).trail.len(), 2);
}

#[tokio::test]
async fn a_spec_change_during_compensate_and_restart_waits_and_the_restart_takes_the_newest_spec() {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    let world = Arc::new(SagaWorld::default());
    let engine = saga_engine(&clock);
    settle_saga(&engine, &clock, &store, &world, &saga_observed(1)).await;
    engine
        .reconcile(&store, &saga_observed(2), &(), &world)
        .await
        .unwrap();
    world.log.lock().unwrap().clear();
    // Generation 3 arrives mid-chain: the chain goes on, no new change.
    let effects = settle_saga(&engine, &clock, &store, &world, &saga_observed(3)).await;
    assert!(!effects.contains(&Effect::SpecChanged { generation: 3 }));
    let compensations: Vec<_> = world
        .log()
        .into_iter()
        .filter(|l| l.starts_with("compensate"))
        .collect();
    assert_eq!(
        compensations,
        ["compensate:Build:b-req-1", "compensate:Begin:req-1"]
    );
    let record = saga_record(&store);
    assert_eq!(record.observed_generation, Some(3));
    assert_eq!(record.spec_snapshot, Some(serde_json::json!({ "size": 3 })));
    assert_eq!(record.state, "Done");
    assert_eq!(entered(&effects), ["Begin", "Build", "Done"]);
}

#[tokio::test]
async fn compensate_and_restart_with_nothing_entered_to_undo_restarts_at_once() {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    let world = Arc::new(SagaWorld::default());
    let engine = saga_engine(&clock);
    // Failing to rest in Failed compensated and emptied the trail.
    let mut record = StateRecord::new(&Saga::Failed, t0()).unwrap();
    record.observed_generation = Some(1);
    store.insert_raw(observed().key, record.to_raw().unwrap());
    let report = engine
        .reconcile(&store, &saga_observed(2), &(), &world)
        .await
        .unwrap();
    assert_eq!(entered(&report.effects), ["Begin"]);
    assert!(!world.log().iter().any(|l| l.starts_with("compensate")));
}

/// A store whose saves fail (the process died) after `allowed` of them.
struct CrashingStore {
    inner: EphemeralStore,
    allowed: Mutex<usize>,
}

impl StateStore for CrashingStore {
    fn load<'a>(&'a self, key: &'a ObjectKey) -> BoxFuture<'a, Result<Loaded, StoreError>> {
        self.inner.load(key)
    }
    fn save<'a>(
        &'a self,
        key: &'a ObjectKey,
        commit: Commit<'a>,
    ) -> BoxFuture<'a, Result<Version, StoreError>> {
        let mut allowed = self.allowed.lock().unwrap();
        if *allowed == 0 {
            return Box::pin(async { Err(StoreError::Backend("crashed".into())) });
        }
        *allowed -= 1;
        self.inner.save(key, commit)
    }
    fn delete<'a>(
        &'a self,
        key: &'a ObjectKey,
        expected: Option<&'a Version>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.inner.delete(key, expected)
    }
}

#[tokio::test]
async fn the_initial_states_checkpoint_survives_a_crash() {
    let clock = ManualClock::at(t0());
    let world = Arc::new(SagaWorld::default());
    // The checkpoint commits; the process dies before the transition does.
    let store = CrashingStore {
        inner: EphemeralStore::new(),
        allowed: Mutex::new(1),
    };
    let err = saga_engine(&clock)
        .reconcile(&store, &saga_observed(1), &(), &world)
        .await
        .unwrap_err();
    assert!(matches!(err, ReconcileError::Store(_)), "{err:?}");
    let record = saga_record(&store.inner);
    assert_eq!(record.state, "Begin");
    assert_eq!(
        record.data,
        Some(serde_json::json!({ "request_id": "req-1" }))
    );

    // Another process reconciles: the handler sees the request id.
    *store.allowed.lock().unwrap() = usize::MAX;
    let report = saga_engine(&clock)
        .reconcile(&store, &saga_observed(1), &(), &world)
        .await
        .unwrap();
    assert_eq!(world.log(), ["handle:Begin:-", "handle:Begin:req-1"]);
    assert_eq!(report.state, "Build");
    assert_eq!(
        saga_record(&store.inner).data,
        Some(serde_json::json!({ "id": "b-req-1" }))
    );
}

#[tokio::test]
async fn cleanup_sees_the_current_state_and_its_data() {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    let world = Arc::new(SagaWorld::default());
    let engine = saga_engine(&clock);
    engine
        .reconcile(&store, &saga_observed(1), &(), &world)
        .await
        .unwrap();
    assert_eq!(saga_record(&store).state, "Build");
    let deleting = Observed {
        commands: Vec::new(),
        deleting: true,
        ..saga_observed(1)
    };
    let report = engine
        .reconcile(&store, &deleting, &(), &world)
        .await
        .unwrap();
    assert!(report.released);
    assert_eq!(world.log().last().unwrap(), "cleanup:Build:b-req-1");
    assert!(store.is_empty());
}

#[tokio::test]
async fn without_a_record_cleanup_runs_with_the_initial_state() {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    let world = Arc::new(SagaWorld::default());
    let deleting = Observed {
        commands: Vec::new(),
        deleting: true,
        ..saga_observed(1)
    };
    let report = saga_engine(&clock)
        .reconcile(&store, &deleting, &(), &world)
        .await
        .unwrap();
    assert!(report.released);
    // No handler: the cleanup ran with the initial state and its data.
    assert_eq!(world.log(), ["cleanup:Begin:-"]);
    assert!(store.is_empty());
}

#[test]
fn a_hand_written_machine_must_build_its_data_carrying_initial_state() {
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    enum Lazy {
        Begin { n: u32 },
        Failed,
    }
    static LAZY_STATES: [StateMeta; 2] = [
        StateMeta::new("Begin").initial().with_handler().with_data(),
        StateMeta::new("Failed").failed(),
    ];
    static LAZY: Machine = Machine::new("Lazy", &LAZY_STATES);
    impl Fsm for Lazy {
        type Resource = ();
        type Context = ();
        type Error = std::convert::Infallible;
        fn machine() -> &'static Machine {
            &LAZY
        }
        fn state_name(&self) -> &'static str {
            match self {
                Lazy::Begin { .. } => "Begin",
                Lazy::Failed => "Failed",
            }
        }
        fn unit_state(name: &str) -> Option<Self> {
            (name == "Failed").then_some(Lazy::Failed)
        }
        fn handle<'a>(
            &'a self,
            _: &'a mut Step<'_, Self>,
        ) -> BoxFuture<'a, Result<Transition<Self>, Self::Error>> {
            Box::pin(async { Ok(Transition::stay()) })
        }
    }
    assert_eq!(LAZY.validate(), Ok(()));
    let Err(error) = Engine::<Lazy>::new() else {
        panic!("an engine that cannot start a workflow was built");
    };
    assert_eq!(error.0, [crate::MachineError::InitialNotBuilt("Begin")]);
    assert!(
        error.to_string().contains("implement initial_state"),
        "{error}"
    );
}

/// The Flow machine settled in `Ready`, then deleted: reconciles until the
/// engine releases the object (or gives up after 20 reconciles).
async fn delete_until_released(
    engine: &Engine<Flow>,
    clock: &ManualClock,
    store: &EphemeralStore,
    script: &Arc<Script>,
) -> (bool, Vec<Effect>) {
    let deleting = Observed {
        commands: Vec::new(),
        deleting: true,
        ..observed()
    };
    let mut effects = Vec::new();
    for _ in 0..20 {
        let report = engine
            .reconcile(store, &deleting, &(), script)
            .await
            .unwrap();
        effects.extend(report.effects);
        if report.released {
            return (true, effects);
        }
        clock.advance(report.requeue.unwrap_or_default());
    }
    (false, effects)
}

// Rule 2 (deletion): a cleanup that keeps failing is retried under the
// machine's default policy, then reported, and the object released anyway.
#[tokio::test]
async fn a_cleanup_that_keeps_failing_still_releases_the_object() {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    let script = Script::with([]).cleanups(std::iter::repeat_n(Act::Retry, 50));
    let engine = engine(&clock);
    settle(&engine, &clock, &store, &script, &observed()).await;
    assert_eq!(record_in(&store).state, "Ready");

    let (released, effects) = delete_until_released(&engine, &clock, &store, &script).await;
    assert!(released, "a broken cleanup must not block deletion");
    let cleanups = script
        .log()
        .iter()
        .filter(|l| l.starts_with("cleanup"))
        .count();
    assert_eq!(
        cleanups,
        RetryPolicy::DEFAULT.max_attempts() as usize,
        "retried under the machine's default policy, the first call counting"
    );
    assert!(effects.contains(&Effect::CompensationFailed {
        step: "cleanup".into(),
        error: "temporary trouble".into()
    }));
    assert_eq!(effects.last(), Some(&Effect::Released));
    assert!(store.is_empty());
}

// Rule 2 (deletion): a permanent error ends the cleanup at once.
#[tokio::test]
async fn a_cleanup_that_fails_for_good_releases_the_object_at_once() {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    let script = Script::with([]).cleanups([Act::Permanent]);
    let engine = engine(&clock);
    settle(&engine, &clock, &store, &script, &observed()).await;

    let (released, effects) = delete_until_released(&engine, &clock, &store, &script).await;
    assert!(released);
    assert_eq!(
        script
            .log()
            .iter()
            .filter(|l| l.starts_with("cleanup"))
            .count(),
        1
    );
    assert!(effects.contains(&Effect::CompensationFailed {
        step: "cleanup".into(),
        error: "broken for good".into()
    }));
    assert!(store.is_empty());
}

// Rule 3 (spec change): while the compensation chain of a failure runs,
// a spec change waits; it applies once the chain is over.
#[tokio::test]
async fn a_spec_change_waits_while_compensation_runs() {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    // Start → Provision → Wait, fail; the first compensation is retried.
    let script = Script::with([Act::Go, Act::Go, Act::Fail]).compensations([Act::Retry]);
    let engine = engine(&clock);
    for _ in 0..3 {
        engine
            .reconcile(&store, &observed(), &(), &script)
            .await
            .unwrap();
    }
    let record = record_in(&store);
    assert!(record.is_unwinding(), "the chain has started");
    assert_eq!(record.trail.len(), 2);

    // Generation 2 arrives mid-chain.
    let changed = Observed {
        commands: Vec::new(),
        generation: Some(2),
        ..observed()
    };
    let effects = settle(&engine, &clock, &store, &script, &changed).await;
    assert!(
        !effects
            .iter()
            .any(|e| matches!(e, Effect::SpecChanged { .. })),
        "no spec change while compensating: {effects:?}"
    );
    let compensations: Vec<_> = script
        .log()
        .into_iter()
        .filter(|l| l.starts_with("compensate"))
        .collect();
    assert_eq!(
        compensations,
        [
            "compensate:Wait:i-1",
            "compensate:Wait:i-1",
            "compensate:Provision:i-1"
        ],
        "the whole chain ran, the retried step included"
    );
    let record = record_in(&store);
    assert_eq!(record.state, "Failed");
    assert_eq!(record.observed_generation, Some(1), "not yet applied");

    // The chain is over: the change applies (Flow restarts on spec change).
    let report = engine
        .reconcile(&store, &changed, &(), &script)
        .await
        .unwrap();
    assert_eq!(report.effects[0], Effect::SpecChanged { generation: 2 });
    assert_eq!(entered(&report.effects)[0], "Start");
    assert_eq!(record_in(&store).observed_generation, Some(2));
}

// Rule 4 (state timeout): `on_timeout` into a state that is not `failed`
// is a plain move, with no compensation; into a `failed` state it fails
// the workflow, with compensation first.
#[test]
fn on_timeout_into_a_non_failed_state_moves_there_without_compensation() {
    static TIMED: [StateMeta; 4] = [
        StateMeta::new("Start")
            .initial()
            .with_handler()
            .next(&["Wait"]),
        StateMeta::new("Wait")
            .with_handler()
            .with_data()
            .with_compensation()
            .timeout(Duration::from_secs(600))
            .on_timeout("Parked")
            .next(&["Parked"]),
        StateMeta::new("Parked").final_state(),
        StateMeta::new("Failed").failed(),
    ];
    static TIMED_FAILING: [StateMeta; 4] = [
        StateMeta::new("Start")
            .initial()
            .with_handler()
            .next(&["Wait"]),
        StateMeta::new("Wait")
            .with_handler()
            .with_data()
            .with_compensation()
            .timeout(Duration::from_secs(600))
            .on_timeout("Failed")
            .next(&["Parked"]),
        StateMeta::new("Parked").final_state(),
        StateMeta::new("Failed").failed(),
    ];
    static TO_PARKED: Machine = Machine::new("Timed", &TIMED);
    static TO_FAILED: Machine = Machine::new("Timed", &TIMED_FAILING);
    let random = SeededRandom::new(1);
    let now = crate::clock::add(t0(), Duration::from_secs(600));
    let decider = |machine: &'static Machine| crate::engine::Decider {
        machine,
        now,
        random: &random,
        history_limit: 20,
        poll_interval: Duration::from_secs(60),
    };
    let mut waiting = StateRecord::new(&Flow::Wait { id: "i".into() }, t0()).unwrap();
    waiting.trail.push(crate::TrailEntry {
        state: "Wait".into(),
        data: waiting.data.clone(),
        entered_at: t0(),
        closed: false,
    });

    let moved = decider(&TO_PARKED).timed_out(waiting.clone()).unwrap();
    assert_eq!(moved.record.state, "Parked");
    assert_eq!(moved.record.compensation, None, "no compensation");
    assert_eq!(moved.record.trail.len(), 1, "the trail is kept");
    assert_eq!(
        moved.record.last_error.as_deref(),
        Some("timed out in Wait after 10m")
    );
    assert_eq!(
        moved.effects,
        [
            Effect::TimedOut {
                state: "Wait".into()
            },
            Effect::Entered {
                from: Some("Wait".into()),
                to: "Parked".into(),
                reason: Some("timed out in Wait after 10m".into()),
            },
        ]
    );
    assert_eq!(
        moved.then,
        crate::engine::Then::Commit {
            requeue: Some(Duration::ZERO)
        }
    );

    let failed = decider(&TO_FAILED).timed_out(waiting).unwrap();
    assert_eq!(failed.record.state, "Wait", "compensation runs first");
    let unwind = failed.record.compensation.unwrap();
    assert_eq!(unwind.target.as_deref(), Some("Failed"));
    assert!(failed.effects.contains(&Effect::CompensationStarted {
        reason: "timed out in Wait after 10m".into()
    }));
}

// Rule 7 (commit): a conflict commits nothing and reports
// `ReconcileError::Conflict`; the next reconcile starts from the store.
#[tokio::test]
async fn a_conflict_commits_nothing_and_the_next_reconcile_starts_again() {
    let clock = ManualClock::at(t0());
    let store = FaultyStore::default();
    let script = Script::with([]);
    let engine = engine(&clock);
    engine
        .reconcile(&store, &observed(), &(), &script)
        .await
        .unwrap();
    let before = store.inner.get_raw(&observed().key).unwrap();
    let committed = store.committed.lock().unwrap().len();

    *store.next_fault.lock().unwrap() = Some(Fault::Conflict);
    let error = engine
        .reconcile(&store, &observed(), &(), &script)
        .await
        .unwrap_err();
    assert!(matches!(error, ReconcileError::Conflict), "{error:?}");
    assert_eq!(store.committed.lock().unwrap().len(), committed);
    assert_eq!(
        store
            .inner
            .get_raw(&observed().key)
            .unwrap()
            .decode::<Flow>()
            .unwrap(),
        before.decode::<Flow>().unwrap(),
        "the record is the other writer's"
    );

    // The handler runs again, from the stored record.
    let report = engine
        .reconcile(&store, &observed(), &(), &script)
        .await
        .unwrap();
    assert_eq!(entered(&report.effects), ["Wait"]);
    assert_eq!(
        script.log(),
        ["handle:Start:0", "handle:Provision:0", "handle:Provision:0"]
    );
}

// Rule 1 (load): the initial entry is committed even when the first
// handler leaves nothing else to commit, so that its entry time, which
// `timeout` counts from, is durable.
#[tokio::test]
async fn the_initial_entry_is_committed_alone_when_the_first_handler_stays() {
    let clock = ManualClock::at(t0());
    let store = EphemeralStore::new();
    let script = Script::with([Act::Stay]);
    let report = engine(&clock)
        .reconcile(&store, &observed(), &(), &script)
        .await
        .unwrap();
    assert_eq!(report.commits, 1);
    assert_eq!(report.requeue, Some(Duration::from_secs(60)));
    assert_eq!(entered(&report.effects), ["Start"]);
    let record = record_in(&store);
    assert_eq!(record.state, "Start");
    assert_eq!(record.entered_at, t0());
    assert_eq!(record.transitions, 1);
    assert_eq!(record.observed_generation, Some(1));
}
