//! The sharding proof's operator: the five-step `Order` machine of
//! `integration_tests::sharding::machine`, with the framework's command
//! line (`run`, `crd`, `rbac`, ...). The proof (`tests/tests/sharding_proof.rs`)
//! and the benchmark (`shard-bench`) start several of these:
//!
//! ```text
//! shard-operator run --kubeconfig K -n NS --shards --shard-lease replica-1 \
//!     --lease-namespace NS --lease-duration 3 \
//!     --ledger-url http://127.0.0.1:PORT --replica replica-1 --work-ms 10
//! ```
//!
//! Logs go to stderr, filtered by `RUST_LOG` (default: warnings).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use fsm_kube::cli::{Operator, RunContext, StoreKind};
use futures::StreamExt;
use integration_tests::sharding::ledger::LedgerClient;
use integration_tests::sharding::machine::{OPERATOR, Order, OrderState, ProofContext};
use kube::runtime::Controller;

/// The proof operator's own flags of `run`.
#[derive(Clone, Debug, clap::Args)]
struct ProofArgs {
    /// The harness's ledger.
    #[arg(long, value_name = "URL", env = "PROOF_LEDGER_URL")]
    ledger_url: String,
    /// This replica's name in the ledger's reports.
    #[arg(long, value_name = "NAME", env = "PROOF_REPLICA")]
    replica: String,
    /// How long each handler works (a sleep), in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 10)]
    work_ms: u64,
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    Operator::<OrderState>::new(OPERATOR, StoreKind::Status)
        .with_args::<ProofArgs>()
        .version(env!("CARGO_PKG_VERSION"))
        .reconciler_options(
            fsm_kube::ReconcilerOptions::default()
                .events(false)
                .poll_interval(Duration::from_secs(3600))
                .error_requeue(Duration::from_millis(200)),
        )
        .main(|run: RunContext<OrderState, ProofArgs>| async move {
            let context = Arc::new(ProofContext {
                ledger: LedgerClient::new(run.args.ledger_url.clone()),
                replica: run.args.replica.clone(),
                work: Duration::from_millis(run.args.work_ms),
            });
            let fsm = run.reconciler();
            Controller::new(
                run.api::<Order>(),
                // Under --shards: only the objects labelled for this shard.
                run.watcher_config(),
            )
            .run(fsm.reconcile(), fsm.error_policy(), context)
            .for_each(|_| async {})
            .await;
        })
        .await
}
