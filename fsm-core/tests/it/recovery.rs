//! How a failed object recovers when its spec changes, by the machine's
//! `on_failed_spec_change`: `restart` (the default; see `saga_scopes.rs`
//! for a shop that recovers), `stay`, or `goto(State)`.

use std::sync::{Arc, Mutex};

use fsm_core::prelude::*;
use fsm_core::{Engine, EphemeralStore, ObjectKey, Observed, Report};

/// Whether the next start breaks, and a log of every call.
#[derive(Default)]
struct World {
    broken: Mutex<bool>,
    log: Mutex<Vec<String>>,
}

impl World {
    fn note(&self, line: &str) {
        self.log.lock().unwrap().push(line.to_owned());
    }
    fn take_log(&self) -> Vec<String> {
        std::mem::take(&mut *self.log.lock().unwrap())
    }
}

#[derive(Debug, thiserror::Error)]
#[error("broken")]
struct Broken;

impl Classify for Broken {
    fn class(&self) -> ErrorClass {
        ErrorClass::Permanent
    }
}

/// Stays failed whatever the spec says.
#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = (), context = Arc<World>, error = Broken)]
#[fsm(on_spec_change = continue, on_failed_spec_change = stay)]
enum Stubborn {
    #[fsm(initial, handler = start_stubborn, next(Done))]
    Starting,
    #[fsm(final, ready)]
    Done,
    #[fsm(failed)]
    Failed,
}

async fn start_stubborn(cx: &mut Step<'_, Stubborn>) -> Result<Transition<Stubborn>, Broken> {
    cx.context().note("start");
    if *cx.context().broken.lock().unwrap() {
        return Err(Broken);
    }
    Ok(Transition::next(Stubborn::Done))
}

/// Recovers through a repair state of its own.
#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = (), context = Arc<World>, error = Broken)]
#[fsm(on_spec_change = continue, on_failed_spec_change = goto(Repairing))]
enum Mendable {
    #[fsm(initial, handler = start_mendable, next(Done))]
    Starting,
    #[fsm(handler = repair, next(Done))]
    Repairing,
    #[fsm(final, ready)]
    Done,
    #[fsm(failed)]
    Failed,
}

async fn start_mendable(cx: &mut Step<'_, Mendable>) -> Result<Transition<Mendable>, Broken> {
    cx.context().note("start");
    if *cx.context().broken.lock().unwrap() {
        return Err(Broken);
    }
    Ok(Transition::next(Mendable::Done))
}

async fn repair(cx: &mut Step<'_, Mendable>) -> Result<Transition<Mendable>, Broken> {
    cx.context().note("repair");
    Ok(Transition::next(Mendable::Done))
}

fn observed(generation: i64) -> Observed {
    Observed {
        commands: Vec::new(),
        key: ObjectKey::cluster("thing"),
        generation: Some(generation),
        ..Observed::default()
    }
}

/// Reconciles until nothing is committed; every report.
async fn settle<S: Fsm<Resource = (), Context = Arc<World>>>(
    store: &EphemeralStore,
    world: &Arc<World>,
    generation: i64,
) -> Vec<Report> {
    let engine = Engine::<S>::new().expect("a valid machine");
    let mut reports = Vec::new();
    for _ in 0..20 {
        let report = engine
            .reconcile(store, &observed(generation), &(), world)
            .await
            .expect("a reconcile");
        let done = report.commits == 0;
        reports.push(report);
        if done {
            return reports;
        }
    }
    panic!("no rest after 20 reconciles");
}

fn last_state(reports: &[Report]) -> &str {
    reports.last().map_or("", |r| r.state.as_str())
}

#[tokio::test]
async fn stay_keeps_a_failed_object_failed_and_records_the_generation_once() {
    let store = EphemeralStore::new();
    let world = Arc::new(World::default());
    *world.broken.lock().unwrap() = true;
    assert_eq!(
        last_state(&settle::<Stubborn>(&store, &world, 1).await),
        "Failed"
    );
    world.take_log();

    *world.broken.lock().unwrap() = false;
    let reports = settle::<Stubborn>(&store, &world, 2).await;
    assert_eq!(last_state(&reports), "Failed");
    assert!(world.take_log().is_empty(), "no handler ran");
    let commits: u32 = reports.iter().map(|r| r.commits).sum();
    assert_eq!(commits, 1, "the new generation, recorded once");
    let record = reports.last().and_then(|r| r.record.clone()).unwrap();
    assert_eq!(record.observed_generation, Some(2));
    assert_eq!(
        record.last_error.as_deref(),
        Some("broken"),
        "the failure stays on show"
    );
}

#[tokio::test]
async fn goto_moves_a_failed_object_to_the_named_state() {
    let store = EphemeralStore::new();
    let world = Arc::new(World::default());
    *world.broken.lock().unwrap() = true;
    assert_eq!(
        last_state(&settle::<Mendable>(&store, &world, 1).await),
        "Failed"
    );
    world.take_log();

    let reports = settle::<Mendable>(&store, &world, 2).await;
    assert_eq!(last_state(&reports), "Done");
    assert_eq!(world.take_log(), ["repair"], "not started again: repaired");
    let record = reports.last().and_then(|r| r.record.clone()).unwrap();
    let path: Vec<&str> = record.history.iter().map(|h| h.to.as_str()).collect();
    assert_eq!(path, ["Starting", "Failed", "Repairing", "Done"]);
    assert_eq!(
        record.history[2].reason.as_deref(),
        Some("spec changed (generation 2)")
    );
    assert_eq!(record.last_error, None);
}

#[test]
fn the_policies_are_in_the_machines() {
    assert_eq!(
        Stubborn::machine().failed_spec_change(),
        fsm_core::FailedSpecChange::Stay
    );
    assert_eq!(
        Mendable::machine().failed_spec_change(),
        fsm_core::FailedSpecChange::Goto("Repairing")
    );
    assert_eq!(Mendable::machine().unreachable_states(), Vec::<&str>::new());
}
