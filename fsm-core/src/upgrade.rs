//! Records written by another build of the machine: renamed states, older
//! machine versions migrated by the machine's hook, and newer versions left
//! alone. One pure function, [`RawRecord::upgrade`], decides all of it; the
//! engine, the stores and the CLI all read records through it.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;

use crate::migration::{Migrated, OldRecord};
use crate::record::{DecodeError, RawRecord, SCHEMA_VERSION, StateRecord, data_error};
use crate::{fsm::Fsm, machine::Machine, machine::StateMeta};

/// How this build of a machine reads a stored record, decided without
/// running anything (see [`RawRecord::compatibility`]).
#[derive(Clone, Debug, PartialEq)]
pub enum RecordCompatibility {
    /// The record's current state loads as it is stored. (Its machine
    /// version may still be older, or its trail name former states: the
    /// engine then writes the record back once, stamped with this build's
    /// version.)
    Current,
    /// The current state is stored under a former name
    /// (`renamed_from`) and loads as the state renamed from it.
    Renamed {
        /// The stored name.
        from: String,
        /// The state it loads as.
        to: &'static str,
    },
    /// Written by an older machine version; the machine's migration hook
    /// maps the current state to another state or other data.
    Migrates {
        /// The record's machine version.
        from_version: u32,
        /// The stored state name.
        from_state: String,
        /// The state it becomes.
        to_state: &'static str,
    },
    /// Written by a newer machine version: this build must not act on it
    /// or overwrite it. The engine leaves it untouched
    /// ([`ReconcileError::NewerRecord`](crate::ReconcileError::NewerRecord)).
    Newer {
        /// The record's machine version.
        version: u32,
        /// This build's machine version.
        supported: u32,
    },
    /// This build cannot read the record: malformed, a state it does not
    /// have (and no migration maps), data that does not fit, a migration
    /// that refused.
    Unreadable {
        /// What is wrong.
        reason: DecodeError,
    },
}

impl RecordCompatibility {
    /// Whether this build can load the record (possibly after renaming
    /// or migrating it).
    pub fn is_loadable(&self) -> bool {
        matches!(
            self,
            RecordCompatibility::Current
                | RecordCompatibility::Renamed { .. }
                | RecordCompatibility::Migrates { .. }
        )
    }
}

/// A stored record as this build of the machine reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct Upgraded {
    /// The record with renames and migrations applied, stamped with this
    /// build's machine version. Its history keeps the names it was written
    /// with.
    pub record: StateRecord,
    /// What was done to the current state.
    pub compatibility: RecordCompatibility,
    /// The current state's name as stored.
    pub stored_state: String,
    /// The machine version that wrote the record.
    pub stored_version: u32,
    /// Whether `record` differs from what is stored, so that it must be
    /// written back before the machine acts on it.
    pub changed: bool,
}

impl RawRecord {
    /// Reads the record as machine `S` sees it, running no handler: checks
    /// the record format and the machine version, loads renamed states by
    /// their new names, asks [`Fsm::migrate`] about records of an older
    /// machine version, and checks every state the record names.
    ///
    /// # Rules
    /// 1. A record with a newer machine version than `S`'s is refused with
    ///    [`DecodeError::NewerMachine`]: it is never read, so never
    ///    overwritten.
    /// 2. When the record's version is older, [`Fsm::migrate`] is asked
    ///    about the current state and about each state on the trail (the
    ///    compensable states entered), with the names as stored. A state
    ///    it maps [`Migrated::To`] another takes that state's name and
    ///    data; when the name changes, the retry bookkeeping of the old
    ///    state (attempts, next attempt, last error) is dropped, and the
    ///    time the state was entered is kept.
    /// 3. Every other state name resolves through `renamed_from`; the
    ///    history keeps the names as written.
    /// 4. The current state's data must fit its variant (fields added
    ///    with `#[serde(default)]` take their default).
    /// 5. A record in a `ready` or `final` state with open entries on its
    ///    trail (written before saga scopes) has its scope closed
    ///    ([`StateRecord::close_scope`]), in memory only: the next commit
    ///    stores it.
    ///
    /// # Errors
    /// [`DecodeError`], naming what is wrong.
    pub fn upgrade<S: Fsm>(&self) -> Result<Upgraded, DecodeError> {
        let machine = S::machine();
        let value = match self {
            RawRecord::Json(v) => Cow::Borrowed(v),
            RawRecord::Text(t) => Cow::Owned(
                serde_json::from_str::<Value>(t)
                    .map_err(|e| DecodeError::Malformed(e.to_string()))?,
            ),
            // This build's own commit: already current, nothing to check.
            RawRecord::Decoded(d) if d.written_by::<S>() => {
                let record = d.record().as_ref().clone();
                return Ok(Upgraded {
                    compatibility: RecordCompatibility::Current,
                    stored_state: record.state.clone(),
                    stored_version: record.machine_version,
                    changed: false,
                    record,
                });
            }
            // Another machine's or build's: read it as stored.
            RawRecord::Decoded(_) => Cow::Owned(self.as_json()),
        };
        // The versions first: a newer record may not parse as this one.
        let schema = value
            .get("schemaVersion")
            .and_then(Value::as_u64)
            .ok_or_else(|| DecodeError::Malformed("missing schemaVersion".to_owned()))?;
        if schema > u64::from(SCHEMA_VERSION) {
            return Err(DecodeError::NewerSchema {
                found: schema,
                supported: SCHEMA_VERSION,
            });
        }
        // A newer build's record is not read further: it is that build's.
        let written_by = value.get("machineVersion").and_then(Value::as_u64);
        if let Some(found) = written_by.filter(|v| *v > u64::from(machine.version())) {
            return Err(DecodeError::NewerMachine {
                found: u32::try_from(found).unwrap_or(u32::MAX),
                supported: machine.version(),
            });
        }
        let stored = StateRecord::deserialize(value.as_ref())
            .map_err(|e| DecodeError::Malformed(e.to_string()))?;
        let mut record = stored.clone();
        record.machine_version = machine.version();
        let compatibility = upgrade_current::<S>(&mut record, stored.machine_version)?;
        for entry in &mut record.trail {
            let upgraded =
                upgrade_state::<S>(&entry.state, entry.data.as_ref(), stored.machine_version)?;
            entry.state = upgraded.meta.name().to_owned();
            entry.data = upgraded.data;
        }
        if let Some(target) = record.compensation.as_mut().and_then(|u| u.target.as_mut()) {
            *target = resolve(machine, target)?.name().to_owned();
        }
        record.current::<S>()?;
        let changed = record != stored;
        // Written before saga scopes: a record at rest in a state that
        // closes the scope has every entry of its trail open. Closing the
        // scope in memory gives the rule of this build without a write:
        // the next commit stores it.
        close_scope_of_resting::<S>(&mut record);
        Ok(Upgraded {
            record,
            compatibility,
            stored_state: stored.state,
            stored_version: stored.machine_version,
            changed,
        })
    }

    /// How this build of machine `S` reads the record, without running
    /// anything: what a pre-flight check before an upgrade, or a rollback,
    /// reports for each object.
    ///
    /// ```
    /// use fsm_core::{Machine, RawRecord, RecordCompatibility, StateMeta};
    /// # use fsm_core::prelude::*;
    /// # #[derive(Clone, Debug, Serialize, Deserialize)]
    /// # enum Job { Start, Done, Failed }
    /// # #[derive(Debug, thiserror::Error)] #[error("e")] struct E;
    /// # impl Classify for E {}
    /// static STATES: [StateMeta; 3] = [
    ///     StateMeta::new("Start").initial().with_handler().renamed_from(&["Begin"]).next(&["Done"]),
    ///     StateMeta::new("Done").final_state(),
    ///     StateMeta::new("Failed").failed(),
    /// ];
    /// static MACHINE: Machine = Machine::new("Job", &STATES).versioned(2);
    /// # impl Fsm for Job {
    /// #     type Resource = (); type Context = (); type Error = E;
    /// #     fn machine() -> &'static Machine { &MACHINE }
    /// #     fn state_name(&self) -> &'static str {
    /// #         match self { Job::Start => "Start", Job::Done => "Done", Job::Failed => "Failed" }
    /// #     }
    /// #     fn unit_state(name: &str) -> Option<Self> {
    /// #         match name { "Start" => Some(Job::Start), "Done" => Some(Job::Done), "Failed" => Some(Job::Failed), _ => None }
    /// #     }
    /// #     fn handle<'a>(&'a self, _: &'a mut Step<'_, Self>) -> BoxFuture<'a, Result<Transition<Self>, E>> {
    /// #         Box::pin(async { Ok(Transition::next(Job::Done)) })
    /// #     }
    /// # }
    /// let record = |state: &str, version: u32| RawRecord::Json(serde_json::json!({
    ///     "schemaVersion": 1, "machineVersion": version,
    ///     "state": state, "enteredAt": "2024-01-01T00:00:00Z",
    /// }));
    /// assert_eq!(record("Start", 2).compatibility::<Job>(), RecordCompatibility::Current);
    /// assert_eq!(
    ///     record("Begin", 1).compatibility::<Job>(),
    ///     RecordCompatibility::Renamed { from: "Begin".into(), to: "Start" }
    /// );
    /// assert_eq!(
    ///     record("Start", 3).compatibility::<Job>(),
    ///     RecordCompatibility::Newer { version: 3, supported: 2 }
    /// );
    /// assert!(!record("Gone", 2).compatibility::<Job>().is_loadable());
    /// ```
    pub fn compatibility<S: Fsm>(&self) -> RecordCompatibility {
        match self.upgrade::<S>() {
            Ok(upgraded) => upgraded.compatibility,
            Err(DecodeError::NewerMachine { found, supported }) => RecordCompatibility::Newer {
                version: found,
                supported,
            },
            Err(reason) => RecordCompatibility::Unreadable { reason },
        }
    }
}

/// Renames or migrates the record's current state (rules 2 and 3 of
/// [`RawRecord::upgrade`]).
fn upgrade_current<S: Fsm>(
    record: &mut StateRecord,
    from_version: u32,
) -> Result<RecordCompatibility, DecodeError> {
    let machine = S::machine();
    let stored = std::mem::take(&mut record.state);
    let upgraded = upgrade_state::<S>(&stored, record.data.as_ref(), from_version)?;
    let to = upgraded.meta.name();
    record.state = to.to_owned();
    if !upgraded.migrated {
        return Ok(if to == stored {
            RecordCompatibility::Current
        } else {
            RecordCompatibility::Renamed { from: stored, to }
        });
    }
    record.data = upgraded.data;
    // The retries of another state's handler are not this one's.
    if machine.resolve(&stored).is_none_or(|s| s.name() != to) {
        record.attempt = 0;
        record.failures_without_attempt = 0;
        record.next_attempt_at = None;
        record.last_error = None;
    }
    Ok(RecordCompatibility::Migrates {
        from_version,
        from_state: stored,
        to_state: to,
    })
}

/// A stored state as this build reads it.
struct UpgradedState {
    /// The state it is now.
    meta: &'static StateMeta,
    /// Its data: as stored, or as the migration made it.
    data: Option<Value>,
    /// Whether the migration hook mapped it.
    migrated: bool,
}

/// One stored state as this build names it, with its data: migrated when
/// the record is older and the hook maps it, else renamed.
fn upgrade_state<S: Fsm>(
    name: &str,
    data: Option<&Value>,
    from_version: u32,
) -> Result<UpgradedState, DecodeError> {
    let machine = S::machine();
    if from_version < machine.version() {
        let old = OldRecord {
            state: name,
            data,
            version: from_version,
        };
        match S::migrate(old) {
            Ok(Migrated::Keep) => {}
            Ok(Migrated::To(state)) => {
                let to = state.state_name();
                let data =
                    state
                        .to_parts()
                        .map(|(_, data)| data)
                        .map_err(|e| DecodeError::BadData {
                            state: to.to_owned(),
                            error: data_error::<S>(to, &e),
                        })?;
                return Ok(UpgradedState {
                    meta: resolve(machine, to)?,
                    data,
                    migrated: true,
                });
            }
            Err(refused) => {
                return Err(DecodeError::Migration {
                    state: name.to_owned(),
                    version: from_version,
                    reason: refused.reason().to_owned(),
                });
            }
        }
    }
    Ok(UpgradedState {
        meta: resolve(machine, name)?,
        data: data.cloned(),
        migrated: false,
    })
}

/// The current name of the state stored as `name`.
fn resolve(machine: &Machine, name: &str) -> Result<&'static StateMeta, DecodeError> {
    machine
        .resolve(name)
        .ok_or_else(|| DecodeError::UnknownState {
            state: name.to_owned(),
            machine: machine.name(),
        })
}

/// Rule 5 of [`RawRecord::upgrade`]: closes the scope of a record written
/// before scopes that rests in a `ready` or `final` state, unless it is
/// unwinding. (A `commits` state closes the scope before its own entry,
/// which stays open: being in one says nothing about the entries after.)
fn close_scope_of_resting<S: Fsm>(record: &mut StateRecord) {
    // Most records have no open entry: nothing to look up.
    if record.open_trail().is_empty() {
        return;
    }
    let closes = S::machine()
        .state(&record.state)
        .is_some_and(StateMeta::closes_scope_with_itself);
    let unwinding = record.compensation.as_ref().is_some_and(|u| u.is_active());
    if closes && !unwinding {
        record.close_scope();
    }
}
