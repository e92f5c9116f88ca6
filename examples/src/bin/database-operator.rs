//! The `database` example operator as a standalone process, with the
//! framework's command line (`run`, `crd`, `rbac`, `diagram`, `status`).
//!
//! ```text
//! DATABASE_CLOUD_URL=http://127.0.0.1:PORT database-operator run --kubeconfig K
//! ```
//!
//! The cloud API's URL comes from `$DATABASE_CLOUD_URL` (the `fake-cloud`
//! binary prints it); `run` refuses to start without it. Logs go to stderr,
//! filtered by `RUST_LOG` (default: warnings). The crash soak
//! (`examples/tests/crash_soak.rs`) kills this process with SIGKILL again
//! and again.

use std::process::ExitCode;
use std::time::Duration;

use examples::database::{self, DbContext, DbState};
use fsm_kube::ReconcilerOptions;
use fsm_kube::cli::{Operator, Rule, RunContext, StoreKind};

/// The environment variable naming the cloud API's base URL.
const CLOUD_URL: &str = "DATABASE_CLOUD_URL";

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let is_run = std::env::args().nth(1).as_deref() == Some("run");
    let cloud_url = std::env::var(CLOUD_URL).ok();
    if is_run && cloud_url.is_none() {
        eprintln!("database-operator: set {CLOUD_URL} to the cloud API's URL");
        return ExitCode::from(2);
    }
    let cloud_url = cloud_url.unwrap_or_default();
    Operator::<DbState>::new("database-operator", StoreKind::Secret)
        .version(env!("CARGO_PKG_VERSION"))
        // The connection Secret, created or patched by `Credentials`.
        .rule(Rule::new("", "secrets", ["create", "patch"]))
        .main(move |run: RunContext| {
            let mut ctx = DbContext::new(run.client.clone(), cloud_url.clone());
            ctx.poll = Duration::from_millis(200);
            let options = ReconcilerOptions {
                poll_interval: Duration::from_secs(2),
                error_requeue: Duration::from_millis(300),
                // With --leader-elect: no handler runs once the hold lapses.
                leadership: run.leadership,
                ..ReconcilerOptions::default()
            };
            // `-n`: the Databases (and their records) of one namespace.
            database::run_in(run.client, run.namespace, ctx, options)
        })
        .await
}
