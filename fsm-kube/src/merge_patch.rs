//! JSON merge patches (RFC 7386) that turn one known document into
//! another: a plain merge patch of the new record would leave behind the
//! fields the new record no longer has (`data` of the state left, a
//! finished compensation's `nextAttemptAt`), since only `null` removes.

use serde_json::{Map, Value};

/// The merge patch that turns `old` into `new`: changed and added fields,
/// `null` for removed ones, nothing for equal ones.
pub(crate) fn diff(old: &Value, new: &Value) -> Value {
    match (old, new) {
        (Value::Object(old), Value::Object(new)) => {
            let mut patch = Map::new();
            for (key, new_value) in new {
                match old.get(key) {
                    Some(old_value) if old_value == new_value => {}
                    Some(old_value @ Value::Object(_)) if new_value.is_object() => {
                        patch.insert(key.clone(), diff(old_value, new_value));
                    }
                    _ => {
                        patch.insert(key.clone(), new_value.clone());
                    }
                }
            }
            for key in old.keys() {
                if !new.contains_key(key) {
                    patch.insert(key.clone(), Value::Null);
                }
            }
            Value::Object(patch)
        }
        // Not both objects: the new value replaces the old one wholesale
        // (a merge patch cannot express a `null` leaf, which records never
        // hold).
        _ => new.clone(),
    }
}

/// Whether merge patch `patch` would change `target`: `false` when the
/// document already holds everything the patch says.
pub(crate) fn changes(target: &Value, patch: &Value) -> bool {
    let mut patched = target.clone();
    apply(&mut patched, patch);
    patched != *target
}

/// Applies merge patch `patch` to `target` (RFC 7386).
pub(crate) fn apply(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(patch) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            if let Value::Object(map) = target {
                for (key, value) in patch {
                    if value.is_null() {
                        map.remove(key);
                    } else {
                        apply(map.entry(key.clone()).or_insert(Value::Null), value);
                    }
                }
            }
        }
        other => *target = other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    #[test]
    fn removed_fields_become_null_and_equal_ones_vanish() {
        let old = json!({"state": "A", "data": {"x": 1}, "attempt": 0, "c": {"a": 1, "b": 2}});
        let new = json!({"state": "B", "attempt": 0, "c": {"a": 1}});
        assert_eq!(
            diff(&old, &new),
            json!({"state": "B", "data": null, "c": {"b": null}})
        );
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            any::<bool>().prop_map(Value::from),
            any::<i32>().prop_map(Value::from),
            "[a-z]{0,3}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
                proptest::collection::btree_map("[a-d]", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn applying_the_diff_gives_the_new_document(old in json_value(), new in json_value()) {
            let mut patched = old.clone();
            apply(&mut patched, &diff(&old, &new));
            prop_assert_eq!(patched, new);
        }
    }
}
