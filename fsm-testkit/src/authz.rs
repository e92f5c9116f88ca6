//! Authorization: the RBAC objects the server stores, evaluated as
//! kube-apiserver 1.20's RBAC authorizer does
//! (`plugin/pkg/auth/authorizer/rbac`), and the `SubjectAccessReview`
//! that asks it (`POST /apis/authorization.k8s.io/v1/subjectaccessreviews`).
//!
//! A request is allowed when the user is in `system:masters` (the real
//! server's superuser group, allowed before RBAC is asked, with no
//! reason), or when a rule of a role bound to the user allows it:
//! ClusterRoleBindings first (their ClusterRole applies everywhere), then
//! the RoleBindings of the request's namespace (their Role, or
//! ClusterRole, applies in that namespace only). A binding applies to a
//! subject of kind `User` (the user's name), `Group` (one of the user's
//! groups) or `ServiceAccount` (`system:serviceaccount:<ns>:<name>`, the
//! namespace defaulting to a RoleBinding's own). A rule allows a resource
//! request when its verbs, API groups, resources (`resource`,
//! `resource/subresource`, `*` or `*/subresource`) and resource names
//! (none, or the request's name) all match, and a non-resource request
//! when its verbs and `nonResourceURLs` (exact, or a prefix ending in `*`)
//! do; non-resource requests are matched by ClusterRoleBindings only.
//!
//! # Caveats
//! - Aggregated ClusterRoles (`aggregationRule`) are evaluated with the
//!   rules they hold: no controller aggregates them here.
//! - The real server's bootstrap roles and bindings (`cluster-admin`,
//!   `system:discovery`, `system:basic-user`, …) are not stored here, so
//!   what they grant (e.g. discovery to `system:authenticated`) is denied.
//! - Bindings are visited in name order; the real server visits them in
//!   its cache's order, so when several bindings allow a request the one
//!   its `reason` names may differ.
//! - The Node authorizer (`system:nodes`) is not there.

use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use serde_json::{Map, Value, json};

use crate::resources::GroupResource;
use crate::reviews::{self, SUBJECT_ACCESS_REVIEW};
use crate::status::{ApiError, Cause, Subject};
use crate::store::Store;

/// The group whose members are allowed everything.
pub const SUPERUSER_GROUP: &str = "system:masters";

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Who asks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct User {
    /// The user name (`system:serviceaccount:<ns>:<name>` for a
    /// ServiceAccount).
    pub name: String,
    /// The user's groups.
    pub groups: Vec<String>,
}

/// What is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attributes {
    /// A request on a resource.
    Resource {
        /// The namespace (empty for a cluster-scoped request).
        namespace: String,
        /// The verb (`get`, `list`, …).
        verb: String,
        /// The API group (empty for core).
        group: String,
        /// The resource (plural).
        resource: String,
        /// The subresource (empty for none).
        subresource: String,
        /// The object's name (empty for none).
        name: String,
    },
    /// A request on a path outside the resources (`/healthz`).
    NonResource {
        /// The path.
        path: String,
        /// The verb (`get`, `post`, …).
        verb: String,
    },
}

/// An authorizer's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request is allowed.
    pub allowed: bool,
    /// Why, worded as the real server: `RBAC: allowed by …` for an allowed
    /// request, the errors met (roles not found) for a denied one, empty
    /// otherwise.
    pub reason: String,
}

/// Decides `attributes` for `user` from the RBAC objects in `store`.
#[must_use]
pub fn authorize(store: &Store, user: &User, attributes: &Attributes) -> Decision {
    if user.groups.iter().any(|g| g == SUPERUSER_GROUP) {
        return Decision {
            allowed: true,
            reason: String::new(),
        };
    }
    let mut errors: Vec<String> = Vec::new();
    let namespace = match attributes {
        Attributes::Resource { namespace, .. } => namespace.as_str(),
        Attributes::NonResource { .. } => "",
    };
    for binding in store.list(&rbac("clusterrolebindings"), Some("")) {
        if let Some(reason) = visit(store, &binding, "", user, attributes, &mut errors) {
            return Decision {
                allowed: true,
                reason,
            };
        }
    }
    if !namespace.is_empty() {
        for binding in store.list(&rbac("rolebindings"), Some(namespace)) {
            if let Some(reason) = visit(store, &binding, namespace, user, attributes, &mut errors) {
                return Decision {
                    allowed: true,
                    reason,
                };
            }
        }
    }
    Decision {
        allowed: false,
        reason: if errors.is_empty() {
            String::new()
        } else {
            format!("RBAC: {}", aggregate(&errors))
        },
    }
}

fn rbac(resource: &str) -> GroupResource {
    GroupResource {
        group: RBAC_GROUP.into(),
        resource: resource.into(),
    }
}

fn text<'a>(v: &'a Value, field: &str) -> &'a str {
    v.get(field).and_then(Value::as_str).unwrap_or_default()
}

fn strings(v: &Value, field: &str) -> Vec<String> {
    v.get(field)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(String::from))
        .collect()
}

/// A binding (in `namespace`, empty for a ClusterRoleBinding): when it
/// applies to `user` and a rule of its role allows `attributes`, the
/// reason of the allowance. A role it names that does not exist is an
/// error, collected in `errors`.
fn visit(
    store: &Store,
    binding: &Value,
    namespace: &str,
    user: &User,
    attributes: &Attributes,
    errors: &mut Vec<String>,
) -> Option<String> {
    let subjects = binding.get("subjects").and_then(Value::as_array)?;
    let subject = subjects.iter().find(|s| applies_to(user, s, namespace))?;
    let role_ref = binding.get("roleRef").unwrap_or(&Value::Null);
    let (kind, role_name) = (text(role_ref, "kind"), text(role_ref, "name"));
    let role = match kind {
        "Role" if !namespace.is_empty() => store.get(&rbac("roles"), namespace, role_name),
        "ClusterRole" => store.get(&rbac("clusterroles"), "", role_name),
        _ => None,
    };
    let Some(role) = role else {
        errors.push(format!(
            "{}.{RBAC_GROUP} {role_name:?} not found",
            kind.to_lowercase()
        ));
        return None;
    };
    let rules = role.get("rules").and_then(Value::as_array)?;
    if !rules.iter().any(|r| rule_allows(r, attributes)) {
        return None;
    }
    let binding_name = binding["metadata"]["name"].as_str().unwrap_or_default();
    let source = if namespace.is_empty() {
        format!("ClusterRoleBinding {binding_name:?}")
    } else {
        format!("RoleBinding {:?}", format!("{binding_name}/{namespace}"))
    };
    Some(format!(
        "RBAC: allowed by {source} of {kind} {role_name:?} to {}",
        describe_subject(subject, namespace)
    ))
}

/// Whether a binding's `subject` (of a binding in `namespace`, empty for
/// a ClusterRoleBinding) names `user`.
#[must_use]
pub fn applies_to(user: &User, subject: &Value, namespace: &str) -> bool {
    let name = text(subject, "name");
    match text(subject, "kind") {
        "User" => user.name == name,
        "Group" => user.groups.iter().any(|g| g == name),
        "ServiceAccount" => {
            let sa_namespace = match text(subject, "namespace") {
                "" => namespace,
                ns => ns,
            };
            !sa_namespace.is_empty()
                && user.name == format!("system:serviceaccount:{sa_namespace}:{name}")
        }
        _ => false,
    }
}

/// The subject as the real server's reasons name it: `User "alice"`,
/// `ServiceAccount "name/namespace"`.
fn describe_subject(subject: &Value, namespace: &str) -> String {
    let (kind, name) = (text(subject, "kind"), text(subject, "name"));
    if kind == "ServiceAccount" {
        let ns = match text(subject, "namespace") {
            "" => namespace,
            ns => ns,
        };
        return format!("{kind} {:?}", format!("{name}/{ns}"));
    }
    format!("{kind} {name:?}")
}

/// Whether `rule` (a `PolicyRule`) allows `attributes` (the real
/// `RuleAllows`).
#[must_use]
pub fn rule_allows(rule: &Value, attributes: &Attributes) -> bool {
    let has =
        |field: &str, wanted: &str| strings(rule, field).iter().any(|v| v == "*" || v == wanted);
    match attributes {
        Attributes::Resource {
            verb,
            group,
            resource,
            subresource,
            name,
            ..
        } => {
            let names = strings(rule, "resourceNames");
            has("verbs", verb)
                && has("apiGroups", group)
                && resource_matches(&strings(rule, "resources"), resource, subresource)
                && (names.is_empty() || names.iter().any(|n| n == name))
        }
        Attributes::NonResource { path, verb } => {
            has("verbs", verb)
                && strings(rule, "nonResourceURLs").iter().any(|url| {
                    url == "*"
                        || url == path
                        || url
                            .strip_suffix('*')
                            .is_some_and(|prefix| path.starts_with(prefix.trim_end_matches('*')))
                })
        }
    }
}

/// The real `ResourceMatches`: `*`, the resource (with `/subresource` when
/// asked for one), or `*/subresource`. (`resource/*` matches nothing but a
/// subresource named `*`, as on the real server.)
fn resource_matches(rule_resources: &[String], resource: &str, subresource: &str) -> bool {
    let combined = if subresource.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}/{subresource}")
    };
    rule_resources.iter().any(|r| {
        r == "*"
            || *r == combined
            || (!subresource.is_empty() && r.strip_prefix("*/") == Some(subresource))
    })
}

/// Go's `utilerrors.NewAggregate(errs).Error()`: one message as is, more
/// in brackets, each once.
fn aggregate(errors: &[String]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for e in errors {
        if !seen.contains(&e.as_str()) {
            seen.push(e);
        }
    }
    if seen.len() == 1 {
        seen.join("")
    } else {
        format!("[{}]", seen.join(", "))
    }
}

/// Answers a `SubjectAccessReview` (the request body): the object with its
/// `status` (`allowed`, and `reason` when there is one) computed by
/// [`authorize`]. Nothing is stored.
///
/// # Errors
/// `400 BadRequest` for a body that does not decode (see
/// [`reviews::decode`]); `422 Invalid` as the real server's validation:
/// neither or both of `resourceAttributes` and `nonResourceAttributes`,
/// no user and no group, metadata that is not empty.
/// The causes 1.20's validation of an access review (subject or self)
/// finds in its attributes: neither or both given.
pub(crate) fn attribute_causes(
    resource: Option<&ResourceAttributes>,
    non_resource: Option<&NonResourceAttributes>,
) -> Vec<Cause> {
    match (resource, non_resource) {
        (Some(_), Some(n)) => vec![non_resource_cause(
            n,
            "cannot be specified in combination with resourceAttributes",
        )],
        (None, None) => vec![Cause::invalid(
            "spec.resourceAttributes",
            "null",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )],
        _ => Vec::new(),
    }
}

/// A cause on `spec.nonResourceAttributes`, showing them as Go prints
/// them.
pub(crate) fn non_resource_cause(n: &NonResourceAttributes, why: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid".into(),
        message: format!(
            "Invalid value: authorization.NonResourceAttributes{{Path:{:?}, Verb:{:?}}}: {why}",
            n.path.as_deref().unwrap_or_default(),
            n.verb.as_deref().unwrap_or_default()
        ),
        field: "spec.nonResourceAttributes".into(),
    }
}

/// The cause of a review whose metadata (`body`'s) is not empty.
pub(crate) fn metadata_causes(body: &Value) -> Option<Cause> {
    let metadata = reviews::answer_metadata(body);
    metadata
        .as_object()
        .is_some_and(|m| m.len() > 1)
        .then(|| Cause {
            reason: "FieldValueInvalid".into(),
            message: format!("Invalid value: v1.ObjectMeta{{{metadata}}}: must be empty"),
            field: "metadata".into(),
        })
}

pub fn review(store: &Store, bytes: &[u8]) -> Result<Value, ApiError> {
    let (body, typed) = reviews::decode::<SubjectAccessReview>(&SUBJECT_ACCESS_REVIEW, bytes)?;
    let mut causes = spec_causes(&typed.spec);
    causes.extend(metadata_causes(&body));
    invalid_unless_empty(causes)?;
    let status = decide(store, &typed.spec)?;
    Ok(access_review_answer(&SUBJECT_ACCESS_REVIEW, &body, status))
}

/// The answer to an access review `body` of kind `review`: its metadata
/// and spec as the real server echoes them, and `status`.
pub(crate) fn access_review_answer(review: &reviews::Review, body: &Value, status: Value) -> Value {
    json!({
        "kind": review.kind,
        "apiVersion": review.api_version(),
        "metadata": reviews::answer_metadata(body),
        "spec": echo_spec(&body["spec"]),
        "status": status,
    })
}

/// What 1.20's validation of a subject access review's spec finds (also
/// a local one's): neither or both attributes, no user and no group.
pub(crate) fn spec_causes(spec: &SubjectAccessReviewSpec) -> Vec<Cause> {
    let mut causes = attribute_causes(
        spec.resource_attributes.as_ref(),
        spec.non_resource_attributes.as_ref(),
    );
    if spec.user.as_deref().unwrap_or_default().is_empty()
        && spec.groups.as_ref().is_none_or(Vec::is_empty)
    {
        causes.push(Cause::invalid(
            "spec.user",
            "",
            "at least one of user or group must be specified",
        ));
    }
    causes
}

/// `422 Invalid` of an access review with `causes`, unless there are none.
pub(crate) fn invalid_unless_empty(causes: Vec<Cause>) -> Result<(), ApiError> {
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::Invalid(
        Subject::new(SUBJECT_ACCESS_REVIEW.group, "", ""),
        causes,
    ))
}

/// The `status` of a validated subject access review: `allowed`, and the
/// `reason` when there is one.
pub(crate) fn decide(store: &Store, spec: &SubjectAccessReviewSpec) -> Result<Value, ApiError> {
    let user = User {
        name: spec.user.clone().unwrap_or_default(),
        groups: spec.groups.clone().unwrap_or_default(),
    };
    let attributes = match (&spec.resource_attributes, &spec.non_resource_attributes) {
        (Some(r), _) => resource_attributes(r),
        (None, Some(n)) => non_resource_attributes(n),
        (None, None) => {
            return Err(ApiError::Internal(
                "a review without attributes passed validation".into(),
            ));
        }
    };
    let decision = authorize(store, &user, &attributes);
    let mut status = json!({"allowed": decision.allowed});
    if !decision.reason.is_empty() {
        status["reason"] = json!(decision.reason);
    }
    Ok(status)
}

pub(crate) fn resource_attributes(r: &ResourceAttributes) -> Attributes {
    let s = |v: &Option<String>| v.clone().unwrap_or_default();
    Attributes::Resource {
        namespace: s(&r.namespace),
        verb: s(&r.verb),
        group: s(&r.group),
        resource: s(&r.resource),
        subresource: s(&r.subresource),
        name: s(&r.name),
    }
}

pub(crate) fn non_resource_attributes(n: &NonResourceAttributes) -> Attributes {
    Attributes::NonResource {
        path: n.path.clone().unwrap_or_default(),
        verb: n.verb.clone().unwrap_or_default(),
    }
}

/// The spec as the real server answers it: its known fields, empty ones
/// left out (but an empty attributes object, and `extra`'s empty lists,
/// kept).
pub(crate) fn echo_spec(spec: &Value) -> Value {
    let mut out = Map::new();
    for (field, keys) in [
        (
            "resourceAttributes",
            &[
                "namespace",
                "verb",
                "group",
                "version",
                "resource",
                "subresource",
                "name",
            ][..],
        ),
        ("nonResourceAttributes", &["path", "verb"][..]),
    ] {
        if let Some(attrs) = spec.get(field).and_then(Value::as_object) {
            let kept: Map<String, Value> = keys
                .iter()
                .filter_map(|k| {
                    attrs
                        .get(*k)
                        .filter(|v| !reviews::is_empty(v))
                        .map(|v| ((*k).to_string(), v.clone()))
                })
                .collect();
            out.insert(field.into(), Value::Object(kept));
        }
    }
    for field in ["user", "groups", "extra", "uid"] {
        if let Some(v) = spec.get(field).filter(|v| !reviews::is_empty(v)) {
            out.insert(field.into(), v.clone());
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_with(objects: &[(&str, &str, Value)]) -> Store {
        let mut store = Store::new(100, 16);
        for (resource, ns, object) in objects {
            let name = object["metadata"]["name"].as_str().unwrap().to_string();
            store.put(&rbac(resource), ns, &name, object.clone());
        }
        store
    }

    fn role(name: &str, rules: Value) -> Value {
        json!({"metadata": {"name": name}, "rules": rules})
    }

    fn binding(name: &str, kind: &str, role: &str, subjects: Value) -> Value {
        json!({"metadata": {"name": name},
               "roleRef": {"apiGroup": RBAC_GROUP, "kind": kind, "name": role},
               "subjects": subjects})
    }

    fn sa(ns: &str, name: &str) -> User {
        User {
            name: format!("system:serviceaccount:{ns}:{name}"),
            groups: vec!["system:serviceaccounts".into()],
        }
    }

    fn get(ns: &str, group: &str, resource: &str, name: &str) -> Attributes {
        Attributes::Resource {
            namespace: ns.into(),
            verb: "get".into(),
            group: group.into(),
            resource: resource.into(),
            subresource: String::new(),
            name: name.into(),
        }
    }

    fn with(attributes: Attributes, verb: &str, subresource: &str) -> Attributes {
        match attributes {
            Attributes::Resource {
                namespace,
                group,
                resource,
                name,
                ..
            } => Attributes::Resource {
                namespace,
                verb: verb.into(),
                group,
                resource,
                subresource: subresource.into(),
                name,
            },
            other => other,
        }
    }

    #[test]
    fn rules_match_verbs_groups_resources_and_names() {
        let rule = json!({"apiGroups": [""], "resources": ["configmaps"],
                          "verbs": ["get", "list"], "resourceNames": ["a"]});
        assert!(rule_allows(&rule, &get("ns", "", "configmaps", "a")));
        assert!(!rule_allows(&rule, &get("ns", "", "configmaps", "b")));
        assert!(
            !rule_allows(&rule, &get("ns", "", "configmaps", "")),
            "a rule with resourceNames never matches a request without a name"
        );
        assert!(!rule_allows(
            &rule,
            &with(get("ns", "", "configmaps", "a"), "delete", "")
        ));
        assert!(!rule_allows(&rule, &get("ns", "apps", "configmaps", "a")));
        let wild = json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]});
        assert!(rule_allows(
            &wild,
            &with(get("", "apps", "deployments", ""), "delete", "scale")
        ));
    }

    #[test]
    fn subresources_match_as_resource_matches_does() {
        let rule = json!({"apiGroups": [""], "resources": ["*/status", "pods/*", "services"],
                          "verbs": ["get"]});
        let pods = get("ns", "", "pods", "");
        assert!(rule_allows(&rule, &with(pods.clone(), "get", "status")));
        assert!(
            !rule_allows(&rule, &with(pods.clone(), "get", "log")),
            "resource/* is no wildcard"
        );
        assert!(!rule_allows(&rule, &pods));
        assert!(rule_allows(&rule, &get("ns", "", "services", "")));
        assert!(!rule_allows(
            &rule,
            &with(get("ns", "", "services", ""), "get", "proxy")
        ));
    }

    #[test]
    fn non_resource_urls_match_exactly_or_by_prefix() {
        let rule = json!({"nonResourceURLs": ["/exact", "/tree/*"], "verbs": ["get"]});
        let at = |path: &str, verb: &str| Attributes::NonResource {
            path: path.into(),
            verb: verb.into(),
        };
        assert!(rule_allows(&rule, &at("/exact", "get")));
        assert!(!rule_allows(&rule, &at("/exact/more", "get")));
        assert!(rule_allows(&rule, &at("/tree/a/b", "get")));
        assert!(!rule_allows(&rule, &at("/tree", "get")));
        assert!(!rule_allows(&rule, &at("/exact", "post")));
    }

    #[test]
    fn role_bindings_grant_in_their_namespace_only() {
        let store = store_with(&[
            (
                "roles",
                "app",
                role(
                    "reader",
                    json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]),
                ),
            ),
            (
                "rolebindings",
                "app",
                binding(
                    "web",
                    "Role",
                    "reader",
                    json!([{"kind": "ServiceAccount", "name": "web"}]),
                ),
            ),
        ]);
        let allowed = authorize(&store, &sa("app", "web"), &get("app", "", "pods", "p"));
        assert_eq!(
            allowed,
            Decision {
                allowed: true,
                reason: r#"RBAC: allowed by RoleBinding "web/app" of Role "reader" to ServiceAccount "web/app""#.into()
            }
        );
        for (user, attributes) in [
            (sa("app", "web"), get("other", "", "pods", "p")),
            (sa("other", "web"), get("app", "", "pods", "p")),
            (
                sa("app", "web"),
                with(get("app", "", "pods", "p"), "list", ""),
            ),
            (sa("app", "web"), get("", "", "pods", "p")),
        ] {
            assert!(
                !authorize(&store, &user, &attributes).allowed,
                "{user:?} {attributes:?}"
            );
        }
    }

    #[test]
    fn cluster_roles_through_either_binding() {
        let rules = json!([{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list"]},
                           {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]);
        let store = store_with(&[
            ("clusterroles", "", role("deploys", rules)),
            (
                "rolebindings",
                "app",
                binding(
                    "devs",
                    "ClusterRole",
                    "deploys",
                    json!([{"kind": "Group", "name": "devs"}]),
                ),
            ),
            (
                "clusterrolebindings",
                "",
                binding(
                    "alice",
                    "ClusterRole",
                    "deploys",
                    json!([{"kind": "User", "name": "alice"}]),
                ),
            ),
        ]);
        let list = |ns: &str| with(get(ns, "apps", "deployments", ""), "list", "");
        let dev = User {
            name: "bob".into(),
            groups: vec!["devs".into()],
        };
        let d = authorize(&store, &dev, &list("app"));
        assert!(d.allowed);
        assert_eq!(
            d.reason,
            r#"RBAC: allowed by RoleBinding "devs/app" of ClusterRole "deploys" to Group "devs""#
        );
        assert!(!authorize(&store, &dev, &list("other")).allowed);
        let metrics = Attributes::NonResource {
            path: "/metrics".into(),
            verb: "get".into(),
        };
        assert!(
            !authorize(&store, &dev, &metrics).allowed,
            "non-resource URLs only through ClusterRoleBindings"
        );
        let alice = User {
            name: "alice".into(),
            groups: Vec::new(),
        };
        for attributes in [list("app"), list("other"), list(""), metrics] {
            let d = authorize(&store, &alice, &attributes);
            assert_eq!(
                d.reason,
                r#"RBAC: allowed by ClusterRoleBinding "alice" of ClusterRole "deploys" to User "alice""#
            );
        }
    }

    #[test]
    fn superusers_and_missing_roles() {
        let store = store_with(&[
            (
                "rolebindings",
                "app",
                binding("a", "Role", "gone", json!([{"kind": "User", "name": "u"}])),
            ),
            (
                "clusterrolebindings",
                "",
                binding(
                    "b",
                    "ClusterRole",
                    "gone2",
                    json!([{"kind": "User", "name": "u"}]),
                ),
            ),
        ]);
        let u = User {
            name: "u".into(),
            groups: Vec::new(),
        };
        let d = authorize(&store, &u, &get("app", "", "pods", ""));
        assert_eq!(
            d,
            Decision {
                allowed: false,
                reason: r#"RBAC: [clusterrole.rbac.authorization.k8s.io "gone2" not found, role.rbac.authorization.k8s.io "gone" not found]"#.into()
            }
        );
        let master = User {
            name: "root".into(),
            groups: vec![SUPERUSER_GROUP.into()],
        };
        assert_eq!(
            authorize(&store, &master, &get("app", "", "secrets", "")),
            Decision {
                allowed: true,
                reason: String::new()
            }
        );
    }

    #[test]
    fn a_cluster_role_binding_needs_a_service_account_namespace() {
        let subject = json!({"kind": "ServiceAccount", "name": "web"});
        assert!(!applies_to(&sa("app", "web"), &subject, ""));
        assert!(applies_to(&sa("app", "web"), &subject, "app"));
        let qualified = json!({"kind": "ServiceAccount", "name": "web", "namespace": "x"});
        assert!(applies_to(&sa("x", "web"), &qualified, "app"));
    }

    #[test]
    fn reviews_are_validated_and_answered() {
        let store = Store::new(10, 4);
        let ask = |spec: Value| {
            review(
                &store,
                json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                       "spec": spec})
                .to_string()
                .as_bytes(),
            )
        };
        let answer = ask(json!({"groups": ["system:masters"], "user": "",
            "resourceAttributes": {"verb": "get", "resource": "pods", "name": ""}}))
        .unwrap();
        assert_eq!(answer["status"], json!({"allowed": true}));
        assert_eq!(
            answer["spec"],
            json!({"groups": ["system:masters"], "resourceAttributes": {"verb": "get", "resource": "pods"}})
        );
        assert_eq!(answer["metadata"], json!({"creationTimestamp": null}));
        let denied = ask(json!({"user": "x", "nonResourceAttributes": {}})).unwrap();
        assert_eq!(denied["status"], json!({"allowed": false}));
        let e = ask(json!({})).unwrap_err();
        assert_eq!(e.code().as_u16(), 422);
        assert_eq!(
            e.to_string(),
            r#".authorization.k8s.io "" is invalid: [spec.resourceAttributes: Invalid value: "null": exactly one of nonResourceAttributes or resourceAttributes must be specified, spec.user: Invalid value: "": at least one of user or group must be specified]"#
        );
        let e = ask(json!({"user": "x", "resourceAttributes": {},
                           "nonResourceAttributes": {"path": "/x", "verb": "get"}}))
        .unwrap_err();
        assert_eq!(
            e.to_status()["details"]["causes"][0]["message"],
            r#"Invalid value: authorization.NonResourceAttributes{Path:"/x", Verb:"get"}: cannot be specified in combination with resourceAttributes"#
        );
    }
}
