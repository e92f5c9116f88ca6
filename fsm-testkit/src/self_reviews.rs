//! The reviews a caller asks about itself (`authorization.k8s.io/v1`):
//! `SelfSubjectAccessReview` (what `kubectl auth can-i VERB RESOURCE`
//! sends) and `SelfSubjectRulesReview` (`kubectl auth can-i --list`).
//!
//! Who asks ([`requester`]): the user of a ServiceAccount token this
//! server issued (`Authorization: Bearer`), or the user a request
//! impersonates (`Impersonate-User`, `Impersonate-Group`: what `kubectl
//! --as`/`--as-group` send), else the server's admin, in
//! `system:masters`: the embedded server checks no other credentials and
//! allows every request, as the real server allows its admin.
//!
//! An access review is decided by [`crate::authz::authorize`]. A rules
//! review lists the rules of the roles bound to the caller: first those of
//! the real server's bootstrap ClusterRoleBindings that apply to it (the
//! bootstrap policy is not stored here, but what it grants every
//! authenticated user and `system:masters` is what a real cluster
//! answers), then those of the stored ClusterRoleBindings and of the
//! namespace's RoleBindings.
//!
//! # Caveats
//! The real server's rules come in its cache's order; here the bootstrap
//! ones come first (in the order 1.20 answers them to its admin), then
//! the stored bindings' in name order. Impersonation is not authorized
//! (the embedded server allows it to everyone).

use http::HeaderMap;
use k8s_openapi::api::authorization::v1::{SelfSubjectAccessReview, SelfSubjectRulesReview};
use serde_json::{Value, json};

use crate::authz::{self, Attributes, SUPERUSER_GROUP, User};
use crate::resources::GroupResource;
use crate::reviews::{self, SELF_SUBJECT_ACCESS_REVIEW, SELF_SUBJECT_RULES_REVIEW};
use crate::status::{ApiError, Subject};
use crate::store::Store;

/// The name of the server's admin (any request without a token of this
/// server's nor impersonation).
pub const ADMIN: &str = "admin";

const AUTHENTICATED: &str = "system:authenticated";
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// The bootstrap policy's grants, in the order 1.20 lists their rules to
/// its admin: the group a bootstrap ClusterRoleBinding binds, and its
/// ClusterRole's rules.
fn bootstrap() -> [(&'static str, Value); 4] {
    [
        // system:discovery
        (
            AUTHENTICATED,
            json!([{"verbs": ["get"], "nonResourceURLs": [
                "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez",
                "/openapi", "/openapi/*", "/readyz", "/version", "/version/"]}]),
        ),
        // cluster-admin
        (
            SUPERUSER_GROUP,
            json!([
                {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
                {"verbs": ["*"], "nonResourceURLs": ["*"]},
            ]),
        ),
        // system:basic-user
        (
            AUTHENTICATED,
            json!([{"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
                "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]}]),
        ),
        // system:public-info-viewer
        (
            AUTHENTICATED,
            json!([{"verbs": ["get"], "nonResourceURLs": [
                "/healthz", "/livez", "/readyz", "/version", "/version/"]}]),
        ),
    ]
}

fn header_values<'a>(headers: &'a HeaderMap, name: &str) -> Vec<&'a str> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect()
}

/// Who a request comes from (see the module's documentation).
#[must_use]
pub fn requester(store: &Store, headers: &HeaderMap) -> User {
    if let Some(name) = header_values(headers, "impersonate-user").first() {
        let mut groups: Vec<String> = header_values(headers, "impersonate-group")
            .into_iter()
            .map(String::from)
            .collect();
        if let Some(ns) = name
            .strip_prefix("system:serviceaccount:")
            .and_then(|rest| rest.split_once(':').map(|(ns, _)| ns))
            .filter(|_| groups.is_empty())
        {
            groups = vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{ns}"),
            ];
        }
        if !groups.iter().any(|g| g == AUTHENTICATED) {
            groups.push(AUTHENTICATED.into());
        }
        return User {
            name: (*name).to_string(),
            groups,
        };
    }
    let token = header_values(headers, "authorization")
        .first()
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    if let Some(Ok(info)) = token.map(|t| crate::authn::authenticate(store, t)) {
        return User {
            name: info.username,
            groups: info.groups,
        };
    }
    User {
        name: ADMIN.into(),
        groups: vec![SUPERUSER_GROUP.into(), AUTHENTICATED.into()],
    }
}

/// Answers a `SelfSubjectAccessReview` of `user`: the review with its
/// `status` as [`authz::authorize`] decides. Nothing is stored.
///
/// # Errors
/// `400` for a body that does not decode; `422` for neither or both of
/// the attributes, or metadata that is not empty (1.20's validation).
pub fn access_review(store: &Store, user: &User, bytes: &[u8]) -> Result<Value, ApiError> {
    let review = SELF_SUBJECT_ACCESS_REVIEW;
    let (body, typed) = reviews::decode::<SelfSubjectAccessReview>(&review, bytes)?;
    let spec = &typed.spec;
    let mut causes = authz::attribute_causes(
        spec.resource_attributes.as_ref(),
        spec.non_resource_attributes.as_ref(),
    );
    causes.extend(authz::metadata_causes(&body));
    let attributes: Attributes = match (&spec.resource_attributes, &spec.non_resource_attributes) {
        _ if !causes.is_empty() => {
            return Err(ApiError::Invalid(
                Subject::new(review.group, "", ""),
                causes,
            ));
        }
        (Some(r), _) => authz::resource_attributes(r),
        (None, Some(n)) => authz::non_resource_attributes(n),
        (None, None) => {
            return Err(ApiError::Internal(
                "a review without attributes passed validation".into(),
            ));
        }
    };
    let decision = authz::authorize(store, user, &attributes);
    let mut status = json!({"allowed": decision.allowed});
    if !decision.reason.is_empty() {
        status["reason"] = json!(decision.reason);
    }
    Ok(json!({
        "kind": review.kind,
        "apiVersion": review.api_version(),
        "metadata": reviews::answer_metadata(&body),
        "spec": authz::echo_spec(&body["spec"]),
        "status": status,
    }))
}

/// Answers a `SelfSubjectRulesReview` of `user`: the rules of the roles
/// bound to it in `spec.namespace`, split into resource and non-resource
/// rules as 1.20 writes them; a role a binding names that is missing is
/// its `evaluationError`. Nothing is stored.
///
/// # Errors
/// `400` for a body that does not decode or names no namespace (`no
/// namespace on request`).
pub fn rules_review(store: &Store, user: &User, bytes: &[u8]) -> Result<Value, ApiError> {
    let review = SELF_SUBJECT_RULES_REVIEW;
    let (_, typed) = reviews::decode::<SelfSubjectRulesReview>(&review, bytes)?;
    let namespace = typed.spec.namespace.unwrap_or_default();
    if namespace.is_empty() {
        return Err(ApiError::BadRequest("no namespace on request".into()));
    }
    let mut rules: Vec<Value> = Vec::new();
    for (group, granted) in bootstrap() {
        if user.groups.iter().any(|g| g == group) {
            rules.extend(granted.as_array().into_iter().flatten().cloned());
        }
    }
    let mut errors = Vec::new();
    let rbac = |resource: &str| GroupResource {
        group: RBAC_GROUP.into(),
        resource: resource.into(),
    };
    let bindings = store
        .list(&rbac("clusterrolebindings"), Some(""))
        .into_iter()
        .map(|b| (b, String::new()))
        .chain(
            store
                .list(&rbac("rolebindings"), Some(&namespace))
                .into_iter()
                .map(|b| (b, namespace.clone())),
        );
    for (binding, ns) in bindings {
        let subjects = binding["subjects"].as_array().cloned().unwrap_or_default();
        if !subjects.iter().any(|s| authz::applies_to(user, s, &ns)) {
            continue;
        }
        let role_ref = &binding["roleRef"];
        let (kind, name) = (
            role_ref["kind"].as_str().unwrap_or_default(),
            role_ref["name"].as_str().unwrap_or_default(),
        );
        let role = match kind {
            "Role" if !ns.is_empty() => store.get(&rbac("roles"), &ns, name),
            "ClusterRole" => store.get(&rbac("clusterroles"), "", name),
            _ => None,
        };
        match role {
            Some(role) => rules.extend(role["rules"].as_array().into_iter().flatten().cloned()),
            None => errors.push(format!(
                "{}.{RBAC_GROUP} {name:?} not found",
                kind.to_lowercase()
            )),
        }
    }
    let mut status = json!({
        "resourceRules": resource_rules(&rules),
        "nonResourceRules": non_resource_rules(&rules),
        "incomplete": false,
    });
    if !errors.is_empty() {
        status["evaluationError"] = json!(format!("[{}]", errors.join(", ")));
    }
    Ok(json!({
        "kind": review.kind,
        "apiVersion": review.api_version(),
        "metadata": {"creationTimestamp": null},
        "spec": {},
        "status": status,
    }))
}

/// Keeps the non-empty `fields` of `rule`, `verbs` always.
fn rule_with(rule: &Value, fields: &[&str]) -> Value {
    let mut out = json!({"verbs": rule.get("verbs").cloned().unwrap_or_else(|| json!([]))});
    for field in fields {
        if let Some(v) = rule.get(*field).filter(|v| !reviews::is_empty(v)) {
            out[*field] = v.clone();
        }
    }
    out
}

/// The rules that name no non-resource URL, as `ResourceRule`s.
fn resource_rules(rules: &[Value]) -> Vec<Value> {
    rules
        .iter()
        .filter(|r| reviews::is_empty(r.get("nonResourceURLs").unwrap_or(&Value::Null)))
        .map(|r| rule_with(r, &["apiGroups", "resources", "resourceNames"]))
        .collect()
}

/// The rules that name non-resource URLs, as `NonResourceRule`s.
fn non_resource_rules(rules: &[Value]) -> Vec<Value> {
    rules
        .iter()
        .filter(|r| !reviews::is_empty(r.get("nonResourceURLs").unwrap_or(&Value::Null)))
        .map(|r| rule_with(r, &["nonResourceURLs"]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn the_requester_is_the_admin_or_whom_it_impersonates() {
        let store = Store::new(10, 4);
        let admin = requester(&store, &headers(&[("authorization", "Bearer not-ours")]));
        assert_eq!(admin.name, ADMIN);
        assert!(admin.groups.iter().any(|g| g == SUPERUSER_GROUP));
        let sa = requester(
            &store,
            &headers(&[("impersonate-user", "system:serviceaccount:ns:bot")]),
        );
        assert_eq!(
            sa.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:ns",
                AUTHENTICATED
            ]
        );
        let jane = requester(
            &store,
            &headers(&[("impersonate-user", "jane"), ("impersonate-group", "devs")]),
        );
        assert_eq!(jane.groups, ["devs", AUTHENTICATED]);
    }

    #[test]
    fn the_admin_may_do_anything_and_a_stranger_little() {
        let store = Store::new(10, 4);
        let admin = requester(&store, &HeaderMap::new());
        let body = br#"{"spec": {"resourceAttributes": {"verb": "get", "resource": "pods", "namespace": "x"}}}"#;
        let answer = access_review(&store, &admin, body).unwrap();
        assert_eq!(answer["status"], json!({"allowed": true}));
        assert_eq!(answer["spec"]["resourceAttributes"]["resource"], "pods");
        let jane = requester(&store, &headers(&[("impersonate-user", "jane")]));
        let answer = access_review(&store, &jane, body).unwrap();
        assert_eq!(answer["status"], json!({"allowed": false}));
        let e = access_review(&store, &admin, br#"{"spec": {}}"#).unwrap_err();
        assert_eq!(e.code().as_u16(), 422);
    }

    #[test]
    fn rules_are_the_bootstrap_grants_then_the_stored_bindings() {
        let store = Store::new(10, 4);
        let admin = requester(&store, &HeaderMap::new());
        let answer = rules_review(&store, &admin, br#"{"spec": {"namespace": "x"}}"#).unwrap();
        let status = &answer["status"];
        assert_eq!(status["resourceRules"][0]["resources"], json!(["*"]));
        assert_eq!(status["resourceRules"].as_array().map(Vec::len), Some(2));
        assert_eq!(status["nonResourceRules"].as_array().map(Vec::len), Some(3));
        assert_eq!(status["incomplete"], false);
        let e = rules_review(&store, &admin, br#"{"spec": {}}"#).unwrap_err();
        assert_eq!(e.to_string(), "no namespace on request");
    }
}
