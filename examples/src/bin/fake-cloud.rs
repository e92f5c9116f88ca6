//! The `database` example's cloud API as its own process, so that a soak
//! can kill the operator without losing the ledger.
//!
//! ```text
//! fake-cloud [--seed N] [--failure-rate 0.2] [--ready-after 200ms] [--idempotency-keys]
//!            [--listen ADDR:PORT]
//! ```
//!
//! With `--idempotency-keys` a create honours its `Idempotency-Key` header
//! (see `examples::database::cloud`); without, the header is ignored and
//! every create charges.
//!
//! Listens on a free port of `127.0.0.1` (or at `--listen`: the real
//! cluster's node address, for operators running in pods), prints `listening on URL` on
//! stdout, and serves until interrupted (SIGINT or SIGTERM). The ledger is at
//! `GET URL/v1/ledger`.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use examples::database::cloud::{CloudConfig, CloudService};
use examples::support::parse_duration;

/// The `database` example's flaky cloud API, non-idempotent unless
/// `--idempotency-keys`.
#[derive(Parser, Debug)]
#[command(name = "fake-cloud")]
struct Args {
    /// The seed of the failure sequence.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// The share of calls that fail, from 0.0 to 1.0.
    #[arg(long, default_value_t = 0.2)]
    failure_rate: f64,
    /// How long an instance is `creating` (`200ms`, `1s`).
    #[arg(long, default_value = "800ms", value_parser = parse_duration)]
    ready_after: Duration,
    /// Honour the `Idempotency-Key` header of creates: a key seen before
    /// returns the first create's instance instead of creating another.
    #[arg(long)]
    idempotency_keys: bool,
    /// Where to listen (port 0: a free one).
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:0")]
    listen: std::net::SocketAddr,
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = Args::parse();
    if !(0.0..=1.0).contains(&args.failure_rate) {
        eprintln!(
            "fake-cloud: --failure-rate must be within 0.0..=1.0, not {}",
            args.failure_rate
        );
        return ExitCode::from(2);
    }
    let config = CloudConfig {
        seed: args.seed,
        failure_rate: args.failure_rate,
        ready_after: Some(args.ready_after),
        idempotency_keys: args.idempotency_keys,
    };
    let cloud = match CloudService::start_on(args.listen, config).await {
        Ok(cloud) => cloud,
        Err(e) => {
            eprintln!("fake-cloud: cannot listen: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut stdout = std::io::stdout();
    if writeln!(stdout, "listening on {}", cloud.url())
        .and_then(|()| stdout.flush())
        .is_err()
    {
        return ExitCode::FAILURE;
    }
    shutdown_signal().await;
    let ledger = cloud.ledger();
    eprintln!(
        "fake-cloud: stopping after {} creates, {} deletes, {} injected failures, {} replayed creates",
        ledger.charges.len(),
        ledger.deleted.len(),
        ledger.injected_failures,
        ledger.replays
    );
    ExitCode::SUCCESS
}
