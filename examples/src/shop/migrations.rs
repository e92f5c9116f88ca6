//! The shop's schema migrations: a stand-in for a real migration tool
//! (Flyway, `rails db:migrate`, …), shared by every shop the operator runs.

use std::collections::BTreeSet;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// A migration that cannot finish.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the schema migration v{from}→v{to} failed: its script is broken")]
pub struct MigrationFailed {
    /// The version migrated from.
    pub from: u32,
    /// The version it could not reach.
    pub to: u32,
}

/// The migration scripts, some of them broken, and a log of what ran.
///
/// A migration *to* a broken version fails (after it has changed the
/// schema half way, as real ones do); [`Migrations::fix`] mends it, as a
/// person shipping a corrected script would. The log is what the demo
/// and the tests read to see which migrations and reverts ran.
///
/// ```
/// use examples::shop::Migrations;
///
/// let migrations = Migrations::new();
/// migrations.break_version(3);
/// assert!(migrations.run(1, 2).is_ok());
/// assert!(migrations.run(2, 3).is_err());
/// migrations.revert(2, 3);
/// migrations.fix(3);
/// assert!(migrations.run(2, 3).is_ok());
/// assert_eq!(migrations.log(), ["migrate v1→v2", "migrate v2→v3 failed", "revert v3→v2", "migrate v2→v3"]);
/// ```
#[derive(Debug, Default)]
pub struct Migrations {
    broken: Mutex<BTreeSet<u32>>,
    log: Mutex<Vec<String>>,
}

/// Locks `mutex`, also after a panic elsewhere: the data stays
/// meaningful (a set and a log).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Migrations {
    /// Every migration works.
    pub fn new() -> Self {
        Migrations::default()
    }

    /// From now on, the migration to `version` fails.
    pub fn break_version(&self, version: u32) {
        lock(&self.broken).insert(version);
    }

    /// The migration to `version` works again.
    pub fn fix(&self, version: u32) {
        lock(&self.broken).remove(&version);
    }

    /// Whether the migration to `version` fails.
    pub fn is_broken(&self, version: u32) -> bool {
        lock(&self.broken).contains(&version)
    }

    /// Runs the migration `from` → `to`. Running it again is harmless
    /// (handlers run at least once).
    ///
    /// # Errors
    /// [`MigrationFailed`] when `to` is broken.
    pub fn run(&self, from: u32, to: u32) -> Result<(), MigrationFailed> {
        if self.is_broken(to) {
            self.note(format!("migrate v{from}→v{to} failed"));
            tracing::warn!(from, to, "schema migration failed");
            return Err(MigrationFailed { from, to });
        }
        self.note(format!("migrate v{from}→v{to}"));
        tracing::info!(from, to, "schema migrated");
        Ok(())
    }

    /// Reverts the migration `from` → `to` (back to `from`); never fails.
    pub fn revert(&self, from: u32, to: u32) {
        self.note(format!("revert v{to}→v{from}"));
        tracing::info!(from, to, "schema migration reverted");
    }

    /// What ran, oldest first.
    pub fn log(&self) -> Vec<String> {
        lock(&self.log).clone()
    }

    fn note(&self, line: String) {
        lock(&self.log).push(line);
    }
}
