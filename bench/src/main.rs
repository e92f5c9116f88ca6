//! The benchmark driver: runs operator-fsm, a hand-written kube-rs operator
//! and a kopf operator on the same workload, one after the other, each
//! against a fresh standalone `fsm-apiserver`, and prints one table.
//!
//! ```text
//! cargo run -p bench --release -- --n 100,1000 [--impls fsm,fsm-chain,hand,kopf,deps]
//!     [--server embedded,real]
//! ```
//!
//! `--server real` runs the same against a fresh real kube-apiserver 1.20
//! per run (`scripts/real-apiserver`), the workload simulated through a
//! client of the driver's, the operator's requests counted from the
//! apiserver's audit log of its own user (see `bench::audit`).
//! `--server cluster` runs it on the one-node cluster of
//! `scripts/real-cluster`, started afresh per run (as root), where nothing
//! is simulated: the Deployments' pods really run (on its `nginx:1.27`
//! stand-in), the requests counted from the same audit log.
//!
//! `deps` is another workload: four dependents per object converged by a
//! `DependentsReconciler`, then one re-sync of every converged object,
//! measured on its own (`bench-dependents-operator`); `hand-deps` is the
//! same workload written by hand with kube-rs, the baseline
//! (`bench-hand-dependents-operator`).
//!
//! See `docs/benchmarks.md` (and `bench/run.sh`, which also installs kopf).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bench::audit::AuditReader;
use bench::counting::counted_client;
use bench::real_server::{OPERATOR_USER, RealServer};
use bench::report::{Resync, RunResult, dependents_table, servers_side_by_side, table};
use bench::requests::{Counts, LogReader};
use bench::workload::{self, BenchApp, BenchAppSpec};
use clap::Parser;
use fsm_testkit::RequestLog;
use fsm_testkit::simulation::{Simulation, SimulationConfig};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{CustomResourceExt, ResourceExt};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The implementations, by label.
const IMPLEMENTATIONS: [&str; 6] = ["fsm", "fsm-chain", "hand", "kopf", "deps", "hand-deps"];

/// Whether `implementation` runs the dependents workload (with a re-sync
/// and a table of its own).
fn is_dependents(implementation: &str) -> bool {
    matches!(implementation, "deps" | "hand-deps")
}

/// Which API server the runs go against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ServerKind {
    /// A fresh standalone `fsm-apiserver` per run, simulating rollouts
    /// itself; requests counted from its request log.
    Embedded,
    /// A fresh real kube-apiserver 1.20 (and etcd) per run; rollouts
    /// simulated through the driver's client; requests counted from the
    /// audit log of the operator's own user.
    Real,
    /// The one-node cluster (`scripts/real-cluster`), started afresh per
    /// run: its controllers and kubelet really roll the Deployments out;
    /// requests counted as on `Real`.
    Cluster,
}

impl ServerKind {
    fn label(self) -> &'static str {
        match self {
            ServerKind::Embedded => "embedded",
            ServerKind::Real => "real",
            ServerKind::Cluster => "cluster",
        }
    }
}

#[derive(Parser, Debug)]
#[command(about = "operator-fsm against a hand-written kube-rs operator and kopf")]
struct Args {
    /// Object counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "100,1000,10000")]
    n: Vec<u64>,
    /// Implementations to run, comma-separated, among fsm, fsm-chain, hand,
    /// kopf, and `deps` (the dependents workload, in a table of its own).
    #[arg(long, value_delimiter = ',', default_value = "fsm,fsm-chain,hand,kopf")]
    impls: Vec<String>,
    /// `ReconcilerOptions::max_transitions` of the fsm-chain run.
    #[arg(long, default_value_t = 5)]
    chain: u32,
    /// The largest N kopf runs at.
    #[arg(long, default_value_t = 1000)]
    kopf_max: u64,
    /// Give up on a run after this many seconds.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    /// The Python of the virtual environment where kopf is installed.
    #[arg(long, default_value = "target/bench-venv/bin/python")]
    python: PathBuf,
    /// Where runs keep their kubeconfigs and operator logs.
    #[arg(long, default_value = "target/bench-runs")]
    work_dir: PathBuf,
    /// The API servers to run against, comma-separated, in order:
    /// `embedded` (fsm-apiserver), `real` (kube-apiserver 1.20), `cluster`
    /// (the one-node cluster of scripts/real-cluster, as root; mind its
    /// ~110 pods: each app's Deployment has 2).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "embedded")]
    server: Vec<ServerKind>,
    /// The directory of the driver's own real kube-apiserver instance
    /// (`FSM_REAL_APISERVER_DIR` of `scripts/real-apiserver/start`).
    #[arg(long, default_value = "target/bench-real-apiserver")]
    real_apiserver_dir: PathBuf,
    /// Where `scripts/real-apiserver/build` put kube-apiserver (its
    /// `bin/`), linked from `--real-apiserver-dir` when that has none.
    #[arg(long, default_value = "target/real-apiserver")]
    real_apiserver_build: PathBuf,
    /// The one-node cluster's directory (`FSM_REAL_CLUSTER_DIR` of
    /// `scripts/real-cluster/start`), for `--server cluster`; a cluster
    /// running there is stopped first. Its Go binaries come from
    /// `FSM_REAL_APISERVER_DIR` as the scripts find it.
    #[arg(long, default_value = "target/real-cluster")]
    cluster_dir: PathBuf,
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let args = Args::parse();
    for i in &args.impls {
        if !IMPLEMENTATIONS.contains(&i.as_str()) {
            return Err(format!("unknown implementation {i:?}; known: {IMPLEMENTATIONS:?}").into());
        }
    }
    std::fs::create_dir_all(&args.work_dir)?;
    let mut results = Vec::new();
    for &kind in &args.server {
        for &n in &args.n {
            for implementation in &args.impls {
                if implementation == "kopf" && n > args.kopf_max {
                    eprintln!("# kopf skipped at N={n} (--kopf-max {})", args.kopf_max);
                    continue;
                }
                let server = kind.label();
                eprintln!("# running {implementation} at N={n} on the {server} server");
                match run(&args, kind, implementation, n).await {
                    Ok(result) => {
                        eprintln!(
                            "# {implementation} N={n} ({server}): {}/{} ready in {:.2}s",
                            result.ready,
                            result.n,
                            result.wall.as_secs_f64()
                        );
                        results.push(result);
                    }
                    Err(e) => eprintln!("# {implementation} N={n} ({server}) failed: {e}"),
                }
            }
            print_tables(&results);
        }
    }
    println!("\n## all runs\n");
    print_tables(&results);
    Ok(())
}

/// The workflow's table, and the dependents workload's when it ran: one
/// each per server, then the operator's fair columns of both servers side
/// by side when both ran.
fn print_tables(results: &[RunResult]) {
    let servers: Vec<&str> = ["embedded", "real", "cluster"]
        .into_iter()
        .filter(|s| results.iter().any(|r| r.server == *s))
        .collect();
    for server in &servers {
        let (dependents, workflow): (Vec<RunResult>, Vec<RunResult>) = results
            .iter()
            .filter(|r| r.server == *server)
            .cloned()
            .partition(|r| r.resync.is_some());
        if servers.len() > 1 || *server != "embedded" {
            println!("### {}\n", server_title(server));
        }
        if !workflow.is_empty() {
            println!("{}", table(&workflow, "fsm"));
        }
        if !dependents.is_empty() {
            println!("{}", dependents_table(&dependents));
        }
    }
    // The workflow's runs side by side, when both servers ran some (the
    // dependents workload has no such table).
    let both = ["embedded", "real"]
        .iter()
        .all(|s| results.iter().any(|r| r.server == *s && r.resync.is_none()));
    if both {
        println!("### the operator on both servers (embedded / real)\n");
        println!("{}", servers_side_by_side(results));
    }
}

fn server_title(server: &str) -> &'static str {
    match server {
        "real" => "real kube-apiserver 1.20 (audit-log counts)",
        "cluster" => "real one-node cluster, real rollouts (audit-log counts)",
        _ => "embedded fsm-apiserver",
    }
}

/// How long a simulated Deployment takes to roll out, in milliseconds.
const ROLLOUT_MS: u64 = 100;

/// The standalone server of one run.
struct Server {
    child: Child,
    kubeconfig: PathBuf,
    debug: std::net::SocketAddr,
}

fn sibling(name: &str) -> Result<PathBuf, BoxError> {
    let exe = std::env::current_exe()?;
    Ok(exe.with_file_name(name))
}

async fn start_server(dir: &Path) -> Result<Server, BoxError> {
    let kubeconfig = dir.join("kubeconfig");
    let mut child = Command::new(sibling("fsm-apiserver")?)
        .args(["--port", "0", "--debug-port", "0", "--kubeconfig"])
        .arg(&kubeconfig)
        // Rollouts are simulated inside the server, driven by its change
        // stream: the simulation costs the same at any N and makes no
        // requests of its own.
        .args(["--simulate-workloads", &ROLLOUT_MS.to_string()])
        .env("RUST_LOG", "error")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let mut debug = None;
    let mut api = false;
    while let Some(line) = lines.next_line().await? {
        if line.starts_with("serving the Kubernetes API on") {
            api = true;
        }
        if let Some(rest) = line.strip_prefix("request log on http://") {
            debug = rest
                .strip_suffix("/debug/requests")
                .map(str::parse)
                .transpose()?;
        }
        if api && debug.is_some() {
            break;
        }
    }
    // Keep draining its output so it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(Server {
        child,
        kubeconfig,
        debug: debug.ok_or("the server printed no debug address")?,
    })
}

fn operator_command(args: &Args, implementation: &str) -> Result<Command, BoxError> {
    Ok(match implementation {
        "fsm" => Command::new(sibling("bench-fsm-operator")?),
        "fsm-chain" => {
            let mut c = Command::new(sibling("bench-fsm-operator")?);
            c.args(["--chain", &args.chain.to_string()]);
            c
        }
        "hand" => Command::new(sibling("bench-hand-operator")?),
        "deps" => Command::new(sibling("bench-dependents-operator")?),
        "hand-deps" => Command::new(sibling("bench-hand-dependents-operator")?),
        "kopf" => {
            let mut c = Command::new(&args.python);
            c.args([
                "-m",
                "kopf",
                "run",
                "--standalone",
                "--namespace",
                workload::NAMESPACE,
            ])
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/kopf/operator.py"))
            .env("PYTHONUNBUFFERED", "1");
            c
        }
        other => return Err(format!("unknown implementation {other}").into()),
    })
}

/// Peak RSS (KiB) and CPU time of process `pid`, from `/proc`.
fn usage(pid: u32) -> Result<(u64, Duration), BoxError> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or("no VmHWM")?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .ok_or("bad stat")?
        .1
        .split_whitespace()
        .collect();
    // utime, stime, cutime, cstime are fields 14..=17; `fields[0]` is field 3.
    let ticks: u64 = fields[11..15]
        .iter()
        .filter_map(|f| f.parse::<u64>().ok())
        .sum();
    // USER_HZ is 100 on Linux (`getconf CLK_TCK`).
    Ok((rss, Duration::from_millis(ticks * 10)))
}

/// Where the operator's requests are counted from.
enum Tally {
    /// The embedded server's request log, which has the driver's requests
    /// too (`mine`, subtracted at the end).
    Embedded {
        reader: LogReader,
        mine: Arc<RequestLog>,
    },
    /// The real server's audit log of the operator's user: nothing else.
    Real(AuditReader),
}

impl Tally {
    async fn poll(&mut self) -> Result<(), BoxError> {
        match self {
            Tally::Embedded { reader, .. } => reader.poll().await,
            Tally::Real(audit) => Ok(audit.poll()?),
        }
    }

    /// Every request counted so far (the embedded server's include the
    /// driver's).
    fn counts(&self) -> &Counts {
        match self {
            Tally::Embedded { reader, .. } => &reader.counts,
            Tally::Real(audit) => &audit.counts,
        }
    }

    /// The operator's requests among `counts`.
    fn operators(&self, counts: &Counts) -> Counts {
        match self {
            Tally::Embedded { mine, .. } => counts.minus(&Counts::of_log(mine)),
            Tally::Real(_) => counts.clone(),
        }
    }

    /// Whether the operator has started following the custom resource: its
    /// watch on the embedded server; its list or watch on the real one,
    /// which logs a watch only when it ends or sends its first event.
    fn operator_follows_apps(&self) -> bool {
        let counts = self.counts();
        match self {
            Tally::Embedded { .. } => counts.sum(|v, r, _| v == "watch" && r == "benchapps") > 0,
            Tally::Real(_) => {
                counts.sum(|v, r, _| matches!(v, "list" | "watch") && r == "benchapps") > 0
            }
        }
    }

    fn dropped(&self) -> usize {
        match self {
            Tally::Embedded { reader, .. } => reader.dropped,
            Tally::Real(_) => 0,
        }
    }
}

/// The server of one run, stopped when dropped.
enum Running {
    Embedded(Server),
    Real(RealServer),
}

impl Running {
    /// The PIDs whose CPU is the server's.
    fn pids(&self) -> Result<Vec<u32>, BoxError> {
        Ok(match self {
            Running::Embedded(s) => vec![s.child.id().ok_or("the server exited")?],
            Running::Real(s) => s.server_pids()?,
        })
    }

    /// The CPU time of the server's processes so far.
    fn cpu(&self) -> Result<Duration, BoxError> {
        let mut total = Duration::ZERO;
        for pid in self.pids()? {
            total += usage(pid)?.1;
        }
        Ok(total)
    }
}

/// Starts the server of one run: its handle, the driver's and the
/// operator's kubeconfigs, and where the operator's requests are counted.
async fn start(
    args: &Args,
    kind: ServerKind,
    dir: &Path,
) -> Result<(Running, PathBuf, PathBuf, Tally), BoxError> {
    Ok(match kind {
        ServerKind::Embedded => {
            let server = start_server(dir).await?;
            let tally = Tally::Embedded {
                reader: LogReader::new(server.debug),
                mine: Arc::new(RequestLog::new(usize::MAX)),
            };
            let kubeconfig = server.kubeconfig.clone();
            (
                Running::Embedded(server),
                kubeconfig.clone(),
                kubeconfig,
                tally,
            )
        }
        ServerKind::Real => {
            let server = RealServer::start(
                &std::path::absolute(&args.real_apiserver_dir)?,
                &args.real_apiserver_build,
            )
            .await?;
            let tally = Tally::Real(AuditReader::new(server.audit_log.clone(), OPERATOR_USER));
            let (driver, operator) = (
                server.admin_kubeconfig.clone(),
                server.operator_kubeconfig.clone(),
            );
            (Running::Real(server), driver, operator, tally)
        }
        ServerKind::Cluster => {
            let server =
                RealServer::start_cluster(&std::path::absolute(&args.cluster_dir)?).await?;
            let tally = Tally::Real(AuditReader::new(server.audit_log.clone(), OPERATOR_USER));
            let (driver, operator) = (
                server.admin_kubeconfig.clone(),
                server.operator_kubeconfig.clone(),
            );
            (Running::Real(server), driver, operator, tally)
        }
    })
}

/// Waits (at most 60 s) until the server serves the custom resource.
async fn wait_established(crds: &Api<CustomResourceDefinition>) -> Result<(), BoxError> {
    let name = BenchApp::crd_name();
    let t0 = Instant::now();
    loop {
        let crd = crds.get(name).await?;
        let established = crd
            .status
            .and_then(|s| s.conditions)
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "Established" && c.status == "True");
        if established {
            return Ok(());
        }
        if t0.elapsed() > Duration::from_secs(60) {
            return Err(format!("{name} not established in 60 s").into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn run(
    args: &Args,
    kind: ServerKind,
    implementation: &str,
    n: u64,
) -> Result<RunResult, BoxError> {
    let label = match kind {
        ServerKind::Embedded => format!("{implementation}-{n}"),
        ServerKind::Real => format!("real-{implementation}-{n}"),
        ServerKind::Cluster => format!("cluster-{implementation}-{n}"),
    };
    let dir = std::fs::canonicalize(&args.work_dir)?.join(label);
    std::fs::create_dir_all(&dir)?;
    let (server, driver_kubeconfig, operator_kubeconfig, mut tally) =
        start(args, kind, &dir).await?;

    let kubeconfig = kube::config::Kubeconfig::read_from(&driver_kubeconfig)?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    // The driver's own requests, to subtract from the embedded server's log
    // (the real server's audit log has the operator's only).
    let client = match &tally {
        Tally::Embedded { mine, .. } => counted_client(config.clone(), mine.clone())?,
        Tally::Real(_) => kube::Client::try_from(config.clone())?,
    };
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &BenchApp::crd())
        .await?;
    wait_established(&crds).await?;
    // No controllers roll Deployments out on the real server: the
    // simulation does, through the driver's client, as the embedded server
    // does inside itself. On the cluster they really roll out.
    let simulation = (kind == ServerKind::Real).then(|| {
        Simulation::through(
            client.clone(),
            Some(workload::NAMESPACE),
            SimulationConfig {
                rollout_delay: Duration::from_millis(ROLLOUT_MS),
                ..SimulationConfig::default()
            },
        )
    });

    let server_cpu_before = server.cpu()?;
    let log = std::fs::File::create(dir.join("operator.log"))?;
    let mut operator = operator_command(args, implementation)?
        .env("KUBECONFIG", &operator_kubeconfig)
        // BENCH_OPERATOR_LOG: the operator's log filter for a diagnosis
        // (its log is the run directory's operator.log).
        .env(
            "RUST_LOG",
            std::env::var("BENCH_OPERATOR_LOG").unwrap_or_else(|_| "warn".to_owned()),
        )
        .stdout(log.try_clone()?)
        .stderr(log)
        .kill_on_drop(true)
        .spawn()?;
    let pid = operator.id().ok_or("the operator exited at once")?;

    // Start the clock once the operator follows the custom resource.
    let started = Instant::now();
    loop {
        tally.poll().await?;
        if tally.operator_follows_apps() {
            break;
        }
        if let Some(status) = operator.try_wait()? {
            return Err(format!("the operator exited: {status}; see {}", dir.display()).into());
        }
        if started.elapsed() > Duration::from_secs(60) {
            return Err(format!("the operator never watched; see {}", dir.display()).into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let apps: Api<BenchApp> = Api::namespaced(client.clone(), workload::NAMESPACE);
    let (ready, wall) =
        create_and_wait(&apps, n, args.timeout, &mut tally, &mut operator, &dir).await?;
    // Let trailing requests land (a steady run makes none), then measure.
    tokio::time::sleep(Duration::from_secs(1)).await;
    tally.poll().await?;
    let converging = tally.counts().clone();
    let resync = if is_dependents(implementation) {
        Some(resync(&mut tally, pid, n).await?)
    } else {
        None
    };
    std::fs::write(
        dir.join("converging-requests.txt"),
        tally.operators(&converging).breakdown(),
    )?;
    if let Some(resync) = &resync {
        std::fs::write(dir.join("resync-requests.txt"), resync.requests.breakdown())?;
    }
    let (peak_rss_kib, cpu) = usage(pid)?;
    let server_cpu = server.cpu()?.saturating_sub(server_cpu_before);
    operator.start_kill()?;
    let _ = operator.wait().await;
    if let Some(simulation) = simulation {
        simulation.stop();
        // The real server logs the operator's open watches as they close.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    tally.poll().await?;
    match server {
        Running::Embedded(mut s) => {
            let _ = s.child.start_kill();
            let _ = s.child.wait().await;
        }
        // Stops it and removes its state.
        Running::Real(s) => drop(s),
    }

    // For the dependents workload, the requests of converging: the
    // re-sync has its own.
    let counted = if resync.is_some() {
        &converging
    } else {
        tally.counts()
    };
    let requests = tally.operators(counted);
    Ok(RunResult {
        implementation: implementation.to_owned(),
        server: kind.label().to_owned(),
        n,
        ready,
        wall,
        transitions: ready * workload::TRANSITIONS_PER_OBJECT,
        requests,
        peak_rss_kib,
        cpu,
        server_cpu,
        dropped: tally.dropped(),
        resync,
    })
}

/// The resources of the dependents workload's four dependents.
const DEPENDENT_RESOURCES: [&str; 4] = ["configmaps", "secrets", "deployments", "services"];

/// Signals the dependents operator (`pid`) to re-sync its `n` converged
/// apps and measures it. An operator that GETs its dependents is done
/// when every app has read its four (one GET each); one that reads them
/// from its watches' caches makes no request, and is done when its CPU
/// time stops growing (no tick for one second, after at least one
/// second). Then one more second for trailing requests (writes or pruning
/// lists, had there been any).
async fn resync(reader: &mut Tally, pid: u32, n: u64) -> Result<Resync, BoxError> {
    let before = reader.counts().clone();
    let (_, cpu_before) = usage(pid)?;
    let t0 = Instant::now();
    let signalled = std::process::Command::new("kill")
        .args(["-USR1", &pid.to_string()])
        .status()?;
    if !signalled.success() {
        return Err("could not signal the dependents operator".into());
    }
    let reads = |counts: &Counts, verb: &str| {
        counts.sum(|v, r, _| v == verb && DEPENDENT_RESOURCES.contains(&r))
    };
    let (mut last_cpu, mut last_change) = (cpu_before, t0);
    let wall = loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        reader.poll().await?;
        let since = reader.counts().minus(&before);
        if reads(&since, "get") >= 4 * n {
            break t0.elapsed();
        }
        let (_, cpu) = usage(pid)?;
        if cpu != last_cpu {
            (last_cpu, last_change) = (cpu, Instant::now());
        }
        if t0.elapsed() > Duration::from_secs(1) && last_change.elapsed() > Duration::from_secs(1) {
            break last_change - t0;
        }
        if t0.elapsed() > Duration::from_secs(300) {
            return Err("the re-sync did not finish in 300 s".into());
        }
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    reader.poll().await?;
    let (_, cpu_after) = usage(pid)?;
    Ok(Resync {
        requests: reader.counts().minus(&before),
        cpu: cpu_after.saturating_sub(cpu_before),
        wall,
    })
}

/// Creates N apps (16 in flight) and waits until a watch has seen all of
/// them ready, or `timeout` seconds: how many were ready, and the time
/// from the first create to the last ready.
async fn create_and_wait(
    apps: &Api<BenchApp>,
    n: u64,
    timeout: u64,
    reader: &mut Tally,
    operator: &mut Child,
    dir: &Path,
) -> Result<(u64, Duration), BoxError> {
    // Watch readiness.
    let (ready_tx, mut ready_rx) = tokio::sync::watch::channel((0u64, Instant::now()));
    let watch = tokio::spawn({
        let apps = apps.clone();
        async move {
            let mut ready = HashSet::new();
            // A watch error (a timeout, an expired resourceVersion at large
            // N) is retried after a backoff, not the end of the count.
            let mut stream = watcher(apps, watcher::Config::default())
                .default_backoff()
                .boxed();
            while let Some(event) = stream.next().await {
                let Ok(event) = event else { continue };
                let objects: Vec<BenchApp> = match event {
                    watcher::Event::Apply(o) | watcher::Event::InitApply(o) => vec![o],
                    _ => continue,
                };
                for o in objects {
                    if o.is_ready() && ready.insert(o.name_any()) {
                        let _ = ready_tx.send((ready.len() as u64, Instant::now()));
                    }
                }
            }
        }
    });

    let t0 = Instant::now();
    let creates = futures::stream::iter(0..n)
        .map(|i| {
            let apps = apps.clone();
            async move {
                let app = BenchApp::new(
                    &format!("app-{i:05}"),
                    BenchAppSpec {
                        image: "nginx:1.27".into(),
                        replicas: 2,
                    },
                );
                apps.create(&PostParams::default(), &app).await
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<_>>();
    let deadline = t0 + Duration::from_secs(timeout);
    let mut creates = std::pin::pin!(creates);
    let mut created = false;
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let finished = loop {
        tokio::select! {
            done = &mut creates, if !created => { done?; created = true; }
            _ = tick.tick() => {
                reader.poll().await?;
                if let Some(status) = operator.try_wait()? {
                    return Err(format!("the operator exited: {status}; see {}", dir.display()).into());
                }
                if Instant::now() > deadline { break None; }
            }
            changed = ready_rx.changed() => {
                changed?;
                let (count, at) = *ready_rx.borrow();
                if count == n { break Some(at); }
            }
        }
    };
    let (ready, _) = *ready_rx.borrow();
    watch.abort();
    Ok((ready, finished.unwrap_or_else(Instant::now) - t0))
}
