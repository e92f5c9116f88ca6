//! The RBAC kinds (`rbac.authorization.k8s.io/v1`): stored, defaulted and
//! validated as kube-apiserver 1.20 does (`pkg/apis/rbac/validation`), but
//! not enforced: every request is allowed whatever the roles say. A
//! `SubjectAccessReview` evaluates them ([`crate::authz`]).

use serde_json::{Value, json};

use crate::resources::{NameRule, ResourceDef};
use crate::status::{ApiError, Cause, Subject};
use crate::validation::name_problem;

/// The RBAC API group.
pub const GROUP: &str = "rbac.authorization.k8s.io";

/// Fills what the real server defaults on a write: a role's `rules` read
/// back as `null` when absent, a User or Group subject's `apiGroup`.
pub fn default(def: &ResourceDef, object: &mut Value) {
    let Some(o) = object.as_object_mut() else {
        return;
    };
    if def.kind.ends_with("Role") {
        // `rules` has no omitempty.
        o.entry("rules").or_insert(Value::Null);
        return;
    }
    if let Some(subjects) = o.get_mut("subjects").and_then(Value::as_array_mut) {
        for s in subjects.iter_mut().filter_map(Value::as_object_mut) {
            let kind = s.get("kind").and_then(Value::as_str).unwrap_or_default();
            let empty = s
                .get("apiGroup")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty);
            if empty && (kind == "User" || kind == "Group") {
                s.insert("apiGroup".into(), json!(GROUP));
            }
        }
    }
}

fn required(field: &str, detail: &str) -> Cause {
    let mut c = Cause::required(field, detail);
    if detail.is_empty() {
        c.message = "Required value".into();
    }
    c
}

fn not_supported(field: &str, value: &str, supported: &[&str]) -> Cause {
    let supported: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    Cause {
        reason: "FieldValueNotSupported".into(),
        message: format!(
            "Unsupported value: {value:?}: supported values: {}",
            supported.join(", ")
        ),
        field: field.into(),
    }
}

fn text<'a>(v: &'a Value, field: &str) -> &'a str {
    v[field].as_str().unwrap_or_default()
}

fn len(v: &Value) -> usize {
    v.as_array().map_or(0, Vec::len)
}

fn rule_causes(rule: &Value, namespaced: bool, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    if len(&rule["verbs"]) == 0 {
        causes.push(required(
            &format!("{path}.verbs"),
            "verbs must contain at least one value",
        ));
    }
    if len(&rule["nonResourceURLs"]) > 0 {
        let urls = format!(
            "[]string{{{}}}",
            rule["nonResourceURLs"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|u| format!("{:?}", u.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let invalid = |why: &str| Cause {
            reason: "FieldValueInvalid".into(),
            message: format!("Invalid value: {urls}: {why}"),
            field: format!("{path}.nonResourceURLs"),
        };
        if namespaced {
            causes.push(invalid(
                "namespaced rules cannot apply to non-resource URLs",
            ));
        }
        if len(&rule["apiGroups"]) > 0
            || len(&rule["resources"]) > 0
            || len(&rule["resourceNames"]) > 0
        {
            causes.push(invalid(
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        return causes;
    }
    if len(&rule["apiGroups"]) == 0 {
        causes.push(required(
            &format!("{path}.apiGroups"),
            "resource rules must supply at least one api group",
        ));
    }
    if len(&rule["resources"]) == 0 {
        causes.push(required(
            &format!("{path}.resources"),
            "resource rules must supply at least one resource",
        ));
    }
    causes
}

fn subject_causes(subject: &Value, namespaced: bool, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let name = text(subject, "name");
    let api_group = text(subject, "apiGroup");
    if name.is_empty() {
        causes.push(required(&format!("{path}.name"), ""));
    }
    match text(subject, "kind") {
        "ServiceAccount" => {
            if let Some(problem) = (!name.is_empty())
                .then(|| name_problem(NameRule::Subdomain, name))
                .flatten()
            {
                causes.push(Cause::invalid(&format!("{path}.name"), name, &problem));
            }
            if !api_group.is_empty() {
                causes.push(not_supported(&format!("{path}.apiGroup"), api_group, &[""]));
            }
            if !namespaced && text(subject, "namespace").is_empty() {
                causes.push(required(&format!("{path}.namespace"), ""));
            }
        }
        "User" | "Group" => {
            if api_group != GROUP {
                causes.push(not_supported(
                    &format!("{path}.apiGroup"),
                    api_group,
                    &[GROUP],
                ));
            }
        }
        other => causes.push(not_supported(
            &format!("{path}.kind"),
            other,
            &["ServiceAccount", "User", "Group"],
        )),
    }
    causes
}

/// The roleRef as 1.20 prints it in "cannot change roleRef" (Go's `%#v`).
fn role_ref_dump(role_ref: &Value) -> String {
    format!(
        "rbac.RoleRef{{APIGroup:{:?}, Kind:{:?}, Name:{:?}}}",
        text(role_ref, "apiGroup"),
        text(role_ref, "kind"),
        text(role_ref, "name")
    )
}

/// Validates an RBAC object of `def` named `name`; `old` is the stored
/// object an update replaces (`None` for a create).
///
/// # Errors
/// [`ApiError::Invalid`] with every broken rule.
pub fn validate(
    def: &ResourceDef,
    name: &str,
    object: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let mut causes = Vec::new();
    if def.kind.ends_with("Role") {
        for (i, rule) in object["rules"].as_array().into_iter().flatten().enumerate() {
            causes.extend(rule_causes(rule, def.namespaced, &format!("rules[{i}]")));
        }
        if def.kind == "ClusterRole"
            && object["aggregationRule"].is_object()
            && len(&object["aggregationRule"]["clusterRoleSelectors"]) == 0
        {
            causes.push(required(
                "aggregationRule.clusterRoleSelectors",
                "at least one clusterRoleSelector required if aggregationRule is non-nil",
            ));
        }
    } else {
        let role_ref = &object["roleRef"];
        let api_group = text(role_ref, "apiGroup");
        if api_group != GROUP {
            causes.push(not_supported("roleRef.apiGroup", api_group, &[GROUP]));
        }
        let kind = text(role_ref, "kind");
        let kinds: &[&str] = if def.namespaced {
            &["Role", "ClusterRole"]
        } else {
            &["ClusterRole"]
        };
        if !kinds.contains(&kind) {
            causes.push(not_supported("roleRef.kind", kind, kinds));
        }
        let role = text(role_ref, "name");
        if role.is_empty() {
            causes.push(required("roleRef.name", ""));
        } else if let Some(problem) = name_problem(NameRule::PathSegment, role) {
            causes.push(Cause::invalid("roleRef.name", role, &problem));
        }
        for (i, subject) in object["subjects"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            causes.extend(subject_causes(
                subject,
                def.namespaced,
                &format!("subjects[{i}]"),
            ));
        }
        if let Some(old) = old {
            let same = ["apiGroup", "kind", "name"]
                .iter()
                .all(|f| text(role_ref, f) == text(&old["roleRef"], f));
            if !same {
                causes.push(Cause {
                    reason: "FieldValueInvalid".into(),
                    message: format!(
                        "Invalid value: {}: cannot change roleRef",
                        role_ref_dump(role_ref)
                    ),
                    field: "roleRef".into(),
                });
            }
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::Invalid(
            Subject::new(&def.group, &def.kind, name),
            causes,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(plural: &str) -> ResourceDef {
        (*crate::builtins::registry()
            .get(GROUP, "v1", plural)
            .unwrap())
        .clone()
    }

    #[test]
    fn rules_need_verbs_groups_and_resources() {
        let roles = def("roles");
        let ok = json!({"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]});
        validate(&roles, "r", &ok, None).unwrap();
        let bad = json!({"rules": [{}, {"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]});
        let ApiError::Invalid(_, causes) = validate(&roles, "r", &bad, None).unwrap_err() else {
            panic!("not Invalid")
        };
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "rules[0].verbs",
                "rules[0].apiGroups",
                "rules[0].resources",
                "rules[1].nonResourceURLs"
            ]
        );
    }

    #[test]
    fn bindings_check_their_role_ref_and_subjects() {
        let bindings = def("clusterrolebindings");
        let mut b = json!({
            "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "alice"}, {"kind": "ServiceAccount", "name": "op"}],
        });
        default(&bindings, &mut b);
        assert_eq!(b["subjects"][0]["apiGroup"], GROUP);
        let ApiError::Invalid(_, causes) = validate(&bindings, "b", &b, None).unwrap_err() else {
            panic!("not Invalid")
        };
        assert_eq!(causes[0].field, "subjects[1].namespace");
        b["subjects"][1]["namespace"] = json!("ops");
        validate(&bindings, "b", &b, None).unwrap();
        let mut changed = b.clone();
        changed["roleRef"]["name"] = json!("edit");
        let e = validate(&bindings, "b", &changed, Some(&b)).unwrap_err();
        assert!(e.to_string().contains("cannot change roleRef"), "{e}");
    }
}
