//! The command line of `kubectl fsm`: what each subcommand accepts. The
//! types only parse; [`crate::run`] acts on them.

use clap::{Args, Parser, Subcommand, ValueEnum};
use fsm_kube::cli::ConnectArgs;

/// `kubectl fsm`: the objects of an operator-fsm operator, their states,
/// histories and machine, and the commands people send them.
#[derive(Clone, Debug, PartialEq, Eq, Parser)]
#[command(
    name = "kubectl-fsm",
    bin_name = "kubectl fsm",
    about = "The state machines of operator-fsm operators: objects, histories, diagrams, and commands to them"
)]
pub struct Cli {
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Clone, Debug, PartialEq, Eq, Subcommand)]
pub enum Command {
    /// List objects with their state, attempt, time in state, next retry
    /// and last error.
    Get(GetArgs),
    /// Show an object's record (history, last error, compensation), its
    /// conditions and its recent events.
    Describe(DescribeArgs),
    /// Print the machine's diagram, as published on the CRD.
    Diagram(DiagramArgs),
    /// Print a line each time an object's state, attempt or error changes.
    Watch(GetArgs),
    /// Ask the operator to pause an object: nothing runs for it (handlers,
    /// compensations, timeouts, spec changes) until `resume`; deletion
    /// still proceeds.
    #[command(
        override_usage = "kubectl fsm pause RESOURCE/NAME [OPTIONS]\n       kubectl fsm pause RESOURCE NAME [OPTIONS]"
    )]
    Pause(ObjectCommandArgs),
    /// Ask the operator to end an object's pause.
    #[command(
        override_usage = "kubectl fsm resume RESOURCE/NAME [OPTIONS]\n       kubectl fsm resume RESOURCE NAME [OPTIONS]"
    )]
    Resume(ObjectCommandArgs),
    /// Ask the operator to run an object now: a failed object starts again
    /// from the initial state, a state waiting for its next attempt runs
    /// at once with its attempts counted from zero.
    #[command(
        override_usage = "kubectl fsm retry RESOURCE/NAME [OPTIONS]\n       kubectl fsm retry RESOURCE NAME [OPTIONS]"
    )]
    Retry(ObjectCommandArgs),
    /// Ask the operator to move an object to STATE: a declared target of
    /// its current state, a state it has been in, or the initial state.
    /// A state the published machine does not have, or a failed state, is
    /// refused here, without writing.
    #[command(
        override_usage = "kubectl fsm goto RESOURCE/NAME STATE [OPTIONS]\n       kubectl fsm goto RESOURCE NAME STATE [OPTIONS]"
    )]
    Goto(ArgCommandArgs),
    /// Send an object a named signal that its current state declares
    /// (`on_signal`). A signal no state of the published machine declares
    /// is refused here, without writing, when the machine lists signals.
    #[command(
        override_usage = "kubectl fsm signal RESOURCE/NAME SIGNAL [OPTIONS]\n       kubectl fsm signal RESOURCE NAME SIGNAL [OPTIONS]"
    )]
    Signal(ArgCommandArgs),
}

/// Which objects: a namespace, or all of them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Args)]
pub struct Scope {
    /// The namespace (default: the kubeconfig's).
    #[arg(long, short = 'n', conflicts_with = "all_namespaces")]
    pub namespace: Option<String>,
    /// Every namespace.
    #[arg(long, short = 'A')]
    pub all_namespaces: bool,
}

/// An output format of `get`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum GetFormat {
    /// A table.
    #[default]
    Table,
    /// A JSON array of rows.
    Json,
}

/// `get` and `watch`.
#[derive(Clone, Debug, PartialEq, Eq, Args)]
pub struct GetArgs {
    /// The resource: its plural, singular, kind or short name, optionally
    /// with its group (`databases.example.io`).
    pub resource: String,
    /// Which objects.
    #[command(flatten)]
    pub scope: Scope,
    /// The output format (`get` only).
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: GetFormat,
    /// How to reach the API server.
    #[command(flatten)]
    pub connect: ConnectArgs,
}

/// `describe`.
#[derive(Clone, Debug, PartialEq, Eq, Args)]
pub struct DescribeArgs {
    /// The resource, as for `get`.
    pub resource: String,
    /// The object's name.
    pub name: String,
    /// The object's namespace (default: the kubeconfig's).
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
    /// Also draw the object's timeline: each state it entered as a bar of
    /// its duration, failed attempts, timeouts and commands as marks, and
    /// the compensation chain (from its record, no further request).
    #[arg(long)]
    pub timeline: bool,
    /// How to reach the API server.
    #[command(flatten)]
    pub connect: ConnectArgs,
}

/// A diagram format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum DiagramFormat {
    /// States, their marks and their arrows, for a terminal.
    #[default]
    Text,
    /// A standalone SVG document, with the number of objects in each state.
    Svg,
    /// The published graph as JSON.
    Json,
}

/// `diagram`.
#[derive(Clone, Debug, PartialEq, Eq, Args)]
pub struct DiagramArgs {
    /// The resource, as for `get`.
    pub resource: String,
    /// The format.
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: DiagramFormat,
    /// Which objects the SVG counts.
    #[command(flatten)]
    pub scope: Scope,
    /// How to reach the API server.
    #[command(flatten)]
    pub connect: ConnectArgs,
}

/// An output format of the commands (`pause`, `goto`…).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum SendFormat {
    /// A sentence: what was sent, and with `--wait` what became of it.
    #[default]
    Text,
    /// One JSON object: the command sent and, with `--wait`, its outcome.
    Json,
}

/// What the commands share: where the object is, who asks, whether to
/// wait, how to print, how to reach the API server.
#[derive(Clone, Debug, PartialEq, Eq, Args)]
pub struct SendArgs {
    /// The object's namespace (default: the kubeconfig's).
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
    /// Who asks, as recorded with the command (default: the user of the
    /// kubeconfig's context). Not authenticated: RBAC on the object decides
    /// who may send commands at all.
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
    /// Wait until the operator takes the command, then say whether it was
    /// applied or refused (exit 1 when refused or not taken in time).
    /// TIMEOUT is a duration such as `30s` or `2m` (default 60s).
    #[arg(
        long,
        value_name = "TIMEOUT",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "60s",
        value_parser = parse_timeout
    )]
    pub wait: Option<std::time::Duration>,
    /// The output format.
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: SendFormat,
    /// How to reach the API server.
    #[command(flatten)]
    pub connect: ConnectArgs,
}

/// `pause`, `resume` and `retry`: an object, as `RESOURCE/NAME` or
/// `RESOURCE NAME`.
#[derive(Clone, Debug, PartialEq, Eq, Args)]
pub struct ObjectCommandArgs {
    /// The object: `RESOURCE/NAME`, or `RESOURCE NAME` (the resource as
    /// for `get`).
    #[arg(value_name = "OBJECT", required = true, num_args = 1..=2)]
    pub object: Vec<String>,
    /// The rest.
    #[command(flatten)]
    pub send: SendArgs,
}

/// `goto` and `signal`: an object and a name (the state, the signal).
#[derive(Clone, Debug, PartialEq, Eq, Args)]
pub struct ArgCommandArgs {
    /// `RESOURCE/NAME STATE` or `RESOURCE NAME STATE` (for `signal`, the
    /// signal's name instead of the state).
    #[arg(value_name = "ARG", required = true, num_args = 2..=3)]
    pub words: Vec<String>,
    /// The rest.
    #[command(flatten)]
    pub send: SendArgs,
}

/// An object a command names: its resource and its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectName {
    /// The resource, as for `get`.
    pub resource: String,
    /// The object's name.
    pub name: String,
}

impl ObjectName {
    /// The object `words` name: `["RESOURCE/NAME"]` or `["RESOURCE",
    /// "NAME"]`; `None` for anything else.
    pub fn parse(words: &[String]) -> Option<Self> {
        let (resource, name) = match words {
            [one] => one.split_once('/')?,
            [resource, name] if !resource.contains('/') && !name.contains('/') => {
                (resource.as_str(), name.as_str())
            }
            _ => return None,
        };
        (!resource.is_empty() && !name.is_empty()).then(|| ObjectName {
            resource: resource.to_owned(),
            name: name.to_owned(),
        })
    }
}

impl ArgCommandArgs {
    /// The object and the last word (the state or the signal); `None` when
    /// the words do not name an object.
    pub fn object_and_arg(&self) -> Option<(ObjectName, String)> {
        let (last, object) = self.words.split_last()?;
        Some((ObjectName::parse(object)?, last.clone()))
    }
}

/// A `--wait` timeout: a duration such as `30s`, `2m` or `1m30s`.
fn parse_timeout(text: &str) -> Result<std::time::Duration, String> {
    let span: jiff::SignedDuration = text
        .parse()
        .map_err(|e| format!("{text:?} is not a duration such as 30s or 2m: {e}"))?;
    std::time::Duration::try_from(span)
        .map_err(|_| format!("{text:?} is negative: a timeout is a duration such as 30s"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn get_takes_a_namespace_or_all() {
        let cli = Cli::try_parse_from(["kubectl-fsm", "get", "jobs", "-A", "-o", "json"]).unwrap();
        let Command::Get(args) = cli.command else {
            panic!("not get");
        };
        assert_eq!(args.resource, "jobs");
        assert!(args.scope.all_namespaces);
        assert_eq!(args.output, GetFormat::Json);
        assert!(Cli::try_parse_from(["kubectl-fsm", "get", "jobs", "-A", "-n", "x"]).is_err());
    }

    fn parse(args: &[&str]) -> Command {
        let mut all = vec!["kubectl-fsm"];
        all.extend(args);
        Cli::try_parse_from(all).unwrap().command
    }

    #[test]
    fn commands_name_objects_as_resource_slash_name_or_two_words() {
        let Command::Pause(args) = parse(&["pause", "chores/c1", "-n", "shop"]) else {
            panic!("not pause");
        };
        assert_eq!(
            ObjectName::parse(&args.object),
            Some(ObjectName {
                resource: "chores".into(),
                name: "c1".into()
            })
        );
        assert_eq!(args.send.namespace.as_deref(), Some("shop"));
        let Command::Retry(args) = parse(&["retry", "chores", "c1"]) else {
            panic!("not retry");
        };
        assert_eq!(ObjectName::parse(&args.object).unwrap().name, "c1");
        for bad in [&["chores"][..], &["chores/"], &["/c1"], &["chores/c1", "x"]] {
            let words: Vec<String> = bad.iter().map(|w| (*w).to_owned()).collect();
            assert_eq!(ObjectName::parse(&words), None, "{bad:?}");
        }
    }

    #[test]
    fn goto_and_signal_take_the_object_then_the_name() {
        for words in [
            &["goto", "chores/c1", "Done"][..],
            &["goto", "chores", "c1", "Done"],
        ] {
            let Command::Goto(args) = parse(words) else {
                panic!("not goto");
            };
            let (object, state) = args.object_and_arg().unwrap();
            assert_eq!(
                (object.resource.as_str(), object.name.as_str()),
                ("chores", "c1")
            );
            assert_eq!(state, "Done");
        }
        let Command::Signal(args) = parse(&["signal", "chores", "Done"]) else {
            panic!("not signal");
        };
        assert_eq!(
            args.object_and_arg(),
            None,
            "a resource alone names no object"
        );
    }

    #[test]
    fn wait_takes_an_optional_timeout_after_an_equals_sign() {
        let wait = |args: &[&str]| match parse(args) {
            Command::Resume(args) => args.send.wait,
            other => panic!("{other:?}"),
        };
        assert_eq!(wait(&["resume", "chores/c1"]), None);
        assert_eq!(
            wait(&["resume", "chores/c1", "--wait"]),
            Some(std::time::Duration::from_secs(60))
        );
        assert_eq!(
            wait(&["resume", "chores/c1", "--wait=1m30s"]),
            Some(std::time::Duration::from_secs(90))
        );
        let error =
            Cli::try_parse_from(["kubectl-fsm", "resume", "chores/c1", "--wait=soon"]).unwrap_err();
        assert!(error.to_string().contains("not a duration"), "{error}");
    }
}
