//! `DependentsReconciler`: for operators that are only a set of dependents,
//! the `reconcile` and `error_policy` of a `kube::runtime::Controller`,
//! with no machine and no stored record.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use fsm_core::BoxFuture;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::Patch;
use kube::runtime::controller::Action;
use kube::{Client, ResourceExt};
use serde::Deserialize;
use serde_json::json;

use super::condition_memo;
use super::converge::converge_for;
use super::error::{DependentsError, DesiredError, SetError};
use super::object::Owner;
use super::on_delete::{self, TEARDOWN_FINALIZER, TeardownOnDelete};
use super::reads::{DesiredContext, Reads};
use super::report::{Convergence, Teardown};
use super::runtime::DependentsRuntime;
use super::set::DesiredSet;
use super::step::condition_of;
use super::teardown::teardown_for;
use crate::{KubeResource, conditions, finalizer};

/// The desired function, sync or async, as one shape.
type DesiredFn<K, C> = dyn Fn(Arc<K>, DesiredContext<C>) -> BoxFuture<'static, Result<DesiredSet, DependentsError>>
    + Send
    + Sync;

/// Reconciles objects of kind `K` (context `C`) by converging the set
/// `desired` computes from each, and reporting it in a `DependentsReady`
/// condition.
///
/// ```no_run
/// use std::sync::Arc;
/// use futures::StreamExt;
/// use fsm_kube::dependents::{Dependent, DependentsReconciler, DesiredSet, owns_dependents};
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::runtime::{Controller, watcher};
/// # use kube::ResourceExt;
///
/// # async fn run<K: fsm_kube::KubeResource>(client: kube::Client, kinds: Vec<fsm_kube::dependents::DependentKind>)
/// # where K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope> {
/// let reconciler = DependentsReconciler::<K, ()>::new(client.clone(), |owner: &K, _: &()| {
///     let config = ConfigMap {
///         metadata: kube::api::ObjectMeta { name: Some(format!("{}-config", owner.name_any())), ..Default::default() },
///         ..Default::default()
///     };
///     DesiredSet::builder().dependent(Dependent::new("config", &config)).build()
/// });
/// let controller = Controller::new(kube::Api::<K>::all(client.clone()), watcher::Config::default());
/// owns_dependents(controller, &client, None, kinds)
///     .run(reconciler.reconcile(), reconciler.error_policy(), Arc::new(()))
///     .for_each(|_| async {})
///     .await;
/// # }
/// ```
///
/// # Expected flow
/// Per reconcile: compute the set, [`converge`](super::converge) it, write
/// the `DependentsReady` condition (reason `Ready`, `Pending` or `Failed`,
/// the message naming what is pending or failed and why) with a status
/// merge patch of `conditions` when it changes (its status, reason,
/// generation or the keys pending or failed, not a progress detail; and
/// not `Pending` within the runtime's `pending_requeue` of a converge
/// that wrote to the set while the condition does not say `True`: the
/// dependents' watches wake the owner as they settle, and a look after
/// that writes `Ready` or `Pending`), and requeue after the
/// runtime's [`pending_requeue`](DependentsRuntime::pending_requeue) while
/// something is pending or failed (a change of a watched dependent wakes it
/// sooner). A converged object is looked at again after
/// [`resync`](DependentsReconciler::resync) (default
/// [`DEFAULT_RESYNC`]), so that a change no event reported (a dependent
/// deleted before the controller's watch of its kind had listed, or
/// during a re-list) is repaired all the same.
///
/// # Caveats
/// Without [`teardown_on_delete`](DependentsReconciler::teardown_on_delete)
/// no finalizer is added: when the owner is deleted, its dependents go
/// with it through the garbage collector (their owner references), in no
/// particular order. The
/// condition write replaces the status' `conditions` list as read with the
/// object; another writer of that list may race it. The status needs a
/// `conditions` field (a list of `Condition`).
pub struct DependentsReconciler<K, C> {
    runtime: DependentsRuntime,
    desired: Arc<DesiredFn<K, C>>,
    resync: Duration,
    on_delete: Option<TeardownOnDelete>,
}

/// How long a converged object waits, without events, before
/// [`DependentsReconciler`] looks at its dependents again.
pub const DEFAULT_RESYNC: Duration = Duration::from_secs(300);

impl<K, C> Clone for DependentsReconciler<K, C> {
    fn clone(&self) -> Self {
        DependentsReconciler {
            runtime: self.runtime.clone(),
            desired: self.desired.clone(),
            resync: self.resync,
            on_delete: self.on_delete.clone(),
        }
    }
}

impl<K, C> std::fmt::Debug for DependentsReconciler<K, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DependentsReconciler")
            .field("runtime", &self.runtime)
            .field("resync", &self.resync)
            .field("teardown_on_delete", &self.on_delete.is_some())
            .finish_non_exhaustive()
    }
}

/// Whether a pending `DependentsReady` need not be written yet: a
/// converge wrote to the set less than the runtime's `pending_requeue`
/// ago (`written_recently`: its dependents are in motion, and their
/// watches wake the owner as they settle) and the condition does not say
/// `True`. A converge that finds the set still pending after that writes
/// `Pending` (the pending requeue brings one); one that finds it ready
/// writes `Ready`. A set that was ready says `Pending` at once, so that
/// nobody waiting for the condition reads a stale `True`; a failure is
/// written at once.
fn settling(convergence: &Convergence, said_ready: bool, written_recently: bool) -> bool {
    !said_ready && written_recently && !convergence.is_ready() && !convergence.is_failed()
}

impl<K, C> DependentsReconciler<K, C>
where
    K: KubeResource,
    C: Send + Sync + 'static,
{
    /// A reconciler converging `desired(object, context)` with a default
    /// [`DependentsRuntime`] on `client`.
    pub fn new<F>(client: Client, desired: F) -> Self
    where
        F: Fn(&K, &C) -> Result<DesiredSet, SetError> + Send + Sync + 'static,
    {
        Self::with_runtime(DependentsRuntime::new(client), desired)
    }

    /// A reconciler with its own runtime (field manager, caches, events,
    /// metrics, requeue).
    pub fn with_runtime<F>(runtime: DependentsRuntime, desired: F) -> Self
    where
        F: Fn(&K, &C) -> Result<DesiredSet, SetError> + Send + Sync + 'static,
    {
        let desired: Arc<DesiredFn<K, C>> =
            Arc::new(move |owner: Arc<K>, cx: DesiredContext<C>| {
                let set = desired(owner.as_ref(), cx.context()).map_err(DependentsError::Set);
                Box::pin(std::future::ready(set)) as BoxFuture<'static, _>
            });
        Self::from_desired(runtime, desired)
    }

    /// A reconciler whose desired function is `async`: it gets the owner
    /// and a [`DesiredContext`] (the controller's context, and
    /// [`Reads`](super::Reads) of secondary objects in the owner's
    /// namespace, through the runtime's watch caches), and may read a
    /// Secret or any other object before building the set. `?` converts a
    /// [`ReadError`](super::ReadError) and a [`SetError`] into
    /// [`DesiredError`]; the reconcile fails with
    /// [`DependentsError::Desired`] (retried by the error policy).
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use fsm_kube::dependents::{Dependent, DependentsReconciler, DesiredContext, DesiredSet};
    /// use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    /// # use kube::ResourceExt;
    /// # fn demo<K: fsm_kube::KubeResource>(client: kube::Client) {
    /// let reconciler = DependentsReconciler::<K, ()>::new_async(client, |owner: Arc<K>, cx: DesiredContext<()>| async move {
    ///     let tls: Secret = cx.reads().get("shared-tls").await?;
    ///     let mut copy = Secret { data: tls.data, ..Secret::default() };
    ///     copy.metadata.name = Some(format!("{}-tls", owner.name_any()));
    ///     Ok(DesiredSet::builder().dependent(Dependent::new("tls", &copy)).build()?)
    /// });
    /// # let _ = reconciler; }
    /// ```
    pub fn new_async<F, Fut>(client: Client, desired: F) -> Self
    where
        F: Fn(Arc<K>, DesiredContext<C>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<DesiredSet, DesiredError>> + Send + 'static,
    {
        Self::with_runtime_async(DependentsRuntime::new(client), desired)
    }

    /// [`new_async`](DependentsReconciler::new_async) with its own runtime.
    pub fn with_runtime_async<F, Fut>(runtime: DependentsRuntime, desired: F) -> Self
    where
        F: Fn(Arc<K>, DesiredContext<C>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<DesiredSet, DesiredError>> + Send + 'static,
    {
        let desired: Arc<DesiredFn<K, C>> =
            Arc::new(move |owner: Arc<K>, cx: DesiredContext<C>| {
                let set = desired(owner, cx);
                Box::pin(async move { set.await.map_err(DependentsError::Desired) })
                    as BoxFuture<'static, _>
            });
        Self::from_desired(runtime, desired)
    }

    fn from_desired(runtime: DependentsRuntime, desired: Arc<DesiredFn<K, C>>) -> Self {
        DependentsReconciler {
            runtime,
            desired,
            resync: DEFAULT_RESYNC,
            on_delete: None,
        }
    }

    /// Deletes the dependents in order when the owner is deleted, instead
    /// of leaving them to the garbage collector: a finalizer
    /// ([`TEARDOWN_FINALIZER`]) is added before the first converge, and
    /// once the owner is being deleted each reconcile runs
    /// [`teardown`](super::teardown) of its set (reverse dependency order,
    /// delete postconditions waited for, [kept](super::Dependent::keep_on_prune)
    /// objects released) until it is done, then removes the finalizer.
    ///
    /// # Expected flow
    /// The set torn down is the one the desired function computes for the
    /// deleted owner. When it cannot compute one (a Secret it reads was
    /// deleted with the namespace), the last set it computed for that
    /// owner in this process is torn down instead; when there is none
    /// either (the operator restarted since), the finalizer is removed
    /// with a warning and the garbage collector takes the dependents, in
    /// no particular order (kept objects too). The owner is never held
    /// because its set cannot be computed; it is held while a delete
    /// postcondition does not hold, or a deletion is refused.
    ///
    /// ```no_run
    /// # use fsm_kube::dependents::{DependentsReconciler, DesiredSet};
    /// # fn demo<K: fsm_kube::KubeResource>(client: kube::Client) {
    /// let reconciler = DependentsReconciler::<K, ()>::new(client, |_, _| DesiredSet::builder().build())
    ///     .teardown_on_delete();
    /// # let _ = reconciler; }
    /// ```
    #[must_use]
    pub fn teardown_on_delete(mut self) -> Self {
        self.on_delete = Some(TeardownOnDelete::default());
        self
    }

    /// How long a converged object waits before its dependents are looked
    /// at again when no event wakes it sooner (at least 1 ms). Default
    /// [`DEFAULT_RESYNC`].
    #[must_use]
    pub fn resync(mut self, every: Duration) -> Self {
        self.resync = every.max(Duration::from_millis(1));
        self
    }

    /// The runtime.
    pub fn runtime(&self) -> &DependentsRuntime {
        &self.runtime
    }

    /// The `reconcile` function for `Controller::run`.
    pub fn reconcile(
        &self,
    ) -> impl FnMut(Arc<K>, Arc<C>) -> fsm_core::BoxFuture<'static, Result<Action, DependentsError>>
    + use<K, C> {
        let this = self.clone();
        move |object, context| {
            let this = this.clone();
            Box::pin(async move { this.reconcile_object(object, context).await.map(|(a, _)| a) })
        }
    }

    /// The `error_policy` function for `Controller::run`: logs and
    /// requeues after the runtime's `pending_requeue`.
    pub fn error_policy(&self) -> impl Fn(Arc<K>, &DependentsError, Arc<C>) -> Action + use<K, C> {
        let delay = self.runtime.pending_requeue;
        move |object, error, _| {
            tracing::warn!(object = %object.name_any(), error = %error, "reconcile of dependents failed");
            Action::requeue(delay)
        }
    }

    /// Reconciles one object (what `reconcile()` calls); returns the
    /// action and the convergence.
    ///
    /// # Errors
    /// [`DependentsError`]: the set is invalid, the owner has no UID, the
    /// server is unavailable, or the condition could not be written.
    pub async fn reconcile_object(
        &self,
        object: Arc<K>,
        context: Arc<C>,
    ) -> Result<(Action, Convergence), DependentsError> {
        if object.meta().deletion_timestamp.is_some() {
            // With teardown_on_delete, in order; else the garbage
            // collector deletes the dependents (owner references).
            let (action, _) = self.reconcile_deletion(object, context).await?;
            return Ok((action, Convergence::default()));
        }
        let owner = Owner::of(object.as_ref())?;
        let object = match &self.on_delete {
            Some(on_delete) => on_delete.hold(&self.runtime, object).await?,
            None => object,
        };
        let set = Arc::new(self.desired_set(object.clone(), context).await?);
        if let Some(on_delete) = &self.on_delete {
            on_delete.remember(&owner.uid, set.clone());
        }
        let convergence = converge_for(&self.runtime, &owner, &set).await?;
        self.write_condition(object.as_ref(), &owner, &convergence)
            .await?;
        let action = if convergence.is_ready() {
            Action::requeue(self.resync)
        } else {
            Action::requeue(self.runtime.pending_requeue.max(Duration::from_millis(1)))
        };
        Ok((action, convergence))
    }

    /// Reconciles an owner being deleted: with
    /// [`teardown_on_delete`](DependentsReconciler::teardown_on_delete)
    /// and its finalizer still on it, one [`teardown`](super::teardown)
    /// round (requeued after the runtime's `pending_requeue` until done,
    /// then the finalizer removed); otherwise nothing. Returns the action
    /// and what the round did.
    ///
    /// # Errors
    /// As [`teardown`](super::teardown), and
    /// [`DependentsError::Finalizer`] when the finalizer could not be
    /// removed.
    pub async fn reconcile_deletion(
        &self,
        object: Arc<K>,
        context: Arc<C>,
    ) -> Result<(Action, Teardown), DependentsError> {
        let Some(on_delete) = &self.on_delete else {
            return Ok((Action::await_change(), Teardown::default()));
        };
        if !finalizer::has(object.as_ref(), TEARDOWN_FINALIZER) {
            return Ok((Action::await_change(), Teardown::default()));
        }
        let owner = Owner::of(object.as_ref())?;
        let set = match self.desired_set(object.clone(), context).await {
            Ok(set) => Some(Arc::new(set)),
            Err(error) => {
                let last = on_delete.last(&owner.uid);
                tracing::warn!(owner = %owner.name, %error, known = last.is_some(),
                    "the desired set of a deleted owner could not be computed: tearing down the last one known");
                last
            }
        };
        let teardown = match set {
            Some(set) => teardown_for(&self.runtime, &owner, &set).await?,
            None => {
                tracing::warn!(owner = %owner.name,
                    "no desired set known for the deleted owner: its dependents are left to the garbage collector");
                Teardown::default()
            }
        };
        if !teardown.is_done() {
            tracing::info!(owner = %owner.name, pending = %teardown.summary(), "tearing down");
            let delay = self.runtime.pending_requeue.max(Duration::from_millis(1));
            return Ok((Action::requeue(delay), teardown));
        }
        on_delete
            .release(&self.runtime, object.as_ref(), &owner)
            .await?;
        Ok((Action::await_change(), teardown))
    }

    /// The desired set of `object`.
    async fn desired_set(
        &self,
        object: Arc<K>,
        context: Arc<C>,
    ) -> Result<DesiredSet, DependentsError> {
        let owner = Owner::of(object.as_ref())?;
        let reads = Reads::new(self.runtime.clone(), &owner);
        (self.desired)(object, DesiredContext::new(context, reads)).await
    }

    /// Writes `DependentsReady` unless the object already says it.
    async fn write_condition(
        &self,
        object: &K,
        owner: &Owner,
        convergence: &Convergence,
    ) -> Result<(), DependentsError> {
        let status = crate::fields::status_and_spec(object, false).0;
        let current: Vec<Condition> = status
            .get("conditions")
            .and_then(|c| Vec::<Condition>::deserialize(c).ok())
            .unwrap_or_default();
        let (ready, reason, message) = condition_of(convergence);
        // Only a new status, reason, generation or set of failed and
        // pending keys is written, not each new detail (condition_memo).
        let gist = condition_memo::gist(convergence, reason, object.meta().generation);
        let memo = &self.runtime.condition_memo;
        let now_says = current
            .iter()
            .find(|c| c.type_ == conditions::DEPENDENTS_READY)
            .map(|c| c.message.as_str());
        let version = object
            .meta()
            .resource_version
            .as_deref()
            .and_then(|v| v.parse().ok());
        if memo.still_says(&owner.uid, &gist, now_says, version) {
            return Ok(());
        }
        let said_ready = current
            .iter()
            .any(|c| c.type_ == conditions::DEPENDENTS_READY && c.status == "True");
        if !convergence.applied.is_empty() {
            memo.set_written(&owner.uid);
        }
        let recently = memo.set_written_within(&owner.uid, self.runtime.pending_requeue);
        if settling(convergence, said_ready, recently) {
            return Ok(());
        }
        let written = message.clone();
        let wanted = conditions::dependents_ready(
            ready,
            reason,
            message,
            object.meta().generation,
            &current,
            jiff::Timestamp::now(),
        );
        if conditions::same(&current, &wanted) {
            return Ok(());
        }
        let api = on_delete::owner_api::<K>(&self.runtime, owner);
        let params = on_delete::params(&self.runtime);
        let patch = json!({ "status": { "conditions": wanted } });
        let after = api
            .patch_status(&owner.name, &params, &Patch::Merge(&patch))
            .await
            .map_err(DependentsError::Condition)?;
        let version = after
            .metadata
            .resource_version
            .as_deref()
            .and_then(|v| v.parse().ok());
        memo.wrote(&owner.uid, gist, written, version);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dependents::{DependentFailure, DependentState, FailureKind};

    fn convergence(state: DependentState, applied: &[&str]) -> Convergence {
        Convergence {
            dependents: vec![("app".into(), state)],
            applied: applied.iter().map(|a| (*a).to_owned()).collect(),
            ..Convergence::default()
        }
    }

    #[test]
    fn a_pending_set_just_written_to_waits_for_its_dependents_unless_it_said_ready() {
        let rolling = DependentState::NotReady("0 of 1 updated".into());
        let just_applied = convergence(rolling.clone(), &["Deployment ns/app"]);
        assert!(settling(&just_applied, false, true));
        // Woken by the watch of its own writes, still within the requeue.
        assert!(settling(&convergence(rolling.clone(), &[]), false, true));
        // A condition that said True must not stay True while it rolls.
        assert!(!settling(&just_applied, true, true));
        // Still pending a requeue after the last write: say so.
        assert!(!settling(&convergence(rolling, &[]), false, false));
        // Ready and failed are written at once.
        assert!(!settling(
            &convergence(DependentState::Ready, &["Deployment ns/app"]),
            false,
            true
        ));
        let failed = DependentState::Failed(DependentFailure::new(
            FailureKind::ReadinessFailed,
            "the Job failed",
        ));
        assert!(!settling(
            &convergence(failed, &["Job ns/app"]),
            false,
            true
        ));
    }
}
