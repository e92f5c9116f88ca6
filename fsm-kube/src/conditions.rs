//! The conditions this crate maintains on an object, computed from the
//! record the way the Kubernetes API conventions ask: one entry per type,
//! `observedGeneration`, and `lastTransitionTime` kept while the status does
//! not change.
//!
//! Besides `Ready`, `Progressing` and `Degraded` they include the two
//! conditions kstatus reads (the library behind Flux health checks,
//! `kubectl wait`-based tooling, cli-utils and Argo CD's generic health),
//! in its "abnormal-true" polarity: [`RECONCILING`] is `True` while the
//! machine still works towards the spec, [`STALLED`] is `True` when it
//! cannot progress without a person; neither is `True` at rest. With the
//! top-level `status.observedGeneration` the stores write (the generation
//! the machine has acted on), kstatus reads an object as `InProgress`,
//! `Failed` or `Current` (docs/observability.md, "The kstatus contract").
//! [`PAUSED`] and [`LAST_COMMAND`] show what people asked of the object
//! with `kubectl fsm`.
//!
//! Every value is a function of the record (and the object's generation),
//! never of the clock: a resting object whose record does not change gets
//! the same conditions on every re-sync, and so no write.

use fsm_core::{DecodeError, Machine, StateRecord, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// `True` when the current state is a `ready` state, no compensation is
/// running and the state does not report that it cannot converge.
pub const READY: &str = "Ready";
/// `True` while the machine is working: a state with a handler that is not
/// ready, a retry, compensation.
pub const PROGRESSING: &str = "Progressing";
/// `True` when something is wrong: retries, compensation, a failed state,
/// a state that cannot converge, a record that cannot be used.
pub const DEGRADED: &str = "Degraded";
/// kstatus' `Reconciling`: `True` while the machine works towards the spec
/// (a state that is not `ready`, `final` or `failed`, a retry, a state
/// that cannot converge yet and tries again, compensation, a spec change
/// not yet taken); `False` at rest and while paused.
pub const RECONCILING: &str = "Reconciling";
/// kstatus' `Stalled`: `True` when the object cannot progress without a
/// person (resting in a `failed` state, a record that cannot be decoded,
/// does not fit, or is a newer build's); `False` otherwise and while
/// paused.
pub const STALLED: &str = "Stalled";
/// `True` while a `kubectl fsm pause` is in force, naming who paused and
/// when.
pub const PAUSED: &str = "Paused";
/// The outcome of the last command a person sent (`kubectl fsm
/// pause|resume|retry|goto|signal`): `True` (reason `Applied`) or `False`
/// (reason `Refused`, the refusal as the message). Absent until the first
/// command.
pub const LAST_COMMAND: &str = "LastCommand";

/// The condition types this crate maintains, in the order it lists them
/// (other types follow, as they were).
pub const CONDITION_TYPES: [&str; 7] = [
    READY,
    PROGRESSING,
    DEGRADED,
    RECONCILING,
    STALLED,
    PAUSED,
    LAST_COMMAND,
];

/// The reason of `Ready=False`, `Degraded=True` and `Reconciling=True` for
/// a state that stays but reports that it cannot converge
/// ([`fsm_core::Transition::degraded`]).
pub const NOT_CONVERGED_REASON: &str = "NotConverged";

/// The reason of `Reconciling=False`, `Stalled=False`, `Progressing=False`
/// and `Paused=True` while the object is paused.
pub const PAUSED_REASON: &str = "Paused";

/// The reason of `LastCommand=False`: the last command was refused.
pub const REFUSED_REASON: &str = "Refused";

/// The reason of `LastCommand=True`: the last command was applied.
pub const APPLIED_REASON: &str = "Applied";

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

impl Wanted {
    fn new(type_: &'static str, status: bool, reason: impl Into<String>, message: String) -> Self {
        Wanted {
            type_,
            status,
            reason: reason.into(),
            message,
        }
    }
}

/// The conditions for `record` of `machine` at `generation` (the object's
/// `metadata.generation`), keeping the `lastTransitionTime` of `previous`
/// entries whose status did not change. Conditions of other types in
/// `previous` are kept as they are.
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
    // A state that stays but cannot converge; a failed state or an unwind
    // says more than that.
    let not_converged = record
        .degraded
        .as_ref()
        .filter(|_| !is_failed && !unwinding)
        .map(|d| {
            let reason = d.reason.trim();
            let reason = if reason.is_empty() {
                NO_ERROR_MESSAGE
            } else {
                reason
            };
            format!("{in_state}: {reason} (since {})", d.since)
        });
    let paused = record.paused.as_ref().map(|p| match &p.by {
        Some(by) => format!(
            "paused by {by} at {} (command #{}); nothing runs until it is resumed",
            p.at, p.seq
        ),
        None => format!(
            "paused at {} (command #{}); nothing runs until it is resumed",
            p.at, p.seq
        ),
    });
    // The object's spec changed and the machine has not taken it (it does
    // not while unwinding or paused).
    let spec_pending = generation
        .zip(record.observed_generation)
        .is_some_and(|(current, seen)| current != seen);
    let retrying = if record.attempt > 0 {
        Some(format!(
            "{in_state}, attempt {} failed: {last_error}",
            record.attempt
        ))
    } else if record.failures_without_attempt > 0 {
        Some(format!(
            "{in_state}, {} transient failure(s) in a row, no attempt spent: {last_error}",
            record.failures_without_attempt
        ))
    } else {
        None
    };
    let failed_message = if compensation_failures > 0 {
        if restarted {
            format!(
                "{compensation_failures} compensation step(s) failed before the restart for a \
                 new spec; what they were to undo may remain"
            )
        } else {
            format!(
                "{compensation_failures} compensation step(s) failed; the workflow failed: \
                 {last_error}"
            )
        }
    } else {
        // A machine may enter its failed state by a plain transition.
        error_text.map_or_else(|| in_state.clone(), str::to_owned)
    };

    let ready = match &not_converged {
        Some(message) if is_ready && !unwinding => {
            Wanted::new(READY, false, NOT_CONVERGED_REASON, message.clone())
        }
        _ => Wanted::new(
            READY,
            is_ready && !unwinding,
            reason_of(&record.state),
            in_state.clone(),
        ),
    };
    let progressing = if let Some(message) = &paused {
        Wanted::new(PROGRESSING, false, PAUSED_REASON, message.clone())
    } else if unwinding {
        Wanted::new(
            PROGRESSING,
            true,
            "Compensating",
            format!("compensating: {last_error}"),
        )
    } else if is_failed || is_final || is_ready {
        Wanted::new(
            PROGRESSING,
            false,
            reason_of(&record.state),
            in_state.clone(),
        )
    } else if let Some(message) = &retrying {
        Wanted::new(PROGRESSING, true, "Retrying", message.clone())
    } else if let Some(message) = &not_converged {
        Wanted::new(PROGRESSING, true, NOT_CONVERGED_REASON, message.clone())
    } else {
        Wanted::new(
            PROGRESSING,
            true,
            reason_of(&record.state),
            in_state.clone(),
        )
    };
    let degraded = if compensation_failures > 0 && !unwinding {
        Wanted::new(DEGRADED, true, "CompensationFailed", failed_message.clone())
    } else if is_failed {
        Wanted::new(DEGRADED, true, "Failed", failed_message.clone())
    } else if unwinding || record.attempt > 0 || record.failures_without_attempt > 0 {
        let reason = if unwinding {
            "Compensating"
        } else if record.attempt > 0 {
            "Retrying"
        } else {
            "TransientFailure"
        };
        Wanted::new(DEGRADED, true, reason, last_error.clone())
    } else if let Some(message) = &not_converged {
        Wanted::new(DEGRADED, true, NOT_CONVERGED_REASON, message.clone())
    } else {
        Wanted::new(DEGRADED, false, "AsExpected", in_state.clone())
    };
    // kstatus: `Reconciling` and `Stalled` are never `True` together (it
    // reads whichever comes first), and neither is while paused: nothing
    // runs, and nothing will until a person resumes (as Flux leaves a
    // suspended object's status alone).
    let stalled_here = is_failed && !unwinding;
    let reconciling = if let Some(message) = &paused {
        Wanted::new(RECONCILING, false, PAUSED_REASON, message.clone())
    } else if unwinding {
        Wanted::new(
            RECONCILING,
            true,
            "Compensating",
            format!("compensating: {last_error}"),
        )
    } else if spec_pending {
        Wanted::new(
            RECONCILING,
            true,
            "SpecChangePending",
            format!(
                "{in_state}; generation {} is not taken yet (the machine has acted on {})",
                generation.unwrap_or_default(),
                record.observed_generation.unwrap_or_default()
            ),
        )
    } else if stalled_here {
        Wanted::new(
            RECONCILING,
            false,
            reason_of(&record.state),
            in_state.clone(),
        )
    } else if let Some(message) = &retrying {
        // A ready state retrying its convergence is not at rest either.
        Wanted::new(RECONCILING, true, "Retrying", message.clone())
    } else if let Some(message) = &not_converged {
        Wanted::new(RECONCILING, true, NOT_CONVERGED_REASON, message.clone())
    } else if is_ready || is_final {
        Wanted::new(
            RECONCILING,
            false,
            reason_of(&record.state),
            in_state.clone(),
        )
    } else {
        Wanted::new(
            RECONCILING,
            true,
            reason_of(&record.state),
            in_state.clone(),
        )
    };
    let stalled = if let Some(message) = &paused {
        Wanted::new(STALLED, false, PAUSED_REASON, message.clone())
    } else if stalled_here && !reconciling.status {
        let reason = if compensation_failures > 0 {
            "CompensationFailed"
        } else {
            "Failed"
        };
        Wanted::new(STALLED, true, reason, failed_message)
    } else {
        Wanted::new(STALLED, false, "AsExpected", in_state.clone())
    };
    let paused = match paused {
        Some(message) => Wanted::new(PAUSED, true, PAUSED_REASON, message),
        None => Wanted::new(PAUSED, false, "NotPaused", "not paused".to_owned()),
    };
    let mut wanted = vec![ready, progressing, degraded, reconciling, stalled, paused];
    if let Some(last) = record.commands.iter().max_by_key(|c| c.seq) {
        let by = last
            .by
            .as_deref()
            .map_or_else(String::new, |by| format!(" by {by}"));
        wanted.push(match &last.refused {
            None => Wanted::new(
                LAST_COMMAND,
                true,
                APPLIED_REASON,
                format!(
                    "{} (#{}){by} applied at {}",
                    last.command, last.seq, last.at
                ),
            ),
            Some(why) => Wanted::new(
                LAST_COMMAND,
                false,
                REFUSED_REASON,
                format!("{} (#{}){by} refused: {why}", last.command, last.seq),
            ),
        });
    }
    merge(previous, wanted, generation, now)
}

/// The conditions for an object whose record cannot be decoded: `Degraded`
/// and `Stalled` with reason `CorruptRecord`, `Reconciling=False` (nothing
/// runs until a person fixes the record); the others are left as they
/// were.
pub fn corrupt(
    error: &DecodeError,
    generation: Option<i64>,
    previous: &[Condition],
    now: Timestamp,
) -> Vec<Condition> {
    let message = format!("{error}; reconciling stops until the record is fixed");
    merge(previous, stalled("CorruptRecord", message), generation, now)
}

/// `Degraded` and `Stalled` `True` with `reason` and `message`, and
/// `Reconciling` `False` with the same: the object cannot progress.
fn stalled(reason: &str, message: String) -> [Wanted; 3] {
    [
        Wanted::new(DEGRADED, true, reason, message.clone()),
        Wanted::new(RECONCILING, false, reason, message.clone()),
        Wanted::new(STALLED, true, reason, message),
    ]
}

/// The reason of the `Degraded` condition (and of the event) of an object
/// that does not decode as the resource type ([`crate::watch`]).
pub const UNDECODABLE_REASON: &str = "Undecodable";

/// The conditions for an object that does not decode as the resource
/// type: `Degraded` and `Stalled` with reason [`UNDECODABLE_REASON`] and
/// `message` (naming the field), `Reconciling=False` (nothing runs until
/// the object is fixed); the others are left as they were. The
/// reconciler's conditions replace them once the object decodes.
///
/// ```
/// use fsm_kube::conditions::{self, DEGRADED, STALLED, UNDECODABLE_REASON};
///
/// let now = jiff::Timestamp::UNIX_EPOCH;
/// let wanted = conditions::undecodable("spec.size: invalid type: string, expected u32", Some(3), &[], now);
/// let degraded = wanted.iter().find(|c| c.type_ == DEGRADED).unwrap();
/// assert_eq!((degraded.status.as_str(), degraded.reason.as_str()), ("True", UNDECODABLE_REASON));
/// assert_eq!(degraded.observed_generation, Some(3));
/// assert!(wanted.iter().any(|c| c.type_ == STALLED && c.status == "True"));
/// // The same report again is the same conditions: nothing to write.
/// let again = conditions::undecodable(&degraded.message, Some(3), &wanted, now);
/// assert!(conditions::same(&wanted, &again));
/// ```
pub fn undecodable(
    message: &str,
    generation: Option<i64>,
    previous: &[Condition],
    now: Timestamp,
) -> Vec<Condition> {
    merge(
        previous,
        stalled(UNDECODABLE_REASON, message.to_owned()),
        generation,
        now,
    )
}

/// The reason of the `Degraded` condition of an object whose record would
/// not fit.
pub const TOO_LARGE_REASON: &str = "RecordTooLarge";

/// The reason of the Warning event for an object too large for the
/// finalizer its machine needs (no condition can be written to it).
pub const OBJECT_TOO_LARGE_REASON: &str = "ObjectTooLarge";

/// The conditions for an object whose next record would exceed a size
/// limit: `Degraded` and `Stalled` with reason [`TOO_LARGE_REASON`],
/// `Reconciling=False`; the others are left as they were.
pub fn too_large(
    error: &fsm_core::StoreError,
    generation: Option<i64>,
    previous: &[Condition],
    now: Timestamp,
) -> Vec<Condition> {
    let message = format!("{error}; nothing was written, the last committed record is kept");
    merge(
        previous,
        stalled(TOO_LARGE_REASON, message),
        generation,
        now,
    )
}

/// The reason of the `Degraded` condition of an object whose record was
/// written by a newer version of the machine than this build's (during a
/// rolling update, or after a rollback).
pub const NEWER_RECORD_REASON: &str = "RecordFromNewerVersion";

/// The conditions for an object whose record was written by machine
/// version `found`, newer than this build's `supported`: `Degraded` and
/// `Stalled` with reason [`NEWER_RECORD_REASON`], `Reconciling=False`; the
/// others are left as they were (the newer build maintains them, and
/// rewrites these when it reads the record).
pub fn newer_record(
    found: u32,
    supported: u32,
    generation: Option<i64>,
    previous: &[Condition],
    now: Timestamp,
) -> Vec<Condition> {
    let message = format!(
        "the record was written by version {found} of the machine, newer than this replica's \
         {supported}; it is left untouched for a replica of version {found} or later"
    );
    merge(
        previous,
        stalled(NEWER_RECORD_REASON, message),
        generation,
        now,
    )
}

/// Whether `conditions` say the object's record is a newer version's
/// ([`newer_record`]): what a replica that can read the record clears.
pub fn says_newer_record(conditions: &[Condition]) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == DEGRADED && c.status == "True" && c.reason == NEWER_RECORD_REASON)
}

fn merge(
    previous: &[Condition],
    wanted: impl IntoIterator<Item = Wanted>,
    generation: Option<i64>,
    now: Timestamp,
) -> Vec<Condition> {
    let wanted: Vec<Wanted> = wanted.into_iter().collect();
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
        let waiting = waiting_for_dependents(&conditions, &wanted);
        merge(
            &conditions,
            [Some(wanted), waiting].into_iter().flatten(),
            generation,
            now,
        )
    }

    /// Forgets object `uid` (it was deleted).
    pub fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }
}

/// The reason of `Reconciling=True` for an object at rest in a ready
/// state whose dependents are not ready.
pub const DEPENDENTS_NOT_READY_REASON: &str = "DependentsNotReady";

/// An object at rest in its ready state (`Ready=True`, `Reconciling=False`)
/// whose dependents are not ready is not what kstatus calls Current: the
/// machine keeps converging them. `Reconciling=True` (reason
/// [`DEPENDENTS_NOT_READY_REASON`], the dependents' message) says so, so
/// that `kubectl wait --for=condition=Reconciling=false`, Flux and Argo CD
/// read it as in progress; `None` for any other case.
fn waiting_for_dependents(conditions: &[Condition], dependents: &Wanted) -> Option<Wanted> {
    let is = |type_: &str, status: &str| {
        conditions
            .iter()
            .any(|c| c.type_ == type_ && c.status == status)
    };
    let at_rest_ready = is(READY, "True") && is(RECONCILING, "False");
    (dependents.type_ == DEPENDENTS_READY && !dependents.status && at_rest_ready).then(|| {
        Wanted::new(
            RECONCILING,
            true,
            DEPENDENTS_NOT_READY_REASON,
            format!("dependents not ready: {}", dependents.message),
        )
    })
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
        // `LastCommand` only once a command was sent.
        assert_eq!(types, CONDITION_TYPES[..6]);
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

    fn status<'a>(cs: &'a [Condition], t: &str) -> (&'a str, &'a str) {
        let c = get(cs, t);
        (c.status.as_str(), c.reason.as_str())
    }

    /// kstatus reads the first of `Reconciling=True` and `Stalled=True`
    /// it meets: they must never both be `True`.
    fn assert_kstatus_consistent(cs: &[Condition]) {
        let both = get(cs, RECONCILING).status == "True" && get(cs, STALLED).status == "True";
        assert!(!both, "Reconciling and Stalled both True: {cs:?}");
    }

    #[test]
    fn kstatus_reads_a_running_state_as_reconciling_and_rest_as_current() {
        let running = from_record(&MACHINE, &record("Provisioning"), Some(1), &[], t(10));
        assert_eq!(status(&running, RECONCILING), ("True", "Provisioning"));
        assert_eq!(status(&running, STALLED), ("False", "AsExpected"));
        for state in ["Ready", "Done"] {
            let cs = from_record(&MACHINE, &record(state), Some(1), &[], t(10));
            assert_eq!(status(&cs, RECONCILING), ("False", state));
            assert_eq!(status(&cs, STALLED), ("False", "AsExpected"));
            assert_eq!(status(&cs, PAUSED), ("False", "NotPaused"));
        }
        let mut retrying = record("Ready");
        retrying.attempt = 1;
        retrying.last_error = Some("api down".into());
        let cs = from_record(&MACHINE, &retrying, Some(1), &[], t(10));
        assert_eq!(status(&cs, RECONCILING), ("True", "Retrying"));
    }

    #[test]
    fn a_failed_state_is_stalled_not_reconciling_unless_it_still_compensates() {
        let mut failed = record("Failed");
        failed.last_error = Some("retries exhausted in Provisioning after 3 attempts: 422".into());
        let cs = from_record(&MACHINE, &failed, Some(1), &[], t(10));
        assert_eq!(status(&cs, STALLED), ("True", "Failed"));
        assert_eq!(
            get(&cs, STALLED).message,
            "retries exhausted in Provisioning after 3 attempts: 422"
        );
        assert_eq!(status(&cs, RECONCILING), ("False", "Failed"));

        let mut unwinding = record("Provisioning");
        unwinding.last_error = Some("seeding rejected".into());
        let mut unwind = failed_unwind("seeding rejected", "Failed", false, "Provisioning");
        unwind.finished_at = None;
        unwind.failures.clear();
        unwinding.compensation = Some(unwind);
        let cs = from_record(&MACHINE, &unwinding, Some(1), &[], t(10));
        assert_eq!(status(&cs, RECONCILING), ("True", "Compensating"));
        assert_eq!(status(&cs, STALLED), ("False", "AsExpected"));

        let mut after = record("Failed");
        after.compensation = Some(failed_unwind("x", "Failed", false, "Provisioning"));
        let cs = from_record(&MACHINE, &after, Some(1), &[], t(10));
        assert_eq!(status(&cs, STALLED), ("True", "CompensationFailed"));
    }

    #[test]
    fn a_spec_change_not_taken_is_reconciling() {
        let mut r = record("Ready");
        r.observed_generation = Some(2);
        let cs = from_record(&MACHINE, &r, Some(3), &[], t(10));
        assert_eq!(status(&cs, RECONCILING), ("True", "SpecChangePending"));
        assert!(get(&cs, RECONCILING).message.contains("generation 3"));
        let cs = from_record(&MACHINE, &r, Some(2), &[], t(10));
        assert_eq!(status(&cs, RECONCILING), ("False", "Ready"));
    }

    #[test]
    fn a_paused_object_is_neither_reconciling_nor_stalled_and_says_who_paused() {
        for state in ["Provisioning", "Failed"] {
            let mut r = record(state);
            r.observed_generation = Some(1);
            r.paused = Some(fsm_core::Pause {
                seq: 4,
                by: Some("alice".into()),
                at: t(5),
            });
            // A spec change while paused is not taken: kstatus sees it in
            // `observedGeneration`, not in the conditions.
            let cs = from_record(&MACHINE, &r, Some(2), &[], t(10));
            assert_eq!(status(&cs, PAUSED), ("True", PAUSED_REASON));
            let message = &get(&cs, PAUSED).message;
            assert!(
                message.contains("alice") && message.contains(&t(5).to_string()),
                "{message}"
            );
            assert_eq!(status(&cs, RECONCILING), ("False", PAUSED_REASON));
            assert_eq!(status(&cs, STALLED), ("False", PAUSED_REASON));
            assert_eq!(status(&cs, PROGRESSING), ("False", PAUSED_REASON));
        }
    }

    #[test]
    fn a_ready_object_whose_dependents_are_not_ready_is_reconciling_for_kstatus() {
        let reported = ReportedConditions::default();
        let at_rest = from_record(&MACHINE, &record("Ready"), Some(1), &[], t(10));
        assert_eq!(status(&at_rest, RECONCILING).0, "False");

        reported.report_dependents(
            "u1",
            false,
            "Pending",
            "Deployment web: 0 of 1 ready".into(),
        );
        let cs = reported.merge_into("u1", at_rest.clone(), Some(1), t(11));
        assert_eq!(
            status(&cs, RECONCILING),
            ("True", DEPENDENTS_NOT_READY_REASON)
        );
        assert_eq!(
            get(&cs, RECONCILING).message,
            "dependents not ready: Deployment web: 0 of 1 ready"
        );
        assert_eq!(
            status(&cs, READY).0,
            "True",
            "the machine rests in its ready state"
        );

        reported.report_dependents("u1", true, "Ready", String::new());
        let cs = reported.merge_into("u1", at_rest.clone(), Some(1), t(12));
        assert_eq!(status(&cs, RECONCILING).0, "False");

        // A state that is not ready already says Reconciling for itself.
        reported.report_dependents("u2", false, "Pending", "x".into());
        let running = from_record(&MACHINE, &record("Provisioning"), Some(1), &[], t(10));
        let cs = reported.merge_into("u2", running.clone(), Some(1), t(11));
        assert_eq!(get(&cs, RECONCILING), get(&running, RECONCILING));
    }

    #[test]
    fn a_ready_state_that_cannot_converge_is_not_ready_and_keeps_trying() {
        let mut r = record("Ready");
        r.degraded = Some(fsm_core::Degraded {
            reason: "Deployment web: field conflict with kubectl".into(),
            since: t(3),
        });
        let cs = from_record(&MACHINE, &r, Some(1), &[], t(10));
        assert_eq!(status(&cs, READY), ("False", NOT_CONVERGED_REASON));
        assert_eq!(status(&cs, DEGRADED), ("True", NOT_CONVERGED_REASON));
        assert_eq!(status(&cs, RECONCILING), ("True", NOT_CONVERGED_REASON));
        assert_eq!(status(&cs, STALLED), ("False", "AsExpected"));
        assert_eq!(status(&cs, PROGRESSING), ("False", "Ready"));
        assert!(
            get(&cs, DEGRADED)
                .message
                .contains("Deployment web: field conflict with kubectl"),
            "{cs:?}"
        );
        // Recovered: the record has no `degraded` any more.
        let again = from_record(&MACHINE, &record("Ready"), Some(1), &cs, t(20));
        assert_eq!(status(&again, READY), ("True", "Ready"));
        assert_eq!(get(&again, READY).last_transition_time, Time(t(20)));
    }

    fn command(seq: u64, text: &str, refused: Option<&str>) -> fsm_core::CommandEntry {
        fsm_core::CommandEntry {
            seq,
            command: text.into(),
            by: Some("bob".into()),
            at: t(seq as i64),
            refused: refused.map(str::to_owned),
        }
    }

    #[test]
    fn the_last_command_is_reported_applied_or_refused() {
        let mut r = record("Provisioning");
        let cs = from_record(&MACHINE, &r, Some(1), &[], t(10));
        assert!(cs.iter().all(|c| c.type_ != LAST_COMMAND));

        r.commands = vec![command(1, "pause", None), command(2, "resume", None)];
        let cs = from_record(&MACHINE, &r, Some(1), &[], t(10));
        assert_eq!(status(&cs, LAST_COMMAND), ("True", APPLIED_REASON));
        assert!(
            get(&cs, LAST_COMMAND)
                .message
                .starts_with("resume (#2) by bob")
        );

        r.commands.push(command(
            3,
            "goto Nowhere",
            Some("Nowhere is not a state of Db"),
        ));
        let cs = from_record(&MACHINE, &r, Some(1), &cs, t(20));
        assert_eq!(status(&cs, LAST_COMMAND), ("False", REFUSED_REASON));
        assert_eq!(
            get(&cs, LAST_COMMAND).message,
            "goto Nowhere (#3) by bob refused: Nowhere is not a state of Db"
        );
        let types: Vec<_> = cs.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, CONDITION_TYPES);
    }

    /// The conditions are a function of the record: computing them again
    /// later over what was written changes nothing, not even a
    /// `lastTransitionTime`, whatever the record says.
    #[test]
    fn the_same_record_gives_the_same_conditions_at_any_time() {
        let mut paused = record("Provisioning");
        paused.paused = Some(fsm_core::Pause {
            seq: 1,
            by: None,
            at: t(1),
        });
        paused.commands = vec![command(1, "pause", None)];
        let mut degraded = record("Ready");
        degraded.degraded = Some(fsm_core::Degraded {
            reason: "conflict".into(),
            since: t(1),
        });
        let mut failed = record("Failed");
        failed.last_error = Some("boom".into());
        for r in [
            record("Ready"),
            record("Provisioning"),
            paused,
            degraded,
            failed,
        ] {
            let first = from_record(&MACHINE, &r, Some(1), &[], t(10));
            let later = from_record(&MACHINE, &r, Some(1), &first, t(1000));
            assert_eq!(first, later);
            assert!(same(&first, &later));
            assert_kstatus_consistent(&first);
        }
    }

    #[test]
    fn a_record_that_cannot_be_used_is_stalled() {
        let before = from_record(&MACHINE, &record("Provisioning"), Some(1), &[], t(0));
        let err = DecodeError::Malformed("expected value".into());
        let too_large = fsm_core::StoreError::TooLarge {
            what: "the object".into(),
            size: 2_000_000,
            limit: 1_500_000,
        };
        for cs in [
            corrupt(&err, Some(1), &before, t(5)),
            too_large_conditions(&too_large, &before),
            newer_record(3, 2, Some(1), &before, t(5)),
        ] {
            assert_eq!(get(&cs, STALLED).status, "True");
            assert_eq!(get(&cs, RECONCILING).status, "False");
            assert_eq!(get(&cs, STALLED).reason, get(&cs, DEGRADED).reason);
            assert_kstatus_consistent(&cs);
        }
    }

    fn too_large_conditions(error: &fsm_core::StoreError, before: &[Condition]) -> Vec<Condition> {
        too_large(error, Some(1), before, t(5))
    }
}
