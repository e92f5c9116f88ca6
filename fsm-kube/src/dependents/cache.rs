//! The watch caches a runtime reads dependents from: one reflector store
//! per watched kind, filled by the same watches that wake owners
//! ([`owns_dependents`](super::owns_dependents)), or given by hand
//! ([`DependentsRuntime::cache`](super::DependentsRuntime::cache)), with
//! an index of each kind's objects by owner for pruning.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::FutureExt;
use kube::api::{ApiResource, DynamicObject, ObjectMeta, TypeMeta};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use serde_json::Value;

use super::cached_object::{CachedObject, SharedResource};
use super::kind::DependentKind;
use super::object::{Owner, Placement, meta_labelled_for};
use crate::store::{MANAGED_BY_LABEL, OWNER_UID_LABEL};

/// An object's place in a kind's cache: namespace and name.
type Key = (Option<String>, String);

/// The objects of one kind by owner UID (the owner-UID label), kept by the
/// watch next to its store, so that pruning finds an owner's objects
/// without scanning the kind.
#[derive(Debug, Default)]
pub(crate) struct OwnerIndex {
    state: Mutex<IndexState>,
}

/// Owners are keyed by a hash of their UID (eight bytes where the UID
/// took about fifty, twice an object): a collision would only list another
/// owner's objects too, which [`KindCache::owned`] filters out by their
/// owner-UID label.
#[derive(Debug, Default)]
struct IndexState {
    by_owner: HashMap<u64, HashSet<Key>>,
    owner_of: HashMap<Key, u64>,
    /// During a (re-)list: the listed objects, swapped in when it is done
    /// (as the reflector swaps its store).
    listing: Option<Vec<(Key, u64)>>,
}

fn uid_key(uid: &str) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    std::hash::Hash::hash(uid, &mut hasher);
    std::hash::Hasher::finish(&hasher)
}

fn key_of(object: &DynamicObject) -> Key {
    (
        object.metadata.namespace.clone(),
        object.metadata.name.clone().unwrap_or_default(),
    )
}

fn owner_uid_of(object: &DynamicObject) -> Option<u64> {
    let labels = object.metadata.labels.as_ref()?;
    (labels.get(MANAGED_BY_LABEL.0).map(String::as_str) == Some(MANAGED_BY_LABEL.1))
        .then(|| labels.get(OWNER_UID_LABEL).map(|uid| uid_key(uid)))
        .flatten()
}

impl IndexState {
    fn remove(&mut self, key: &Key) {
        if let Some(uid) = self.owner_of.remove(key)
            && let Some(keys) = self.by_owner.get_mut(&uid)
        {
            keys.remove(key);
            if keys.is_empty() {
                self.by_owner.remove(&uid);
            }
        }
    }

    fn insert(&mut self, key: Key, uid: u64) {
        self.by_owner.entry(uid).or_default().insert(key.clone());
        self.owner_of.insert(key, uid);
    }
}

impl OwnerIndex {
    /// Follows one watch event (the same the reflector applies to its store).
    pub fn apply(&self, event: &watcher::Event<DynamicObject>) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        match event {
            watcher::Event::Apply(object) => {
                let key = key_of(object);
                state.remove(&key);
                if let Some(uid) = owner_uid_of(object) {
                    state.insert(key, uid);
                }
            }
            watcher::Event::Delete(object) => state.remove(&key_of(object)),
            watcher::Event::Init => state.listing = Some(Vec::new()),
            watcher::Event::InitApply(object) => {
                if let Some(uid) = owner_uid_of(object) {
                    let key = key_of(object);
                    state.listing.get_or_insert_default().push((key, uid));
                }
            }
            watcher::Event::InitDone => {
                let listed = state.listing.take().unwrap_or_default();
                state.by_owner.clear();
                state.owner_of.clear();
                for (key, uid) in listed {
                    state.insert(key, uid);
                }
            }
        }
    }

    /// The keys of `uid`'s objects.
    fn owned_by(&self, uid: &str) -> Vec<Key> {
        self.state
            .lock()
            .ok()
            .and_then(|s| {
                s.by_owner
                    .get(&uid_key(uid))
                    .map(|k| k.iter().cloned().collect())
            })
            .unwrap_or_default()
    }
}

/// Where a kind's cache keeps its objects.
pub(crate) enum CacheStore {
    /// The runtime's own watch: objects in their compact form, keyed with
    /// the kind's shared resource.
    Watched(Store<CachedObject>, SharedResource),
    /// A reflector store given by hand
    /// ([`DependentsRuntime::cache`](super::DependentsRuntime::cache)).
    Given(Store<DynamicObject>),
}

/// One object of a cache, as its store holds it.
pub(crate) enum Cached {
    Watched(Arc<CachedObject>),
    Given(Arc<DynamicObject>),
}

impl Cached {
    /// The object's metadata (for a watched one, without `managedFields`).
    pub fn meta(&self) -> &ObjectMeta {
        match self {
            Cached::Watched(object) => &object.metadata,
            Cached::Given(object) => &object.metadata,
        }
    }

    /// The object's resourceVersion as an integer (see
    /// [`version_of`](super::own_writes::version_of)).
    pub fn version(&self) -> Option<u64> {
        self.meta().resource_version.as_deref()?.parse().ok()
    }

    /// The whole object as JSON, with `resource`'s `apiVersion` and `kind`
    /// when it has none.
    pub fn to_json(&self, resource: &ApiResource) -> Option<Value> {
        match self {
            Cached::Watched(object) => object.to_value(),
            Cached::Given(object) => object_json(object, resource),
        }
    }
}

/// The metadata of one of an owner's live objects, as pruning and
/// teardown read it: that of a cached object (shared, not copied), or
/// owned (a listed object's, or our own newer write's).
pub(crate) enum OwnedMeta {
    Cached(Cached),
    Owned(Box<ObjectMeta>),
}

impl OwnedMeta {
    /// The metadata.
    pub fn meta(&self) -> &ObjectMeta {
        match self {
            OwnedMeta::Cached(cached) => cached.meta(),
            OwnedMeta::Owned(meta) => meta,
        }
    }
}

impl std::ops::Deref for OwnedMeta {
    type Target = ObjectMeta;

    fn deref(&self) -> &ObjectMeta {
        self.meta()
    }
}

impl CacheStore {
    fn get(&self, name: &str, namespace: Option<&str>, resource: &ApiResource) -> Option<Cached> {
        fn key<K: kube::Resource>(
            name: &str,
            namespace: Option<&str>,
            dyntype: K::DynamicType,
        ) -> ObjectRef<K> {
            let key = ObjectRef::new_with(name, dyntype);
            match namespace {
                Some(ns) => key.within(ns),
                None => key,
            }
        }
        match self {
            CacheStore::Watched(store, shared) => store
                .get(&key(name, namespace, shared.clone()))
                .map(Cached::Watched),
            CacheStore::Given(store) => store
                .get(&key(name, namespace, resource.clone()))
                .map(Cached::Given),
        }
    }

    fn all(&self) -> Vec<Cached> {
        match self {
            CacheStore::Watched(store, _) => {
                store.state().into_iter().map(Cached::Watched).collect()
            }
            CacheStore::Given(store) => store.state().into_iter().map(Cached::Given).collect(),
        }
    }

    /// Resolves once the store's watch has listed (`false`: its writer is
    /// gone without).
    async fn listed(&self) -> bool {
        match self {
            CacheStore::Watched(store, _) => store.wait_until_ready().await.is_ok(),
            CacheStore::Given(store) => store.wait_until_ready().await.is_ok(),
        }
    }
}

/// One kind's cache: its store, the namespace its watch covers (`None`:
/// all), and the owner index when the watch keeps one.
pub(crate) struct KindCache {
    pub kind: DependentKind,
    pub namespace: Option<String>,
    pub store: CacheStore,
    pub owners: Option<Arc<OwnerIndex>>,
    /// Set once a converge waited for the watch's list in vain: later ones
    /// do not wait again (they GET until it has listed).
    pub waited_out: AtomicBool,
    /// Set once the store was seen listed (a store stays listed).
    pub listed: AtomicBool,
    /// How far the watch has come, when it is the runtime's own: see
    /// [`WatchProgress`].
    pub progress: Option<Arc<WatchProgress>>,
}

/// The newest resourceVersion a watch has put into its store (0: none
/// yet), raised only once the store holds the event: everything up to it
/// is in the store. Integers, as kube-apiserver and the embedded server
/// make them; an event whose version is not an integer leaves it.
#[derive(Debug, Default)]
pub(crate) struct WatchProgress {
    stored: AtomicU64,
    /// The newest version of a re-list in progress, published when it is
    /// done (the store swaps in the listed objects then).
    listing: AtomicU64,
}

fn version_of(object: &DynamicObject) -> Option<u64> {
    object.metadata.resource_version.as_deref()?.parse().ok()
}

impl WatchProgress {
    /// Follows one event, after the store has applied it.
    pub fn stored(&self, event: &watcher::Event<DynamicObject>) {
        match event {
            watcher::Event::Apply(object) | watcher::Event::Delete(object) => {
                if let Some(version) = version_of(object) {
                    self.stored.fetch_max(version, Ordering::Relaxed);
                }
            }
            watcher::Event::Init => self.listing.store(0, Ordering::Relaxed),
            watcher::Event::InitApply(object) => {
                if let Some(version) = version_of(object) {
                    self.listing.fetch_max(version, Ordering::Relaxed);
                }
            }
            watcher::Event::InitDone => {
                let listed = self.listing.swap(0, Ordering::Relaxed);
                self.stored.fetch_max(listed, Ordering::Relaxed);
            }
        }
    }

    /// The newest version in the store; `None` before any.
    pub fn newest(&self) -> Option<u64> {
        Some(self.stored.load(Ordering::Relaxed)).filter(|v| *v > 0)
    }
}

impl KindCache {
    /// Waits up to `limit` for the watch's initial list, unless it is done
    /// or an earlier wait ran out (logged once).
    pub async fn await_sync(&self, limit: Duration) {
        if self.synced() || self.waited_out.load(Ordering::Relaxed) {
            return;
        }
        if !tokio::time::timeout(limit, self.store.listed())
            .await
            .unwrap_or(false)
            && !self.waited_out.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(kind = %self.kind.display(), ?limit,
                "the watch of dependents has not listed yet: reading them with a GET each until it has");
        }
    }

    /// Whether the initial list of the watch is done (a store given by
    /// hand whose reflector has not listed yet is not).
    pub fn synced(&self) -> bool {
        if self.listed.load(Ordering::Relaxed) {
            return true;
        }
        let listed = self.store.listed().now_or_never() == Some(true);
        if listed {
            self.listed.store(true, Ordering::Relaxed);
        }
        listed
    }

    /// The newest resourceVersion the cache's watch has stored, when the
    /// watch is the runtime's own (`None` for a store given by hand).
    pub fn watched(&self) -> Option<u64> {
        self.progress.as_ref().and_then(|p| p.newest())
    }

    /// Whether objects in `namespace` are in this cache.
    pub fn covers(&self, namespace: Option<&str>) -> bool {
        !self.kind.namespaced || self.namespace.is_none() || self.namespace.as_deref() == namespace
    }

    /// The cached object at `place`.
    pub fn get(&self, place: &Placement) -> Option<Cached> {
        self.store
            .get(&place.name, place.namespace.as_deref(), &self.kind.resource)
    }

    /// A cached object as JSON, with the `apiVersion` and `kind` that the
    /// items of a list lack (the real server's lists of built-in kinds
    /// carry them on the list only), so that it compares with a desired
    /// body and decodes as a typed object however it reached the store.
    pub fn json(&self, object: &Cached) -> Option<Value> {
        object.to_json(&self.kind.resource)
    }

    /// `owner`'s labelled objects in `namespace` (all with `None`).
    pub fn owned(&self, namespace: Option<&str>, owner: &Owner) -> Vec<Cached> {
        let objects: Vec<Cached> = match &self.owners {
            Some(index) => index
                .owned_by(&owner.uid)
                .into_iter()
                .filter_map(|(ns, name)| self.store.get(&name, ns.as_deref(), &self.kind.resource))
                .collect(),
            None => self.store.all(),
        };
        objects
            .into_iter()
            .filter(|o| namespace.is_none() || o.meta().namespace.as_deref() == namespace)
            .filter(|o| meta_labelled_for(o.meta(), owner))
            .collect()
    }
}

/// `object` as JSON, with `resource`'s `apiVersion` and `kind` when it
/// has none (see [`KindCache::json`]). Built from the parts (the body
/// cloned, the metadata serialized) rather than by serializing the whole
/// object, whose flattened body serde would rebuild node by node.
fn object_json(object: &DynamicObject, resource: &ApiResource) -> Option<Value> {
    let mut map = match &object.data {
        Value::Object(body) => body.clone(),
        Value::Null => serde_json::Map::new(),
        _ => return None,
    };
    map.insert(
        "metadata".to_owned(),
        serde_json::to_value(&object.metadata).ok()?,
    );
    let (api_version, kind) = match &object.types {
        Some(types) => (types.api_version.clone(), types.kind.clone()),
        None => (resource.api_version.clone(), resource.kind.clone()),
    };
    map.insert("apiVersion".to_owned(), Value::String(api_version));
    map.insert("kind".to_owned(), Value::String(kind));
    Some(Value::Object(map))
}

/// The caches of a runtime, shared by its clones: a watch started after
/// the runtime was handed to a reconciler still serves it.
#[derive(Default)]
pub(crate) struct CacheRegistry {
    kinds: RwLock<Vec<Arc<KindCache>>>,
}

impl CacheRegistry {
    /// Adds a cache (after those already there: the first that covers a
    /// read answers it).
    pub fn register(&self, cache: KindCache) {
        if let Ok(mut kinds) = self.kinds.write() {
            kinds.push(Arc::new(cache));
        }
    }

    /// The number of caches.
    pub fn len(&self) -> usize {
        self.kinds.read().map(|k| k.len()).unwrap_or(0)
    }

    /// The caches of `kind` covering `namespace`, synced or not.
    pub fn covering(&self, kind: &DependentKind, namespace: Option<&str>) -> Vec<Arc<KindCache>> {
        let Ok(kinds) = self.kinds.read() else {
            return Vec::new();
        };
        kinds
            .iter()
            .filter(|c| c.kind.same_kind(kind) && c.covers(namespace))
            .cloned()
            .collect()
    }

    /// How far the watch of the cache covering `place` has come, when the
    /// runtime follows it (its own watch).
    pub fn watch_progress(&self, place: &Placement) -> Option<Arc<WatchProgress>> {
        let kinds = self.kinds.read().ok()?;
        kinds
            .iter()
            .find(|c| {
                c.kind.resource.group == place.group
                    && c.kind.resource.kind == place.kind
                    && c.covers(place.namespace.as_deref())
            })
            .and_then(|c| c.progress.clone())
    }

    /// The synced cache of `kind` covering `namespace`, if any.
    pub fn synced(&self, kind: &DependentKind, namespace: Option<&str>) -> Option<Arc<KindCache>> {
        let kinds = self.kinds.read().ok()?;
        kinds
            .iter()
            .find(|c| c.kind.same_kind(kind) && c.covers(namespace) && c.synced())
            .cloned()
    }
}

/// What a cache keeps of a watched object: everything but the field sets
/// of other field managers (`managedFields[].fieldsV1`, often the larger
/// part of a small object), with its `apiVersion` and `kind` (which the
/// items of a list lack: the real server sends them on built-in lists
/// only once, for the list). The diff reads only our manager's entry in
/// full, and of the others their names and operations (to tell drift from
/// a conflict), which are kept.
pub(crate) fn prepare_for_cache(
    object: &mut DynamicObject,
    kind: &DependentKind,
    field_manager: &str,
) {
    if object.types.is_none() {
        object.types = Some(TypeMeta {
            api_version: kind.resource.api_version.clone(),
            kind: kind.resource.kind.clone(),
        });
    }
    if let Some(entries) = object.metadata.managed_fields.as_mut() {
        for entry in entries {
            if entry.manager.as_deref() != Some(field_manager) {
                entry.fields_v1 = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
    use kube::api::ObjectMeta;
    use std::collections::BTreeMap;

    fn object(name: &str, uid: Option<&str>) -> DynamicObject {
        let mut labels = BTreeMap::new();
        if let Some(uid) = uid {
            labels.insert(MANAGED_BY_LABEL.0.to_owned(), MANAGED_BY_LABEL.1.to_owned());
            labels.insert(OWNER_UID_LABEL.to_owned(), uid.to_owned());
        }
        DynamicObject {
            types: None,
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                labels: Some(labels),
                ..ObjectMeta::default()
            },
            data: Value::Null,
        }
    }

    fn keys(index: &OwnerIndex, uid: &str) -> Vec<String> {
        let mut names: Vec<String> = index.owned_by(uid).into_iter().map(|(_, n)| n).collect();
        names.sort();
        names
    }

    #[test]
    fn a_cached_object_reads_as_its_json_with_its_types_filled_in() {
        let resource = ApiResource::erase::<ConfigMap>(&());
        let listed: DynamicObject = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "c", "namespace": "ns", "resourceVersion": "7"},
            "data": {"k": "v"},
            "immutable": false,
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let mut whole = serde_json::to_value(&listed).unwrap_or_else(|e| panic!("{e}"));
        whole["apiVersion"] = "v1".into();
        whole["kind"] = "ConfigMap".into();
        assert_eq!(object_json(&listed, &resource), Some(whole.clone()));
        // An object with its types keeps them.
        let mut typed = listed.clone();
        typed.types = Some(TypeMeta {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
        });
        assert_eq!(
            object_json(&typed, &resource),
            serde_json::to_value(&typed).ok()
        );
        assert_eq!(object_json(&typed, &resource), Some(whole));
    }

    #[test]
    fn the_owner_index_follows_applies_deletes_and_relists() {
        let index = OwnerIndex::default();
        index.apply(&watcher::Event::Apply(object("a", Some("u1"))));
        index.apply(&watcher::Event::Apply(object("b", Some("u1"))));
        index.apply(&watcher::Event::Apply(object("c", None)));
        assert_eq!(keys(&index, "u1"), ["a", "b"]);
        // Relabelled to another owner, then released (no label).
        index.apply(&watcher::Event::Apply(object("b", Some("u2"))));
        assert_eq!(keys(&index, "u1"), ["a"]);
        assert_eq!(keys(&index, "u2"), ["b"]);
        index.apply(&watcher::Event::Apply(object("b", None)));
        assert!(keys(&index, "u2").is_empty());
        index.apply(&watcher::Event::Delete(object("a", Some("u1"))));
        assert!(keys(&index, "u1").is_empty());
        // A re-list replaces everything once done.
        index.apply(&watcher::Event::Apply(object("old", Some("u1"))));
        index.apply(&watcher::Event::Init);
        index.apply(&watcher::Event::InitApply(object("d", Some("u3"))));
        assert_eq!(
            keys(&index, "u1"),
            ["old"],
            "unchanged until the list is done"
        );
        index.apply(&watcher::Event::InitDone);
        assert!(keys(&index, "u1").is_empty());
        assert_eq!(keys(&index, "u3"), ["d"]);
    }

    #[test]
    fn the_cache_keeps_our_field_sets_the_others_names_and_the_kind() {
        let entry = |manager: &str, operation: &str| ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some(operation.into()),
            fields_v1: Some(FieldsV1(serde_json::json!({"f:spec": {}}))),
            ..ManagedFieldsEntry::default()
        };
        let mut o = object("a", None);
        o.metadata.managed_fields = Some(vec![entry("us", "Apply"), entry("kubectl", "Update")]);
        prepare_for_cache(&mut o, &DependentKind::of::<ConfigMap>(), "us");
        let types = o.types.clone().unwrap_or_default();
        assert_eq!(
            (types.api_version.as_str(), types.kind.as_str()),
            ("v1", "ConfigMap"),
            "a list item's apiVersion and kind are filled in"
        );
        let entries = o.metadata.managed_fields.unwrap_or_default();
        assert!(entries[0].fields_v1.is_some());
        assert!(entries[1].fields_v1.is_none());
        assert_eq!(entries[1].manager.as_deref(), Some("kubectl"));
        assert_eq!(entries[1].operation.as_deref(), Some("Update"));
    }
}
