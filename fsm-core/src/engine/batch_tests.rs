//! Batched commits (docs/semantics.md, "Batched commits"), rule by rule, on
//! a hand-written machine shaped like the benchmark's workload: cheap
//! states that chain, one that waits, and one that must be committed
//! before its handler runs.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proptest::prelude::*;
use serde::{Deserialize, Serialize};

use crate::prelude::*;
use crate::{
    Commit, Effect, Engine, EngineOptions, EphemeralStore, Loaded, ObjectKey, Observed,
    ReconcileError, SeededRandom, StateRecord, StateStore, StoreError, Version,
};

/// `Config` picks an id (a new one each time it runs, like a name chosen
/// at random); `Deploy` and `Waiting` carry it; `Charge` makes a call that
/// must not be made twice with different ids, so it is `commit_on_entry`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
enum Chain {
    Config,
    Deploy { id: u32 },
    Waiting { id: u32 },
    Charge { id: u32 },
    Done,
    Failed,
}

static STATES: [StateMeta; 6] = [
    StateMeta::new("Config")
        .initial()
        .with_handler()
        .next(&["Deploy"]),
    StateMeta::new("Deploy")
        .with_handler()
        .with_data()
        .next(&["Waiting"]),
    StateMeta::new("Waiting")
        .with_handler()
        .with_data()
        .next(&["Charge"]),
    StateMeta::new("Charge")
        .with_handler()
        .with_data()
        .commit_on_entry()
        .next(&["Done"]),
    StateMeta::new("Done").final_state().ready(),
    StateMeta::new("Failed").failed(),
];
static MACHINE: Machine = Machine::new("Chain", &STATES).batch_commits().retry(
    match RetryPolicy::new(3, Duration::from_secs(1), 2.0, Duration::from_secs(10)) {
        Ok(p) => p,
        Err(_) => panic!("invalid policy"),
    },
);

/// What `Waiting`'s handler does on one call.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Act {
    /// Moves on to `Charge`.
    Go,
    /// The Deployment is not ready yet.
    Stay,
    /// A retryable error.
    Retry,
    /// Checkpoints its data (the id plus 1000), then stays.
    Checkpoint,
    /// A permanent failure.
    Fail,
}

#[derive(Debug, thiserror::Error)]
enum ChainError {
    #[error("temporary trouble")]
    Temporary,
    #[error("broken for good")]
    Broken,
    #[error(transparent)]
    Checkpoint(#[from] crate::CheckpointError),
}

impl Classify for ChainError {
    fn class(&self) -> ErrorClass {
        match self {
            ChainError::Temporary | ChainError::Checkpoint(_) => ErrorClass::RETRYABLE,
            ChainError::Broken => ErrorClass::Permanent,
        }
    }
}

/// The handlers' script and what they saw.
#[derive(Default)]
struct Script {
    waiting: Mutex<VecDeque<Act>>,
    /// Every handler call, as `State:id`.
    log: Mutex<Vec<String>>,
    /// The last id `Config` handed out.
    ids: AtomicU32,
    /// The record committed last, as the store saw it.
    committed: Mutex<Option<StateRecord>>,
    /// `Charge` handler calls that found their entry uncommitted.
    uncommitted_charges: AtomicU32,
}

impl Script {
    fn with(acts: impl IntoIterator<Item = Act>) -> Arc<Self> {
        let script = Script::default();
        script.waiting.lock().unwrap().extend(acts);
        Arc::new(script)
    }
    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
    fn note(&self, state: &Chain) {
        let id = match state {
            Chain::Deploy { id } | Chain::Waiting { id } | Chain::Charge { id } => *id,
            _ => 0,
        };
        self.log
            .lock()
            .unwrap()
            .push(format!("{}:{id}", state.state_name()));
    }
}

impl Fsm for Chain {
    type Resource = ();
    type Context = Arc<Script>;
    type Error = ChainError;

    fn machine() -> &'static Machine {
        &MACHINE
    }
    fn state_name(&self) -> &'static str {
        match self {
            Chain::Config => "Config",
            Chain::Deploy { .. } => "Deploy",
            Chain::Waiting { .. } => "Waiting",
            Chain::Charge { .. } => "Charge",
            Chain::Done => "Done",
            Chain::Failed => "Failed",
        }
    }
    fn unit_state(name: &str) -> Option<Self> {
        match name {
            "Config" => Some(Chain::Config),
            "Done" => Some(Chain::Done),
            "Failed" => Some(Chain::Failed),
            _ => None,
        }
    }
    fn handle<'a>(
        &'a self,
        cx: &'a mut Step<'_, Self>,
    ) -> BoxFuture<'a, Result<Transition<Self>, ChainError>> {
        Box::pin(async move {
            let script = cx.context().clone();
            script.note(self);
            Ok(match self {
                Chain::Config => {
                    let id = script.ids.fetch_add(1, Ordering::SeqCst) + 1;
                    Transition::next(Chain::Deploy { id })
                }
                Chain::Deploy { id } => Transition::next(Chain::Waiting { id: *id }),
                Chain::Waiting { id } => {
                    let act = script.waiting.lock().unwrap().pop_front();
                    match act.unwrap_or(Act::Go) {
                        Act::Go => Transition::next(Chain::Charge { id: *id }),
                        Act::Stay => Transition::stay(),
                        Act::Retry => return Err(ChainError::Temporary),
                        Act::Checkpoint => {
                            cx.checkpoint(Chain::Waiting { id: id + 1000 }).await?;
                            Transition::stay()
                        }
                        Act::Fail => return Err(ChainError::Broken),
                    }
                }
                Chain::Charge { id } => {
                    let committed = script.committed.lock().unwrap().clone();
                    let durable = committed.is_some_and(|r| {
                        r.current::<Chain>().ok() == Some(Chain::Charge { id: *id })
                    });
                    if !durable {
                        script.uncommitted_charges.fetch_add(1, Ordering::SeqCst);
                    }
                    Transition::next(Chain::Done)
                }
                Chain::Done | Chain::Failed => Transition::stay(),
            })
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    /// The process dies before the write: nothing is stored.
    Crash,
    /// Another writer got in first.
    Conflict,
}

/// A store that suffers the faults it is given, one per write, keeps every
/// committed record, and tells the script what was committed last.
struct BatchStore {
    inner: EphemeralStore,
    script: Arc<Script>,
    faults: Mutex<VecDeque<Option<Fault>>>,
    committed: Mutex<Vec<StateRecord>>,
}

impl BatchStore {
    fn new(script: &Arc<Script>) -> Self {
        BatchStore {
            inner: EphemeralStore::new(),
            script: script.clone(),
            faults: Mutex::new(VecDeque::new()),
            committed: Mutex::new(Vec::new()),
        }
    }
    /// The next writes suffer `faults`, in order (`None`: no fault).
    fn then(&self, faults: impl IntoIterator<Item = Option<Fault>>) {
        self.faults.lock().unwrap().extend(faults);
    }
    fn committed(&self) -> Vec<StateRecord> {
        self.committed.lock().unwrap().clone()
    }
    fn record(&self) -> Option<StateRecord> {
        self.inner
            .get_raw(&observed().key)
            .map(|raw| raw.decode::<Chain>().unwrap())
    }
}

impl StateStore for BatchStore {
    fn load<'a>(&'a self, key: &'a ObjectKey) -> BoxFuture<'a, Result<Loaded, StoreError>> {
        self.inner.load(key)
    }
    fn save<'a>(
        &'a self,
        key: &'a ObjectKey,
        commit: Commit<'a>,
    ) -> BoxFuture<'a, Result<Version, StoreError>> {
        Box::pin(async move {
            match self.faults.lock().unwrap().pop_front().flatten() {
                Some(Fault::Crash) => {
                    return Err(StoreError::Backend("crashed before the write".into()));
                }
                Some(Fault::Conflict) => {
                    if let Some(raw) = self.inner.get_raw(key) {
                        self.inner.insert_raw(key.clone(), raw);
                    } else {
                        return Err(StoreError::Conflict);
                    }
                }
                None => {}
            }
            let version = self.inner.save(key, commit).await?;
            self.committed.lock().unwrap().push(commit.record.clone());
            *self.script.committed.lock().unwrap() = Some(commit.record.clone());
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

fn t0() -> Timestamp {
    "2026-06-01T00:00:00Z".parse().unwrap()
}

fn observed() -> Observed {
    Observed {
        commands: Vec::new(),
        key: ObjectKey::namespaced("ns", "chain"),
        generation: Some(1),
        deleting: false,
        spec: None,
    }
}

fn engine(clock: &ManualClock, max_transitions: u32) -> Engine<Chain> {
    Engine::<Chain>::new()
        .unwrap()
        .with_clock(Arc::new(clock.clone()))
        .with_random(Arc::new(SeededRandom::new(3)))
        .with_options(EngineOptions {
            max_transitions,
            ..EngineOptions::default()
        })
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

/// The states a record's history entered, oldest first.
fn path(record: &StateRecord) -> Vec<String> {
    record.history.iter().map(|h| h.to.clone()).collect()
}

#[tokio::test]
async fn a_batched_chain_commits_once_when_a_handler_stays_and_once_more_to_rest() {
    let clock = ManualClock::at(t0());
    let script = Script::with([Act::Stay]);
    let store = BatchStore::new(&script);
    let engine = engine(&clock, 10);

    // The initial entry, Config and Deploy's transitions and the entry of
    // Waiting: one write, when Waiting's handler stays.
    let first = engine
        .reconcile(&store, &observed(), &(), &script)
        .await
        .unwrap();
    assert_eq!(entered(&first.effects), ["Config", "Deploy", "Waiting"]);
    assert_eq!(first.commits, 1);
    assert_eq!(script.log(), ["Config:0", "Deploy:1", "Waiting:1"]);
    let record = store.record().unwrap();
    assert_eq!(path(&record), ["Config", "Deploy", "Waiting"]);
    assert_eq!(record.transitions, 3);

    // Waiting moves on: Charge commits its entry before its handler runs,
    // then Done rides with the commit that ends the chain at rest.
    let second = engine
        .reconcile(&store, &observed(), &(), &script)
        .await
        .unwrap();
    assert_eq!(entered(&second.effects), ["Charge", "Done"]);
    assert_eq!(second.commits, 2);
    assert_eq!(second.requeue, None);
    assert_eq!(script.uncommitted_charges.load(Ordering::SeqCst), 0);
    let committed: Vec<String> = store.committed().iter().map(|r| r.state.clone()).collect();
    assert_eq!(committed, ["Waiting", "Charge", "Done"]);
    assert_eq!(
        path(&store.record().unwrap()),
        ["Config", "Deploy", "Waiting", "Charge", "Done"]
    );
}

#[tokio::test]
async fn the_transition_budget_ends_the_batch_with_its_commit() {
    let clock = ManualClock::at(t0());
    let script = Script::with([]);
    let store = BatchStore::new(&script);
    let report = engine(&clock, 2)
        .reconcile(&store, &observed(), &(), &script)
        .await
        .unwrap();
    // Two transitions (Config -> Deploy -> Waiting), then the budget is
    // spent: one commit, and the next reconcile comes at once.
    assert_eq!(report.commits, 1);
    assert_eq!(report.requeue, Some(Duration::ZERO));
    assert_eq!(script.log(), ["Config:0", "Deploy:1"]);
    assert_eq!(store.record().unwrap().state, "Waiting");
}

#[tokio::test]
async fn a_crash_mid_batch_reruns_the_uncommitted_steps_and_commits_nothing_twice() {
    let clock = ManualClock::at(t0());
    let script = Script::with([Act::Stay, Act::Stay]);
    let store = BatchStore::new(&script);
    let engine = engine(&clock, 10);
    store.then([Some(Fault::Crash)]);

    let crashed = engine.reconcile(&store, &observed(), &(), &script).await;
    assert!(
        matches!(crashed, Err(ReconcileError::Store(_))),
        "{crashed:?}"
    );
    assert!(store.record().is_none(), "nothing of the batch was stored");

    let report = engine
        .reconcile(&store, &observed(), &(), &script)
        .await
        .unwrap();
    assert_eq!(report.commits, 1);
    // Every step since the last commit ran again, Config choosing anew.
    assert_eq!(
        script.log(),
        [
            "Config:0",
            "Deploy:1",
            "Waiting:1",
            "Config:0",
            "Deploy:2",
            "Waiting:2"
        ]
    );
    let committed = store.committed();
    assert_eq!(committed.len(), 1);
    let seqs: Vec<u64> = committed[0].history.iter().map(|h| h.seq).collect();
    assert_eq!(seqs, [1, 2, 3], "each transition committed once");
    assert_eq!(
        committed[0].current::<Chain>().unwrap(),
        Chain::Waiting { id: 2 }
    );
}

#[tokio::test]
async fn a_checkpoint_commits_the_batch_so_far() {
    let clock = ManualClock::at(t0());
    let script = Script::with([Act::Checkpoint, Act::Stay]);
    let store = BatchStore::new(&script);
    let engine = engine(&clock, 10);
    // The checkpoint's write succeeds; the commit that ends the chain is
    // lost in a crash.
    store.then([None, Some(Fault::Crash)]);

    let crashed = engine.reconcile(&store, &observed(), &(), &script).await;
    assert!(
        matches!(crashed, Err(ReconcileError::Store(_))),
        "{crashed:?}"
    );
    let record = store.record().unwrap();
    assert_eq!(path(&record), ["Config", "Deploy", "Waiting"]);
    assert_eq!(
        record.current::<Chain>().unwrap(),
        Chain::Waiting { id: 1001 }
    );

    // The steps before the checkpoint were committed with it: only
    // Waiting runs again.
    engine
        .reconcile(&store, &observed(), &(), &script)
        .await
        .unwrap();
    assert_eq!(
        script.log(),
        ["Config:0", "Deploy:1", "Waiting:1", "Waiting:1001"]
    );
}

#[tokio::test]
async fn a_commit_on_entry_state_is_committed_before_its_handler_runs() {
    let clock = ManualClock::at(t0());
    let script = Script::with([Act::Stay]);
    let store = BatchStore::new(&script);
    let engine = engine(&clock, 10);
    engine
        .reconcile(&store, &observed(), &(), &script)
        .await
        .unwrap();
    // Charge's entry is written; the write after its handler is lost.
    store.then([None, Some(Fault::Crash)]);
    let crashed = engine.reconcile(&store, &observed(), &(), &script).await;
    assert!(
        matches!(crashed, Err(ReconcileError::Store(_))),
        "{crashed:?}"
    );
    assert_eq!(
        store.record().unwrap().current::<Chain>().unwrap(),
        Chain::Charge { id: 1 }
    );

    // After the crash Charge runs again with the id it was entered with;
    // Waiting, its predecessor, does not run again.
    let report = engine
        .reconcile(&store, &observed(), &(), &script)
        .await
        .unwrap();
    assert_eq!(entered(&report.effects), ["Done"]);
    assert_eq!(
        script.log(),
        [
            "Config:0",
            "Deploy:1",
            "Waiting:1",
            "Waiting:1",
            "Charge:1",
            "Charge:1"
        ]
    );
    assert_eq!(script.uncommitted_charges.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn an_error_mid_chain_commits_the_progress_and_the_failure_once() {
    let clock = ManualClock::at(t0());
    let script = Script::with([Act::Retry]);
    let store = BatchStore::new(&script);
    let report = engine(&clock, 10)
        .reconcile(&store, &observed(), &(), &script)
        .await
        .unwrap();
    assert_eq!(report.commits, 1);
    assert_eq!(entered(&report.effects), ["Config", "Deploy", "Waiting"]);
    assert!(report.effects.iter().any(
        |e| matches!(e, Effect::RetryScheduled { state, attempt: 1, .. } if state == "Waiting")
    ));
    assert_eq!(report.requeue, Some(Duration::from_secs(1)));
    let record = store.record().unwrap();
    assert_eq!(path(&record), ["Config", "Deploy", "Waiting"]);
    assert_eq!(record.attempt, 1);
    assert_eq!(record.last_error.as_deref(), Some("temporary trouble"));
}

#[tokio::test]
async fn a_permanent_failure_mid_chain_commits_the_progress_with_the_failure() {
    let clock = ManualClock::at(t0());
    let script = Script::with([Act::Fail]);
    let store = BatchStore::new(&script);
    let report = engine(&clock, 10)
        .reconcile(&store, &observed(), &(), &script)
        .await
        .unwrap();
    assert_eq!(report.commits, 1);
    assert_eq!(
        entered(&report.effects),
        ["Config", "Deploy", "Waiting", "Failed"]
    );
    let record = store.record().unwrap();
    assert_eq!(path(&record), ["Config", "Deploy", "Waiting", "Failed"]);
}

/// An authority that allows `n` checks, then is lost.
struct Countdown(AtomicU32);

impl crate::Authority for Countdown {
    fn check(&self) -> Result<(), crate::AuthorityLost> {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .map(drop)
            .map_err(|_| crate::AuthorityLost::new("the lease expired"))
    }
}

#[tokio::test]
async fn lost_authority_mid_chain_commits_nothing_and_the_whole_batch_runs_again() {
    let clock = ManualClock::at(t0());
    let script = Script::with([Act::Stay]);
    let store = BatchStore::new(&script);
    // Config and Deploy may run; before Waiting the lease is gone.
    let leader = engine(&clock, 10).with_authority(Arc::new(Countdown(AtomicU32::new(2))));
    let lost = leader.reconcile(&store, &observed(), &(), &script).await;
    assert!(
        matches!(lost, Err(ReconcileError::AuthorityLost(_))),
        "{lost:?}"
    );
    assert!(store.committed().is_empty(), "nothing committed");

    // The next leader starts from the store: the whole batch again.
    engine(&clock, 10)
        .reconcile(&store, &observed(), &(), &script)
        .await
        .unwrap();
    assert_eq!(
        script.log(),
        ["Config:0", "Deploy:1", "Config:0", "Deploy:2", "Waiting:2"]
    );
    assert_eq!(store.committed().len(), 1);
}

#[tokio::test]
async fn a_conflict_at_the_end_of_a_batch_commits_nothing() {
    let clock = ManualClock::at(t0());
    let script = Script::with([Act::Stay]);
    let store = BatchStore::new(&script);
    store.then([Some(Fault::Conflict)]);
    let conflict = engine(&clock, 10)
        .reconcile(&store, &observed(), &(), &script)
        .await;
    assert!(
        matches!(conflict, Err(ReconcileError::Conflict)),
        "{conflict:?}"
    );
    assert!(store.committed().is_empty());
}

#[tokio::test]
async fn a_short_history_keeps_its_limit_across_a_batch() {
    let clock = ManualClock::at(t0());
    let script = Script::with([]);
    let store = BatchStore::new(&script);
    let report = engine(&clock, 10)
        .with_options(EngineOptions {
            max_transitions: 10,
            history_limit: 2,
            ..EngineOptions::default()
        })
        .reconcile(&store, &observed(), &(), &script)
        .await
        .unwrap();
    assert_eq!(report.commits, 2, "Charge's entry, then the rest");
    let record = store.record().unwrap();
    assert_eq!(path(&record), ["Charge", "Done"]);
    assert_eq!(record.transitions, 5);
    assert_eq!(record.history[1].seq, 5);
}

#[test]
fn only_states_without_compensation_or_commit_on_entry_are_batched() {
    static STATES: [StateMeta; 5] = [
        StateMeta::new("A").initial().with_handler().next(&["B"]),
        StateMeta::new("B")
            .with_handler()
            .with_compensation()
            .next(&["C"]),
        StateMeta::new("C")
            .with_handler()
            .commit_on_entry()
            .next(&["D"]),
        StateMeta::new("D")
            .with_handler()
            .batch_entry()
            .next(&["E"]),
        StateMeta::new("E").final_state(),
    ];
    static ALL: Machine = Machine::new("All", &STATES).batch_commits();
    static SOME: Machine = Machine::new("Some", &STATES);
    let batched = |m: &Machine| -> Vec<&str> {
        m.states()
            .iter()
            .filter(|s| m.batches_entry(s))
            .map(StateMeta::name)
            .collect()
    };
    assert_eq!(batched(&ALL), ["A", "D", "E"]);
    assert_eq!(batched(&SOME), ["D"]);
}

fn any_act() -> impl Strategy<Value = Act> {
    prop_oneof![
        3 => Just(Act::Go),
        3 => Just(Act::Stay),
        2 => Just(Act::Retry),
        1 => Just(Act::Checkpoint),
        1 => Just(Act::Fail),
    ]
}

fn any_fault() -> impl Strategy<Value = Option<Fault>> {
    prop_oneof![6 => Just(None), 2 => Just(Some(Fault::Crash)), 1 => Just(Some(Fault::Conflict))]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Whatever `Waiting` does, whatever the budget and whatever the store
    /// suffers: every commit continues the one before (no transition
    /// committed twice or lost once committed), and `Charge`'s handler only
    /// ever runs once its entry is committed.
    #[test]
    fn batched_commits_keep_the_history_prefix_consistent(
        acts in proptest::collection::vec(any_act(), 0..20),
        faults in proptest::collection::vec(any_fault(), 0..40),
        max_transitions in 1u32..7,
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        runtime.block_on(async {
            let clock = ManualClock::at(t0());
            let script = Script::with(acts);
            let store = BatchStore::new(&script);
            store.then(faults);
            let engine = engine(&clock, max_transitions);
            for _ in 0..60 {
                match engine.reconcile(&store, &observed(), &(), &script).await {
                    Ok(report) => match report.requeue {
                        None => break,
                        Some(d) => clock.advance(d.max(Duration::from_millis(1))),
                    },
                    Err(ReconcileError::Conflict | ReconcileError::Store(_)) => {}
                    Err(other) => return Err(TestCaseError::fail(format!("{other:?}"))),
                }
            }
            prop_assert_eq!(script.uncommitted_charges.load(Ordering::SeqCst), 0);
            let committed = store.committed();
            let mut last: Option<&StateRecord> = None;
            for record in &committed {
                // Each record's history is one contiguous run of
                // transitions, each from where the one before went.
                for pair in record.history.windows(2) {
                    prop_assert_eq!(pair[1].seq, pair[0].seq + 1);
                    prop_assert_eq!(pair[1].from.as_deref(), Some(pair[0].to.as_str()));
                }
                if let Some(prev) = last {
                    prop_assert!(record.transitions >= prev.transitions);
                    // What the earlier commit holds, the later one holds
                    // unchanged (a prefix), and its new entries follow on.
                    for h in &record.history {
                        if let Some(old) = prev.history.iter().find(|p| p.seq == h.seq) {
                            prop_assert_eq!(old, h);
                        }
                    }
                    let new: Vec<_> = record.history.iter().filter(|h| h.seq > prev.transitions).collect();
                    prop_assert_eq!(new.len() as u64, record.transitions - prev.transitions);
                    if let Some(first) = new.first() {
                        prop_assert_eq!(first.seq, prev.transitions + 1);
                        prop_assert_eq!(first.from.as_deref(), Some(prev.state.as_str()));
                    }
                } else {
                    prop_assert_eq!(record.history[0].seq, 1);
                    prop_assert_eq!(record.history[0].from.as_deref(), None);
                }
                last = Some(record);
            }
            Ok(())
        })?;
    }
}

/// A saga that restarts with compensation on a spec change: `Start` makes
/// something `Made` undoes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
enum Undo {
    Start,
    Made,
    Failed,
}

static UNDO_STATES: [StateMeta; 3] = [
    StateMeta::new("Start")
        .initial()
        .with_handler()
        .next(&["Made"]),
    StateMeta::new("Made")
        .with_handler()
        .with_compensation()
        .next(&["Start"]),
    StateMeta::new("Failed").failed(),
];
static UNDO: Machine = Machine::new("Undo", &UNDO_STATES)
    .batch_commits()
    .on_spec_change(crate::SpecChange::CompensateAndRestart);

impl Fsm for Undo {
    type Resource = ();
    type Context = Arc<Script>;
    type Error = ChainError;

    fn machine() -> &'static Machine {
        &UNDO
    }
    fn state_name(&self) -> &'static str {
        match self {
            Undo::Start => "Start",
            Undo::Made => "Made",
            Undo::Failed => "Failed",
        }
    }
    fn unit_state(name: &str) -> Option<Self> {
        match name {
            "Start" => Some(Undo::Start),
            "Made" => Some(Undo::Made),
            "Failed" => Some(Undo::Failed),
            _ => None,
        }
    }
    fn handle<'a>(
        &'a self,
        cx: &'a mut Step<'_, Self>,
    ) -> BoxFuture<'a, Result<Transition<Self>, ChainError>> {
        Box::pin(async move {
            cx.context()
                .log
                .lock()
                .unwrap()
                .push(format!("handle:{}", self.state_name()));
            Ok(match self {
                Undo::Start => Transition::next(Undo::Made),
                _ => Transition::stay(),
            })
        })
    }
    fn compensate<'a>(
        &'a self,
        cx: &'a mut Step<'_, Self>,
    ) -> BoxFuture<'a, Result<(), ChainError>> {
        Box::pin(async move {
            cx.context()
                .log
                .lock()
                .unwrap()
                .push(format!("undo:{}", self.state_name()));
            Ok(())
        })
    }
}

#[tokio::test]
async fn the_last_compensation_step_is_committed_before_a_restart_chains_on() {
    let clock = ManualClock::at(t0());
    let script = Script::with([]);
    let store = BatchStore::new(&script);
    let engine = Engine::<Undo>::new()
        .unwrap()
        .with_clock(Arc::new(clock.clone()))
        .with_options(EngineOptions {
            max_transitions: 10,
            ..EngineOptions::default()
        });
    let at = |generation| Observed {
        commands: Vec::new(),
        generation: Some(generation),
        ..observed()
    };
    engine
        .reconcile(&store, &at(1), &(), &script)
        .await
        .unwrap();
    // The spec changes: compensation starts, then `Made` is undone and the
    // machine restarts. The restart chains into Start's handler and on to
    // Made; the write of Made's entry is lost in a crash.
    engine
        .reconcile(&store, &at(2), &(), &script)
        .await
        .unwrap();
    store.then([None, Some(Fault::Crash)]);
    let crashed = engine.reconcile(&store, &at(2), &(), &script).await;
    assert!(
        matches!(crashed, Err(ReconcileError::Store(_))),
        "{crashed:?}"
    );
    // The compensation's progress was committed with the restart, before
    // anything chained on: Made is not undone a second time.
    engine
        .reconcile(&store, &at(2), &(), &script)
        .await
        .unwrap();
    assert_eq!(
        script.log(),
        [
            "handle:Start",
            "handle:Made",
            "undo:Made",
            "handle:Start",
            "handle:Start",
            "handle:Made"
        ]
    );
    let last = store.committed().pop().unwrap();
    assert_eq!(last.state, "Made");
    assert_eq!(last.observed_generation, Some(2));
}
