//! The rules a machine declares for writes to its objects, judged without
//! I/O: fields immutable or grow-only in a state, deletion refused in a
//! state, and `.status.fsm` written by the operator only.

use std::cmp::Ordering;

use fsm_core::Machine;
use serde_json::Value;

use super::amount;

/// What is being done to an object, as an admission request says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdmissionOperation {
    /// A create.
    Create,
    /// An update or patch (of the object or a subresource).
    Update,
    /// A delete.
    Delete,
}

/// A write to judge.
#[derive(Clone, Copy, Debug)]
pub struct AdmissionChange<'a> {
    /// What is done.
    pub operation: AdmissionOperation,
    /// The subresource written (`status`), if any.
    pub subresource: Option<&'a str>,
    /// The object's kind, for messages.
    pub kind: &'a str,
    /// The object's namespace.
    pub namespace: Option<&'a str>,
    /// The object's name.
    pub name: &'a str,
    /// Who writes (the request's user name).
    pub user: &'a str,
    /// Whether that is the operator itself.
    pub by_operator: bool,
    /// The object's current state (from its record), `None` without one.
    pub state: Option<&'a str>,
    /// The object before (update, delete).
    pub old: Option<&'a Value>,
    /// The object after (create, update).
    pub new: Option<&'a Value>,
}

/// Why a write is refused: the HTTP status and reason the API server
/// answers the writer with, and the message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdmissionRefusal {
    /// `403` (forbidden: deletion, the record) or `422` (invalid: a field).
    pub code: u16,
    /// `Forbidden` or `Invalid`.
    pub reason: &'static str,
    /// What the writer reads, after the API server's `admission webhook
    /// "NAME" denied the request: `.
    pub message: String,
}

impl AdmissionRefusal {
    fn forbidden(message: String) -> Self {
        AdmissionRefusal {
            code: 403,
            reason: "Forbidden",
            message,
        }
    }

    fn invalid(message: String) -> Self {
        AdmissionRefusal {
            code: 422,
            reason: "Invalid",
            message,
        }
    }
}

/// Judges `change` by `machine`'s rules.
///
/// ```
/// use fsm_core::{Machine, StateMeta};
/// use fsm_kube::{AdmissionChange, AdmissionOperation, judge_admission};
/// use serde_json::json;
///
/// static STATES: [StateMeta; 2] = [
///     StateMeta::new("Provisioning").initial().with_handler().next(&["Serving"]),
///     StateMeta::new("Serving").ready().final_state().grow_only(&["spec.storageGi"]),
/// ];
/// static MACHINE: Machine = Machine::new("Db", &STATES);
///
/// let old = json!({"spec": {"storageGi": 20}});
/// let new = json!({"spec": {"storageGi": 10}});
/// let change = AdmissionChange {
///     operation: AdmissionOperation::Update,
///     subresource: None,
///     kind: "Database",
///     namespace: Some("shop"),
///     name: "orders",
///     user: "alice",
///     by_operator: false,
///     state: Some("Serving"),
///     old: Some(&old),
///     new: Some(&new),
/// };
/// let refusal = judge_admission(&MACHINE, &change).unwrap_err();
/// assert_eq!(refusal.code, 422);
/// assert!(refusal.message.contains("spec.storageGi may not shrink"));
/// // The same write while provisioning is allowed.
/// let change = AdmissionChange { state: Some("Provisioning"), ..change };
/// assert!(judge_admission(&MACHINE, &change).is_ok());
/// ```
///
/// # Errors
/// The first rule the change breaks.
pub fn judge_admission(
    machine: &Machine,
    change: &AdmissionChange<'_>,
) -> Result<(), AdmissionRefusal> {
    record_untouched(change)?;
    let Some(state) = change.state.and_then(|name| machine.state(name)) else {
        return Ok(());
    };
    let object = match change.namespace {
        Some(ns) => format!("{} {ns}/{}", change.kind, change.name),
        None => format!("{} {}", change.kind, change.name),
    };
    match change.operation {
        AdmissionOperation::Create => Ok(()),
        AdmissionOperation::Delete => {
            if state.is_delete_refused() {
                return Err(AdmissionRefusal::forbidden(format!(
                    "{object} is {}, a state in which it may not be deleted; move it on \
                     first (its workflow, or `kubectl fsm`)",
                    state.name()
                )));
            }
            Ok(())
        }
        AdmissionOperation::Update => {
            let (Some(old), Some(new)) = (change.old, change.new) else {
                return Ok(());
            };
            for path in state.immutable_fields() {
                let (before, after) = (at(old, path), at(new, path));
                if before != after {
                    return Err(AdmissionRefusal::invalid(format!(
                        "{path} may not change while {object} is {} (was {}, now {})",
                        state.name(),
                        shown(before),
                        shown(after)
                    )));
                }
            }
            for path in state.grow_only_fields() {
                let (before, after) = (at(old, path), at(new, path));
                let shrinks = match (before, after) {
                    (Some(before), Some(after)) => match amount::compare(before, after) {
                        Some(order) => order == Ordering::Less,
                        // Not amounts: only the same value is not a shrink.
                        None => before != after,
                    },
                    (Some(_), None) => true,
                    (None, _) => false,
                };
                if shrinks {
                    return Err(AdmissionRefusal::invalid(format!(
                        "{path} may not shrink while {object} is {} (was {}, now {})",
                        state.name(),
                        shown(before),
                        shown(after)
                    )));
                }
            }
            Ok(())
        }
    }
}

/// `.status.fsm`, the machine's record, is the operator's alone: anyone
/// else writing it (the status subresource, or a create or update that
/// carries a status) is refused.
fn record_untouched(change: &AdmissionChange<'_>) -> Result<(), AdmissionRefusal> {
    if change.by_operator || change.operation == AdmissionOperation::Delete {
        return Ok(());
    }
    let record = |object: Option<&Value>| object.and_then(|o| o.pointer("/status/fsm")).cloned();
    let before = record(change.old).filter(|v| !v.is_null());
    let after = record(change.new).filter(|v| !v.is_null());
    if before == after {
        return Ok(());
    }
    let place = match change.subresource {
        Some(sub) => format!("{sub} of {} {}", change.kind, change.name),
        None => format!("{} {}", change.kind, change.name),
    };
    Err(AdmissionRefusal::forbidden(format!(
        ".status.fsm of {place} is written by its operator only, not by {}; act on the \
         workflow with `kubectl fsm` (pause, resume, retry, goto, signal)",
        change.user
    )))
}

/// The value at dotted `path` in `object`.
fn at<'v>(object: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('.')
        .try_fold(object, |value, segment| value.get(segment))
        .filter(|value| !value.is_null())
}

/// A value for a message, `absent` for none.
fn shown(value: Option<&Value>) -> String {
    match value {
        None => "absent".to_owned(),
        Some(value) => {
            let text = value.to_string();
            if text.chars().count() > 80 {
                let cut: String = text.chars().take(77).collect();
                format!("{cut}...")
            } else {
                text
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use fsm_core::StateMeta;
    use serde_json::json;

    use super::*;

    static STATES: [StateMeta; 3] = [
        StateMeta::new("Provisioning")
            .initial()
            .with_handler()
            .next(&["Serving"]),
        StateMeta::new("Serving")
            .ready()
            .with_handler()
            .next(&["Failed"])
            .immutable(&["spec.engine", "metadata.labels.tier"])
            .grow_only(&["spec.storageGi", "spec.memory"])
            .refuses_delete(),
        StateMeta::new("Failed").failed(),
    ];
    static MACHINE: Machine = Machine::new("Db", &STATES);

    fn change<'a>(
        operation: AdmissionOperation,
        state: &'a str,
        old: Option<&'a Value>,
        new: Option<&'a Value>,
    ) -> AdmissionChange<'a> {
        AdmissionChange {
            operation,
            subresource: None,
            kind: "Database",
            namespace: Some("shop"),
            name: "orders",
            user: "alice",
            by_operator: false,
            state: Some(state),
            old,
            new,
        }
    }

    fn db(engine: &str, storage: Value, memory: Value) -> Value {
        json!({
            "metadata": {"labels": {"tier": "gold"}},
            "spec": {"engine": engine, "storageGi": storage, "memory": memory},
        })
    }

    #[test]
    fn an_immutable_field_may_change_only_outside_its_state() {
        let old = db("postgres", json!(10), json!("1Gi"));
        let new = db("mysql", json!(10), json!("1Gi"));
        let refused = judge_admission(
            &MACHINE,
            &change(
                AdmissionOperation::Update,
                "Serving",
                Some(&old),
                Some(&new),
            ),
        )
        .unwrap_err();
        assert_eq!((refused.code, refused.reason), (422, "Invalid"));
        assert_eq!(
            refused.message,
            "spec.engine may not change while Database shop/orders is Serving \
             (was \"postgres\", now \"mysql\")"
        );
        assert!(
            judge_admission(
                &MACHINE,
                &change(
                    AdmissionOperation::Update,
                    "Provisioning",
                    Some(&old),
                    Some(&new)
                )
            )
            .is_ok()
        );
    }

    #[test]
    fn a_label_is_a_field_too() {
        let old = db("postgres", json!(10), json!("1Gi"));
        let mut new = old.clone();
        new["metadata"]["labels"] = json!({});
        let refused = judge_admission(
            &MACHINE,
            &change(
                AdmissionOperation::Update,
                "Serving",
                Some(&old),
                Some(&new),
            ),
        )
        .unwrap_err();
        assert!(
            refused
                .message
                .contains("metadata.labels.tier may not change")
        );
        assert!(
            refused.message.contains("now absent"),
            "{}",
            refused.message
        );
    }

    #[test]
    fn a_grow_only_field_may_grow_but_not_shrink_or_go() {
        let old = db("postgres", json!(10), json!("1Gi"));
        let judge_new = |new: &Value| {
            judge_admission(
                &MACHINE,
                &change(AdmissionOperation::Update, "Serving", Some(&old), Some(new)),
            )
        };
        assert!(judge_new(&db("postgres", json!(20), json!("2Gi"))).is_ok());
        assert!(judge_new(&db("postgres", json!(10), json!("1024Mi"))).is_ok());
        let shrunk = judge_new(&db("postgres", json!(5), json!("1Gi"))).unwrap_err();
        assert!(
            shrunk
                .message
                .starts_with("spec.storageGi may not shrink while Database shop/orders is Serving"),
            "{}",
            shrunk.message
        );
        let smaller = judge_new(&db("postgres", json!(10), json!("512Mi"))).unwrap_err();
        assert!(smaller.message.contains("spec.memory may not shrink"));
        let mut gone = old.clone();
        gone["spec"]
            .as_object_mut()
            .map(|spec| spec.remove("storageGi"));
        assert!(judge_new(&gone).is_err(), "removing it is shrinking it");
        let odd = db("postgres", json!(10), json!("lots"));
        assert!(
            judge_new(&odd).is_err(),
            "not an amount: only the same value"
        );
    }

    #[test]
    fn deletion_is_refused_only_in_the_states_that_say_so() {
        let old = db("postgres", json!(10), json!("1Gi"));
        let refused = judge_admission(
            &MACHINE,
            &change(AdmissionOperation::Delete, "Serving", Some(&old), None),
        )
        .unwrap_err();
        assert_eq!((refused.code, refused.reason), (403, "Forbidden"));
        assert!(refused.message.starts_with(
            "Database shop/orders is Serving, a state in which it may not be deleted"
        ));
        assert!(
            judge_admission(
                &MACHINE,
                &change(AdmissionOperation::Delete, "Failed", Some(&old), None)
            )
            .is_ok()
        );
    }

    #[test]
    fn only_the_operator_writes_the_record() {
        let old = json!({"status": {"fsm": {"state": "Serving"}}});
        let forged = json!({"status": {"fsm": {"state": "Provisioning"}}});
        let mut write = change(
            AdmissionOperation::Update,
            "Serving",
            Some(&old),
            Some(&forged),
        );
        write.subresource = Some("status");
        let refused = judge_admission(&MACHINE, &write).unwrap_err();
        assert_eq!(refused.code, 403);
        assert!(
            refused
                .message
                .starts_with(".status.fsm of status of Database orders is written by its operator only, not by alice"),
            "{}",
            refused.message
        );
        write.by_operator = true;
        assert!(judge_admission(&MACHINE, &write).is_ok());
        // Another part of the status is anyone's.
        let other = json!({"status": {"fsm": {"state": "Serving"}, "phase": "x"}});
        let write = change(
            AdmissionOperation::Update,
            "Serving",
            Some(&old),
            Some(&other),
        );
        assert!(judge_admission(&MACHINE, &write).is_ok());
        // A create carrying a record is forging one.
        let create = change(AdmissionOperation::Create, "Serving", None, Some(&forged));
        assert!(judge_admission(&MACHINE, &create).is_err());
    }

    #[test]
    fn without_a_state_or_a_known_one_only_the_record_is_guarded() {
        let old = db("postgres", json!(10), json!("1Gi"));
        let new = db("mysql", json!(1), json!("1Gi"));
        let mut write = change(
            AdmissionOperation::Update,
            "Serving",
            Some(&old),
            Some(&new),
        );
        write.state = None;
        assert!(judge_admission(&MACHINE, &write).is_ok());
        write.state = Some("Renamed");
        assert!(judge_admission(&MACHINE, &write).is_ok());
    }
}
