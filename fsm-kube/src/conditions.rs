//! The `Ready`, `Progressing` and `Degraded` conditions, computed from the
//! record the way the Kubernetes API conventions ask: one entry per type,
//! `observedGeneration`, and `lastTransitionTime` kept while the status does
//! not change.

use fsm_core::{DecodeError, Machine, StateRecord, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// The condition types this crate maintains.
pub const CONDITION_TYPES: [&str; 3] = ["Ready", "Progressing", "Degraded"];

/// The message of a condition about an error that displays as nothing.
const NO_ERROR_MESSAGE: &str = "the error has no message";

/// The wanted value of one condition, before timestamps.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Wanted {
    type_: &'static str,
    status: bool,
    reason: String,
    message: String,
}

/// The conditions for `record` of `machine` at `generation`, keeping the
/// `lastTransitionTime` of `previous` entries whose status did not change.
/// Conditions of other types in `previous` are kept as they are.
pub fn from_record(
    machine: &Machine,
    record: &StateRecord,
    generation: Option<i64>,
    previous: &[Condition],
    now: Timestamp,
) -> Vec<Condition> {
    let state = machine.state(&record.state);
    let is_ready = state.is_some_and(|s| s.is_ready());
    let is_failed = state.is_some_and(|s| s.is_failed());
    let is_final = state.is_some_and(|s| s.is_final());
    let unwinding = record.is_unwinding();
    let compensation_failures = record.compensation.as_ref().map_or(0, |u| u.failures.len());
    // The chain ran for `on_spec_change = compensate_and_restart`, not
    // because the workflow failed.
    let restarted = record.compensation.as_ref().is_some_and(|u| u.restart);
    // An error may display as nothing; a message never says nothing.
    let error_text = record
        .last_error
        .as_deref()
        .map(str::trim)
        .filter(|e| !e.is_empty());
    let last_error = error_text.unwrap_or(NO_ERROR_MESSAGE).to_owned();
    let in_state = format!("in state {}", record.state);

    let ready = Wanted {
        type_: "Ready",
        status: is_ready && !unwinding,
        reason: reason_of(&record.state),
        message: in_state.clone(),
    };
    let progressing = if unwinding {
        Wanted {
            type_: "Progressing",
            status: true,
            reason: "Compensating".into(),
            message: format!("compensating: {last_error}"),
        }
    } else if is_failed || is_final || is_ready {
        Wanted {
            type_: "Progressing",
            status: false,
            reason: reason_of(&record.state),
            message: in_state.clone(),
        }
    } else if record.attempt > 0 {
        Wanted {
            type_: "Progressing",
            status: true,
            reason: "Retrying".into(),
            message: format!(
                "{in_state}, attempt {} failed: {last_error}",
                record.attempt
            ),
        }
    } else if record.failures_without_attempt > 0 {
        Wanted {
            type_: "Progressing",
            status: true,
            reason: "Retrying".into(),
            message: format!(
                "{in_state}, {} transient failure(s) in a row, no attempt spent: {last_error}",
                record.failures_without_attempt
            ),
        }
    } else {
        Wanted {
            type_: "Progressing",
            status: true,
            reason: reason_of(&record.state),
            message: in_state.clone(),
        }
    };
    let degraded = if compensation_failures > 0 && !unwinding {
        Wanted {
            type_: "Degraded",
            status: true,
            reason: "CompensationFailed".into(),
            message: if restarted {
                format!(
                    "{compensation_failures} compensation step(s) failed before the restart for a \
                     new spec; what they were to undo may remain"
                )
            } else {
                format!(
                    "{compensation_failures} compensation step(s) failed; the workflow failed: \
                     {last_error}"
                )
            },
        }
    } else if is_failed {
        Wanted {
            type_: "Degraded",
            status: true,
            reason: "Failed".into(),
            // A machine may enter its failed state by a plain transition.
            message: error_text.map_or_else(|| in_state.clone(), str::to_owned),
        }
    } else if unwinding || record.attempt > 0 || record.failures_without_attempt > 0 {
        Wanted {
            type_: "Degraded",
            status: true,
            reason: if unwinding {
                "Compensating"
            } else if record.attempt > 0 {
                "Retrying"
            } else {
                "TransientFailure"
            }
            .into(),
            message: last_error,
        }
    } else {
        Wanted {
            type_: "Degraded",
            status: false,
            reason: "AsExpected".into(),
            message: in_state,
        }
    };
    merge(previous, [ready, progressing, degraded], generation, now)
}

/// The conditions for an object whose record cannot be decoded: `Degraded`
/// with reason `CorruptRecord`; the others are left as they were.
pub fn corrupt(
    error: &DecodeError,
    generation: Option<i64>,
    previous: &[Condition],
    now: Timestamp,
) -> Vec<Condition> {
    let degraded = Wanted {
        type_: "Degraded",
        status: true,
        reason: "CorruptRecord".into(),
        message: format!("{error}; reconciling stops until the record is fixed"),
    };
    merge(previous, [degraded], generation, now)
}

/// The reason of the `Degraded` condition of an object whose record would
/// not fit.
pub const TOO_LARGE_REASON: &str = "RecordTooLarge";

/// The conditions for an object whose next record would exceed a size
/// limit: `Degraded` with reason [`TOO_LARGE_REASON`]; the others are left
/// as they were.
pub fn too_large(
    error: &fsm_core::StoreError,
    generation: Option<i64>,
    previous: &[Condition],
    now: Timestamp,
) -> Vec<Condition> {
    let degraded = Wanted {
        type_: "Degraded",
        status: true,
        reason: TOO_LARGE_REASON.into(),
        message: format!("{error}; nothing was written, the last committed record is kept"),
    };
    merge(previous, [degraded], generation, now)
}

/// The reason of the `Degraded` condition of an object whose record was
/// written by a newer version of the machine than this build's (during a
/// rolling update, or after a rollback).
pub const NEWER_RECORD_REASON: &str = "RecordFromNewerVersion";

/// The conditions for an object whose record was written by machine
/// version `found`, newer than this build's `supported`: `Degraded` with
/// reason [`NEWER_RECORD_REASON`]; the others are left as they were (the
/// newer build maintains them).
pub fn newer_record(
    found: u32,
    supported: u32,
    generation: Option<i64>,
    previous: &[Condition],
    now: Timestamp,
) -> Vec<Condition> {
    let degraded = Wanted {
        type_: "Degraded",
        status: true,
        reason: NEWER_RECORD_REASON.into(),
        message: format!(
            "the record was written by version {found} of the machine, newer than this \
             replica's {supported}; it is left untouched for a replica of version {found} or later"
        ),
    };
    merge(previous, [degraded], generation, now)
}

/// Whether `conditions` say the object's record is a newer version's
/// ([`newer_record`]): what a replica that can read the record clears.
pub fn says_newer_record(conditions: &[Condition]) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == "Degraded" && c.status == "True" && c.reason == NEWER_RECORD_REASON)
}

fn merge<const N: usize>(
    previous: &[Condition],
    wanted: [Wanted; N],
    generation: Option<i64>,
    now: Timestamp,
) -> Vec<Condition> {
    let mut out: Vec<Condition> = previous
        .iter()
        .filter(|c| !wanted.iter().any(|w| w.type_ == c.type_))
        .cloned()
        .collect();
    for w in wanted {
        let status = if w.status { "True" } else { "False" };
        let since = previous
            .iter()
            .find(|c| c.type_ == w.type_ && c.status == status)
            .map_or(Time(now), |c| c.last_transition_time.clone());
        // An empty message says nothing, and some API servers refuse an
        // empty string in a custom resource (the kube-apiserver 1.20 our
        // CI builds answers "must be of type string: null") and with it
        // the whole status write: the reason stands in.
        let message = if w.message.trim().is_empty() {
            w.reason.clone()
        } else {
            w.message
        };
        out.push(Condition {
            type_: w.type_.to_owned(),
            status: status.to_owned(),
            reason: w.reason,
            message,
            observed_generation: generation,
            last_transition_time: since,
        });
    }
    out.sort_by_key(|c| {
        CONDITION_TYPES
            .iter()
            .position(|t| *t == c.type_)
            .unwrap_or(CONDITION_TYPES.len())
    });
    out
}

/// The condition type of dependent resources (see
/// [`crate::dependents`]): `True` (reason `Ready`) when every active
/// dependent is ready; `False` with reason `Failed` when one failed, else
/// `Pending`, its message naming what and why.
pub const DEPENDENTS_READY: &str = "DependentsReady";

/// The conditions `previous` with `DependentsReady` set: `ready`, with
/// `reason` and `message`, keeping its `lastTransitionTime` while its
/// status does not change. Conditions of other types are kept.
pub fn dependents_ready(
    ready: bool,
    reason: &str,
    message: String,
    generation: Option<i64>,
    previous: &[Condition],
    now: Timestamp,
) -> Vec<Condition> {
    let wanted = Wanted {
        type_: DEPENDENTS_READY,
        status: ready,
        reason: reason.to_owned(),
        message,
    };
    merge(previous, [wanted], generation, now)
}

/// Conditions reported for objects by other parts of the runtime while a
/// step runs (the `DependentsReady` condition of a step that converged its
/// dependents), which the stores write with the record's conditions, in
/// the same status write. Keyed by object UID; cheap to clone (shared).
#[derive(Clone, Default)]
pub struct ReportedConditions {
    by_uid: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, Wanted>>>,
}

impl std::fmt::Debug for ReportedConditions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReportedConditions").finish_non_exhaustive()
    }
}

impl ReportedConditions {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, Wanted>> {
        self.by_uid
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Reports `DependentsReady` for object `uid` (see [`dependents_ready`]).
    pub fn report_dependents(&self, uid: &str, ready: bool, reason: &str, message: String) {
        self.lock().insert(
            uid.to_owned(),
            Wanted {
                type_: DEPENDENTS_READY,
                status: ready,
                reason: reason.to_owned(),
                message,
            },
        );
    }

    /// `conditions` with what was reported for `uid` merged in (nothing
    /// reported: unchanged).
    pub fn merge_into(
        &self,
        uid: &str,
        conditions: Vec<Condition>,
        generation: Option<i64>,
        now: Timestamp,
    ) -> Vec<Condition> {
        let Some(wanted) = self.lock().get(uid).cloned() else {
            return conditions;
        };
        merge(&conditions, [wanted], generation, now)
    }

    /// Forgets object `uid` (it was deleted).
    pub fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }
}

/// A condition reason from a state name: CamelCase already, but a reason
/// must start with a letter.
fn reason_of(state: &str) -> String {
    if state.starts_with(|c: char| c.is_ascii_alphabetic()) {
        state.to_owned()
    } else {
        format!("State{state}")
    }
}

/// Whether two condition lists say the same, ignoring
/// `lastTransitionTime` (which `merge` keeps anyway).
pub fn same(a: &[Condition], b: &[Condition]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.type_ == y.type_
                && x.status == y.status
                && x.reason == y.reason
                && x.message == y.message
                && x.observed_generation == y.observed_generation
        })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use fsm_core::StateMeta;

    use super::*;

    static STATES: [StateMeta; 4] = [
        StateMeta::new("Provisioning")
            .initial()
            .with_handler()
            .next(&["Ready"]),
        StateMeta::new("Ready").ready().with_handler(),
        StateMeta::new("Done").final_state(),
        StateMeta::new("Failed").failed(),
    ];
    static MACHINE: Machine = Machine::new("Db", &STATES);

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    fn record(state: &str) -> StateRecord {
        serde_json::from_value(serde_json::json!({
            "schemaVersion": 1, "state": state, "enteredAt": t(0).to_string()
        }))
        .unwrap()
    }

    fn get<'a>(cs: &'a [Condition], t: &str) -> &'a Condition {
        cs.iter().find(|c| c.type_ == t).unwrap()
    }

    #[test]
    fn a_ready_state_is_ready_and_not_progressing() {
        let cs = from_record(&MACHINE, &record("Ready"), Some(3), &[], t(10));
        assert_eq!(get(&cs, "Ready").status, "True");
        assert_eq!(get(&cs, "Progressing").status, "False");
        assert_eq!(get(&cs, "Degraded").status, "False");
        assert!(cs.iter().all(|c| c.observed_generation == Some(3)));
        let types: Vec<_> = cs.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, CONDITION_TYPES);
    }

    #[test]
    fn retries_are_progressing_and_degraded_with_the_error() {
        let mut r = record("Provisioning");
        r.attempt = 2;
        r.last_error = Some("cloud unavailable".into());
        let cs = from_record(&MACHINE, &r, Some(1), &[], t(10));
        assert_eq!(get(&cs, "Progressing").reason, "Retrying");
        assert_eq!(get(&cs, "Degraded").status, "True");
        assert_eq!(get(&cs, "Degraded").message, "cloud unavailable");
    }

    /// An empty message says nothing, and some API servers refuse it and
    /// with it the whole status write: an error that displays as nothing,
    /// or a failed state entered without one, still gets a message.
    #[test]
    fn no_condition_has_an_empty_message() {
        let mut failed = record("Failed");
        failed.last_error = None;
        let cs = from_record(&MACHINE, &failed, Some(1), &[], t(10));
        assert_eq!(get(&cs, "Degraded").message, "in state Failed");

        for error in [None, Some(String::new()), Some("  ".to_owned())] {
            let mut retrying = record("Provisioning");
            retrying.attempt = 1;
            retrying.last_error = error.clone();
            let mut transient = record("Provisioning");
            transient.failures_without_attempt = 1;
            transient.last_error = error;
            for r in [&retrying, &transient] {
                let cs = from_record(&MACHINE, r, Some(1), &[], t(10));
                assert_eq!(get(&cs, "Degraded").message, NO_ERROR_MESSAGE);
                assert!(cs.iter().all(|c| !c.message.trim().is_empty()), "{cs:?}");
            }
        }

        let cs = dependents_ready(false, "Pending", String::new(), Some(1), &[], t(10));
        assert_eq!(get(&cs, DEPENDENTS_READY).message, "Pending");
    }

    #[test]
    fn transient_failures_are_progressing_and_degraded_without_an_attempt() {
        let mut r = record("Provisioning");
        r.failures_without_attempt = 3;
        r.last_error = Some("Kubernetes API call failed: 503".into());
        let cs = from_record(&MACHINE, &r, Some(1), &[], t(10));
        assert_eq!(get(&cs, "Progressing").reason, "Retrying");
        assert_eq!(
            get(&cs, "Progressing").message,
            "in state Provisioning, 3 transient failure(s) in a row, no attempt spent: \
             Kubernetes API call failed: 503"
        );
        assert_eq!(get(&cs, "Degraded").status, "True");
        assert_eq!(get(&cs, "Degraded").reason, "TransientFailure");
    }

    #[test]
    fn transition_time_is_kept_while_the_status_holds() {
        let first = from_record(&MACHINE, &record("Provisioning"), Some(1), &[], t(10));
        let again = from_record(&MACHINE, &record("Provisioning"), Some(1), &first, t(20));
        assert_eq!(get(&again, "Progressing").last_transition_time, Time(t(10)));
        let ready = from_record(&MACHINE, &record("Ready"), Some(1), &again, t(30));
        assert_eq!(get(&ready, "Ready").last_transition_time, Time(t(30)));
        assert_eq!(get(&ready, "Degraded").last_transition_time, Time(t(10)));
        assert!(same(&first, &again));
        assert!(!same(&again, &ready));
    }

    /// An unwind towards `target` that finished with `step`'s
    /// compensation failed.
    fn failed_unwind(reason: &str, target: &str, restart: bool, step: &str) -> fsm_core::Unwind {
        fsm_core::Unwind {
            reason: reason.into(),
            target: Some(target.into()),
            restart,
            attempt: 0,
            next_attempt_at: None,
            failures: vec![fsm_core::UnwindFailure {
                step: step.into(),
                error: "api down".into(),
            }],
            started_at: t(0),
            finished_at: Some(t(5)),
        }
    }

    #[test]
    fn a_failed_compensation_is_reported() {
        let mut r = record("Failed");
        r.last_error = Some("seeding rejected".into());
        r.compensation = Some(failed_unwind(
            "seeding rejected",
            "Failed",
            false,
            "WaitingReady",
        ));
        let cs = from_record(&MACHINE, &r, None, &[], t(10));
        assert_eq!(get(&cs, "Degraded").reason, "CompensationFailed");
        assert_eq!(get(&cs, "Ready").status, "False");
    }

    #[test]
    fn a_failed_compensation_before_a_restart_does_not_say_the_workflow_failed() {
        let mut r = record("Provisioning");
        r.compensation = Some(failed_unwind(
            "spec changed (generation 2)",
            "Provisioning",
            true,
            "Ready",
        ));
        let cs = from_record(&MACHINE, &r, Some(2), &[], t(10));
        assert_eq!(get(&cs, "Degraded").reason, "CompensationFailed");
        assert_eq!(
            get(&cs, "Degraded").message,
            "1 compensation step(s) failed before the restart for a new spec; what they were to \
             undo may remain"
        );
    }

    #[test]
    fn a_corrupt_record_degrades_and_keeps_other_conditions() {
        let before = from_record(&MACHINE, &record("Ready"), Some(1), &[], t(0));
        let err = DecodeError::Malformed("expected value".into());
        let cs = corrupt(
            &err,
            Some(1),
            &before,
            t(Duration::from_secs(5).as_secs() as i64),
        );
        assert_eq!(get(&cs, "Ready").status, "True");
        assert_eq!(get(&cs, "Degraded").reason, "CorruptRecord");
        assert!(get(&cs, "Degraded").message.contains("expected value"));
    }

    #[test]
    fn a_newer_record_degrades_names_both_versions_and_keeps_other_conditions() {
        let before = from_record(&MACHINE, &record("Ready"), Some(1), &[], t(0));
        assert!(!says_newer_record(&before));
        let cs = newer_record(3, 2, Some(1), &before, t(5));
        assert_eq!(get(&cs, "Ready").status, "True");
        let degraded = get(&cs, "Degraded");
        assert_eq!(degraded.reason, NEWER_RECORD_REASON);
        assert_eq!(degraded.last_transition_time, Time(t(5)));
        assert!(
            degraded.message.contains("version 3"),
            "{}",
            degraded.message
        );
        assert!(
            degraded.message.contains("this replica's 2"),
            "{}",
            degraded.message
        );
        assert!(says_newer_record(&cs));
        assert!(same(&cs, &newer_record(3, 2, Some(1), &cs, t(9))));
    }
}
