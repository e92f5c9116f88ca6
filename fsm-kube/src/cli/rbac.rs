//! The least RBAC an operator needs, derived from what it is: its resource,
//! its store, whether it needs a finalizer or leader election, and the kinds
//! its handlers touch.
//!
//! Pure functions: [`rules`] and [`manifests`] compute, the CLI prints.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use kube::api::ObjectMeta;
use serde::Serialize;

pub use crate::records::ResourceInfo;
use crate::store::{RecordPlace, StoreKind};

/// The verbs in the order Kubernetes documents them; any other verb sorts
/// after these, alphabetically.
const VERB_ORDER: [&str; 8] = [
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];

/// One permission an operator declares for a kind its handlers touch:
/// `verbs` on `resource` (plural, possibly with a `/subresource`) of API
/// group `api_group` (`""` for the core group).
///
/// ```
/// use fsm_kube::cli::Rule;
///
/// let deployments = Rule::new("apps", "deployments", ["get", "list", "watch", "create", "patch"]);
/// assert_eq!(deployments.resource, "deployments");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// The API group; `""` is the core group (ConfigMaps, Secrets, Pods).
    pub api_group: String,
    /// The resource's plural name, e.g. `deployments` or `jobs/status`.
    pub resource: String,
    /// The verbs, e.g. `get`, `list`, `watch`, `create`, `patch`.
    pub verbs: Vec<String>,
}

impl Rule {
    /// A rule granting `verbs` on `resource` of `api_group`.
    #[must_use]
    pub fn new<V: Into<String>>(
        api_group: impl Into<String>,
        resource: impl Into<String>,
        verbs: impl IntoIterator<Item = V>,
    ) -> Self {
        Rule {
            api_group: api_group.into(),
            resource: resource.into(),
            verbs: verbs.into_iter().map(Into::into).collect(),
        }
    }

    /// Checks that the rule names no wildcard and is not empty.
    ///
    /// # Errors
    /// [`InvalidRule`] saying what is wrong.
    pub fn validate(&self) -> Result<(), InvalidRule> {
        let wildcard = |s: &str| s.contains('*');
        if wildcard(&self.api_group) || wildcard(&self.resource) {
            return Err(InvalidRule::Wildcard(self.to_string()));
        }
        if self.resource.is_empty() {
            return Err(InvalidRule::Empty(self.to_string()));
        }
        if self.verbs.is_empty() || self.verbs.iter().any(|v| v.is_empty()) {
            return Err(InvalidRule::Empty(self.to_string()));
        }
        if self.verbs.iter().any(|v| wildcard(v)) {
            return Err(InvalidRule::Wildcard(self.to_string()));
        }
        Ok(())
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.api_group.is_empty() {
            "core"
        } else {
            &self.api_group
        };
        write!(f, "{group}/{} [{}]", self.resource, self.verbs.join(", "))
    }
}

/// A declared rule the CLI refuses to print.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InvalidRule {
    /// A `*` in the group, resource or verbs: least privilege names what it
    /// grants.
    #[error("rule {0} uses a wildcard; name the groups, resources and verbs")]
    Wildcard(String),
    /// No resource or no verb.
    #[error("rule {0} grants nothing: it needs a resource and at least one verb")]
    Empty(String),
}

/// What an operator is, as far as its permissions go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperatorDescription {
    /// The operator's name: the name of its ClusterRole or Role.
    pub name: String,
    /// The resource it reconciles.
    pub resource: ResourceInfo,
    /// Where it keeps its records.
    pub store: StoreKind,
    /// Whether the machine adds a finalizer (`Machine::needs_finalizer`).
    pub needs_finalizer: bool,
    /// The rules its handlers need for the kinds they touch.
    pub extra_rules: Vec<Rule>,
}

/// Where the RBAC objects go.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RbacScope {
    /// `Some(ns)`: a Role in `ns` (the operator watches one namespace);
    /// `None`: a ClusterRole.
    pub namespace: Option<String>,
    /// `Some(ns)`: leader election with a Lease in `ns`, which gets a Role
    /// of its own.
    pub lease_namespace: Option<String>,
    /// The leader election Lease's name, which that Role names in its
    /// `get` and `update` rule (`None`: `<operator>-leader`, what `run
    /// --leader-elect` uses without `--lease-name`).
    pub lease_name: Option<String>,
}

/// One RBAC object to print.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum RbacObject {
    /// Cluster-wide permissions.
    ClusterRole(ClusterRole),
    /// Permissions in one namespace.
    Role(Role),
}

impl RbacObject {
    /// The object's rules.
    pub fn rules(&self) -> &[PolicyRule] {
        let rules = match self {
            RbacObject::ClusterRole(role) => &role.rules,
            RbacObject::Role(role) => &role.rules,
        };
        rules.as_deref().unwrap_or_default()
    }

    /// The object's name.
    pub fn name(&self) -> &str {
        let meta = match self {
            RbacObject::ClusterRole(role) => &role.metadata,
            RbacObject::Role(role) => &role.metadata,
        };
        meta.name.as_deref().unwrap_or_default()
    }
}

/// The rules the operator's controller needs (without leader election,
/// which [`leader_election_rules`] covers):
///
/// 1. its resource: `list`, `watch` (the controller's watch) and `patch`
///    (the finalizer, added and removed by a merge patch); no `get`: the
///    runtime reads objects from its watch;
/// 2. `<plural>/status`: `patch` (the record in the status store, and the
///    conditions every store maintains);
/// 3. `<plural>/finalizers`: `update`, when the machine needs a finalizer
///    or the store creates a record object owned by the resource (the
///    ConfigMap and Secret stores set `blockOwnerDeletion`, which the
///    `OwnerReferencesPermissionEnforcement` admission plugin allows only to
///    whoever may update the owner's finalizers);
/// 4. the store's kind, for the ConfigMap and Secret stores: `list`,
///    `watch` (records are read from a watch cache, never with `get`),
///    `create`, `update`, `delete`;
/// 5. `events.k8s.io` events: `create`, `patch`;
/// 6. the operator's declared rules, merged into the rules above when they
///    name the same group and resource.
///
/// Verbs come in Kubernetes' documented order; there are no wildcards.
/// `examples/tests/processes/rbac.rs` checks these rules against the requests an
/// operator makes through a whole workflow.
///
/// # Errors
/// A declared rule with a wildcard or without verbs.
pub fn rules(operator: &OperatorDescription) -> Result<Vec<PolicyRule>, InvalidRule> {
    let resource = &operator.resource;
    let mut out = RuleSet::default();
    out.add(
        &resource.group,
        &resource.plural,
        &["list", "watch", "patch"],
    );
    out.add(
        &resource.group,
        &format!("{}/status", resource.plural),
        &["patch"],
    );
    let record_object = match operator.store.place() {
        RecordPlace::Object(kind) => Some(kind),
        RecordPlace::Status | RecordPlace::Memory => None,
    };
    if operator.needs_finalizer || record_object.is_some() {
        out.add(
            &resource.group,
            &format!("{}/finalizers", resource.plural),
            &["update"],
        );
    }
    if let Some(kind) = record_object {
        out.add(
            "",
            kind.plural(),
            &["list", "watch", "create", "update", "delete"],
        );
    }
    out.add("events.k8s.io", "events", &["create", "patch"]);
    for rule in &operator.extra_rules {
        rule.validate()?;
        let verbs: Vec<&str> = rule.verbs.iter().map(String::as_str).collect();
        out.add(&rule.api_group, &rule.resource, &verbs);
    }
    Ok(out.into_rules())
}

/// The rules of the web view (`run --view-addr`, [`crate::view::web`]),
/// which runs in the operator's process with its ServiceAccount and reads
/// more than the controller: each object's page GETs the object and, for
/// the ConfigMap and Secret stores, its record object (the controller reads
/// both from watches only), and lists the `events.k8s.io` Events about it.
/// Its list of objects comes from watches the main rules already allow.
pub fn view_rules(operator: &OperatorDescription) -> Vec<PolicyRule> {
    let mut out = RuleSet::default();
    out.add(
        &operator.resource.group,
        &operator.resource.plural,
        &["get"],
    );
    if let RecordPlace::Object(kind) = operator.store.place() {
        out.add("", kind.plural(), &["get"]);
    }
    out.add("events.k8s.io", "events", &["list"]);
    out.into_rules()
}

/// `objects` with [`view_rules`] merged into the operator's main role (the
/// ClusterRole or Role named after it, which [`manifests`] puts first).
#[must_use]
pub fn with_view_rules(
    mut objects: Vec<RbacObject>,
    operator: &OperatorDescription,
) -> Vec<RbacObject> {
    let main = objects.iter_mut().find(|o| o.name() == operator.name);
    let rules = match main {
        Some(RbacObject::ClusterRole(role)) => &mut role.rules,
        Some(RbacObject::Role(role)) => &mut role.rules,
        None => return objects,
    };
    let mut merged = RuleSet::default();
    for rule in rules.iter().flatten().chain(&view_rules(operator)) {
        merged.add_rule(rule);
    }
    *rules = Some(merged.into_rules());
    objects
}

/// The rules of the web view's access check ([`crate::view::access`],
/// `run --view-auth kubernetes`): `create` on `authentication.k8s.io`
/// `tokenreviews` (who a bearer token is) and `authorization.k8s.io`
/// `subjectaccessreviews` (whether they may list what the view shows).
/// Both are cluster-scoped, so they go into a ClusterRole of their own
/// ([`view_access_role`]) even for an operator of one namespace.
pub fn view_access_rules() -> Vec<PolicyRule> {
    let mut out = RuleSet::default();
    out.add("authentication.k8s.io", "tokenreviews", &["create"]);
    out.add("authorization.k8s.io", "subjectaccessreviews", &["create"]);
    out.into_rules()
}

/// The ClusterRole `<name>-view-access` with [`view_access_rules`].
#[must_use]
pub fn view_access_role(operator: &OperatorDescription) -> RbacObject {
    RbacObject::ClusterRole(ClusterRole {
        metadata: ObjectMeta {
            name: Some(format!("{}-view-access", operator.name)),
            labels: Some(labels(&operator.name)),
            ..ObjectMeta::default()
        },
        rules: Some(view_access_rules()),
        aggregation_rule: None,
    })
}

/// The labels of every RBAC object of the operator `name`.
fn labels(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_owned(), name.to_owned()),
        (
            "app.kubernetes.io/managed-by".to_owned(),
            "operator-fsm".to_owned(),
        ),
    ])
}

/// The rules of leader election with the Lease `lease_name` ([`crate::leader`]
/// reads it, creates it, and renews or takes it over with a conditional
/// update): `get` and `update` on that Lease only (`resourceNames`), and
/// `create` on Leases, which RBAC cannot narrow to a name (a create's name
/// is not known when it is authorized).
pub fn leader_election_rules(lease_name: &str) -> Vec<PolicyRule> {
    let mut out = RuleSet::default();
    out.add("coordination.k8s.io", "leases", &["create"]);
    out.add_named(
        "coordination.k8s.io",
        "leases",
        &[lease_name],
        &["get", "update"],
    );
    out.into_rules()
}

/// The Lease `run --leader-elect` holds without `--lease-name`.
#[must_use]
pub fn default_lease_name(operator: &str) -> String {
    format!("{operator}-leader")
}

/// The rules of sharded mode ([`crate::shard`]): each replica creates and
/// renews its shard Lease (and the assigner's Lease, `<operator>-sharder`)
/// and the assigner lists the shard Leases. The labels on the objects are
/// written with `patch` on the resource, which [`rules`] grants. No
/// `resourceNames`: a shard Lease is named after its pod
/// (`<operator>-shard-<pod>`), which is not known when the Role is
/// written, and a `list` cannot be narrowed to names; the Role is confined
/// to the Leases' namespace instead.
pub fn sharding_rules() -> Vec<PolicyRule> {
    let mut out = RuleSet::default();
    out.add(
        "coordination.k8s.io",
        "leases",
        &["get", "list", "create", "update"],
    );
    out.into_rules()
}

/// The Role `<name>-sharding` in the Leases' namespace `lease_namespace`,
/// with [`sharding_rules`].
#[must_use]
pub fn sharding_role(operator: &OperatorDescription, lease_namespace: &str) -> RbacObject {
    RbacObject::Role(Role {
        metadata: ObjectMeta {
            name: Some(format!("{}-sharding", operator.name)),
            namespace: Some(lease_namespace.to_owned()),
            labels: Some(labels(&operator.name)),
            ..ObjectMeta::default()
        },
        rules: Some(sharding_rules()),
    })
}

/// The RBAC objects of `operator` in `scope`: a ClusterRole named after the
/// operator, or a Role in the watched namespace; and, with leader election,
/// a Role `<name>-leader-election` in the Lease's namespace that reads and
/// renews that one Lease (so the operator cannot touch other Leases).
///
/// # Errors
/// A declared rule with a wildcard or without verbs.
pub fn manifests(
    operator: &OperatorDescription,
    scope: &RbacScope,
) -> Result<Vec<RbacObject>, InvalidRule> {
    let meta = |name: String, namespace: Option<String>| ObjectMeta {
        name: Some(name),
        namespace,
        labels: Some(labels(&operator.name)),
        ..ObjectMeta::default()
    };
    let main = rules(operator)?;
    let mut out = vec![match &scope.namespace {
        None => RbacObject::ClusterRole(ClusterRole {
            metadata: meta(operator.name.clone(), None),
            rules: Some(main),
            aggregation_rule: None,
        }),
        Some(namespace) => RbacObject::Role(Role {
            metadata: meta(operator.name.clone(), Some(namespace.clone())),
            rules: Some(main),
        }),
    }];
    if let Some(namespace) = &scope.lease_namespace {
        let lease_name = scope
            .lease_name
            .clone()
            .unwrap_or_else(|| default_lease_name(&operator.name));
        out.push(RbacObject::Role(Role {
            metadata: meta(
                format!("{}-leader-election", operator.name),
                Some(namespace.clone()),
            ),
            rules: Some(leader_election_rules(&lease_name)),
        }));
    }
    Ok(out)
}

/// What a reader of `objects` should know before applying them, one
/// paragraph each (`rbac` and `manifests` print them as YAML comments):
/// a ClusterRole that grants anything on Secrets grants it in every
/// namespace, ServiceAccount tokens included, because RBAC cannot narrow a
/// `list` or `watch` to the operator's labelled Secrets; a Role (the
/// operator watching one namespace) or a store other than the Secret store
/// avoids that.
#[must_use]
pub fn caveats(objects: &[RbacObject]) -> Vec<String> {
    let mut out = Vec::new();
    for object in objects {
        let RbacObject::ClusterRole(_) = object else {
            continue;
        };
        let verbs: Vec<&str> = object
            .rules()
            .iter()
            .filter(|rule| {
                rule.api_groups.iter().flatten().any(String::is_empty)
                    && rule.resources.iter().flatten().any(|r| r == "secrets")
                    && rule.resource_names.as_ref().is_none_or(Vec::is_empty)
            })
            .flat_map(|rule| rule.verbs.iter().map(String::as_str))
            .collect();
        if verbs.is_empty() {
            continue;
        }
        out.push(format!(
            "The ClusterRole {} grants {} on Secrets in every namespace, ServiceAccount\n\
             tokens included: RBAC cannot narrow a list or watch to the operator's\n\
             labelled Secrets. If the operator can watch one namespace, run it with\n\
             --namespace NS and print a Role there (rbac -n NS, manifests\n\
             --watch-namespace NS); records alone need no Secrets in the status or\n\
             ConfigMap store.",
            object.name(),
            verbs.join(", ")
        ));
    }
    out
}

/// `caveats` as YAML comment lines, each paragraph starting `# Caveat: `.
#[must_use]
pub fn caveat_comments(caveats: &[String]) -> String {
    let mut out = String::new();
    for caveat in caveats {
        for (i, line) in caveat.lines().enumerate() {
            out.push_str(if i == 0 { "# Caveat: " } else { "# " });
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The objects as a multi-document YAML stream, ready for `kubectl apply -f -`.
///
/// # Errors
/// Serialization failed (not expected for these types).
pub fn to_yaml(objects: &[RbacObject]) -> Result<String, serde_yaml_ng::Error> {
    let mut out = String::new();
    for object in objects {
        let value = match object {
            RbacObject::ClusterRole(role) => with_type_meta(role, "ClusterRole")?,
            RbacObject::Role(role) => with_type_meta(role, "Role")?,
        };
        out.push_str("---\n");
        out.push_str(&serde_yaml_ng::to_string(&value)?);
    }
    Ok(out)
}

/// The object with its `apiVersion` and `kind` first, as people write it.
fn with_type_meta<T: Serialize>(
    object: &T,
    kind: &str,
) -> Result<serde_yaml_ng::Mapping, serde_yaml_ng::Error> {
    use serde_yaml_ng::Value;
    let mut out = serde_yaml_ng::Mapping::new();
    out.insert(
        Value::from("apiVersion"),
        Value::from("rbac.authorization.k8s.io/v1"),
    );
    out.insert(Value::from("kind"), Value::from(kind));
    if let Value::Mapping(fields) = serde_yaml_ng::to_value(object)? {
        for (key, value) in fields {
            if key.as_str() != Some("apiVersion") && key.as_str() != Some("kind") {
                out.insert(key, value);
            }
        }
    }
    Ok(out)
}

/// Rules keyed by (group, resource, resource names), in order of first
/// mention; no names means every object of the resource.
#[derive(Default)]
struct RuleSet {
    rules: Vec<KeyedRule>,
}

struct KeyedRule {
    group: String,
    resource: String,
    names: Vec<String>,
    verbs: Vec<String>,
}

impl RuleSet {
    fn add(&mut self, group: &str, resource: &str, verbs: &[&str]) {
        self.add_named(group, resource, &[], verbs);
    }

    fn add_named(&mut self, group: &str, resource: &str, names: &[&str], verbs: &[&str]) {
        let same = |r: &KeyedRule| {
            r.group == group && r.resource == resource && r.names.iter().eq(names.iter())
        };
        let index = match self.rules.iter().position(same) {
            Some(index) => index,
            None => {
                self.rules.push(KeyedRule {
                    group: group.to_owned(),
                    resource: resource.to_owned(),
                    names: names.iter().map(|n| (*n).to_owned()).collect(),
                    verbs: Vec::new(),
                });
                self.rules.len() - 1
            }
        };
        let existing = &mut self.rules[index].verbs;
        for verb in verbs {
            if !existing.iter().any(|v| v == verb) {
                existing.push((*verb).to_owned());
            }
        }
        existing.sort_by(|a, b| verb_rank(a).cmp(&verb_rank(b)).then_with(|| a.cmp(b)));
    }

    /// Adds every (group, resource, names) of `rule`.
    fn add_rule(&mut self, rule: &PolicyRule) {
        let verbs: Vec<&str> = rule.verbs.iter().map(String::as_str).collect();
        let names: Vec<&str> = rule
            .resource_names
            .iter()
            .flatten()
            .map(String::as_str)
            .collect();
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                self.add_named(group, resource, &names, &verbs);
            }
        }
    }

    fn into_rules(self) -> Vec<PolicyRule> {
        self.rules
            .into_iter()
            .map(|rule| PolicyRule {
                api_groups: Some(vec![rule.group]),
                resources: Some(vec![rule.resource]),
                resource_names: (!rule.names.is_empty()).then_some(rule.names),
                verbs: rule.verbs,
                ..PolicyRule::default()
            })
            .collect()
    }
}

fn verb_rank(verb: &str) -> usize {
    VERB_ORDER
        .iter()
        .position(|v| *v == verb)
        .unwrap_or(VERB_ORDER.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn operator(store: StoreKind) -> OperatorDescription {
        OperatorDescription {
            name: "db-operator".into(),
            resource: ResourceInfo {
                group: "example.io".into(),
                version: "v1".into(),
                kind: "Database".into(),
                plural: "databases".into(),
                namespaced: true,
            },
            store,
            needs_finalizer: false,
            extra_rules: Vec::new(),
        }
    }

    /// The (group, resource, verbs) of `rules`, in order.
    fn triples(rules: &[PolicyRule]) -> Vec<(String, String, Vec<String>)> {
        rules
            .iter()
            .map(|r| {
                (
                    r.api_groups.as_ref().unwrap()[0].clone(),
                    r.resources.as_ref().unwrap()[0].clone(),
                    r.verbs.clone(),
                )
            })
            .collect()
    }

    #[test]
    fn the_view_adds_gets_and_the_events_list_to_the_main_role_only() {
        let op = operator(StoreKind::Secret);
        let scope = RbacScope {
            namespace: Some("ops".into()),
            lease_namespace: Some("ops".into()),
            lease_name: None,
        };
        let plain = manifests(&op, &scope).unwrap();
        let viewed = with_view_rules(plain.clone(), &op);
        assert_eq!(viewed.len(), 2);
        assert_eq!(viewed[1], plain[1], "the leader election Role is untouched");
        let rules = triples(viewed[0].rules());
        let verbs = |group: &str, resource: &str| {
            rules
                .iter()
                .find(|(g, r, _)| g == group && r == resource)
                .map(|(_, _, v)| v.join(","))
        };
        assert_eq!(
            verbs("example.io", "databases").as_deref(),
            Some("get,list,watch,patch")
        );
        assert_eq!(
            verbs("", "secrets").as_deref(),
            Some("get,list,watch,create,update,delete")
        );
        assert_eq!(
            verbs("events.k8s.io", "events").as_deref(),
            Some("list,create,patch")
        );
        // Nothing else changed, and each (group, resource) has one rule.
        assert_eq!(rules.len(), triples(plain[0].rules()).len());

        let status = view_rules(&operator(StoreKind::Status));
        assert_eq!(
            triples(&status),
            [
                ("example.io".into(), "databases".into(), vec!["get".into()]),
                ("events.k8s.io".into(), "events".into(), vec!["list".into()]),
            ]
        );
    }

    #[test]
    fn declared_rules_merge_into_built_in_ones_in_verb_order() {
        let mut op = operator(StoreKind::ConfigMap);
        op.extra_rules = vec![Rule::new("", "configmaps", ["patch", "get"])];
        let rules = rules(&op).unwrap();
        let configmaps = rules
            .iter()
            .find(|r| r.resources.as_deref() == Some(&["configmaps".to_owned()][..]))
            .unwrap();
        assert_eq!(
            configmaps.verbs,
            [
                "get", "list", "watch", "create", "update", "patch", "delete"
            ]
        );
        assert_eq!(
            rules
                .iter()
                .filter(|r| r.resources.as_deref() == Some(&["configmaps".to_owned()][..]))
                .count(),
            1
        );
    }

    #[test]
    fn wildcards_and_empty_rules_are_refused() {
        let mut op = operator(StoreKind::Status);
        op.extra_rules = vec![Rule::new("apps", "*", ["get"])];
        assert!(matches!(rules(&op), Err(InvalidRule::Wildcard(_))));
        op.extra_rules = vec![Rule::new("apps", "deployments", ["*"])];
        assert!(matches!(rules(&op), Err(InvalidRule::Wildcard(_))));
        op.extra_rules = vec![Rule::new("apps", "deployments", Vec::<String>::new())];
        assert!(matches!(rules(&op), Err(InvalidRule::Empty(_))));
    }

    #[test]
    fn unknown_verbs_sort_after_the_documented_ones() {
        let mut set = RuleSet::default();
        set.add("", "pods", &["escalate", "watch", "bind", "get"]);
        assert_eq!(
            set.into_rules()[0].verbs,
            ["get", "watch", "bind", "escalate"]
        );
    }

    #[test]
    fn a_cluster_role_on_secrets_comes_with_a_caveat_and_a_role_does_not() {
        let cluster = |op: &OperatorDescription| manifests(op, &RbacScope::default()).unwrap();
        let secret_store = operator(StoreKind::Secret);
        let caveats = caveats(&cluster(&secret_store));
        assert_eq!(caveats.len(), 1, "{caveats:?}");
        assert!(
            caveats[0].starts_with(
                "The ClusterRole db-operator grants list, watch, create, update, delete on Secrets in every namespace"
            ),
            "{}",
            caveats[0]
        );
        let comments = caveat_comments(&caveats);
        assert!(
            comments.starts_with("# Caveat: The ClusterRole"),
            "{comments}"
        );
        assert!(comments.lines().all(|l| l.starts_with("# ")), "{comments}");

        // A Role in one namespace grants Secrets there only.
        let scoped = manifests(
            &secret_store,
            &RbacScope {
                namespace: Some("shop".into()),
                ..RbacScope::default()
            },
        )
        .unwrap();
        assert!(super::caveats(&scoped).is_empty());

        // No Secrets at all: nothing to say; declared ones: the same caveat.
        let mut config_map_store = operator(StoreKind::ConfigMap);
        assert!(super::caveats(&cluster(&config_map_store)).is_empty());
        config_map_store.extra_rules = vec![Rule::new("", "secrets", ["get", "create"])];
        let declared = super::caveats(&cluster(&config_map_store));
        assert_eq!(declared.len(), 1);
        assert!(
            declared[0].contains("grants get, create on Secrets"),
            "{declared:?}"
        );
    }

    #[test]
    fn yaml_starts_with_api_version_and_kind() {
        let objects = manifests(&operator(StoreKind::Status), &RbacScope::default()).unwrap();
        let yaml = to_yaml(&objects).unwrap();
        assert!(
            yaml.starts_with("---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n"),
            "{yaml}"
        );
    }
}
