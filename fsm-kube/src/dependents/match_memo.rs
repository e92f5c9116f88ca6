//! The comparisons that found a cached object matching its desired body,
//! remembered by placement: while neither the object's resourceVersion
//! nor the desired body changes, the next converge skips parsing the
//! cached object and comparing it again (a converged re-sync, or the
//! dependents that did not change while another one rolled out).

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use serde_json::Value;

use super::kind::DependentKind;
use super::object::{Owner, Placement};
use super::wake::hash_serialized;

/// At most this many placements are remembered; past it the memory
/// starts over (a forgotten match costs one comparison).
const CAPACITY: usize = 1_000_000;

/// What the last matching comparison at one placement saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Matched {
    version: u64,
    body: u64,
}

/// The matches of one runtime (shared by its clones), keyed by a hash of
/// the placement: a few dozen bytes per object.
#[derive(Debug, Default)]
pub(crate) struct MatchMemo {
    by_place: Mutex<HashMap<u64, Matched>>,
}

fn place_key(place: &Placement) -> u64 {
    let mut hasher = DefaultHasher::new();
    place.hash(&mut hasher);
    hasher.finish()
}

/// A hash of a desired body's JSON (as it is written, without building
/// the text).
#[cfg(test)]
pub(crate) fn body_hash(body: &Value) -> u64 {
    let mut hasher = DefaultHasher::new();
    hash_serialized(&mut hasher, body);
    hasher.finish()
}

/// A hash of everything the body applied for `object` is made of (see
/// [`applied_at`](super::object::applied_at)): the desired object, its
/// kind, its owner, its dependent's key and whether it is kept on prune.
/// Two equal hashes mean the same applied body, without building it: a
/// converge of an unchanged dependent neither copies nor hashes the whole
/// applied body.
pub(crate) fn desired_hash(
    object: &Value,
    kind: &DependentKind,
    owner: &Owner,
    key: &str,
    kept: bool,
) -> u64 {
    let mut hasher = DefaultHasher::new();
    hash_serialized(&mut hasher, object);
    (
        &kind.resource.api_version,
        &kind.resource.kind,
        kind.namespaced,
    )
        .hash(&mut hasher);
    owner.hash(&mut hasher);
    (key, kept).hash(&mut hasher);
    hasher.finish()
}

impl MatchMemo {
    /// Whether the object at `place`, at `version`, was found matching a
    /// desired body hashing to `body`.
    pub fn holds(&self, place: &Placement, version: u64, body: u64) -> bool {
        self.by_place
            .lock()
            .map(|m| m.get(&place_key(place)) == Some(&Matched { version, body }))
            .unwrap_or(false)
    }

    /// Notes that the object at `place`, at `version`, matched a desired
    /// body hashing to `body`.
    pub fn note(&self, place: &Placement, version: u64, body: u64) {
        if let Ok(mut by_place) = self.by_place.lock() {
            let key = place_key(place);
            if by_place.len() >= CAPACITY && !by_place.contains_key(&key) {
                by_place.clear();
            }
            by_place.insert(key, Matched { version, body });
        }
    }

    /// How many placements are remembered.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_place.lock().map(|m| m.len()).unwrap_or(0)
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

    #[test]
    fn a_match_holds_for_the_same_version_and_body_only() {
        let memo = MatchMemo::default();
        let body = body_hash(&json!({"data": {"k": "v"}}));
        assert!(!memo.holds(&place("a"), 7, body));
        memo.note(&place("a"), 7, body);
        assert!(memo.holds(&place("a"), 7, body));
        assert!(!memo.holds(&place("a"), 8, body), "a newer object");
        let other = body_hash(&json!({"data": {"k": "w"}}));
        assert!(!memo.holds(&place("a"), 7, other), "another body");
        assert!(!memo.holds(&place("b"), 7, body), "another place");
        memo.note(&place("a"), 9, other);
        assert!(!memo.holds(&place("a"), 7, body), "replaced");
        assert_eq!(memo.len(), 1);
    }

    #[test]
    fn bodies_hash_by_their_content() {
        let a = json!({"x": [1, "2", null, true], "y": {"z": 1.5}});
        assert_eq!(body_hash(&a), body_hash(&a.clone()));
        for other in [
            json!({"x": [1, "2", null, false], "y": {"z": 1.5}}),
            json!({"x": ["1", "2", null, true], "y": {"z": 1.5}}),
            json!({"x": [1, "2", null, true], "y": {"z": 1.5}, "w": null}),
            json!({"x": [[1, "2"], null, true], "y": {"z": 1.5}}),
        ] {
            assert_ne!(body_hash(&a), body_hash(&other), "{other}");
        }
    }
}
