//! Dependent resources: declare the objects an owner should have, as a
//! small graph, and let the runtime create, update, wait for, prune and
//! delete them.
//!
//! A [`DesiredSet`] names each [`Dependent`] by key, with its desired
//! object (or a family of them), what it depends on, when it is ready,
//! when it is active, and its reconcile precondition and delete
//! postcondition: the vocabulary of java-operator-sdk's dependent
//! resources and workflows. [`converge`] applies it (server-side apply,
//! dependency order, concurrent branches, no write when nothing changed,
//! pruning); [`teardown`] deletes it in reverse order.
//!
//! Two ways to use it, which meet inside a state:
//! - in a machine, a handler calls `cx.converge(&set)` ([`StepDependents`])
//!   and decides what to do with the [`Convergence`], or returns
//!   [`converge_state`]`(cx, &set, Next)`; `cleanup` calls
//!   `cx.teardown(&set)`. [`ReconcilerBuilder`](crate::ReconcilerBuilder)
//!   gives the engine the [`DependentsRuntime`], and the step's commit
//!   writes a `DependentsReady` condition;
//! - an operator that is only a graph uses [`DependentsReconciler`], with
//!   no machine.
//!
//! Either way, [`owns_dependents`] makes the controller watch the
//! dependents' kinds so that a change of a dependent wakes its owner;
//! given the runtime, the same watches are the caches converges read
//! dependents from (no GET per dependent).
//!
//! A desired set may depend on the world: a desired function may be
//! `async` and read secondary objects ([`Reads`]: `cx.reads()` in a
//! state, [`DesiredContext`] with [`DependentsReconciler::new_async`]); a
//! [derived](Dependent::derived) dependent is computed from its
//! dependencies' live objects during the converge; a converge state
//! enters its next state built from the [`Convergence`]
//! ([`DesiredSet::then`]). [`DependentsReconciler::teardown_on_delete`]
//! tears the set down in order when the owner is deleted.
//!
//! ```no_run
//! use fsm_kube::dependents::{Dependent, DesiredSet, converge, DependentsRuntime};
//! use k8s_openapi::api::{apps::v1::Deployment, core::v1::{ConfigMap, Service}};
//!
//! # async fn demo<K: fsm_kube::KubeResource>(client: kube::Client, owner: &K, config: ConfigMap, deployment: Deployment, service: Service)
//! #     -> Result<(), Box<dyn std::error::Error>> {
//! let set = DesiredSet::builder()
//!     .dependent(Dependent::new("config", &config))
//!     .dependent(Dependent::new("app", &deployment).depends_on(["config"]))
//!     .dependent(Dependent::new("service", &service).depends_on(["app"]))
//!     .build()?;
//! let runtime = DependentsRuntime::new(client);
//! let convergence = converge(&runtime, owner, &set).await?;
//! println!("{}", convergence.summary());
//! # Ok(()) }
//! ```
//!
//! # Labels and ownership
//! Every object applied carries a controller owner reference to the
//! owner (blocking its deletion) and the labels
//! `app.kubernetes.io/managed-by=operator-fsm`,
//! `operator-fsm.io/owner-uid=<owner's UID>` and
//! `operator-fsm.io/dependent=<key>` ([`DEPENDENT_LABEL`]); pruning and
//! teardown select on them.
//!
//! # Lifecycle
//! By default a dependent's objects are applied on every converge where
//! they differ and deleted when pruned or torn down.
//! [`Dependent::create_only`] creates once and then only reads;
//! [`Dependent::keep_on_prune`] releases the objects (owner reference and
//! labels removed) instead of deleting them; [`Dependent::per_attempt`]
//! is one create-only object per attempt of a state.
//!
//! # Matching
//! An apply is skipped when the live object already is as desired: a
//! structural comparison, [ignore paths](Dependent::ignore), a
//! [matcher](Dependent::matcher) of the dependent's own, and a dry-run
//! apply that learns the server's normal form (a quantity `1000m` stored
//! as `1`) when the comparison finds a difference: see [`converge`],
//! *When nothing is written*.
//!
//! # Failures
//! A failed dependent says how it failed: [`DependentFailure::kind`] is a
//! [`FailureKind`] (the server refused it, with the code; a conflict
//! naming the managers; forbidden; not owned; its readiness failed), and
//! [`Convergence::failures`] lists them.

mod cache;
mod cached_object;
mod condition_memo;
mod converge;
mod converge_attr;
mod create_only;
mod derived;
mod diff;
mod echoes;
mod error;
mod kind;
mod live;
mod match_memo;
mod matching;
mod object;
mod on_delete;
mod order;
mod orphan;
mod own_writes;
mod owners;
mod pruned;
mod readiness;
mod reads;
mod reconciler;
mod report;
mod runtime;
mod set;
mod step;
mod teardown;
mod unchanged;
mod wake;
mod watch;

pub use converge::converge;
pub use converge_attr::ConvergeThen;
pub use error::{DependentsError, DesiredError, ReadError, SetError};
pub use kind::DependentKind;
pub use live::{LiveDependents, LiveError};
pub use object::{DEPENDENT_LABEL, Owner};
pub use on_delete::TEARDOWN_FINALIZER;
pub use orphan::KEEP_ANNOTATION;
pub use owners::owners_any_version;
pub use readiness::{Readiness, builtin_readiness};
pub use reads::{DesiredContext, Reads};
pub use reconciler::{DEFAULT_RESYNC, DependentsReconciler};
pub use report::{
    Convergence, DependentFailure, DependentState, FailureKind, Teardown, TeardownState,
};
pub use runtime::{DEFAULT_PENDING_REQUEUE, DEFAULT_SYNC_WAIT, DependentsRuntime};
pub use set::{Dependent, DesiredSet, DesiredSetBuilder, attempt_name};
pub use step::{StepDependents, converge_state};
pub use teardown::teardown;
pub use watch::{DependentsWatchSource, owns_dependents, owns_dependents_of};
