//! The benchmark driver: runs operator-fsm, a hand-written kube-rs operator
//! and a kopf operator on the same workload, one after the other, each
//! against a fresh standalone `fsm-apiserver`, and prints one table.
//!
//! ```text
//! cargo run -p bench --release -- --n 100,1000 [--impls fsm,fsm-chain,hand,kopf,deps]
//! ```
//!
//! `deps` is another workload: four dependents per object converged by a
//! `DependentsReconciler`, then one re-sync of every converged object,
//! measured on its own (`bench-dependents-operator`).
//!
//! See `docs/benchmarks.md` (and `bench/run.sh`, which also installs kopf).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bench::counting::counted_client;
use bench::report::{Resync, RunResult, dependents_table, table};
use bench::requests::{Counts, LogReader};
use bench::workload::{self, BenchApp, BenchAppSpec};
use clap::Parser;
use fsm_testkit::RequestLog;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use kube::{CustomResourceExt, ResourceExt};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The implementations, by label.
const IMPLEMENTATIONS: [&str; 5] = ["fsm", "fsm-chain", "hand", "kopf", "deps"];

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
    for &n in &args.n {
        for implementation in &args.impls {
            if implementation == "kopf" && n > args.kopf_max {
                eprintln!("# kopf skipped at N={n} (--kopf-max {})", args.kopf_max);
                continue;
            }
            eprintln!("# running {implementation} at N={n}");
            match run(&args, implementation, n).await {
                Ok(result) => {
                    eprintln!(
                        "# {implementation} N={n}: {}/{} ready in {:.2}s",
                        result.ready,
                        result.n,
                        result.wall.as_secs_f64()
                    );
                    results.push(result);
                }
                Err(e) => eprintln!("# {implementation} N={n} failed: {e}"),
            }
        }
        print_tables(&results);
    }
    println!("\n## all runs\n");
    print_tables(&results);
    Ok(())
}

/// The workflow's table, and the dependents workload's when it ran.
fn print_tables(results: &[RunResult]) {
    let (dependents, workflow): (Vec<RunResult>, Vec<RunResult>) =
        results.iter().cloned().partition(|r| r.resync.is_some());
    if !workflow.is_empty() {
        println!("{}", table(&workflow, "fsm"));
    }
    if !dependents.is_empty() {
        println!("{}", dependents_table(&dependents));
    }
}

/// How long a simulated Deployment takes to roll out, in milliseconds.
const ROLLOUT_MS: &str = "100";

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
        .args(["--simulate-workloads", ROLLOUT_MS])
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

async fn run(args: &Args, implementation: &str, n: u64) -> Result<RunResult, BoxError> {
    let dir = std::fs::canonicalize(&args.work_dir)?.join(format!("{implementation}-{n}"));
    std::fs::create_dir_all(&dir)?;
    let mut server = start_server(&dir).await?;
    let mut reader = LogReader::new(server.debug);

    // The driver's own requests, to subtract.
    let mine = Arc::new(RequestLog::new(usize::MAX));
    let kubeconfig = kube::config::Kubeconfig::read_from(&server.kubeconfig)?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    let client = counted_client(config.clone(), mine.clone())?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &BenchApp::crd())
        .await?;

    let log = std::fs::File::create(dir.join("operator.log"))?;
    let mut operator = operator_command(args, implementation)?
        .env("KUBECONFIG", &server.kubeconfig)
        .env("RUST_LOG", "warn")
        .stdout(log.try_clone()?)
        .stderr(log)
        .kill_on_drop(true)
        .spawn()?;
    let pid = operator.id().ok_or("the operator exited at once")?;

    // Start the clock once the operator watches the custom resource.
    let started = Instant::now();
    loop {
        reader.poll().await?;
        if reader
            .counts
            .sum(|v, r, _| v == "watch" && r == "benchapps")
            > 0
        {
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
        create_and_wait(&apps, n, args.timeout, &mut reader, &mut operator, &dir).await?;
    // Let trailing requests land (a steady run makes none), then measure.
    tokio::time::sleep(Duration::from_secs(1)).await;
    reader.poll().await?;
    let converging = reader.counts.clone();
    let resync = if implementation == "deps" {
        Some(resync(&mut reader, pid, n).await?)
    } else {
        None
    };
    let (peak_rss_kib, cpu) = usage(pid)?;
    let (_, server_cpu) = usage(server.child.id().ok_or("the server exited")?)?;
    operator.start_kill()?;
    let _ = operator.wait().await;
    reader.poll().await?;
    let _ = server.child.start_kill();
    let _ = server.child.wait().await;

    // For the dependents workload, the requests of converging: the
    // re-sync has its own.
    let counted = if resync.is_some() {
        &converging
    } else {
        &reader.counts
    };
    let requests = counted.minus(&Counts::of_log(&mine));
    Ok(RunResult {
        implementation: implementation.to_owned(),
        n,
        ready,
        wall,
        transitions: ready * workload::TRANSITIONS_PER_OBJECT,
        requests,
        peak_rss_kib,
        cpu,
        server_cpu,
        dropped: reader.dropped,
        resync,
    })
}

/// The resources of the dependents workload's four dependents.
const DEPENDENT_RESOURCES: [&str; 4] = ["configmaps", "secrets", "deployments", "services"];

/// Signals the dependents operator (`pid`) to re-sync its `n` converged
/// apps and measures it: done when every app has read its four dependents
/// (one GET each), plus one second for trailing requests (writes or
/// pruning lists, had there been any; an unchanged set lists nothing).
async fn resync(reader: &mut LogReader, pid: u32, n: u64) -> Result<Resync, BoxError> {
    let before = reader.counts.clone();
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
    let wall = loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        reader.poll().await?;
        let since = reader.counts.minus(&before);
        if reads(&since, "get") >= 4 * n {
            break t0.elapsed();
        }
        if t0.elapsed() > Duration::from_secs(300) {
            return Err("the re-sync did not finish in 300 s".into());
        }
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    reader.poll().await?;
    let (_, cpu_after) = usage(pid)?;
    Ok(Resync {
        requests: reader.counts.minus(&before),
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
    reader: &mut LogReader,
    operator: &mut Child,
    dir: &Path,
) -> Result<(u64, Duration), BoxError> {
    // Watch readiness.
    let (ready_tx, mut ready_rx) = tokio::sync::watch::channel((0u64, Instant::now()));
    let watch = tokio::spawn({
        let apps = apps.clone();
        async move {
            let mut ready = HashSet::new();
            let mut stream = watcher(apps, watcher::Config::default()).boxed();
            while let Ok(Some(event)) = stream.try_next().await {
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
