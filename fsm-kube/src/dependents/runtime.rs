//! What converging needs besides the set: a client, the field manager,
//! optionally watch caches, an event recorder and metrics.

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::Store;
use serde_json::Value;

use super::cache::{CacheRegistry, CacheStore, Cached, KindCache, OwnedMeta};
use super::condition_memo::ConditionMemo;
use super::echoes::{Echoes, WriteInFlight};
use super::kind::DependentKind;
use super::live::LiveObject;
use super::match_memo::MatchMemo;
use super::matching::LearnedForms;
use super::object::{Owner, Placement, live_placement};
use super::own_writes::{Override, OwnWrites, version_of};
use super::pruned::PrunedShapes;
use super::wake::WakeFilters;
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
/// Each converge reads every desired object once: from the watch cache of
/// its kind, else with one GET. The caches are the watches
/// [`owns_dependents`](super::owns_dependents) starts when it is given
/// this runtime (or one of its clones: they share their caches), so an
/// operator that wakes owners on their dependents' changes reads them
/// from the same watches, with nothing else to wire;
/// [`DependentsRuntime::cache`] adds a reflector store by hand.
///
/// - A kind's cache is used once its watch has listed (synced). A
///   converge first waits for the watches of its kinds to list, up to
///   [`sync_wait`](DependentsRuntime::sync_wait) (so that an operator
///   starting with many owners does not GET every dependent of every
///   owner at once); past it, reads GET and pruning lists until the watch
///   has listed.
/// - Read-your-writes: the object the server returned from our own write
///   (apply, create, release, delete) is read instead of the cache's until
///   the cache shows that `resourceVersion` or a newer one (compared as
///   integers), or until the kind's watch has delivered an event at least
///   as new as our write (then the cache is current, whatever it shows:
///   someone may have deleted the object since); so a converge right after
///   a write neither applies again nor creates again. A write is kept at
///   most 10 minutes (a watch that delivers nothing newer in all that time
///   has stopped), or at most 30 seconds for a store given by
///   [`cache`](DependentsRuntime::cache), whose watch's progress the
///   runtime cannot see.
/// - Pruning finds an owner's objects in the synced cache (indexed by
///   owner); a kind without one is listed only when the owner's set
///   changed shape since its last successful prune in this runtime (see
///   [`converge`](super::converge#when-pruning-lists)).
///
/// A converged set costs one GET per desired object without caches, and
/// no request at all with a synced cache for every kind.
#[derive(Clone)]
pub struct DependentsRuntime {
    pub(crate) client: Client,
    pub(crate) field_manager: String,
    caches: Arc<CacheRegistry>,
    writes: Arc<OwnWrites>,
    echoes: Arc<Echoes>,
    matches: Arc<MatchMemo>,
    pub(crate) wakes: Arc<WakeFilters>,
    pub(crate) condition_memo: Arc<ConditionMemo>,
    recorder: Option<Recorder>,
    metrics: Option<FsmMetrics>,
    pub(crate) pending_requeue: Duration,
    sync_wait: Duration,
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

/// How long a converge waits at most for the first list of a dependent
/// kind's watch (see [`DependentsRuntime::sync_wait`]).
pub const DEFAULT_SYNC_WAIT: Duration = Duration::from_secs(30);

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
            writes: Arc::default(),
            echoes: Arc::default(),
            matches: Arc::default(),
            wakes: Arc::default(),
            condition_memo: Arc::default(),
            recorder: None,
            metrics: None,
            pending_requeue: DEFAULT_PENDING_REQUEUE,
            sync_wait: DEFAULT_SYNC_WAIT,
            reported: ReportedConditions::default(),
            pruned: PrunedShapes::default(),
            learned: LearnedForms::default(),
        }
    }

    /// How long a converge waits at most for a watch of its kinds
    /// ([`owns_dependents`](super::owns_dependents) with this runtime, or
    /// [`cache`](DependentsRuntime::cache)) to finish its first list
    /// before it reads with GETs instead. Default [`DEFAULT_SYNC_WAIT`].
    ///
    /// When an operator starts, every owner is reconciled at once, before
    /// the dependents' watches have listed: without the wait, each would
    /// GET each of its dependents (at 10,000 owners, 40,000 requests at
    /// once, for objects the watches are about to list). A watch that has
    /// not listed within the wait (a missing `list` permission, an
    /// unreachable server) is logged once and not waited for again; its
    /// kind is read with GETs until it lists.
    #[must_use]
    pub fn sync_wait(mut self, limit: Duration) -> Self {
        self.sync_wait = limit;
        self
    }

    /// Waits (up to [`sync_wait`](DependentsRuntime::sync_wait)) for the
    /// first list of the watches of `kinds` covering `namespace`.
    pub(crate) async fn await_caches<'k>(
        &self,
        kinds: impl IntoIterator<Item = &'k DependentKind>,
        namespace: Option<&str>,
    ) {
        let mut waiting = Vec::new();
        for kind in kinds {
            for cache in self.caches.covering(kind, namespace) {
                if !cache.synced()
                    && !waiting
                        .iter()
                        .any(|c: &Arc<KindCache>| Arc::ptr_eq(c, &cache))
                {
                    waiting.push(cache);
                }
            }
        }
        let limit = self.sync_wait;
        futures::future::join_all(waiting.iter().map(|c| c.await_sync(limit))).await;
    }

    /// The field manager of applies (default `operator-fsm`; the
    /// reconciler uses its own [`field_manager`](crate::ReconcilerOptions::field_manager)).
    #[must_use]
    pub fn field_manager(mut self, manager: impl Into<String>) -> Self {
        self.field_manager = manager.into();
        self
    }

    /// Reads live objects of `kind` from `store` (a reflector's reader of
    /// every namespace the owners' dependents are in) instead of a GET
    /// each, once its reflector has listed. Not needed for the kinds
    /// [`owns_dependents`](super::owns_dependents) watches with this
    /// runtime: their caches are registered already.
    #[must_use]
    pub fn cache(self, kind: DependentKind, store: Store<DynamicObject>) -> Self {
        self.caches.register(KindCache {
            kind,
            namespace: None,
            store: CacheStore::Given(store),
            owners: None,
            waited_out: Default::default(),
            listed: Default::default(),
            progress: None,
        });
        self
    }

    /// Registers the cache a watch of [`owns_dependents`](super::owns_dependents) fills.
    pub(crate) fn register_cache(&self, cache: KindCache) {
        self.caches.register(cache);
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

    /// Wakes owners on every change of a watched dependent, status
    /// progress included (default: a status write wakes the owner only
    /// when it changes the dependent's built-in readiness; see
    /// [`owns_dependents`](super::owns_dependents)). For desired functions
    /// that read their dependents' status.
    #[must_use]
    pub fn wake_on_every_change(self) -> Self {
        self.wakes.wake_on_every_change(true);
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

    /// The live object at `place`: from the synced cache of its kind (or
    /// our own newer write), else one GET (`None`: it does not exist).
    pub(crate) async fn read(
        &self,
        kind: &DependentKind,
        place: &Placement,
    ) -> Result<Option<Value>, kube::Error> {
        if let Some(cache) = self.caches.synced(kind, place.namespace.as_deref()) {
            let cached = cache.get(place);
            let watched = cache.watched();
            let version = cached.as_ref().map(Cached::version);
            // The object is built only when it is the answer.
            return Ok(
                match self.writes.reconcile_version(place, version, watched) {
                    Override::None => cached.and_then(|c| cache.json(&c)),
                    Override::Object(ours) => ours.to_value(),
                    Override::Absent => None,
                },
            );
        }
        let api = self.api(kind, place.namespace.as_deref());
        let object = api.get_opt(&place.name).await?;
        Ok(object.and_then(|o| serde_json::to_value(o).ok()))
    }

    /// The cached object at `place`, unparsed, when the last comparison
    /// there found this very version of it matching a desired body
    /// hashing to `body` (see [`MatchMemo`]); `None` whenever the object
    /// must be read and compared: no watch cache of ours, a newer own
    /// write the cache does not show yet, another version, another body.
    pub(crate) fn matched_before(
        &self,
        kind: &DependentKind,
        place: &Placement,
        body: u64,
    ) -> Option<LiveObject> {
        let cache = self.caches.synced(kind, place.namespace.as_deref())?;
        let cached = cache.get(place)?;
        let version = cached.version()?;
        let Cached::Watched(object) = &cached else {
            return None;
        };
        let current = self
            .writes
            .reconcile_version(place, Some(Some(version)), cache.watched());
        (current == Override::None && self.matches.holds(place, version, body))
            .then(|| LiveObject::Text(object.text()))
    }

    /// Notes that `live` at `place` matched a desired body hashing to
    /// `body` (see [`Self::matched_before`]).
    pub(crate) fn matched(&self, place: &Placement, live: &Value, body: u64) {
        if let Some(version) = version_of(live) {
            self.matched_at(place, version, body);
        }
    }

    /// [`Self::matched`] for the object at `place` at `version`.
    pub(crate) fn matched_at(&self, place: &Placement, version: u64, body: u64) {
        self.matches.note(place, version, body);
    }

    /// Whether `kind` has a synced cache for `owner`'s objects (in its
    /// namespace when the kind is namespaced).
    pub(crate) fn has_cache(&self, kind: &DependentKind, owner: &Owner) -> bool {
        let namespace = if kind.namespaced {
            owner.namespace.as_deref()
        } else {
            None
        };
        self.caches.synced(kind, namespace).is_some()
    }

    /// The objects of `kind` in `namespace` (all with `None`) that carry
    /// `owner`'s dependent labels, from the synced cache of that kind
    /// (without those we deleted and the cache still shows); `None`
    /// without one.
    pub(crate) fn cached_owned(
        &self,
        kind: &DependentKind,
        namespace: Option<&str>,
        owner: &Owner,
    ) -> Option<Vec<OwnedMeta>> {
        let cache = self.caches.synced(kind, namespace)?;
        let owned = cache.owned(namespace, owner);
        let watched = cache.watched();
        Some(
            owned
                .into_iter()
                .filter_map(|live| {
                    let place = live_placement(kind, live.meta());
                    match self
                        .writes
                        .reconcile_version(&place, Some(live.version()), watched)
                    {
                        Override::None => Some(OwnedMeta::Cached(live)),
                        Override::Object(ours) => {
                            ours.metadata().map(|m| OwnedMeta::Owned(Box::new(m)))
                        }
                        Override::Absent => None,
                    }
                })
                .collect(),
        )
    }

    /// Remembers the object the server returned from our write at `place`
    /// (read-your-writes over the caches).
    pub(crate) fn wrote(&self, place: &Placement, object: &Value) {
        self.writes
            .wrote(place, object, self.caches.watch_progress(place));
    }

    /// [`Self::wrote`] with the object as the server's text, at `version`
    /// (its resourceVersion as an integer).
    pub(crate) fn wrote_text(&self, place: &Placement, text: Arc<str>, version: Option<u64>) {
        self.writes
            .wrote_text(place, text, version, self.caches.watch_progress(place));
    }

    /// Announces a write at `place` before it is sent, so that its echo
    /// on the watch wakes no owner even when it arrives before the answer
    /// (see [`Echoes`]); finish it once the answer is remembered with
    /// [`Self::wrote`].
    pub(crate) fn writing(&self, place: &Placement) -> WriteInFlight {
        self.echoes.begin(place)
    }

    /// Whether a watch event of `object` at `place` should wake no owner:
    /// it is the echo of our write there, or it is held until the write in
    /// flight there is done (then passed on through `wake` unless it is
    /// that write's echo).
    pub(crate) fn echo_or_held(
        &self,
        place: &Placement,
        object: &DynamicObject,
        wake: &futures::channel::mpsc::UnboundedSender<DynamicObject>,
    ) -> bool {
        // In flight first: a write no longer in flight was remembered
        // before it finished, so the check after this one sees it.
        self.echoes.hold(place, object, wake)
            || super::echoes::object_version(object)
                .is_some_and(|version| self.writes.is_ours(place, version))
    }

    /// Remembers that we deleted the object at `place`; `response` is the
    /// object the server returned, if any.
    pub(crate) fn deleted(&self, place: &Placement, response: Option<&Value>) {
        self.writes.deleted(place, response);
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
