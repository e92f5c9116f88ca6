//! The sharding proof (issue 22): `shard-operator run --shards` replicas
//! (real processes, built with `fsm_kube::cli::Operator`) share five-step
//! workflows over the embedded API server while they are scaled 3 → 5 → 2,
//! with SIGTERMs and SIGKILLs, objects in flight. The Orders arrive in five
//! waves of equal size:
//!
//! | wave | replicas | what happens while it runs |
//! | --- | --- | --- |
//! | A | 3 | steady: the shares are measured |
//! | B | 3 → 5 | two replicas join once a third of its handlers ended |
//! | C | 5 | steady: the shares are measured |
//! | D | 5 → 2 | at ¼ of its handlers one replica is SIGKILLed, at ½ one SIGTERMed, at ¾ one more SIGKILLed |
//! | E | 2 | steady: the shares are measured |
//!
//! Each wave runs until every Order exists and rests in `Done`; before a
//! steady wave the harness waits until every Order is labelled for a live
//! replica (the moves of the scaling are over) and the assigner gives new
//! Orders to every running replica and no other (its
//! `operator_fsm_shard_ring_member` metric: a shard joins the ring once
//! the assigner has seen its Lease renewed).
//!
//! At the end:
//! - every Order rests in `Done` along the exact path of the workflow,
//!   each transition once in its record's history;
//! - the server's request log shows exactly 6 successful status writes per
//!   Order: 5 transitions and the `Charging` checkpoint (no transition
//!   committed twice, none lost);
//! - the ledger holds exactly one charge per Order (one distinct request
//!   id), and no charge repeated under the same id;
//! - no Order was handled by two replicas at overlapping times (from the
//!   handlers' start and end reports; a killed replica's open handler ends
//!   when it was reaped);
//! - **share**: in each steady wave, replica r's share is the number of
//!   that wave's Orders r ended at least one handler for; each is within
//!   ±20 % of the wave's size over the number of replicas (at CI's size,
//!   three standard deviations of a uniform hash's count where that is
//!   wider: see `share_tolerance`), and no Order of a steady wave was
//!   handled by two replicas;
//! - no operator process panicked.
//!
//! | variable | default | what |
//! | --- | --- | --- |
//! | `PROOF_OBJECTS` | 500 | Orders in all (five waves) |
//! | `PROOF_LEASE_SECS` | 15 | the Leases' duration (the CLI's default; at 5 s a loaded machine's late renewals lapse holds, and the assigner moves Orders mid-phase: docs/evidence.md) |
//! | `PROOF_WORK_MS` | 10 | how long each handler works (a sleep) |
//! | `PROOF_WAVE_SECS` | 180 | the bound on each wave |
//! | `PROOF_ELECTION` | `sharded` | `leader`: `--leader-elect` replicas instead (no share check) |
//!
//! The 5,000-Order run of `docs/evidence.md` is this test with
//! `PROOF_OBJECTS=5000 PROOF_WAVE_SECS=900` (about 200 s in the debug
//! build on 2 cores). It needs the embedded server's
//! request log, so it does not run on a real kube-apiserver.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use integration_tests::sharding::checks::{self, Share};
use integration_tests::sharding::harness::{Election, Harness, Stop, knob};
use integration_tests::sharding::ledger::now_us;
use integration_tests::sharding::machine::TRANSITIONS;

/// The bound on a SIGTERMed replica's exit.
const EXIT_BOUND: Duration = Duration::from_secs(30);

/// One steady wave's shares.
struct Steady {
    wave: &'static str,
    shares: Vec<Share>,
    shared: usize,
    strangers: usize,
    size: usize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_five_two_replicas_with_kills_complete_everything_once_and_evenly() {
    let objects = knob("PROOF_OBJECTS", 500) as usize;
    let lease_secs = knob("PROOF_LEASE_SECS", 15);
    let work_ms = knob("PROOF_WORK_MS", 10);
    let bound = Duration::from_secs(knob("PROOF_WAVE_SECS", 180));
    let election = Election::from_env();
    let wave = objects / 5;
    assert!(wave > 0, "PROOF_OBJECTS must be at least 5");
    let handlers = wave * TRANSITIONS;

    let scratch = std::env::temp_dir().join(format!("sharding-proof-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("a scratch directory");
    let log = scratch.join("operators.log");
    let started = Instant::now();
    let mut h = Harness::start(
        env!("CARGO_BIN_EXE_shard-operator").as_ref(),
        &log,
        election,
        lease_secs,
        work_ms,
    )
    .await;
    let mut steady = Vec::new();
    let mut events = Vec::new();

    // A: three replicas, steady.
    for name in ["replica-1", "replica-2", "replica-3"] {
        h.start_replica(name);
    }
    h.wait_leases(bound)
        .await
        .expect("the three replicas hold their Leases");
    steady.push(steady_wave(&mut h, "A", wave, bound).await);

    // B: two replicas join mid-wave.
    let ends_before = h.ledger.ends();
    h.create_orders(wave).await;
    h.wait_ends(ends_before + handlers / 3, bound).await;
    for name in ["replica-4", "replica-5"] {
        h.start_replica(name);
    }
    events.push(format!(
        "B: replica-4 and replica-5 joined at {} of the wave's {handlers} handlers ended",
        h.ledger.ends() - ends_before
    ));
    h.wait_leases(bound)
        .await
        .expect("the five replicas hold their Leases");
    h.wait_done(bound).await.expect("wave B completes");
    h.wait_settled(bound).await.expect("the moves of 3 → 5 end");

    // C: five replicas, steady.
    steady.push(steady_wave(&mut h, "C", wave, bound).await);

    // D: down to two, objects in flight: SIGKILL, SIGTERM, SIGKILL.
    let ends_before = h.ledger.ends();
    h.create_orders(wave).await;
    for (quarter, name, how) in [
        (1, "replica-2", Stop::Killed),
        (2, "replica-1", Stop::Terminated),
        (3, "replica-3", Stop::Killed),
    ] {
        h.wait_ends(ends_before + handlers * quarter / 4, bound)
            .await;
        let in_flight = h.in_flight(name).await.expect("the Orders");
        let stopped = match how {
            Stop::Killed => h.kill(name),
            Stop::Terminated => h.terminate(name, EXIT_BOUND).await,
        };
        if how == Stop::Terminated {
            let status = stopped.status.expect("an exit status");
            assert!(status.success(), "{name} exited with {status} on SIGTERM");
        }
        events.push(format!(
            "D: {name} {} at {} of the wave's {handlers} handlers ended, \
             {in_flight} of its Orders not done",
            match how {
                Stop::Killed => "SIGKILLed",
                Stop::Terminated => "SIGTERMed (exited 0)",
            },
            h.ledger.ends() - ends_before
        ));
    }
    h.wait_done(bound).await.expect("wave D completes");
    h.wait_settled(bound).await.expect("the moves of 5 → 2 end");

    // E: two replicas, steady.
    steady.push(steady_wave(&mut h, "E", wave, bound).await);
    let total = started.elapsed();

    // The checks.
    let orders = h.orders().await.expect("the Orders");
    let names: BTreeSet<String> = orders.iter().map(kube::ResourceExt::name_any).collect();
    assert_eq!(names.len(), wave * 5, "Orders in the cluster");
    let bad_histories: Vec<String> = orders
        .iter()
        .filter_map(|o| {
            let name = kube::ResourceExt::name_any(o);
            match o.record() {
                None => Some(format!("{name}: no record")),
                Some(record) => checks::check_history(&record)
                    .err()
                    .map(|e| format!("{name}: {e}")),
            }
        })
        .collect();

    let log_records = h.server.request_log().records();
    let writes = checks::status_writes(&log_records, "orders");
    let mut write_counts = BTreeMap::<usize, usize>::new();
    for name in &names {
        *write_counts
            .entry(writes.get(name).copied().unwrap_or(0))
            .or_default() += 1;
    }
    let label_writes = log_records
        .iter()
        .filter(|r| {
            r.resource == "orders"
                && r.subresource.is_none()
                && (r.verb == "patch" || r.verb == "update")
                && (200..300).contains(&r.code)
        })
        .count();

    let records = h.ledger.snapshot();
    let charge_check = checks::charges(&records, &names);
    let stopped_us: BTreeMap<String, i64> = h
        .stopped
        .iter()
        .map(|(name, s)| (name.clone(), s.at_us))
        .collect();
    let (intervals, unended) = checks::intervals(&records.reports, &stopped_us, now_us());
    let overlapping = checks::overlaps(&intervals);
    let cut = intervals.iter().filter(|i| i.cut).count();
    let cancelled = intervals.iter().filter(|i| i.cancelled).count();

    // The figures, before any assertion.
    println!(
        "sharding proof ({election:?}): {} Orders in 5 waves of {wave}, lease {lease_secs}s, \
         work {work_ms} ms per handler, {:.1}s in all",
        wave * 5,
        total.as_secs_f64()
    );
    for event in &events {
        println!("  {event}");
    }
    for s in &steady {
        println!(
            "  steady wave {} ({} replicas, {} Orders, even share {:.1}, tolerance ±{:.0}%): {}; \
             Orders handled by two replicas {}, by a replica not live {}",
            s.wave,
            s.shares.len(),
            s.size,
            s.size as f64 / s.shares.len() as f64,
            share_tolerance(s.size, s.shares.len()) * 100.0,
            s.shares
                .iter()
                .map(|sh| format!(
                    "{} {} ({:+.1}%)",
                    sh.replica,
                    sh.objects,
                    sh.deviation * 100.0
                ))
                .collect::<Vec<_>>()
                .join(", "),
            s.shared,
            s.strangers
        );
    }
    println!(
        "  status writes per Order (expected {}): {write_counts:?}; metadata writes to Orders \
         (labels: assignments, drains, moves) {label_writes}",
        TRANSITIONS + 1
    );
    println!(
        "  charges: {} distinct, {} Orders charged twice, {} never, {} repeats under one id",
        records.charges.len(),
        charge_check.charged_twice.len(),
        charge_check.never_charged.len(),
        charge_check.repeats
    );
    println!(
        "  handler intervals: {}, cut by a kill {cut}, cancelled (a controller stopped) \
         {cancelled}, never ended {}, overlapping pairs {}",
        intervals.len(),
        unended.len(),
        overlapping.len()
    );

    assert!(bad_histories.is_empty(), "histories: {bad_histories:#?}");
    assert_eq!(
        write_counts.keys().copied().collect::<Vec<_>>(),
        [TRANSITIONS + 1],
        "status writes per Order"
    );
    assert!(charge_check.is_clean(), "charges: {charge_check:#?}");
    assert!(
        overlapping.is_empty(),
        "Orders handled by two replicas at once: {:#?}",
        &overlapping[..overlapping.len().min(5)]
    );
    assert!(
        unended.is_empty(),
        "handlers that never ended: {unended:#?}"
    );
    if election == Election::Sharded {
        for s in &steady {
            assert_eq!(
                s.shared, 0,
                "wave {}: Orders handled by two replicas",
                s.wave
            );
            assert_eq!(
                s.strangers, 0,
                "wave {}: Orders handled by a stopped replica",
                s.wave
            );
            let tolerance = share_tolerance(s.size, s.shares.len());
            for share in &s.shares {
                assert!(
                    share.deviation.abs() <= tolerance,
                    "wave {}: {} handled {} Orders, {:+.1}% off the even share (tolerance ±{:.0}%)",
                    s.wave,
                    share.replica,
                    share.objects,
                    share.deviation * 100.0,
                    tolerance * 100.0
                );
            }
        }
    }
    h.check_no_panic().expect("no panic");
    drop(h);
    let _ = std::fs::remove_dir_all(&scratch);
}

/// The allowed deviation from the even share of a wave of `size` Orders
/// over `replicas`: ±20 %, or 4.5 standard deviations of the count a
/// uniform hash gives one replica (binomial, p = 1/replicas) where that is
/// wider. At 1,000 Orders a wave (the 5,000-Order run) it is ±20 % for 2,
/// 3 and 5 replicas. CI's waves of 100 cannot resolve ±20 % (over 5
/// replicas one standard deviation is 20 %), so there the check catches
/// only gross imbalance, such as a replica left out of the ring. Three
/// standard deviations were too few: with ten shares checked a run, about
/// one CI run in a hundred failed on chance alone (wave E, 2 replicas, 66
/// of 100 Orders on one: 3.2 standard deviations). At 4.5 a share fails
/// on chance about seven times in a million.
fn share_tolerance(size: usize, replicas: usize) -> f64 {
    let (n, p) = (size as f64, 1.0 / replicas.max(1) as f64);
    let sd = (n * p * (1.0 - p)).sqrt() / (n * p);
    (4.5 * sd).max(0.20)
}

/// Creates a wave of `size` Orders on the running replicas and waits until
/// every Order is done; the wave's shares.
async fn steady_wave(h: &mut Harness, wave: &'static str, size: usize, bound: Duration) -> Steady {
    h.wait_settled(bound)
        .await
        .unwrap_or_else(|e| panic!("before wave {wave}: {e}"));
    h.wait_ring(bound)
        .await
        .unwrap_or_else(|e| panic!("before wave {wave}: {e}"));
    let names = h.create_orders(size).await;
    h.wait_done(bound)
        .await
        .unwrap_or_else(|e| panic!("wave {wave}: {e}"));
    let running = h.running();
    let (shares, shared, strangers) =
        checks::shares(&h.ledger.snapshot().reports, &names, &running);
    Steady {
        wave,
        shares,
        shared,
        strangers,
        size,
    }
}
