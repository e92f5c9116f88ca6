//! Storage: objects as JSON, one monotonically increasing revision (as
//! etcd's), a bounded history of changes, and a broadcast stream of them.
//!
//! The store knows nothing of API semantics (defaults, validation,
//! finalizers): it keeps what it is given, stamps `metadata.resourceVersion`
//! with the new revision, and publishes a [`StoreEvent`]. Watches replay the
//! history and then follow the stream; later features (garbage collection,
//! simulated workloads) can subscribe to the same stream.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::broadcast;

use crate::resources::GroupResource;

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Created.
    Added,
    /// Changed.
    Modified,
    /// Removed.
    Deleted,
}

impl EventType {
    /// The watch event `type`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One change committed to the store.
#[derive(Debug, Clone)]
pub struct StoreEvent {
    /// The revision of the change.
    pub revision: u64,
    /// What happened.
    pub kind: EventType,
    /// The resource of the object.
    pub resource: GroupResource,
    /// The object's namespace ("" for cluster-scoped).
    pub namespace: String,
    /// The object after the change (for `Deleted`, its last state).
    pub object: Arc<Value>,
    /// The object before the change, for `Modified` and `Deleted`.
    pub previous: Option<Arc<Value>>,
    /// `object` serialized once, shared by every watcher that sends it as stored.
    pub encoded: OnceLock<Bytes>,
}

impl StoreEvent {
    /// `object` as JSON, serialized on first use.
    pub fn encoded(&self) -> &Bytes {
        self.encoded
            .get_or_init(|| Bytes::from(self.object.to_string()))
    }
}

/// Returned by [`Store::events_since`] when the history no longer reaches back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooOld {
    /// The revision asked for.
    pub requested: u64,
    /// The oldest revision the history can still replay from.
    pub oldest: u64,
}

type Objects = BTreeMap<(String, String), Arc<Value>>;

/// Where an object is stored: its resource, namespace and name.
pub type StoredAt = (GroupResource, String, String);

/// The object store.
#[derive(Debug)]
pub struct Store {
    revision: u64,
    objects: HashMap<GroupResource, Objects>,
    /// `metadata.uid` → where that object is stored: owner references
    /// name their owner by uid, and the garbage collector looks owners up
    /// on every write of a dependent.
    uids: HashMap<String, StoredAt>,
    history: VecDeque<Arc<StoreEvent>>,
    history_limit: usize,
    /// The revision of the newest event dropped from the history.
    compacted: u64,
    events: broadcast::Sender<Arc<StoreEvent>>,
}

impl Store {
    /// An empty store keeping `history_limit` events for watches, with a
    /// broadcast buffer of `channel_capacity` events per subscriber.
    #[must_use]
    pub fn new(history_limit: usize, channel_capacity: usize) -> Self {
        let (events, _) = broadcast::channel(channel_capacity.max(1));
        Self {
            revision: 0,
            objects: HashMap::new(),
            uids: HashMap::new(),
            history: VecDeque::new(),
            history_limit: history_limit.max(1),
            compacted: 0,
            events,
        }
    }

    /// The newest revision.
    #[must_use]
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The revision of the newest event no longer in the history (0 if none).
    #[must_use]
    pub fn compacted(&self) -> u64 {
        self.compacted
    }

    /// The object `namespace/name` of `gr`.
    #[must_use]
    pub fn get(&self, gr: &GroupResource, namespace: &str, name: &str) -> Option<Arc<Value>> {
        self.objects
            .get(gr)
            .and_then(|m| m.get(&(namespace.to_string(), name.to_string())))
            .cloned()
    }

    /// The stored object whose `metadata.uid` is `uid`, with its resource.
    #[must_use]
    pub fn by_uid(&self, uid: &str) -> Option<(GroupResource, Arc<Value>)> {
        let (gr, namespace, name) = self.uids.get(uid)?;
        let object = self
            .objects
            .get(gr)?
            .get(&(namespace.clone(), name.clone()))?;
        Some((gr.clone(), object.clone()))
    }

    /// The objects of `gr`, in `namespace` when given, ordered by (namespace, name).
    #[must_use]
    pub fn list(&self, gr: &GroupResource, namespace: Option<&str>) -> Vec<Arc<Value>> {
        let Some(m) = self.objects.get(gr) else {
            return Vec::new();
        };
        match namespace {
            Some(ns) => m
                .range((ns.to_string(), String::new())..)
                .take_while(|((n, _), _)| n == ns)
                .map(|(_, v)| v.clone())
                .collect(),
            None => m.values().cloned().collect(),
        }
    }

    /// The objects of `gr` as they were at `revision` (a consistent
    /// snapshot, as etcd reads at a past revision), in `namespace` when
    /// given, ordered by (namespace, name): the current objects with the
    /// changes after `revision` undone from the history.
    ///
    /// # Errors
    /// [`TooOld`] when changes after `revision` have left the history
    /// (the real server's compacted revisions).
    pub fn list_at(
        &self,
        gr: &GroupResource,
        namespace: Option<&str>,
        revision: u64,
    ) -> Result<Vec<Arc<Value>>, TooOld> {
        if revision >= self.revision {
            return Ok(self.list(gr, namespace));
        }
        if revision < self.compacted {
            return Err(TooOld {
                requested: revision,
                oldest: self.compacted,
            });
        }
        let mut objects: Objects = self
            .list(gr, namespace)
            .into_iter()
            .map(|o| (key_of(&o), o))
            .collect();
        for e in self
            .history
            .iter()
            .rev()
            .take_while(|e| e.revision > revision)
        {
            if e.resource != *gr || namespace.is_some_and(|ns| ns != e.namespace) {
                continue;
            }
            let key = key_of(&e.object);
            match (&e.kind, &e.previous) {
                (EventType::Added, _) => {
                    objects.remove(&key);
                }
                (EventType::Modified | EventType::Deleted, Some(previous)) => {
                    objects.insert(key, previous.clone());
                }
                (EventType::Modified | EventType::Deleted, None) => {}
            }
        }
        Ok(objects.into_values().collect())
    }

    /// Whether `gr` has any object in `namespace` (any namespace when `None`).
    #[must_use]
    pub fn any(&self, gr: &GroupResource, namespace: Option<&str>) -> bool {
        let Some(m) = self.objects.get(gr) else {
            return false;
        };
        match namespace {
            Some(ns) => m
                .range((ns.to_string(), String::new())..)
                .next()
                .is_some_and(|((n, _), _)| n == ns),
            None => !m.is_empty(),
        }
    }

    /// Every resource that has objects.
    #[must_use]
    pub fn resources(&self) -> Vec<GroupResource> {
        self.objects
            .iter()
            .filter(|(_, m)| !m.is_empty())
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Stores `object` as new or changed, stamping the next revision.
    /// Returns the stored object.
    pub fn put(
        &mut self,
        gr: &GroupResource,
        namespace: &str,
        name: &str,
        mut object: Value,
    ) -> Arc<Value> {
        let revision = self.revision + 1;
        self.revision = revision;
        stamp(&mut object, revision);
        let object = Arc::new(object);
        let previous = self
            .objects
            .entry(gr.clone())
            .or_default()
            .insert((namespace.to_string(), name.to_string()), object.clone());
        if let Some(previous) = &previous {
            self.forget_uid(previous, gr, namespace, name);
        }
        let uid = uid_of(&object);
        if !uid.is_empty() {
            self.uids.insert(
                uid.to_string(),
                (gr.clone(), namespace.to_string(), name.to_string()),
            );
        }
        let kind = if previous.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.publish(StoreEvent {
            revision,
            kind,
            resource: gr.clone(),
            namespace: namespace.to_string(),
            object: object.clone(),
            previous,
            encoded: OnceLock::new(),
        });
        object
    }

    /// Replaces the stored object with `object`, the same object encoded
    /// at another version, if it is still at `resource_version`: no new
    /// revision, no event (what kube-apiserver reads from etcd it decodes
    /// to the storage version before a write compares with it). Returns
    /// whether it was replaced.
    pub fn reencode(
        &mut self,
        gr: &GroupResource,
        namespace: &str,
        name: &str,
        resource_version: &str,
        object: Value,
    ) -> bool {
        let Some(stored) = self
            .objects
            .get_mut(gr)
            .and_then(|objects| objects.get_mut(&(namespace.to_string(), name.to_string())))
        else {
            return false;
        };
        if stored["metadata"]["resourceVersion"].as_str() != Some(resource_version) {
            return false;
        }
        *stored = Arc::new(object);
        true
    }

    /// Removes the object, publishing `last` (its final state, stamped with
    /// the deletion's revision) as the `Deleted` event. Returns the stamped
    /// final state, or `None` when there was no such object.
    pub fn remove(
        &mut self,
        gr: &GroupResource,
        namespace: &str,
        name: &str,
        mut last: Value,
    ) -> Option<Arc<Value>> {
        let previous = self
            .objects
            .get_mut(gr)?
            .remove(&(namespace.to_string(), name.to_string()))?;
        self.forget_uid(&previous, gr, namespace, name);
        let revision = self.revision + 1;
        self.revision = revision;
        stamp(&mut last, revision);
        let object = Arc::new(last);
        self.publish(StoreEvent {
            revision,
            kind: EventType::Deleted,
            resource: gr.clone(),
            namespace: namespace.to_string(),
            object: object.clone(),
            previous: Some(previous),
            encoded: OnceLock::new(),
        });
        Some(object)
    }

    /// Drops `object`'s uid from the index if it still points at
    /// `gr`/`namespace`/`name` (a uid is immutable, but the store keeps
    /// what it is given).
    fn forget_uid(&mut self, object: &Value, gr: &GroupResource, namespace: &str, name: &str) {
        let uid = uid_of(object);
        if self
            .uids
            .get(uid)
            .is_some_and(|(g, n, m)| g == gr && n == namespace && m == name)
        {
            self.uids.remove(uid);
        }
    }

    fn publish(&mut self, event: StoreEvent) {
        let event = Arc::new(event);
        self.history.push_back(event.clone());
        while self.history.len() > self.history_limit {
            if let Some(old) = self.history.pop_front() {
                self.compacted = old.revision;
            }
        }
        // No subscriber is not an error: nobody is watching.
        let _ = self.events.send(event);
    }

    /// A receiver of every event published from now on.
    #[must_use]
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<StoreEvent>> {
        self.events.subscribe()
    }

    /// The events after `revision`, oldest first.
    ///
    /// # Errors
    /// [`TooOld`] when events after `revision` have been dropped from the history.
    pub fn events_since(&self, revision: u64) -> Result<Vec<Arc<StoreEvent>>, TooOld> {
        if revision < self.compacted {
            return Err(TooOld {
                requested: revision,
                oldest: self.compacted,
            });
        }
        Ok(self
            .history
            .iter()
            .filter(|e| e.revision > revision)
            .cloned()
            .collect())
    }
}

fn uid_of(object: &Value) -> &str {
    object["metadata"]["uid"].as_str().unwrap_or_default()
}

fn key_of(object: &Value) -> (String, String) {
    let meta = &object["metadata"];
    let s = |k: &str| meta[k].as_str().unwrap_or_default().to_string();
    (s("namespace"), s("name"))
}

fn stamp(object: &mut Value, revision: u64) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert(
            "resourceVersion".into(),
            Value::String(revision.to_string()),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gr() -> GroupResource {
        GroupResource {
            group: String::new(),
            resource: "configmaps".into(),
        }
    }

    fn cm(name: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "ns"}})
    }

    fn with_uid(name: &str, uid: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "ns", "uid": uid}})
    }

    #[test]
    fn objects_are_found_by_uid_until_removed() {
        let mut s = Store::new(10, 16);
        s.put(&gr(), "ns", "a", with_uid("a", "u-a"));
        s.put(&gr(), "ns", "b", with_uid("b", "u-b"));
        let (found_gr, a) = s.by_uid("u-a").unwrap();
        assert_eq!(
            (found_gr, a["metadata"]["name"].clone()),
            (gr(), json!("a"))
        );
        // A changed object is found as changed.
        s.put(&gr(), "ns", "a", json!({"metadata": {"name": "a", "namespace": "ns", "uid": "u-a", "labels": {"x": "1"}}}));
        assert_eq!(s.by_uid("u-a").unwrap().1["metadata"]["labels"]["x"], "1");
        s.remove(&gr(), "ns", "a", with_uid("a", "u-a"));
        assert!(s.by_uid("u-a").is_none());
        assert!(s.by_uid("u-b").is_some());
        assert!(
            s.by_uid("").is_none(),
            "objects without a uid are not indexed"
        );
    }

    #[test]
    fn a_uid_moved_to_another_object_is_not_forgotten_with_the_first() {
        let mut s = Store::new(10, 16);
        s.put(&gr(), "ns", "a", with_uid("a", "u"));
        s.put(&gr(), "ns", "b", with_uid("b", "u"));
        s.remove(&gr(), "ns", "a", with_uid("a", "u"));
        assert_eq!(s.by_uid("u").unwrap().1["metadata"]["name"], "b");
    }

    #[test]
    fn revisions_increase_and_are_stamped() {
        let mut s = Store::new(10, 16);
        let a = s.put(&gr(), "ns", "a", cm("a"));
        let b = s.put(&gr(), "ns", "b", cm("b"));
        assert_eq!(a["metadata"]["resourceVersion"], "1");
        assert_eq!(b["metadata"]["resourceVersion"], "2");
        let a2 = s.put(&gr(), "ns", "a", cm("a"));
        assert_eq!(a2["metadata"]["resourceVersion"], "3");
        assert_eq!(s.revision(), 3);
        assert_eq!(s.list(&gr(), Some("ns")).len(), 2);
        assert!(s.list(&gr(), Some("other")).is_empty());
        let gone = s.remove(&gr(), "ns", "a", cm("a")).unwrap();
        assert_eq!(gone["metadata"]["resourceVersion"], "4");
        assert!(s.get(&gr(), "ns", "a").is_none());
        assert!(s.remove(&gr(), "ns", "a", cm("a")).is_none());
    }

    #[test]
    fn history_is_bounded_and_reports_too_old() {
        let mut s = Store::new(2, 16);
        for i in 0..5 {
            s.put(&gr(), "ns", &format!("o{i}"), cm("x"));
        }
        // revisions 4 and 5 are kept; 3 was compacted.
        assert_eq!(s.compacted(), 3);
        assert_eq!(s.events_since(3).unwrap().len(), 2);
        assert_eq!(s.events_since(5).unwrap().len(), 0);
        assert_eq!(
            s.events_since(2).unwrap_err(),
            TooOld {
                requested: 2,
                oldest: 3
            }
        );
    }

    #[test]
    fn lists_at_a_past_revision_undo_later_changes() {
        let mut s = Store::new(10, 16);
        s.put(&gr(), "ns", "a", cm("a"));
        s.put(&gr(), "ns", "b", cm("b"));
        let mut changed = cm("a");
        changed["data"] = json!({"v": "2"});
        s.put(&gr(), "ns", "a", changed);
        s.remove(&gr(), "ns", "b", cm("b"));
        s.put(&gr(), "ns", "c", cm("c"));
        let at = |rev| -> Vec<(String, String)> {
            s.list_at(&gr(), Some("ns"), rev)
                .unwrap()
                .iter()
                .map(|o| {
                    (
                        o["metadata"]["name"].as_str().unwrap().to_string(),
                        o["metadata"]["resourceVersion"]
                            .as_str()
                            .unwrap()
                            .to_string(),
                    )
                })
                .collect()
        };
        let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter().map(|(a, b)| ((*a).into(), (*b).into())).collect()
        };
        assert_eq!(at(2), pairs(&[("a", "1"), ("b", "2")]));
        assert_eq!(at(3), pairs(&[("a", "3"), ("b", "2")]));
        assert_eq!(at(4), pairs(&[("a", "3")]));
        assert_eq!(at(5), pairs(&[("a", "3"), ("c", "5")]));
        assert!(s.list_at(&gr(), Some("other"), 2).unwrap().is_empty());
        let mut small = Store::new(2, 16);
        for i in 0..5 {
            small.put(&gr(), "ns", &format!("o{i}"), cm(&format!("o{i}")));
        }
        assert_eq!(small.list_at(&gr(), None, 3).unwrap().len(), 3);
        assert!(small.list_at(&gr(), None, 2).is_err(), "compacted");
    }

    #[test]
    fn subscribers_see_kinds_in_order() {
        let mut s = Store::new(10, 16);
        let mut rx = s.subscribe();
        s.put(&gr(), "ns", "a", cm("a"));
        s.put(&gr(), "ns", "a", cm("a"));
        s.remove(&gr(), "ns", "a", cm("a"));
        let kinds: Vec<EventType> = (0..3).map(|_| rx.try_recv().unwrap().kind).collect();
        assert_eq!(
            kinds,
            vec![EventType::Added, EventType::Modified, EventType::Deleted]
        );
    }
}
