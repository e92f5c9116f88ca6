//! `FsmReconciler`: hands `kube::runtime::Controller::run` its `reconcile`
//! and `error_policy`, driving one machine per object.

use std::sync::Arc;
use std::time::Duration;

use fsm_core::{
    Authority, AuthorityLost, Clock, Engine, Fsm, InvalidMachine, Observed, ReconcileError, Report,
    StoreError,
};
use kube::api::{ApiResource, DynamicObject, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Recorder, Reporter};
use kube::{Api, Client, Resource, ResourceExt};
use tracing::Instrument;

use crate::dependents::DependentsRuntime;
use crate::leader::Leadership;
use crate::metrics::FsmMetrics;
use crate::newer_record::{Newer, NewerRecords};
use crate::options::ReconcilerOptions;
use crate::shard::ShardGuard;
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
    /// Sharded mode: letting a drained object go failed.
    #[error("releasing the object to another shard failed")]
    Shard(#[source] kube::Error),
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

/// Builds an [`FsmReconciler`]: everything it is given takes effect, as
/// the reconciler is made only by [`build`](ReconcilerBuilder::build).
///
/// ```no_run
/// # use std::time::Duration;
/// # use fsm_kube::{FsmMetrics, FsmReconciler, ReconcilerOptions, StatusStore};
/// # fn demo<F>(client: kube::Client, metrics: FsmMetrics) -> FsmReconciler<F>
/// # where F: fsm_core::Fsm, F::Resource: fsm_kube::KubeResource {
/// FsmReconciler::<F>::builder(client, StatusStore::new())
///     .options(ReconcilerOptions::default().poll_interval(Duration::from_secs(10)))
///     .metrics(metrics)
///     .build()
/// # }
/// ```
pub struct ReconcilerBuilder<F: Fsm>
where
    F::Resource: KubeResource,
{
    client: Client,
    store: Box<dyn KubeStore<F::Resource>>,
    options: ReconcilerOptions,
    metrics: Option<FsmMetrics>,
    leadership: Option<Leadership>,
    shard: Option<ShardGuard>,
    clock: Option<Arc<dyn Clock>>,
    dependents: Option<DependentsRuntime>,
}

impl<F: Fsm> std::fmt::Debug for ReconcilerBuilder<F>
where
    F::Resource: KubeResource,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReconcilerBuilder")
            .field("machine", &F::machine().name())
            .field("options", &self.options)
            .field("metrics", &self.metrics.is_some())
            .field("leadership", &self.leadership)
            .finish_non_exhaustive()
    }
}

impl<F: Fsm> ReconcilerBuilder<F>
where
    F::Resource: KubeResource,
{
    /// Replaces the options (default [`ReconcilerOptions::default`]).
    #[must_use]
    pub fn options(mut self, options: ReconcilerOptions) -> Self {
        self.options = options;
        self
    }

    /// Counts what the machine does in `metrics`.
    #[must_use]
    pub fn metrics(mut self, metrics: FsmMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// With leader election: this replica's hold on the Lease. The engine
    /// runs no handler, compensation or cleanup once it lapses, and stops a
    /// handler after a checkpoint written too late (see
    /// [`fsm_core::Authority`]); nothing is written, not even the
    /// finalizer. Without it the replica acts alone. The operator CLI gives
    /// it under `run --leader-elect` ([`crate::cli::RunContext::reconciler`]).
    #[must_use]
    pub fn leadership(mut self, leadership: Leadership) -> Self {
        self.leadership = Some(leadership);
        self
    }

    /// Sharded mode: reconcile only objects labelled for this replica's
    /// shard, and let drained ones go ([`crate::shard`]). Give the shard
    /// Lease's hold to [`leadership`](Self::leadership) too.
    #[must_use]
    pub fn shard(mut self, guard: ShardGuard) -> Self {
        self.shard = Some(guard);
        self
    }

    /// The runtime of dependent resources handlers reach with
    /// [`StepDependents`](crate::dependents::StepDependents) (to give it
    /// another field manager or another requeue). Without it, `build`
    /// installs one with the reconciler's client, field manager, event
    /// recorder and metrics. Either way, give
    /// [`FsmReconciler::dependents`] (or a clone of this runtime) to
    /// [`owns_dependents`](crate::dependents::owns_dependents): its
    /// watches become the runtime's caches.
    #[must_use]
    pub fn dependents(mut self, runtime: DependentsRuntime) -> Self {
        self.dependents = Some(runtime);
        self
    }

    /// Uses `clock` for the machine's timestamps (tests).
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The reconciler.
    pub fn build(self) -> FsmReconciler<F> {
        let ReconcilerBuilder {
            client,
            store,
            options,
            metrics,
            leadership,
            shard,
            clock,
            dependents,
        } = self;
        let recorder = options
            .events
            .then(|| Recorder::new(client.clone(), Reporter::from(options.reporter.clone())));
        let dependents = dependents.unwrap_or_else(|| {
            let mut runtime =
                DependentsRuntime::new(client.clone()).field_manager(&options.field_manager);
            if let Some(recorder) = &recorder {
                runtime = runtime.recorder(recorder.clone());
            }
            if let Some(metrics) = &metrics {
                runtime = runtime.metrics(metrics.clone());
            }
            runtime
        });
        let mut engine_options = options.engine.clone();
        engine_options.max_transitions = engine_options.max_transitions.max(1);
        let engine = Engine::<F>::new().map_err(Arc::new).map(|mut engine| {
            engine = engine
                .with_options(engine_options)
                .with_extension(Arc::new(dependents.clone()));
            if let Some(leadership) = &leadership {
                engine = engine.with_authority(Arc::new(leadership.clone()));
            }
            if let Some(clock) = clock {
                engine = engine.with_clock(clock);
            }
            engine
        });
        if let Err(e) = &engine {
            tracing::error!(machine = F::machine().name(), error = %e, "invalid machine; every reconcile will fail");
        }
        FsmReconciler {
            inner: Arc::new(Inner {
                client,
                store,
                engine,
                options,
                leadership,
                shard,
                recorder,
                metrics,
                dependents,
                too_large: std::sync::Mutex::default(),
                newer: NewerRecords::default(),
            }),
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
    leadership: Option<Leadership>,
    shard: Option<ShardGuard>,
    recorder: Option<Recorder>,
    metrics: Option<FsmMetrics>,
    /// What handlers converge dependents with; the conditions it reports
    /// go into the stores' writes.
    dependents: DependentsRuntime,
    /// Objects (UID, generation) already told that their record does not
    /// fit: a reconcile of a watched copy from before that report must not
    /// write it again.
    too_large: std::sync::Mutex<std::collections::HashSet<(String, Option<i64>)>>,
    /// Objects already told that their record is a newer build's.
    newer: NewerRecords,
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
/// kept, looked at again after the poll interval or on a change. Nor is a
/// record written by a newer version of the machine (a rolling update, a
/// rollback): it is left untouched (not even the finalizer is added), the
/// object gets a `Degraded` condition with reason `RecordFromNewerVersion`
/// and one event per object and version, and is looked at again after the
/// poll interval; a replica that reads the record clears the condition.
/// Conflicts requeue at once; other errors after `error_requeue`.
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
    /// A reconciler keeping records in `store`, with default options, no
    /// metrics and no leader election.
    pub fn new(client: Client, store: impl KubeStore<F::Resource>) -> Self {
        Self::builder(client, store).build()
    }

    /// A builder of a reconciler keeping records in `store`: options,
    /// metrics, leadership, clock, then [`ReconcilerBuilder::build`].
    pub fn builder(client: Client, store: impl KubeStore<F::Resource>) -> ReconcilerBuilder<F> {
        Self::builder_boxed(client, Box::new(store))
    }

    /// As [`builder`](Self::builder), with a store already boxed (one
    /// chosen at run time), which is not boxed again.
    pub(crate) fn builder_boxed(
        client: Client,
        store: Box<dyn KubeStore<F::Resource>>,
    ) -> ReconcilerBuilder<F> {
        ReconcilerBuilder {
            client,
            store,
            options: ReconcilerOptions::default(),
            metrics: None,
            leadership: None,
            shard: None,
            clock: None,
            dependents: None,
        }
    }

    /// The hold on the Lease the reconciler checks, if any.
    pub fn leadership(&self) -> Option<&Leadership> {
        self.inner.leadership.as_ref()
    }

    /// Whether the reconciler counts into metrics.
    pub fn has_metrics(&self) -> bool {
        self.inner.metrics.is_some()
    }

    /// The options in force.
    pub fn options(&self) -> &ReconcilerOptions {
        &self.inner.options
    }

    /// The runtime of dependent resources the reconciler converges with
    /// (given to [`ReconcilerBuilder::dependents`], or the one `build`
    /// installed): give it to
    /// [`owns_dependents`](crate::dependents::owns_dependents) so that the
    /// controller's watches of the dependents are also its caches.
    ///
    /// ```no_run
    /// # use fsm_kube::prelude::*;
    /// # use fsm_kube::dependents::{DependentKind, owns_dependents};
    /// # fn demo<F: Fsm>(client: kube::Client, fsm: FsmReconciler<F>, kinds: Vec<DependentKind>)
    /// # where F::Resource: fsm_kube::KubeResource + kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug {
    /// let controller = kube::runtime::Controller::new(kube::Api::<F::Resource>::all(client), Default::default());
    /// let controller = owns_dependents(controller, fsm.dependents(), None, kinds);
    /// # }
    /// ```
    pub fn dependents(&self) -> &DependentsRuntime {
        &self.inner.dependents
    }

    /// A reporter of the objects that do not decode as the resource, writing
    /// as this reconciler does (field manager, event reporter, events and
    /// conditions on or off, the Lease it checks), quoting serde's values
    /// only when the machine has no sensitive state: give it to
    /// [`DecodeReporter::controller`](crate::watch::DecodeReporter::controller) so that one object that does not
    /// decode cannot stop the others.
    pub fn decode_reporter(&self) -> crate::watch::DecodeReporter {
        let inner = &self.inner;
        let reporter = crate::watch::DecodeReporter::with_recorder(
            inner.client.clone(),
            &inner.options,
            inner.recorder.clone(),
        )
        .quote_values(!has_sensitive_states::<F>());
        match &inner.leadership {
            Some(leadership) => reporter.leadership(leadership.clone()),
            None => reporter,
        }
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
        if let Some(leadership) = &inner.leadership {
            leadership.check().map_err(Error::AuthorityLost)?;
        }
        if let Some(shard) = &inner.shard
            && screen(shard, &inner.client, object.as_ref()).await?
        {
            return Ok(Action::await_change());
        }
        if let Some(wait) = self.awaiting_own_write(object.as_ref()) {
            return Ok(Action::requeue(wait));
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
            // A newer build's record: the finalizer is this build's to add
            // only if the object is this build's to run.
            let (status, _) = crate::fields::status_and_spec(object.as_ref(), false);
            let before = self.target(api.clone(), object.clone(), status);
            let peeked = NewerRecords::peek::<F>(inner.store.as_ref(), &before).await;
            if let Some(newer) = peeked.map_err(Error::Store)? {
                return self.report_newer_record(&before, newer).await;
            }
            let updated = match finalizer::add(
                &api,
                object.as_ref(),
                &inner.options.finalizer,
                &params,
            )
            .await
            {
                Ok(updated) => updated,
                Err(kube::Error::Api(s)) if s.is_conflict() => return Err(Error::Conflict),
                Err(kube::Error::Api(refusal)) if is_too_large(&refusal) => {
                    let size = serde_json::to_vec(object.as_ref()).map_or(0, |b| b.len());
                    return self
                        .report_object_too_large(&before, size, &refusal.message)
                        .await;
                }
                Err(e) => return Err(Error::Finalizer(e)),
            };
            object = Arc::new(updated);
        }
        // One serialisation of the object per reconcile: the stores read
        // the status, the machine the spec only when it snapshots it.
        let (status, spec) =
            crate::fields::status_and_spec(object.as_ref(), machine.snapshots_spec());
        let target = self.target(api.clone(), object.clone(), status);
        let commands = match crate::records::read_commands(object.meta()) {
            Ok(commands) => commands,
            Err(error) => {
                tracing::warn!(%error, "the object's command list cannot be read; none of it is applied");
                self.publish(object.as_ref(), events::for_unreadable_commands(&error))
                    .await;
                Vec::new()
            }
        };
        let observed = Observed {
            commands,
            key: target.key().clone(),
            generation: target.generation(),
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
            Err(ReconcileError::NewerRecord { found, supported }) => {
                let newer = Newer { found, supported };
                return self.report_newer_record(&target, newer).await;
            }
            Err(other) => return Err(other.into()),
        };
        self.forget_too_large(target.uid());
        inner.newer.clear(&target);
        // Events and metrics first: a failed refresh must not lose them.
        self.after(&target, &report).await;
        self.refresh_status(&target, &report).await?;
        if report.released {
            inner.dependents.reported.forget(target.uid());
            finalizer::remove(&api, object.as_ref(), &inner.options.finalizer, &params)
                .await
                .map_err(|e| match &e {
                    kube::Error::Api(s) if s.is_not_found() => Error::Finalizer(e),
                    kube::Error::Api(s) if s.is_conflict() => Error::Conflict,
                    _ => Error::Finalizer(e),
                })?;
            return Ok(Action::await_change());
        }
        Ok(match self.requeue_after(&target, &report) {
            Some(delay) => Action::requeue(delay),
            None => Action::await_change(),
        })
    }

    /// After a step that committed nothing (a state that stays, a paused
    /// object, a backoff): writes the object's conditions and
    /// `status.observedGeneration` when they no longer say what the record
    /// and what the step reported (its dependents' convergence) say, in a
    /// status-only patch over the version this reconcile read. Nothing is
    /// written when they do: a converged resting object costs no write per
    /// re-sync. A commit wrote them already, with the record.
    ///
    /// # Errors
    /// [`Error::Store`] when the write fails for another reason than a
    /// conflict (a newer version of the object wakes the next reconcile,
    /// which looks again).
    async fn refresh_status(
        &self,
        target: &Target<F::Resource>,
        report: &Report,
    ) -> Result<(), Error> {
        let inner = &self.inner;
        let Some(record) = report.record.as_ref().filter(|_| report.commits == 0) else {
            return Ok(());
        };
        if report.released
            || inner
                .store
                .own_commit_in_flight(target.uid(), target.resource_version())
                .is_some()
        {
            // The runtime's own commit, not yet seen by the watch, wrote
            // them; this copy is older.
            return Ok(());
        }
        if let Some(leadership) = &inner.leadership
            && leadership.check().is_err()
        {
            return Ok(());
        }
        match target.sync_status(record, None, true).await {
            Ok(wrote) => {
                if wrote {
                    tracing::debug!("conditions refreshed without a commit");
                }
                Ok(())
            }
            Err(StoreError::Conflict) => {
                tracing::debug!(
                    "the object changed meanwhile; its next reconcile refreshes the conditions"
                );
                Ok(())
            }
            Err(error) => Err(Error::Store(error)),
        }
    }

    /// How much longer to wait for the watch to deliver the runtime's own
    /// last commit to `object`, when this copy is from before it and the
    /// commit is younger than `own_write_wait`: something else woke the
    /// object (an owned object's event, a requeue) while the commit's own
    /// event is on its way, and that event will run the step on the fresh
    /// object. Running it on this copy too would run the handler twice.
    fn awaiting_own_write(&self, object: &F::Resource) -> Option<Duration> {
        let inner = &self.inner;
        let wait = inner.options.own_write_wait;
        if wait.is_zero() || !inner.store.commits_write_the_object() {
            return None;
        }
        let meta = object.meta();
        let (uid, version) = (meta.uid.as_deref()?, meta.resource_version.as_deref()?);
        let waited = inner.store.own_commit_in_flight(uid, version)?.elapsed();
        let left = wait.saturating_sub(waited);
        if left.is_zero() {
            return None;
        }
        tracing::debug!(
            ?waited,
            "a copy from before the runtime's own commit; its watch event runs the step"
        );
        Some(left)
    }

    /// When to reconcile again after `report`. The engine asks for the next
    /// step at once after a transition; when that commit wrote the object
    /// itself (a version newer than the one this reconcile saw), the watch
    /// event of the write wakes the object, so the requeue only stands in
    /// for an event that does not come. The controller's scheduler keeps
    /// the earlier of the two, so it costs nothing when the event comes.
    fn requeue_after(&self, target: &Target<F::Resource>, report: &Report) -> Option<Duration> {
        let wrote_the_object = report.commits > 0
            && self.inner.store.commits_write_the_object()
            && report
                .version
                .as_ref()
                .is_some_and(|v| v.0 != target.resource_version());
        match report.requeue {
            Some(Duration::ZERO) if wrote_the_object => Some(self.inner.options.own_write_wait),
            other => other,
        }
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
        let key = (target.uid().to_owned(), target.generation());
        if self.lock_too_large().contains(&key) {
            return Ok(Action::requeue(self.inner.options.engine.poll_interval));
        }
        if target.report_too_large(error).await.map_err(Error::Store)? {
            self.publish(target.object().as_ref(), events::for_too_large(error))
                .await;
        }
        self.lock_too_large().insert(key);
        Ok(Action::requeue(self.inner.options.engine.poll_interval))
    }

    /// The object itself is too large for the finalizer the machine needs
    /// (its spec near the server's limit): nothing of the machine can be
    /// stored on it, not even a condition, so it is reported once per
    /// object and generation with a Warning event naming the size and the
    /// limit, and looked at again after the poll interval (not retried at
    /// once: it cannot fit until the object shrinks).
    async fn report_object_too_large(
        &self,
        target: &Target<F::Resource>,
        size: usize,
        refusal: &str,
    ) -> Result<Action, Error> {
        let key = (target.uid().to_owned(), target.generation());
        let first = self.lock_too_large().insert(key);
        if first {
            tracing::error!(
                size,
                refusal,
                "the object is too large for the finalizer its machine needs; nothing runs until it shrinks"
            );
            self.publish(
                target.object().as_ref(),
                events::for_object_too_large(size, refusal),
            )
            .await;
        }
        Ok(Action::requeue(self.inner.options.engine.poll_interval))
    }

    /// Forgets that object `uid`'s record did not fit: it committed again.
    fn forget_too_large(&self, uid: &str) {
        let mut reported = self.lock_too_large();
        if !reported.is_empty() {
            reported.retain(|(u, _)| u != uid);
        }
    }

    fn lock_too_large(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashSet<(String, Option<i64>)>> {
        self.inner
            .too_large
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A record written by a newer build: this one must neither act on it
    /// nor overwrite it, so the object says so (condition, and one event per
    /// object and version) and is looked at again after the poll interval.
    async fn report_newer_record(
        &self,
        target: &Target<F::Resource>,
        newer: Newer,
    ) -> Result<Action, Error> {
        let event = self
            .inner
            .newer
            .report(target, newer)
            .await
            .map_err(Error::Store)?;
        if let Some(event) = event {
            self.publish(target.object().as_ref(), event).await;
        }
        Ok(Action::requeue(self.inner.options.engine.poll_interval))
    }

    fn target(
        &self,
        api: Api<DynamicObject>,
        object: Arc<F::Resource>,
        status: serde_json::Value,
    ) -> Target<F::Resource> {
        Target::from_parts(object, api, F::machine(), status)
            .with_field_manager(self.inner.options.field_manager.clone())
            .with_conditions(self.inner.options.conditions)
            .with_reported(self.inner.dependents.reported.clone())
    }

    /// Logs, events and metrics for what a reconcile did.
    async fn after(&self, target: &Target<F::Resource>, report: &Report) {
        for effect in &report.effects {
            tracing::debug!(?effect, "effect");
            if let Some(event) = events::for_effect(effect) {
                self.publish(target.object().as_ref(), event).await;
            }
        }
        if let Some(metrics) = &self.inner.metrics {
            metrics.observe(F::machine().name(), target.uid(), report);
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

/// Whether the server refused a write as too large (`413`; `422` "Too
/// long"; `500` from etcd or its gRPC client).
fn is_too_large(status: &kube::core::Status) -> bool {
    crate::store::size::is_too_large_status(status.code, &status.message)
}

/// Whether a state of machine `F` holds sensitive data: its reports then
/// quote nothing from the object.
pub(crate) fn has_sensitive_states<F: Fsm>() -> bool {
    F::machine()
        .states()
        .iter()
        .any(|state| state.is_sensitive())
}

/// The shard's hook: whether to stop before running anything (refused,
/// or let go just now); a conflict while letting go is
/// [`Error::Conflict`].
async fn screen<K>(guard: &ShardGuard, client: &Client, object: &K) -> Result<bool, Error>
where
    K: Resource<DynamicType = ()>,
{
    match guard.screen(client, object).await {
        Ok(stop) => Ok(stop.is_some()),
        Err(kube::Error::Api(status)) if status.is_conflict() => Err(Error::Conflict),
        Err(error) => Err(Error::Shard(error)),
    }
}
