//! The harness, step by step: one reconcile at a time on a virtual clock,
//! time in state, spec changes, deletion, undeclared transitions and
//! attempt timeouts in virtual time.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fsm_core::prelude::*;
use fsm_core::{Effect, HarnessError, RunHandlerError, StateRecord};

/// What the seeding handler does.
#[derive(Clone, Copy, Debug, Default)]
enum Seed {
    #[default]
    Done,
    /// Never finishes.
    Hang,
    /// Waits this long on the harness's virtual clock.
    Virtual(Duration),
    /// Waits this long of real time (tokio's timer).
    Real(Duration),
}

/// The world the handlers act on: a fake cloud and a log of calls.
#[derive(Default)]
struct World {
    clock: ManualClock,
    log: Mutex<Vec<String>>,
    provision_failures: AtomicU32,
    ready: AtomicBool,
    seed: Mutex<Seed>,
    misbehave: AtomicBool,
}

impl World {
    fn new(clock: &ManualClock) -> Arc<Self> {
        Arc::new(World {
            clock: clock.clone(),
            ..World::default()
        })
    }
    fn note(&self, line: impl Into<String>) {
        self.log.lock().unwrap().push(line.into());
    }
    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

#[derive(Debug, thiserror::Error)]
#[error("the cloud is busy")]
struct Busy;
impl Classify for Busy {}

#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = (), context = Arc<World>, error = Busy)]
#[fsm(retry(max_attempts = 3, initial = "10s", factor = 2.0, max = "1m"))]
#[fsm(on_spec_change = restart, cleanup = cleanup, on_delete = compensate)]
enum Db {
    #[fsm(initial, handler = provision, next(Waiting))]
    Provisioning,
    #[fsm(
        handler = wait,
        compensate = delete_instance,
        timeout = "10m",
        on_timeout = TimedOut,
        next(Seeding)
    )]
    Waiting { id: String },
    #[fsm(handler = seed, compensate = drop_schema, attempt_timeout = "30s", next(Ready))]
    Seeding { id: String },
    #[fsm(ready, handler = check, next(Provisioning))]
    Ready { id: String },
    #[fsm(final)]
    TimedOut,
    #[fsm(failed)]
    Failed,
}

async fn provision(cx: &mut Step<'_, Db>) -> Result<Transition<Db>, Busy> {
    let world = cx.context();
    world.note("provision");
    if world
        .provision_failures
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
    {
        return Err(Busy);
    }
    Ok(Transition::next(Db::Waiting { id: "i-1".into() }))
}

async fn wait(cx: &mut Step<'_, Db>, id: &str) -> Result<Transition<Db>, Busy> {
    cx.context()
        .note(format!("wait:{id}:{}s", cx.time_in_state().as_secs()));
    if cx.context().ready.load(Ordering::SeqCst) {
        Ok(Transition::next(Db::Seeding { id: id.into() }))
    } else {
        Ok(Transition::wait(Duration::from_secs(60)))
    }
}

async fn seed(cx: &mut Step<'_, Db>, id: &str) -> Result<Transition<Db>, Busy> {
    let world = cx.context();
    let mode = *world.seed.lock().unwrap();
    world.note(format!("seed:{id}:{}", cx.attempt()));
    match mode {
        Seed::Done => {}
        Seed::Hang => std::future::pending::<()>().await,
        Seed::Virtual(d) => world.clock.sleep(d).await,
        Seed::Real(d) => tokio::time::sleep(d).await,
    }
    Ok(Transition::next(Db::Ready { id: id.into() }))
}

async fn check(cx: &mut Step<'_, Db>, id: &str) -> Result<Transition<Db>, Busy> {
    if cx.context().misbehave.load(Ordering::SeqCst) {
        // A bug: Ready declares only next(Provisioning).
        return Ok(Transition::next(Db::Seeding { id: id.into() }));
    }
    Ok(Transition::stay())
}

async fn delete_instance(cx: &mut Step<'_, Db>, id: &str) -> Result<(), Busy> {
    cx.context().note(format!("delete_instance:{id}"));
    Ok(())
}

async fn drop_schema(cx: &mut Step<'_, Db>, id: &str) -> Result<(), Busy> {
    cx.context().note(format!("drop_schema:{id}"));
    Ok(())
}

async fn cleanup(cx: &mut Step<'_, Db>, state: &Db) -> Result<(), Busy> {
    cx.context().note(format!("cleanup:{}", state.state_name()));
    Ok(())
}

fn t0() -> Timestamp {
    "2026-03-01T00:00:00Z".parse().unwrap()
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn at(d: Duration) -> Timestamp {
    t0().checked_add(d).unwrap()
}

fn harness(world: &Arc<World>) -> Harness<Db> {
    Harness::<Db>::new((), world.clone()).clock(world.clock.clone())
}

fn record(harness: &Harness<Db>) -> StateRecord {
    harness.record().expect("a stored record")
}

#[tokio::test]
async fn a_workflow_is_walked_one_reconcile_at_a_time_through_its_retries() {
    let world = World::new(&ManualClock::at(t0()));
    world.provision_failures.store(2, Ordering::SeqCst);
    let harness = harness(&world);
    assert_eq!(harness.record(), None);
    assert_eq!(harness.state(), None);

    // First attempt fails: a retry 10 s later.
    let report = harness.reconcile().await.unwrap();
    assert_eq!(report.state, "Provisioning");
    assert_eq!(report.requeue, Some(secs(10)));
    assert!(matches!(
        report.effects[..],
        [Effect::Entered { .. }, Effect::RetryScheduled { attempt: 1, delay, .. }] if delay == secs(10)
    ));
    let r = record(&harness);
    assert_eq!(
        (r.attempt, r.last_error.as_deref()),
        (1, Some("the cloud is busy"))
    );
    assert_eq!(r.next_attempt_at, Some(at(secs(10))));

    // Too early: no handler runs, the engine waits the rest.
    harness.advance(secs(4));
    let report = harness.reconcile().await.unwrap();
    assert_eq!((report.commits, report.requeue), (0, Some(secs(6))));
    assert_eq!(world.log(), ["provision"]);

    // On time: the second attempt fails too, backing off 20 s.
    harness.advance(secs(6));
    let report = harness.reconcile().await.unwrap();
    assert_eq!(report.requeue, Some(secs(20)));
    assert_eq!(record(&harness).attempt, 2);

    // The third succeeds.
    harness.advance(secs(20));
    let report = harness.reconcile().await.unwrap();
    assert_eq!(report.state, "Waiting");
    assert_eq!(harness.state(), Some(Db::Waiting { id: "i-1".into() }));
    let r = record(&harness);
    assert_eq!((r.attempt, r.last_error), (0, None));
    assert_eq!(r.entered_at, at(secs(30)));
    assert_eq!(harness.reconciles(), 4);

    // The same harness then runs to rest from there.
    world.ready.store(true, Ordering::SeqCst);
    let settled = harness.run_until_settled().await.unwrap();
    assert_eq!(
        settled.path(),
        ["Provisioning", "Waiting", "Seeding", "Ready"]
    );
    assert!(!settled.released);
}

#[tokio::test]
async fn time_already_spent_in_a_state_counts_toward_its_timeout() {
    let world = World::new(&ManualClock::at(t0()));
    let harness = harness(&world).in_state_for(Db::Waiting { id: "i-7".into() }, secs(9 * 60 + 30));
    // 9 min 30 s in: the handler runs and sees it; the next look is capped
    // at the 10-minute deadline.
    let report = harness.reconcile().await.unwrap();
    assert_eq!(report.requeue, Some(secs(30)));
    assert_eq!(world.log(), ["wait:i-7:570s"]);
    assert_eq!(record(&harness).entered_at, at(Duration::ZERO) - secs(570));

    harness.advance(secs(30));
    let report = harness.reconcile().await.unwrap();
    assert_eq!(report.state, "TimedOut");
    assert!(report.effects.contains(&Effect::TimedOut {
        state: "Waiting".into()
    }));
    assert_eq!(world.log().len(), 1, "the timed-out handler did not run");
    assert_eq!(
        record(&harness).last_error.as_deref(),
        Some("timed out in Waiting after 10m")
    );
}

#[tokio::test]
async fn run_handler_sees_the_time_already_spent_in_the_state() {
    let world = World::new(&ManualClock::at(t0()));
    let harness = harness(&world).in_state_for(Db::Waiting { id: "i-7".into() }, secs(42));
    assert_eq!(
        harness.run_handler().await.unwrap(),
        Transition::wait(secs(60))
    );
    assert_eq!(world.log(), ["wait:i-7:42s"]);
}

#[tokio::test]
async fn a_new_generation_between_reconciles_applies_on_spec_change() {
    let world = World::new(&ManualClock::at(t0()));
    world.ready.store(true, Ordering::SeqCst);
    let mut harness = harness(&world);
    let settled = harness.run_until_settled().await.unwrap();
    assert_eq!(settled.record.observed_generation, Some(1));
    assert_eq!(settled.state, Db::Ready { id: "i-1".into() });

    assert_eq!(harness.bump_generation(), 2);
    let report = harness.reconcile().await.unwrap();
    assert!(
        report
            .effects
            .contains(&Effect::SpecChanged { generation: 2 })
    );
    // on_spec_change = restart: back to the initial state, no compensation.
    let r = record(&harness);
    assert_eq!(r.observed_generation, Some(2));
    assert!(r.trail.is_empty());
    assert!(!world.log().iter().any(|l| l.starts_with("drop_schema")));
    assert_eq!(
        r.history.last().and_then(|h| h.reason.as_deref()),
        Some("spec changed (generation 2)")
    );

    harness.set_generation(7);
    let report = harness.reconcile().await.unwrap();
    assert!(
        report
            .effects
            .contains(&Effect::SpecChanged { generation: 7 })
    );
}

#[tokio::test]
async fn deletion_compensates_in_reverse_order_cleans_up_and_releases() {
    let world = World::new(&ManualClock::at(t0()));
    world.ready.store(true, Ordering::SeqCst);
    let mut harness = harness(&world);
    // Provisioning → Waiting (with the entry), then → Seeding.
    for _ in 0..2 {
        harness.reconcile().await.unwrap();
    }
    assert_eq!(harness.state(), Some(Db::Seeding { id: "i-1".into() }));

    harness.mark_deleting();
    let settled = harness.run_until_settled().await.unwrap();
    assert!(settled.released);
    assert_eq!(settled.state, Db::Seeding { id: "i-1".into() });
    assert_eq!(
        world.log()[2..],
        ["drop_schema:i-1", "delete_instance:i-1", "cleanup:Seeding"]
    );
    assert_eq!(settled.effects.last(), Some(&Effect::Released));
    assert_eq!(harness.record(), None);
}

#[tokio::test]
async fn a_state_given_to_the_harness_is_compensated_on_deletion() {
    let world = World::new(&ManualClock::at(t0()));
    let mut harness = harness(&world).in_state(Db::Seeding { id: "i-9".into() });
    harness.mark_deleting();
    let first = harness.reconcile().await.unwrap();
    assert!(matches!(
        first.effects[..],
        [Effect::CompensationStarted { .. }, ..]
    ));
    let settled = harness.run_until_settled().await.unwrap();
    assert!(settled.released);
    assert_eq!(world.log(), ["drop_schema:i-9", "cleanup:Seeding"]);
}

#[tokio::test]
async fn deleting_an_object_that_never_started_cleans_up_from_the_initial_state_and_releases_it() {
    let world = World::new(&ManualClock::at(t0()));
    let mut harness = harness(&world);
    harness.mark_deleting();
    let err = harness.run_until_settled().await.unwrap_err();
    assert!(matches!(err, HarnessError::ReleasedBeforeStart), "{err:?}");
    // The first handler may have acted before its commit was lost: the
    // cleanup runs, with the initial state.
    assert_eq!(world.log(), ["cleanup:Provisioning"]);
}

#[tokio::test]
async fn run_handler_refuses_a_transition_the_state_does_not_declare() {
    let world = World::new(&ManualClock::at(t0()));
    world.misbehave.store(true, Ordering::SeqCst);
    let harness = harness(&world).in_state(Db::Ready { id: "i-1".into() });
    let err = harness.run_handler().await.unwrap_err();
    assert!(
        matches!(
            err,
            RunHandlerError::UndeclaredTransition {
                from: "Ready",
                to: "Seeding",
                declared: ["Provisioning"],
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "the handler of Ready returned a transition to Seeding, which Ready does not declare (next: [\"Provisioning\"])"
    );
    assert_eq!(err.class(), ErrorClass::RETRYABLE);
    // The engine agrees: a failed attempt, reported.
    let report = harness.reconcile().await.unwrap();
    assert_eq!(
        report.effects[0],
        Effect::UndeclaredTransition {
            from: "Ready".into(),
            to: "Seeding".into()
        }
    );
    // A declared target passes; a handler error is the handler's.
    world.misbehave.store(false, Ordering::SeqCst);
    assert_eq!(harness.run_handler().await.unwrap(), Transition::stay());
    world.provision_failures.store(1, Ordering::SeqCst);
    let err = Harness::<Db>::new((), world.clone())
        .run_handler()
        .await
        .unwrap_err();
    assert!(matches!(err.handler_error(), Some(Busy)), "{err:?}");
}

#[tokio::test]
async fn a_hanging_handler_times_out_at_once_in_virtual_time() {
    let world = World::new(&ManualClock::at(t0()));
    *world.seed.lock().unwrap() = Seed::Hang;
    let harness = harness(&world).in_state(Db::Seeding { id: "i-1".into() });
    let real = Instant::now();
    let report = harness.reconcile().await.unwrap();
    assert!(
        real.elapsed() < Duration::from_secs(5),
        "took {:?} of real time",
        real.elapsed()
    );
    // 30 s of the virtual clock passed, and the attempt failed.
    assert_eq!(harness.now(), at(secs(30)));
    assert_eq!(report.state, "Seeding");
    assert!(matches!(
        report.effects[..],
        [Effect::RetryScheduled { attempt: 1, delay, ref error, .. }]
            if delay == secs(10) && error == "attempt timed out after 30s"
    ));
    assert_eq!(record(&harness).attempt, 1);

    // To rest: three attempts of 30 s, backoffs of 10 s and 20 s, then the
    // workflow fails and compensates.
    let settled = harness.run_until_settled().await.unwrap();
    assert_eq!(settled.state, Db::Failed);
    assert_eq!(harness.now(), at(secs(30 + 10 + 30 + 20 + 30)));
    assert!(real.elapsed() < Duration::from_secs(10));
    assert!(world.log().contains(&"drop_schema:i-1".to_owned()));
}

#[tokio::test]
async fn run_handler_times_a_hanging_handler_out_on_the_virtual_clock() {
    let world = World::new(&ManualClock::at(t0()));
    *world.seed.lock().unwrap() = Seed::Hang;
    let harness = harness(&world).in_state(Db::Seeding { id: "i-1".into() });
    let err = harness.run_handler().await.unwrap_err();
    assert!(
        matches!(
            err,
            RunHandlerError::AttemptTimedOut {
                state: "Seeding",
                limit
            } if limit == secs(30)
        ),
        "{err:?}"
    );
    assert_eq!(harness.now(), at(secs(30)));
}

#[tokio::test]
async fn a_fake_waiting_on_the_virtual_clock_meets_the_attempt_timeout_in_order() {
    // 10 s of virtual delay: within the 30 s limit.
    let world = World::new(&ManualClock::at(t0()));
    *world.seed.lock().unwrap() = Seed::Virtual(secs(10));
    let harness = harness(&world).in_state(Db::Seeding { id: "i-1".into() });
    let report = harness.reconcile().await.unwrap();
    assert_eq!(report.state, "Ready");
    assert_eq!(harness.now(), at(secs(10)));

    // 45 s: the attempt times out at 30 s.
    let world = World::new(&ManualClock::at(t0()));
    *world.seed.lock().unwrap() = Seed::Virtual(secs(45));
    let slow = self::harness(&world).in_state(Db::Seeding { id: "i-1".into() });
    let report = slow.reconcile().await.unwrap();
    assert_eq!(report.state, "Seeding");
    assert_eq!(record(&slow).attempt, 1);
    assert_eq!(slow.now(), at(secs(30)));
    // The fake's sleep was dropped with the handler.
    assert_eq!(slow.manual_clock().next_sleep(), None);
}

#[tokio::test]
async fn a_handler_busy_with_real_work_is_not_counted_idle() {
    let world = World::new(&ManualClock::at(t0()));
    *world.seed.lock().unwrap() = Seed::Real(Duration::from_millis(20));
    let harness = harness(&world).in_state(Db::Seeding { id: "i-1".into() });
    let report = harness.reconcile().await.unwrap();
    assert_eq!(report.state, "Ready");
    assert_eq!(harness.now(), t0(), "virtual time stood still");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempt_timeouts_are_virtual_on_a_multi_threaded_runtime_too() {
    let world = World::new(&ManualClock::at(t0()));
    *world.seed.lock().unwrap() = Seed::Hang;
    let harness = harness(&world).in_state(Db::Seeding { id: "i-1".into() });
    let real = Instant::now();
    let report = harness.reconcile().await.unwrap();
    assert!(real.elapsed() < Duration::from_secs(5));
    assert_eq!(harness.now(), at(secs(30)));
    assert_eq!(record(&harness).attempt, 1);
    assert_eq!(report.requeue, Some(secs(10)));
    // The record the harness started from is the one the engine would
    // have written on entering the state.
    assert_eq!(record(&harness).history[0].to, "Seeding");
    assert_eq!(record(&harness).trail[0].state, "Seeding");
}
