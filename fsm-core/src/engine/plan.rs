//! The first half of a reconcile's decision: given the record and what is
//! observed of the object, what runs now.

use std::time::Duration;

use crate::clock::until;
use crate::engine::Observed;
use crate::record::StateRecord;
use crate::{Machine, OnDelete, Timestamp};

/// What a reconcile does, decided before anything runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// No record: enter the initial state. Also when the object is being
    /// deleted and the machine has a `cleanup`: its first handler may have
    /// acted before its commit was lost, so the cleanup runs, with the
    /// initial state.
    Start,
    /// The object is being deleted and unwinding must begin.
    BeginDeletion,
    /// The object is gone for the machine: delete the record, release the
    /// finalizer.
    Release,
    /// Run the compensation of the most recently entered compensable state.
    Compensate,
    /// Unwinding has no compensation left: run `cleanup` (deletion only).
    Cleanup,
    /// Unwinding has nothing left: rest in the failed state (or release).
    FinishUnwind,
    /// The spec changed since the machine last acted.
    SpecChanged(i64),
    /// The state's total time ran out.
    TimedOut,
    /// A retry is scheduled later: wait this long, run nothing.
    Backoff(Duration),
    /// A final or failed state: nothing runs.
    Rest,
    /// Run the state's handler.
    RunHandler,
}

/// Decides what runs now. Pure: the same inputs give the same plan.
pub fn plan(
    machine: &Machine,
    record: Option<&StateRecord>,
    observed: &Observed,
    now: Timestamp,
) -> Plan {
    let Some(record) = record else {
        return if observed.deleting && !machine.has_cleanup() {
            Plan::Release
        } else {
            Plan::Start
        };
    };
    let unwinding = record.compensation.as_ref().filter(|u| u.is_active());
    if observed.deleting {
        let Some(unwind) = unwinding.filter(|u| u.target.is_none()) else {
            return if machine.needs_finalizer() {
                Plan::BeginDeletion
            } else {
                Plan::Release
            };
        };
        if let Some(at) = unwind.next_attempt_at.filter(|at| *at > now) {
            return Plan::Backoff(until(now, at));
        }
        return if matches!(machine.delete_policy(), OnDelete::Compensate)
            && !record.trail.is_empty()
        {
            Plan::Compensate
        } else if machine.has_cleanup() {
            Plan::Cleanup
        } else {
            Plan::Release
        };
    }
    if let Some(unwind) = unwinding {
        if let Some(at) = unwind.next_attempt_at.filter(|at| *at > now) {
            return Plan::Backoff(until(now, at));
        }
        return if record.trail.is_empty() {
            Plan::FinishUnwind
        } else {
            Plan::Compensate
        };
    }
    if let Some(generation) = observed.generation
        && record
            .observed_generation
            .is_some_and(|seen| seen != generation)
    {
        return Plan::SpecChanged(generation);
    }
    let Some(state) = machine.state(&record.state) else {
        // Decoding checked the name; a record edited in memory is at rest.
        return Plan::Rest;
    };
    if state.is_resting() {
        return Plan::Rest;
    }
    if let Some(timeout) = state.state_timeout()
        && now >= crate::clock::add(record.entered_at, timeout)
    {
        return Plan::TimedOut;
    }
    if let Some(at) = record.next_attempt_at.filter(|at| *at > now) {
        return Plan::Backoff(until(now, at));
    }
    Plan::RunHandler
}
