//! `kubectl fsm`: the objects of operators built with operator-fsm, their
//! states, histories and machine, for any operator and any store, without
//! the machine's Rust type.
//!
//! The operator's `crd` command publishes the machine on its CRD (the
//! `operator-fsm.io/machine` annotation: the store, the states with their
//! marks, the arrows; see `fsm_kube::records::PublishedMachine`). The plugin finds
//! the CRD of the resource it is given ([`target`]), reads each object's
//! record where that store keeps it, by the stores' conventions
//! (`fsm_kube::records::rows`, through `fsm_kube::records::record_view`),
//! and never shows the data of a sensitive state.
//!
//! ```text
//! $ kubectl fsm get databases -n shop
//! NAME     STATE     ATTEMPT   IN-STATE   NEXT-RETRY   LAST-ERROR
//! orders   Seeding   2         40s        in 8s        connection refused
//! $ kubectl fsm describe databases orders -n shop
//! $ kubectl fsm diagram databases -o svg > databases.svg
//! $ kubectl fsm watch databases -A
//! $ kubectl fsm pause databases/orders -n shop
//! command 4 (pause) sent to shop/orders; the operator applies it on its next reconcile
//! $ kubectl fsm goto databases/orders Provisioning -n shop --wait=30s
//! ```
//!
//! `pause`, `resume`, `retry`, `goto` and `signal` write commands into the
//! object's `operator-fsm.io/commands` annotation ([`send`]).
//!
//! kubectl runs any executable named `kubectl-fsm` on `PATH` for
//! `kubectl fsm`; the binary of this crate is that executable.

mod args;
pub mod describe;
mod error;
pub mod send;
pub mod table;
pub mod target;
pub mod watch;

use std::collections::BTreeMap;
use std::io::Write;

pub use args::{
    ArgCommandArgs, Cli, Command, DescribeArgs, DiagramArgs, DiagramFormat, GetArgs, GetFormat,
    ObjectCommandArgs, ObjectName, Scope, SendArgs, SendFormat,
};
pub use error::Error;
use fsm_core::CommandAction;
use fsm_kube::cli::connect;
use fsm_kube::records::rows;
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
            let rows = rows::rows(&client, &target, namespace.as_deref()).await?;
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
                args.timeline,
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
                    let rows = rows::rows(&client, &target, namespace.as_deref()).await?;
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
        Command::Pause(args) => {
            send_command(&args.object, CommandAction::Pause, args.send, out).await
        }
        Command::Resume(args) => {
            send_command(&args.object, CommandAction::Resume, args.send, out).await
        }
        Command::Retry(args) => {
            send_command(&args.object, CommandAction::Retry, args.send, out).await
        }
        Command::Goto(args) => {
            let (object, state) = object_and_arg(&args)?;
            send_to(object, CommandAction::Goto(state), args.send, out).await
        }
        Command::Signal(args) => {
            let (object, signal) = object_and_arg(&args)?;
            send_to(object, CommandAction::Signal(signal), args.send, out).await
        }
    }
}

/// The object and the name `goto` and `signal` were given.
fn object_and_arg(args: &ArgCommandArgs) -> Result<(ObjectName, String), Error> {
    args.object_and_arg().ok_or_else(|| {
        let (_, object) = args.words.split_last().unwrap_or((&String::new(), &[]));
        Error::NoObject(object.join(" "))
    })
}

/// `pause`, `resume`, `retry`: the object `words` name.
async fn send_command(
    words: &[String],
    action: CommandAction,
    args: SendArgs,
    out: &mut (dyn Write + Send),
) -> Result<(), Error> {
    let object = ObjectName::parse(words).ok_or_else(|| Error::NoObject(words.join(" ")))?;
    send_to(object, action, args, out).await
}

/// Sends `action` to `object`, prints what was sent and, with `--wait`,
/// what became of it.
async fn send_to(
    object: ObjectName,
    action: CommandAction,
    args: SendArgs,
    out: &mut (dyn Write + Send),
) -> Result<(), Error> {
    let client = connect(&args.connect).await?;
    let target = target::resolve(&client, &object.resource).await?;
    if args.wait.is_some() {
        send::can_wait(&target)?;
    }
    let namespace = target.resource.namespaced.then(|| {
        args.namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_owned())
    });
    let by = args
        .by
        .clone()
        .filter(|by| !by.is_empty())
        .or_else(|| send::kubeconfig_user(&args.connect));
    let name = &object.name;
    let sent = send::send(&client, &target, namespace.as_deref(), name, action, by).await?;
    let shown = send::object_text(namespace.as_deref(), name);
    let outcome = match args.wait {
        None => None,
        Some(timeout) => {
            if args.output == SendFormat::Text {
                write_text(out, &send::sent_line(&sent.command, &shown))?;
            }
            Some(
                send::wait(
                    &client,
                    &target,
                    namespace.as_deref(),
                    name,
                    &sent.command,
                    timeout,
                )
                .await?,
            )
        }
    };
    match args.output {
        SendFormat::Text => {
            let text = match &outcome {
                None => send::sent_line(&sent.command, &shown),
                Some(outcome) => send::outcome_line(&sent.command, &shown, outcome),
            };
            // A refusal is said on stderr, as an error, with exit 1.
            if !matches!(outcome, Some(send::Outcome::Refused(_))) {
                write_text(out, &text)?;
            }
        }
        SendFormat::Json => {
            let report = send::Report::new(
                &target,
                namespace.as_deref(),
                name,
                &sent.command,
                outcome.as_ref(),
            );
            let mut json = serde_json::to_string_pretty(&report).map_err(Error::Json)?;
            json.push('\n');
            write_text(out, &json)?;
        }
    }
    match outcome {
        Some(send::Outcome::Refused(reason)) => Err(Error::Refused {
            seq: sent.command.seq,
            command: sent.command.to_string(),
            object: shown,
            reason,
        }),
        _ => Ok(()),
    }
}

/// Writes `text` to `out` and flushes.
fn write_text(out: &mut (dyn Write + Send), text: &str) -> Result<(), Error> {
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(Error::Output)
}
