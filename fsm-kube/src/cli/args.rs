//! The clap types of the command line: what each subcommand accepts. They
//! only parse; [`Operator`](super::Operator) acts on them.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::view::web::ViewLimits;

/// The command line of an operator binary; `A` holds the operator's own
/// flags of `run` ([`Operator::with_args`](super::Operator::with_args)).
#[derive(Clone, Debug, PartialEq, Eq, Parser)]
#[command(about = "A Kubernetes operator built with operator-fsm")]
pub struct Cli<A: Args = ()> {
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command<A>,
}

/// The subcommands.
#[derive(Clone, Debug, PartialEq, Eq, Subcommand)]
#[allow(
    clippy::large_enum_variant,
    reason = "parsed once per process; boxing `run`'s arguments would change every match on `Command::Run`"
)]
pub enum Command<A: Args = ()> {
    /// Run the operator's controller(s).
    Run(RunArgs<A>),
    /// Print the CustomResourceDefinition of the operator's resource (YAML)
    ///
    /// The machine's diagram and store are published on it (the
    /// `operator-fsm.io/machine` annotation), for `kubectl fsm`.
    Crd(CrdArgs),
    /// Print the least ClusterRole (or Role) the operator needs (YAML).
    Rbac(RbacArgs),
    /// Print everything a cluster needs to run the operator (YAML).
    ///
    /// The CRD, a ServiceAccount, the least RBAC and its bindings, a
    /// Deployment and a PodDisruptionBudget, for `kubectl apply -f -`.
    Manifests(super::manifests::ManifestsArgs),
    /// Print the state machine's diagram.
    Diagram(DiagramArgs),
    /// Show an object's current state, attempt, last error and history.
    Status(StatusArgs),
    /// Say which stored records this build can run, before an upgrade or a rollback.
    ///
    /// Reads every record of the operator's kind where its store keeps
    /// them and says, for each, whether this build runs it as it is, loads
    /// a renamed state, migrates it, or cannot run it (written by a newer
    /// version of the machine, or unreadable). Exit status 3 when some
    /// record cannot be run. Writes nothing.
    Preflight(PreflightArgs),
    /// Rewrite every object of the resource at the storage version.
    ///
    /// Then remove the older versions from the CRD's
    /// `status.storedVersions`, so that a later build may drop them
    /// (`preflight` says when that is needed). The API does not tell which
    /// objects are still at an old version, so every object is written
    /// back as read; run it while the operator (serving the conversion) is
    /// running.
    MigrateStorage(MigrateStorageArgs),
}

/// How to reach the API server.
#[derive(Clone, Debug, Default, PartialEq, Eq, Args)]
pub struct ConnectArgs {
    /// The kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then the
    /// in-cluster service account).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (default: its current context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
}

/// `run`.
#[derive(Clone, Debug, PartialEq, Eq, Args)]
pub struct RunArgs<A: Args = ()> {
    /// How to reach the API server.
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Watch this namespace only (default: all namespaces).
    #[arg(long, short = 'n', env = "WATCH_NAMESPACE")]
    pub namespace: Option<String>,
    /// Serve `GET /metrics` (Prometheus), `/healthz` and `/readyz` on this
    /// address (`--metrics-addr` is an alias).
    #[arg(long, value_name = "ADDR", env = "HTTP_ADDR", alias = "metrics-addr")]
    pub http_addr: Option<SocketAddr>,
    /// Serve the web view of the machines and their objects on this
    /// address (read-only; alone, `--view-addr` means 127.0.0.1:8090).
    #[arg(long, value_name = "ADDR", env = "VIEW_ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:8090")]
    pub view_addr: Option<SocketAddr>,
    /// Who may reach the web view, and how many at a time.
    #[command(flatten)]
    pub view_guard: ViewGuardArgs,
    /// Leader election.
    #[command(flatten)]
    pub leader: LeaderArgs,
    /// Sharded mode.
    #[command(flatten)]
    pub shard: ShardArgs,
    /// The conversion webhook.
    #[command(flatten)]
    pub webhook: WebhookArgs,
    /// The operator's own flags ([`Operator::with_args`](super::Operator::with_args)).
    #[command(flatten)]
    pub operator: A,
}

/// The conversion webhook (`run`), for an operator that serves several
/// versions of its resource.
#[derive(Clone, Debug, Default, PartialEq, Eq, Args)]
pub struct WebhookArgs {
    /// Serve the webhooks (HTTPS) on this address: the conversion
    /// (`POST /convert`, for the API server to convert objects between
    /// the resource's versions) and the admission the machine's states
    /// declare (`POST /validate`). Needs --webhook-cert-dir.
    #[arg(
        long,
        value_name = "ADDR",
        env = "WEBHOOK_ADDR",
        requires = "webhook_cert_dir"
    )]
    pub webhook_addr: Option<SocketAddr>,
    /// The webhook's certificate: a directory with `tls.crt` (the chain,
    /// leaf first) and `tls.key`, as a mounted `kubernetes.io/tls` Secret
    /// gives them; the CRD's caBundle must trust it.
    #[arg(
        long,
        value_name = "DIR",
        env = "WEBHOOK_CERT_DIR",
        requires = "webhook_addr"
    )]
    pub webhook_cert_dir: Option<PathBuf>,
    /// The user the operator writes as (repeatable, or comma-separated in
    /// $OPERATOR_USER), e.g. `system:serviceaccount:ops:db-operator`:
    /// the webhook's `/validate` refuses writes of `.status.fsm` by
    /// anyone else. Without it the record is not guarded (the webhook
    /// cannot tell the operator's writes from others'); `manifests` sets
    /// it to the operator's ServiceAccount.
    #[arg(
        long,
        value_name = "USER",
        env = "OPERATOR_USER",
        value_delimiter = ','
    )]
    pub operator_user: Vec<String>,
}

/// The web view's host allow-list and caps (`run`).
#[derive(Clone, Debug, PartialEq, Eq, Args)]
pub struct ViewGuardArgs {
    /// Answer the web view's requests for this `Host` too (without port;
    /// repeatable, or comma-separated in $VIEW_ALLOWED_HOSTS): the name of
    /// its Service or Ingress. Besides these, only `localhost`, loopback
    /// addresses and the address a connection came in on are answered
    /// (others get 403: DNS rebinding). `*` allows any host.
    #[arg(
        long = "view-allowed-host",
        value_name = "HOST",
        env = "VIEW_ALLOWED_HOSTS",
        value_delimiter = ','
    )]
    pub allowed_hosts: Vec<String>,
    /// At most this many live event streams (open pages) at a time; one
    /// more is answered 503 with Retry-After.
    #[arg(long = "view-max-streams", value_name = "N", default_value_t = ViewLimits::DEFAULT_MAX_STREAMS)]
    pub max_streams: usize,
    /// At most this many other web view requests in progress at a time;
    /// one more is answered 503 with Retry-After.
    #[arg(long = "view-max-requests", value_name = "N", default_value_t = ViewLimits::DEFAULT_MAX_REQUESTS)]
    pub max_requests: usize,
    /// Who may see the web view: `kubernetes` lets in only a bearer token
    /// the API server authenticates as someone allowed to list what the
    /// view shows (a TokenReview and a SubjectAccessReview, which the
    /// operator's ServiceAccount must be allowed to create: `rbac
    /// --view-access`); `none` lets in whoever reaches the port. Default:
    /// `none` on a loopback --view-addr (reached with `kubectl
    /// port-forward`), `kubernetes` on any other.
    #[arg(long = "view-auth", value_name = "MODE", value_enum, env = "VIEW_AUTH")]
    pub auth: Option<ViewAuth>,
}

/// Who may see the web view (`run --view-auth`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ViewAuth {
    /// Whoever reaches the port.
    None,
    /// A bearer token of someone the API server allows to list what the
    /// view shows ([`crate::view::access`]).
    Kubernetes,
}

impl Default for ViewGuardArgs {
    fn default() -> Self {
        ViewGuardArgs {
            allowed_hosts: Vec::new(),
            max_streams: ViewLimits::DEFAULT_MAX_STREAMS,
            max_requests: ViewLimits::DEFAULT_MAX_REQUESTS,
            auth: None,
        }
    }
}

impl ViewGuardArgs {
    /// The access check of a view served on `addr`: `--view-auth`, else
    /// none on a loopback address and `kubernetes` on any other.
    #[must_use]
    pub fn auth_on(&self, addr: SocketAddr) -> ViewAuth {
        self.auth.unwrap_or(if addr.ip().is_loopback() {
            ViewAuth::None
        } else {
            ViewAuth::Kubernetes
        })
    }

    /// The caps these flags set (connections: the default, or more when
    /// the streams and requests need them).
    #[must_use]
    pub fn limits(&self) -> ViewLimits {
        ViewLimits {
            max_streams: self.max_streams,
            max_requests: self.max_requests,
            max_connections: ViewLimits::DEFAULT_MAX_CONNECTIONS.max(
                self.max_streams
                    .saturating_add(self.max_requests)
                    .saturating_mul(2),
            ),
            idle_timeout: ViewLimits::DEFAULT_IDLE_TIMEOUT,
        }
    }
}

/// Leader election flags of `run`.
#[derive(Clone, Debug, PartialEq, Eq, Args)]
pub struct LeaderArgs {
    /// Run the controller only while this replica holds a Lease.
    #[arg(long)]
    pub leader_elect: bool,
    /// The Lease's name (default: `<operator>-leader`).
    #[arg(long, value_name = "NAME")]
    pub lease_name: Option<String>,
    /// The Lease's namespace (default: $POD_NAMESPACE, then --namespace,
    /// then the kubeconfig's namespace).
    #[arg(long, value_name = "NS")]
    pub lease_namespace: Option<String>,
    /// This replica's identity in the Lease (default: $POD_NAME, then
    /// $HOSTNAME, then `<operator>-<pid>`).
    #[arg(long, value_name = "ID")]
    pub identity: Option<String>,
    /// How long a Lease lasts without renewal, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 15)]
    pub lease_duration: u64,
}

/// Sharding flags of `run`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Args)]
pub struct ShardArgs {
    /// Share the objects among the replicas: each holds a shard Lease and
    /// reconciles only the objects labelled for it; one replica at a time
    /// (holding the Lease `<operator>-sharder`) labels them. Sharding
    /// elects that replica itself: not with --leader-elect.
    /// --lease-namespace and --lease-duration apply to its Leases.
    #[arg(long, conflicts_with_all = ["leader_elect", "lease_name", "identity"])]
    pub shards: bool,
    /// This replica's shard Lease, at most 63 characters (default:
    /// `<operator>-shard-<$POD_NAME, else $HOSTNAME>`).
    #[arg(long, value_name = "NAME", requires = "shards")]
    pub shard_lease: Option<String>,
}

/// `crd`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Args)]
pub struct CrdArgs {
    /// Add `State`, `Attempt` and `In-State` columns to `kubectl get`
    /// (status store only).
    #[arg(long)]
    pub printer_columns: bool,
    /// Where the API server calls the conversion webhook, for an operator
    /// serving several versions and run outside the cluster:
    /// `https://HOST:PORT/convert` (`run --webhook-addr`). Needs
    /// --webhook-ca-file.
    #[arg(long, value_name = "URL", requires = "webhook_ca_file")]
    pub webhook_url: Option<String>,
    /// The PEM certificate of the CA that signed the webhook's
    /// certificate: the CRD's caBundle.
    #[arg(long, value_name = "PEM", requires = "webhook_url")]
    pub webhook_ca_file: Option<PathBuf>,
}

/// `rbac`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Args)]
pub struct RbacArgs {
    /// A Role in this namespace instead of a ClusterRole (an operator that
    /// watches one namespace).
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
    /// Add a Role for leader election.
    #[arg(long)]
    pub leader_elect: bool,
    /// Add what sharded mode (`run --shards`) needs: a Role on Leases
    /// (get, list, create, update); the labels are written with the patch
    /// on the resource the main role grants.
    #[arg(long)]
    pub shards: bool,
    /// Add what the web view (`run --view-addr`) reads: `get` on the
    /// resource (and on the record ConfigMaps or Secrets of those stores)
    /// and `list` on events.
    #[arg(long)]
    pub view: bool,
    /// Add what the web view's access check needs (`run --view-auth
    /// kubernetes`, the default on a --view-addr other than loopback): a
    /// ClusterRole `<name>-view-access` to create TokenReviews and
    /// SubjectAccessReviews.
    #[arg(long, requires = "view")]
    pub view_access: bool,
    /// The Leases' namespace (default: --namespace, else `default`).
    #[arg(long, value_name = "NS")]
    pub lease_namespace: Option<String>,
    /// The leader election Lease's name, as given to `run --lease-name`
    /// (default: `<operator>-leader`): the only Lease the Role lets the
    /// operator read and renew.
    #[arg(long, value_name = "NAME", requires = "leader_elect")]
    pub lease_name: Option<String>,
    /// The Role's name (default: the operator's name).
    #[arg(long)]
    pub name: Option<String>,
}

/// A diagram format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum DiagramFormat {
    /// Mermaid `stateDiagram-v2`.
    #[default]
    Mermaid,
    /// Graphviz DOT.
    Dot,
    /// A standalone SVG document, laid out without Graphviz.
    Svg,
}

/// `diagram`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Args)]
pub struct DiagramArgs {
    /// The format.
    #[arg(long, short = 'f', value_enum, default_value_t)]
    pub format: DiagramFormat,
}

/// An output format of `status` and `preflight`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// For people.
    #[default]
    Text,
    /// JSON: the decoded record (`status`), the verdicts (`preflight`).
    Json,
}

/// `status`.
#[derive(Clone, Debug, PartialEq, Eq, Args)]
pub struct StatusArgs {
    /// The object's name.
    pub name: String,
    /// The object's namespace (default: the kubeconfig's namespace).
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
    /// The output format.
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: OutputFormat,
    /// How to reach the API server.
    #[command(flatten)]
    pub connect: ConnectArgs,
}

/// `preflight`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Args)]
pub struct PreflightArgs {
    /// Read the records of this namespace only (default: all namespaces).
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
    /// The output format.
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: OutputFormat,
    /// How to reach the API server.
    #[command(flatten)]
    pub connect: ConnectArgs,
}

/// `migrate-storage`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Args)]
pub struct MigrateStorageArgs {
    /// Count the objects, write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The output format.
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: OutputFormat,
    /// How to reach the API server.
    #[command(flatten)]
    pub connect: ConnectArgs,
}

/// The names (ids, long flags, short flags) of the operator's own flags `A`
/// that `run`'s flags, or `--help`, already use.
pub(super) fn clashes_with_run<A: Args>() -> Vec<String> {
    let run = RunArgs::<()>::augment_args(clap::Command::new("run"));
    let own = A::augment_args(clap::Command::new("operator"));
    let mut clashes = Vec::new();
    for arg in own.get_arguments() {
        let id = arg.get_id();
        if run.get_arguments().any(|theirs| theirs.get_id() == id) {
            clashes.push(format!("the name `{id}`"));
        }
        if let Some(long) = arg.get_long()
            && (long == "help"
                || run
                    .get_arguments()
                    .any(|theirs| theirs.get_long() == Some(long)))
        {
            clashes.push(format!("`--{long}`"));
        }
        if let Some(short) = arg.get_short()
            && (short == 'h'
                || run
                    .get_arguments()
                    .any(|theirs| theirs.get_short() == Some(short)))
        {
            clashes.push(format!("`-{short}`"));
        }
    }
    for group in own.get_groups() {
        let id = group.get_id();
        if run.get_groups().any(|theirs| theirs.get_id() == id) {
            clashes.push(format!("the group name `{id}`"));
        }
    }
    clashes.dedup();
    clashes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory;
        Cli::<()>::command().debug_assert();
    }

    #[test]
    fn shards_take_a_lease_name_and_refuse_leader_election() {
        let parse = |args: &[&str]| Cli::<()>::try_parse_from(args.iter().copied());
        let Command::Run(run) = parse(&["op", "run", "--shards", "--shard-lease", "op-shard-0"])
            .unwrap()
            .command
        else {
            panic!("not run");
        };
        assert_eq!(
            run.shard,
            ShardArgs {
                shards: true,
                shard_lease: Some("op-shard-0".into())
            }
        );
        assert!(parse(&["op", "run", "--shards", "--leader-elect"]).is_err());
        assert!(parse(&["op", "run", "--shard-lease", "x"]).is_err());
        assert!(
            parse(&[
                "op",
                "run",
                "--shards",
                "--lease-duration",
                "6",
                "--lease-namespace",
                "ops"
            ])
            .is_ok()
        );
    }
}
