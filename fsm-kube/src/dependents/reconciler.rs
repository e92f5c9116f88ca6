//! `DependentsReconciler`: for operators that are only a set of dependents,
//! the `reconcile` and `error_policy` of a `kube::runtime::Controller`,
//! with no machine and no stored record.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Client, ResourceExt};
use serde::Deserialize;
use serde_json::json;

use super::condition_memo;
use super::converge::converge_for;
use super::error::{DependentsError, SetError};
use super::object::Owner;
use super::report::Convergence;
use super::runtime::DependentsRuntime;
use super::set::DesiredSet;
use super::step::condition_of;
use crate::{KubeResource, conditions};

type DesiredFn<K, C> = dyn Fn(&K, &C) -> Result<DesiredSet, SetError> + Send + Sync;

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
/// merge patch of `conditions` when it changes, and requeue after the
/// runtime's [`pending_requeue`](DependentsRuntime::pending_requeue) while
/// something is pending or failed (a change of a watched dependent wakes it
/// sooner). A converged object is looked at again after
/// [`resync`](DependentsReconciler::resync) (default
/// [`DEFAULT_RESYNC`]), so that a change no event reported (a dependent
/// deleted before the controller's watch of its kind had listed, or
/// during a re-list) is repaired all the same.
///
/// # Caveats
/// No finalizer is added: when the owner is deleted, its dependents go
/// with it through the garbage collector (their owner references), in no
/// particular order. An operator whose dependents must go in order is a
/// machine with a `cleanup` calling [`teardown`](super::teardown). The
/// condition write replaces the status' `conditions` list as read with the
/// object; another writer of that list may race it. The status needs a
/// `conditions` field (a list of `Condition`).
pub struct DependentsReconciler<K, C> {
    runtime: DependentsRuntime,
    desired: Arc<DesiredFn<K, C>>,
    resync: Duration,
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
        }
    }
}

impl<K, C> std::fmt::Debug for DependentsReconciler<K, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DependentsReconciler")
            .field("runtime", &self.runtime)
            .field("resync", &self.resync)
            .finish_non_exhaustive()
    }
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
        DependentsReconciler {
            runtime,
            desired: Arc::new(desired),
            resync: DEFAULT_RESYNC,
        }
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
            // The garbage collector deletes the dependents (owner references).
            return Ok((Action::await_change(), Convergence::default()));
        }
        let set =
            (self.desired)(object.as_ref(), context.as_ref()).map_err(DependentsError::Set)?;
        let owner = Owner::of(object.as_ref())?;
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
        let resource = ApiResource::erase::<K>(&());
        let api: Api<DynamicObject> = match &owner.namespace {
            Some(ns) => Api::namespaced_with(self.runtime.client.clone(), ns, &resource),
            None => Api::all_with(self.runtime.client.clone(), &resource),
        };
        let params = PatchParams {
            field_manager: Some(self.runtime.field_manager.clone()),
            ..PatchParams::default()
        };
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
