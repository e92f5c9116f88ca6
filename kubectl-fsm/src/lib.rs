//! `kubectl fsm`: the objects of operators built with operator-fsm, their
//! states, histories and machine, for any operator and any store, without
//! the machine's Rust type.
//!
//! The operator's `crd` command publishes the machine on its CRD (the
//! `operator-fsm.io/machine` annotation: the store, the states with their
//! marks, the arrows; see `fsm_kube::cli::published`). The plugin finds
//! the CRD of the resource it is given ([`target`]), reads each object's
//! record where that store keeps it, by the stores' conventions
//! (`fsm_kube::view::records`, through `fsm_kube::cli::record_view`), and never shows
//! the data of a sensitive state.
//!
//! ```text
//! $ kubectl fsm get databases -n shop
//! NAME     STATE     ATTEMPT   IN-STATE   NEXT-RETRY   LAST-ERROR
//! orders   Seeding   2         40s        in 8s        connection refused
//! $ kubectl fsm describe databases orders -n shop
//! $ kubectl fsm diagram databases -o svg > databases.svg
//! $ kubectl fsm watch databases -A
//! ```
//!
//! kubectl runs any executable named `kubectl-fsm` on `PATH` for
//! `kubectl fsm`; the binary of this crate is that executable.

mod args;
pub mod describe;
mod error;
pub mod table;
pub mod target;
pub mod watch;

use std::collections::BTreeMap;
use std::io::Write;

pub use args::{Cli, Command, DescribeArgs, DiagramArgs, DiagramFormat, GetArgs, GetFormat, Scope};
pub use error::Error;
use fsm_kube::cli::connect;
use fsm_kube::view::records;
use kube::Client;

/// The namespace `scope` names: `None` for all namespaces, else its
/// namespace or the client's default.
fn namespace_of(scope: &Scope, client: &Client) -> Option<String> {
    (!scope.all_namespaces).then(|| {
        scope
            .namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_owned())
    })
}

/// Runs `command`, writing what it prints to `out`.
///
/// # Errors
/// [`Error`].
pub async fn run(command: Command, out: &mut (dyn Write + Send)) -> Result<(), Error> {
    let write = |out: &mut (dyn Write + Send), text: &str| {
        out.write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .map_err(Error::Output)
    };
    let now = jiff::Timestamp::now;
    match command {
        Command::Get(args) => {
            let client = connect(&args.connect).await?;
            let target = target::resolve(&client, &args.resource).await?;
            let namespace = namespace_of(&args.scope, &client);
            let rows = records::rows(&client, &target, namespace.as_deref()).await?;
            let text = match args.output {
                GetFormat::Table => table::render(
                    &rows,
                    now(),
                    namespace.is_none() && target.resource.namespaced,
                ),
                GetFormat::Json => {
                    let mut json = serde_json::to_string_pretty(&rows).map_err(Error::Json)?;
                    json.push('\n');
                    json
                }
            };
            write(out, &text)
        }
        Command::Describe(args) => {
            let client = connect(&args.connect).await?;
            let target = target::resolve(&client, &args.resource).await?;
            let text = describe::describe(
                &client,
                &target,
                args.namespace.as_deref(),
                &args.name,
                now(),
            )
            .await?;
            write(out, &text)
        }
        Command::Diagram(args) => {
            let client = connect(&args.connect).await?;
            let target = target::resolve(&client, &args.resource).await?;
            let graph = &target.machine.graph;
            let text = match args.output {
                DiagramFormat::Text => graph.text(),
                DiagramFormat::Json => {
                    let mut json = serde_json::to_string_pretty(graph).map_err(Error::Json)?;
                    json.push('\n');
                    json
                }
                DiagramFormat::Svg => {
                    let namespace = namespace_of(&args.scope, &client);
                    let rows = records::rows(&client, &target, namespace.as_deref()).await?;
                    let mut counts = BTreeMap::new();
                    for state in rows.iter().filter_map(|r| r.state.clone()) {
                        *counts.entry(state).or_insert(0) += 1;
                    }
                    graph.svg(Some(&counts))
                }
            };
            write(out, &text)
        }
        Command::Watch(args) => {
            let client = connect(&args.connect).await?;
            let target = target::resolve(&client, &args.resource).await?;
            let namespace = namespace_of(&args.scope, &client);
            watch::watch(&client, &target, namespace.as_deref(), out).await
        }
    }
}
