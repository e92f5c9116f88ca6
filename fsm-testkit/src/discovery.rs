//! Discovery documents: `/version`, `/api`, `/apis`, `/apis/{group}` and the
//! resource lists of each group/version.
//!
//! Served as plain `application/json` (the legacy, unaggregated form): a
//! client that asks for aggregated discovery (`as=APIGroupDiscoveryList`), as
//! `kubectl` does, falls back to it when the response is not aggregated.

use serde_json::{Value, json};

use crate::resources::{Registry, ResourceDef};

/// The Kubernetes version this server claims to be.
pub const KUBERNETES_MINOR: &str = "34";

/// `GET /version`.
#[must_use]
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": KUBERNETES_MINOR,
        "gitVersion": format!("v1.{KUBERNETES_MINOR}.0-fsm-testkit"),
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-08-27T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// `GET /api`.
#[must_use]
pub fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

fn group_json(group: &str, versions: &[String]) -> Value {
    let gv = |v: &String| json!({"groupVersion": format!("{group}/{v}"), "version": v});
    json!({
        "name": group,
        "versions": versions.iter().map(gv).collect::<Vec<_>>(),
        "preferredVersion": versions.first().map(gv).unwrap_or(Value::Null),
    })
}

/// `GET /apis`.
#[must_use]
pub fn api_groups(registry: &Registry) -> Value {
    let groups: Vec<Value> = registry
        .groups()
        .iter()
        .map(|(g, vs)| group_json(g, vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `GET /apis/{group}`, or `None` when the group is not served.
#[must_use]
pub fn api_group(registry: &Registry, group: &str) -> Option<Value> {
    if group.is_empty() || !registry.has_group(group) {
        return None;
    }
    let mut g = group_json(group, &registry.versions(group));
    g["kind"] = json!("APIGroup");
    g["apiVersion"] = json!("v1");
    Some(g)
}

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

fn resource_json(d: &ResourceDef) -> Value {
    let mut r = json!({
        "name": d.plural,
        "singularName": d.singular,
        "namespaced": d.namespaced,
        "kind": d.kind,
        "verbs": VERBS,
    });
    if !d.short_names.is_empty() {
        r["shortNames"] = json!(d.short_names);
    }
    if !d.categories.is_empty() {
        r["categories"] = json!(d.categories);
    }
    r
}

/// `GET /api/v1` or `/apis/{group}/{version}`, or `None` when not served.
#[must_use]
pub fn resource_list(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let defs = registry.resources(group, version);
    if defs.is_empty() {
        return None;
    }
    let mut resources = Vec::new();
    for d in &defs {
        resources.push(resource_json(d));
        if d.status_subresource {
            resources.push(json!({
                "name": format!("{}/status", d.plural),
                "singularName": "",
                "namespaced": d.namespaced,
                "kind": d.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_list_has_status_subresources() {
        let r = Registry::with_builtins();
        let list = resource_list(&r, "", "v1").unwrap();
        assert_eq!(list["groupVersion"], "v1");
        let names: Vec<&str> = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"configmaps"));
        assert!(names.contains(&"pods/status"));
        assert!(!names.contains(&"configmaps/status"));
        assert!(resource_list(&r, "nope.io", "v1").is_none());
    }

    #[test]
    fn groups_have_preferred_versions() {
        let r = Registry::with_builtins();
        let groups = api_groups(&r);
        let apps = groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["name"] == "apps")
            .unwrap();
        assert_eq!(apps["preferredVersion"]["groupVersion"], "apps/v1");
        assert_eq!(api_group(&r, "apps").unwrap()["kind"], "APIGroup");
        assert!(api_group(&r, "").is_none());
    }
}
