//! The `database` example operator as a standalone process, with the
//! framework's command line (`run`, `crd`, `rbac`, `diagram`, `status`).
//!
//! ```text
//! DATABASE_CLOUD_URL=http://127.0.0.1:PORT database-operator run --kubeconfig K
//! database-operator run --kubeconfig K --cloud-url http://127.0.0.1:PORT
//! ```
//!
//! The cloud API's URL is an operator flag of `run`, `--cloud-url`, or
//! `$DATABASE_CLOUD_URL` (the `fake-cloud` binary prints it); `run` refuses
//! to start without it (a usage error, exit status 2). Logs go to stderr,
//! filtered by `RUST_LOG` (default: warnings). The crash soak
//! (`examples/tests/processes/crash_soak.rs`) kills this process with SIGKILL again
//! and again.

use std::process::ExitCode;
use std::time::Duration;

use examples::database::{self, DbContext, DbState};
use operator_fsm::ReconcilerOptions;
use operator_fsm::cli::{Operator, Rule, RunContext, StoreKind};

/// The operator's own flags of `run`.
#[derive(Clone, Debug, clap::Args)]
struct CloudArgs {
    /// The cloud API's base URL.
    #[arg(long, value_name = "URL", env = "DATABASE_CLOUD_URL")]
    cloud_url: String,
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
    Operator::<DbState>::new("database-operator", StoreKind::Secret)
        .with_args::<CloudArgs>()
        .version(env!("CARGO_PKG_VERSION"))
        // The connection Secret, created by `Credentials`, or read (is it
        // this Database's?) and patched.
        .rule(Rule::new("", "secrets", ["create", "get", "patch"]))
        .reconciler_options(
            ReconcilerOptions::default()
                .poll_interval(Duration::from_secs(2))
                .error_requeue(Duration::from_millis(300)),
        )
        .main(|run: RunContext<DbState, CloudArgs>| {
            let mut ctx = DbContext::new(run.client.clone(), run.args.cloud_url.clone());
            ctx.poll = Duration::from_millis(200);
            // Records in Secrets (of the watched namespace only under
            // `-n`), with the options above and, under --leader-elect, no
            // handler once the hold lapses.
            let fsm = run.reconciler();
            database::run_with(fsm, run.client, run.namespace, ctx)
        })
        .await
}
