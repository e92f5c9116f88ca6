//! The command line of `kubectl fsm`: what each subcommand accepts. The
//! types only parse; [`crate::run`] acts on them.

use clap::{Args, Parser, Subcommand, ValueEnum};
use fsm_kube::cli::ConnectArgs;

/// `kubectl fsm`: the objects of an operator-fsm operator, their states,
/// histories and machine.
#[derive(Clone, Debug, PartialEq, Eq, Parser)]
#[command(
    name = "kubectl-fsm",
    bin_name = "kubectl fsm",
    about = "The state machines of operator-fsm operators: objects, histories, diagrams"
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
}
