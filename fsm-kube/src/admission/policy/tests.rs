//! The policy's CEL, evaluated by a CEL interpreter, decides as
//! [`judge_admission`] does on the same changes. (The interpreter has
//! neither Kubernetes' `quantity` library nor `type()`: a shim gives
//! `type()`, and grow-only fields are compared as numbers here.)

use std::collections::HashMap;
use std::sync::Arc;

use cel::{Context, Program, Value as Cel};
use fsm_core::StateMeta;
use serde_json::json;

use super::*;
use crate::admission::{AdmissionChange, AdmissionOperation, judge_admission};

static STATES: [StateMeta; 3] = [
    StateMeta::new("Provisioning")
        .initial()
        .with_handler()
        .next(&["Serving"]),
    StateMeta::new("Serving")
        .ready()
        .with_handler()
        .next(&["Failed"])
        .renamed_from(&["Running"])
        .immutable(&["spec.engine", "metadata.labels.tier"])
        .grow_only(&["spec.storageGi"])
        .refuses_delete(),
    StateMeta::new("Failed").failed(),
];
static MACHINE: Machine = Machine::new("Db", &STATES);
const OPERATOR: &str = "system:serviceaccount:ops:db-operator";

fn resource() -> ResourceInfo {
    ResourceInfo {
        group: "example.io".into(),
        version: "v1".into(),
        kind: "Database".into(),
        plural: "databases".into(),
        namespaced: true,
    }
}

fn db(state: Option<&str>, engine: &str, storage: i64, tier: Option<&str>) -> Value {
    let mut object = json!({
        "apiVersion": "example.io/v1", "kind": "Database",
        "metadata": {"name": "orders", "namespace": "shop", "labels": {}},
        "spec": {"engine": engine, "storageGi": storage},
    });
    if let Some(tier) = tier {
        object["metadata"]["labels"]["tier"] = json!(tier);
    }
    if let Some(state) = state {
        object["status"] = json!({"fsm": {"state": state, "attempt": 0}});
    }
    object
}

fn cel_value(value: &Value) -> Cel {
    cel::to_value(value).unwrap_or(Cel::Null)
}

/// Whether the policy admits `operation` of `old` → `new` by `user`.
fn policy_admits(operation: &str, user: &str, old: Option<&Value>, new: Option<&Value>) -> bool {
    let (policy, _) = admission_policy(&MACHINE, &resource(), &[OPERATOR.to_owned()]);
    let spec = policy.spec.expect("a spec");
    let mut context = Context::default();
    context.add_variable_from_value("object", new.map_or(Cel::Null, cel_value));
    context.add_variable_from_value("oldObject", old.map_or(Cel::Null, cel_value));
    let request = json!({"operation": operation, "userInfo": {"username": user}});
    context.add_variable_from_value("request", cel_value(&request));
    context.add_variable_from_value("string", Cel::String(Arc::new("string".to_owned())));
    context.add_function("type", |value: Cel| -> Arc<String> {
        Arc::new(
            match value {
                Cel::String(_) => "string",
                Cel::Int(_) | Cel::UInt(_) => "int",
                Cel::Float(_) => "double",
                _ => "other",
            }
            .to_owned(),
        )
    });
    let mut variables: HashMap<String, Cel> = HashMap::new();
    for variable in spec.variables.unwrap_or_default() {
        let program = Program::compile(&variable.expression).expect("the variable compiles");
        let value = program
            .execute(&context)
            .unwrap_or_else(|e| panic!("{}: {e:?}", variable.expression));
        variables.insert(variable.name, value);
        context.add_variable_from_value("variables", variables.clone());
    }
    spec.validations
        .unwrap_or_default()
        .iter()
        .all(|validation| {
            let program = Program::compile(&validation.expression)
                .unwrap_or_else(|e| panic!("{}: {e:?}", validation.expression));
            match program.execute(&context) {
                Ok(Cel::Bool(admitted)) => admitted,
                other => panic!("{} evaluated to {other:?}", validation.expression),
            }
        })
}

/// Whether the webhook's decision admits the same.
fn webhook_admits(operation: &str, user: &str, old: Option<&Value>, new: Option<&Value>) -> bool {
    let state = old
        .and_then(|o| o.pointer("/status/fsm/state"))
        .and_then(Value::as_str)
        .map(|name| if name == "Running" { "Serving" } else { name });
    let change = AdmissionChange {
        operation: match operation {
            "CREATE" => AdmissionOperation::Create,
            "UPDATE" => AdmissionOperation::Update,
            _ => AdmissionOperation::Delete,
        },
        subresource: None,
        kind: "Database",
        namespace: Some("shop"),
        name: "orders",
        user,
        by_operator: user == OPERATOR,
        state,
        old,
        new,
    };
    judge_admission(&MACHINE, &change).is_ok()
}

/// An operation, its user, the object before and after, and whether it
/// is admitted.
type Case = (
    &'static str,
    &'static str,
    Option<Value>,
    Option<Value>,
    bool,
);

#[test]
fn the_policy_decides_as_the_webhook() {
    let serving = |engine, storage, tier| db(Some("Serving"), engine, storage, tier);
    let cases: Vec<Case> = vec![
        // An immutable field, in its state and outside it.
        (
            "UPDATE",
            "alice",
            Some(serving("pg", 10, Some("gold"))),
            Some(serving("my", 10, Some("gold"))),
            false,
        ),
        (
            "UPDATE",
            "alice",
            Some(db(Some("Provisioning"), "pg", 10, None)),
            Some(db(Some("Provisioning"), "my", 10, None)),
            true,
        ),
        (
            "UPDATE",
            "alice",
            Some(db(None, "pg", 10, None)),
            Some(db(None, "my", 1, None)),
            true,
        ),
        // A record under a former name guards as the state.
        (
            "UPDATE",
            "alice",
            Some(db(Some("Running"), "pg", 10, None)),
            Some(db(Some("Running"), "my", 10, None)),
            false,
        ),
        // A label: changed, removed, unchanged.
        (
            "UPDATE",
            "alice",
            Some(serving("pg", 10, Some("gold"))),
            Some(serving("pg", 10, Some("silver"))),
            false,
        ),
        (
            "UPDATE",
            "alice",
            Some(serving("pg", 10, Some("gold"))),
            Some(serving("pg", 10, None)),
            false,
        ),
        (
            "UPDATE",
            "alice",
            Some(serving("pg", 10, None)),
            Some(serving("pg", 10, None)),
            true,
        ),
        // Grow-only: grows, stays, shrinks.
        (
            "UPDATE",
            "alice",
            Some(serving("pg", 10, None)),
            Some(serving("pg", 20, None)),
            true,
        ),
        (
            "UPDATE",
            "alice",
            Some(serving("pg", 10, None)),
            Some(serving("pg", 10, None)),
            true,
        ),
        (
            "UPDATE",
            "alice",
            Some(serving("pg", 10, None)),
            Some(serving("pg", 5, None)),
            false,
        ),
        // Deletion.
        (
            "DELETE",
            "alice",
            Some(serving("pg", 10, None)),
            None,
            false,
        ),
        (
            "DELETE",
            "alice",
            Some(db(Some("Failed"), "pg", 10, None)),
            None,
            true,
        ),
        // The record: forged by a user, written by the operator, created.
        (
            "UPDATE",
            "alice",
            Some(serving("pg", 10, None)),
            Some(db(Some("Provisioning"), "pg", 10, None)),
            false,
        ),
        (
            "UPDATE",
            OPERATOR,
            Some(serving("pg", 10, None)),
            Some(db(Some("Failed"), "pg", 10, None)),
            true,
        ),
        (
            "CREATE",
            "alice",
            None,
            Some(db(None, "pg", 10, None)),
            true,
        ),
        (
            "CREATE",
            "alice",
            None,
            Some(serving("pg", 10, None)),
            false,
        ),
    ];
    for (i, (operation, user, old, new, expected)) in cases.iter().enumerate() {
        let webhook = webhook_admits(operation, user, old.as_ref(), new.as_ref());
        let policy = policy_admits(operation, user, old.as_ref(), new.as_ref());
        assert_eq!(webhook, *expected, "case {i}: the webhook");
        assert_eq!(policy, *expected, "case {i}: the policy");
    }
}

#[test]
fn paths_become_cel_as_kubernetes_spells_them() {
    assert_eq!(access("object", "spec.storageGi"), "object.spec.storageGi");
    assert_eq!(
        presence("object", "spec.storageGi"),
        "has(object.spec) && has(object.spec.storageGi)"
    );
    assert_eq!(
        access("object", "metadata.labels.app.kubernetes"),
        "object.metadata.labels['app']['kubernetes']"
    );
    assert_eq!(
        presence("oldObject", "metadata.annotations.team"),
        "has(oldObject.metadata) && has(oldObject.metadata.annotations) && \
         'team' in oldObject.metadata.annotations"
    );
    assert_eq!(
        access("object", "spec.max-size"),
        "object.spec.max__dash__size"
    );
    assert_eq!(
        access("object", "spec.namespace"),
        "object.spec.__namespace__"
    );
    assert_eq!(
        access("object", "spec.a__b"),
        "object.spec.a__underscores__b"
    );
}

#[test]
fn the_policy_matches_the_resource_and_its_status() {
    let (policy, binding) = admission_policy(&MACHINE, &resource(), &[]);
    assert_eq!(
        policy.metadata.name.as_deref(),
        Some("fsm.databases.example.io")
    );
    let spec = policy.spec.expect("a spec");
    assert_eq!(spec.failure_policy.as_deref(), Some("Fail"));
    let rules = spec
        .match_constraints
        .and_then(|m| m.resource_rules)
        .unwrap_or_default();
    assert_eq!(
        rules[0].resources.as_deref(),
        Some(&["databases".to_owned(), "databases/status".to_owned()][..])
    );
    // Without operator users the record is not guarded.
    let messages: Vec<String> = spec
        .validations
        .unwrap_or_default()
        .into_iter()
        .filter_map(|v| v.message)
        .collect();
    assert!(!messages.iter().any(|m| m.contains(".status.fsm")));
    assert_eq!(messages.len(), 4, "{messages:?}");
    let binding = binding.spec.expect("a spec");
    assert_eq!(
        binding.policy_name.as_deref(),
        Some("fsm.databases.example.io")
    );
    assert_eq!(binding.validation_actions, Some(vec!["Deny".to_owned()]));
}
