//! Waking an owner when one of its dependents changes, and filling the
//! runtime's caches from the same watches.

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt, future};
use kube::api::{Api, DynamicObject};
use kube::runtime::reflector::store::Writer;
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

use super::cache::{CacheStore, KindCache, OwnerIndex, WatchProgress, prepare_for_cache};
use super::cached_object::{CachedObject, SharedResource, compact_event};
use super::kind::DependentKind;
use super::object::{DEPENDENT_LABEL, live_placement};
use super::owners::owners_any_version;
use super::runtime::DependentsRuntime;
use super::wake::WakeFilter;
use crate::store::MANAGED_BY_LABEL;

mod sealed {
    pub trait Sealed {}
    impl Sealed for kube::Client {}
    impl Sealed for super::DependentsRuntime {}
}

/// What [`owns_dependents`] watches with: a [`DependentsRuntime`] (its
/// converges then read the watches' caches) or, as before caches, a bare
/// [`Client`] (wake-ups only; converges GET).
pub trait DependentsWatchSource: sealed::Sealed {
    /// The client the watches use.
    fn watch_client(&self) -> &Client;
    /// The runtime whose caches the watches fill, if any.
    fn cached_runtime(&self) -> Option<&DependentsRuntime>;
}

impl DependentsWatchSource for Client {
    fn watch_client(&self) -> &Client {
        self
    }
    fn cached_runtime(&self) -> Option<&DependentsRuntime> {
        None
    }
}

impl DependentsWatchSource for DependentsRuntime {
    fn watch_client(&self) -> &Client {
        &self.client
    }
    fn cached_runtime(&self) -> Option<&DependentsRuntime> {
        Some(self)
    }
}

/// `controller`, also watching every kind in `kinds` (typically
/// [`DesiredSet::kinds`](super::DesiredSet::kinds) of a representative
/// set), so that a change of a dependent reconciles its owner (found
/// through the dependent's controller owner reference); given the
/// [`DependentsRuntime`] the reconciler converges with, the same watches
/// are its caches: converges read dependents from them instead of a GET
/// each.
///
/// Namespaced kinds are watched in `namespace`, or in all namespaces with
/// `None`; cluster-scoped kinds everywhere. Each watch selects only
/// objects carrying the dependents' labels.
///
/// ```no_run
/// # use fsm_kube::dependents::{DependentKind, DependentsRuntime, owns_dependents};
/// # use k8s_openapi::api::{apps::v1::Deployment, core::v1::Service};
/// # fn demo<K: fsm_kube::KubeResource>(client: kube::Client) {
/// // The runtime given to the reconciler (`FsmReconciler::builder(..)
/// // .dependents(runtime.clone())` or `DependentsReconciler::with_runtime`).
/// let runtime = DependentsRuntime::new(client.clone()).field_manager("my-operator");
/// let controller = kube::runtime::Controller::new(kube::Api::<K>::all(client), Default::default());
/// let controller = owns_dependents(
///     controller,
///     &runtime,
///     None,
///     [DependentKind::of::<Deployment>(), DependentKind::of::<Service>()],
/// );
/// # }
/// ```
///
/// # With a runtime
/// Each kind gets one watch of full objects, which fills a reflector store
/// registered with the runtime (shared by all its clones, so the runtime
/// may have been handed to a reconciler already) and feeds the
/// controller. The store keeps the objects without the field sets of
/// other field managers (`managedFields[].fieldsV1` of managers other than
/// the runtime's): the diff reads only the runtime's own. Reads use a
/// kind's cache once its watch has listed, and read our own writes until
/// the cache shows them (see [`DependentsRuntime`]'s Reads).
///
/// A status write of a dependent wakes its owner only when it changes the
/// dependent's built-in readiness (ready, pending, failed; not the
/// progress in its message), unless a dependent of that kind has its own
/// [`ready`](super::Dependent::ready) check (noted at its first converge)
/// or [`DependentsRuntime::wake_on_every_change`] is set; any other change
/// (spec, metadata, deletion) wakes it. The event of an object the
/// runtime itself just wrote, at the version its write returned, wakes no
/// owner (the converge that wrote it saw that object); one that arrives
/// while the write is in flight is held until the answer is read, and
/// passed on unless it is that write's echo.
///
/// # Caveats
/// With a bare [`Client`] (the signature before caches), the watches are
/// metadata-only and wake owners on every change; they are not read by
/// [`converge`](super::converge), which GETs each dependent. Pass the
/// runtime instead. A cache covers only `namespace`: owners whose
/// dependents are elsewhere read those with a GET.
///
/// # Owners at any version
/// A dependent wakes its owner whatever the version its owner reference
/// was written at (matched on group and kind, see
/// [`owners_any_version`]): after the owner's type moves from `v1alpha1`
/// to `v1`, dependents written before the upgrade still wake it.
pub fn owns_dependents<K, S>(
    controller: Controller<K>,
    source: &S,
    namespace: Option<&str>,
    kinds: impl IntoIterator<Item = DependentKind>,
) -> Controller<K>
where
    K: Clone + Resource + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Default + Send + Sync + 'static,
    S: DependentsWatchSource + ?Sized,
{
    owns_dependents_of(
        controller,
        K::DynamicType::default(),
        source,
        namespace,
        kinds,
    )
}

/// [`owns_dependents`] for an owner type known only at run time (a
/// `DynamicObject` owner): `owner_type` is the one `controller` was built
/// with.
pub fn owns_dependents_of<K, S>(
    controller: Controller<K>,
    owner_type: K::DynamicType,
    source: &S,
    namespace: Option<&str>,
    kinds: impl IntoIterator<Item = DependentKind>,
) -> Controller<K>
where
    K: Clone + Resource + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync + 'static,
    S: DependentsWatchSource + ?Sized,
{
    let selector = format!(
        "{}={},{}",
        MANAGED_BY_LABEL.0, MANAGED_BY_LABEL.1, DEPENDENT_LABEL
    );
    let client = source.watch_client();
    let mut controller = controller;
    for kind in kinds {
        let watched = if kind.namespaced { namespace } else { None };
        let api: Api<DynamicObject> = match watched {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &kind.resource),
            None => Api::all_with(client.clone(), &kind.resource),
        };
        let config = watcher::Config::default().labels(&selector);
        let owner_type = owner_type.clone();
        let owners =
            move |object: DynamicObject| owners_any_version::<K>(&object.metadata, &owner_type);
        controller = match source.cached_runtime() {
            None => controller.watches_with(api, kind.resource.clone(), config, owners),
            Some(runtime) => {
                let resource = kind.resource.clone();
                let stream = cached_watch(runtime, kind, watched, api, config);
                controller.watches_stream_with(stream, owners, resource)
            }
        };
    }
    controller
}

/// One kind's watch: its events go into a store registered with
/// `runtime` (and an owner index), and those that should wake an owner
/// on to the controller.
fn cached_watch(
    runtime: &DependentsRuntime,
    kind: DependentKind,
    namespace: Option<&str>,
    api: Api<DynamicObject>,
    config: watcher::Config,
) -> impl futures::Stream<Item = Result<DynamicObject, watcher::Error>> + Send + 'static {
    let shared = SharedResource(Arc::new(kind.resource.clone()));
    let mut writer = Writer::<CachedObject>::new(shared.clone());
    let owners = Arc::new(OwnerIndex::default());
    let progress = Arc::new(WatchProgress::default());
    runtime.register_cache(KindCache {
        kind: kind.clone(),
        namespace: namespace.map(str::to_owned),
        store: CacheStore::Watched(writer.as_reader(), shared),
        owners: Some(owners.clone()),
        waited_out: Default::default(),
        listed: Default::default(),
        progress: Some(progress.clone()),
    });
    let manager = runtime.field_manager.clone();
    let filters = runtime.wakes.clone();
    let mut wake = WakeFilter::new(kind.clone());
    let ours = runtime.clone();
    let prepared = kind.clone();
    // Events held while our write was in flight, passed on once it is
    // done (unless they were its echo).
    let (held, released) = futures::channel::mpsc::unbounded();
    let changes = watcher(api, config)
        .default_backoff()
        .modify(move |object| prepare_for_cache(object, &prepared, &manager))
        .try_filter(move |event| {
            owners.apply(event);
            // The store keeps the compact form; the controller and the
            // wake filter see the object as decoded.
            match compact_event(event) {
                Some(compact) => writer.apply_watcher_event(&compact),
                None => tracing::warn!(
                    ?event,
                    "a watched dependent has a body that is not a JSON object: not cached"
                ),
            }
            // After the store: what it says it holds, it holds.
            progress.stored(event);
            // The filter follows every event; the echo of our own write
            // (the object our apply returned, at its version) wakes no
            // owner: the converge that wrote it saw it.
            let passes = wake.passes(&filters, event);
            future::ready(passes && !echo_or_held(&ours, &kind, event, &held))
        })
        .touched_objects();
    futures::stream::select(changes, released.map(Ok)).boxed()
}

/// Whether `event` wakes no owner now: a change to an object that is
/// exactly what our last write of it returned, or one held until our
/// write in flight there is done.
fn echo_or_held(
    runtime: &DependentsRuntime,
    kind: &DependentKind,
    event: &watcher::Event<DynamicObject>,
    held: &futures::channel::mpsc::UnboundedSender<DynamicObject>,
) -> bool {
    let watcher::Event::Apply(object) = event else {
        return false;
    };
    runtime.echo_or_held(&live_placement(kind, &object.metadata), object, held)
}
