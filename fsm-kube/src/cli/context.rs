//! What `run` hands the operator's main function, and what that function
//! may return.

use std::marker::PhantomData;

use fsm_core::Fsm;
use k8s_openapi::NamespaceResourceScope;
use kube::{Api, Client};

use super::{BoxError, Error, StoreKind};
use crate::http::Health;
use crate::leader::Leadership;
use crate::shard::ShardGuard;
use crate::store::KubeStore;
use crate::{
    KubeResource, metrics::FsmMetrics, options::ReconcilerOptions, reconciler::FsmReconciler,
    reconciler::ReconcilerBuilder,
};

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
/// own flags are `A` ([`Operator::with_args`](super::Operator::with_args)).
///
/// # Expected flow
/// Build the reconciler with [`reconciler`](RunContext::reconciler): it
/// keeps records in the store the operator declares ([`Operator::new`](super::Operator::new)),
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
    /// With `--shards`: this replica's shard, which
    /// [`reconciler`](RunContext::reconciler) gives the reconciler (it then
    /// runs nothing for objects of other shards, and lets drained ones go),
    /// and whose selector [`watcher_config`](RunContext::watcher_config)
    /// watches. `leadership` is then the hold on the shard Lease.
    pub shard: Option<ShardGuard>,
    /// The operator's own flags, parsed ([`Operator::with_args`](super::Operator::with_args)).
    pub args: A,
    pub(super) health: Health,
    pub(super) store: StoreKind,
    pub(super) options: ReconcilerOptions,
    pub(super) machine: PhantomData<fn() -> F>,
}

impl<F, A: Clone> Clone for RunContext<F, A> {
    fn clone(&self) -> Self {
        RunContext {
            client: self.client.clone(),
            namespace: self.namespace.clone(),
            metrics: self.metrics.clone(),
            leadership: self.leadership.clone(),
            shard: self.shard.clone(),
            args: self.args.clone(),
            health: self.health.clone(),
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
            .field("shard", &self.shard)
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

    /// The watcher configuration of the operator's resource: under
    /// `--shards`, the objects labelled for this replica's shard; all
    /// otherwise. A Controller built with `watcher::Config::default()`
    /// instead stays safe (the reconciler refuses other shards' objects)
    /// but caches and queues every object.
    ///
    /// ```no_run
    /// # use fsm_kube::cli::RunContext;
    /// # fn demo<F: fsm_kube::fsm_core::Fsm>(run: RunContext<F>)
    /// # where F::Resource: fsm_kube::KubeResource + kube::Resource<Scope = k8s_openapi::NamespaceResourceScope> {
    /// let controller = kube::runtime::Controller::new(run.api::<F::Resource>(), run.watcher_config());
    /// # drop(controller); }
    /// ```
    pub fn watcher_config(&self) -> kube::runtime::watcher::Config {
        match &self.shard {
            Some(shard) => shard.watcher_config(),
            None => kube::runtime::watcher::Config::default(),
        }
    }

    /// The operator's readiness, which `/readyz` reports (on `--http-addr`).
    /// `run` holds it until the resource has been listed once; hold it
    /// longer with [`Health::hold`].
    pub fn health(&self) -> &Health {
        &self.health
    }

    /// Holds readiness until the controller's watch has synced:
    /// `run.ready_when_synced(controller.store())` before running the
    /// controller ([`Health::ready_when_synced`]).
    pub fn ready_when_synced<K>(&self, store: kube::runtime::reflector::Store<K>)
    where
        K: kube::runtime::reflector::Lookup + Clone + Send + Sync + 'static,
        K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
    {
        self.health.ready_when_synced(store);
    }

    /// The store the operator declares ([`Operator::new`](super::Operator::new)).
    pub fn store_kind(&self) -> StoreKind {
        self.store
    }

    /// The options the reconciler is built with
    /// ([`Operator::reconciler_options`](super::Operator::reconciler_options)).
    pub fn options(&self) -> &ReconcilerOptions {
        &self.options
    }
}

impl<F, A> RunContext<F, A>
where
    F: Fsm,
    F::Resource: KubeResource,
{
    /// A `Controller` of the operator's resource `K` in the watched
    /// namespace (or all), whose
    /// cache keeps the objects without their `managedFields`
    /// ([`crate::watch`]), watching
    /// what [`watcher_config`](RunContext::watcher_config) selects (under
    /// `--shards`, this replica's shard), and that survives objects that
    /// do not decode as `K`: they are left out and reported by
    /// [`decode_reporter`](RunContext::decode_reporter)
    /// ([`crate::watch`]).
    pub fn lean_controller<K>(&self) -> kube::runtime::Controller<K>
    where
        K: kube::Resource<DynamicType = (), Scope = NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug
            + Send
            + Sync
            + 'static,
    {
        self.decode_reporter()
            .lean_controller(self.api(), self.watcher_config())
    }

    /// As [`lean_controller`](RunContext::lean_controller), with a cache
    /// that keeps `managedFields`: what replaces
    /// `Controller::new(run.api(), run.watcher_config())`, which stops
    /// reconciling every object of the kind while one does not decode.
    ///
    /// ```no_run
    /// # use std::sync::Arc;
    /// # use futures::StreamExt;
    /// # use fsm_kube::cli::RunContext;
    /// # async fn demo<F: fsm_kube::fsm_core::Fsm>(run: RunContext<F>, ctx: F::Context)
    /// # where F::Resource: fsm_kube::KubeResource + kube::Resource<Scope = k8s_openapi::NamespaceResourceScope> {
    /// let fsm = run.reconciler();
    /// run.controller::<F::Resource>()
    ///     .run(fsm.reconcile(), fsm.error_policy(), Arc::new(ctx))
    ///     .for_each(|_| async {})
    ///     .await;
    /// # }
    /// ```
    pub fn controller<K>(&self) -> kube::runtime::Controller<K>
    where
        K: kube::Resource<DynamicType = (), Scope = NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug
            + Send
            + Sync
            + 'static,
    {
        self.decode_reporter()
            .controller(self.api(), self.watcher_config())
    }

    /// The reporter of the objects that do not decode as the operator's
    /// resource ([`crate::watch`]), writing as
    /// [`reconciler`](RunContext::reconciler)'s does (the operator's field
    /// manager, event reporter, events and conditions on or off; under
    /// `--leader-elect`, only while this replica holds the Lease), quoting
    /// serde's values only when the machine has no sensitive state.
    /// [`lean_controller`](RunContext::lean_controller) and
    /// [`controller`](RunContext::controller) use it.
    pub fn decode_reporter(&self) -> crate::watch::DecodeReporter {
        let reporter =
            crate::watch::DecodeReporter::from_options(self.client.clone(), &self.options)
                .quote_values(!crate::reconciler::has_sensitive_states::<F>());
        match &self.leadership {
            Some(leadership) => reporter.leadership(leadership.clone()),
            None => reporter,
        }
    }

    /// The reconciler of machine `F`, keeping records in the store the
    /// operator declares: [`crate::StatusStore`],
    /// [`crate::ConfigMapStore`] or [`crate::SecretStore`] (of the watched
    /// namespace only under `--namespace`, so that a Role there is
    /// enough), or `fsm_core::EphemeralStore`; with the operator's
    /// [`ReconcilerOptions`], the metrics, and under `--leader-elect` the
    /// hold on the Lease. Build it once per call of the main function (an
    /// ephemeral store is new each time).
    pub fn reconciler(&self) -> FsmReconciler<F> {
        let store = self
            .store
            .store::<F::Resource>(self.client.clone(), self.namespace.as_deref());
        self.builder(store).build()
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
        let given_kind = store.kind();
        if given_kind != Some(self.store) {
            return Err(Error::StoreMismatch {
                declared: self.store,
                given_kind,
                given: std::any::type_name::<S>(),
            });
        }
        Ok(self.builder(Box::new(store)).build())
    }

    fn builder(&self, store: Box<dyn KubeStore<F::Resource>>) -> ReconcilerBuilder<F> {
        let builder = FsmReconciler::<F>::builder_boxed(self.client.clone(), store)
            .options(self.options.clone())
            .metrics(self.metrics.clone());
        let builder = match &self.leadership {
            Some(leadership) => builder.leadership(leadership.clone()),
            None => builder,
        };
        match &self.shard {
            Some(shard) => builder.shard(shard.clone()),
            None => builder,
        }
    }
}
