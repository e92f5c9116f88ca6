//! The records the runtime committed, kept decoded per object version until
//! the next load of that version: the reconcile that follows a commit (the
//! one its own write wakes up) gets the record without decoding the stored
//! JSON again.
//!
//! An entry lives from a commit until the next load of the object, so the
//! cache holds about as many records as there are commits not yet followed
//! by a reconcile, not one per object: held for every object (up to 4,096)
//! the records cost 3–6 MiB of peak RSS at 10,000 objects in the benchmark,
//! more than the decoding they save was worth (a few microseconds per
//! reconcile, invisible end to end).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use fsm_core::{StateRecord, Version};

/// How many objects a cache keeps a decoded record for by default.
pub(crate) const DEFAULT_CAPACITY: usize = 1024;

/// One object's last committed record and the version it is stored at.
#[derive(Debug)]
struct Entry {
    version: Version,
    record: Arc<StateRecord>,
    /// Its place in the insertion order, to tell a current entry from a
    /// replaced one when evicting.
    generation: u64,
}

#[derive(Debug, Default)]
struct Entries {
    by_uid: HashMap<String, Entry>,
    /// UIDs in insertion order, with the generation inserted.
    order: VecDeque<(String, u64)>,
    next_generation: u64,
}

/// Decoded records keyed by object UID and version, at most `capacity`
/// objects (the least recently committed go first).
///
/// # Guarantees
/// - A look-up takes the entry: it hits only for the exact version stored,
///   and only once; any other version (someone else wrote the object) is a
///   miss. Either way the entry is gone.
/// - It only ever holds records the runtime committed itself, never what
///   it read: a corrupt stored record is not in it.
#[derive(Debug)]
pub(crate) struct DecodedCache {
    entries: Mutex<Entries>,
    capacity: usize,
}

impl Default for DecodedCache {
    fn default() -> Self {
        Self::with_capacity(DEFAULT_CAPACITY)
    }
}

impl DecodedCache {
    /// A cache of at most `capacity` objects (at least one).
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        DecodedCache {
            entries: Mutex::new(Entries::default()),
            capacity: capacity.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `record`, which the runtime just committed as `version` of the
    /// object `uid`.
    pub(crate) fn remember(&self, uid: &str, version: Version, record: Arc<StateRecord>) {
        let mut entries = self.lock();
        let generation = entries.next_generation;
        entries.next_generation += 1;
        entries.by_uid.insert(
            uid.to_owned(),
            Entry {
                version,
                record,
                generation,
            },
        );
        entries.order.push_back((uid.to_owned(), generation));
        while entries.by_uid.len() > self.capacity {
            let Some((oldest, generation)) = entries.order.pop_front() else {
                break;
            };
            if entries
                .by_uid
                .get(&oldest)
                .is_some_and(|e| e.generation == generation)
            {
                entries.by_uid.remove(&oldest);
            }
        }
        // Replaced entries leave stale places behind; keep the queue short.
        if entries.order.len() > 2 * self.capacity {
            let Entries { by_uid, order, .. } = &mut *entries;
            order.retain(|(uid, g)| by_uid.get(uid).is_some_and(|e| e.generation == *g));
        }
    }

    /// Takes the decoded record of object `uid` when it is stored at
    /// `version`; `None` for any other version. The entry is gone after
    /// either.
    pub(crate) fn take(&self, uid: &str, version: &str) -> Option<Arc<StateRecord>> {
        let entry = self.lock().by_uid.remove(uid)?;
        (entry.version.0 == version).then_some(entry.record)
    }

    /// Forgets object `uid` (deleted, or its record was found wanting).
    pub(crate) fn forget(&self, uid: &str) {
        self.lock().by_uid.remove(uid);
    }

    /// How many objects it holds a record for.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().by_uid.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(state: &str) -> Arc<StateRecord> {
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "schemaVersion": 1, "state": state, "enteredAt": "2024-01-01T00:00:00Z"
            }))
            .unwrap(),
        )
    }

    fn v(s: &str) -> Version {
        Version(s.to_owned())
    }

    #[test]
    fn the_stored_version_hits_once_and_shares_the_record() {
        let cache = DecodedCache::default();
        let committed = record("A");
        cache.remember("u", v("7"), Arc::clone(&committed));
        let hit = cache.take("u", "7").unwrap();
        assert!(Arc::ptr_eq(&hit, &committed));
        assert!(cache.take("u", "7").is_none(), "a hit takes the entry");
        assert_eq!(cache.len(), 0);
    }

    #[test]
    fn another_version_misses_and_drops_the_entry() {
        let cache = DecodedCache::default();
        cache.remember("u", v("7"), record("A"));
        assert!(cache.take("u", "8").is_none());
        assert!(cache.take("u", "7").is_none(), "the entry is gone");
        assert!(cache.take("other", "7").is_none());
    }

    #[test]
    fn a_new_commit_replaces_the_entry() {
        let cache = DecodedCache::default();
        cache.remember("u", v("7"), record("A"));
        cache.remember("u", v("9"), record("B"));
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.take("u", "9").unwrap().state, "B");
        assert_eq!(cache.len(), 0);
    }

    #[test]
    fn forgetting_drops_the_entry() {
        let cache = DecodedCache::default();
        cache.remember("u", v("7"), record("A"));
        cache.forget("u");
        assert!(cache.take("u", "7").is_none());
    }

    #[test]
    fn the_least_recently_committed_go_beyond_the_capacity() {
        let cache = DecodedCache::with_capacity(2);
        cache.remember("a", v("1"), record("A"));
        cache.remember("b", v("1"), record("A"));
        // `a` commits again: now `b` is the oldest.
        cache.remember("a", v("2"), record("B"));
        cache.remember("c", v("1"), record("A"));
        assert_eq!(cache.len(), 2);
        assert!(cache.take("b", "1").is_none());
        assert!(cache.take("a", "2").is_some());
        assert!(cache.take("c", "1").is_some());
        // Many replacements keep the order queue bounded.
        for n in 0..100 {
            cache.remember("a", v(&n.to_string()), record("A"));
        }
        assert!(cache.lock().order.len() <= 4);
    }
}
