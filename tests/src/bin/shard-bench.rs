//! What sharding costs and buys: the same N five-step workflows run by 1,
//! 2, 3 and 5 `shard-operator run --shards` replicas, one configuration
//! after the other, each on a fresh embedded API server (in this process).
//! For each it prints the wall time, the operator CPU time summed over the
//! replicas (user + system, from `/proc`), the transitions per second of
//! operator CPU, the replicas' peak RSS (`VmHWM`), the objects each owned
//! (its shard label at the end), and this process's CPU (the API server,
//! the ledger and the driver).
//!
//! ```text
//! cargo build --release -p integration-tests --bins
//! target/release/shard-bench [--objects 5000] [--replicas 1,2,3,5] [--work-ms 0]
//!                            [--lease-secs 5] [--election sharded|leader]
//! ```
//!
//! The `shard-operator` binary is taken from next to this one (or
//! `$SHARD_OPERATOR`). Results: docs/deploying.md ("What sharding costs
//! and buys") and docs/evidence.md.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use integration_tests::sharding::harness::{Election, Harness, figures};
use integration_tests::sharding::machine::TRANSITIONS;

/// The benchmark's flags.
#[derive(Debug, Parser)]
#[command(about = "Throughput and memory of sharded shard-operator replicas")]
struct Args {
    /// Orders per configuration.
    #[arg(long, default_value_t = 5000)]
    objects: usize,
    /// The replica counts to run, one after the other.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,5")]
    replicas: Vec<usize>,
    /// How long each handler sleeps, in milliseconds.
    #[arg(long, default_value_t = 0)]
    work_ms: u64,
    /// The Leases' duration, in seconds.
    #[arg(long, default_value_t = 5)]
    lease_secs: u64,
    /// `sharded` (`--shards`) or `leader` (`--leader-elect`: one replica
    /// works, the others wait).
    #[arg(long, default_value = "sharded")]
    election: String,
    /// The bound on one configuration's run, in seconds.
    #[arg(long, default_value_t = 900)]
    bound_secs: u64,
}

/// One configuration's figures.
struct Row {
    replicas: usize,
    wall_s: f64,
    operator_cpu_s: f64,
    rss_mib: Vec<f64>,
    owned: Vec<usize>,
    driver_cpu_s: f64,
}

fn operator_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("SHARD_OPERATOR") {
        return PathBuf::from(path);
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("shard-operator")))
        .unwrap_or_else(|| PathBuf::from("shard-operator"))
}

async fn run(args: &Args, election: Election, replicas: usize) -> Result<Row, String> {
    let scratch = std::env::temp_dir().join(format!("shard-bench-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).map_err(|e| e.to_string())?;
    let log = scratch.join(format!("operators-{replicas}.log"));
    let bound = Duration::from_secs(args.bound_secs);
    let mut h = Harness::start(
        &operator_binary(),
        &log,
        election,
        args.lease_secs,
        args.work_ms,
    )
    .await;
    let names: Vec<String> = (1..=replicas).map(|i| format!("replica-{i}")).collect();
    for name in &names {
        h.start_replica(name);
    }
    h.wait_leases(bound).await?;
    h.wait_ring(bound).await?;
    let driver_before = figures(std::process::id()).unwrap_or_default().cpu_s;
    let started = Instant::now();
    h.create_orders(args.objects).await;
    h.wait_done(bound).await?;
    let wall_s = started.elapsed().as_secs_f64();
    let driver_cpu_s = figures(std::process::id()).unwrap_or_default().cpu_s - driver_before;
    let mut operator_cpu_s = 0.0;
    let mut rss_mib = Vec::new();
    for name in &names {
        let f = h.figures(name).ok_or_else(|| format!("{name} exited"))?;
        operator_cpu_s += f.cpu_s;
        rss_mib.push(f.peak_rss_kib as f64 / 1024.0);
    }
    let owners = h.owners().await.map_err(|e| e.to_string())?;
    let owned = match election {
        Election::Sharded => names
            .iter()
            .map(|n| owners.get(n).copied().unwrap_or(0))
            .collect(),
        Election::Leader => vec![args.objects],
    };
    h.check_no_panic()?;
    drop(h);
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(Row {
        replicas,
        wall_s,
        operator_cpu_s,
        rss_mib,
        owned,
        driver_cpu_s,
    })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let args = Args::parse();
    let election = match args.election.as_str() {
        "sharded" => Election::Sharded,
        "leader" => Election::Leader,
        other => {
            eprintln!("--election is sharded or leader, not {other:?}");
            return ExitCode::from(2);
        }
    };
    let transitions = args.objects * TRANSITIONS;
    println!(
        "shard-bench: {} Orders x {TRANSITIONS} transitions = {transitions}, election {election:?}, \
         work {} ms per handler, leases {}s",
        args.objects, args.work_ms, args.lease_secs
    );
    println!(
        "| replicas | wall s | wall trans/s | operator CPU s (sum) | trans per operator CPU s \
         | peak RSS per replica MiB (mean, max) | objects per replica (min-max) | server+driver CPU s |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let mut failed = false;
    for &replicas in &args.replicas {
        match run(&args, election, replicas).await {
            Ok(row) => {
                let mean = row.rss_mib.iter().sum::<f64>() / row.rss_mib.len() as f64;
                let max = row.rss_mib.iter().copied().fold(0.0, f64::max);
                println!(
                    "| {} | {:.1} | {:.0} | {:.1} | {:.0} | {mean:.1}, {max:.1} | {}-{} | {:.1} |",
                    row.replicas,
                    row.wall_s,
                    transitions as f64 / row.wall_s,
                    row.operator_cpu_s,
                    transitions as f64 / row.operator_cpu_s,
                    row.owned.iter().min().unwrap_or(&0),
                    row.owned.iter().max().unwrap_or(&0),
                    row.driver_cpu_s,
                );
            }
            Err(error) => {
                println!("| {replicas} | failed: {error} |");
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
