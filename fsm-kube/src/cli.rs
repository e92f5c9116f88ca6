//! The operator's command line: `run`, `crd`, `rbac`, `diagram` and
//! `status`, for any operator binary in a few lines.
//!
//! ```no_run
//! # mod my { use fsm_kube::prelude::*; use kube::CustomResource;
//! #   #[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
//! #   #[kube(group = "example.io", version = "v1", kind = "Database", namespaced, status = "DatabaseStatus")]
//! #   pub struct DatabaseSpec { pub size: u32 }
//! #   #[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
//! #   pub struct DatabaseStatus { pub fsm: Option<FsmStatus> }
//! #   #[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
//! #   #[fsm(resource = Database)]
//! #   pub enum DbState { #[fsm(initial, final, ready)] Ready, #[fsm(failed)] Failed }
//! # }
//! # use my::{Database, DbState};
//! use std::sync::Arc;
//! use futures::StreamExt;
//! use fsm_kube::cli::{Operator, Rule, RunContext, StoreKind};
//! use fsm_kube::{FsmReconciler, StatusStore};
//! use kube::runtime::{Controller, watcher};
//!
//! #[tokio::main]
//! async fn main() -> std::process::ExitCode {
//!     Operator::<DbState>::new("db-operator", StoreKind::Status)
//!         .rule(Rule::new("apps", "deployments", ["get", "list", "watch", "create", "patch"]))
//!         .main(|run: RunContext| async move {
//!             let fsm = FsmReconciler::<DbState>::new(run.client.clone(), StatusStore::new())
//!                 .with_metrics(run.metrics.clone());
//!             Controller::new(run.api::<Database>(), watcher::Config::default())
//!                 .run(fsm.reconcile(), fsm.error_policy(), Arc::new(()))
//!                 .for_each(|_| async {})
//!                 .await;
//!         })
//!         .await
//! }
//! ```
//!
//! ```text
//! $ db-operator crd | kubectl apply -f -
//! $ db-operator rbac --leader-elect --lease-namespace ops | kubectl apply -f -
//! $ db-operator diagram --format dot | dot -Tsvg > db.svg
//! $ db-operator status orders -n shop
//! $ db-operator run --leader-elect --metrics-addr 0.0.0.0:9090
//! ```
//!
//! What each subcommand prints is computed by pure functions that can be
//! called (and tested) without the command line: [`crd_yaml`],
//! [`rbac::manifests`], [`diagram`], [`status::decode`] and
//! [`status::render_text`]. The clap layer ([`Cli`]) only parses.

pub mod rbac;
pub mod status;

use std::future::Future;
use std::io::Write;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use fsm_core::Fsm;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{Api, Client, CustomResourceExt};
use prometheus_client::registry::Registry;

pub use rbac::{InvalidRule, OperatorDescription, RbacObject, RbacScope, ResourceInfo, Rule};

use crate::{FsmMetrics, KubeResource};

/// Where the operator keeps its records; decides the RBAC it needs and
/// where `status` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, ValueEnum)]
pub enum StoreKind {
    /// [`crate::StatusStore`]: `.status.fsm` of the resource.
    Status,
    /// [`crate::ConfigMapStore`]: a ConfigMap named by
    /// [`crate::store::record_object_name`].
    ConfigMap,
    /// [`crate::SecretStore`]: a Secret named by
    /// [`crate::store::record_object_name`].
    Secret,
    /// `fsm_core::EphemeralStore` or [`crate::DerivingStore`]: process
    /// memory (conditions still go to the status).
    Ephemeral,
}

/// Why a subcommand failed. [`Operator::main`] prints it and exits with
/// status 1.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No usable Kubernetes configuration (kubeconfig or in-cluster).
    #[error("no usable Kubernetes configuration")]
    Config(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The API server answered with an error, or could not be reached.
    #[error("Kubernetes API request failed")]
    Kube(#[source] kube::Error),
    /// `status`: the object does not exist.
    #[error("{0}: not found")]
    NotFound(Box<status::Location>),
    /// `status`: the object has no record yet (not reconciled yet).
    #[error("{0}: no record yet; has the operator reconciled it?")]
    NoRecord(Box<status::Location>),
    /// `status`: the record exists but cannot be decoded; the runtime has
    /// stopped reconciling the object until someone fixes it.
    #[error("{location}: the record cannot be decoded: {error}")]
    CorruptRecord {
        /// The object and where its record is.
        location: Box<status::Location>,
        /// What is wrong with the record.
        #[source]
        error: fsm_core::DecodeError,
    },
    /// `status` with the ephemeral store: records live in the operator's
    /// memory only.
    #[error(
        "the ephemeral store keeps records in the operator's memory; status cannot read them (the object's conditions summarize its state)"
    )]
    MemoryStore,
    /// A ConfigMap or Secret store for a cluster-scoped resource: there is
    /// no namespace to keep the record object in.
    #[error("the ConfigMap and Secret stores need a namespaced resource")]
    ClusterScopedObjectStore,
    /// A declared RBAC rule is refused.
    #[error(transparent)]
    InvalidRule(#[from] InvalidRule),
    /// YAML output failed.
    #[error("YAML serialization failed")]
    Yaml(#[source] serde_yaml_ng::Error),
    /// JSON output failed.
    #[error("JSON serialization failed")]
    Json(#[source] serde_json::Error),
    /// Writing the output failed.
    #[error("writing the output failed")]
    Output(#[source] std::io::Error),
    /// The metrics endpoint failed (binding the address, mostly).
    #[error("metrics endpoint on {addr} failed")]
    Metrics {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        #[source]
        error: std::io::Error,
    },
    /// Leader election failed.
    #[error("leader election failed")]
    LeaderElection(#[source] crate::leader::LeaderError),
}

/// The command line of an operator binary.
#[derive(Clone, Debug, PartialEq, Eq, Parser)]
#[command(about = "A Kubernetes operator built with operator-fsm")]
pub struct Cli {
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Clone, Debug, PartialEq, Eq, Subcommand)]
pub enum Command {
    /// Run the operator's controller(s).
    Run(RunArgs),
    /// Print the CustomResourceDefinition of the operator's resource (YAML).
    Crd,
    /// Print the least ClusterRole (or Role) the operator needs (YAML).
    Rbac(RbacArgs),
    /// Print the state machine's diagram.
    Diagram(DiagramArgs),
    /// Show an object's current state, attempt, last error and history.
    Status(StatusArgs),
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
pub struct RunArgs {
    /// How to reach the API server.
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Watch this namespace only (default: all namespaces).
    #[arg(long, short = 'n', env = "WATCH_NAMESPACE")]
    pub namespace: Option<String>,
    /// Serve Prometheus metrics at `GET /metrics` on this address.
    #[arg(long, value_name = "ADDR", env = "METRICS_ADDR")]
    pub metrics_addr: Option<SocketAddr>,
    /// Leader election.
    #[command(flatten)]
    pub leader: LeaderArgs,
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
    /// The Lease's namespace (default: --namespace, else `default`).
    #[arg(long, value_name = "NS")]
    pub lease_namespace: Option<String>,
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
}

/// `diagram`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Args)]
pub struct DiagramArgs {
    /// The format.
    #[arg(long, short = 'f', value_enum, default_value_t)]
    pub format: DiagramFormat,
}

/// An output format of `status`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// For people.
    #[default]
    Text,
    /// The decoded record as JSON.
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

/// What `run` hands the operator's controller function.
#[derive(Clone)]
pub struct RunContext {
    /// A client for the configured cluster.
    pub client: Client,
    /// The namespace to watch; `None` for all.
    pub namespace: Option<String>,
    /// The metrics to give [`crate::FsmReconciler::with_metrics`]; served
    /// at `--metrics-addr`.
    pub metrics: FsmMetrics,
    /// With `--leader-elect`: this replica's hold on the Lease, to give the
    /// reconciler ([`crate::ReconcilerOptions::leadership`]) so that no
    /// handler runs once the hold lapses. `None` without leader election.
    pub leadership: Option<crate::leader::Leadership>,
}

impl std::fmt::Debug for RunContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunContext")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl RunContext {
    /// An API for kind `K` in the watched namespace, or in all namespaces.
    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<DynamicType = (), Scope = NamespaceResourceScope>,
    {
        match &self.namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        }
    }
}

/// An operator's command line for machine `F`: what it is (its name, its
/// store and the permissions its handlers need), and how to run it.
///
/// # Expected flow
/// Build it in `main`, declare the rules of the kinds the handlers touch,
/// then [`main`](Operator::main) with the function that runs the
/// controller. Every subcommand but `run` only prints.
pub struct Operator<F> {
    name: String,
    version: Option<String>,
    store: StoreKind,
    rules: Vec<Rule>,
    machine: PhantomData<fn() -> F>,
}

impl<F> std::fmt::Debug for Operator<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Operator")
            .field("name", &self.name)
            .field("store", &self.store)
            .field("rules", &self.rules)
            .finish()
    }
}

impl<F> Operator<F>
where
    F: Fsm,
    F::Resource: KubeResource + CustomResourceExt,
{
    /// An operator named `name` (its ClusterRole's and Lease's name) that
    /// keeps records in `store`.
    #[must_use]
    pub fn new(name: impl Into<String>, store: StoreKind) -> Self {
        Operator {
            name: name.into(),
            version: None,
            store,
            rules: Vec::new(),
            machine: PhantomData,
        }
    }

    /// The version `--version` prints, usually `env!("CARGO_PKG_VERSION")`
    /// of the operator's crate.
    #[must_use]
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = Some(version.into());
        self
    }

    /// The command line, named after the operator.
    pub fn command(&self) -> clap::Command {
        use clap::CommandFactory;
        let command = Cli::command().name(self.name.clone());
        match &self.version {
            Some(version) => command.version(version.clone()),
            None => command.disable_version_flag(true),
        }
    }

    /// Parses `args` (the first is the program's name).
    ///
    /// # Errors
    /// clap's usage error (or its `--help`/`--version` output).
    pub fn parse_from<I, T>(&self, args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        use clap::FromArgMatches;
        let matches = self.command().try_get_matches_from(args)?;
        Cli::from_arg_matches(&matches)
    }

    /// Declares a permission the handlers need (for `rbac`).
    #[must_use]
    pub fn rule(mut self, rule: Rule) -> Self {
        self.rules.push(rule);
        self
    }

    /// The operator's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What `rbac` derives its rules from.
    pub fn description(&self) -> OperatorDescription {
        OperatorDescription {
            name: self.name.clone(),
            resource: ResourceInfo::of::<F::Resource>(),
            store: self.store,
            needs_finalizer: F::machine().needs_finalizer(),
            extra_rules: self.rules.clone(),
        }
    }

    /// Parses the process's arguments, runs the subcommand, and returns the
    /// exit status: 0 on success, 1 on failure (the error and its causes on
    /// stderr), 2 for a usage error (from clap).
    pub async fn main<R, Fut>(self, run: R) -> ExitCode
    where
        R: FnMut(RunContext) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let cli = match self.parse_from(std::env::args_os()) {
            Ok(cli) => cli,
            Err(e) => {
                let _ = e.print();
                return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
            }
        };
        let mut stdout = std::io::stdout();
        match self.execute(cli.command, run, &mut stdout).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                let mut message = format!("error: {error}");
                let mut source = std::error::Error::source(&error);
                while let Some(cause) = source {
                    message.push_str(&format!("\n  caused by: {cause}"));
                    source = cause.source();
                }
                eprintln!("{message}");
                ExitCode::FAILURE
            }
        }
    }

    /// Runs `command`, writing what it prints to `out`.
    ///
    /// # Errors
    /// [`Error`]; for `status`, a corrupt record is
    /// [`Error::CorruptRecord`].
    pub async fn execute<R, Fut>(
        &self,
        command: Command,
        run: R,
        out: &mut (dyn Write + Send),
    ) -> Result<(), Error>
    where
        R: FnMut(RunContext) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let text = match command {
            Command::Run(args) => return self.run(args, run).await,
            Command::Crd => crd_yaml(&F::Resource::crd())?,
            Command::Rbac(args) => self.rbac(&args)?,
            Command::Diagram(args) => diagram::<F>(args.format),
            Command::Status(args) => {
                let client = connect(&args.connect).await?;
                self.status(&client, &args).await?
            }
        };
        out.write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .map_err(Error::Output)
    }

    /// What `rbac` prints.
    ///
    /// # Errors
    /// A declared rule is refused.
    pub fn rbac(&self, args: &RbacArgs) -> Result<String, Error> {
        let mut description = self.description();
        if let Some(name) = &args.name {
            description.name.clone_from(name);
        }
        let scope = RbacScope {
            namespace: args.namespace.clone(),
            lease_namespace: args.leader_elect.then(|| {
                args.lease_namespace
                    .clone()
                    .or_else(|| args.namespace.clone())
                    .unwrap_or_else(|| "default".to_owned())
            }),
        };
        let objects = rbac::manifests(&description, &scope)?;
        let yaml = rbac::to_yaml(&objects).map_err(Error::Yaml)?;
        let watches_all_namespaces = matches!(self.store, StoreKind::ConfigMap | StoreKind::Secret);
        Ok(match &args.namespace {
            Some(_) if watches_all_namespaces => format!(
                "# Caveat: the {:?} store watches its record objects in all namespaces unless it\n\
                 # is built with ObjectStore::namespaced(client, NS); built with ::new, it needs\n\
                 # a ClusterRole (no --namespace), which a Role does not replace.\n{yaml}",
                self.store
            ),
            _ => yaml,
        })
    }

    /// What `status` prints for `args` (text or JSON), read through
    /// `client`.
    ///
    /// # Errors
    /// See [`status::fetch`]; a record that does not decode is
    /// [`Error::CorruptRecord`].
    pub async fn status(&self, client: &Client, args: &StatusArgs) -> Result<String, Error> {
        let resource = ResourceInfo::of::<F::Resource>();
        let (raw, location) = status::fetch(
            client,
            &resource,
            F::machine().name(),
            self.store,
            args.namespace.as_deref(),
            &args.name,
        )
        .await?;
        let record = status::decode::<F>(&raw).map_err(|error| Error::CorruptRecord {
            location: Box::new(location.clone()),
            error,
        })?;
        match args.output {
            OutputFormat::Text => Ok(status::render_text(
                &location,
                &record,
                jiff::Timestamp::now(),
            )),
            OutputFormat::Json => status::render_json(&record).map_err(Error::Json),
        }
    }

    async fn run<R, Fut>(&self, args: RunArgs, mut run: R) -> Result<(), Error>
    where
        R: FnMut(RunContext) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let client = connect(&args.connect).await?;
        let mut registry = Registry::default();
        let metrics = FsmMetrics::new(&mut registry);
        let context = RunContext {
            client: client.clone(),
            namespace: args.namespace.clone(),
            metrics,
            leadership: None,
        };
        let metrics_server = args.metrics_addr.map(|addr| {
            tracing::info!(%addr, "serving metrics at /metrics");
            let registry = Arc::new(registry);
            tokio::spawn(async move {
                crate::metrics::serve(addr, registry)
                    .await
                    .map_err(|error| Error::Metrics { addr, error })
            })
        });
        let controller = async {
            if args.leader.leader_elect {
                let leader = &args.leader;
                let lease_name = leader
                    .lease_name
                    .clone()
                    .unwrap_or_else(|| format!("{}-leader", self.name));
                let lease_namespace = leader
                    .lease_namespace
                    .clone()
                    .or_else(|| std::env::var("POD_NAMESPACE").ok())
                    .or_else(|| args.namespace.clone())
                    .unwrap_or_else(|| client.default_namespace().to_owned());
                let identity = leader.identity.clone().unwrap_or_else(|| {
                    default_identity(
                        &self.name,
                        std::env::var("POD_NAME").ok(),
                        std::env::var("HOSTNAME").ok(),
                    )
                });
                tracing::info!(lease = %lease_name, namespace = %lease_namespace, %identity, "leader election");
                crate::leader::run_while_leader_until(
                    client.clone(),
                    &lease_namespace,
                    &lease_name,
                    &identity,
                    Duration::from_secs(leader.lease_duration),
                    |leadership| {
                        run(RunContext {
                            leadership: Some(leadership),
                            ..context.clone()
                        })
                    },
                    termination(),
                )
                .await
                .map_err(Error::LeaderElection)
            } else {
                tokio::select! {
                    () = run(context.clone()) => {}
                    () = termination() => {}
                }
                Ok(())
            }
        };
        match metrics_server {
            Some(mut server) => {
                let result = tokio::select! {
                    result = controller => result,
                    served = &mut server => match served {
                        Ok(Err(error)) => Err(error),
                        // The server only stops with an error, or when its
                        // task is cancelled or panics.
                        Ok(Ok(())) | Err(_) => Ok(()),
                    },
                };
                server.abort();
                result
            }
            None => controller.await,
        }
    }
}

/// Completes on SIGTERM (what Kubernetes sends a pod it stops) or Ctrl-C:
/// `run` then stops, giving the Lease up when it holds one.
async fn termination() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    _ = terminate.recv() => tracing::info!("SIGTERM: stopping"),
                    _ = tokio::signal::ctrl_c() => tracing::info!("interrupted: stopping"),
                }
                return;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM; only Ctrl-C stops gracefully");
            }
        }
    }
    match tokio::signal::ctrl_c().await {
        Ok(()) => tracing::info!("interrupted: stopping"),
        // Nothing to listen to: never stop on a signal then.
        Err(_) => std::future::pending().await,
    }
}

/// This replica's identity in the Lease: the pod's name, else the host's,
/// else `<operator>-<pid>`.
fn default_identity(operator: &str, pod: Option<String>, host: Option<String>) -> String {
    pod.filter(|s| !s.is_empty())
        .or_else(|| host.filter(|s| !s.is_empty()))
        .unwrap_or_else(|| format!("{operator}-{}", std::process::id()))
}

/// A client from `--kubeconfig`/`--context`, or inferred (`$KUBECONFIG`,
/// `~/.kube/config`, in-cluster).
///
/// # Errors
/// [`Error::Config`] when no configuration is usable.
pub async fn connect(args: &ConnectArgs) -> Result<Client, Error> {
    use kube::config::{KubeConfigOptions, Kubeconfig};
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..KubeConfigOptions::default()
    };
    let config = match &args.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path).map_err(|e| Error::Config(Box::new(e)))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(|e| Error::Config(Box::new(e)))?
        }
        None if args.context.is_some() => kube::Config::from_kubeconfig(&options)
            .await
            .map_err(|e| Error::Config(Box::new(e)))?,
        None => kube::Config::infer()
            .await
            .map_err(|e| Error::Config(Box::new(e)))?,
    };
    Client::try_from(config).map_err(|e| Error::Config(Box::new(e)))
}

/// What `crd` prints: the CRD as YAML, a document of its own.
///
/// # Errors
/// Serialization failed (not expected).
pub fn crd_yaml(crd: &CustomResourceDefinition) -> Result<String, Error> {
    let yaml = serde_yaml_ng::to_string(crd).map_err(Error::Yaml)?;
    Ok(format!("---\n{yaml}"))
}

/// What `diagram` prints: [`Fsm::mermaid`] or [`Fsm::dot`].
pub fn diagram<F: Fsm>(format: DiagramFormat) -> String {
    match format {
        DiagramFormat::Mermaid => F::mermaid(),
        DiagramFormat::Dot => F::dot(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_identity_falls_back_from_pod_to_host_to_pid() {
        assert_eq!(
            default_identity("op", Some("op-7d9f".into()), Some("node".into())),
            "op-7d9f"
        );
        assert_eq!(
            default_identity("op", Some(String::new()), Some("node".into())),
            "node"
        );
        assert_eq!(
            default_identity("op", None, None),
            format!("op-{}", std::process::id())
        );
    }

    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
