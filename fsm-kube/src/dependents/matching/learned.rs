//! What the server made of an applied body: per object of an owner's
//! dependent, the hash of the body last found to change nothing (by a
//! dry-run apply) and the fields the server holds for it, in its normal
//! form. A later converge with the same body compares the live object with
//! that form, and needs no dry run while it matches.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;

/// How many objects the memory holds; past it, it starts over (each
/// forgotten object costs one dry run at its next converge that differs).
pub(crate) const MAX_LEARNED_OBJECTS: usize = 100_000;

/// Which object: owner UID, dependent key, and the object's placement as
/// displayed (`Kind namespace/name`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct LearnedKey {
    pub(crate) owner_uid: String,
    pub(crate) dependent: String,
    pub(crate) object: String,
}

/// The server's normal form of one applied body.
#[derive(Clone, Debug, PartialEq)]
struct Learned {
    body_hash: u64,
    form: Value,
}

/// The hash of an applied body (serialized: the same body, built the same
/// way, hashes the same in one process).
pub(crate) fn body_hash(body: &Value) -> u64 {
    let mut hasher = DefaultHasher::new();
    body.to_string().hash(&mut hasher);
    hasher.finish()
}

/// Per object, the normal form the server gave its applied body. Shared by
/// the clones of a runtime; empty in a new one.
#[derive(Clone, Debug, Default)]
pub(crate) struct LearnedForms {
    forms: Arc<Mutex<HashMap<LearnedKey, Learned>>>,
}

impl LearnedForms {
    fn lock(&self) -> MutexGuard<'_, HashMap<LearnedKey, Learned>> {
        // The map holds plain data: a panic elsewhere leaves it usable.
        self.forms.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The normal form learned for `key`'s body hashing to `body_hash`;
    /// `None` when none was, or for another body.
    pub(crate) fn form(&self, key: &LearnedKey, body_hash: u64) -> Option<Value> {
        self.lock()
            .get(key)
            .filter(|l| l.body_hash == body_hash)
            .map(|l| l.form.clone())
    }

    /// Remembers `form` for `key`'s body hashing to `body_hash`.
    pub(crate) fn remember(&self, key: LearnedKey, body_hash: u64, form: Value) {
        let mut forms = self.lock();
        if forms.len() >= MAX_LEARNED_OBJECTS && !forms.contains_key(&key) {
            forms.clear();
        }
        forms.insert(key, Learned { body_hash, form });
    }

    /// Forgets `key` (its body was applied).
    pub(crate) fn forget(&self, key: &LearnedKey) {
        self.lock().remove(key);
    }

    /// How many objects are remembered.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(object: &str) -> LearnedKey {
        LearnedKey {
            owner_uid: "u1".into(),
            dependent: "app".into(),
            object: object.into(),
        }
    }

    #[test]
    fn a_form_is_found_for_the_same_body_only() {
        let forms = LearnedForms::default();
        let body = json!({"spec": {"cpu": "1000m"}});
        let hash = body_hash(&body);
        assert_eq!(forms.form(&key("a"), hash), None);
        forms.remember(key("a"), hash, json!({"spec": {"cpu": "1"}}));
        assert_eq!(
            forms.form(&key("a"), hash),
            Some(json!({"spec": {"cpu": "1"}}))
        );
        let changed = body_hash(&json!({"spec": {"cpu": "2000m"}}));
        assert_ne!(changed, hash);
        assert_eq!(forms.form(&key("a"), changed), None);
        assert_eq!(forms.form(&key("b"), hash), None);
        forms.forget(&key("a"));
        assert_eq!(forms.form(&key("a"), hash), None);
    }

    #[test]
    fn the_memory_is_bounded() {
        let forms = LearnedForms::default();
        for i in 0..=MAX_LEARNED_OBJECTS {
            forms.remember(key(&i.to_string()), 1, Value::Null);
        }
        assert!(forms.len() <= MAX_LEARNED_OBJECTS);
        assert!(
            forms
                .form(&key(&MAX_LEARNED_OBJECTS.to_string()), 1)
                .is_some()
        );
    }
}
