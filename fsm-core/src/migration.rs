//! What a machine's migration hook ([`Fsm::migrate`](crate::Fsm::migrate))
//! is given and answers: [`OldRecord`], [`Migrated`], [`MigrationError`].
//! Plain data, apart from the upgrade logic ([`crate::upgrade`]) that asks
//! the hook.

use serde_json::Value;

/// A stored state as an older build of the machine wrote it, given to
/// [`Fsm::migrate`](crate::Fsm::migrate): the current state of a record,
/// or a compensable state on its trail.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OldRecord<'a> {
    /// The state's name as stored: a name this build may no longer have.
    /// Renames (`renamed_from`) are not applied to it.
    pub state: &'a str,
    /// The state's data as stored; `None` for a unit variant.
    pub data: Option<&'a Value>,
    /// The machine version that wrote the record (1 for records written
    /// before machines had versions).
    pub version: u32,
}

/// What [`Fsm::migrate`](crate::Fsm::migrate) makes of an [`OldRecord`].
#[derive(Clone, Debug, PartialEq)]
#[must_use]
pub enum Migrated<S> {
    /// Nothing to migrate: the state loads by its (possibly former) name,
    /// its data through serde (fields added with `#[serde(default)]` take
    /// their default).
    Keep,
    /// The record's state becomes this one.
    To(S),
}

/// Why [`Fsm::migrate`](crate::Fsm::migrate) cannot map an old record.
/// The record is then unreadable: the engine leaves it untouched and
/// reports it corrupt.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct MigrationError {
    reason: String,
}

impl MigrationError {
    /// A refusal, saying why.
    pub fn new(reason: impl Into<String>) -> Self {
        MigrationError {
            reason: reason.into(),
        }
    }

    /// Why the record cannot be migrated.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}
