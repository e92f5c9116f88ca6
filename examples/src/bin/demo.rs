//! The main demo: `cargo run -p examples --bin demo`.
//!
//! Runs the five example operators against an embedded, in-memory
//! Kubernetes API server (or `--kubeconfig`'s cluster), shows their
//! progress, and exits 0 when every object rests in its expected state.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use examples::demo::{DemoOptions, run};
use examples::support::parse_duration;
use operator_fsm::core::text::display_chain;

/// Five operators written with operator-fsm, at work on an embedded API
/// server.
#[derive(Parser, Debug)]
#[command(name = "demo", version)]
struct Args {
    /// Give up after this long (`90s`, `2m`).
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    timeout: Duration,
    /// Keep the embedded API server up over HTTP for kubectl, and print its
    /// kubeconfig path; serve the web view (--view-addr).
    #[arg(long, conflicts_with = "kubeconfig")]
    serve: bool,
    /// With --serve: serve the web view of the machines here (read-only;
    /// port 0 picks a free one).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8090")]
    view_addr: std::net::SocketAddr,
    /// Run the operators against this kubeconfig's cluster instead.
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,
    /// With --kubeconfig: simulate Job and Deployment controllers there too,
    /// for an API server that runs none (fsm-apiserver); never on a real
    /// cluster.
    #[arg(long, requires = "kubeconfig")]
    simulate: bool,
    /// The namespace of the demo's objects.
    #[arg(long, default_value = "fsm-demo")]
    namespace: String,
    /// Print a line per change even on a terminal.
    #[arg(long)]
    plain: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    // Logs go to stderr, quiet unless RUST_LOG asks.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("off")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("demo: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let stdout = std::io::stdout();
    let options = DemoOptions {
        timeout: args.timeout,
        kubeconfig: args.kubeconfig,
        serve: args.serve,
        view: args.serve.then_some(args.view_addr),
        simulate: args.simulate,
        namespace: args.namespace,
        live: stdout.is_terminal() && !args.plain,
        ..DemoOptions::default()
    };
    let mut out = stdout.lock();
    match runtime.block_on(run(&options, &mut out)) {
        Ok(report) if report.success() => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(1),
        Err(e) => {
            eprintln!("demo: {}", display_chain(&e, ": "));
            ExitCode::from(2)
        }
    }
}
