//! Read-your-writes over a watch cache: the objects the server returned
//! from our own writes, kept until the cache shows them (or something
//! newer), so that a converge right after a write does not act on the
//! stale cached object (a stale read would apply again; a stale "absent"
//! would create again).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::object::Placement;

/// At most this many writes are remembered; past it, those older than
/// [`KEEP_AT_MOST`] are forgotten, and if that is not enough, all are (a
/// forgotten write costs at most one more apply, which the server sees as
/// a no-op).
const CAPACITY: usize = 100_000;

/// A write the cache has not shown after this long is forgotten: the
/// watch is lagging far behind or broken, and the cache is trusted again.
const KEEP_AT_MOST: Duration = Duration::from_secs(30);

/// What we last wrote at one placement.
#[derive(Clone, Debug)]
enum Written {
    /// The object as the server returned it from an apply, create or patch.
    Object(Value),
    /// Deleted; the resourceVersion of the deletion (if the server said
    /// it) tells a later object from the one deleted.
    Deleted,
}

#[derive(Debug)]
struct Entry {
    written: Written,
    version: Option<u64>,
    at: Instant,
}

/// The writes of one runtime (shared by its clones), by placement.
#[derive(Debug, Default)]
pub(crate) struct OwnWrites {
    entries: Mutex<HashMap<Placement, Entry>>,
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
    Object(Value),
    /// The cache lags: the object is gone.
    Absent,
}

impl OwnWrites {
    /// Remembers that the server returned `object` from our write at `place`.
    pub fn wrote(&self, place: &Placement, object: &Value) {
        self.remember(
            place,
            Entry {
                version: version_of(object),
                written: Written::Object(object.clone()),
                at: Instant::now(),
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
            },
        );
    }

    fn remember(&self, place: &Placement, entry: Entry) {
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        if entries.len() >= CAPACITY {
            entries.retain(|_, e| e.at.elapsed() < KEEP_AT_MOST);
            if entries.len() >= CAPACITY {
                entries.clear();
            }
        }
        entries.insert(place.clone(), entry);
    }

    /// What to read at `place` given the cache's object there (`None`:
    /// absent from the cache). Forgets the write once the cache shows it.
    pub fn reconcile(&self, place: &Placement, cached: Option<&Value>) -> Override {
        let Ok(mut entries) = self.entries.lock() else {
            return Override::None;
        };
        let Some(entry) = entries.get(place) else {
            return Override::None;
        };
        let cached_version = cached.and_then(version_of);
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
        if caught_up || entry.at.elapsed() >= KEEP_AT_MOST {
            entries.remove(place);
            return Override::None;
        }
        match &entry.written {
            Written::Object(object) => Override::Object(object.clone()),
            Written::Deleted => Override::Absent,
        }
    }

    /// How many writes are remembered.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().map(|e| e.len()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn place(name: &str) -> Placement {
        Placement {
            group: String::new(),
            kind: "ConfigMap".into(),
            namespace: Some("ns".into()),
            name: name.into(),
        }
    }

    fn at(version: &str) -> Value {
        json!({"metadata": {"name": "a", "resourceVersion": version}})
    }

    #[test]
    fn a_lagging_cache_is_overridden_until_it_shows_the_write() {
        let writes = OwnWrites::default();
        writes.wrote(&place("a"), &at("12"));
        // Absent from the cache, or older: our write.
        assert_eq!(
            writes.reconcile(&place("a"), None),
            Override::Object(at("12"))
        );
        assert_eq!(
            writes.reconcile(&place("a"), Some(&at("9"))),
            Override::Object(at("12"))
        );
        // Versions compare as integers, not as text ("100" < "12" as text).
        assert_eq!(
            writes.reconcile(&place("a"), Some(&at("100"))),
            Override::None
        );
        assert_eq!(writes.len(), 0, "forgotten once the cache caught up");
        assert_eq!(
            writes.reconcile(&place("a"), Some(&at("9"))),
            Override::None
        );
    }

    #[test]
    fn a_deletion_hides_the_cached_object_until_it_is_gone_or_replaced() {
        let writes = OwnWrites::default();
        writes.deleted(&place("a"), Some(&at("20")));
        assert_eq!(
            writes.reconcile(&place("a"), Some(&at("15"))),
            Override::Absent
        );
        assert_eq!(
            writes.reconcile(&place("a"), Some(&at("20"))),
            Override::Absent
        );
        // Created again after the deletion: the cache is current.
        assert_eq!(
            writes.reconcile(&place("a"), Some(&at("21"))),
            Override::None
        );
        writes.deleted(&place("a"), None);
        assert_eq!(
            writes.reconcile(&place("a"), Some(&at("30"))),
            Override::Absent
        );
        assert_eq!(writes.reconcile(&place("a"), None), Override::None);
    }

    #[test]
    fn an_unparsable_version_keeps_our_write() {
        let writes = OwnWrites::default();
        writes.wrote(&place("a"), &at("abc"));
        assert_eq!(
            writes.reconcile(&place("a"), Some(&at("99"))),
            Override::Object(at("abc"))
        );
        assert_eq!(writes.reconcile(&place("b"), None), Override::None);
    }
}
