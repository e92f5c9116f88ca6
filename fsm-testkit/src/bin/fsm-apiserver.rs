//! Runs the embedded API server standalone, for poking at it with `kubectl`.
//!
//! ```text
//! fsm-apiserver [--port PORT] [--kubeconfig PATH] [--debug-port PORT]
//!               [--simulate-workloads ROLLOUT_MS] [--help] [--version]
//! ```
//!
//! Listens on `127.0.0.1:PORT` (default: a free port), writes a kubeconfig to
//! `PATH` (default: `./fsm-testkit.kubeconfig`), prints both, and serves
//! until interrupted. With `--debug-port` (0 for a free port) it also serves
//! the request log as JSON on a second listener, at
//! `http://127.0.0.1:PORT/debug/requests` (see `fsm_testkit::debug`).
//! With `--simulate-workloads` Deployments and StatefulSets roll out after
//! `ROLLOUT_MS` milliseconds and Jobs succeed after the same delay, claims
//! are bound and CronJobs start their Jobs, inside the server (see
//! `fsm_testkit::simulation`): no client lists or patches them, so the
//! simulation costs the same at any number of objects.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use fsm_testkit::ApiServer;

#[derive(Debug)]
struct Args {
    port: u16,
    kubeconfig: PathBuf,
    debug_port: Option<u16>,
    simulate: Option<Duration>,
}

/// What the command line asks for.
#[derive(Debug)]
enum Command {
    /// Serve the API.
    Serve(Args),
    /// Print the usage and exit 0.
    Help,
    /// Print the version and exit 0.
    Version,
}

const USAGE: &str = "usage: fsm-apiserver [--port PORT] [--kubeconfig PATH] [--debug-port PORT] [--simulate-workloads ROLLOUT_MS]\n       fsm-apiserver --help | --version";

const HELP: &str = "\
fsm-apiserver: the embedded in-memory Kubernetes API server of fsm-testkit,
served over HTTP on loopback for kubectl and kubeconfig-based clients.
Everything is kept in memory and lost when it stops (Ctrl-C or SIGTERM).

Options:
  --port PORT                 listen on 127.0.0.1:PORT (default 0: a free port)
  --kubeconfig PATH           write the kubeconfig to PATH
                              (default ./fsm-testkit.kubeconfig)
  --debug-port PORT           also serve the request log as JSON on
                              http://127.0.0.1:PORT/debug/requests (0: a free port)
  --simulate-workloads MS     roll out Deployments and StatefulSets, and
                              complete Jobs, MS milliseconds after each change;
                              bind claims to fitting PersistentVolumes;
                              start CronJobs' Jobs on their schedule
  -h, --help                  print this help and exit
  -V, --version               print the version and exit

Then: kubectl --kubeconfig PATH get namespaces";

fn parse_command(args: impl Iterator<Item = String>) -> Result<Command, String> {
    let args: Vec<String> = args.collect();
    for a in &args {
        match a.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            "-V" | "--version" => return Ok(Command::Version),
            _ => {}
        }
    }
    parse_args(args.into_iter()).map(Command::Serve)
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut parsed = Args {
        port: 0,
        kubeconfig: PathBuf::from("fsm-testkit.kubeconfig"),
        debug_port: None,
        simulate: None,
    };
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) => (f.to_string(), Some(v.to_string())),
            None => (arg.clone(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))
        };
        match flag.as_str() {
            "--port" => {
                let v = value()?;
                parsed.port = v
                    .parse()
                    .map_err(|_| format!("--port: not a port number: {v:?}\n{USAGE}"))?;
            }
            "--kubeconfig" => parsed.kubeconfig = PathBuf::from(value()?),
            "--debug-port" => {
                let v = value()?;
                parsed.debug_port = Some(
                    v.parse()
                        .map_err(|_| format!("--debug-port: not a port number: {v:?}\n{USAGE}"))?,
                );
            }
            "--simulate-workloads" => {
                let v = value()?;
                let ms: u64 = v.parse().map_err(|_| {
                    format!("--simulate-workloads: not a number of milliseconds: {v:?}\n{USAGE}")
                })?;
                parsed.simulate = Some(Duration::from_millis(ms));
            }
            other => {
                return Err(format!(
                    "fsm-apiserver: unknown argument {other:?}\n{USAGE}\n(--help lists the flags)"
                ));
            }
        }
    }
    Ok(parsed)
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
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
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = match parse_command(std::env::args().skip(1)) {
        Ok(Command::Serve(a)) => a,
        Ok(Command::Help) => {
            println!("{HELP}");
            return ExitCode::SUCCESS;
        }
        Ok(Command::Version) => {
            println!(
                "fsm-apiserver {} (serves the Kubernetes API v1.{})",
                env!("CARGO_PKG_VERSION"),
                fsm_testkit::KUBERNETES_MINOR
            );
            return ExitCode::SUCCESS;
        }
        Err(msg) => {
            eprintln!("{msg}");
            return ExitCode::from(2);
        }
    };
    let server = ApiServer::new();
    // Runs until the server stops.
    let _simulation = args.simulate.map(|delay| {
        server.simulate(fsm_testkit::simulation::SimulationConfig {
            rollout_delay: delay,
            job_duration: delay,
            job_rules: Vec::new(),
        })
    });
    let addr = SocketAddr::from(([127, 0, 0, 1], args.port));
    let http = match server.serve_http_on(addr, Some(args.kubeconfig)).await {
        Ok(h) => h,
        Err(e) => {
            eprintln!("fsm-apiserver: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("serving the Kubernetes API on {}", http.url());
    println!("kubeconfig written to {}", http.kubeconfig().display());
    println!(
        "try: kubectl --kubeconfig {} get namespaces",
        http.kubeconfig().display()
    );
    if let Some(port) = args.debug_port {
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let listener = match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("fsm-apiserver: --debug-port: {e}");
                return ExitCode::FAILURE;
            }
        };
        if let Ok(addr) = listener.local_addr() {
            println!("request log on http://{addr}/debug/requests");
        }
        let router = fsm_testkit::debug::router(server.clone());
        tokio::spawn(axum::serve(listener, router).into_future());
    }
    shutdown_signal().await;
    println!("stopping after {} requests", server.request_log().total());
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, String> {
        parse_args(args.iter().map(|s| (*s).to_string()))
    }

    #[test]
    fn flags() {
        let a = parse(&["--port", "8080", "--kubeconfig=/tmp/kc"]).unwrap();
        assert_eq!(a.port, 8080);
        assert_eq!(a.kubeconfig, PathBuf::from("/tmp/kc"));
        let d = parse(&[]).unwrap();
        assert_eq!(d.port, 0);
        assert_eq!(d.debug_port, None);
        assert_eq!(parse(&["--debug-port", "0"]).unwrap().debug_port, Some(0));
        assert_eq!(d.simulate, None);
        assert_eq!(
            parse(&["--simulate-workloads", "250"]).unwrap().simulate,
            Some(Duration::from_millis(250))
        );
        assert!(
            parse(&["--simulate-workloads", "soon"])
                .unwrap_err()
                .contains("milliseconds")
        );
        assert!(parse(&["--port", "x"]).unwrap_err().contains("not a port"));
        assert!(parse(&["--port"]).unwrap_err().contains("needs a value"));
        assert!(
            parse(&["--bogus"])
                .unwrap_err()
                .contains("unknown argument")
        );
    }

    #[test]
    fn help_and_version_win_over_other_flags() {
        let cmd = |a: &[&str]| parse_command(a.iter().map(|s| (*s).to_string()));
        assert!(matches!(cmd(&["--help"]), Ok(Command::Help)));
        assert!(matches!(cmd(&["--port", "x", "-h"]), Ok(Command::Help)));
        assert!(matches!(cmd(&["--version"]), Ok(Command::Version)));
        assert!(matches!(cmd(&["--port", "1"]), Ok(Command::Serve(_))));
        for flag in [
            "--port",
            "--kubeconfig",
            "--debug-port",
            "--simulate-workloads",
        ] {
            assert!(HELP.contains(flag), "--help documents {flag}");
        }
    }
}
