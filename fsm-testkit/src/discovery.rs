//! Discovery documents: `/version`, `/api`, `/apis`, `/apis/{group}` and the
//! resource lists of each group/version.
//!
//! `/api` and `/apis` are also served as aggregated discovery
//! (`apidiscovery.k8s.io/v2` `APIGroupDiscoveryList`) to clients that ask for
//! it first in `Accept`, as `kubectl` does: two requests instead of one per
//! group/version. Everyone else gets the legacy documents.

use serde_json::{Value, json};

use crate::resources::{Registry, ResourceDef};
use crate::reviews;

/// The served groups, each with its versions (preferred first): the
/// registry's, then those of the review resources (which store nothing,
/// see [`crate::reviews`]).
fn groups(registry: &Registry) -> Vec<(String, Vec<String>)> {
    let mut groups = registry.groups();
    for r in reviews::REVIEWS {
        match groups.iter_mut().find(|(g, _)| g == r.group) {
            Some((_, versions)) if !versions.iter().any(|v| v == r.version) => {
                versions.push(r.version.into());
            }
            Some(_) => {}
            None => groups.push((r.group.into(), vec![r.version.into()])),
        }
    }
    groups
}

/// Whether `/apis/{group}` is served: a group of a registered resource or
/// of an access review. Below an unserved group the real server has no
/// handler at all (its answer is a plain "404 page not found").
#[must_use]
pub fn serves_group(registry: &Registry, group: &str) -> bool {
    registry.has_group(group) || reviews::REVIEWS.iter().any(|r| r.group == group)
}

/// What the server serves besides resources, as the root path lists it
/// (`GET /`): the discovery paths of every served group and version, the
/// health checks, OpenAPI and the version, sorted.
#[must_use]
pub fn root_paths(registry: &Registry) -> Value {
    let groups = groups(registry);
    let served = groups.iter().map(|(g, v)| (g.as_str(), v.as_slice()));
    path_listing(&["/api", "/api/v1", "/openapi/v3"], served)
}

/// The body of a 404 for a path outside `/api`, `/apis` and the other
/// served paths: a listing like [`root_paths`]', but of what the real
/// server's last handler in its chain serves (the CRD API's: `/apis`, its
/// own group, health, OpenAPI and version), not the core APIs.
#[must_use]
pub fn not_found_paths(registry: &Registry) -> Value {
    const CRDS: &str = "apiextensions.k8s.io";
    let versions = if registry.has_group(CRDS) {
        registry.versions(CRDS)
    } else {
        Vec::new()
    };
    let served = (!versions.is_empty()).then_some((CRDS, versions.as_slice()));
    path_listing(&[], served)
}

/// A `{"paths": [...]}` listing, sorted: `/apis`, health and its checks,
/// OpenAPI v2 and the version, then `extra`, and each group of `groups`
/// with its versions.
fn path_listing<'g>(
    extra: &[&str],
    groups: impl IntoIterator<Item = (&'g str, &'g [String])>,
) -> Value {
    let mut paths: Vec<String> = ["/apis", "/apis/", "/openapi/v2", "/version"]
        .iter()
        .chain(extra)
        .map(|p| (*p).to_owned())
        .collect();
    for check in ["/healthz", "/livez", "/readyz"] {
        paths.push(check.to_owned());
        for part in HEALTH_CHECKS {
            paths.push(format!("{check}/{part}"));
        }
    }
    for (group, versions) in groups {
        paths.push(format!("/apis/{group}"));
        for version in versions {
            paths.push(format!("/apis/{group}/{version}"));
        }
    }
    paths.sort();
    paths.dedup();
    json!({ "paths": paths })
}

/// The named checks under `/healthz`, `/livez` and `/readyz` (each `ok`
/// here; the real server has these and more).
pub const HEALTH_CHECKS: [&str; 3] = ["etcd", "log", "ping"];

/// The minor version of Kubernetes 1.x this server claims to be (its
/// `/version` and discovery say `1.34`).
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
    let groups: Vec<Value> = groups(registry)
        .iter()
        .map(|(g, vs)| group_json(g, vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `GET /apis/{group}`, or `None` when the group is not served.
#[must_use]
pub fn api_group(registry: &Registry, group: &str) -> Option<Value> {
    let (_, versions) = groups(registry).into_iter().find(|(g, _)| g == group)?;
    let mut g = group_json(group, &versions);
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

/// The verbs of custom resources, in the order the real server lists them.
const CUSTOM_VERBS: [&str; 8] = [
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "create",
    "update",
    "watch",
];

fn verbs(d: &ResourceDef) -> [&'static str; 8] {
    if d.custom { CUSTOM_VERBS } else { VERBS }
}

fn resource_json(d: &ResourceDef) -> Value {
    let mut r = json!({
        "name": d.plural,
        "singularName": d.singular,
        "namespaced": d.namespaced,
        "kind": d.kind,
        "verbs": verbs(d),
        "storageVersionHash": d.storage_version_hash,
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
    let review_resources = reviews::of(group, version);
    if defs.is_empty() && review_resources.is_empty() {
        return None;
    }
    let mut resources = Vec::new();
    for d in &defs {
        resources.push(resource_json(d));
        let status = d.status_subresource.then(|| {
            json!({
                "name": format!("{}/status", d.plural),
                "singularName": "",
                "namespaced": d.namespaced,
                "kind": d.kind,
                "verbs": ["get", "patch", "update"],
            })
        });
        let scale = d.scale.as_ref().map(|_| {
            json!({
                "name": format!("{}/scale", d.plural),
                "singularName": "",
                "namespaced": d.namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": ["get", "patch", "update"],
            })
        });
        // Built-in resources are listed by name; a CRD's status comes
        // before its scale.
        let (first, second) = if d.custom {
            (status, scale)
        } else {
            (scale, status)
        };
        resources.extend(first.into_iter().chain(second));
    }
    resources.extend(review_resources.iter().map(reviews::discovery_entry));
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

/// The `Content-Type` of aggregated discovery documents.
pub const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether an `Accept` header prefers aggregated discovery (v2).
#[must_use]
pub fn wants_aggregated(accept: &str) -> bool {
    accept.split(',').next().is_some_and(|first| {
        let params: Vec<&str> = first.split(';').map(str::trim).collect();
        params.contains(&"as=APIGroupDiscoveryList")
            && params.contains(&"v=v2")
            && params.contains(&"g=apidiscovery.k8s.io")
    })
}

fn aggregated_resource(d: &ResourceDef) -> Value {
    let kind = json!({"group": d.group, "version": d.version, "kind": d.kind});
    let mut r = json!({
        "resource": d.plural,
        "responseKind": kind,
        "scope": if d.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": d.singular,
        "verbs": verbs(d),
    });
    if !d.short_names.is_empty() {
        r["shortNames"] = json!(d.short_names);
    }
    if !d.categories.is_empty() {
        r["categories"] = json!(d.categories);
    }
    let mut subresources = Vec::new();
    if d.status_subresource {
        subresources.push(json!({
            "subresource": "status",
            "responseKind": kind,
            "verbs": ["get", "patch", "update"],
        }));
    }
    if d.scale.is_some() {
        subresources.push(json!({
            "subresource": "scale",
            "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
            "verbs": ["get", "patch", "update"],
        }));
    }
    if !subresources.is_empty() {
        r["subresources"] = json!(subresources);
    }
    r
}

fn aggregated_group(group: &str, versions: &[String], registry: &Registry) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| {
            let resources: Vec<Value> = registry
                .resources(group, v)
                .iter()
                .map(|d| aggregated_resource(d))
                .chain(reviews::of(group, v).iter().map(reviews::aggregated_entry))
                .collect();
            json!({"version": v, "resources": resources, "freshness": "Current"})
        })
        .collect();
    let mut g = json!({"metadata": {}, "versions": versions});
    if !group.is_empty() {
        g["metadata"]["name"] = json!(group);
    }
    g
}

/// Aggregated discovery: the core group for `/api` (`core = true`), every
/// other group for `/apis`.
#[must_use]
pub fn aggregated(registry: &Registry, core: bool) -> Value {
    let items: Vec<Value> = if core {
        vec![aggregated_group("", &registry.versions(""), registry)]
    } else {
        groups(registry)
            .iter()
            .map(|(g, versions)| aggregated_group(g, versions, registry))
            .collect()
    };
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_list_has_status_subresources() {
        let r = crate::builtins::registry();
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
        let r = crate::builtins::registry();
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

    #[test]
    fn review_resources_are_listed_create_only() {
        let r = crate::builtins::registry();
        let names: Vec<Value> = api_groups(&r)["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].clone())
            .collect();
        assert!(names.contains(&json!("authentication.k8s.io")));
        assert!(names.contains(&json!("authorization.k8s.io")));
        assert_eq!(
            api_group(&r, "authorization.k8s.io").unwrap()["preferredVersion"]["version"],
            "v1"
        );
        let list = resource_list(&r, "authentication.k8s.io", "v1").unwrap();
        assert_eq!(
            list["resources"],
            json!([{"name": "tokenreviews", "singularName": "", "namespaced": false,
                    "kind": "TokenReview", "verbs": ["create"]}])
        );
        let aggregated = aggregated(&r, false);
        let authz = aggregated["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["metadata"]["name"] == "authorization.k8s.io")
            .unwrap();
        let names: Vec<&Value> = authz["versions"][0]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| &r["resource"])
            .collect();
        assert_eq!(
            names,
            [
                "localsubjectaccessreviews",
                "selfsubjectaccessreviews",
                "selfsubjectrulesreviews",
                "subjectaccessreviews"
            ]
        );
        assert_eq!(authz["versions"][0]["resources"][0]["scope"], "Namespaced");
    }
    #[test]
    fn aggregated_documents() {
        assert!(wants_aggregated(
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
        ));
        assert!(!wants_aggregated(
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
        ));
        assert!(!wants_aggregated("application/json, */*"));
        let r = crate::builtins::registry();
        let core = aggregated(&r, true);
        assert_eq!(core["items"].as_array().unwrap().len(), 1);
        assert!(core["items"][0]["metadata"].get("name").is_none());
        let pods = core["items"][0]["versions"][0]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["resource"] == "pods")
            .unwrap();
        assert_eq!(pods["scope"], "Namespaced");
        assert_eq!(pods["subresources"][0]["subresource"], "status");
        let groups = aggregated(&r, false);
        assert!(
            groups["items"]
                .as_array()
                .unwrap()
                .iter()
                .any(|g| g["metadata"]["name"] == "apps")
        );
    }
}
