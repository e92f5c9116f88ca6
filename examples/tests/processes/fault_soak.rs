//! API-fault soak: one `database` operator process runs its Databases'
//! workflows while the API server (`fsm-apiserver`, its own process)
//! answers writes with `500` and `409`, delays requests, drops every open
//! watch every few seconds and answers one watch of each resource with
//! `410 Gone`, and loses the answers of some writes it served — all
//! scripted over HTTP (`POST /testkit/faults`).
//!
//! At the end, the same checks as the crash soak (`crash_soak.rs`): every
//! Database rests in its expected state along the exact path of its
//! workflow, no transition twice, one create per Database in the cloud's
//! ledger; and the operator never panicked nor exited. Its memory is
//! sampled from `/proc/<pid>/status` (`VmRSS`) all along the run: the peak
//! of the run's second half must stay within a generous bound of the first
//! half's (`1.5 ×` plus 16 MiB), and under `SOAK_RSS_LIMIT_MIB`.
//!
//! The faults (each seeded):
//!
//! | fault | matches | share |
//! | --- | --- | --- |
//! | served, then answered `500` (the answer lost) | `create`, `update`, `patch`, `delete` of any resource | `SOAK_LOST_PERCENT` (5) |
//! | `500 InternalError`, not served | the same | `SOAK_ERROR_PERCENT` (20) |
//! | `409 Conflict` | `update` of any resource, `patch` of `databases` | `SOAK_CONFLICT_PERCENT` (10) |
//!
//! The shares are of all matching requests: each fault draws among the
//! requests the ones above it left. A real server answers `409` only to a
//! write with a precondition: an update (its `resourceVersion`), a patch of
//! the Database's finalizers or status; never to a create (that `409` means
//! "already exists") nor to the merge patch of the connection Secret.
//! | latency | any request | 5 % delayed 300 ms, 1 % delayed 2 s |
//! | dropped watches | every open watch | every `SOAK_DROP_MS` (3000) ms |
//! | `410 Gone` | the next watch of `databases`, of `secrets` | once each, half-way through |
//!
//! The knobs, for the long run documented in `docs/reliability.md`:
//!
//! | variable | default | what |
//! | --- | --- | --- |
//! | `SOAK_OBJECTS` | 30 | Databases, created in 10 waves |
//! | `SOAK_WAVE_MS` | 1000 | the pause between waves |
//! | `SOAK_SEED` | 1 | the seed of the faults and of the cloud's failures |
//! | `SOAK_FAILURE_PERCENT` | 20 | the share of cloud calls that fail |
//! | `SOAK_LOST_PERCENT` / `SOAK_ERROR_PERCENT` / `SOAK_CONFLICT_PERCENT` | 5 / 20 / 10 | see above |
//! | `SOAK_DROP_MS` | 3000 | the period of the watch drops |
//! | `SOAK_IDLE_SECS` | 5 | how long the operator runs on, under the same faults, once all rest |
//! | `SOAK_SETTLE_SECS` | 90 | how long the objects get to finish |
//! | `SOAK_RSS_LIMIT_MIB` | 256 | the bound on the operator's resident memory |
//! | `FSM_APISERVER` | next to this test's binary | the `fsm-apiserver` binary |

use crate::soak;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use soak::{
    Stack, check_outcome, create_up_to, http, knob, longest_stay, rejected_count, rss_kib, settle,
};

struct Knobs {
    objects: usize,
    wave: Duration,
    seed: u64,
    failure_percent: u64,
    lost_percent: u64,
    error_percent: u64,
    conflict_percent: u64,
    drop_every: Duration,
    idle: Duration,
    settle: Duration,
    rss_limit_kib: u64,
}

const WAVES: usize = 10;

impl Knobs {
    fn from_env() -> Knobs {
        let knobs = Knobs {
            objects: knob("SOAK_OBJECTS", 30) as usize,
            wave: Duration::from_millis(knob("SOAK_WAVE_MS", 1000)),
            seed: knob("SOAK_SEED", 1),
            failure_percent: knob("SOAK_FAILURE_PERCENT", 20),
            lost_percent: knob("SOAK_LOST_PERCENT", 5),
            error_percent: knob("SOAK_ERROR_PERCENT", 20),
            conflict_percent: knob("SOAK_CONFLICT_PERCENT", 10),
            drop_every: Duration::from_millis(knob("SOAK_DROP_MS", 3000).max(100)),
            idle: Duration::from_secs(knob("SOAK_IDLE_SECS", 5)),
            settle: Duration::from_secs(knob("SOAK_SETTLE_SECS", 90)),
            rss_limit_kib: knob("SOAK_RSS_LIMIT_MIB", 256) * 1024,
        };
        assert!(
            knobs.objects > 0
                && knobs.failure_percent <= 100
                && knobs.lost_percent + knobs.error_percent + knobs.conflict_percent < 100,
            "SOAK_OBJECTS > 0, SOAK_FAILURE_PERCENT ≤ 100, \
             SOAK_LOST_PERCENT + SOAK_ERROR_PERCENT + SOAK_CONFLICT_PERCENT < 100"
        );
        knobs
    }
}

/// Adds a fault over HTTP; returns its id.
async fn add_fault(stack: &Stack, spec: Value) -> u64 {
    let (code, body) = http(
        &stack.api_url,
        "POST",
        "/testkit/faults",
        Some(&spec.to_string()),
    )
    .await;
    assert_eq!(code, 201, "POST /testkit/faults {spec}: {body}");
    let answer: Value = serde_json::from_str(&body).expect("a JSON answer");
    answer["id"].as_u64().expect("the fault's id")
}

/// The faults' hits, by id.
async fn fault_hits(stack: &Stack) -> Vec<(u64, Value)> {
    let (code, body) = http(&stack.api_url, "GET", "/testkit/faults", None).await;
    assert_eq!(code, 200, "GET /testkit/faults: {body}");
    let listed: Value = serde_json::from_str(&body).expect("a JSON answer");
    listed["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|f| (f["id"].as_u64().unwrap_or(0), f.clone()))
        .collect()
}

/// Resident memory samples: (seconds since the operator started, KiB).
type Samples = Arc<Mutex<Vec<(f64, u64)>>>;

/// Samples the RSS of `pid` every 100 ms until it is gone or `stop` is set.
fn sample_rss(pid: u32, samples: Samples, stop: Arc<AtomicBool>) {
    let started = Instant::now();
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let Some(kib) = rss_kib(pid) else { return };
            samples
                .lock()
                .expect("the samples")
                .push((started.elapsed().as_secs_f64(), kib));
            std::thread::sleep(Duration::from_millis(100));
        }
    });
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_faults_lose_nothing_and_memory_stays_bounded() {
    let _turn = soak::ONE_AT_A_TIME.lock().await;
    let knobs = Knobs::from_env();
    let started = Instant::now();
    let mut stack = Stack::start("fault-soak", knobs.seed, knobs.failure_percent).await;
    let client = stack.client.clone();

    // The first answering fault that fires wins: each draws among the
    // requests the ones before it left, so that its share of all is its
    // knob's.
    let lost_p = knobs.lost_percent as f64 / 100.0;
    let error_p = knobs.error_percent as f64 / 100.0 / (1.0 - lost_p);
    let conflict_p = knobs.conflict_percent as f64
        / 100.0
        / (1.0 - (knobs.lost_percent + knobs.error_percent) as f64 / 100.0);
    let mut lost_ids = Vec::new();
    for (k, verb) in ["create", "update", "patch", "delete"].iter().enumerate() {
        lost_ids.push(
            add_fault(
                &stack,
                json!({"kind": "error", "code": 500, "verb": verb, "afterServing": true,
                       "probability": lost_p, "seed": knobs.seed * 100 + 30 + k as u64}),
            )
            .await,
        );
    }
    let mut error_ids = Vec::new();
    for (k, verb) in ["create", "update", "patch", "delete"].iter().enumerate() {
        error_ids.push(
            add_fault(
                &stack,
                json!({"kind": "error", "code": 500, "verb": verb,
                       "probability": error_p, "seed": knobs.seed * 100 + k as u64}),
            )
            .await,
        );
    }
    let mut conflict_ids = Vec::new();
    for (k, (verb, resource)) in [("update", None), ("patch", Some("databases"))]
        .into_iter()
        .enumerate()
    {
        conflict_ids.push(
            add_fault(
                &stack,
                json!({"kind": "error", "code": 409, "verb": verb, "resource": resource,
                       "probability": conflict_p, "seed": knobs.seed * 100 + 10 + k as u64}),
            )
            .await,
        );
    }
    let short_latency = add_fault(
        &stack,
        json!({"kind": "latency", "latencyMs": 300, "probability": 0.05,
               "seed": knobs.seed * 100 + 20}),
    )
    .await;
    let long_latency = add_fault(
        &stack,
        json!({"kind": "latency", "latencyMs": 2000, "probability": 0.01,
               "seed": knobs.seed * 100 + 21}),
    )
    .await;

    let mut operator = stack.operator(&[]);
    let pid = operator.pid();
    let samples: Samples = Arc::default();
    let stop_sampling = Arc::new(AtomicBool::new(false));
    sample_rss(pid, samples.clone(), stop_sampling.clone());

    // Every open watch ends every few seconds, as when connections to the
    // API server break.
    let api_url = stack.api_url.clone();
    let drop_every = knobs.drop_every;
    let drop_count = Arc::new(AtomicU64::new(0));
    let drops = tokio::spawn({
        let drop_count = drop_count.clone();
        async move {
            loop {
                tokio::time::sleep(drop_every).await;
                let (code, body) =
                    http(&api_url, "POST", "/testkit/faults/drop-watches", None).await;
                assert_eq!(code, 200, "drop-watches: {body}");
                drop_count.fetch_add(1, Ordering::Relaxed);
            }
        }
    });

    let mut created = 0;
    let mut gone_ids = Vec::new();
    for wave in 0..WAVES {
        let until = knobs.objects * (wave + 1) / WAVES;
        create_up_to(&client, &mut created, until).await;
        if wave == WAVES / 2 {
            // One 410 Gone for the next watch of each resource the
            // operator watches (after the next drop at the latest).
            for resource in ["databases", "secrets"] {
                gone_ids.push(
                    add_fault(
                        &stack,
                        json!({"kind": "gone", "resource": resource, "times": 1}),
                    )
                    .await,
                );
            }
        }
        tokio::time::sleep(knobs.wave).await;
    }
    let arrivals = started.elapsed();

    let records = settle(&client, knobs.objects, knobs.settle).await;
    let settled_at = started.elapsed();
    // The operator runs on, idle, under the same faults and drops: memory
    // that grows with time rather than with work shows here.
    tokio::time::sleep(knobs.idle).await;
    stop_sampling.store(true, Ordering::Relaxed);
    let total = started.elapsed();
    drops.abort();
    let drop_count = drop_count.load(Ordering::Relaxed);
    let hits = fault_hits(&stack).await;
    let hits_of = |ids: &[u64]| -> u64 {
        hits.iter()
            .filter(|(id, _)| ids.contains(id))
            .map(|(_, f)| f["hits"].as_u64().unwrap_or(0))
            .sum()
    };
    let (lost, errors, conflicts, gones) = (
        hits_of(&lost_ids),
        hits_of(&error_ids),
        hits_of(&conflict_ids),
        hits_of(&gone_ids),
    );
    let (short_delays, long_delays) = (hits_of(&[short_latency]), hits_of(&[long_latency]));
    let ledger = stack.ledger().await;
    let operator_exited = operator.exited();
    operator.stop();
    stack.stop();

    let per_database = check_outcome(
        &records,
        &ledger,
        &format!(
            "after {:.1}s under API faults ({lost} answers lost, {errors} × 500, {conflicts} × 409)",
            settled_at.as_secs_f64()
        ),
    );
    stack.assert_no_panic();
    assert!(!operator_exited, "the operator exited during the soak");
    // The soak must have faulted something: every kind fired.
    assert!(
        (knobs.lost_percent == 0 || lost > 0)
            && errors > 0
            && conflicts > 0
            && short_delays + long_delays > 0,
        "faults that never fired: {hits:#?}"
    );
    assert_eq!(
        gones, 2,
        "one 410 Gone for each watched resource: {hits:#?}"
    );

    let samples = samples.lock().expect("the samples").clone();
    assert!(samples.len() >= 10, "too few RSS samples: {samples:?}");
    let half = samples.last().map_or(0.0, |(t, _)| t / 2.0);
    let peak = |range: &mut dyn Iterator<Item = &(f64, u64)>| {
        range.map(|(_, kib)| *kib).max().unwrap_or(0)
    };
    let first_half = peak(&mut samples.iter().filter(|(t, _)| *t <= half));
    let second_half = peak(&mut samples.iter().filter(|(t, _)| *t > half));
    let last = samples.last().map_or(0, |(_, kib)| *kib);
    let overall = first_half.max(second_half);
    let (stay, stay_object, stay_state) = longest_stay(&records);
    println!(
        "fault soak: seed {}, {} objects ({} rejected seeds) in {} waves over {:.1}s, \
         all resting after {:.1}s, total {:.1}s; faults: {lost} writes served and answered 500, {errors} × 500, {conflicts} × 409, \
         {short_delays} × +300 ms, {long_delays} × +2 s, {drop_count} watch drops, {gones} × 410 Gone; \
         creates per database {per_database:?}; cloud: {} charges, {} injected failures, {} lost answers; \
         operator RSS: first-half peak {:.1} MiB, second-half peak {:.1} MiB, last {:.1} MiB \
         ({} samples); longest stay in a state {stay:.1}s ({stay_object} in {stay_state})",
        knobs.seed,
        knobs.objects,
        rejected_count(knobs.objects),
        WAVES,
        arrivals.as_secs_f64(),
        settled_at.as_secs_f64(),
        total.as_secs_f64(),
        ledger.charges.len(),
        ledger.injected_failures,
        ledger.lost_answers,
        mib(first_half),
        mib(second_half),
        mib(last),
        samples.len(),
    );
    assert!(
        overall <= knobs.rss_limit_kib,
        "the operator's RSS peaked at {:.1} MiB, over SOAK_RSS_LIMIT_MIB",
        mib(overall)
    );
    assert!(
        second_half as f64 <= first_half as f64 * 1.5 + 16.0 * 1024.0,
        "the operator's memory grew: first-half peak {:.1} MiB, second-half peak {:.1} MiB",
        mib(first_half),
        mib(second_half)
    );
}
