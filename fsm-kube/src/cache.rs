//! Read-your-writes: the watch cache lags behind the runtime's own commits,
//! so the next reconcile often sees the object (or ConfigMap) from before
//! the last commit. This cache keeps, per object, the last record the
//! runtime committed and the versions that commit superseded, and answers
//! with it while the watched copy is one of those older versions.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::time::Instant;

use fsm_core::{RawRecord, Version};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

/// The version an absent object is said to have, so that a create can be
/// superseded like an update.
pub(crate) const ABSENT: &str = "";

/// How many superseded versions one entry remembers (commits made faster
/// than the watch catches up).
const MAX_SUPERSEDED: usize = 16;

/// What the runtime last committed for one object.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Written {
    /// The version the commit produced.
    pub version: Version,
    /// The record committed.
    pub record: RawRecord,
    /// The conditions committed with it (status store).
    pub conditions: Option<Vec<Condition>>,
    /// When the commit was made (the runtime's clock, paused in tests).
    pub at: Instant,
    superseded: Vec<String>,
}

/// Last commits, keyed by object UID. Entries are shared, so that a
/// look-up copies no record.
#[derive(Debug, Default)]
pub(crate) struct WrittenCache {
    entries: Mutex<HashMap<String, Arc<Written>>>,
}

impl WrittenCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Written>>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a commit that replaced `previous` (`None`: created) with
    /// `version`.
    pub(crate) fn remember(
        &self,
        uid: &str,
        previous: Option<&Version>,
        version: Version,
        record: RawRecord,
        conditions: Option<Vec<Condition>>,
    ) {
        let mut entries = self.lock();
        let mut superseded = entries
            .remove(uid)
            .map(|w| {
                // The versions only: a reconcile may still hold the entry.
                let mut s = w.superseded.clone();
                s.push(w.version.0.clone());
                s
            })
            .unwrap_or_default();
        superseded.push(previous.map_or_else(|| ABSENT.to_owned(), |v| v.0.clone()));
        let excess = superseded.len().saturating_sub(MAX_SUPERSEDED);
        superseded.drain(..excess);
        entries.insert(
            uid.to_owned(),
            Arc::new(Written {
                version,
                record,
                conditions,
                at: Instant::now(),
                superseded,
            }),
        );
    }

    /// The runtime's own last commit when the watched copy (at
    /// `observed_version`, `ABSENT` when not seen) is older than it; `None`
    /// when the watched copy is current or newer (the entry is then dropped).
    pub(crate) fn resolve(&self, uid: &str, observed_version: &str) -> Option<Arc<Written>> {
        let mut entries = self.lock();
        let stale = entries
            .get(uid)
            .is_some_and(|w| w.superseded.iter().any(|s| s == observed_version));
        if stale {
            entries.get(uid).cloned()
        } else {
            entries.remove(uid);
            None
        }
    }

    /// When the runtime made the commit that the watched copy (at
    /// `observed_version`) is older than; `None` when the copy is current,
    /// newer, or the object unknown. Looks only: the entry stays.
    pub(crate) fn superseded_at(&self, uid: &str, observed_version: &str) -> Option<Instant> {
        self.lock()
            .get(uid)
            .filter(|w| w.superseded.iter().any(|s| s == observed_version))
            .map(|w| w.at)
    }

    /// Forgets an object (deleted, or its record was found wanting).
    pub(crate) fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(n: u8) -> RawRecord {
        RawRecord::Json(serde_json::json!({ "n": n }))
    }

    /// Remembers our commit of record `n` from version `from` to `to`.
    fn commit(cache: &WrittenCache, uid: &str, from: &str, to: &str, n: u8) {
        cache.remember(
            uid,
            Some(&Version(from.into())),
            Version(to.into()),
            raw(n),
            None,
        );
    }

    #[test]
    fn a_stale_copy_is_answered_from_the_cache() {
        let cache = WrittenCache::default();
        commit(&cache, "u", "10", "11", 1);
        commit(&cache, "u", "11", "12", 2);
        // The watch still shows 10 (two commits behind): our last commit wins.
        let hit = cache.resolve("u", "10").unwrap();
        assert_eq!(hit.version, Version("12".into()));
        assert_eq!(hit.record, raw(2));
        assert!(cache.resolve("u", "11").is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_stale_copy_says_when_the_commit_it_predates_was_made() {
        let cache = WrittenCache::default();
        commit(&cache, "u", "10", "11", 1);
        let made = Instant::now();
        tokio::time::advance(std::time::Duration::from_millis(40)).await;
        commit(&cache, "u", "11", "12", 2);
        assert_eq!(
            cache.superseded_at("u", "10"),
            Some(made + std::time::Duration::from_millis(40)),
            "the last commit's time"
        );
        assert_eq!(cache.superseded_at("u", "12"), None, "current");
        assert_eq!(cache.superseded_at("u", "15"), None, "newer");
        assert_eq!(cache.superseded_at("v", "10"), None, "unknown");
        assert!(cache.resolve("u", "11").is_some(), "looking kept the entry");
    }

    #[test]
    fn a_current_or_newer_copy_drops_the_entry() {
        let cache = WrittenCache::default();
        commit(&cache, "u", "10", "11", 1);
        assert!(cache.resolve("u", "11").is_none());
        assert!(cache.resolve("u", "10").is_none(), "the entry is gone");

        commit(&cache, "v", "10", "11", 1);
        // Someone else wrote after us: their copy is the truth.
        assert!(cache.resolve("v", "15").is_none());
    }

    #[test]
    fn creates_supersede_the_absent_object() {
        let cache = WrittenCache::default();
        cache.remember("u", None, Version("3".into()), raw(1), None);
        assert!(cache.resolve("u", ABSENT).is_some());
    }
}
