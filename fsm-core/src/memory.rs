//! `EphemeralStore`: records in process memory, versioned by a counter.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use crate::fsm::StatusFields;
use crate::future::BoxFuture;
use crate::record::RawRecord;
use crate::store::{Commit, Loaded, ObjectKey, StateStore, StoreError, Version};

/// A store in process memory. Lost on restart; used by the harness, by tests
/// and, in operators, for state that can be recomputed from the world.
///
/// ```
/// use fsm_core::{EphemeralStore, ObjectKey, StateStore};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = EphemeralStore::new();
/// let loaded = store.load(&ObjectKey::cluster("a")).await.unwrap();
/// assert!(loaded.record.is_none());
/// # });
/// ```
#[derive(Debug, Default)]
pub struct EphemeralStore {
    entries: Mutex<HashMap<ObjectKey, (RawRecord, u64)>>,
    counter: Mutex<u64>,
    status: Mutex<HashMap<ObjectKey, StatusFields>>,
}

impl EphemeralStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Puts raw content in place of a record, whatever is stored (to test
    /// corrupt records or to seed a state).
    pub fn insert_raw(&self, key: ObjectKey, raw: RawRecord) -> Version {
        let version = self.next_version();
        self.lock().insert(key, (raw, version));
        Version(version.to_string())
    }

    /// The stored content of `key`, as is.
    pub fn get_raw(&self, key: &ObjectKey) -> Option<RawRecord> {
        self.lock().get(key).map(|(raw, _)| raw.clone())
    }

    /// The status fields published for `key` so far, merged as a status
    /// patch would merge them into the object (a `null` removes a field).
    pub fn status(&self, key: &ObjectKey) -> Option<StatusFields> {
        self.status
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .cloned()
    }

    /// How many records the store holds.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether the store holds no record.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectKey, (RawRecord, u64)>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn next_version(&self) -> u64 {
        let mut counter = self.counter.lock().unwrap_or_else(PoisonError::into_inner);
        *counter += 1;
        *counter
    }

    fn matches(stored: Option<u64>, expected: Option<&Version>) -> bool {
        match (stored, expected) {
            (None, None) => true,
            (Some(v), Some(e)) => v.to_string() == e.0,
            _ => false,
        }
    }
}

impl StateStore for EphemeralStore {
    fn load<'a>(&'a self, key: &'a ObjectKey) -> BoxFuture<'a, Result<Loaded, StoreError>> {
        let loaded = match self.lock().get(key) {
            Some((raw, v)) => Loaded {
                record: Some(raw.clone()),
                version: Some(Version(v.to_string())),
            },
            None => Loaded::default(),
        };
        Box::pin(async move { Ok(loaded) })
    }

    fn save<'a>(
        &'a self,
        key: &'a ObjectKey,
        commit: Commit<'a>,
    ) -> BoxFuture<'a, Result<Version, StoreError>> {
        let result = commit
            .record
            .to_raw()
            .map_err(StoreError::Encode)
            .and_then(|raw| {
                let version = self.next_version();
                let mut entries = self.lock();
                if !Self::matches(entries.get(key).map(|(_, v)| *v), commit.expected) {
                    return Err(StoreError::Conflict);
                }
                entries.insert(key.clone(), (raw, version));
                Ok(Version(version.to_string()))
            });
        if let (Ok(_), Some(status)) = (&result, commit.status) {
            let mut published = self.status.lock().unwrap_or_else(PoisonError::into_inner);
            let fields = published.entry(key.clone()).or_default();
            for (name, value) in status {
                if value.is_null() {
                    fields.remove(name);
                } else {
                    fields.insert(name.clone(), value.clone());
                }
            }
        }
        Box::pin(async move { result })
    }

    fn delete<'a>(
        &'a self,
        key: &'a ObjectKey,
        expected: Option<&'a Version>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let mut entries = self.lock();
        let result = if Self::matches(entries.get(key).map(|(_, v)| *v), expected) {
            entries.remove(key);
            Ok(())
        } else {
            Err(StoreError::Conflict)
        };
        drop(entries);
        Box::pin(async move { result })
    }
}
