//! Commands under crashes and leader handovers: while the Databases run
//! their workflows, a person pauses and resumes each of them again and
//! again through the `operator-fsm.io/commands` annotation (as `kubectl
//! fsm pause|resume` does), and the operator is killed with SIGKILL at
//! seeded random moments — one operator restarted (`crash`), or the leader
//! of three replicas, replaced each time (`handover`).
//!
//! At the end, for every Database: each command it was sent was taken
//! exactly once (the record's command log holds every number once, in
//! order, none refused: a pause taken twice would be refused as `already
//! paused`); it is not paused; no transition was committed while it was
//! paused (the history has no entry between a pause and its resume); and
//! the crash soak's checks hold (expected state along the exact path, one
//! create per Database in the cloud's ledger, no panic).
//!
//! | variable | default | what |
//! | --- | --- | --- |
//! | `SOAK_OBJECTS` | 12 | Databases |
//! | `SOAK_KILLS` | 8 | SIGKILLs (at most 8: each Database gets a command per kill and a log of 10) |
//! | `SOAK_SEED` | 1 | the seed of the kill moments (and of the cloud's failures) |
//! | `SOAK_MIN_MS` / `SOAK_MAX_MS` | 200 / 1000 | an operator's (leader's) lifetime before each kill |
//! | `SOAK_SETTLE_SECS` | 60 | how long the last operator gets to finish |

use crate::failover::{LEASE, REPLICAS, Replicas, holder, wait_for_leader};
use crate::soak;

use std::time::{Duration, Instant};

use examples::database::Database;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};
use operator_fsm::core::{Command, CommandAction, StateRecord};
use operator_fsm::records::COMMANDS_ANNOTATION;
use soak::{NS, Proc, Rng, Stack, check_outcome, create_up_to, knob, name, settle};

/// Who is killed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// The one operator, restarted after each kill.
    Crash,
    /// The leader of three `--leader-elect` replicas, replaced by a fresh
    /// one after each kill.
    Handover,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_are_taken_once_across_crashes() {
    run(Mode::Crash).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_are_taken_once_across_leader_handovers() {
    run(Mode::Handover).await;
}

/// The commands sent to one Database so far.
struct Sent {
    commands: Vec<Command>,
}

impl Sent {
    /// The next command: a pause after a resume (or at first), else a
    /// resume.
    fn next(&mut self) -> &[Command] {
        let action = match self.commands.last().map(|c| &c.action) {
            Some(CommandAction::Pause) => CommandAction::Resume,
            _ => CommandAction::Pause,
        };
        let seq = self.commands.len() as u64 + 1;
        self.commands
            .push(Command::new(seq, action).by("command-soak"));
        &self.commands
    }

    fn paused(&self) -> bool {
        matches!(
            self.commands.last().map(|c| &c.action),
            Some(CommandAction::Pause)
        )
    }
}

/// Writes Database `i`'s command list; retries what the API server fails.
async fn send(client: &Client, i: usize, commands: &[Command]) {
    let api: Api<Database> = Api::namespaced(client.clone(), NS);
    let patch = serde_json::json!({
        "metadata": {"annotations": {COMMANDS_ANNOTATION: Command::list_to_text(commands)}}
    });
    for _ in 0..50 {
        match api
            .patch(&name(i), &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(db) => {
                assert!(db.annotations().contains_key(COMMANDS_ANNOTATION));
                return;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    panic!("the commands of {} could not be written", name(i));
}

/// Sends every created Database its next command.
async fn command_round(client: &Client, sent: &mut [Sent], created: usize) {
    for (i, s) in sent.iter_mut().enumerate().take(created) {
        let commands = s.next().to_vec();
        send(client, i, &commands).await;
    }
}

async fn run(mode: Mode) {
    let _turn = soak::ONE_AT_A_TIME.lock().await;
    let objects = knob("SOAK_OBJECTS", 12) as usize;
    let kills = (knob("SOAK_KILLS", 8) as usize).min(8);
    let seed = knob("SOAK_SEED", 1);
    let (min_ms, max_ms) = (knob("SOAK_MIN_MS", 200), knob("SOAK_MAX_MS", 1000));
    let settle_for = Duration::from_secs(knob("SOAK_SETTLE_SECS", 60));
    let started = Instant::now();
    let prefix = match mode {
        Mode::Crash => "command-crash",
        Mode::Handover => "command-handover",
    };
    let mut stack = Stack::start(prefix, seed, 20).await;
    let client = stack.client.clone();
    let leases: Api<Lease> = Api::namespaced(client.clone(), NS);
    let mut replicas = Replicas {
        running: Vec::new(),
        started: 0,
        lease_secs: "2".to_owned(),
    };
    let mut single: Option<Proc> = None;
    let mut leader = String::new();
    if mode == Mode::Handover {
        for _ in 0..REPLICAS {
            replicas.start_one(&stack);
        }
        leader = wait_for_leader(&leases, &replicas, None, Duration::from_secs(30)).await;
    }

    let mut rng = Rng(seed);
    let mut sent: Vec<Sent> = (0..objects)
        .map(|_| Sent {
            commands: Vec::new(),
        })
        .collect();
    let mut created = 0;
    for wave in 0..kills {
        create_up_to(&client, &mut created, objects * (wave + 1) / (kills + 1)).await;
        if mode == Mode::Crash {
            single = Some(stack.operator(&[]));
        }
        // Commands land while the operator acts, halfway through its life.
        let lifetime = rng.between(min_ms, max_ms);
        tokio::time::sleep(Duration::from_millis(lifetime / 2)).await;
        command_round(&client, &mut sent, created).await;
        tokio::time::sleep(Duration::from_millis(lifetime / 2)).await;
        match mode {
            Mode::Crash => {
                if let Some(operator) = single.take() {
                    operator.kill();
                }
            }
            Mode::Handover => {
                assert!(replicas.kill(&leader), "the leader {leader} is not running");
                replicas.start_one(&stack);
                leader =
                    wait_for_leader(&leases, &replicas, Some(&leader), Duration::from_secs(30))
                        .await;
            }
        }
    }
    create_up_to(&client, &mut created, objects).await;
    // Every Database ends resumed.
    for (i, s) in sent.iter_mut().enumerate() {
        if s.paused() || s.commands.is_empty() {
            let commands = s.next().to_vec();
            send(&client, i, &commands).await;
        }
        if s.paused() {
            let commands = s.next().to_vec();
            send(&client, i, &commands).await;
        }
    }
    if mode == Mode::Crash {
        single = Some(stack.operator(&[]));
    }
    let records = settle_commands(&client, &sent, settle_for).await;
    let total = started.elapsed();
    let ledger = stack.ledger().await;
    let last_holder = holder(&leases).await;
    if let Some(operator) = single.take() {
        operator.kill();
    }
    for (_, process) in replicas.running.drain(..) {
        process.kill();
    }
    stack.stop();

    for (i, record) in records.iter().enumerate() {
        let record = record
            .as_ref()
            .unwrap_or_else(|| panic!("{} has no record", name(i)));
        check_commands(&name(i), record, &sent[i].commands);
    }
    let per_database = check_outcome(
        &records,
        &ledger,
        &format!("{mode:?}: after {settle_for:?}, lease holder {last_holder:?} ({LEASE})"),
    );
    stack.assert_no_panic();
    let commands: usize = sent.iter().map(|s| s.commands.len()).sum();
    println!(
        "command soak ({mode:?}): seed {seed}, {objects} objects, {kills} kills, {commands} \
         commands, each taken once, none run while paused; total {:.1}s; creates per \
         database {per_database:?}",
        total.as_secs_f64()
    );
}

/// The records, once every Database has taken every command sent and
/// rests in its expected state (or `bound` has passed).
async fn settle_commands(
    client: &Client,
    sent: &[Sent],
    bound: Duration,
) -> Vec<Option<StateRecord>> {
    let deadline = Instant::now() + bound;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let records = settle(client, sent.len(), left).await;
        let taken = records.iter().zip(sent).all(|(r, s)| {
            r.as_ref()
                .is_some_and(|r| r.command_seq == s.commands.len() as u64)
        });
        if taken || Instant::now() >= deadline {
            return records;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Every command taken once, in order, applied; not paused; no transition
/// committed while paused.
fn check_commands(name: &str, record: &StateRecord, sent: &[Command]) {
    let log: Vec<(u64, &str, Option<&str>)> = record
        .commands
        .iter()
        .map(|c| (c.seq, c.command.as_str(), c.refused.as_deref()))
        .collect();
    let expected: Vec<(u64, String, Option<&str>)> = sent
        .iter()
        .map(|c| (c.seq, c.action.to_string(), None))
        .collect();
    let expected: Vec<(u64, &str, Option<&str>)> = expected
        .iter()
        .map(|(seq, command, refused)| (*seq, command.as_str(), *refused))
        .collect();
    assert_eq!(log, expected, "{name}: the command log");
    assert_eq!(record.command_seq, sent.len() as u64, "{name}");
    assert_eq!(record.paused, None, "{name} is still paused");
    for pair in record.commands.chunks(2) {
        let [pause, resume] = pair else { continue };
        let during: Vec<_> = record
            .history
            .iter()
            .filter(|h| h.at > pause.at && h.at < resume.at)
            .collect();
        assert!(
            during.is_empty(),
            "{name}: transitions while paused ({} .. {}): {during:?}",
            pause.at,
            resume.at
        );
    }
}
