//! The engine's per-transition cost against hand-written bookkeeping of
//! the same fields, side by side in one run.
//!
//! `cargo bench -p fsm-core --bench engine`
//!
//! - `decide/*`: the pure decision for one committed transition (new record:
//!   entry time, attempt reset, bounded history, trail), against a
//!   hand-written struct update of the same fields.
//! - `encode/*`: the record to JSON (what a store writes), against the
//!   hand-written struct.
//! - `transition/*`: dispatch of a derived machine's handler plus decision
//!   plus encoding: the whole in-process cost of one transition.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use fsm_core::__internals::{Decider, Outcome};
use fsm_core::prelude::*;
use fsm_core::{ManualClock, SeededRandom, StateRecord};
use serde::Serialize;

#[derive(Debug, thiserror::Error)]
#[error("never")]
struct Never;
impl Classify for Never {}

#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = (), error = Never)]
enum Bench {
    #[fsm(initial, handler = first, next(Second))]
    First,
    #[fsm(handler = second, next(First), timeout = "10m")]
    Second { id: String },
    #[fsm(failed)]
    Failed,
}

async fn first(_: &mut Step<'_, Bench>) -> Result<Transition<Bench>, Never> {
    Ok(Transition::next(Bench::Second { id: "i-123".into() }))
}

async fn second(_: &mut Step<'_, Bench>, _: &str) -> Result<Transition<Bench>, Never> {
    Ok(Transition::next(Bench::First))
}

/// The same bookkeeping, written by hand the way a careful operator author
/// keeps a phase in status.
#[derive(Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct HandStatus {
    phase: String,
    instance_id: Option<String>,
    entered_at: Timestamp,
    attempt: u32,
    last_error: Option<String>,
    observed_generation: Option<i64>,
    transitions: u64,
    history: Vec<HandHistory>,
}

#[derive(Clone, Serialize)]
struct HandHistory {
    seq: u64,
    from: String,
    to: String,
    at: Timestamp,
}

fn hand_transition(status: &mut HandStatus, to: &str, id: Option<String>, now: Timestamp) {
    status.transitions += 1;
    status.history.push(HandHistory {
        seq: status.transitions,
        from: status.phase.clone(),
        to: to.to_owned(),
        at: now,
    });
    if status.history.len() > 20 {
        status.history.remove(0);
    }
    status.phase = to.to_owned();
    status.instance_id = id;
    status.entered_at = now;
    status.attempt = 0;
    status.last_error = None;
}

fn full_history_record(now: Timestamp) -> StateRecord {
    let random = SeededRandom::new(1);
    let decider = decider(now, &random);
    let mut record = StateRecord::new(&Bench::First, now).unwrap();
    for i in 0..20 {
        let next = if i % 2 == 0 {
            Bench::Second { id: "i-123".into() }
        } else {
            Bench::First
        };
        record = decider
            .after_handler::<Bench>(record, Outcome::Transition(Transition::next(next)))
            .unwrap()
            .record;
    }
    record
}

fn decider(now: Timestamp, random: &SeededRandom) -> Decider<'_> {
    Decider {
        machine: Bench::machine(),
        now,
        random,
        history_limit: 20,
        poll_interval: Duration::from_secs(60),
    }
}

fn hand_status(now: Timestamp) -> HandStatus {
    let mut status = HandStatus {
        phase: "First".into(),
        instance_id: None,
        entered_at: now,
        attempt: 0,
        last_error: None,
        observed_generation: Some(1),
        transitions: 0,
        history: Vec::new(),
    };
    for i in 0..20 {
        let (to, id) = if i % 2 == 0 {
            ("Second", Some("i-123".to_owned()))
        } else {
            ("First", None)
        };
        hand_transition(&mut status, to, id, now);
    }
    status
}

fn benches(c: &mut Criterion) {
    let now: Timestamp = "2026-06-01T00:00:00Z".parse().unwrap();
    let random = SeededRandom::new(1);
    let record = full_history_record(now);
    let status = hand_status(now);

    let mut decide = c.benchmark_group("decide");
    decide.bench_function("engine", |b| {
        let decider = decider(now, &random);
        b.iter(|| {
            let outcome =
                Outcome::Transition(Transition::next(Bench::Second { id: "i-123".into() }));
            black_box(
                decider
                    .after_handler::<Bench>(black_box(record.clone()), outcome)
                    .unwrap(),
            )
        })
    });
    decide.bench_function("hand-written", |b| {
        b.iter(|| {
            let mut s = black_box(status.clone());
            hand_transition(&mut s, "Second", Some("i-123".into()), now);
            black_box(s)
        })
    });
    decide.finish();

    let mut encode = c.benchmark_group("encode");
    encode.bench_function("engine", |b| {
        b.iter(|| black_box(serde_json::to_vec(black_box(&record)).unwrap()))
    });
    encode.bench_function("hand-written", |b| {
        b.iter(|| black_box(serde_json::to_vec(black_box(&status)).unwrap()))
    });
    encode.finish();

    let mut transition = c.benchmark_group("transition");
    let clock = ManualClock::at(now);
    transition.bench_function("engine", |b| {
        let decider = decider(now, &random);
        b.iter(|| {
            let state: Bench = record.current().unwrap();
            let mut step = Step::new(&(), &(), &clock, state.state_name());
            let out = futures_lite_block_on(state.handle(&mut step)).unwrap();
            let decision = decider
                .after_handler::<Bench>(record.clone(), Outcome::Transition(out))
                .unwrap();
            black_box(serde_json::to_vec(&decision.record).unwrap())
        })
    });
    transition.bench_function("hand-written", |b| {
        b.iter(|| {
            let mut s = status.clone();
            let (to, id) = if s.phase == "First" {
                ("Second", Some("i-123".to_owned()))
            } else {
                ("First", None)
            };
            hand_transition(&mut s, to, id, now);
            black_box(serde_json::to_vec(&s).unwrap())
        })
    });
    transition.finish();
}

/// Polls a future that never waits (the handlers above) to completion.
fn futures_lite_block_on<F: std::future::Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
    }
}

criterion_group!(engine, benches);
criterion_main!(engine);
