//! The cluster: the resource registry and the store, and the semantics of
//! each verb (defaults, validation, optimistic concurrency, the status
//! subresource, `generation`, finalizers, namespaces and CRDs).
//!
//! Everything here is synchronous and runs under the server's lock, so a
//! verb is atomic; HTTP lives in `handlers`.
//!
//! One module per job: `read` (get, list), `write` (create, update,
//! replace), `apply` (patches and server-side apply), all of whose writes
//! run the one admission chain of `admission`; `delete` and `gc`
//! (deletion, finalizers, the garbage collector), `tokens` (the token
//! controller), `service_accounts` (each namespace's `default` account),
//! `scale` (the `scale` subresource), `storage_protection` (the
//! finalizers of claims and volumes),
//! `crd_controller` (what a CRD's write changes), and the
//! helpers they share: `meta`, `metadata_rules`, `ownership`, `ids`,
//! `paging`.

mod admission;
mod apply;
mod crd_controller;
mod delete;
mod delete_options;
mod gc;
mod ids;
mod meta;
mod metadata_rules;
mod ownership;
mod paging;
mod read;
mod scale;
mod service_accounts;
mod storage_protection;
mod tokens;
mod write;

use serde_json::{Value, json};

use crate::resources::{GroupResource, Registry, ResourceDef};
use crate::selectors::{FieldSelector, LabelSelector};
use crate::status::{ApiError, Subject};
use crate::store::Store;
use crate::time::timestamp;

use ids::IdSource;
pub(crate) use paging::parse_resource_version;
pub use paging::{ReadAt, ReadOptions};

pub use gc::Propagation;

/// Which part of an object a write targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The object itself (status is ignored when the status subresource exists).
    Main,
    /// The `status` subresource (only status changes).
    Status,
}

/// Options of a list (and of a delete-collection).
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
    /// `limit` (0 or absent: no limit).
    pub limit: Option<usize>,
    /// `continue`, as returned by a previous page.
    pub continue_token: Option<String>,
    /// The revision to list at (`resourceVersion`, `resourceVersionMatch`).
    pub at: ReadAt,
}

/// `DeleteOptions` the server honours.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
    /// `dryRun: ["All"]`.
    pub dry_run: bool,
    /// `propagationPolicy` (or the deprecated `orphanDependents: true`);
    /// `None` is the default, background.
    pub propagation: Option<Propagation>,
    /// `gracePeriodSeconds` (accepted; objects here have no grace period).
    pub grace_period_seconds: Option<i64>,
}

/// How a write records field ownership in `metadata.managedFields`.
#[derive(Debug, Clone, PartialEq)]
pub enum Ownership<'a> {
    /// A write of the server itself: no manager; fields it removes leave
    /// every entry.
    Internal,
    /// A create, update or patch by this field manager (operation `Update`).
    Update(&'a str),
    /// A server-side apply: the `managedFields` it computed.
    Applied(Value),
}

/// How a request patches: its field manager and `force`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PatchOptions {
    /// `fieldManager` (required for server-side apply), else the client's
    /// User-Agent up to its first `/`.
    pub field_manager: Option<String>,
    /// `force`: take the fields other managers own (server-side apply).
    pub force: bool,
}

/// The registry and the store, with the API's write semantics.
#[derive(Debug)]
pub struct Cluster {
    /// Served resources.
    pub registry: Registry,
    /// Stored objects.
    pub store: Store,
    ids: IdSource,
    sequence: u64,
    /// How many stored objects the garbage collector has examined for
    /// dangling owner references ([`Cluster::garbage_collector_checks`]).
    gc_checks: u64,
}

const NAMESPACE_GR: (&str, &str) = ("", "namespaces");
const CRD_GROUP: &str = "apiextensions.k8s.io";
/// Namespaces the real server refuses to delete.
const PROTECTED_NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];

fn namespaces() -> GroupResource {
    GroupResource {
        group: NAMESPACE_GR.0.into(),
        resource: NAMESPACE_GR.1.into(),
    }
}

fn crds() -> GroupResource {
    GroupResource {
        group: CRD_GROUP.into(),
        resource: "customresourcedefinitions".into(),
    }
}

impl Cluster {
    /// A cluster with the built-in resources and the `default` and
    /// `kube-system` namespaces.
    #[must_use]
    pub fn new(history_limit: usize, channel_capacity: usize, seed: u64) -> Self {
        let mut c = Self {
            registry: crate::builtins::registry(),
            store: Store::new(history_limit, channel_capacity),
            ids: IdSource(seed),
            sequence: 0,
            gc_checks: 0,
        };
        let now = jiff::Timestamp::now();
        for ns in ["default", "kube-system", "kube-public"] {
            let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
            if let Some(def) = c.registry.get("", "v1", "namespaces") {
                // Creating a fixed, valid namespace in an empty store cannot fail.
                if let Err(e) = c.create(&def, "", body, false, now) {
                    tracing::error!(error = %e, "creating initial namespace");
                }
            }
        }
        c
    }
}

/// `object` as `def`'s group/version presents it (no conversion: the
/// versions of a custom resource share one schema here).
#[must_use]
pub(crate) fn present(def: &ResourceDef, object: &Value) -> Value {
    if crate::events::is_events_api(def) {
        return crate::events::present(def, object);
    }
    let mut o = object.clone();
    if let Some(m) = o.as_object_mut() {
        m.insert("apiVersion".into(), json!(def.api_version()));
        m.insert("kind".into(), json!(def.kind));
    }
    o
}

/// An item of a list: built-in lists carry no apiVersion/kind on their
/// items (the real server's typed lists), custom resource lists do.
#[must_use]
pub(crate) fn list_item(def: &ResourceDef, object: &Value) -> Value {
    let mut o = present(def, object);
    if !def.custom
        && let Some(m) = o.as_object_mut()
    {
        m.remove("apiVersion");
        m.remove("kind");
    }
    o
}

fn not_found(def: &ResourceDef, name: &str) -> ApiError {
    ApiError::NotFound(Subject::new(&def.group, &def.plural, name))
}

fn conflict(def: &ResourceDef, name: &str) -> ApiError {
    ApiError::Conflict(
        Subject::new(&def.group, &def.plural, name),
        "the object has been modified; please apply your changes to the latest version and try again".into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_800_000_000).unwrap()
    }

    fn cluster() -> Cluster {
        Cluster::new(100, 16, 7)
    }

    fn def(c: &Cluster, g: &str, p: &str) -> std::sync::Arc<ResourceDef> {
        c.registry.get(g, "v1", p).unwrap()
    }

    #[test]
    fn starts_with_namespaces() {
        let c = cluster();
        let ns = def(&c, "", "namespaces");
        assert_eq!(
            c.get(&ns, "", "default").unwrap()["status"]["phase"],
            "Active"
        );
        assert!(c.get(&ns, "", "kube-system").is_ok());
    }

    #[test]
    fn create_fills_metadata_and_generate_name() {
        let mut c = cluster();
        let d = def(&c, "apps", "deployments");
        let body = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"generateName": "web-"}, "status": {"x": 1},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}});
        let o = c.create(&d, "default", body, false, now()).unwrap();
        let name = o["metadata"]["name"].as_str().unwrap();
        assert!(name.starts_with("web-") && name.len() == 9, "{name}");
        assert_eq!(o["metadata"]["generation"], 1);
        assert_eq!(o["metadata"]["namespace"], "default");
        assert_eq!(o["metadata"]["uid"].as_str().unwrap().len(), 36);
        assert_eq!(o["metadata"]["creationTimestamp"], "2027-01-15T08:00:00Z");
        assert_eq!(
            o["status"],
            json!({}),
            "the status sent is dropped on create: a new Deployment's is empty"
        );
        assert_eq!(o["spec"]["strategy"]["type"], "RollingUpdate", "defaulted");
    }

    #[test]
    fn update_rules_for_status_and_generation() {
        let mut c = cluster();
        let d = def(&c, "apps", "deployments");
        let body = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}});
        let o = c.create(&d, "default", body, false, now()).unwrap();
        // Main write: status ignored, spec change bumps generation.
        let mut w = o.clone();
        w["spec"]["replicas"] = json!(2);
        w["status"] = json!({"readyReplicas": 5});
        let u = c
            .update(&d, "default", "web", w, Part::Main, false, now())
            .unwrap();
        assert_eq!(u["metadata"]["generation"], 2);
        assert_eq!(u["status"], json!({}), "the status sent is ignored");
        // Status write: only status changes, generation stays.
        let mut s = u.clone();
        s["spec"]["replicas"] = json!(9);
        // (Not more ready than replicas: 1.20 refuses that status.)
        s["status"] = json!({"replicas": 2, "readyReplicas": 2});
        let u2 = c
            .update(&d, "default", "web", s, Part::Status, false, now())
            .unwrap();
        assert_eq!(u2["spec"]["replicas"], 2);
        assert_eq!(u2["status"]["readyReplicas"], 2);
        assert_eq!(u2["metadata"]["generation"], 2);
        // Metadata-only change: no generation bump.
        let mut m = u2.clone();
        m["metadata"]["labels"] = json!({"a": "b"});
        let u3 = c
            .update(&d, "default", "web", m, Part::Main, false, now())
            .unwrap();
        assert_eq!(u3["metadata"]["generation"], 2);
        // Stale write conflicts.
        let e = c
            .update(&d, "default", "web", o, Part::Main, false, now())
            .unwrap_err();
        assert_eq!(e.reason(), "Conflict");
    }

    #[test]
    fn an_update_sending_what_the_defaults_add_changes_nothing() {
        let mut c = cluster();
        let d = def(&c, "apps", "deployments");
        let body = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"a": "b"}},
                "template": {"metadata": {"labels": {"a": "b"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}});
        let o = c.create(&d, "default", body.clone(), false, now()).unwrap();
        let mut again = body;
        again["metadata"]["resourceVersion"] = o["metadata"]["resourceVersion"].clone();
        let u = c
            .update(&d, "default", "web", again, Part::Main, false, now())
            .unwrap();
        assert_eq!(u["metadata"]["generation"], 1);
        assert_eq!(
            u["metadata"]["resourceVersion"],
            o["metadata"]["resourceVersion"]
        );
        assert_eq!(u["spec"]["replicas"], 1);
    }

    #[test]
    fn no_op_update_writes_nothing() {
        let mut c = cluster();
        let d = def(&c, "", "configmaps");
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
        let o = c.create(&d, "default", body, false, now()).unwrap();
        let rev = c.store.revision();
        let u = c
            .update(&d, "default", "a", o.clone(), Part::Main, false, now())
            .unwrap();
        assert_eq!(u, o);
        assert_eq!(c.store.revision(), rev);
    }

    #[test]
    fn paging_with_continue() {
        let mut c = cluster();
        let cm = def(&c, "", "configmaps");
        for i in 0..5 {
            let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("c{i}")}});
            c.create(&cm, "default", body, false, now()).unwrap();
        }
        let mut q = ListQuery {
            limit: Some(2),
            ..ListQuery::default()
        };
        let mut names = Vec::new();
        loop {
            let page = c.list(&cm, Some("default"), &q).unwrap();
            for i in page["items"].as_array().unwrap() {
                names.push(i["metadata"]["name"].as_str().unwrap().to_string());
            }
            match page["metadata"]["continue"].as_str() {
                Some(t) => q.continue_token = Some(t.into()),
                None => break,
            }
        }
        assert_eq!(names, vec!["c0", "c1", "c2", "c3", "c4"]);
        q.continue_token = Some("zz".into());
        assert_eq!(c.list(&cm, None, &q).unwrap_err().reason(), "BadRequest");
    }
}
