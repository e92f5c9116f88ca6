//! JSON patches that cannot be applied, as 1.20 answers them: 422 Invalid
//! with Go's generic message and empty details, whatever failed (a missing
//! path, a failed `test`, an unknown `op`); a `replace` of a missing key
//! of an object adds it (evanphx/json-patch 4.9).

use integration_tests::{Fallible, Scene};
use serde_json::json;

/// Each failing patch's Status, and what a `replace` of a missing key did.
pub async fn json_patch_failures(s: &mut Scene) -> Fallible {
    let path = s.core("configmaps");
    s.post(
        &path,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
               "data": {"a": "b"}}),
    )
    .await?
    .expect(201)?;
    let target = format!("{path}/c");
    let json_patch = "application/json-patch+json";
    for (label, patch) in [
        (
            "remove missing",
            json!([{"op": "remove", "path": "/spec/nope"}]),
        ),
        (
            "test fails",
            json!([{"op": "test", "path": "/data/a", "value": "c"}]),
        ),
        (
            "add below missing",
            json!([{"op": "add", "path": "/data/zz/x", "value": "c"}]),
        ),
        (
            "move missing",
            json!([{"op": "move", "from": "/data/q", "path": "/data/r"}]),
        ),
        ("unknown op", json!([{"op": "bogus", "path": "/data/a"}])),
        ("not a list", json!({"op": "add"})),
    ] {
        let reply = s.patch(&target, json_patch, patch).await?;
        s.record(label, &reply);
    }
    let replaced = s
        .patch(
            &target,
            json_patch,
            json!([{"op": "replace", "path": "/data/zz", "value": "c"}]),
        )
        .await?
        .expect(200)?;
    s.record("replace of a missing key", &replaced.body["data"]);
    Ok(())
}
