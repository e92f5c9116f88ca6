//! Crash soak: the `database` operator is killed with SIGKILL at seeded
//! random moments and restarted, again and again, while its Databases run
//! their workflows; the API server (`fsm-apiserver`) and the cloud API
//! (`fake-cloud`) run as processes of their own and survive every kill.
//!
//! At the end every Database rests in its expected state (`Ready`, or
//! `Failed` for the ones whose seed SQL the cloud rejects), its history
//! shows each transition once (contiguous `seq`, each from → to once, the
//! exact path of the workflow), the cloud's ledger shows exactly one create
//! per Database (and the rejected ones' instances deleted), and no operator
//! process panicked.
//!
//! The default is the bounded CI run. The knobs, for the long run
//! documented in `docs/reliability.md`:
//!
//! | variable | default | what |
//! | --- | --- | --- |
//! | `SOAK_OBJECTS` | 30 | Databases |
//! | `SOAK_KILLS` | 10 | SIGKILLs of the operator |
//! | `SOAK_SEED` | 1 | the seed of the kill moments (and of the cloud's failures) |
//! | `SOAK_FAILURE_PERCENT` | 20 | the share of cloud calls that fail |
//! | `SOAK_MIN_MS` / `SOAK_MAX_MS` | 150 / 1200 | the operator's lifetime before each kill |
//! | `SOAK_SETTLE_SECS` | 60 | how long the last operator gets to finish |
//! | `FSM_APISERVER` | next to this test's binary | the `fsm-apiserver` binary |
//!
//! `fsm-apiserver` belongs to `fsm-testkit`: `cargo test --workspace` builds
//! it; alone, build it first (`cargo build -p fsm-testkit --bin fsm-apiserver`).

use crate::soak;

use std::time::{Duration, Instant};

use soak::{
    Rng, Stack, check_outcome, create_up_to, in_flight, knob, longest_stay, rejected_count, settle,
};

struct Knobs {
    objects: usize,
    kills: usize,
    seed: u64,
    failure_percent: u64,
    min_ms: u64,
    max_ms: u64,
    settle: Duration,
}

impl Knobs {
    fn from_env() -> Knobs {
        let knobs = Knobs {
            objects: knob("SOAK_OBJECTS", 30) as usize,
            kills: knob("SOAK_KILLS", 10) as usize,
            seed: knob("SOAK_SEED", 1),
            failure_percent: knob("SOAK_FAILURE_PERCENT", 20),
            min_ms: knob("SOAK_MIN_MS", 150),
            max_ms: knob("SOAK_MAX_MS", 1200),
            settle: Duration::from_secs(knob("SOAK_SETTLE_SECS", 60)),
        };
        assert!(knobs.objects > 0 && knobs.min_ms <= knobs.max_ms && knobs.failure_percent <= 100);
        knobs
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_operators_lose_nothing_and_pay_once() {
    let _turn = soak::ONE_AT_A_TIME.lock().await;
    let knobs = Knobs::from_env();
    let started = Instant::now();
    let mut stack = Stack::start("crash-soak", knobs.seed, knobs.failure_percent).await;
    let client = stack.client.clone();

    // Objects arrive in waves between kills, so that the kills land in the
    // middle of workflows all along the run.
    let mut rng = Rng(knobs.seed);
    let waves = knobs.kills + 1;
    let mut created = 0;
    let mut lifetimes = Vec::with_capacity(knobs.kills);
    let mut interrupted = Vec::with_capacity(knobs.kills);
    for wave in 0..waves {
        let until = knobs.objects * (wave + 1) / waves;
        create_up_to(&client, &mut created, until).await;
        if wave == knobs.kills {
            break;
        }
        let running = stack.operator(&[]);
        let lifetime = rng.between(knobs.min_ms, knobs.max_ms);
        tokio::time::sleep(Duration::from_millis(lifetime)).await;
        running.kill();
        lifetimes.push(lifetime);
        interrupted.push(in_flight(&client, created).await);
    }
    let kill_phase = started.elapsed();

    // The last operator finishes the work.
    let last = stack.operator(&[]);
    let records = settle(&client, knobs.objects, knobs.settle).await;
    let total = started.elapsed();
    let ledger = stack.ledger().await;
    last.kill();
    stack.stop();

    let per_database = check_outcome(
        &records,
        &ledger,
        &format!(
            "after {:?} (kill phase {:.1}s, {} kills)",
            knobs.settle,
            kill_phase.as_secs_f64(),
            lifetimes.len()
        ),
    );
    stack.assert_no_panic();

    // A soak whose kills all land between workflows proves nothing.
    let hits = interrupted.iter().filter(|n| **n > 0).count();
    assert!(
        knobs.kills == 0 || hits * 3 >= knobs.kills,
        "only {hits} of {} kills interrupted a workflow: {interrupted:?}",
        knobs.kills
    );

    let (stay, stay_object, stay_state) = longest_stay(&records);
    println!(
        "crash soak: seed {}, {} objects ({} rejected seeds), {} SIGKILLs \
         (operator lifetimes {}..{} ms, mean {} ms; {} kills interrupted workflows, \
         {} workflows interrupted in all, at most {} at once), kill phase {:.1}s, total {:.1}s; \
         creates per database {:?}; cloud: {} charges, {} deletes, {} injected failures, \
         {} lost answers; longest stay in a state {stay:.1}s ({stay_object} in {stay_state})",
        knobs.seed,
        knobs.objects,
        rejected_count(knobs.objects),
        lifetimes.len(),
        knobs.min_ms,
        knobs.max_ms,
        lifetimes.iter().sum::<u64>() / lifetimes.len().max(1) as u64,
        hits,
        interrupted.iter().sum::<usize>(),
        interrupted.iter().max().copied().unwrap_or(0),
        kill_phase.as_secs_f64(),
        total.as_secs_f64(),
        per_database,
        ledger.charges.len(),
        ledger.deleted.len(),
        ledger.injected_failures,
        ledger.lost_answers,
    );
}
