//! The machine's admission rules as a `ValidatingAdmissionPolicy` (CEL,
//! `admissionregistration.k8s.io/v1`, Kubernetes 1.30+; beta from 1.28),
//! for clusters that check them in the API server instead of calling the
//! operator's webhook. Only for the status store: CEL sees the object,
//! not a record kept in a ConfigMap.
//!
//! The rules are those [`judge_admission`](super::judge_admission)
//! applies; a grow-only field holding a quantity string compares with the
//! Kubernetes `quantity` library (1.29+).

use fsm_core::Machine;
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use serde_json::{Value, json};

use crate::records::ResourceInfo;

/// CEL's reserved words, escaped as `__word__` where a field has that name.
const RESERVED: [&str; 21] = [
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// The policy and its binding enforcing `machine`'s admission rules on
/// `resource`, writes of `.status.fsm` allowed to `operators` only (user
/// names; none: not guarded).
///
/// ```
/// use fsm_core::{Machine, StateMeta};
/// use fsm_kube::admission_policy;
/// use fsm_kube::records::ResourceInfo;
///
/// static STATES: [StateMeta; 2] = [
///     StateMeta::new("Serving").initial().ready().final_state().immutable(&["spec.engine"]),
///     StateMeta::new("Failed").failed(),
/// ];
/// static MACHINE: Machine = Machine::new("Db", &STATES);
/// let resource = ResourceInfo {
///     group: "example.io".into(), version: "v1".into(), kind: "Database".into(),
///     plural: "databases".into(), namespaced: true,
/// };
/// let (policy, binding) =
///     admission_policy(&MACHINE, &resource, &["system:serviceaccount:ops:db".to_owned()]);
/// let spec = policy.spec.unwrap();
/// let messages: Vec<String> =
///     spec.validations.unwrap().into_iter().filter_map(|v| v.message).collect();
/// assert!(messages.iter().any(|m| m.contains("spec.engine may not change while")));
/// assert_eq!(binding.spec.unwrap().policy_name, policy.metadata.name);
/// ```
pub fn admission_policy(
    machine: &Machine,
    resource: &ResourceInfo,
    operators: &[String],
) -> (ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding) {
    let name = format!("fsm.{}.{}", resource.plural, resource.group);
    let policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"matchPolicy": "Equivalent", "resourceRules": [{
                "apiGroups": [resource.group],
                // Writes at other versions are converted to this one
                // first (`matchPolicy: Equivalent`): the rules' paths are
                // its fields.
                "apiVersions": [resource.version],
                "operations": ["CREATE", "UPDATE", "DELETE"],
                "resources": [resource.plural, format!("{}/status", resource.plural)],
                "scope": "*",
            }]},
            "variables": variables(),
            "validations": validations(machine, operators),
        },
    });
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    });
    (
        serde_json::from_value(policy).unwrap_or_default(),
        serde_json::from_value(binding).unwrap_or_default(),
    )
}

/// The record before and after, and the state it says the object is in
/// (`''` without one).
fn variables() -> Value {
    json!([
        {"name": "oldRecord", "expression":
            "oldObject != null && has(oldObject.status) && has(oldObject.status.fsm) ? oldObject.status.fsm : null"},
        {"name": "newRecord", "expression":
            "object != null && has(object.status) && has(object.status.fsm) ? object.status.fsm : null"},
        {"name": "state", "expression":
            "variables.oldRecord != null && has(variables.oldRecord.state) ? variables.oldRecord.state : ''"},
    ])
}

fn validations(machine: &Machine, operators: &[String]) -> Vec<Value> {
    let mut validations = Vec::new();
    if !operators.is_empty() {
        validations.push(json!({
            "expression": format!(
                "request.userInfo.username in {} || request.operation == 'DELETE' || \
                 variables.newRecord == variables.oldRecord",
                string_list(operators.iter().map(String::as_str))
            ),
            "message": ".status.fsm is written by its operator only; act on the workflow with \
                        `kubectl fsm` (pause, resume, retry, goto, signal)",
            "reason": "Forbidden",
        }));
    }
    for state in machine.states() {
        if !state.has_admission_rules() {
            continue;
        }
        let names = std::iter::once(state.name()).chain(state.former_names().iter().copied());
        let outside = format!("!(variables.state in {})", string_list(names));
        for path in state.immutable_fields() {
            let (new, old) = (access("object", path), access("oldObject", path));
            let (new_here, old_here) = (presence("object", path), presence("oldObject", path));
            validations.push(json!({
                "expression": format!(
                    "request.operation != 'UPDATE' || {outside} || \
                     (({new_here}) == ({old_here}) && (!({new_here}) || {new} == {old}))"
                ),
                "message": format!("{path} may not change while the object is {}", state.name()),
                "reason": "Invalid",
            }));
        }
        for path in state.grow_only_fields() {
            let (new, old) = (access("object", path), access("oldObject", path));
            let (new_here, old_here) = (presence("object", path), presence("oldObject", path));
            validations.push(json!({
                "expression": format!(
                    "request.operation != 'UPDATE' || {outside} || !({old_here}) || \
                     (({new_here}) && (type({new}) == string ? \
                     quantity({new}).compareTo(quantity({old})) >= 0 : {new} >= {old}))"
                ),
                "message": format!("{path} may not shrink while the object is {}", state.name()),
                "reason": "Invalid",
            }));
        }
        if state.is_delete_refused() {
            validations.push(json!({
                "expression": format!("request.operation != 'DELETE' || {outside}"),
                "message": format!(
                    "the object is {}, a state in which it may not be deleted; move it on first",
                    state.name()
                ),
                "reason": "Forbidden",
            }));
        }
    }
    validations
}

/// `['a', 'b']`.
fn string_list<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let quoted: Vec<String> = items.into_iter().map(quoted).collect();
    format!("[{}]", quoted.join(", "))
}

/// `'text'`, a CEL string literal.
fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// One step of a path: how to read it from its parent, and how to ask
/// whether the parent has it.
fn step(parent: &str, segment: &str, in_map: bool) -> (String, String) {
    if in_map {
        let key = quoted(segment);
        (format!("{parent}[{key}]"), format!("{key} in {parent}"))
    } else {
        let field = escaped(segment);
        (
            format!("{parent}.{field}"),
            format!("has({parent}.{field})"),
        )
    }
}

/// The steps of `path` from `root`: labels and annotations are maps
/// (indexed by key), the rest fields.
fn steps(root: &str, path: &str) -> Vec<(String, String)> {
    let segments: Vec<&str> = path.split('.').collect();
    let mut parent = root.to_owned();
    let mut steps = Vec::new();
    for (i, segment) in segments.iter().enumerate() {
        let in_map = i >= 2 && matches!(segments[..2], ["metadata", "labels" | "annotations"]);
        let (read, has) = step(&parent, segment, in_map);
        parent.clone_from(&read);
        steps.push((read, has));
    }
    steps
}

/// The CEL reading `path` of `root`.
fn access(root: &str, path: &str) -> String {
    steps(root, path)
        .pop()
        .map_or_else(|| root.to_owned(), |(read, _)| read)
}

/// The CEL saying whether `root` has `path`.
fn presence(root: &str, path: &str) -> String {
    let checks: Vec<String> = steps(root, path).into_iter().map(|(_, has)| has).collect();
    checks.join(" && ")
}

/// A field name as Kubernetes' CEL spells it.
fn escaped(name: &str) -> String {
    if RESERVED.contains(&name) {
        return format!("__{name}__");
    }
    let name = name.replace("__", "__underscores__");
    name.replace('.', "__dot__")
        .replace('-', "__dash__")
        .replace('/', "__slash__")
}

#[cfg(test)]
mod tests;
