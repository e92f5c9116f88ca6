//! What converging needs besides the set: a client, the field manager,
//! optionally watch caches, an event recorder and metrics.

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::{ObjectRef, Store};
use serde_json::Value;

use super::kind::DependentKind;
use super::matching::LearnedForms;
use super::object::{Owner, Placement, labelled_for};
use super::pruned::PrunedShapes;
use crate::conditions::ReportedConditions;
use crate::metrics::FsmMetrics;

/// The runtime of dependent resources: how [`converge`](super::converge)
/// and [`teardown`](super::teardown) reach the cluster.
///
/// [`ReconcilerBuilder::build`](crate::ReconcilerBuilder::build) installs
/// one on its engine (with the reconciler's client, field manager, event
/// recorder and metrics), which handlers reach with
/// [`StepDependents::converge`](super::StepDependents::converge). Cheap to
/// clone.
///
/// ```no_run
/// # use std::time::Duration;
/// # fn demo(client: kube::Client) {
/// use fsm_kube::dependents::DependentsRuntime;
///
/// let runtime = DependentsRuntime::new(client)
///     .field_manager("my-operator")
///     .pending_requeue(Duration::from_secs(5));
/// # }
/// ```
///
/// # Reads
/// Each converge reads every desired object once: from the watch cache
/// given for its kind ([`DependentsRuntime::cache`]), else with one GET.
/// Pruning lists each kind once, by label, from its cache if it has one;
/// a kind without a cache is listed only when the owner's set changed
/// shape since its last successful prune in this runtime (see
/// [`converge`](super::converge#when-pruning-lists)). A converged set
/// costs one GET per desired object, and no request at all with a cache
/// for every kind.
/// A cache may lag behind a write; the worst a stale read costs is one
/// more apply (which the server sees as a no-op), or an object pruned one
/// converge later.
#[derive(Clone)]
pub struct DependentsRuntime {
    pub(crate) client: Client,
    pub(crate) field_manager: String,
    caches: Arc<Vec<(DependentKind, Store<DynamicObject>)>>,
    recorder: Option<Recorder>,
    metrics: Option<FsmMetrics>,
    pub(crate) pending_requeue: Duration,
    pub(crate) reported: ReportedConditions,
    pub(crate) pruned: PrunedShapes,
    /// The server's normal forms of applied bodies (see `matching`).
    pub(crate) learned: LearnedForms,
}

impl std::fmt::Debug for DependentsRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DependentsRuntime")
            .field("field_manager", &self.field_manager)
            .field("caches", &self.caches.len())
            .field("events", &self.recorder.is_some())
            .field("metrics", &self.metrics.is_some())
            .field("pending_requeue", &self.pending_requeue)
            .finish_non_exhaustive()
    }
}

/// The default wait before looking again at a set with pending
/// dependents (their watches usually wake the owner sooner).
pub const DEFAULT_PENDING_REQUEUE: Duration = Duration::from_secs(10);

impl DependentsRuntime {
    /// A runtime writing with field manager `operator-fsm`, without caches,
    /// events or metrics.
    pub fn new(client: Client) -> Self {
        DependentsRuntime {
            client,
            field_manager: "operator-fsm".to_owned(),
            caches: Arc::default(),
            recorder: None,
            metrics: None,
            pending_requeue: DEFAULT_PENDING_REQUEUE,
            reported: ReportedConditions::default(),
            pruned: PrunedShapes::default(),
            learned: LearnedForms::default(),
        }
    }

    /// The field manager of applies (default `operator-fsm`; the
    /// reconciler uses its own [`field_manager`](crate::ReconcilerOptions::field_manager)).
    #[must_use]
    pub fn field_manager(mut self, manager: impl Into<String>) -> Self {
        self.field_manager = manager.into();
        self
    }

    /// Reads live objects of `kind` from `store` (a reflector's reader)
    /// instead of a GET each.
    #[must_use]
    pub fn cache(mut self, kind: DependentKind, store: Store<DynamicObject>) -> Self {
        Arc::make_mut(&mut self.caches).push((kind, store));
        self
    }

    /// Publishes events on the owner for what is created, updated,
    /// pruned and deleted.
    #[must_use]
    pub fn recorder(mut self, recorder: Recorder) -> Self {
        self.recorder = Some(recorder);
        self
    }

    /// Counts applies, skipped applies and deletions in `metrics`.
    #[must_use]
    pub fn metrics(mut self, metrics: FsmMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// How long [`converge_state`](super::converge_state) waits before
    /// looking again at a pending set. Default [`DEFAULT_PENDING_REQUEUE`].
    #[must_use]
    pub fn pending_requeue(mut self, delay: Duration) -> Self {
        self.pending_requeue = delay;
        self
    }

    /// The dynamic API of `kind` where `place` lives.
    pub(crate) fn api(&self, kind: &DependentKind, namespace: Option<&str>) -> Api<DynamicObject> {
        match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &kind.resource),
            None => Api::all_with(self.client.clone(), &kind.resource),
        }
    }

    /// The live object at `place`: from the cache of its kind, else one
    /// GET (`None`: it does not exist).
    pub(crate) async fn read(
        &self,
        kind: &DependentKind,
        place: &Placement,
    ) -> Result<Option<Value>, kube::Error> {
        if let Some((_, store)) = self.caches.iter().find(|(k, _)| k.same_kind(kind)) {
            let mut key = ObjectRef::new_with(&place.name, kind.resource.clone());
            if let Some(ns) = &place.namespace {
                key = key.within(ns);
            }
            return Ok(store
                .get(&key)
                .and_then(|o| serde_json::to_value(o.as_ref()).ok()));
        }
        let api = self.api(kind, place.namespace.as_deref());
        let object = api.get_opt(&place.name).await?;
        Ok(object.and_then(|o| serde_json::to_value(o).ok()))
    }

    /// Whether `kind` has a watch cache.
    pub(crate) fn has_cache(&self, kind: &DependentKind) -> bool {
        self.caches.iter().any(|(k, _)| k.same_kind(kind))
    }

    /// The objects of `kind` in `namespace` (all with `None`) that carry
    /// `owner`'s dependent labels, from the cache of that kind; `None`
    /// without a cache.
    pub(crate) fn cached_owned(
        &self,
        kind: &DependentKind,
        namespace: Option<&str>,
        owner: &Owner,
    ) -> Option<Vec<Value>> {
        let (_, store) = self.caches.iter().find(|(k, _)| k.same_kind(kind))?;
        Some(
            store
                .state()
                .iter()
                .filter(|o| namespace.is_none() || o.metadata.namespace.as_deref() == namespace)
                .filter_map(|o| serde_json::to_value(o.as_ref()).ok())
                .filter(|o| labelled_for(o, owner))
                .collect(),
        )
    }

    /// An event on `owner` about the object at `place`, when a recorder is
    /// installed. The action names the object (`Apply ConfigMap/web`):
    /// kube's recorder folds events of the same reason and action into one
    /// series, which must not merge different objects.
    pub(crate) async fn event(
        &self,
        owner: &Owner,
        reason: &str,
        verb: &str,
        place: &Placement,
        note: String,
    ) {
        let Some(recorder) = &self.recorder else {
            return;
        };
        let mut action = format!("{verb} {}/{}", place.kind, place.name);
        // The API server's limit on an event's action.
        if action.len() > 128 {
            let mut cut = 128;
            while !action.is_char_boundary(cut) {
                cut -= 1;
            }
            action.truncate(cut);
        }
        let event = Event {
            type_: EventType::Normal,
            reason: reason.to_owned(),
            note: Some(note),
            action,
            secondary: None,
        };
        if let Err(error) = recorder.publish(&event, &owner.object_ref()).await {
            tracing::warn!(%error, reason, "event could not be published");
        }
    }

    /// Counts one dependent operation (`applied`, `unchanged`, `pruned`,
    /// `deleted`, `failed`) on `kind`.
    pub(crate) fn count(&self, kind: &DependentKind, outcome: &'static str) {
        if let Some(metrics) = &self.metrics {
            metrics.observe_dependent(&kind.display(), outcome);
        }
    }
}
