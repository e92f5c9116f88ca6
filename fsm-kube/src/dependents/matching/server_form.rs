//! Reading a dry-run apply: whether the server would leave the live object
//! as it is, and the fields of the applied body in the server's normal
//! form (what [`learned`](super::learned) keeps). Pure.

use serde_json::{Map, Value};

/// Whether `dry_run` (what a dry-run apply answered) is `live` unchanged:
/// every field equal, `managedFields` too (each manager's fields; not
/// their times), but for `resourceVersion` and `status`, which an apply
/// of the main resource does not decide (a read from a cache may be
/// older than the dry run).
pub(crate) fn unchanged_by_apply(live: &Value, dry_run: &Value) -> bool {
    comparable(live) == comparable(dry_run)
}

fn comparable(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(map) = object.as_object_mut() {
        map.remove("status");
    }
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("resourceVersion");
        if let Some(Value::Array(entries)) = metadata.get_mut("managedFields") {
            for entry in entries.iter_mut().filter_map(Value::as_object_mut) {
                entry.remove("time");
            }
        }
    }
    object
}

/// The fields of `body` as `server` holds them: objects key by key as far
/// as `body` names them (a key `body` has and `server` lacks is `null`:
/// the server dropped it, and a live value there is a change); lists and
/// leaves whole, as the server has them (elements other managers added
/// included).
pub(crate) fn normal_form(server: &Value, body: &Value) -> Value {
    match (server, body) {
        (Value::Object(server), Value::Object(body)) => {
            let mut out = Map::new();
            for (key, b) in body {
                let s = server.get(key).unwrap_or(&Value::Null);
                out.insert(key.clone(), normal_form(s, b));
            }
            Value::Object(out)
        }
        (server, _) => server.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_apply_that_changes_nothing_but_times_leaves_the_object_unchanged() {
        let live = json!({"metadata": {"name": "a", "resourceVersion": "5",
            "managedFields": [{"manager": "op", "operation": "Apply", "time": "t1", "fieldsV1": {"f:spec": {}}}]},
            "spec": {"cpu": "1"}, "status": {"ready": 1}});
        let mut dry = live.clone();
        dry["metadata"]["managedFields"][0]["time"] = json!("t2");
        dry["metadata"]["resourceVersion"] = json!("6");
        dry["status"] = json!({"ready": 0});
        assert!(unchanged_by_apply(&live, &dry));
        let mut changed = live.clone();
        changed["spec"]["cpu"] = json!("2");
        assert!(!unchanged_by_apply(&live, &changed));
        let mut owned = live.clone();
        owned["metadata"]["managedFields"][0]["fieldsV1"] = json!({"f:spec": {"f:cpu": {}}});
        assert!(!unchanged_by_apply(&live, &owned), "ownership changes too");
    }

    #[test]
    fn the_normal_form_follows_the_body_and_keeps_lists_whole() {
        let server = json!({"metadata": {"name": "a", "uid": "x"},
            "spec": {"cpu": "1", "env": [{"name": "A"}, {"name": "B", "value": "b"}], "extra": 1}});
        let body = json!({"metadata": {"name": "a"},
            "spec": {"cpu": "1000m", "env": [{"name": "A"}], "paused": false}});
        assert_eq!(
            normal_form(&server, &body),
            json!({"metadata": {"name": "a"},
                "spec": {"cpu": "1", "env": [{"name": "A"}, {"name": "B", "value": "b"}], "paused": null}})
        );
    }
}
