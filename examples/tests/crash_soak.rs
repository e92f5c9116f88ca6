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

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use examples::database::cloud::Ledger;
use examples::database::{Database, DatabaseSpec};
use examples::demo::observe::{Kind, read_record};
use examples::support::install_crd;
use fsm_core::StateRecord;
use fsm_kube::store::RecordObject;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config, CustomResourceExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const NS: &str = "default";
const GOOD: &str = "CREATE TABLE t (id int); INSERT INTO t VALUES (1);";
const BAD: &str = "CREATE TABLE t (id int); INSRT INTO t VALUES (1);";
/// One Database in this many has seed SQL the cloud rejects.
const BAD_EVERY: usize = 7;

const HAPPY: [(&str, &str); 5] = [
    ("Pending", "Provisioning"),
    ("Provisioning", "WaitingReady"),
    ("WaitingReady", "Seeding"),
    ("Seeding", "Credentials"),
    ("Credentials", "Ready"),
];
const REJECTED: [(&str, &str); 4] = [
    ("Pending", "Provisioning"),
    ("Provisioning", "WaitingReady"),
    ("WaitingReady", "Seeding"),
    ("Seeding", "Failed"),
];

struct Knobs {
    objects: usize,
    kills: usize,
    seed: u64,
    failure_percent: u64,
    min_ms: u64,
    max_ms: u64,
    settle: Duration,
}

fn knob(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
        Err(_) => default,
    }
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

/// splitmix64, seeded: the kill moments are the same for the same seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn between(&mut self, min: u64, max: u64) -> u64 {
        min + self.next() % (max - min + 1)
    }
}

/// A child process, killed (SIGKILL) and reaped when dropped, so that a
/// failing assertion leaves nothing running.
struct Proc {
    child: Child,
}

impl Proc {
    fn spawn(command: &mut Command) -> Proc {
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
        Proc { child }
    }

    /// SIGKILL, then reap.
    fn kill(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits (bounded) for a stdout line starting with `prefix`; returns
    /// the rest of the line.
    fn line_after(&mut self, prefix: &'static str, timeout: Duration) -> String {
        let stdout = self.child.stdout.take().expect("stdout is piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if let Some(rest) = line.strip_prefix(prefix) {
                    let _ = tx.send(rest.trim().to_owned());
                }
                // Keep draining, so the child never blocks on a full pipe.
            }
        });
        rx.recv_timeout(timeout)
            .unwrap_or_else(|_| panic!("no line {prefix:?} within {timeout:?}"))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The run's scratch directory (kubeconfig, operator log), removed when
/// dropped, failed assertions included.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        let dir = std::env::temp_dir().join(format!("crash-soak-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn apiserver_binary() -> PathBuf {
    if let Ok(path) = std::env::var("FSM_APISERVER") {
        return PathBuf::from(path);
    }
    // target/<profile>/deps/crash_soak-HASH → target/<profile>/fsm-apiserver
    let exe = std::env::current_exe().expect("the test's path");
    let path = exe
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join("fsm-apiserver"))
        .expect("the target directory");
    assert!(
        path.exists(),
        "{} is missing: build it with `cargo build -p fsm-testkit --bin fsm-apiserver` \
         (cargo test --workspace does) or point FSM_APISERVER at it",
        path.display()
    );
    path
}

fn operator(kubeconfig: &Path, cloud_url: &str, log: &Path) -> Proc {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("the operator's log file");
    Proc::spawn(
        Command::new(env!("CARGO_BIN_EXE_database-operator"))
            .args(["run", "--kubeconfig"])
            .arg(kubeconfig)
            .env("DATABASE_CLOUD_URL", cloud_url)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log),
    )
}

async fn client(kubeconfig: &Path) -> Client {
    let kubeconfig = Kubeconfig::read_from(kubeconfig).expect("the kubeconfig");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("a client configuration");
    Client::try_from(config).expect("a client")
}

/// `GET /v1/ledger`, over a plain HTTP/1.1 connection.
async fn ledger(cloud_url: &str) -> Ledger {
    let addr = cloud_url.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("the cloud API");
    let request = format!("GET /v1/ledger HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("a write");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .await
        .expect("an answer");
    let (head, body) = response.split_once("\r\n\r\n").expect("an HTTP answer");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not a ledger ({e}): {body}"))
}

fn name(i: usize) -> String {
    format!("db-{i:04}")
}

fn rejected(i: usize) -> bool {
    i % BAD_EVERY == BAD_EVERY - 1
}

async fn create(client: &Client, i: usize) {
    let api: Api<Database> = Api::namespaced(client.clone(), NS);
    let spec = DatabaseSpec {
        engine: "postgres".into(),
        size: "small".into(),
        seed: if rejected(i) { BAD } else { GOOD }.into(),
    };
    api.create(&PostParams::default(), &Database::new(&name(i), spec))
        .await
        .expect("the Database is created");
}

/// How many of the first `created` Databases are mid-workflow: no record
/// yet, or a record not resting in a final state. Read while no operator
/// runs, this is the number of workflows a kill interrupted.
async fn in_flight(client: &Client, created: usize) -> usize {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let listed = secrets
        .list(&ListParams::default())
        .await
        .expect("the Secrets");
    let resting = listed
        .items
        .iter()
        .filter_map(|s| s.record_text()?.ok())
        .filter_map(|text| serde_json::from_str::<StateRecord>(&text).ok())
        .filter(|r| rests_in(r, "Ready") || rests_in(r, "Failed"))
        .count();
    created.saturating_sub(resting)
}

/// Whether the record rests in `state`: not compensating, no retry due.
fn rests_in(record: &StateRecord, state: &str) -> bool {
    record.state == state && !record.is_unwinding() && record.next_attempt_at.is_none()
}

/// `seq` contiguous, each from → to once.
fn check_no_repeats(name: &str, record: &StateRecord) {
    let history = &record.history;
    let seqs: Vec<u64> = history.iter().map(|h| h.seq).collect();
    let contiguous: Vec<u64> = (1..=history.len() as u64).collect();
    assert_eq!(seqs, contiguous, "{name}: seq not contiguous: {history:#?}");
    let mut seen = BTreeSet::new();
    for h in history {
        let pair = (h.from.clone(), h.to.clone());
        assert!(
            seen.insert(pair),
            "{name}: transition {:?} → {} twice: {history:#?}",
            h.from,
            h.to
        );
    }
}

/// The workflow's exact path, each transition once.
fn check_history(name: &str, record: &StateRecord, path: &[(&str, &str)]) {
    check_no_repeats(name, record);
    let history = &record.history;
    let mut expected = vec![(None, "Pending".to_owned())];
    expected.extend(
        path.iter()
            .map(|(from, to)| (Some((*from).to_owned()), (*to).to_owned())),
    );
    let actual: Vec<_> = history
        .iter()
        .map(|h| (h.from.clone(), h.to.clone()))
        .collect();
    assert_eq!(actual, expected, "{name}: unexpected path");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_operators_lose_nothing_and_pay_once() {
    let knobs = Knobs::from_env();
    let started = Instant::now();
    let scratch = Scratch::new();
    let dir = scratch.0.clone();
    let kubeconfig = dir.join("kubeconfig");
    let operator_log = dir.join("operator.log");

    let mut apiserver = Proc::spawn(
        Command::new(apiserver_binary())
            .args(["--port", "0", "--kubeconfig"])
            .arg(&kubeconfig)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null()),
    );
    apiserver.line_after("serving the Kubernetes API on", Duration::from_secs(20));
    let mut cloud = Proc::spawn(
        Command::new(env!("CARGO_BIN_EXE_fake-cloud"))
            .arg("--failure-rate")
            .arg((knobs.failure_percent as f64 / 100.0).to_string())
            .args(["--ready-after", "200ms", "--seed"])
            .arg(knobs.seed.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null()),
    );
    let cloud_url = cloud.line_after("listening on", Duration::from_secs(20));

    let client = client(&kubeconfig).await;
    install_crd(&client, &Database::crd())
        .await
        .expect("the CRD is installed");

    // Objects arrive in waves between kills, so that the kills land in the
    // middle of workflows all along the run.
    let mut rng = Rng(knobs.seed);
    let waves = knobs.kills + 1;
    let mut created = 0;
    let mut lifetimes = Vec::with_capacity(knobs.kills);
    let mut interrupted = Vec::with_capacity(knobs.kills);
    for wave in 0..waves {
        let until = knobs.objects * (wave + 1) / waves;
        while created < until {
            create(&client, created).await;
            created += 1;
        }
        if wave == knobs.kills {
            break;
        }
        let running = operator(&kubeconfig, &cloud_url, &operator_log);
        let lifetime = rng.between(knobs.min_ms, knobs.max_ms);
        tokio::time::sleep(Duration::from_millis(lifetime)).await;
        running.kill();
        lifetimes.push(lifetime);
        interrupted.push(in_flight(&client, created).await);
    }
    let kill_phase = started.elapsed();

    // The last operator finishes the work.
    let last = operator(&kubeconfig, &cloud_url, &operator_log);
    let expected = |i: usize| if rejected(i) { "Failed" } else { "Ready" };
    let deadline = Instant::now() + knobs.settle;
    let records: Vec<Option<StateRecord>> = loop {
        let mut records = Vec::with_capacity(knobs.objects);
        for i in 0..knobs.objects {
            records.push(
                read_record(&client, NS, Kind::Database, &name(i))
                    .await
                    .ok()
                    .flatten(),
            );
        }
        let settled = records
            .iter()
            .enumerate()
            .all(|(i, r)| r.as_ref().is_some_and(|r| rests_in(r, expected(i))));
        if settled || Instant::now() >= deadline {
            break records;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let total = started.elapsed();
    let ledger = ledger(&cloud_url).await;
    last.kill();
    cloud.stop();
    apiserver.stop();

    // Safety first, for every object, settled or not: no transition twice.
    let mut stragglers = Vec::new();
    for (i, record) in records.iter().enumerate() {
        let Some(record) = record else {
            stragglers.push(format!("{}: no record", name(i)));
            continue;
        };
        check_no_repeats(&name(i), record);
        if rests_in(record, expected(i)) {
            let path: &[_] = if rejected(i) { &REJECTED } else { &HAPPY };
            check_history(&name(i), record, path);
        } else {
            stragglers.push(format!(
                "{}: {} (expected {}), last error {:?}, path {:?}",
                name(i),
                record.state,
                expected(i),
                record.last_error,
                record
                    .history
                    .iter()
                    .map(|h| h.to.as_str())
                    .collect::<Vec<_>>()
            ));
        }
    }
    let mut per_database = std::collections::BTreeMap::<usize, usize>::new();
    for (i, record) in records.iter().enumerate() {
        let creates = ledger.creates_for(&name(i));
        *per_database.entry(creates).or_default() += 1;
        assert!(creates <= 1, "{} was created {creates} times", name(i));
        let got_an_instance = record
            .as_ref()
            .is_some_and(|r| r.history.iter().any(|h| h.to == "WaitingReady"));
        if got_an_instance {
            assert_eq!(creates, 1, "{} has an instance but no charge", name(i));
        }
        if rejected(i) && record.as_ref().is_some_and(|r| rests_in(r, "Failed")) {
            let charge = ledger
                .charges
                .iter()
                .find(|c| c.name == name(i))
                .expect("a charge");
            assert!(
                ledger.deleted.contains(&charge.instance_id),
                "{}'s instance {} was not deleted by the compensation",
                name(i),
                charge.instance_id
            );
        }
    }
    let charged: usize = per_database.get(&1).copied().unwrap_or(0);
    assert_eq!(ledger.charges.len(), charged, "creates for no Database");
    assert!(
        stragglers.is_empty(),
        "{} of {} objects not in their expected state after {:?} (kill phase {:.1}s, \
         {} kills):\n{}",
        stragglers.len(),
        knobs.objects,
        knobs.settle,
        kill_phase.as_secs_f64(),
        lifetimes.len(),
        stragglers.join("\n")
    );
    let log = std::fs::read_to_string(&operator_log).unwrap_or_default();
    assert!(
        !log.contains("panicked"),
        "an operator process panicked:\n{log}"
    );

    // A soak whose kills all land between workflows proves nothing.
    let hits = interrupted.iter().filter(|n| **n > 0).count();
    assert!(
        knobs.kills == 0 || hits * 3 >= knobs.kills,
        "only {hits} of {} kills interrupted a workflow: {interrupted:?}",
        knobs.kills
    );

    let rejected_count = (0..knobs.objects).filter(|i| rejected(*i)).count();
    println!(
        "crash soak: seed {}, {} objects ({} rejected seeds), {} SIGKILLs \
         (operator lifetimes {}..{} ms, mean {} ms; {} kills interrupted workflows, \
         {} workflows interrupted in all, at most {} at once), kill phase {:.1}s, total {:.1}s; \
         creates per database {:?}; cloud: {} charges, {} deletes, {} injected failures, \
         {} lost answers",
        knobs.seed,
        knobs.objects,
        rejected_count,
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
