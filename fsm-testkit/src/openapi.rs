//! A minimal OpenAPI v3 discovery: the `/openapi/v3` index and, per
//! group/version, a document whose `PATCH` operations declare the
//! `fieldValidation` query parameter for each kind.
//!
//! That is what `kubectl` (1.27+) reads to decide that the server validates
//! fields itself, so `kubectl apply` and `create` work without
//! `--validate=false`. Schemas are not served: requests that need them
//! (`kubectl explain`, client-side strategic merge) are not supported.

use serde_json::{Map, Value, json};

use crate::resources::Registry;

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `GET /openapi/v3`: one entry per served group/version. `hash` changes
/// when the set of resources changes, so clients refetch.
#[must_use]
pub fn index(registry: &Registry, hash: u64) -> Value {
    let mut paths = Map::new();
    let mut add = |group: &str, version: &str| {
        let p = gv_path(group, version);
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={hash:016X}")}),
        );
    };
    add("", "v1");
    for (group, versions) in registry.groups() {
        for v in versions {
            add(&group, &v);
        }
    }
    json!({ "paths": paths })
}

/// `GET /openapi/v3/api/v1` or `/openapi/v3/apis/{group}/{version}`.
#[must_use]
pub fn document(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let defs = registry.resources(group, version);
    if defs.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    let prefix = format!("/{}", gv_path(group, version));
    for d in defs {
        let scope = if d.namespaced {
            "/namespaces/{namespace}"
        } else {
            ""
        };
        let gvk = json!({"group": d.group, "version": d.version, "kind": d.kind});
        let op = json!({
            "operationId": format!("patch{}", d.kind),
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": gvk,
            "parameters": [
                {"name": "dryRun", "in": "query", "schema": {"type": "string"}},
                {"name": "fieldManager", "in": "query", "schema": {"type": "string"}},
                {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
                {"name": "force", "in": "query", "schema": {"type": "boolean"}}
            ],
            "responses": {"200": {"description": "OK"}},
        });
        paths.insert(
            format!("{prefix}{scope}/{}/{{name}}", d.plural),
            json!({ "patch": op }),
        );
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.34.0"},
        "paths": paths,
        "components": {"schemas": {}},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_operations_declare_field_validation() {
        let r = Registry::with_builtins();
        assert!(
            index(&r, 1)["paths"]["apis/apps/v1"]["serverRelativeURL"]
                .as_str()
                .unwrap()
                .starts_with("/openapi/v3/apis/apps/v1?hash=")
        );
        let doc = document(&r, "apps", "v1").unwrap();
        let op = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(op["x-kubernetes-group-version-kind"]["kind"], "Deployment");
        assert!(
            op["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == "fieldValidation")
        );
        assert!(document(&r, "nope.io", "v1").is_none());
    }
}
