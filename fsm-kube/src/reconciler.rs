//! `FsmReconciler`: hands `kube::runtime::Controller::run` its `reconcile`
//! and `error_policy`, driving one machine per object.

use std::sync::Arc;
use std::time::Duration;

use fsm_core::{
    Authority, AuthorityLost, Clock, Engine, EngineOptions, Fsm, InvalidMachine, ObjectKey,
    Observed, ReconcileError, Report, StoreError,
};
use kube::api::{ApiResource, DynamicObject, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Recorder, Reporter};
use kube::{Api, Client, Resource, ResourceExt};
use tracing::Instrument;

use crate::leader::Leadership;
use crate::metrics::FsmMetrics;
use crate::store::{Bound, KubeStore, Target};
use crate::{KubeResource, events, finalizer};

/// Why a reconcile failed. The controller's `error_policy` requeues it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The machine's description is invalid (hand-written machines only).
    #[error(transparent)]
    InvalidMachine(Arc<InvalidMachine>),
    /// Someone else wrote in between; nothing was committed. Reconciled
    /// again at once.
    #[error("conflicting write; nothing was committed")]
    Conflict,
    /// The engine failed.
    #[error("reconcile failed")]
    Reconcile(#[source] ReconcileError),
    /// The finalizer could not be added or removed.
    #[error("finalizer update failed")]
    Finalizer(#[source] kube::Error),
    /// The record store failed.
    #[error("state store failed")]
    Store(#[source] StoreError),
    /// This replica no longer holds the Lease: nothing was run or
    /// recorded; the replica that holds it now reconciles the object.
    #[error(transparent)]
    AuthorityLost(AuthorityLost),
}

impl From<ReconcileError> for Error {
    fn from(e: ReconcileError) -> Self {
        match e {
            ReconcileError::Conflict => Error::Conflict,
            ReconcileError::AuthorityLost(lost) => Error::AuthorityLost(lost),
            other => Error::Reconcile(other),
        }
    }
}

/// The future of one reconcile.
pub type ReconcileFuture = fsm_core::BoxFuture<'static, Result<Action, Error>>;

/// How an [`FsmReconciler`] behaves.
#[derive(Clone, Debug)]
pub struct ReconcilerOptions {
    /// The finalizer added when the machine has something to run on
    /// deletion. Default `operator-fsm.io/finalizer`.
    pub finalizer: String,
    /// The field manager of the runtime's writes. Default `operator-fsm`.
    pub field_manager: String,
    /// Whether to publish Kubernetes Events. Default on.
    pub events: bool,
    /// The controller name in events. Default `operator-fsm`.
    pub reporter: String,
    /// Whether to maintain `Ready`, `Progressing` and `Degraded`
    /// conditions on the object. Default on.
    pub conditions: bool,
    /// When to look again after `Transition::stay()`. Default 60 s.
    pub poll_interval: Duration,
    /// Transitions one reconcile may commit (more lets cheap states chain).
    /// Default 1.
    pub transitions_per_reconcile: u32,
    /// The requeue delay after an error other than a conflict. Default 5 s.
    pub error_requeue: Duration,
    /// With leader election: this replica's hold on the Lease. The engine
    /// runs no handler, compensation or cleanup once it lapses, and stops a
    /// handler after a checkpoint written too late (see
    /// [`fsm_core::Authority`]). Default `None`: the replica acts alone.
    pub leadership: Option<Leadership>,
}

impl Default for ReconcilerOptions {
    fn default() -> Self {
        ReconcilerOptions {
            finalizer: "operator-fsm.io/finalizer".to_owned(),
            field_manager: "operator-fsm".to_owned(),
            events: true,
            reporter: "operator-fsm".to_owned(),
            conditions: true,
            poll_interval: Duration::from_secs(60),
            transitions_per_reconcile: 1,
            error_requeue: Duration::from_secs(5),
            leadership: None,
        }
    }
}

struct Inner<F: Fsm>
where
    F::Resource: KubeResource,
{
    client: Client,
    store: Box<dyn KubeStore<F::Resource>>,
    engine: Result<Engine<F>, Arc<InvalidMachine>>,
    options: ReconcilerOptions,
    recorder: Option<Recorder>,
    metrics: Option<FsmMetrics>,
}

/// Drives machine `F` for the objects a `Controller` hands it.
///
/// ```no_run
/// # use std::sync::Arc;
/// # use futures::StreamExt;
/// # use fsm_kube::{FsmReconciler, StatusStore};
/// # use kube::runtime::{Controller, watcher};
/// # async fn run<F>(client: kube::Client, ctx: F::Context)
/// # where F: fsm_core::Fsm, F::Resource: fsm_kube::KubeResource {
/// let fsm = FsmReconciler::<F>::new(client.clone(), StatusStore::new());
/// Controller::new(kube::Api::<F::Resource>::all(client), watcher::Config::default())
///     .run(fsm.reconcile(), fsm.error_policy(), Arc::new(ctx))
///     .for_each(|_| async {})
///     .await;
/// # }
/// ```
///
/// # Expected flow
/// Per reconcile: add the finalizer if the machine needs one; on deletion
/// run the machine's unwinding and remove the finalizer; otherwise one
/// engine reconcile (see [`fsm_core::Engine`]), then events and metrics for
/// what it did, and an [`Action`] from its requeue.
///
/// # Errors
/// A corrupt record is not an error: the object gets a `Degraded`
/// condition and a `CorruptRecord` event, and waits for a change. Nor is a
/// record too large to commit: `RecordTooLarge`, the last committed record
/// kept, looked at again after the poll interval or on a change. Conflicts
/// requeue at once; other errors after `error_requeue`.
pub struct FsmReconciler<F: Fsm>
where
    F::Resource: KubeResource,
{
    inner: Arc<Inner<F>>,
}

impl<F: Fsm> Clone for FsmReconciler<F>
where
    F::Resource: KubeResource,
{
    fn clone(&self) -> Self {
        FsmReconciler {
            inner: self.inner.clone(),
        }
    }
}

impl<F: Fsm> FsmReconciler<F>
where
    F::Resource: KubeResource,
{
    /// A reconciler keeping records in `store`, with default options.
    pub fn new(client: Client, store: impl KubeStore<F::Resource>) -> Self {
        Self::with_options(client, store, ReconcilerOptions::default())
    }

    /// A reconciler with `options`.
    pub fn with_options(
        client: Client,
        store: impl KubeStore<F::Resource>,
        options: ReconcilerOptions,
    ) -> Self {
        let engine = Engine::<F>::new().map_err(Arc::new).map(|e| {
            e.with_options(EngineOptions {
                poll_interval: options.poll_interval,
                max_transitions: options.transitions_per_reconcile.max(1),
                ..EngineOptions::default()
            })
        });
        let engine = match &options.leadership {
            Some(leadership) => engine.map(|e| e.with_authority(Arc::new(leadership.clone()))),
            None => engine,
        };
        if let Err(e) = &engine {
            tracing::error!(machine = F::machine().name(), error = %e, "invalid machine; every reconcile will fail");
        }
        let recorder = options
            .events
            .then(|| Recorder::new(client.clone(), Reporter::from(options.reporter.clone())));
        FsmReconciler {
            inner: Arc::new(Inner {
                client,
                store: Box::new(store),
                engine,
                options,
                recorder,
                metrics: None,
            }),
        }
    }

    /// Counts what the machine does in `metrics`.
    #[must_use]
    pub fn with_metrics(self, metrics: FsmMetrics) -> Self {
        self.map_inner(|inner| inner.metrics = Some(metrics))
    }

    /// Uses `clock` for the machine's timestamps (tests).
    #[must_use]
    pub fn with_clock(self, clock: Arc<dyn Clock>) -> Self {
        self.map_inner(|inner| {
            if let Ok(engine) = &mut inner.engine {
                *engine = engine.clone().with_clock(clock);
            }
        })
    }

    fn map_inner(self, f: impl FnOnce(&mut Inner<F>)) -> Self {
        match Arc::try_unwrap(self.inner) {
            Ok(mut inner) => {
                f(&mut inner);
                FsmReconciler {
                    inner: Arc::new(inner),
                }
            }
            Err(shared) => {
                tracing::warn!("reconciler already shared; the option was not applied");
                FsmReconciler { inner: shared }
            }
        }
    }

    /// The options in force.
    pub fn options(&self) -> &ReconcilerOptions {
        &self.inner.options
    }

    /// The `reconcile` function for `Controller::run`.
    pub fn reconcile(
        &self,
    ) -> impl FnMut(Arc<F::Resource>, Arc<F::Context>) -> ReconcileFuture + use<F> {
        let this = self.clone();
        move |object, context| {
            let this = this.clone();
            Box::pin(async move { this.reconcile_object(object, context).await })
        }
    }

    /// The `error_policy` function for `Controller::run`.
    pub fn error_policy(
        &self,
    ) -> impl Fn(Arc<F::Resource>, &Error, Arc<F::Context>) -> Action + use<F> {
        let delay = self.inner.options.error_requeue;
        move |object, error, _| match error {
            Error::Conflict => Action::requeue(Duration::from_millis(50)),
            Error::AuthorityLost(lost) => {
                tracing::info!(object = %object.name_any(), reason = lost.reason(), "not reconciled: this replica no longer holds the Lease");
                Action::requeue(delay)
            }
            other => {
                tracing::warn!(object = %object.name_any(), error = %other, "reconcile failed");
                Action::requeue(delay)
            }
        }
    }

    /// Reconciles one object (what `reconcile()` calls).
    ///
    /// # Errors
    /// [`Error`]; nothing uncommitted is lost.
    pub async fn reconcile_object(
        &self,
        object: Arc<F::Resource>,
        context: Arc<F::Context>,
    ) -> Result<Action, Error> {
        let span = tracing::info_span!(
            "reconcile",
            machine = F::machine().name(),
            object = %object.name_any(),
            namespace = object.namespace().unwrap_or_default(),
        );
        self.reconcile_inner(object, context).instrument(span).await
    }

    async fn reconcile_inner(
        &self,
        mut object: Arc<F::Resource>,
        context: Arc<F::Context>,
    ) -> Result<Action, Error> {
        let inner = &self.inner;
        let engine = inner
            .engine
            .as_ref()
            .map_err(|e| Error::InvalidMachine(e.clone()))?;
        // Not even the finalizer is written by a replica whose hold lapsed.
        if let Some(leadership) = &inner.options.leadership {
            leadership.check().map_err(Error::AuthorityLost)?;
        }
        let machine = F::machine();
        let resource = ApiResource::erase::<F::Resource>(&());
        let api: Api<DynamicObject> = match object.namespace() {
            Some(ns) => Api::namespaced_with(inner.client.clone(), &ns, &resource),
            None => Api::all_with(inner.client.clone(), &resource),
        };
        let params = PatchParams {
            field_manager: Some(inner.options.field_manager.clone()),
            ..PatchParams::default()
        };
        let deleting = object.meta().deletion_timestamp.is_some();
        let needs_finalizer = machine.needs_finalizer();
        let has_finalizer = finalizer::has(object.as_ref(), &inner.options.finalizer);
        if deleting && !(needs_finalizer && has_finalizer) {
            return Ok(Action::await_change());
        }
        if !deleting && needs_finalizer && !has_finalizer {
            let updated = finalizer::add(&api, object.as_ref(), &inner.options.finalizer, &params)
                .await
                .map_err(|e| match &e {
                    kube::Error::Api(s) if s.is_conflict() => Error::Conflict,
                    _ => Error::Finalizer(e),
                })?;
            object = Arc::new(updated);
        }
        // One serialisation of the object per reconcile: the stores read
        // the status, the machine the spec only when it snapshots it.
        let (status, spec) =
            crate::fields::status_and_spec(object.as_ref(), machine.snapshots_spec());
        let target = self.target(api.clone(), object.clone(), status);
        let observed = Observed {
            key: target.key.clone(),
            generation: target.generation,
            deleting,
            spec,
        };
        let store = Bound {
            store: inner.store.as_ref(),
            target: &target,
        };
        let report = match engine
            .reconcile(&store, &observed, object.as_ref(), context.as_ref())
            .await
        {
            Ok(report) => report,
            Err(ReconcileError::Corrupt(error)) => {
                tracing::error!(error = %error, "the stored record cannot be used; it is left untouched");
                let wrote = inner
                    .store
                    .report_corrupt(&target, &error)
                    .await
                    .map_err(Error::Store)?;
                if wrote {
                    self.publish(object.as_ref(), events::for_corrupt(&error))
                        .await;
                }
                return Ok(Action::await_change());
            }
            Err(ReconcileError::Store(error @ StoreError::TooLarge { .. })) => {
                return self.report_too_large(&target, &error).await;
            }
            Err(other) => return Err(other.into()),
        };
        self.after(&target, &report).await;
        if report.released {
            finalizer::remove(&api, object.as_ref(), &inner.options.finalizer, &params)
                .await
                .map_err(|e| match &e {
                    kube::Error::Api(s) if s.is_not_found() => Error::Finalizer(e),
                    kube::Error::Api(s) if s.is_conflict() => Error::Conflict,
                    _ => Error::Finalizer(e),
                })?;
            return Ok(Action::await_change());
        }
        Ok(match report.requeue {
            Some(delay) => Action::requeue(delay),
            None => Action::await_change(),
        })
    }

    /// A record too large to commit: retrying at once cannot help, so the
    /// object says so (condition and event, once) and is looked at again
    /// after the poll interval or when it changes.
    async fn report_too_large(
        &self,
        target: &Target<F::Resource>,
        error: &StoreError,
    ) -> Result<Action, Error> {
        tracing::error!(error = %error, "the record does not fit; the last committed record is kept");
        if target.report_too_large(error).await.map_err(Error::Store)? {
            self.publish(target.object.as_ref(), events::for_too_large(error))
                .await;
        }
        Ok(Action::requeue(self.inner.options.poll_interval))
    }

    fn target(
        &self,
        api: Api<DynamicObject>,
        object: Arc<F::Resource>,
        status: serde_json::Value,
    ) -> Target<F::Resource> {
        let meta = object.meta();
        let name = object.name_any();
        let key = match meta.namespace.clone() {
            Some(ns) => ObjectKey::namespaced(ns, name),
            None => ObjectKey::cluster(name),
        };
        Target {
            uid: meta.uid.clone().unwrap_or_else(|| key.to_string()),
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            generation: meta.generation,
            key,
            status,
            api,
            object,
            machine: F::machine(),
            field_manager: self.inner.options.field_manager.clone(),
            conditions: self.inner.options.conditions,
        }
    }

    /// Logs, events and metrics for what a reconcile did.
    async fn after(&self, target: &Target<F::Resource>, report: &Report) {
        for effect in &report.effects {
            tracing::debug!(?effect, "effect");
            if let Some(event) = events::for_effect(effect) {
                self.publish(target.object.as_ref(), event).await;
            }
        }
        if let Some(metrics) = &self.inner.metrics {
            metrics.observe(F::machine().name(), &target.uid, report);
        }
    }

    async fn publish(&self, object: &F::Resource, event: kube::runtime::events::Event) {
        let Some(recorder) = &self.inner.recorder else {
            return;
        };
        if let Err(error) = recorder.publish(&event, &object.object_ref(&())).await {
            tracing::warn!(%error, reason = event.reason, "event could not be published");
        }
    }
}
