//! OpenAPI: what `/openapi/v2` publishes for a CRD's kinds (and a built-in
//! kind), as `kubectl explain` and client-side validation read it.
//!
//! Only v2 is compared: 1.20 serves no `/openapi/v3`.

use integration_tests::scene::eventually;
use integration_tests::{Fallible, Scene};
use serde_json::{Value, json};

/// A `Gizmo` with two served versions, descriptions, and the schema
/// constructs v2 writes differently (`nullable`, preserved unknown fields,
/// int-or-string, an embedded resource).
fn gizmo_crd() -> Value {
    json!({
        "metadata": {},
        "spec": {
            "scope": "Namespaced",
            "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo", "listKind": "GizmoList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": "A Gizmo is a test kind.",
                    "properties": {
                        "spec": {
                            "type": "object",
                            "description": "The desired gizmo.",
                            "required": ["color", "note"],
                            "properties": {
                                "color": {"type": "string", "description": "The gizmo's color.", "enum": ["red", "blue"]},
                                "size": {"type": "integer", "minimum": 1, "description": "How big."},
                                "note": {"type": "string", "nullable": true},
                                "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                                "port": {"x-kubernetes-int-or-string": true},
                                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                                "inner": {"type": "object", "x-kubernetes-embedded-resource": true,
                                          "properties": {"spec": {"type": "object", "properties": {"x": {"type": "string"}}}}}
                            }
                        },
                        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
                    }
                }}
            }, {
                "name": "v2", "served": true, "storage": false,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": {"type": "object", "properties": {
                        "shade": {"type": "string", "description": "The v2 shade."}
                    }}}
                }}
            }]
        }
    })
}

/// The `/openapi/v2` definitions of a CRD's kinds in both versions: names
/// (`<reversed group>.<version>.<Kind>`), properties, types, descriptions,
/// `x-kubernetes-*` extensions and the GVK; and a built-in kind's shape.
pub async fn openapi_v2_definitions(s: &mut Scene) -> Fallible {
    s.install_crd(gizmo_crd()).await?;
    let reversed: Vec<String> = s.group().split('.').rev().map(String::from).collect();
    let prefix = reversed.join(".");
    let names = [
        format!("{prefix}.v1.Gizmo"),
        format!("{prefix}.v1.GizmoList"),
        format!("{prefix}.v2.Gizmo"),
        format!("{prefix}.v2.GizmoList"),
    ];
    // The real server publishes a new CRD's definitions a moment later.
    let doc = eventually("the CRD's OpenAPI definitions", 60, async || {
        let doc = s.get("/openapi/v2").await?.expect(200)?.body;
        let defs = &doc["definitions"];
        Ok(names.iter().all(|n| defs.get(n).is_some()).then_some(doc))
    })
    .await?;
    let defs = &doc["definitions"];
    for n in &names {
        let def = &defs[n];
        assert!(
            def["x-kubernetes-group-version-kind"].is_array(),
            "{n}: {def}"
        );
        s.record(
            format!("definition {}", n.replacen(&prefix, "<group>", 1)),
            def,
        );
    }
    assert_eq!(
        defs[&names[0]]["properties"]["metadata"]["$ref"],
        "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    );

    // A built-in kind: its properties and their types, and its GVK (the
    // descriptions are those of each version's Go types).
    let shape = |def: &Value| -> Value {
        let props = def["properties"].as_object().cloned().unwrap_or_default();
        let props: serde_json::Map<String, Value> = props
            .into_iter()
            .map(|(k, v)| {
                (
                    k,
                    json!({"type": v["type"], "$ref": v["$ref"], "format": v["format"]}),
                )
            })
            .collect();
        json!({"type": def["type"], "properties": props, "gvk": def["x-kubernetes-group-version-kind"]})
    };
    let deployment = &defs["io.k8s.api.apps.v1.Deployment"];
    assert_eq!(
        deployment["x-kubernetes-group-version-kind"],
        json!([{"group": "apps", "kind": "Deployment", "version": "v1"}])
    );
    s.record("Deployment", shape(deployment));
    s.record("ConfigMap", shape(&defs["io.k8s.api.core.v1.ConfigMap"]));
    let replicas = &defs["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["replicas"];
    s.record("DeploymentSpec.replicas", replicas);
    Ok(())
}

/// `fieldValidation` on create: `Strict` refuses unknown fields (newer
/// servers; 1.20 does not know the parameter and prunes them, a version
/// difference), `Ignore` and the default drop them silently on both.
pub async fn field_validation_of_unknown_fields(s: &mut Scene) -> Fallible {
    s.install_crd(gizmo_crd()).await?;
    let gizmos = s.custom("v1", "gizmos");
    let api_version = format!("{}/v1", s.group());
    let gizmo = |name: &str| {
        json!({
            "apiVersion": api_version, "kind": "Gizmo",
            "metadata": {"name": name},
            "spec": {"color": "red", "note": "n", "colour": "blue"},
        })
    };
    let strict = s
        .post(&format!("{gizmos}?fieldValidation=Strict"), gizmo("strict"))
        .await?;
    s.record_known(
        "strict create of a custom resource",
        json!({"code": strict.code, "reason": strict.reason()}),
        crate::conformance::known::VERSION_FIELD_VALIDATION,
    );
    for (label, query) in [("ignore", "?fieldValidation=Ignore"), ("default", "")] {
        let reply = s
            .post(&format!("{gizmos}{query}"), gizmo(label))
            .await?
            .expect(201)?;
        assert!(reply.body["spec"].get("colour").is_none(), "{}", reply.body);
        s.record(format!("{label} create: spec"), &reply.body["spec"]);
    }
    let configmaps = s.core("configmaps");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "strict"},
                    "data": {"a": "b"}, "datta": {"c": "d"}});
    let strict = s
        .post(&format!("{configmaps}?fieldValidation=Strict"), cm.clone())
        .await?;
    s.record_known(
        "strict create of a ConfigMap",
        json!({"code": strict.code, "reason": strict.reason()}),
        crate::conformance::known::VERSION_FIELD_VALIDATION,
    );
    let mut cm = cm;
    cm["metadata"]["name"] = json!("ignored");
    let reply = s
        .post(&format!("{configmaps}?fieldValidation=Ignore"), cm)
        .await?
        .expect(201)?;
    assert!(reply.body.get("datta").is_none(), "{}", reply.body);
    s.record("ignore create of a ConfigMap: data", &reply.body["data"]);

    // Merge patches: the unknown field is dropped by default, refused
    // under Strict (newer servers).
    let path = format!("{configmaps}/ignored");
    let reply = s
        .merge(&path, json!({"data": {"x": "y"}, "datta": {"c": "d"}}))
        .await?
        .expect(200)?;
    assert!(reply.body.get("datta").is_none(), "{}", reply.body);
    s.record("merge patch of a ConfigMap: data", &reply.body["data"]);
    let strict = s
        .merge(
            &format!("{path}?fieldValidation=Strict"),
            json!({"datta": {"c": "d"}}),
        )
        .await?;
    s.record_known(
        "strict merge patch of a ConfigMap",
        json!({"code": strict.code, "reason": strict.reason()}),
        crate::conformance::known::VERSION_FIELD_VALIDATION,
    );
    Ok(())
}
