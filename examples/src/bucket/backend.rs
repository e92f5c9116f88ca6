//! The storage service buckets are made in: a fake here, counting what
//! it was asked to make, so that the tests can tell a bucket made twice.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// The buckets the service holds, by name, and how often each was asked
/// for.
#[derive(Debug, Default)]
pub struct Backend {
    created: Mutex<BTreeMap<String, u32>>,
}

impl Backend {
    /// Makes bucket `name` (a real service would be called here).
    pub fn create(&self, name: &str) {
        let mut created = self.created.lock().unwrap_or_else(|e| e.into_inner());
        *created.entry(name.to_owned()).or_default() += 1;
    }

    /// How often each bucket was asked for.
    pub fn creations(&self) -> BTreeMap<String, u32> {
        self.created
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}
