//! Unwinding: the compensation chain after a failure (or before a restart
//! for a new spec), and the compensation and cleanup that run when the
//! object is deleted. The decisions here are pure, like the rest of
//! [`Decider`]'s; the engine runs the user's functions and reports what
//! came of them as an [`UnwindResult`].

use std::time::Duration;

use crate::clock::add;
use crate::engine::decide::{Decider, Decision};
use crate::engine::{Effect, Observed};
use crate::record::{StateRecord, Unwind, UnwindFailure};
use crate::{
    classify::ErrorClass, engine::DecideError, fsm::Fsm, machine::OnDelete, retry::RetryPolicy,
};

/// What came of one unwinding action: a state's compensation, or the
/// machine's cleanup.
#[derive(Clone, Debug, PartialEq)]
pub enum UnwindResult {
    /// It succeeded.
    Done,
    /// It failed.
    Error {
        /// The error, displayed.
        message: String,
        /// How to treat it.
        class: ErrorClass,
    },
}

impl Decider<'_> {
    /// The workflow failed: start the compensation chain towards `target`,
    /// or go straight there when nothing is to be compensated.
    pub(super) fn begin_unwind(
        &self,
        mut record: StateRecord,
        reason: String,
        target: &str,
        mut effects: Vec<Effect>,
    ) -> Decision {
        record.last_error = Some(reason.clone());
        record.next_attempt_at = None;
        record.compensation = Some(Unwind {
            reason: reason.clone(),
            target: Some(target.to_owned()),
            restart: false,
            attempt: 0,
            next_attempt_at: None,
            failures: Vec::new(),
            started_at: self.now,
            finished_at: None,
        });
        if record.next_compensation().is_none() {
            return self.finish_unwind(record, effects, false);
        }
        effects.push(Effect::CompensationStarted { reason });
        Decision::commit(record, Some(Duration::ZERO), effects)
    }

    /// Unwinding has nothing left to compensate: start again for the new
    /// spec (after `on_spec_change = compensate_and_restart`), or rest in
    /// the target state (or release, when deleting). `compensated` says
    /// whether a chain ran, to announce its end.
    ///
    /// # Errors
    /// [`DecideError`] for a machine that cannot build its initial state.
    pub fn end_unwind<S: Fsm>(
        &self,
        mut record: StateRecord,
        mut effects: Vec<Effect>,
        compensated: bool,
        observed: &Observed,
    ) -> Result<Decision, DecideError> {
        let Some(unwind) = record.compensation.as_mut().filter(|u| u.restart) else {
            return Ok(self.finish_unwind(record, effects, compensated));
        };
        unwind.finished_at = Some(self.now);
        unwind.attempt = 0;
        unwind.next_attempt_at = None;
        let reason = unwind.reason.clone();
        if compensated {
            effects.push(Effect::CompensationFinished {
                failures: unwind.failures.len(),
            });
        }
        self.restart::<S>(record, reason, observed, effects)
    }

    /// Unwinding has nothing left to compensate: rest in the target state
    /// (or release, when deleting). `compensated` says whether a chain ran,
    /// to announce its end.
    pub fn finish_unwind(
        &self,
        mut record: StateRecord,
        mut effects: Vec<Effect>,
        compensated: bool,
    ) -> Decision {
        let Some(mut unwind) = record.compensation.take() else {
            return Decision::commit(record, None, effects);
        };
        unwind.finished_at = Some(self.now);
        unwind.attempt = 0;
        unwind.next_attempt_at = None;
        if compensated {
            effects.push(Effect::CompensationFinished {
                failures: unwind.failures.len(),
            });
        }
        // The open scope is undone; closed scopes stay for deletion.
        record.trail.retain(|e| e.closed);
        let reason = unwind.reason.clone();
        let target = unwind.target.clone();
        record.compensation = Some(unwind);
        match target {
            Some(target) => {
                record.last_error = Some(reason.clone());
                effects.push(self.enter(&mut record, &target, None, Some(reason)));
                Decision::commit(record, None, effects)
            }
            None => {
                effects.push(Effect::Released);
                Decision::release(record, effects)
            }
        }
    }

    /// The object is being deleted: start unwinding for deletion. The chain
    /// is kept only when the machine compensates on deletion.
    pub fn begin_deletion(&self, mut record: StateRecord) -> Decision {
        if !matches!(self.machine.delete_policy(), OnDelete::Compensate) {
            record.trail.clear();
        }
        let reason = "object deleted".to_owned();
        record.compensation = Some(Unwind {
            reason: reason.clone(),
            target: None,
            restart: false,
            attempt: 0,
            next_attempt_at: None,
            failures: Vec::new(),
            started_at: self.now,
            finished_at: None,
        });
        Decision::proceed(record, vec![Effect::CompensationStarted { reason }])
    }

    /// Deletion is complete.
    pub fn release(&self, record: StateRecord) -> Decision {
        Decision::release(record, vec![Effect::Released])
    }

    /// The compensation of the last trail entry ran.
    ///
    /// # Errors
    /// Never for a machine whose description validates and which builds
    /// its initial state.
    pub fn after_compensation<S: Fsm>(
        &self,
        mut record: StateRecord,
        result: UnwindResult,
        observed: &Observed,
    ) -> Result<Decision, DecideError> {
        let Some(entry) = record.next_compensation().cloned() else {
            return self.end_unwind::<S>(record, Vec::new(), true, observed);
        };
        let policy = self
            .meta(&entry.state)
            .map_or(self.machine.default_retry(), |m| {
                self.machine.retry_policy(m)
            });
        let mut effects = Vec::new();
        if let UnwindVerdict::Retry(delay) =
            self.take_unwind_result(&mut record, &entry.state, policy, result, &mut effects)
        {
            return Ok(Decision::commit(record, Some(delay), effects));
        }
        record.trail.pop();
        let deleting = record
            .compensation
            .as_ref()
            .is_some_and(|u| u.target.is_none());
        if record.next_compensation().is_none() && !deleting {
            return self.end_unwind::<S>(record, effects, true, observed);
        }
        Ok(Decision::commit(record, Some(Duration::ZERO), effects))
    }

    /// The machine's cleanup ran (deletion only).
    pub fn after_cleanup(&self, mut record: StateRecord, result: UnwindResult) -> Decision {
        let mut effects = Vec::new();
        match self.take_unwind_result(
            &mut record,
            "cleanup",
            self.machine.default_retry(),
            result,
            &mut effects,
        ) {
            UnwindVerdict::Retry(delay) => Decision::commit(record, Some(delay), effects),
            UnwindVerdict::Done | UnwindVerdict::GaveUp => {
                effects.push(Effect::Released);
                Decision::release(record, effects)
            }
        }
    }

    /// Applies one compensation or cleanup result to the unwind progress.
    fn take_unwind_result(
        &self,
        record: &mut StateRecord,
        action: &str,
        policy: RetryPolicy,
        result: UnwindResult,
        effects: &mut Vec<Effect>,
    ) -> UnwindVerdict {
        let Some(unwind) = record.compensation.as_mut() else {
            return UnwindVerdict::Done;
        };
        let (message, retry_after) = match result {
            UnwindResult::Done => {
                unwind.attempt = 0;
                unwind.next_attempt_at = None;
                effects.push(Effect::Compensated {
                    state: action.to_owned(),
                });
                return UnwindVerdict::Done;
            }
            UnwindResult::Error {
                message,
                class: ErrorClass::Retryable { retry_after },
            } => (message, Some(retry_after)),
            UnwindResult::Error {
                message,
                class: ErrorClass::Permanent,
            } => (message, None),
            // Unwinding has no timeout to bound it, and must end: there a
            // transient error spends an attempt like a retryable one.
            UnwindResult::Error {
                message,
                class: ErrorClass::RetryWithoutAttempt { retry_after },
            } => (message, Some(retry_after)),
        };
        unwind.attempt = unwind.attempt.saturating_add(1);
        if let Some(retry_after) = retry_after
            && !policy.is_exhausted(unwind.attempt)
        {
            let delay = retry_after.unwrap_or_else(|| policy.delay(unwind.attempt, self.random));
            unwind.next_attempt_at = Some(add(self.now, delay));
            effects.push(Effect::RetryScheduled {
                state: action.to_owned(),
                attempt: unwind.attempt,
                delay,
                error: message,
            });
            return UnwindVerdict::Retry(delay);
        }
        unwind.attempt = 0;
        unwind.next_attempt_at = None;
        unwind.failures.push(UnwindFailure {
            step: action.to_owned(),
            error: message.clone(),
        });
        effects.push(Effect::CompensationFailed {
            step: action.to_owned(),
            error: message,
        });
        UnwindVerdict::GaveUp
    }
}

/// Where one unwinding action leaves the chain.
enum UnwindVerdict {
    Done,
    Retry(Duration),
    GaveUp,
}
