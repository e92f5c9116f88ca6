//! How 1.20 names what its schema validation finds inside arrays of a
//! custom resource: by the array's path, without the item's index
//! (go-openapi's names), and with go-openapi's words for lengths and
//! counts (`should be at most 3 chars long`, `should have at most 2
//! items`, the count as the invalid value). One problem per object: the
//! real server lists several in Go's random map order.

use integration_tests::{Fallible, Scene};
use serde_json::{Value, json};

/// A namespaced CRD `Gizmo` whose spec has arrays of objects and strings.
fn crd() -> Value {
    json!({"spec": {
        "scope": "Namespaced",
        "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
        "versions": [{"name": "v1", "served": true, "storage": true,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "properties": {
                    "items": {"type": "array", "maxItems": 2, "minItems": 1, "items": {
                        "type": "object", "required": ["name"], "properties": {
                            "name": {"type": "string", "maxLength": 3, "minLength": 2},
                            "port": {"type": "integer", "minimum": 1},
                            "sub": {"type": "array", "items": {"type": "object",
                                "required": ["x"],
                                "properties": {"x": {"type": "string", "enum": ["a"]}}}}}}},
                    "strs": {"type": "array", "items": {"type": "string", "pattern": "^a"}}}}}}}}]}})
}

/// Each single problem's Status.
pub async fn custom_resource_array_problems(s: &mut Scene) -> Fallible {
    s.install_crd(crd()).await?;
    let path = s.custom("v1", "gizmos");
    let ok = json!({"name": "ab"});
    let cases = [
        ("name too long", json!({"items": [ok, {"name": "toolong"}]})),
        ("name too short", json!({"items": [{"name": "a"}]})),
        (
            "port below minimum",
            json!({"items": [ok, {"name": "ab", "port": 0}]}),
        ),
        (
            "port of the wrong type",
            json!({"items": [{"name": "ab", "port": "x"}]}),
        ),
        ("name missing", json!({"items": [ok, {"port": 1}]})),
        (
            "nested required",
            json!({"items": [{"name": "ab", "sub": [{"x": "a"}, {}]}]}),
        ),
        (
            "nested enum",
            json!({"items": [{"name": "ab", "sub": [{"x": "b"}]}]}),
        ),
        ("too many items", json!({"items": [ok, ok, ok]})),
        ("too few items", json!({"items": []})),
        ("pattern", json!({"strs": ["a", "b"]})),
    ];
    for (i, (label, spec)) in cases.into_iter().enumerate() {
        let body = json!({"apiVersion": format!("{}/v1", s.group()), "kind": "Gizmo",
                          "metadata": {"name": format!("g{i}")}, "spec": spec});
        let reply = s.post(&path, body).await?;
        s.record(
            label,
            json!({"code": reply.code, "causes": reply.body["details"]["causes"]}),
        );
    }
    Ok(())
}
