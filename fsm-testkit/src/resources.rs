//! The registry of resources the server serves: the built-in kinds (see
//! `builtins`, their table), and the custom resources that
//! `CustomResourceDefinition`s add at run time.

use std::collections::BTreeMap;
use std::sync::Arc;

/// How object names of a resource are validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// An RFC 1123 subdomain (most resources).
    Subdomain,
    /// An RFC 1123 label (namespaces).
    Label,
    /// An RFC 1035 label (services).
    Label1035,
    /// A path segment: anything but `.`, `..` or a name containing `/` or
    /// `%` (RBAC roles and bindings, e.g. `system:controller:x`).
    PathSegment,
}

/// An `additionalPrinterColumns` entry (or a built-in column) for tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrinterColumn {
    /// Column header.
    pub name: String,
    /// OpenAPI type: `string`, `integer`, `number`, `boolean` or `date`;
    /// built-in kinds also use `count`: an integer counting the entries of
    /// the maps or lists at `json_path` (comma-separated paths), and
    /// `roleRef`: a string `Kind/name` from the `roleRef` at `json_path`,
    /// `timestamp`: a `date` column printing the time itself, not an age,
    /// and `subjects:KIND`: the names of a binding's subjects of that kind
    /// (`namespace/name` for service accounts), printed after AGE; `ratio`:
    /// `a/b` of the two integers at `json_path` (`.x,.y`, absent as 0);
    /// `int0`: an integer, absent as 0; `externalIPs` (of a Service's
    /// spec) and `ports` (a Service's): as the real printer; `podReady`,
    /// `podStatus`, `podRestarts`: a Pod's, from its container statuses;
    /// `orNone` (a string, `<none>` when absent) and `readinessGates`:
    /// printed after AGE with `-o wide`; `containers`, `images`: a pod
    /// template's container names or images and `selector`: a label
    /// selector, printed after AGE with `-o wide` (priority 1).
    pub type_: String,
    /// A simple JSONPath (`.spec.replicas`) into the object; for type
    /// `roleRef`, the path of a `roleRef`, printed `Kind/name`.
    pub json_path: String,
    /// The Table's `format` of the column (a CRD column's `format`).
    pub format: String,
    /// The Table's `description` of the column; empty for the default.
    pub description: String,
    /// `priority`: 0 is shown by `kubectl get`, higher only with `-o wide`.
    pub priority: i64,
}

/// One resource at one version, as discovery lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceDef {
    /// API group; empty for core.
    pub group: String,
    /// API version, e.g. `v1`.
    pub version: String,
    /// Kind, e.g. `ConfigMap`.
    pub kind: String,
    /// Plural resource name used in paths, e.g. `configmaps`.
    pub plural: String,
    /// Singular name, e.g. `configmap`.
    pub singular: String,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// Whether the `status` subresource exists (status then changes only through it).
    pub status_subresource: bool,
    /// Whether `metadata.generation` is kept (set to 1, bumped on spec changes).
    pub generation: bool,
    /// Whether this resource comes from a CRD (updates must carry a resourceVersion).
    pub custom: bool,
    /// Short names for `kubectl` (`cm`).
    pub short_names: Vec<String>,
    /// Categories (`all`).
    pub categories: Vec<String>,
    /// Name validation rule.
    pub name_rule: NameRule,
    /// Field-selector paths accepted besides `metadata.name` and `metadata.namespace`.
    pub field_selectors: Vec<String>,
    /// Columns (between NAME and AGE) of the server-side table.
    pub printer_columns: Vec<PrinterColumn>,
    /// Whether tables end with an AGE column.
    pub age_column: bool,
    /// Whether a DELETE that removes the object at once answers with the
    /// object (pods, services, namespaces) rather than a `Status` of success.
    pub delete_returns_object: bool,
    /// Discovery's `storageVersionHash`: see [`storage_version_hash`].
    pub storage_version_hash: String,
    /// The resource whose storage this one shares, if not its own
    /// (`events.k8s.io` Events are core Events, see [`crate::events`]).
    pub stored_with: Option<GroupResource>,
    /// The `scale` subresource, if the resource has one.
    pub scale: Option<ScalePaths>,
}

/// Where a resource's `scale` subresource (an `autoscaling/v1` `Scale`)
/// reads and writes its object: a CRD's `subresources.scale`, or the
/// built-in workloads' `.spec.replicas`, `.status.replicas` and label
/// selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalePaths {
    /// `specReplicasPath`: the desired replicas (`.spec.replicas`).
    pub spec_replicas: String,
    /// `statusReplicasPath`: the observed replicas (`.status.replicas`).
    pub status_replicas: String,
    /// Where the Scale's `status.selector` comes from.
    pub selector: ScaleSelector,
}

/// The source of a Scale's `status.selector`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScaleSelector {
    /// None (a CRD without `labelSelectorPath`).
    None,
    /// A string at this path (a CRD's `labelSelectorPath`).
    Text(String),
    /// A `LabelSelector` object at this path, printed as a selector string
    /// (the built-in workloads' `.spec.selector`).
    LabelSelector(String),
}

impl ScalePaths {
    /// The built-in workloads' scale: `.spec.replicas`, `.status.replicas`
    /// and `.spec.selector`.
    #[must_use]
    pub fn workload() -> Self {
        Self {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            selector: ScaleSelector::LabelSelector(".spec.selector".into()),
        }
    }
}

/// The field selectors of `events.k8s.io/v1` Events and the core fields
/// they select on (the real server's field label conversion).
pub const EVENTS_FIELD_LABELS: [(&str, &str); 12] = [
    ("metadata.name", "metadata.name"),
    ("metadata.namespace", "metadata.namespace"),
    ("reason", "reason"),
    ("type", "type"),
    ("reportingController", "reportingComponent"),
    ("regarding.kind", "involvedObject.kind"),
    ("regarding.namespace", "involvedObject.namespace"),
    ("regarding.name", "involvedObject.name"),
    ("regarding.uid", "involvedObject.uid"),
    ("regarding.apiVersion", "involvedObject.apiVersion"),
    (
        "regarding.resourceVersion",
        "involvedObject.resourceVersion",
    ),
    ("regarding.fieldPath", "involvedObject.fieldPath"),
];

/// The field selectors of core `v1` Events (besides `metadata.name` and
/// `metadata.namespace`).
pub const CORE_FIELD_LABELS: [&str; 11] = [
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];

/// The `storageVersionHash` of discovery: the first 8 bytes of the SHA-256
/// of `group/version/kind` of the storage version, base64-encoded.
#[must_use]
pub fn storage_version_hash(group: &str, version: &str, kind: &str) -> String {
    let digest = ring::digest::digest(
        &ring::digest::SHA256,
        format!("{group}/{version}/{kind}").as_bytes(),
    );
    crate::base64::encode(digest.as_ref().get(..8).unwrap_or_default())
}

impl ResourceDef {
    /// `group/version`, or `version` for the core group.
    #[must_use]
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The storage identity, shared by every version of the resource (and
    /// by the resources stored with it).
    #[must_use]
    pub fn group_resource(&self) -> GroupResource {
        if let Some(gr) = &self.stored_with {
            return gr.clone();
        }
        GroupResource {
            group: self.group.clone(),
            resource: self.plural.clone(),
        }
    }

    /// The kind of a list of these objects.
    #[must_use]
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// A built-in resource: its singular the lowercased kind, names RFC 1123
    /// subdomains, no subresource, no generation, tables with an AGE column.
    #[must_use]
    pub fn builtin(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            plural: plural.into(),
            singular: kind.to_lowercase(),
            namespaced,
            status_subresource: false,
            generation: false,
            custom: false,
            short_names: Vec::new(),
            categories: Vec::new(),
            name_rule: NameRule::Subdomain,
            field_selectors: Vec::new(),
            printer_columns: Vec::new(),
            age_column: true,
            delete_returns_object: false,
            storage_version_hash: storage_version_hash(group, version, kind),
            stored_with: None,
            scale: None,
        }
    }

    /// With the `scale` subresource of the built-in workloads.
    #[must_use]
    pub fn scalable(mut self) -> Self {
        self.scale = Some(ScalePaths::workload());
        self
    }

    /// With the `status` subresource.
    #[must_use]
    pub fn with_status(mut self) -> Self {
        self.status_subresource = true;
        self
    }

    /// Keeping `metadata.generation`.
    #[must_use]
    pub fn with_generation(mut self) -> Self {
        self.generation = true;
        self
    }

    /// With these short names.
    #[must_use]
    pub fn short(mut self, names: &[&str]) -> Self {
        self.short_names = names.iter().map(|s| (*s).to_string()).collect();
        self
    }

    /// In the category `all`.
    #[must_use]
    pub fn all(mut self) -> Self {
        self.categories = vec!["all".into()];
        self
    }

    /// Stored as `group/version` of the same plural (another group's
    /// storage, or another version).
    #[must_use]
    pub fn stored_as(mut self, group: &str, version: &str) -> Self {
        self.storage_version_hash = storage_version_hash(group, version, &self.kind);
        self.stored_with = Some(GroupResource {
            group: group.into(),
            resource: self.plural.clone(),
        });
        self
    }

    /// A DELETE that removes an object answers with the object.
    #[must_use]
    pub fn returns_deleted(mut self) -> Self {
        self.delete_returns_object = true;
        self
    }

    /// Names validated by `rule`.
    #[must_use]
    pub fn names(mut self, rule: NameRule) -> Self {
        self.name_rule = rule;
        self
    }

    /// Tables without an AGE column.
    #[must_use]
    pub fn without_age(mut self) -> Self {
        self.age_column = false;
        self
    }

    /// Selectable by these fields too.
    #[must_use]
    pub fn fields(mut self, fields: &[&str]) -> Self {
        self.field_selectors = fields.iter().map(|s| (*s).to_string()).collect();
        self
    }

    /// With this column in tables (after the others).
    #[must_use]
    pub fn column(mut self, name: &str, type_: &str, json_path: &str) -> Self {
        self.printer_columns.push(PrinterColumn {
            name: name.into(),
            type_: type_.into(),
            json_path: json_path.into(),
            format: String::new(),
            description: String::new(),
            priority: 0,
        });
        self
    }
}

/// A resource independent of version: the unit of storage.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupResource {
    /// API group; empty for core.
    pub group: String,
    /// Plural resource name.
    pub resource: String,
}

/// A served group/version with its resources, in registration order.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    /// Keyed by (group, version, plural).
    defs: BTreeMap<(String, String, String), Arc<ResourceDef>>,
    /// The order groups were first registered in (discovery lists them so).
    group_order: Vec<String>,
    /// Preferred version per group.
    preferred: BTreeMap<String, String>,
}

impl Registry {
    /// Adds (or replaces) a resource version; `preferred` makes its version the
    /// group's preferred one.
    pub fn insert(&mut self, def: ResourceDef, preferred: bool) {
        if !self.group_order.contains(&def.group) {
            self.group_order.push(def.group.clone());
        }
        if preferred || !self.preferred.contains_key(&def.group) {
            self.preferred
                .insert(def.group.clone(), def.version.clone());
        }
        self.defs.insert(
            (def.group.clone(), def.version.clone(), def.plural.clone()),
            Arc::new(def),
        );
    }

    /// Removes every version of `gr`, and the group if it becomes empty.
    pub fn remove(&mut self, gr: &GroupResource) {
        self.defs
            .retain(|(g, _, p), _| !(g == &gr.group && p == &gr.resource));
        self.forget_empty_groups();
    }

    fn forget_empty_groups(&mut self) {
        let defs = &self.defs;
        self.group_order
            .retain(|g| defs.keys().any(|(dg, _, _)| dg == g));
        self.preferred
            .retain(|g, _| defs.keys().any(|(dg, _, _)| dg == g));
        let stale: Vec<String> = self
            .preferred
            .iter()
            .filter(|(g, v)| !defs.keys().any(|(dg, dv, _)| dg == *g && dv == *v))
            .map(|(g, _)| g.clone())
            .collect();
        for g in stale {
            if let Some((_, v, _)) = defs.keys().find(|(dg, _, _)| *dg == g) {
                self.preferred.insert(g, v.clone());
            }
        }
    }

    /// The resource at `group/version` named `plural`.
    #[must_use]
    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        self.defs
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
            .cloned()
    }

    /// The preferred version's definition of `gr`.
    #[must_use]
    pub fn preferred(&self, gr: &GroupResource) -> Option<Arc<ResourceDef>> {
        let version = self.preferred.get(&gr.group)?;
        self.get(&gr.group, version, &gr.resource).or_else(|| {
            self.defs
                .iter()
                .find(|((g, _, p), _)| *g == gr.group && *p == gr.resource)
                .map(|(_, d)| d.clone())
        })
    }

    /// Whether any version of `group` is served.
    #[must_use]
    pub fn has_group(&self, group: &str) -> bool {
        self.group_order.iter().any(|g| g == group)
    }

    /// The non-core groups, in registration order, each with its versions
    /// (preferred first) .
    #[must_use]
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        self.group_order
            .iter()
            .filter(|g| !g.is_empty())
            .map(|g| (g.clone(), self.versions(g)))
            .collect()
    }

    /// The served versions of `group`, preferred first.
    #[must_use]
    pub fn versions(&self, group: &str) -> Vec<String> {
        let mut versions: Vec<String> = Vec::new();
        if let Some(p) = self.preferred.get(group) {
            versions.push(p.clone());
        }
        for (g, v, _) in self.defs.keys() {
            if g == group && !versions.contains(v) {
                versions.push(v.clone());
            }
        }
        versions
    }

    /// The resources of `group/version`, sorted by plural name.
    #[must_use]
    pub fn resources(&self, group: &str, version: &str) -> Vec<Arc<ResourceDef>> {
        self.defs
            .iter()
            .filter(|((g, v, _), _)| g == group && v == version)
            .map(|(_, d)| d.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_are_served() {
        let r = crate::builtins::registry();
        let cm = r.get("", "v1", "configmaps").unwrap();
        assert!(cm.namespaced);
        assert_eq!(cm.api_version(), "v1");
        let dep = r.get("apps", "v1", "deployments").unwrap();
        assert_eq!(dep.api_version(), "apps/v1");
        assert!(dep.status_subresource && dep.generation);
        assert!(!r.get("", "v1", "namespaces").unwrap().namespaced);
        let groups: Vec<String> = r.groups().into_iter().map(|(g, _)| g).collect();
        assert!(groups.contains(&"events.k8s.io".to_string()));
        assert!(groups.contains(&"apiextensions.k8s.io".to_string()));
        assert!(!groups.contains(&String::new()));
    }

    #[test]
    fn storage_version_hashes_match_the_real_servers() {
        // As listed by a real kube-apiserver's discovery.
        assert_eq!(storage_version_hash("", "v1", "ConfigMap"), "qFsyl6wFWjQ=");
        assert_eq!(
            storage_version_hash("apps", "v1", "Deployment"),
            "8aSe+NMegvE="
        );
        let ingress = crate::builtins::registry()
            .get("networking.k8s.io", "v1", "ingresses")
            .unwrap();
        assert_eq!(ingress.storage_version_hash, "ZOAfGflaKd0=");
    }

    #[test]
    fn versions_and_removal() {
        let mut r = Registry::default();
        let mut v1 = ResourceDef::builtin("example.com", "v1", "Widget", "widgets", true);
        v1.custom = true;
        let mut v2 = v1.clone();
        v2.version = "v2".into();
        r.insert(v1, false);
        r.insert(v2, true);
        assert_eq!(r.versions("example.com"), vec!["v2", "v1"]);
        let gr = GroupResource {
            group: "example.com".into(),
            resource: "widgets".into(),
        };
        assert_eq!(r.preferred(&gr).unwrap().version, "v2");
        r.remove(&gr);
        assert!(!r.has_group("example.com"));
        assert!(r.groups().is_empty());
    }
}
