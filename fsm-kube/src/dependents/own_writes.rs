//! Read-your-writes over a watch cache: the objects the server returned
//! from our own writes, kept until the cache shows them (or something
//! newer), or until the cache's watch has delivered a newer event of its
//! kind, so that a converge right after a write does not act on the
//! stale cached object (a stale read would apply again; a stale "absent"
//! would create again).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::api::ObjectMeta;
use serde_json::Value;

use super::cache::WatchProgress;
use super::cached_object::json_text;
use super::object::Placement;

/// At most this many writes are remembered; past it, those older than
/// [`KEEP_AT_MOST`] are forgotten, and if that is not enough, all are (a
/// forgotten write costs at most one more apply, which the server sees as
/// a no-op).
const CAPACITY: usize = 100_000;

/// A write the cache has not shown after this long is forgotten, when
/// the cache cannot say how far its watch has come (a store given by
/// hand): the watch is lagging far behind or broken, and the cache is
/// trusted again.
const KEEP_AT_MOST: Duration = Duration::from_secs(30);

/// A write a cache that knows how far its watch has come has not shown
/// after this long is forgotten: its watch has delivered nothing newer in
/// all that time (stopped), and the memory is given back.
const KEEP_AT_MOST_WITH_WATCH: Duration = Duration::from_secs(600);

/// The remembered writes are swept of those no read needs any more (their
/// watch has passed them, or they expired) when they reach this many, and
/// after a sweep when they reach twice as many as it left: a write whose
/// object is never read again (a converged owner) is not kept until
/// [`CAPACITY`], at an amortized constant cost per write.
const SWEEP_AT_LEAST: usize = 1024;

/// What we last wrote at one placement.
#[derive(Clone, Debug)]
enum Written {
    /// The object as the server returned it from an apply, create or
    /// patch, as its JSON text: thousands of writes can wait for a
    /// lagging watch at once, and the text is a fraction of a `Value`
    /// tree's size.
    Object(Arc<str>),
    /// Deleted; the resourceVersion of the deletion (if the server said
    /// it) tells a later object from the one deleted.
    Deleted,
}

#[derive(Debug)]
struct Entry {
    written: Written,
    version: Option<u64>,
    at: Instant,
    /// How far the watch of the object's kind has come, when the runtime
    /// follows it.
    watch: Option<Arc<WatchProgress>>,
}

impl Entry {
    /// Whether a watch that has delivered `watched` has passed this write
    /// (the cache then holds it, or whatever came after it). A deletion's
    /// answer carries the object's version before the deletion, not the
    /// deletion's own: only a write's tells how far the watch must have
    /// come.
    fn passed(&self, watched: Option<u64>) -> bool {
        matches!(
            (&self.written, self.version, watched),
            (Written::Object(_), Some(ours), Some(seen)) if seen >= ours
        )
    }

    /// Whether this write is kept no longer, however far the cache lags.
    fn expired(&self, followed: bool) -> bool {
        let limit = if followed || self.watch.is_some() {
            KEEP_AT_MOST_WITH_WATCH
        } else {
            KEEP_AT_MOST
        };
        self.at.elapsed() >= limit
    }

    /// Whether no read needs this write any more.
    fn outlived(&self) -> bool {
        self.passed(self.watch.as_ref().and_then(|w| w.newest())) || self.expired(false)
    }
}

/// The writes of one runtime (shared by its clones), by placement.
#[derive(Debug, Default)]
pub(crate) struct OwnWrites {
    entries: Mutex<Entries>,
}

#[derive(Debug, Default)]
struct Entries {
    by_place: HashMap<Placement, Entry>,
    /// The size at which the next sweep runs (0: at [`SWEEP_AT_LEAST`]).
    sweep_at: usize,
}

/// A resourceVersion as an integer. Both kube-apiserver (etcd revisions)
/// and the embedded server use integers; anything else is `None`, and
/// then the cache is not trusted over our write until [`KEEP_AT_MOST`].
pub(crate) fn version_of(object: &Value) -> Option<u64> {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|v| v.parse().ok())
}

/// What a cached read should answer instead of the cache.
#[derive(Debug, PartialEq)]
pub(crate) enum Override {
    /// The cache is current: use it.
    None,
    /// The cache lags: this is the object.
    Object(OurWrite),
    /// The cache lags: the object is gone.
    Absent,
}

/// The object the server returned from our write, as its JSON text
/// (shared with the memory, not copied): parsed only by the reads that
/// need it.
#[derive(Debug, PartialEq)]
pub(crate) struct OurWrite(Arc<str>);

impl OurWrite {
    /// The whole object.
    pub fn to_value(&self) -> Option<Value> {
        serde_json::from_str(&self.0).ok()
    }

    /// Only its metadata (what pruning reads), without building the rest.
    pub fn metadata(&self) -> Option<ObjectMeta> {
        #[derive(serde::Deserialize)]
        struct MetadataOnly {
            #[serde(default)]
            metadata: ObjectMeta,
        }
        serde_json::from_str::<MetadataOnly>(&self.0)
            .ok()
            .map(|o| o.metadata)
    }
}

impl OwnWrites {
    /// Remembers that the server returned `object` from our write at
    /// `place`; `watch` follows the watch of its kind's cache, when the
    /// runtime has one.
    pub fn wrote(&self, place: &Placement, object: &Value, watch: Option<Arc<WatchProgress>>) {
        let text = json_text(object).unwrap_or_else(|| object.to_string().into_boxed_str());
        self.wrote_text(place, Arc::from(text), version_of(object), watch);
    }

    /// [`Self::wrote`] with the object as its JSON text, at `version` (its
    /// resourceVersion as an integer, `None` when it is not one).
    pub fn wrote_text(
        &self,
        place: &Placement,
        text: Arc<str>,
        version: Option<u64>,
        watch: Option<Arc<WatchProgress>>,
    ) {
        self.remember(
            place,
            Entry {
                version,
                written: Written::Object(text),
                at: Instant::now(),
                watch,
            },
        );
    }

    /// Remembers that we deleted the object at `place`; `response` is what
    /// the server returned (the object being deleted, when it said so).
    pub fn deleted(&self, place: &Placement, response: Option<&Value>) {
        self.remember(
            place,
            Entry {
                version: response.and_then(version_of),
                written: Written::Deleted,
                at: Instant::now(),
                watch: None,
            },
        );
    }

    fn remember(&self, place: &Placement, entry: Entry) {
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        let entries = &mut *entries;
        if entries.by_place.len() >= entries.sweep_at.max(SWEEP_AT_LEAST) {
            entries.by_place.retain(|_, e| !e.outlived());
            if entries.by_place.len() >= CAPACITY {
                entries.by_place.clear();
            }
            entries.sweep_at = entries.by_place.len() * 2;
        }
        entries.by_place.insert(place.clone(), entry);
    }

    /// What to read at `place` given the cache's object there (`None`:
    /// absent from the cache) and, when the cache knows it, the newest
    /// resourceVersion its watch has delivered of its kind (`watched`).
    /// Forgets the write once the cache shows it, or once its watch has
    /// delivered something as new as our write or newer (then the cache
    /// holds every change up to our write, and any after it: it is
    /// current; not for a deletion, see below).
    #[cfg(test)]
    pub fn reconcile(
        &self,
        place: &Placement,
        cached: Option<&Value>,
        watched: Option<u64>,
    ) -> Override {
        self.reconcile_version(place, cached.map(version_of), watched)
    }

    /// [`Self::reconcile`] with what the cache shows at `place` given by its
    /// version: `None` when the cache has no object there, `Some(None)`
    /// when its version is not an integer.
    pub fn reconcile_version(
        &self,
        place: &Placement,
        cached: Option<Option<u64>>,
        watched: Option<u64>,
    ) -> Override {
        let Ok(mut entries) = self.entries.lock() else {
            return Override::None;
        };
        let entries = &mut entries.by_place;
        let Some(entry) = entries.get(place) else {
            return Override::None;
        };
        let cached_version = cached.flatten();
        let caught_up = match (&entry.written, cached, entry.version, cached_version) {
            // The cache shows our write, or something newer.
            (Written::Object(_), Some(_), Some(ours), Some(theirs)) => theirs >= ours,
            // Deleted and gone from the cache.
            (Written::Deleted, None, _, _) => true,
            // Deleted, and the cache holds an object newer than the
            // deletion: created again since.
            (Written::Deleted, Some(_), Some(ours), Some(theirs)) => theirs > ours,
            _ => false,
        };
        if caught_up || entry.passed(watched) || entry.expired(watched.is_some()) {
            entries.remove(place);
            return Override::None;
        }
        match &entry.written {
            // The text is what `Value` wrote: it parses.
            Written::Object(text) => Override::Object(OurWrite(text.clone())),
            Written::Deleted => Override::Absent,
        }
    }

    /// Whether the object at `place`, at `version`, is what our last write
    /// there returned: a watch event of it tells its owner nothing the
    /// converge that wrote it did not know.
    pub fn is_ours(&self, place: &Placement, version: u64) -> bool {
        self.entries.lock().is_ok_and(|entries| {
            entries.by_place.get(place).is_some_and(|entry| {
                matches!(entry.written, Written::Object(_)) && entry.version == Some(version)
            })
        })
    }

    /// How many writes are remembered.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().map(|e| e.by_place.len()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dependents::object::test_placement;
    use serde_json::json;

    fn place(name: &str) -> Placement {
        test_placement(name)
    }

    /// What a read is answered with for our write of `object`.
    fn ours(object: Value) -> Override {
        Override::Object(OurWrite(Arc::from(object.to_string().as_str())))
    }

    fn at(version: &str) -> Value {
        json!({"metadata": {"name": "a", "resourceVersion": version}})
    }

    #[test]
    fn our_write_reads_whole_or_only_its_metadata() {
        let object = json!({"metadata": {"name": "a", "resourceVersion": "3",
            "labels": {"k": "v"}}, "spec": {"x": 1}});
        let ours = OurWrite(Arc::from(object.to_string().as_str()));
        assert_eq!(ours.to_value(), Some(object));
        let meta = ours.metadata().unwrap_or_default();
        assert_eq!(meta.name.as_deref(), Some("a"));
        assert_eq!(
            meta.labels.and_then(|l| l.get("k").cloned()).as_deref(),
            Some("v")
        );
    }

    #[test]
    fn a_lagging_cache_is_overridden_until_it_shows_the_write() {
        let writes = OwnWrites::default();
        writes.wrote(&place("a"), &at("12"), None);
        // Absent from the cache, or older: our write.
        assert_eq!(writes.reconcile(&place("a"), None, None), ours(at("12")));
        assert_eq!(
            writes.reconcile(&place("a"), Some(&at("9")), None),
            ours(at("12"))
        );
        // Versions compare as integers, not as text ("100" < "12" as text).
        assert_eq!(
            writes.reconcile(&place("a"), Some(&at("100")), None),
            Override::None
        );
        assert_eq!(writes.len(), 0, "forgotten once the cache caught up");
        assert_eq!(
            writes.reconcile(&place("a"), Some(&at("9")), None),
            Override::None
        );
    }

    #[test]
    fn a_deletion_hides_the_cached_object_until_it_is_gone_or_replaced() {
        let writes = OwnWrites::default();
        writes.deleted(&place("a"), Some(&at("20")));
        assert_eq!(
            writes.reconcile(&place("a"), Some(&at("15")), None),
            Override::Absent
        );
        assert_eq!(
            writes.reconcile(&place("a"), Some(&at("20")), None),
            Override::Absent
        );
        // Created again after the deletion: the cache is current.
        assert_eq!(
            writes.reconcile(&place("a"), Some(&at("21")), None),
            Override::None
        );
        writes.deleted(&place("a"), None);
        assert_eq!(
            writes.reconcile(&place("a"), Some(&at("30")), None),
            Override::Absent
        );
        assert_eq!(writes.reconcile(&place("a"), None, None), Override::None);
    }

    /// A watch event of the kind at `version`.
    fn event_at(version: usize) -> kube::runtime::watcher::Event<kube::api::DynamicObject> {
        let object = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "other", "resourceVersion": version.to_string()},
        });
        kube::runtime::watcher::Event::Apply(serde_json::from_value(object).unwrap())
    }

    #[test]
    fn writes_the_watch_has_passed_are_swept_though_never_read_again() {
        let writes = OwnWrites::default();
        let watch = Arc::new(WatchProgress::default());
        for i in 1..=SWEEP_AT_LEAST {
            let name = format!("o{i}");
            writes.wrote(&place(&name), &at(&i.to_string()), Some(watch.clone()));
        }
        assert_eq!(writes.len(), SWEEP_AT_LEAST, "nothing swept yet");
        // The watch has come as far as all but the last ten writes.
        watch.stored(&event_at(SWEEP_AT_LEAST - 10));
        writes.wrote(&place("next"), &at("5000"), Some(watch.clone()));
        assert_eq!(
            writes.len(),
            11,
            "the ten it has not passed, and the new one"
        );
        // Those left are still read over a cache that lags.
        assert_eq!(
            writes.reconcile(&place("next"), None, Some(SWEEP_AT_LEAST as u64)),
            ours(at("5000"))
        );
        // Writes to a store given by hand (no watch to follow) are kept
        // until they expire, sweep or not.
        let by_hand = OwnWrites::default();
        for i in 1..=SWEEP_AT_LEAST + 1 {
            by_hand.wrote(&place(&format!("o{i}")), &at(&i.to_string()), None);
        }
        assert_eq!(by_hand.len(), SWEEP_AT_LEAST + 1);
    }

    #[test]
    fn a_watch_past_our_write_makes_the_cache_current() {
        let writes = OwnWrites::default();
        writes.wrote(&place("a"), &at("12"), None);
        // The watch has not come as far as our write: the cache lags.
        assert_eq!(
            writes.reconcile(&place("a"), None, Some(11)),
            ours(at("12"))
        );
        // It has: whatever the cache shows is newer than our write (here:
        // deleted since, by someone else).
        assert_eq!(
            writes.reconcile(&place("a"), None, Some(15)),
            Override::None
        );
        assert_eq!(writes.len(), 0);
        // A deletion answers with the version before it: the watch having
        // passed it says nothing; the object gone from the cache does.
        writes.deleted(&place("b"), Some(&at("20")));
        assert_eq!(
            writes.reconcile(&place("b"), Some(&at("20")), Some(25)),
            Override::Absent
        );
        assert_eq!(
            writes.reconcile(&place("b"), None, Some(25)),
            Override::None
        );
    }

    #[test]
    fn an_unparsable_version_keeps_our_write() {
        let writes = OwnWrites::default();
        writes.wrote(&place("a"), &at("abc"), None);
        assert_eq!(
            writes.reconcile(&place("a"), Some(&at("99")), None),
            ours(at("abc"))
        );
        assert_eq!(writes.reconcile(&place("b"), None, None), Override::None);
    }
}
