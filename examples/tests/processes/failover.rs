//! Failover: three `database-operator run --leader-elect` replicas share
//! a Lease; the one holding it is killed with SIGKILL again and again while
//! the Databases run their workflows, and a fresh replica (a new identity)
//! takes the dead one's place each time. The API server (`fsm-apiserver`)
//! and the cloud API (`fake-cloud`) are processes of their own.
//!
//! At the end, the crash soak's checks (`crash_soak.rs`): every Database
//! rests in its expected state along the exact path of its workflow, no
//! transition twice, exactly one create per Database in the cloud's
//! ledger, no panic. Each kill is followed by a handover: the Lease names
//! another, live replica within `SOAK_HANDOVER_SECS`.
//!
//! `paused_leaders_resume_and_nothing_happens_twice` pauses the leader
//! (SIGSTOP) instead of killing it, and resumes it (SIGCONT) once another
//! replica leads: two processes then act for the same objects for a while.
//! The cloud honours the creates' idempotency keys in both tests
//! (`fake-cloud --idempotency-keys`): the look-up by request id cannot stop
//! two processes that look up at once, the key can. `SOAK_CLOUD_KEYS=0`
//! turns the keys off, to measure what is left without them (the paused
//! test then fails now and then, naming the Database paid twice).
//!
//! `terminated_leaders_give_the_lease_up_and_nothing_commits_twice` sends
//! the leader SIGTERM instead, as Kubernetes does to a pod it stops (a
//! rolling update): the replica stops acting, gives the Lease up and exits
//! 0, and the next one takes it at its next look instead of waiting the
//! Lease's duration out (6 s there, so that the difference shows).
//!
//! The failover gap of a kill is the time from the SIGKILL to the next
//! transition committed (the first history entry `at` after the kill, from
//! the records at the end); printed with the Lease's handover time.
//!
//! | variable | default (killed / paused / terminated) | what |
//! | --- | --- | --- |
//! | `SOAK_OBJECTS` | 30 / 60 / 30 | Databases |
//! | `SOAK_KILLS` | 6 / 12 / 6 | SIGKILLs (pauses, SIGTERMs) of the leader |
//! | `SOAK_SEED` | 1 | the seed of the kill moments (and of the cloud's failures) |
//! | `SOAK_FAILURE_PERCENT` | 20 | the share of cloud calls that fail |
//! | `SOAK_LEASE_SECS` | 2 / 2 / 6 | the Lease's duration (`--lease-duration`; renewed every third of it) |
//! | `SOAK_MIN_MS` / `SOAK_MAX_MS` | 200 / 1000, 50 / 400, 200 / 1000 | how long a leader leads before it is killed (paused, terminated) |
//! | `SOAK_HANDOVER_SECS` | 30 | the bound on each handover |
//! | `SOAK_SETTLE_SECS` | 60 | how long the replicas get to finish after the last kill |
//! | `SOAK_CLOUD_KEYS` | 1 | 0: the cloud ignores idempotency keys |
//! | `FSM_APISERVER` | next to this test's binary | the `fsm-apiserver` binary |

use crate::soak;

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use soak::{
    CloudKeys, NS, Proc, Rng, Stack, check_outcome, create_up_to, in_flight, knob, longest_stay,
    rejected_count, settle,
};

pub(crate) const LEASE: &str = "database-operator-leader";
pub(crate) const REPLICAS: usize = 3;

/// What happens to the leader, again and again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// SIGKILL, and a fresh replica in its place.
    Kill,
    /// SIGSTOP until another replica leads, then SIGCONT.
    Pause,
    /// SIGTERM: it gives the Lease up and exits; a fresh replica in its
    /// place.
    Terminate,
}

impl Mode {
    fn past(self) -> &'static str {
        match self {
            Mode::Kill => "killed",
            Mode::Pause => "paused",
            Mode::Terminate => "terminated",
        }
    }
}

struct Knobs {
    objects: usize,
    kills: usize,
    seed: u64,
    failure_percent: u64,
    lease_secs: u64,
    min_ms: u64,
    max_ms: u64,
    handover: Duration,
    settle: Duration,
    keys: CloudKeys,
}

impl Knobs {
    /// The knobs, from the environment; the defaults depend on whether the
    /// leaders are paused (more objects, more and shorter reigns: the
    /// chances of a resumed leader meeting a create in flight).
    fn from_env(mode: Mode) -> Knobs {
        let (objects, kills, min_ms, max_ms, lease_secs) = match mode {
            Mode::Pause => (60, 12, 50, 400, 2),
            Mode::Kill => (30, 6, 200, 1000, 2),
            Mode::Terminate => (30, 6, 200, 1000, 6),
        };
        let knobs = Knobs {
            objects: knob("SOAK_OBJECTS", objects) as usize,
            kills: knob("SOAK_KILLS", kills) as usize,
            seed: knob("SOAK_SEED", 1),
            failure_percent: knob("SOAK_FAILURE_PERCENT", 20),
            lease_secs: knob("SOAK_LEASE_SECS", lease_secs).max(2),
            min_ms: knob("SOAK_MIN_MS", min_ms),
            max_ms: knob("SOAK_MAX_MS", max_ms),
            handover: Duration::from_secs(knob("SOAK_HANDOVER_SECS", 30)),
            settle: Duration::from_secs(knob("SOAK_SETTLE_SECS", 60)),
            keys: if knob("SOAK_CLOUD_KEYS", 1) == 0 {
                CloudKeys::Off
            } else {
                CloudKeys::On
            },
        };
        assert!(knobs.objects > 0 && knobs.min_ms <= knobs.max_ms && knobs.failure_percent <= 100);
        knobs
    }
}

/// The replicas, by identity.
pub(crate) struct Replicas {
    pub(crate) running: Vec<(String, Proc)>,
    pub(crate) started: usize,
    pub(crate) lease_secs: String,
}

impl Replicas {
    pub(crate) fn start_one(&mut self, stack: &Stack) {
        self.started += 1;
        let identity = format!("replica-{}", self.started);
        let process = stack.operator(&[
            "--leader-elect",
            "--lease-namespace",
            NS,
            "--lease-duration",
            &self.lease_secs,
            "--identity",
            &identity,
        ]);
        self.running.push((identity, process));
    }

    /// SIGKILLs the replica `identity`; `false` if it is not running.
    pub(crate) fn kill(&mut self, identity: &str) -> bool {
        let Some(at) = self.running.iter().position(|(id, _)| id == identity) else {
            return false;
        };
        let (_, process) = self.running.remove(at);
        process.kill();
        true
    }

    /// SIGTERMs the replica `identity` and waits (bounded) until it has
    /// exited; its exit status.
    fn terminate(&mut self, identity: &str) -> std::process::ExitStatus {
        let at = self
            .running
            .iter()
            .position(|(id, _)| id == identity)
            .unwrap_or_else(|| panic!("the replica {identity} is not running"));
        let (_, mut process) = self.running.remove(at);
        signal(process.pid(), "TERM");
        process
            .wait_exit(Duration::from_secs(20))
            .unwrap_or_else(|| panic!("{identity} did not exit within 20 s of SIGTERM"))
    }

    /// The process id of the replica `identity`.
    fn pid(&self, identity: &str) -> u32 {
        self.running
            .iter()
            .find(|(id, _)| id == identity)
            .map(|(_, process)| process.pid())
            .unwrap_or_else(|| panic!("the replica {identity} is not running"))
    }

    fn is_running(&self, identity: &str) -> bool {
        self.running.iter().any(|(id, _)| id == identity)
    }
}

/// The Lease's holder, if any.
pub(crate) async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases
        .get_opt(LEASE)
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec?.holder_identity)
}

/// Waits (bounded) until a running replica other than `not` holds the
/// Lease; its identity.
pub(crate) async fn wait_for_leader(
    leases: &Api<Lease>,
    replicas: &Replicas,
    not: Option<&str>,
    bound: Duration,
) -> String {
    let deadline = Instant::now() + bound;
    loop {
        if let Some(id) = holder(leases).await
            && Some(id.as_str()) != not
            && replicas.is_running(&id)
        {
            return id;
        }
        assert!(
            Instant::now() < deadline,
            "no live replica took the Lease within {bound:?} (holder: {:?})",
            holder(leases).await
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn stats(values: &mut [f64]) -> String {
    if values.is_empty() {
        return "none".into();
    }
    values.sort_by(f64::total_cmp);
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    format!(
        "min {:.2}s, median {:.2}s, mean {:.2}s, max {:.2}s (n = {})",
        values[0],
        values[values.len() / 2],
        mean,
        values[values.len() - 1],
        values.len()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_leaders_hand_over_and_nothing_commits_twice() {
    run(Mode::Kill).await;
}

/// A rolling update's way: SIGTERM. Each terminated leader exits 0 and no
/// longer holds the Lease when it has exited (it gave it up); the rest is
/// the kill test's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminated_leaders_give_the_lease_up_and_nothing_commits_twice() {
    run(Mode::Terminate).await;
}

/// The leader is paused (SIGSTOP) instead, until another replica holds the
/// Lease and has led for 50–600 ms, then resumed (SIGCONT): a zombie with
/// requests in flight, expired timers and stale caches. Its hold on the
/// Lease has lapsed by its own clock when it wakes, so the engine runs no
/// handler for it; but a pause between the last check and a create on the
/// wire is beyond any Lease, and the create-pending pattern (checkpointed
/// request id, look up, then create) is a check-then-act that two
/// processes can then interleave. With idempotency keys (the default) the
/// second create gets the first one's instance: one create per Database.
/// Without them (`SOAK_CLOUD_KEYS=0`, a measurement) a Database may be
/// created twice under one request id, the histories intact
/// (`docs/reliability.md`, "A paused leader").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_leaders_resume_and_nothing_happens_twice() {
    run(Mode::Pause).await;
}

/// Sends `signal` (`STOP`, `CONT`) to `pid`.
fn signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .expect("kill(1)");
    assert!(status.success(), "kill -{signal} {pid}: {status}");
}

/// Kills (or, with `pause`, pauses and later resumes) the leader again and
/// again; the end checks; the figures.
async fn run(mode: Mode) {
    let _turn = soak::ONE_AT_A_TIME.lock().await;
    let knobs = Knobs::from_env(mode);
    let started = Instant::now();
    let mut stack = Stack::start_with(
        match mode {
            Mode::Kill => "failover",
            Mode::Pause => "failover-paused",
            Mode::Terminate => "failover-terminated",
        },
        knobs.seed,
        knobs.failure_percent,
        knobs.keys,
    )
    .await;
    let client = stack.client.clone();
    let leases: Api<Lease> = Api::namespaced(client.clone(), NS);
    let mut replicas = Replicas {
        running: Vec::new(),
        started: 0,
        lease_secs: knobs.lease_secs.to_string(),
    };
    for _ in 0..REPLICAS {
        replicas.start_one(&stack);
    }

    let mut rng = Rng(knobs.seed);
    let waves = knobs.kills + 1;
    let mut created = 0;
    // (when killed, wall clock; handover time)
    let mut kills: Vec<(jiff::Timestamp, f64)> = Vec::with_capacity(knobs.kills);
    let mut interrupted = Vec::with_capacity(knobs.kills);
    let mut leader = wait_for_leader(&leases, &replicas, None, knobs.handover).await;
    for wave in 0..waves {
        let until = knobs.objects * (wave + 1) / waves;
        create_up_to(&client, &mut created, until).await;
        if wave == knobs.kills {
            break;
        }
        let lifetime = rng.between(knobs.min_ms, knobs.max_ms);
        tokio::time::sleep(Duration::from_millis(lifetime)).await;
        let killed_at = jiff::Timestamp::now();
        let killed_instant = Instant::now();
        if mode == Mode::Pause {
            let pid = replicas.pid(&leader);
            signal(pid, "STOP");
            interrupted.push(in_flight(&client, created).await);
            let next = wait_for_leader(&leases, &replicas, Some(&leader), knobs.handover).await;
            kills.push((killed_at, killed_instant.elapsed().as_secs_f64()));
            tokio::time::sleep(Duration::from_millis(rng.between(50, 600))).await;
            signal(pid, "CONT");
            leader = next;
            continue;
        }
        if mode == Mode::Terminate {
            let status = replicas.terminate(&leader);
            assert!(status.success(), "{leader} exited with {status} on SIGTERM");
            assert_ne!(
                holder(&leases).await.as_deref(),
                Some(leader.as_str()),
                "{leader} exited still holding the Lease"
            );
        } else {
            assert!(replicas.kill(&leader), "the leader {leader} is not running");
        }
        // Read before the Lease can expire: the workflows the kill cut.
        interrupted.push(in_flight(&client, created).await);
        replicas.start_one(&stack);
        let next = wait_for_leader(&leases, &replicas, Some(&leader), knobs.handover).await;
        kills.push((killed_at, killed_instant.elapsed().as_secs_f64()));
        leader = next;
    }
    let kill_phase = started.elapsed();

    let records = settle(&client, knobs.objects, knobs.settle).await;
    let total = started.elapsed();
    let ledger = stack.ledger().await;
    let last_holder = holder(&leases).await;
    for (_, process) in replicas.running.drain(..) {
        process.kill();
    }
    stack.stop();

    let per_database = check_outcome(
        &records,
        &ledger,
        &format!(
            "after {:?} (kill phase {:.1}s, {} leaders {}, holder now {last_holder:?})",
            knobs.settle,
            kill_phase.as_secs_f64(),
            kills.len(),
            mode.past()
        ),
    );
    stack.assert_no_panic();
    // Every Database reaches `WaitingReady`, the rejected ones included: so
    // exactly one create each.
    assert_eq!(
        per_database.get(&1).copied().unwrap_or(0),
        knobs.objects,
        "creates per database: {per_database:?}"
    );

    // The failover gap: from each kill to the first transition committed
    // after it (by whichever replica leads next).
    let commits: Vec<jiff::Timestamp> = records
        .iter()
        .flatten()
        .flat_map(|r| r.history.iter().map(|h| h.at))
        .collect();
    let mut gaps = Vec::new();
    for (k, (killed_at, _)) in kills.iter().enumerate() {
        let next_kill = kills.get(k + 1).map(|(at, _)| *at);
        let first = commits
            .iter()
            .filter(|at| *at > killed_at && next_kill.is_none_or(|n| **at < n))
            .min();
        if let Some(first) = first {
            let gap = first.duration_since(*killed_at);
            gaps.push(gap.as_secs_f64());
        }
    }
    let mut handovers: Vec<f64> = kills.iter().map(|(_, h)| *h).collect();
    let hits = interrupted.iter().filter(|n| **n > 0).count();
    assert!(
        knobs.kills == 0 || hits * 3 >= knobs.kills,
        "only {hits} of {} kills interrupted a workflow: {interrupted:?}",
        knobs.kills
    );
    assert!(
        gaps.len() * 2 >= kills.len(),
        "a commit followed only {} of {} kills before the next one",
        gaps.len(),
        kills.len()
    );
    let (stay, stay_object, stay_state) = longest_stay(&records);
    println!(
        "failover ({}): seed {}, {} objects ({} rejected seeds), {} replicas, {} leaders {} \
         (lease {}s; {} kills interrupted workflows, {} workflows interrupted in all), \
         kill phase {:.1}s, total {:.1}s; handover (kill → another replica holds the Lease): {}; \
         failover gap (kill → next transition committed): {}; creates per database {:?}; \
         cloud (idempotency keys {}): {} charges, {} injected failures, {} lost answers, \
         {} creates answered from their key; longest stay in a state {stay:.1}s \
         ({stay_object} in {stay_state})",
        match mode {
            Mode::Kill => "leaders killed",
            Mode::Pause => "leaders paused and resumed",
            Mode::Terminate => "leaders terminated",
        },
        knobs.seed,
        knobs.objects,
        rejected_count(knobs.objects),
        REPLICAS,
        kills.len(),
        mode.past(),
        knobs.lease_secs,
        hits,
        interrupted.iter().sum::<usize>(),
        kill_phase.as_secs_f64(),
        total.as_secs_f64(),
        stats(&mut handovers),
        stats(&mut gaps),
        per_database,
        if knobs.keys == CloudKeys::On {
            "on"
        } else {
            "off"
        },
        ledger.charges.len(),
        ledger.injected_failures,
        ledger.lost_answers,
        ledger.replays,
    );
}
