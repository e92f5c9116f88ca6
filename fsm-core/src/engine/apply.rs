//! One reconcile in flight: what it works on, what it has done so far, and
//! the last of its phases, applying a decision (commit, release, or go on
//! deciding).

use std::ops::ControlFlow;
use std::time::Duration;

use crate::engine::{Decision, Effect, Engine, Observed, Plan, ReconcileError, Report, Then, plan};
use crate::fsm::StatusFields;
use crate::record::StateRecord;
use crate::store::{Commit, StateStore, Version};
use crate::{clock::Timestamp, fsm::Fsm};

/// One reconcile of one object, between its load and its report.
pub(super) struct InFlight<'a, S: Fsm> {
    pub(super) engine: &'a Engine<S>,
    pub(super) store: &'a dyn StateStore,
    pub(super) observed: &'a Observed,
    pub(super) resource: &'a S::Resource,
    pub(super) context: &'a S::Context,
    /// The record as decided so far: `None` before the machine started,
    /// once the record is deleted, and while a step holds it.
    pub(super) record: Option<StateRecord>,
    /// The store's version of the last record loaded or committed.
    pub(super) version: Option<Version>,
    /// Bookkeeping decided but not yet committed (the initial entry,
    /// deletion start, a spec change under `continue`), and transitions
    /// batched under [`Machine::batch_commits`](crate::Machine::batch_commits),
    /// ride along with the next commit.
    unsaved: bool,
    /// Status fields published by the steps run so far, written with the
    /// next commit.
    published: Option<StatusFields>,
    /// Transitions taken so far (committed or batched), against
    /// `max_transitions`.
    transitions: u32,
    /// The decision being applied ends a step of unwinding (a compensation,
    /// the cleanup, the end of the chain): its progress is committed on
    /// its own, never batched, even when a restart follows.
    pub(super) unwinding: bool,
    pub(super) report: Report,
}

impl<'a, S: Fsm> InFlight<'a, S> {
    /// Loads and decodes the object's record, writing back one that another
    /// build wrote (see [`RawRecord::upgrade`](crate::RawRecord::upgrade)).
    ///
    /// # Errors
    /// [`ReconcileError::Corrupt`] for a record that does not decode and
    /// [`ReconcileError::NewerRecord`] for a newer build's (both are left
    /// as they are); [`ReconcileError::Store`] when the load fails.
    pub(super) async fn load(
        engine: &'a Engine<S>,
        store: &'a dyn StateStore,
        observed: &'a Observed,
        resource: &'a S::Resource,
        context: &'a S::Context,
    ) -> Result<Self, ReconcileError> {
        let loaded = store.load(&observed.key).await?;
        let mut version = loaded.version;
        let mut report = Report {
            state: String::new(),
            record: None,
            version: None,
            commits: 0,
            requeue: None,
            released: false,
            effects: Vec::new(),
        };
        let record = match loaded.record {
            Some(raw) => Some(
                super::upgrade::load_upgraded::<S>(
                    store,
                    &observed.key,
                    &raw,
                    &mut version,
                    &mut report,
                )
                .await?,
            ),
            None => None,
        };
        Ok(InFlight {
            engine,
            store,
            observed,
            resource,
            context,
            record,
            version,
            unsaved: false,
            published: None,
            transitions: 0,
            unwinding: false,
            report,
        })
    }

    /// What runs now, at `now`.
    pub(super) fn plan(&self, now: Timestamp) -> Plan {
        let planned = plan(S::machine(), self.record.as_ref(), self.observed, now);
        tracing::trace!(machine = S::machine().name(), object = %self.observed.key, ?planned, "planned");
        planned
    }

    /// Adds the status fields one step published to those waiting for the
    /// next commit (key by key, the later winning).
    pub(super) fn publish(&mut self, step: Option<StatusFields>) {
        let Some(step) = step else { return };
        match &mut self.published {
            Some(pending) => pending.extend(step),
            None => self.published = Some(step),
        }
    }

    /// The object is being deleted and nothing was ever recorded for it:
    /// it is released without a write.
    pub(super) fn release_unrecorded(&mut self) {
        self.report.released = true;
        self.report.effects.push(Effect::Released);
        self.report.requeue = None;
    }

    /// Applies `decision`: keeps its record for the next round, commits it
    /// (with whatever bookkeeping, batched transitions and published status
    /// wait), or deletes the record on release. Breaks when the reconcile
    /// is over: everything but bookkeeping, and a transition that may
    /// chain, ends it. A transition that chains into a state whose entry
    /// may be batched ([`Machine::batches_entry`](crate::Machine::batches_entry))
    /// is kept for the commit that ends the chain.
    ///
    /// # Errors
    /// [`ReconcileError::Conflict`] when the record changed since it was
    /// loaded (nothing is committed); [`ReconcileError::Store`].
    pub(super) async fn apply(
        &mut self,
        decision: Decision,
    ) -> Result<ControlFlow<()>, ReconcileError> {
        let Decision {
            record: mut next,
            then,
            effects,
        } = decision;
        let entered = effects.iter().any(|e| matches!(e, Effect::Entered { .. }));
        self.report.effects.extend(effects);
        self.report.requeue = then.requeue();
        let changed = match then {
            Then::Proceed => {
                self.unsaved = true;
                self.record = Some(next);
                return Ok(ControlFlow::Continue(()));
            }
            Then::Release => {
                self.release().await?;
                return Ok(ControlFlow::Break(()));
            }
            Then::Commit { .. } => true,
            Then::Unchanged { .. } => false,
        };
        if next.observed_generation.is_none() && self.observed.generation.is_some() {
            next.observed_generation = self.observed.generation;
            self.unsaved = true;
        }
        if entered {
            self.transitions += 1;
        }
        let chain = entered
            && then.requeue() == Some(Duration::ZERO)
            && self.transitions < self.engine.options.max_transitions;
        if changed || self.unsaved || self.published.is_some() {
            if chain && !self.unwinding && batches_entry::<S>(&next.state) {
                // Rides with the commit that ends the chain (or with a
                // checkpoint on the way, which saves the whole record).
                self.unsaved = true;
                tracing::trace!(machine = S::machine().name(), object = %self.observed.key, state = %next.state, "entry batched with the next commit");
            } else {
                self.commit(&next).await?;
            }
        }
        self.record = Some(next);
        Ok(if chain {
            ControlFlow::Continue(())
        } else {
            ControlFlow::Break(())
        })
    }

    /// Saves `record` on the version loaded or last committed, with the
    /// status fields published since the last commit.
    async fn commit(&mut self, record: &StateRecord) -> Result<(), ReconcileError> {
        let key = &self.observed.key;
        let published = self.published.take();
        let mut commit = Commit::new(record, self.version.as_ref());
        if let Some(status) = &published {
            commit = commit.with_status(status);
        }
        let saved = self.store.save(key, commit).await?;
        self.version = Some(saved);
        self.report.commits += 1;
        self.unsaved = false;
        Ok(())
    }

    /// Deletes the record: deletion is complete.
    async fn release(&mut self) -> Result<(), ReconcileError> {
        self.store
            .delete(&self.observed.key, self.version.as_ref())
            .await?;
        self.report.released = true;
        self.report.commits += 1;
        self.version = None;
        Ok(())
    }

    /// What the reconcile did.
    pub(super) fn into_report(self) -> Report {
        let mut report = self.report;
        report.state = self
            .record
            .as_ref()
            .map(|r| r.state.clone())
            .unwrap_or_default();
        report.record = self.record;
        report.version = self.version;
        report
    }
}

/// Whether a chained transition into the state named `state` may wait for
/// a later commit of the same reconcile.
fn batches_entry<S: Fsm>(state: &str) -> bool {
    let machine = S::machine();
    machine
        .state(state)
        .is_some_and(|meta| machine.batches_entry(meta))
}
