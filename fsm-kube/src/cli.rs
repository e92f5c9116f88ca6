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
//! use kube::runtime::{Controller, watcher};
//!
//! #[tokio::main]
//! async fn main() -> std::process::ExitCode {
//!     Operator::<DbState>::new("db-operator", StoreKind::Status)
//!         .rule(Rule::new("apps", "deployments", ["get", "list", "watch", "create", "patch"]))
//!         .main(|run: RunContext<DbState>| async move {
//!             // The store `Operator::new` names, the metrics `--metrics-addr`
//!             // serves and, under `--leader-elect`, the hold on the Lease.
//!             let fsm = run.reconciler();
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
//! An operator adds flags of its own to `run` with
//! [`Operator::with_args`]; [`RunContext::args`] holds them parsed.
//!
//! What each subcommand prints is computed by pure functions that can be
//! called (and tested) without the command line: [`crd_yaml`],
//! [`rbac::manifests`], [`diagram`], [`status::decode`] and
//! [`status::render_text`]. The clap layer ([`Cli`]) only parses.

pub mod rbac;
pub mod status;

use std::any::TypeId;
use std::future::Future;
use std::io::Write;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use fsm_core::Fsm;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{Api, Client, CustomResourceExt};
use prometheus_client::registry::Registry;

pub use rbac::{InvalidRule, OperatorDescription, RbacObject, RbacScope, ResourceInfo, Rule};

use crate::leader::Leadership;
use crate::store::KubeStore;
use crate::{FsmMetrics, FsmReconciler, KubeResource, ReconcilerBuilder, ReconcilerOptions};

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
    /// [`RunContext::reconciler_with_store`] was given a store other than
    /// the one the operator declares ([`Operator::new`]): `status` would
    /// look for records where there are none, and `rbac` would grant the
    /// wrong permissions.
    #[error(
        "the operator declares the {declared:?} store, but its reconciler was given {given} ({})",
        match given_kind {
            Some(kind) => format!("the {kind:?} store"),
            None => "a store the command line cannot describe".to_owned(),
        }
    )]
    StoreMismatch {
        /// The store [`Operator::new`] was given.
        declared: StoreKind,
        /// The kind of the store given, `None` when no [`StoreKind`]
        /// describes it.
        given_kind: Option<StoreKind>,
        /// The given store's type.
        given: &'static str,
    },
    /// The operator's main function returned an error.
    #[error("the controller failed")]
    Controller(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// The command line of an operator binary; `A` holds the operator's own
/// flags of `run` ([`Operator::with_args`]).
#[derive(Clone, Debug, PartialEq, Eq, Parser)]
#[command(about = "A Kubernetes operator built with operator-fsm")]
pub struct Cli<A: Args = ()> {
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command<A>,
}

/// The subcommands.
#[derive(Clone, Debug, PartialEq, Eq, Subcommand)]
pub enum Command<A: Args = ()> {
    /// Run the operator's controller(s).
    Run(RunArgs<A>),
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
pub struct RunArgs<A: Args = ()> {
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
    /// The operator's own flags ([`Operator::with_args`]).
    #[command(flatten)]
    pub operator: A,
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

/// An error an operator's main function returns ([`RunOutcome`]).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What the operator's main function may return: `()`, or a `Result`
/// whose error makes `run` fail (exit status 1, the error on stderr), as
/// [`RunContext::reconciler_with_store`]'s does with `?`.
pub trait RunOutcome: Send + 'static {
    /// `Ok` for `()`; the error of a `Result`.
    ///
    /// # Errors
    /// The main function's error.
    fn into_result(self) -> Result<(), BoxError>;
}

impl RunOutcome for () {
    fn into_result(self) -> Result<(), BoxError> {
        Ok(())
    }
}

impl<E> RunOutcome for Result<(), E>
where
    E: Into<BoxError> + Send + 'static,
{
    fn into_result(self) -> Result<(), BoxError> {
        self.map_err(Into::into)
    }
}

/// What `run` hands the operator's main function for machine `F`, whose
/// own flags are `A` ([`Operator::with_args`]).
///
/// # Expected flow
/// Build the reconciler with [`reconciler`](RunContext::reconciler): it
/// keeps records in the store the operator declares ([`Operator::new`]),
/// with the operator's [`ReconcilerOptions`], counts into the metrics
/// `--metrics-addr` serves and, under `--leader-elect`, checks this
/// replica's hold on the Lease; then run a `Controller` with it. Under
/// `--leader-elect` the function is called again, with a new context, each
/// time the Lease is won.
pub struct RunContext<F, A = ()> {
    /// A client for the configured cluster.
    pub client: Client,
    /// The namespace to watch; `None` for all.
    pub namespace: Option<String>,
    /// The metrics served at `--metrics-addr`;
    /// [`reconciler`](RunContext::reconciler) counts into them.
    pub metrics: FsmMetrics,
    /// With `--leader-elect`: this replica's hold on the Lease, which
    /// [`reconciler`](RunContext::reconciler) gives the reconciler so that
    /// no handler runs once the hold lapses. `None` without leader
    /// election.
    pub leadership: Option<Leadership>,
    /// The operator's own flags, parsed ([`Operator::with_args`]).
    pub args: A,
    store: StoreKind,
    options: ReconcilerOptions,
    machine: PhantomData<fn() -> F>,
}

impl<F, A: Clone> Clone for RunContext<F, A> {
    fn clone(&self) -> Self {
        RunContext {
            client: self.client.clone(),
            namespace: self.namespace.clone(),
            metrics: self.metrics.clone(),
            leadership: self.leadership.clone(),
            args: self.args.clone(),
            store: self.store,
            options: self.options.clone(),
            machine: PhantomData,
        }
    }
}

impl<F, A: std::fmt::Debug> std::fmt::Debug for RunContext<F, A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunContext")
            .field("namespace", &self.namespace)
            .field("store", &self.store)
            .field("leadership", &self.leadership)
            .field("args", &self.args)
            .finish_non_exhaustive()
    }
}

impl<F, A> RunContext<F, A> {
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

    /// The store the operator declares ([`Operator::new`]).
    pub fn store_kind(&self) -> StoreKind {
        self.store
    }

    /// The options the reconciler is built with
    /// ([`Operator::reconciler_options`]).
    pub fn options(&self) -> &ReconcilerOptions {
        &self.options
    }
}

impl<F, A> RunContext<F, A>
where
    F: Fsm,
    F::Resource: KubeResource,
{
    /// The reconciler of machine `F`, keeping records in the store the
    /// operator declares: [`crate::StatusStore`],
    /// [`crate::ConfigMapStore`] or [`crate::SecretStore`] (of the watched
    /// namespace only under `--namespace`, so that a Role there is
    /// enough), or `fsm_core::EphemeralStore`; with the operator's
    /// [`ReconcilerOptions`], the metrics, and under `--leader-elect` the
    /// hold on the Lease. Build it once per call of the main function (an
    /// ephemeral store is new each time).
    pub fn reconciler(&self) -> FsmReconciler<F> {
        let client = self.client.clone();
        let builder = match (self.store, &self.namespace) {
            (StoreKind::Status, _) => self.builder(crate::StatusStore::new()),
            (StoreKind::ConfigMap, Some(ns)) => {
                self.builder(crate::ConfigMapStore::namespaced(client, ns.clone()))
            }
            (StoreKind::ConfigMap, None) => self.builder(crate::ConfigMapStore::new(client)),
            (StoreKind::Secret, Some(ns)) => {
                self.builder(crate::SecretStore::namespaced(client, ns.clone()))
            }
            (StoreKind::Secret, None) => self.builder(crate::SecretStore::new(client)),
            (StoreKind::Ephemeral, _) => self.builder(fsm_core::EphemeralStore::new()),
        };
        builder.build()
    }

    /// As [`reconciler`](RunContext::reconciler), with `store` (a
    /// [`crate::DerivingStore`] for the ephemeral kind, say), which must be
    /// of the kind the operator declares.
    ///
    /// # Errors
    /// [`Error::StoreMismatch`] when `store` is of another kind, or of a
    /// type no [`StoreKind`] describes (the CLI's `status` and `rbac` would
    /// then be wrong about it).
    pub fn reconciler_with_store<S>(&self, store: S) -> Result<FsmReconciler<F>, Error>
    where
        S: KubeStore<F::Resource>,
    {
        let given_kind = store_kind_of::<F, S>();
        if given_kind != Some(self.store) {
            return Err(Error::StoreMismatch {
                declared: self.store,
                given_kind,
                given: std::any::type_name::<S>(),
            });
        }
        Ok(self.builder(store).build())
    }

    fn builder(&self, store: impl KubeStore<F::Resource>) -> ReconcilerBuilder<F> {
        let builder = FsmReconciler::<F>::builder(self.client.clone(), store)
            .options(self.options.clone())
            .metrics(self.metrics.clone());
        match &self.leadership {
            Some(leadership) => builder.leadership(leadership.clone()),
            None => builder,
        }
    }
}

/// The names (ids, long flags, short flags) of the operator's own flags `A`
/// that `run`'s flags, or `--help`, already use.
fn clashes_with_run<A: Args>() -> Vec<String> {
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

/// The kind of the stores the crate provides, by type; `None` for others.
fn store_kind_of<F, S>() -> Option<StoreKind>
where
    F: Fsm,
    S: 'static,
{
    let store = TypeId::of::<S>();
    if store == TypeId::of::<crate::StatusStore>() {
        Some(StoreKind::Status)
    } else if store == TypeId::of::<crate::ConfigMapStore>() {
        Some(StoreKind::ConfigMap)
    } else if store == TypeId::of::<crate::SecretStore>() {
        Some(StoreKind::Secret)
    } else if store == TypeId::of::<fsm_core::EphemeralStore>()
        || store == TypeId::of::<crate::DerivingStore<F>>()
    {
        Some(StoreKind::Ephemeral)
    } else {
        None
    }
}

/// An operator's command line for machine `F`: what it is (its name, its
/// store and the permissions its handlers need), and how to run it.
///
/// # Expected flow
/// Build it in `main`, declare the rules of the kinds the handlers touch
/// (and the operator's own flags, [`with_args`](Operator::with_args)),
/// then [`main`](Operator::main) with the function that runs the
/// controller, which builds its reconciler with
/// [`RunContext::reconciler`]. Every subcommand but `run` only prints.
pub struct Operator<F, A = ()> {
    name: String,
    version: Option<String>,
    store: StoreKind,
    rules: Vec<Rule>,
    options: ReconcilerOptions,
    machine: PhantomData<fn() -> (F, A)>,
}

impl<F, A> std::fmt::Debug for Operator<F, A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Operator")
            .field("name", &self.name)
            .field("store", &self.store)
            .field("rules", &self.rules)
            .field("options", &self.options)
            .finish()
    }
}

impl<F> Operator<F>
where
    F: Fsm,
    F::Resource: KubeResource + CustomResourceExt,
{
    /// An operator named `name` (its ClusterRole's and Lease's name) that
    /// keeps records in `store`: what `rbac` grants, where `status` reads,
    /// and what [`RunContext::reconciler`] builds.
    #[must_use]
    pub fn new(name: impl Into<String>, store: StoreKind) -> Self {
        Operator {
            name: name.into(),
            version: None,
            store,
            rules: Vec::new(),
            options: ReconcilerOptions::default(),
            machine: PhantomData,
        }
    }
}

impl<F, A> Operator<F, A>
where
    F: Fsm,
    F::Resource: KubeResource + CustomResourceExt,
    A: Args + Clone + Send + Sync + 'static,
{
    /// Adds the operator's own flags to `run`: the fields of `B`, a
    /// `#[derive(clap::Args)]` struct (with `env = "..."` where a variable
    /// may give them), shown by `run --help` and handed to the main
    /// function parsed, as [`RunContext::args`].
    ///
    /// # Errors
    /// None here: a flag whose name `run` already has (such as
    /// `--namespace`, `-n` or `--help`) makes [`parse_from`](Operator::parse_from)
    /// and [`main`](Operator::main) refuse to parse (a usage error naming
    /// it, exit status 2). Building [`command`](Operator::command) with
    /// such a clash (for `--help`) makes clap panic in debug builds.
    #[must_use]
    pub fn with_args<B>(self) -> Operator<F, B>
    where
        B: Args + Clone + Send + Sync + 'static,
    {
        Operator {
            name: self.name,
            version: self.version,
            store: self.store,
            rules: self.rules,
            options: self.options,
            machine: PhantomData,
        }
    }

    /// The options of the reconciler [`RunContext::reconciler`] builds
    /// (default [`ReconcilerOptions::default`]).
    #[must_use]
    pub fn reconciler_options(mut self, options: ReconcilerOptions) -> Self {
        self.options = options;
        self
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
        let command = Cli::<A>::command().name(self.name.clone());
        match &self.version {
            Some(version) => command.version(version.clone()),
            None => command.disable_version_flag(true),
        }
    }

    /// Parses `args` (the first is the program's name).
    ///
    /// # Errors
    /// clap's usage error (or its `--help`/`--version` output); an
    /// `ArgumentConflict` naming them when the operator's own flags
    /// ([`with_args`](Operator::with_args)) reuse a name of `run`'s.
    pub fn parse_from<I, T>(&self, args: I) -> Result<Cli<A>, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        use clap::FromArgMatches;
        // Before clap builds the command, which panics on such a clash.
        let clashes = clashes_with_run::<A>();
        if !clashes.is_empty() {
            return Err(clap::Error::raw(
                clap::error::ErrorKind::ArgumentConflict,
                format!(
                    "the operator's own flags of `{} run` reuse {}, which `run` has already\n",
                    self.name,
                    clashes.join(", ")
                ),
            ));
        }
        let matches = self.command().try_get_matches_from(args)?;
        Cli::<A>::from_arg_matches(&matches)
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
    /// stderr; for `run`, an error the main function returns too), 2 for a
    /// usage error (from clap).
    pub async fn main<R, Fut>(self, run: R) -> ExitCode
    where
        R: FnMut(RunContext<F, A>) -> Fut + Send + 'static,
        Fut: Future + Send + 'static,
        Fut::Output: RunOutcome,
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
        command: Command<A>,
        run: R,
        out: &mut (dyn Write + Send),
    ) -> Result<(), Error>
    where
        R: FnMut(RunContext<F, A>) -> Fut + Send + 'static,
        Fut: Future + Send + 'static,
        Fut::Output: RunOutcome,
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
                 # is built with ObjectStore::namespaced(client, NS), as RunContext::reconciler\n\
                 # does under `run --namespace NS`; built with ::new, it needs a ClusterRole\n\
                 # (no --namespace), which a Role does not replace.\n{yaml}",
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

    async fn run<R, Fut>(&self, args: RunArgs<A>, mut run: R) -> Result<(), Error>
    where
        R: FnMut(RunContext<F, A>) -> Fut + Send + 'static,
        Fut: Future + Send + 'static,
        Fut::Output: RunOutcome,
    {
        let client = connect(&args.connect).await?;
        let mut registry = Registry::default();
        let metrics = FsmMetrics::new(&mut registry);
        let context = RunContext {
            client: client.clone(),
            namespace: args.namespace.clone(),
            metrics,
            leadership: None,
            args: args.operator.clone(),
            store: self.store,
            options: self.options.clone(),
            machine: PhantomData,
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
                // A main function that fails stops the replica (giving the
                // Lease up) and makes `run` fail, as without leader election.
                let failure = Arc::new(std::sync::Mutex::new(None::<BoxError>));
                let failed = Arc::new(tokio::sync::Notify::new());
                let shutdown = {
                    let failed = failed.clone();
                    async move {
                        tokio::select! {
                            () = termination() => {}
                            () = failed.notified() => {}
                        }
                    }
                };
                crate::leader::run_while_leader_until(
                    client.clone(),
                    &lease_namespace,
                    &lease_name,
                    &identity,
                    Duration::from_secs(leader.lease_duration),
                    |leadership| {
                        let main = run(RunContext {
                            leadership: Some(leadership),
                            ..context.clone()
                        });
                        let (failure, failed) = (failure.clone(), failed.clone());
                        async move {
                            if let Err(error) = main.await.into_result() {
                                *failure.lock().unwrap_or_else(PoisonError::into_inner) =
                                    Some(error);
                                failed.notify_one();
                            }
                        }
                    },
                    shutdown,
                )
                .await
                .map_err(Error::LeaderElection)?;
                let error = failure
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                error.map_or(Ok(()), |error| Err(Error::Controller(error)))
            } else {
                tokio::select! {
                    outcome = run(context.clone()) => outcome.into_result().map_err(Error::Controller),
                    () = termination() => Ok(()),
                }
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
        Cli::<()>::command().debug_assert();
    }
}
