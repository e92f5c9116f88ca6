//! `Operator`: what an operator is (its name, store, permissions and
//! options), its command line, and the dispatch of a parsed subcommand.

use std::future::Future;
use std::io::Write;
use std::marker::PhantomData;
use std::process::ExitCode;

use clap::Args;
use fsm_core::Fsm;
use fsm_core::text::display_chain;
use kube::CustomResourceExt;

use super::args::clashes_with_run;
use super::rbac::{OperatorDescription, Rule};
use super::{Cli, Command, Error, RunContext, RunOutcome, StoreKind, connect, diagram};
use crate::records::ResourceInfo;
use crate::versions::{Spoke, VersionOptions, Versions};
use crate::{KubeResource, options::ReconcilerOptions};

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
    pub(super) name: String,
    pub(super) version: Option<String>,
    pub(super) store: StoreKind,
    pub(super) rules: Vec<Rule>,
    pub(super) options: ReconcilerOptions,
    /// The other versions of the resource, each made for hub
    /// `F::Resource` ([`Operator::version`]).
    pub(super) spokes: Vec<Spoke>,
    pub(super) machine: PhantomData<fn() -> (F, A)>,
}

impl<F, A> std::fmt::Debug for Operator<F, A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Operator")
            .field("name", &self.name)
            .field("store", &self.store)
            .field("rules", &self.rules)
            .field("options", &self.options)
            .field("spokes", &self.spokes)
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
            spokes: Vec::new(),
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
            spokes: self.spokes,
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

    /// Serves version `S` of the resource too: a spoke of the machine's
    /// resource (the hub), served, not stored, not deprecated. See
    /// [`version_with`](Operator::version_with) for the other options.
    ///
    /// `F::Resource: From<S>` (or `TryFrom<S>`, whose error the
    /// conversion webhook reports with the object's name) and `S:
    /// TryFrom<F::Resource>` (or `From`) are its conversions; `metadata`
    /// and `.status.fsm` are carried through verbatim whatever they do.
    /// `crd` and `manifests` then print a CRD of every version with the
    /// conversion webhook wired, which `run --webhook-addr` serves.
    ///
    /// ```
    /// # use fsm_kube::prelude::*;
    /// # use kube::CustomResource;
    /// # #[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
    /// # pub struct DbStatus { pub fsm: Option<FsmStatus> }
    /// # pub mod v1alpha1 { use super::*;
    /// #   #[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
    /// #   #[kube(group = "example.io", version = "v1alpha1", kind = "Database", namespaced, status = "DbStatus")]
    /// #   pub struct DatabaseSpec { pub size: String }
    /// # }
    /// # pub mod v1 { use super::*;
    /// #   #[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
    /// #   #[kube(group = "example.io", version = "v1", kind = "Database", namespaced, status = "DbStatus")]
    /// #   pub struct DatabaseSpec { pub size_gi: u32 }
    /// # }
    /// # #[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
    /// # #[fsm(resource = v1::Database)]
    /// # pub enum DbState { #[fsm(initial, final, ready)] Ready, #[fsm(failed)] Failed }
    /// # #[derive(Debug, thiserror::Error)] #[error("{0:?} is not in Gi")] pub struct NotGi(String);
    /// impl TryFrom<v1alpha1::Database> for v1::Database {
    ///     type Error = NotGi;
    ///     fn try_from(old: v1alpha1::Database) -> Result<Self, NotGi> {
    ///         let gi = old.spec.size.strip_suffix("Gi").and_then(|n| n.parse().ok());
    ///         let size_gi = gi.ok_or_else(|| NotGi(old.spec.size.clone()))?;
    ///         Ok(v1::Database::new("", v1::DatabaseSpec { size_gi }))
    ///     }
    /// }
    /// impl From<v1::Database> for v1alpha1::Database {
    ///     fn from(new: v1::Database) -> Self {
    ///         let size = format!("{}Gi", new.spec.size_gi);
    ///         v1alpha1::Database::new("", v1alpha1::DatabaseSpec { size })
    ///     }
    /// }
    ///
    /// use fsm_kube::VersionOptions;
    /// use fsm_kube::cli::{CrdArgs, Operator, StoreKind};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let operator = Operator::<DbState>::new("db-operator", StoreKind::Status)
    ///     .version_with::<v1alpha1::Database>(VersionOptions::default().deprecated("use v1"));
    /// let crd = operator.versions().crd()?;
    /// assert_eq!(crd.spec.versions.len(), 2);
    /// // Without a webhook to call, `crd` refuses to print a CRD whose
    /// // versions cannot be converted.
    /// assert!(operator.crd_definition(&CrdArgs::default()).is_err());
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn served_version<S>(self) -> Self
    where
        F::Resource: TryFrom<S>,
        <F::Resource as TryFrom<S>>::Error: std::error::Error + Send + Sync + 'static,
        S: KubeResource + CustomResourceExt + TryFrom<F::Resource>,
        <S as TryFrom<F::Resource>>::Error: std::error::Error + Send + Sync + 'static,
    {
        self.version_with::<S>(VersionOptions::default())
    }

    /// As [`served_version`](Operator::served_version), offered as
    /// `options` says: deprecated (with a warning), the storage version,
    /// or no longer served.
    #[must_use]
    pub fn version_with<S>(mut self, options: VersionOptions) -> Self
    where
        F::Resource: TryFrom<S>,
        <F::Resource as TryFrom<S>>::Error: std::error::Error + Send + Sync + 'static,
        S: KubeResource + CustomResourceExt + TryFrom<F::Resource>,
        <S as TryFrom<F::Resource>>::Error: std::error::Error + Send + Sync + 'static,
    {
        self.spokes.push(Spoke::new::<F::Resource, S>(options));
        self
    }

    /// The versions of the resource: the machine's (the hub) and those
    /// [`served_version`](Operator::served_version) declared.
    pub fn versions(&self) -> Versions<F::Resource> {
        Versions::from_spokes(self.spokes.clone())
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
    /// usage error (from clap), 3 when `preflight` finds records this build
    /// cannot run ([`Error::exit_status`]).
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
                eprintln!("error: {}", display_chain(&error, "\n  caused by: "));
                ExitCode::from(error.exit_status())
            }
        }
    }

    /// Runs `command`, writing what it prints to `out`.
    ///
    /// # Errors
    /// [`Error`]; for `status`, a corrupt record is
    /// [`Error::CorruptRecord`]; `preflight` writes its report, then fails
    /// with [`Error::CannotRun`] when a record cannot be run.
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
            Command::Crd(args) => self.crd(&args)?,
            Command::Rbac(args) => self.rbac(&args)?,
            Command::Manifests(args) => self.manifests(&args)?,
            Command::Diagram(args) => diagram::<F>(args.format),
            Command::Status(args) => {
                let client = connect(&args.connect).await?;
                self.status(&client, &args).await?
            }
            Command::Preflight(args) => return self.preflight_command(&args, out).await,
            Command::MigrateStorage(args) => {
                return self.migrate_storage_command(&args, out).await;
            }
        };
        out.write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .map_err(Error::Output)
    }
}
