//! The soaks' process harness, shared by `crash_soak.rs`, `fault_soak.rs`
//! and `failover.rs` (and `rbac.rs`, for `Proc`): the API server (`fsm-apiserver`) and the cloud API
//! (`fake-cloud`) as processes of their own, `database-operator` processes
//! to kill, the Databases' workflows and the checks made at the end of
//! every soak (each transition once, every object in its expected state,
//! one create per Database in the cloud's ledger, no panic).

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use examples::database::cloud::Ledger;
use examples::database::{Database, DatabaseSpec};
use examples::demo::observe::{Kind, read_record};
use examples::support::install_crd;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config, CustomResourceExt};
use operator_fsm::core::StateRecord;
use operator_fsm::store::RecordObject;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The tests of this binary take turns: each runs the API server, the
/// cloud and operator processes, kills them and measures what follows,
/// which another test's processes running at the same time would skew on
/// a small machine. Every test holds it for its whole run.
pub static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub const NS: &str = "default";
const GOOD: &str = "CREATE TABLE t (id int); INSERT INTO t VALUES (1);";
const BAD: &str = "CREATE TABLE t (id int); INSRT INTO t VALUES (1);";
/// One Database in this many has seed SQL the cloud rejects.
const BAD_EVERY: usize = 7;

pub const HAPPY: [(&str, &str); 5] = [
    ("Pending", "Provisioning"),
    ("Provisioning", "WaitingReady"),
    ("WaitingReady", "Seeding"),
    ("Seeding", "Credentials"),
    ("Credentials", "Ready"),
];
pub const REJECTED: [(&str, &str); 4] = [
    ("Pending", "Provisioning"),
    ("Provisioning", "WaitingReady"),
    ("WaitingReady", "Seeding"),
    ("Seeding", "Failed"),
];

/// A numeric knob from the environment.
pub fn knob(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
        Err(_) => default,
    }
}

/// splitmix64, seeded: the kill moments are the same for the same seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn between(&mut self, min: u64, max: u64) -> u64 {
        min + self.next() % (max - min + 1)
    }
}

/// A child process, killed (SIGKILL) and reaped when dropped, so that a
/// failing assertion leaves nothing running.
pub struct Proc {
    child: Child,
}

impl Proc {
    pub fn spawn(command: &mut Command) -> Proc {
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
        Proc { child }
    }

    /// The process id (for `/proc/<pid>/status`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, then reap.
    pub fn kill(mut self) {
        self.stop();
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits (bounded) for the process to exit by itself; its status, or
    /// `None` when it is still running after `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if std::time::Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Whether the process has exited (reaping it if so).
    pub fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits (bounded) for a stdout line starting with `prefix`; returns
    /// the rest of the line.
    pub fn line_after(&mut self, prefix: &'static str, timeout: Duration) -> String {
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

/// The resident set size of process `pid` in KiB (`VmRSS` in
/// `/proc/<pid>/status`); `None` once it has exited.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// `GET path` on `addr` over HTTP/1.0, with `token` as the bearer token
/// if any: the status line and the body.
pub async fn http_get(
    addr: std::net::SocketAddr,
    path: &str,
    token: Option<&str>,
) -> (String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let authorization = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("the web view answers");
    stream
        .write_all(
            format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n{authorization}\r\n").as_bytes(),
        )
        .await
        .expect("the request is sent");
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .await
        .expect("the answer is read");
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    (
        head.lines().next().unwrap_or_default().to_owned(),
        body.to_owned(),
    )
}

/// The run's scratch directory (kubeconfig, operator log), removed when
/// dropped, failed assertions included.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(prefix: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("{prefix}-{}", std::process::id()));
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
    // target/<profile>/deps/<test>-HASH → target/<profile>/fsm-apiserver
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

/// The processes that survive every kill, a client of the API server, and
/// the scratch directory. Fields drop in order: the processes stop before
/// the directory goes.
pub struct Stack {
    pub apiserver: Proc,
    pub cloud: Proc,
    /// `http://127.0.0.1:PORT` of the API server (the fault API included).
    pub api_url: String,
    pub cloud_url: String,
    pub client: Client,
    pub kubeconfig: PathBuf,
    pub operator_log: PathBuf,
    pub scratch: Scratch,
}

/// Whether the soak's `fake-cloud` honours creates' `Idempotency-Key`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloudKeys {
    /// Ignored: every create charges, and only the look-up by request id
    /// keeps a Database from being paid twice.
    Off,
    /// Honoured (`--idempotency-keys`): a create with a key seen before
    /// returns the first create's instance.
    On,
}

impl Stack {
    /// Starts `fsm-apiserver` and `fake-cloud` (failing `failure_percent`
    /// of its calls, seeded, idempotency keys ignored) and installs the
    /// Database CRD.
    pub async fn start(prefix: &str, seed: u64, failure_percent: u64) -> Stack {
        Stack::start_with(prefix, seed, failure_percent, CloudKeys::Off).await
    }

    /// [`Stack::start`], the cloud's idempotency keys as `keys` says.
    pub async fn start_with(
        prefix: &str,
        seed: u64,
        failure_percent: u64,
        keys: CloudKeys,
    ) -> Stack {
        let scratch = Scratch::new(prefix);
        let kubeconfig = scratch.0.join("kubeconfig");
        let operator_log = scratch.0.join("operator.log");
        let mut apiserver = Proc::spawn(
            Command::new(apiserver_binary())
                .args(["--port", "0", "--kubeconfig"])
                .arg(&kubeconfig)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::null()),
        );
        let api_url =
            apiserver.line_after("serving the Kubernetes API on", Duration::from_secs(20));
        let (cloud, cloud_url) = cloud(seed, failure_percent, keys, "127.0.0.1:0");
        let client = client(&kubeconfig).await;
        install_crd(&client, &Database::crd())
            .await
            .expect("the CRD is installed");
        Stack {
            apiserver,
            cloud,
            api_url,
            cloud_url,
            client,
            kubeconfig,
            operator_log,
            scratch,
        }
    }

    /// A `database-operator run` process with `extra` arguments, its
    /// stderr appended to the operator log.
    pub fn operator(&self, extra: &[&str]) -> Proc {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.operator_log)
            .expect("the operator's log file");
        Proc::spawn(
            Command::new(env!("CARGO_BIN_EXE_database-operator"))
                .args(["run", "--kubeconfig"])
                .arg(&self.kubeconfig)
                .args(extra)
                .env("DATABASE_CLOUD_URL", &self.cloud_url)
                .env("RUST_LOG", "warn")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log),
        )
    }

    /// The cloud's ledger.
    pub async fn ledger(&self) -> Ledger {
        ledger(&self.cloud_url).await
    }

    /// Fails the test if any operator process printed a panic.
    pub fn assert_no_panic(&self) {
        let log = std::fs::read_to_string(&self.operator_log).unwrap_or_default();
        assert!(
            !log.contains("panicked"),
            "an operator process panicked:\n{log}"
        );
    }

    /// Stops the API server and the cloud.
    pub fn stop(&mut self) {
        self.cloud.stop();
        self.apiserver.stop();
    }
}

/// A `fake-cloud` process listening at `listen` (port 0: a free one),
/// failing `failure_percent` of its calls (seeded), idempotency keys as
/// `keys` says, instances ready 200 ms after their create; the process
/// and its URL.
pub fn cloud(seed: u64, failure_percent: u64, keys: CloudKeys, listen: &str) -> (Proc, String) {
    cloud_ready_after(seed, failure_percent, keys, listen, "200ms")
}

/// [`cloud`] with instances ready `ready_after` (e.g. `"3s"`) after their
/// create: workflows that are sure to be mid-way for that long, for a test
/// that must interrupt some whatever the machine's speed.
pub fn cloud_ready_after(
    seed: u64,
    failure_percent: u64,
    keys: CloudKeys,
    listen: &str,
    ready_after: &str,
) -> (Proc, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_fake-cloud"));
    command
        .arg("--failure-rate")
        .arg((failure_percent as f64 / 100.0).to_string())
        .args(["--ready-after", ready_after, "--listen", listen, "--seed"])
        .arg(seed.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if keys == CloudKeys::On {
        command.arg("--idempotency-keys");
    }
    let mut cloud = Proc::spawn(&mut command);
    let url = cloud.line_after("listening on", Duration::from_secs(20));
    (cloud, url)
}

/// The ledger of the cloud at `cloud_url`.
pub async fn ledger(cloud_url: &str) -> Ledger {
    let (code, body) = http(cloud_url, "GET", "/v1/ledger", None).await;
    assert_eq!(code, 200, "GET /v1/ledger: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("not a ledger ({e}): {body}"))
}

async fn client(kubeconfig: &Path) -> Client {
    let kubeconfig = Kubeconfig::read_from(kubeconfig).expect("the kubeconfig");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("a client configuration");
    Client::try_from(config).expect("a client")
}

/// One HTTP/1.1 request to `base` (`http://host:port`), over a plain
/// connection; the answer's status code and body.
pub async fn http(base: &str, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
    let addr = base.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {addr}: {e}"));
    let body = body.unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.expect("a write");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .await
        .expect("an answer");
    let (head, body) = response.split_once("\r\n\r\n").expect("an HTTP answer");
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {head}"));
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_owned()
    };
    (code, body)
}

/// The body of a chunked HTTP/1.1 answer.
fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || tail.len() < size {
            break;
        }
        out.push_str(&tail[..size]);
        rest = tail[size..].trim_start_matches("\r\n");
    }
    out
}

pub fn name(i: usize) -> String {
    format!("db-{i:04}")
}

pub fn rejected(i: usize) -> bool {
    i % BAD_EVERY == BAD_EVERY - 1
}

/// The state Database `i` must rest in.
pub fn expected(i: usize) -> &'static str {
    if rejected(i) { "Failed" } else { "Ready" }
}

/// Creates Database `i`; retries an injected `500` and takes a `409`
/// (the create served, its answer lost) as done.
pub async fn create(client: &Client, i: usize) {
    create_in(client, NS, i).await;
}

/// [`create`] in namespace `ns`.
pub async fn create_in(client: &Client, ns: &str, i: usize) {
    let api: Api<Database> = Api::namespaced(client.clone(), ns);
    let spec = DatabaseSpec {
        engine: "postgres".into(),
        size: "small".into(),
        seed: if rejected(i) { BAD } else { GOOD }.into(),
    };
    let database = Database::new(&name(i), spec);
    for _ in 0..50 {
        match api.create(&PostParams::default(), &database).await {
            Ok(_) => return,
            Err(kube::Error::Api(s)) if s.code == 409 => return,
            Err(kube::Error::Api(s)) if s.code >= 500 => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("creating {}: {e}", name(i)),
        }
    }
    panic!("{} could not be created in 50 attempts", name(i));
}

/// Creates Databases `*created..until` (a wave), counting them in `created`.
pub async fn create_up_to(client: &Client, created: &mut usize, until: usize) {
    create_up_to_in(client, NS, created, until).await;
}

/// [`create_up_to`] in namespace `ns`.
pub async fn create_up_to_in(client: &Client, ns: &str, created: &mut usize, until: usize) {
    while *created < until {
        create_in(client, ns, *created).await;
        *created += 1;
    }
}

/// How many of the first `created` Databases are mid-workflow: no record
/// yet, or a record not resting in a final state. Read while no operator
/// runs, this is the number of workflows a kill interrupted.
pub async fn in_flight(client: &Client, created: usize) -> usize {
    in_flight_in(client, NS, created).await
}

/// [`in_flight`] in namespace `ns`.
pub async fn in_flight_in(client: &Client, ns: &str, created: usize) -> usize {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
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
pub fn rests_in(record: &StateRecord, state: &str) -> bool {
    record.state == state && !record.is_unwinding() && record.next_attempt_at.is_none()
}

/// `seq` contiguous, each from → to once.
pub fn check_no_repeats(name: &str, record: &StateRecord) {
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
pub fn check_history(name: &str, record: &StateRecord, path: &[(&str, &str)]) {
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

/// The records of the `objects` Databases, read every half second until
/// all rest in their expected state or `settle` has passed.
pub async fn settle(client: &Client, objects: usize, settle: Duration) -> Vec<Option<StateRecord>> {
    settle_in(client, NS, objects, settle).await
}

/// [`settle`] in namespace `ns`.
pub async fn settle_in(
    client: &Client,
    ns: &str,
    objects: usize,
    settle: Duration,
) -> Vec<Option<StateRecord>> {
    let deadline = Instant::now() + settle;
    loop {
        let mut records = Vec::with_capacity(objects);
        for i in 0..objects {
            records.push(
                read_record(client, ns, Kind::Database, &name(i))
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
            return records;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The end checks of every soak: for every object, settled or not, no
/// transition twice; every object in its expected state along the exact
/// path of its workflow; at most one create per Database in the ledger,
/// exactly one for each that got an instance, none for an unknown name;
/// the rejected ones' instances deleted. `context` goes into the failure
/// message. Returns how many Databases saw how many creates.
pub fn check_outcome(
    records: &[Option<StateRecord>],
    ledger: &Ledger,
    context: &str,
) -> BTreeMap<usize, usize> {
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
    let mut per_database = BTreeMap::<usize, usize>::new();
    for (i, record) in records.iter().enumerate() {
        let creates = ledger.creates_for(&name(i));
        *per_database.entry(creates).or_default() += 1;
        assert!(
            creates <= 1,
            "{} was created {creates} times: {:?}; its history: {:?}",
            name(i),
            ledger
                .charges
                .iter()
                .filter(|c| c.name == name(i))
                .collect::<Vec<_>>(),
            record.as_ref().map(|r| &r.history)
        );
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
        "{} of {} objects not in their expected state ({context}):\n{}",
        stragglers.len(),
        records.len(),
        stragglers.join("\n")
    );
    per_database
}

/// How many of `objects` Databases have seed SQL the cloud rejects.
pub fn rejected_count(objects: usize) -> usize {
    (0..objects).filter(|i| rejected(*i)).count()
}

/// The longest any object stayed in one state before leaving it, from the
/// histories' timestamps: (seconds, object, state). A crash-looping or
/// faulted operator starves objects; this says how close a state's
/// `timeout` came to firing.
pub fn longest_stay(records: &[Option<StateRecord>]) -> (f64, String, String) {
    let mut longest = (0.0, String::new(), String::new());
    for (i, record) in records.iter().enumerate() {
        let Some(record) = record else { continue };
        for pair in record.history.windows(2) {
            let secs = pair[1].at.duration_since(pair[0].at).as_secs_f64();
            if secs > longest.0 {
                longest = (secs, name(i), pair[0].to.clone());
            }
        }
    }
    longest
}
