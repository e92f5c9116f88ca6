//! The persisted state of one object's machine, and its decoding.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::command::{CommandEntry, Degraded, Pause};
use crate::{clock::Timestamp, fsm::Fsm, machine::Machine};

/// The record format this version of the engine writes and reads.
pub const SCHEMA_VERSION: u32 = 1;

/// How many history entries a record keeps by default.
pub const DEFAULT_HISTORY_LIMIT: usize = 20;

/// How many compensable state entries a record keeps at most; older ones are
/// dropped (with a warning) so that a workflow looping forever cannot grow
/// its record without bound.
pub const MAX_TRAIL: usize = 64;

/// One committed transition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEntry {
    /// The transition's sequence number: 1 for the entry into the initial
    /// state, then one more per committed transition.
    pub seq: u64,
    /// The state left; `None` for the first entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// The state entered.
    pub to: String,
    /// When the transition was committed.
    pub at: Timestamp,
    /// Why, when the engine moved by itself (timeout, failure, spec change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A state with a compensation that the workflow has entered, with its data
/// at the time (updated by checkpoints), so that its compensation can run
/// later even after the machine moved on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrailEntry {
    /// The state's name.
    pub state: String,
    /// The state's data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// When the state was entered.
    pub entered_at: Timestamp,
    /// Whether the saga's scope it was entered in has closed (the workflow
    /// reached a `ready`, `final` or `commits` state since): a failure
    /// no longer undoes it; deletion (`on_delete = compensate`) and
    /// `compensate_and_restart` still do. Left out when false, as in
    /// records written before scopes.
    #[serde(default, skip_serializing_if = "is_false")]
    pub closed: bool,
}

/// An unwinding action (a state's compensation, or the cleanup) that
/// failed for good; the chain went on without it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnwindFailure {
    /// The state whose compensation failed, or `cleanup`.
    pub step: String,
    /// The last error.
    pub error: String,
}

/// Progress of unwinding: the compensation chain after a failure, or the
/// compensation and cleanup that run when the object is deleted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Unwind {
    /// Why the workflow is unwinding.
    pub reason: String,
    /// The failed state to rest in afterwards (the initial state, with
    /// `restart`); `None` when the object is being deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The chain runs because the spec changed (`on_spec_change =
    /// compensate_and_restart`): afterwards the workflow starts again in
    /// `target`, the initial state, for the newest spec.
    #[serde(default, skip_serializing_if = "is_false")]
    pub restart: bool,
    /// Failed attempts of the current step.
    #[serde(default)]
    pub attempt: u32,
    /// When the current step may be tried again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<Timestamp>,
    /// Steps that failed for good; the chain went on without them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<UnwindFailure>,
    /// When unwinding started.
    pub started_at: Timestamp,
    /// When it ended; `None` while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Timestamp>,
}

impl Unwind {
    /// Whether unwinding is still under way.
    pub fn is_active(&self) -> bool {
        self.finished_at.is_none()
    }
}

/// The persisted state of one object's machine.
///
/// Serialized in camelCase with a `schemaVersion`, in the object's status, a
/// ConfigMap, a Secret or memory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StateRecord {
    /// The record format; see [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The version of the machine that wrote the record (see
    /// [`Machine::versioned`](crate::Machine::versioned)). Absent, as in
    /// records written before machines had versions, it is 1, and it is
    /// left out when 1.
    #[serde(default = "first_version", skip_serializing_if = "is_first_version")]
    pub machine_version: u32,
    /// The current state's variant name.
    pub state: String,
    /// The current state's data; absent for unit variants.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// When the current state was entered.
    pub entered_at: Timestamp,
    /// Failed attempts of the current state's handler.
    #[serde(default)]
    pub attempt: u32,
    /// Failures of the current state's handler classed
    /// [`ErrorClass::RetryWithoutAttempt`] since it was entered or last
    /// succeeded: they lengthen the backoff but spend no attempt. Stored
    /// as `transientFailures`, its name before the class was renamed.
    ///
    /// [`ErrorClass::RetryWithoutAttempt`]: crate::ErrorClass::RetryWithoutAttempt
    #[serde(default, rename = "transientFailures", skip_serializing_if = "is_zero")]
    pub failures_without_attempt: u32,
    /// When the handler may run again after a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<Timestamp>,
    /// The last failure, kept until the state succeeds or is left.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The object's `metadata.generation` the machine last acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// How many transitions were committed in all.
    #[serde(default)]
    pub transitions: u64,
    /// The most recent transitions, oldest first, bounded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<HistoryEntry>,
    /// The compensable states entered since the workflow started, in order
    /// of entry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trail: Vec<TrailEntry>,
    /// Compensation (or deletion) progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compensation: Option<Unwind>,
    /// The spec the workflow started from, when the machine snapshots it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_snapshot: Option<Value>,
    /// The sequence number of the last command taken (applied or
    /// refused); commands numbered at or below it are never taken again.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub command_seq: u64,
    /// The pause in force, if any: nothing runs but deletion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<Pause>,
    /// The most recent commands taken, oldest first, at most
    /// [`COMMAND_LOG_LIMIT`](crate::COMMAND_LOG_LIMIT).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<CommandEntry>,
    /// The current state stays but reports it cannot converge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded: Option<Degraded>,
}

/// A record as a store holds it, before decoding.
#[derive(Clone, Debug, PartialEq)]
pub enum RawRecord {
    /// Already parsed JSON (the status store).
    Json(Value),
    /// Text that should hold JSON (ConfigMap and Secret stores).
    Text(String),
    /// A record this build of a machine committed, kept decoded by a store
    /// that caches what it wrote (see [`DecodedRecord`]): reading it skips
    /// parsing and checking the stored JSON.
    Decoded(DecodedRecord),
}

/// A record that this build of machine `machine` committed itself, kept
/// decoded and shared, so that the next load of the same stored version
/// needs no decoding.
///
/// # Guarantees
/// [`RawRecord::upgrade`] answers it without decoding only for the same
/// machine (its name) and machine version that wrote it; for any other it
/// is read as its JSON, like any stored record, so upgrades and
/// compatibility checks still apply.
///
/// # Assumptions
/// The record is one this build's engine committed (its names current,
/// its data fitting its variant): a store builds one only from the record
/// it was asked to save, never from what it read.
///
/// ```
/// use std::sync::Arc;
/// use fsm_core::{DecodedRecord, Machine, RawRecord, StateMeta, StateRecord, Timestamp};
/// static STATES: [StateMeta; 1] = [StateMeta::new("Start").initial()];
/// static MACHINE: Machine = Machine::new("Job", &STATES);
/// let record = serde_json::from_value::<StateRecord>(serde_json::json!({
///     "schemaVersion": 1, "state": "Start", "enteredAt": "2024-01-01T00:00:00Z"
/// })).unwrap();
/// let raw = RawRecord::Decoded(DecodedRecord::new(&MACHINE, Arc::new(record.clone())));
/// assert_eq!(raw.as_json()["state"], "Start");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct DecodedRecord {
    machine: &'static str,
    machine_version: u32,
    record: Arc<StateRecord>,
}

impl DecodedRecord {
    /// `record`, which this build of `machine` committed.
    pub fn new(machine: &Machine, record: Arc<StateRecord>) -> Self {
        DecodedRecord {
            machine: machine.name(),
            machine_version: machine.version(),
            record,
        }
    }

    /// The record.
    pub fn record(&self) -> &Arc<StateRecord> {
        &self.record
    }

    /// Whether machine `S` (this build) wrote it, so that it needs no
    /// decoding, upgrade or check.
    pub(crate) fn written_by<S: Fsm>(&self) -> bool {
        let machine = S::machine();
        self.machine == machine.name()
            && self.machine_version == machine.version()
            && self.record.machine_version == machine.version()
            && self.record.schema_version == SCHEMA_VERSION
    }
}

/// Why a stored record cannot be used. A record that fails to decode is
/// never overwritten by the engine: a person or a migration must fix it.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum DecodeError {
    /// Not JSON, or not a record.
    #[error("the stored record is malformed: {0}")]
    Malformed(String),
    /// Written by a newer version of the engine.
    #[error("the stored record has schema version {found}, newer than the supported {supported}")]
    NewerSchema {
        /// The record's version.
        found: u64,
        /// The version this engine reads.
        supported: u32,
    },
    /// Written by a newer version of the machine (see
    /// [`Machine::versioned`](crate::Machine::versioned)): this build
    /// leaves it alone.
    #[error(
        "the stored record was written by version {found} of the machine, newer than this build's {supported}"
    )]
    NewerMachine {
        /// The record's machine version.
        found: u32,
        /// This build's machine version.
        supported: u32,
    },
    /// The machine's migration hook refused the record.
    #[error("the stored state {state} of machine version {version} cannot be migrated: {reason}")]
    Migration {
        /// The stored state name.
        state: String,
        /// The record's machine version.
        version: u32,
        /// What the hook said.
        reason: String,
    },
    /// A state the machine does not have, under its name or a former one.
    #[error("the stored record names state {state}, which machine {machine} does not have")]
    UnknownState {
        /// The stored name.
        state: String,
        /// The machine.
        machine: &'static str,
    },
    /// The state's data does not fit its variant.
    #[error("the stored data of state {state} does not fit the variant: {error}")]
    BadData {
        /// The state.
        state: String,
        /// What serde said.
        error: String,
    },
}

impl RawRecord {
    /// Decodes and checks a record against machine `S`: the record format,
    /// the machine version, every state name it mentions, and the current
    /// state's data. Renamed and migrated states are read as
    /// [`RawRecord::upgrade`] reads them.
    ///
    /// # Errors
    /// [`DecodeError`], naming what is wrong.
    pub fn decode<S: Fsm>(&self) -> Result<StateRecord, DecodeError> {
        self.upgrade::<S>().map(|upgraded| upgraded.record)
    }

    /// The record as a JSON value: text that is not JSON becomes a JSON
    /// string holding it.
    pub fn as_json(&self) -> Value {
        match self {
            RawRecord::Json(v) => v.clone(),
            RawRecord::Text(t) => {
                serde_json::from_str(t).unwrap_or_else(|_| Value::String(t.clone()))
            }
            // A record that encodes is the only kind a store keeps decoded.
            RawRecord::Decoded(d) => serde_json::to_value(d.record.as_ref()).unwrap_or_default(),
        }
    }
}

/// serde's message about a state's data, or a redacted one for a
/// `sensitive` state (serde quotes offending values).
pub(crate) fn data_error<S: Fsm>(state: &str, error: &serde_json::Error) -> String {
    let sensitive = S::machine().state(state).is_some_and(|m| m.is_sensitive());
    if sensitive {
        format!(
            "{:?} error at line {} column {} (details withheld: the state is sensitive)",
            error.classify(),
            error.line(),
            error.column()
        )
    } else {
        error.to_string()
    }
}

impl StateRecord {
    /// A fresh record in `state`, entered at `now`.
    ///
    /// # Errors
    /// The state's data could not be serialized.
    pub fn new<S: Fsm>(state: &S, now: Timestamp) -> Result<Self, serde_json::Error> {
        let (name, data) = state.to_parts()?;
        Ok(StateRecord {
            schema_version: SCHEMA_VERSION,
            machine_version: S::machine().version(),
            state: name.to_owned(),
            data,
            entered_at: now,
            attempt: 0,
            failures_without_attempt: 0,
            next_attempt_at: None,
            last_error: None,
            observed_generation: None,
            transitions: 0,
            history: Vec::new(),
            trail: Vec::new(),
            compensation: None,
            spec_snapshot: None,
            command_seq: 0,
            paused: None,
            commands: Vec::new(),
            degraded: None,
        })
    }

    /// The trail of the open saga scope: the compensable states entered
    /// since the workflow last reached a `ready`, `final` or `commits`
    /// state, in order of entry. A failure undoes these and no others.
    pub fn open_trail(&self) -> &[TrailEntry] {
        let closed = self.trail.iter().take_while(|e| e.closed).count();
        &self.trail[closed..]
    }

    /// Closes the saga's scope: the open entries become closed, and the
    /// closed entries keep one entry per state (what deletion and
    /// `compensate_and_restart` undo), so the trail stays bounded by the
    /// number of compensable states however often the object goes through
    /// them. A state entered again takes its latest data and entry time
    /// but keeps its place, that of its first entry: the order in which
    /// the object was built up, which deletion undoes backwards.
    pub fn close_scope(&mut self) {
        if self.open_trail().is_empty() {
            return;
        }
        let mut kept: Vec<TrailEntry> = Vec::with_capacity(self.trail.len());
        for mut entry in self.trail.drain(..) {
            entry.closed = true;
            match kept.iter_mut().find(|k| k.state == entry.state) {
                Some(first) => *first = entry,
                None => kept.push(entry),
            }
        }
        self.trail = kept;
    }

    /// The trail entry whose compensation runs next while the record
    /// unwinds: the latest entry of the open scope after a failure; the
    /// latest entry of the whole trail on deletion or before a
    /// `compensate_and_restart`. `None` when that part of the trail is
    /// done, or when nothing unwinds.
    pub fn next_compensation(&self) -> Option<&TrailEntry> {
        let unwind = self.compensation.as_ref().filter(|u| u.is_active())?;
        let last = self.trail.last()?;
        let everything = unwind.target.is_none() || unwind.restart;
        (everything || !last.closed).then_some(last)
    }

    /// The current state, rebuilt from its name and data.
    ///
    /// # Errors
    /// [`DecodeError::BadData`] when the data does not fit the variant.
    ///
    /// For a `sensitive` state the error does not repeat serde's message,
    /// which may quote the data.
    pub fn current<S: Fsm>(&self) -> Result<S, DecodeError> {
        S::from_parts(&self.state, self.data.as_ref()).map_err(|e| DecodeError::BadData {
            state: self.state.clone(),
            error: data_error::<S>(&self.state, &e),
        })
    }

    /// The record as stored by the JSON stores.
    ///
    /// # Errors
    /// Only if a state's data cannot be represented as JSON.
    pub fn to_raw(&self) -> Result<RawRecord, serde_json::Error> {
        serde_json::to_value(self).map(RawRecord::Json)
    }

    /// Whether compensation or deletion is under way.
    pub fn is_unwinding(&self) -> bool {
        self.compensation.as_ref().is_some_and(Unwind::is_active)
    }
}

/// A record without a machine version was written by version 1.
fn first_version() -> u32 {
    1
}

/// For `skip_serializing_if`: version 1 is left out, so that the records
/// of machines without versions stay as they were.
#[allow(clippy::trivially_copy_pass_by_ref)] // serde passes a reference
fn is_first_version(v: &u32) -> bool {
    *v == 1
}

/// For `skip_serializing_if`: flags that are off are left out of the record.
#[allow(clippy::trivially_copy_pass_by_ref)] // serde passes a reference
fn is_false(b: &bool) -> bool {
    !*b
}

/// For `skip_serializing_if`: counters at zero are left out of the record.
#[allow(clippy::trivially_copy_pass_by_ref)] // serde passes a reference
fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// For `skip_serializing_if`: a command number never used is left out.
#[allow(clippy::trivially_copy_pass_by_ref)] // serde passes a reference
fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod scope_tests {
    //! The saga scope's bookkeeping on the trail, for any sequence of
    //! entries and closes.

    use proptest::prelude::*;

    use super::*;

    /// One step of a workflow's life: enter compensable state `n` (with
    /// data `d`), or close the scope.
    #[derive(Clone, Debug)]
    enum Step {
        Enter(u8, u8),
        Close,
    }

    fn any_step() -> impl Strategy<Value = Step> {
        prop_oneof![
            3 => (0u8..4, 0u8..3).prop_map(|(n, d)| Step::Enter(n, d)),
            1 => Just(Step::Close),
        ]
    }

    fn record() -> StateRecord {
        serde_json::from_value(serde_json::json!({
            "schemaVersion": 1, "state": "S0", "enteredAt": "2026-01-01T00:00:00Z"
        }))
        .expect("a record")
    }

    proptest! {
        #[test]
        fn closed_entries_precede_open_ones_and_are_one_per_state(
            steps in proptest::collection::vec(any_step(), 0..60)
        ) {
            let mut r = record();
            let mut since_close: Vec<(String, u8)> = Vec::new();
            for step in &steps {
                match step {
                    Step::Enter(n, d) => {
                        r.trail.push(TrailEntry {
                            state: format!("S{n}"),
                            data: Some(Value::from(*d)),
                            entered_at: Timestamp::UNIX_EPOCH,
                            closed: false,
                        });
                        since_close.push((format!("S{n}"), *d));
                    }
                    Step::Close => {
                        r.close_scope();
                        since_close.clear();
                    }
                }
                // Closed entries first, then the open scope, which is
                // exactly what was entered since the last close.
                let open = r.open_trail();
                prop_assert!(open.iter().all(|e| !e.closed));
                let open: Vec<(String, u8)> = open
                    .iter()
                    .map(|e| (e.state.clone(), e.data.as_ref().and_then(Value::as_u64).unwrap_or(9) as u8))
                    .collect();
                prop_assert_eq!(&open, &since_close);
                // At most one closed entry per state: bounded by the states.
                let closed: Vec<&str> = r
                    .trail
                    .iter()
                    .take_while(|e| e.closed)
                    .map(|e| e.state.as_str())
                    .collect();
                let mut unique = closed.clone();
                unique.sort_unstable();
                unique.dedup();
                prop_assert_eq!(unique.len(), closed.len());
                prop_assert!(closed.len() <= 4);
            }
        }

        #[test]
        fn closing_keeps_each_states_latest_entry_at_its_first_place(
            entries in proptest::collection::vec((0u8..4, 0u8..50), 0..30)
        ) {
            let mut r = record();
            for (n, d) in &entries {
                r.trail.push(TrailEntry {
                    state: format!("S{n}"),
                    data: Some(Value::from(*d)),
                    entered_at: Timestamp::UNIX_EPOCH,
                    closed: false,
                });
            }
            r.close_scope();
            // The expected: for each state its last data, ordered by
            // where the state was first entered.
            let mut expected: Vec<(usize, String, u8)> = Vec::new();
            for (i, (n, d)) in entries.iter().enumerate() {
                match expected.iter_mut().find(|(_, s, _)| *s == format!("S{n}")) {
                    Some(first) => first.2 = *d,
                    None => expected.push((i, format!("S{n}"), *d)),
                }
            }
            let got: Vec<(String, u8)> = r
                .trail
                .iter()
                .map(|e| (e.state.clone(), e.data.as_ref().and_then(Value::as_u64).unwrap_or(99) as u8))
                .collect();
            let expected: Vec<(String, u8)> = expected.into_iter().map(|(_, s, d)| (s, d)).collect();
            prop_assert_eq!(got, expected);
            prop_assert!(r.trail.iter().all(|e| e.closed));
            prop_assert!(r.open_trail().is_empty());
        }
    }
}
