//! The second half of a reconcile's decision: given the record and what
//! happened (a handler's outcome, a timeout, a compensation's result), the
//! new record, whether to commit it, and when to look again. Pure: no I/O,
//! time and randomness come in as arguments.

use std::time::Duration;

use crate::clock::{add, until};
use crate::engine::{Effect, Observed};
use crate::record::{HistoryEntry, MAX_TRAIL, StateRecord, StepFailure, TrailEntry, Unwind};
use crate::{
    ErrorClass, Fsm, Machine, OnDelete, RandomSource, RetryPolicy, SpecChange, StateMeta,
    Timestamp, Transition,
};

/// What came of running a state's handler.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome<S> {
    /// The handler returned a transition.
    Transition(Transition<S>),
    /// The handler returned an error of this class.
    Error {
        /// The error, displayed.
        message: String,
        /// How to treat it.
        class: ErrorClass,
    },
    /// The handler did not finish within its `attempt_timeout`.
    AttemptTimedOut(Duration),
}

/// What came of running a compensation or cleanup function.
#[derive(Clone, Debug, PartialEq)]
pub enum StepResult {
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

/// The decision of one step: the record to keep, and what follows.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// The record after the step.
    pub record: StateRecord,
    /// Whether the record changed and must be committed.
    pub commit: bool,
    /// Whether the reconcile goes on deciding with the new record before
    /// committing (for bookkeeping that is not a step of its own).
    pub proceed: bool,
    /// When to reconcile again: `Some(ZERO)` at once, `None` not until the
    /// object changes.
    pub requeue: Option<Duration>,
    /// Whether deletion is complete (the record may go, the finalizer too).
    pub release: bool,
    /// What happened, for events, metrics and logs.
    pub effects: Vec<Effect>,
}

/// Why a decision could not be made. Both are bugs of a hand-written
/// machine (the derive cannot produce them).
#[derive(Debug, thiserror::Error)]
pub enum DecideError {
    /// A state could not be encoded.
    #[error("a state could not be encoded")]
    Encode(#[from] serde_json::Error),
    /// `Fsm::unit_state` (or `Fsm::initial_state`) did not build a state
    /// the engine must enter.
    #[error("the machine cannot build state {0}")]
    MissingUnitState(String),
}

/// Makes decisions for one machine at one instant.
pub struct Decider<'a> {
    /// The machine's description.
    pub machine: &'static Machine,
    /// The current time.
    pub now: Timestamp,
    /// Randomness for jitter.
    pub random: &'a dyn RandomSource,
    /// How many history entries a record keeps.
    pub history_limit: usize,
    /// The requeue delay of `Transition::stay()`.
    pub poll_interval: Duration,
}

impl Decider<'_> {
    fn meta(&self, state: &str) -> Option<&'static StateMeta> {
        self.machine.state(state)
    }

    fn default_failed(&self) -> Result<&'static str, DecideError> {
        self.machine
            .default_failed()
            .map(StateMeta::name)
            .ok_or_else(|| DecideError::MissingUnitState("<default failed state>".to_owned()))
    }

    fn decision(
        &self,
        record: StateRecord,
        requeue: Option<Duration>,
        effects: Vec<Effect>,
    ) -> Decision {
        Decision {
            record,
            commit: true,
            proceed: false,
            requeue,
            release: false,
            effects,
        }
    }

    /// Caps `requeue` so that the reconcile after it comes no later than the
    /// current state's timeout.
    fn until_deadline(&self, record: &StateRecord, requeue: Option<Duration>) -> Option<Duration> {
        let deadline = self
            .meta(&record.state)
            .filter(|m| !m.is_resting())
            .and_then(StateMeta::state_timeout)
            .map(|t| until(self.now, add(record.entered_at, t)));
        match (requeue, deadline) {
            (Some(r), Some(d)) => Some(r.min(d)),
            (r, d) => r.or(d),
        }
    }

    /// Moves `record` into `to`: entry time now, attempts reset, history and
    /// compensation trail updated.
    fn enter(
        &self,
        record: &mut StateRecord,
        to: &str,
        data: Option<serde_json::Value>,
        reason: Option<String>,
    ) -> Effect {
        // A fresh record (just created by `start`) has no state to come from.
        let fresh = record.transitions == 0 && record.history.is_empty() && record.state == to;
        let previous = std::mem::replace(&mut record.state, to.to_owned());
        let from = (!fresh).then_some(previous);
        record.transitions += 1;
        // Make room before adding, so that a full history (whose capacity
        // is often exactly its length) is not reallocated.
        let keep = self.history_limit.saturating_sub(1);
        let excess = record.history.len().saturating_sub(keep);
        record.history.drain(..excess);
        if self.history_limit > 0 {
            record.history.push(HistoryEntry {
                seq: record.transitions,
                from: from.clone(),
                to: to.to_owned(),
                at: self.now,
                reason: reason.clone(),
            });
        }
        record.data = data;
        record.entered_at = self.now;
        record.attempt = 0;
        record.failures_without_attempt = 0;
        record.next_attempt_at = None;
        if self.meta(to).is_some_and(StateMeta::has_compensation) {
            let known = record
                .trail
                .iter()
                .any(|e| e.state == record.state && e.data == record.data);
            if !known {
                record.trail.push(TrailEntry {
                    state: record.state.clone(),
                    data: record.data.clone(),
                    entered_at: self.now,
                });
                if record.trail.len() > MAX_TRAIL {
                    tracing::warn!(
                        machine = self.machine.name(),
                        limit = MAX_TRAIL,
                        "compensation trail full; the oldest entry will not be compensated"
                    );
                    record.trail.remove(0);
                }
            }
        }
        Effect::Entered {
            from,
            to: to.to_owned(),
            reason,
        }
    }

    /// The initial state as the machine builds it ([`Fsm::initial_state`]):
    /// its name and starting data.
    fn initial<S: Fsm>(&self) -> Result<(S, &'static str, Option<serde_json::Value>), DecideError> {
        let initial = S::initial_state().ok_or_else(|| {
            let name = self
                .machine
                .initial_state()
                .map_or("<initial state>", StateMeta::name);
            DecideError::MissingUnitState(name.to_owned())
        })?;
        let (name, data) = initial.to_parts()?;
        Ok((initial, name, data))
    }

    /// No record yet: enter the initial state, with its starting data.
    ///
    /// The entry is not a step of its own: the reconcile goes on to the
    /// initial state's handler and commits the entry together with what
    /// the handler decided (one write for the entry and the first
    /// transition). A handler that leaves nothing to commit still gets the
    /// entry committed, so its entry time (for `timeout`) is durable.
    ///
    /// # Errors
    /// [`DecideError`] for a machine that cannot build its initial state.
    pub fn start<S: Fsm>(&self, observed: &Observed) -> Result<Decision, DecideError> {
        let (initial, name, data) = self.initial::<S>()?;
        let mut record = StateRecord::new(&initial, self.now)?;
        record.observed_generation = observed.generation;
        if self.machine.snapshots_spec() {
            record.spec_snapshot = observed.spec.clone();
        }
        let entered = self.enter(&mut record, name, data, None);
        Ok(Decision {
            proceed: true,
            ..self.decision(record, Some(Duration::ZERO), vec![entered])
        })
    }

    /// The spec changed to `generation`: apply the machine's policy.
    ///
    /// # Errors
    /// [`DecideError`] for a machine that cannot build its initial state.
    pub fn spec_changed<S: Fsm>(
        &self,
        mut record: StateRecord,
        generation: i64,
        observed: &Observed,
    ) -> Result<Decision, DecideError> {
        record.observed_generation = Some(generation);
        let mut effects = vec![Effect::SpecChanged { generation }];
        let reason = format!("spec changed (generation {generation})");
        match self.machine.spec_change() {
            SpecChange::Continue => {
                return Ok(Decision {
                    proceed: true,
                    ..self.decision(record, Some(Duration::ZERO), effects)
                });
            }
            SpecChange::CompensateAndRestart if !record.trail.is_empty() => {
                let (_, initial, _) = self.initial::<S>()?;
                record.last_error = Some(reason.clone());
                record.next_attempt_at = None;
                record.compensation = Some(Unwind {
                    reason: reason.clone(),
                    target: Some(initial.to_owned()),
                    restart: true,
                    attempt: 0,
                    next_attempt_at: None,
                    failures: Vec::new(),
                    started_at: self.now,
                    finished_at: None,
                });
                effects.push(Effect::CompensationStarted { reason });
            }
            SpecChange::Restart | SpecChange::CompensateAndRestart => {
                record.compensation = None;
                return self.restart::<S>(record, reason, observed, effects);
            }
            SpecChange::Goto(target) => {
                record.compensation = None;
                record.last_error = None;
                effects.push(self.enter(&mut record, target, None, Some(reason)));
            }
        }
        Ok(self.decision(record, Some(Duration::ZERO), effects))
    }

    /// Starts the workflow again in the initial state (with its starting
    /// data) for the spec observed now, forgetting the trail.
    fn restart<S: Fsm>(
        &self,
        mut record: StateRecord,
        reason: String,
        observed: &Observed,
        mut effects: Vec<Effect>,
    ) -> Result<Decision, DecideError> {
        let (_, initial, data) = self.initial::<S>()?;
        record.trail.clear();
        record.last_error = None;
        if observed.generation.is_some() {
            record.observed_generation = observed.generation;
        }
        if self.machine.snapshots_spec() {
            record.spec_snapshot = observed.spec.clone();
        }
        effects.push(self.enter(&mut record, initial, data, Some(reason)));
        Ok(self.decision(record, Some(Duration::ZERO), effects))
    }

    /// The current state's total time ran out.
    ///
    /// # Errors
    /// [`DecideError`] for a machine without a default failed state.
    pub fn timed_out(&self, record: StateRecord) -> Result<Decision, DecideError> {
        let meta = self.meta(&record.state);
        let timeout = meta.and_then(StateMeta::state_timeout).unwrap_or_default();
        let reason = format!("timed out in {} after {}", record.state, humanize(timeout));
        let effects = vec![Effect::TimedOut {
            state: record.state.clone(),
        }];
        let target = meta.and_then(StateMeta::timeout_target);
        self.move_or_fail(record, target, reason, effects)
    }

    /// Takes an engine-built target (`on_timeout`, `on_exhausted`): a plain
    /// move to a non-failed state, otherwise a failure (with compensation)
    /// into that failed state or the default one.
    fn move_or_fail(
        &self,
        mut record: StateRecord,
        target: Option<&'static str>,
        reason: String,
        mut effects: Vec<Effect>,
    ) -> Result<Decision, DecideError> {
        match target {
            Some(t) if !self.meta(t).is_some_and(StateMeta::is_failed) => {
                record.last_error = Some(reason.clone());
                effects.push(self.enter(&mut record, t, None, Some(reason)));
                Ok(self.decision(record, Some(Duration::ZERO), effects))
            }
            Some(t) => Ok(self.begin_unwind(record, reason, t, effects)),
            None => {
                let failed = self.default_failed()?;
                Ok(self.begin_unwind(record, reason, failed, effects))
            }
        }
    }

    /// A handler ran; decide from its outcome.
    ///
    /// # Errors
    /// [`DecideError`] when the target state cannot be encoded or the
    /// machine has no default failed state.
    pub fn after_handler<S: Fsm>(
        &self,
        mut record: StateRecord,
        outcome: Outcome<S>,
    ) -> Result<Decision, DecideError> {
        let Some(meta) = self.meta(&record.state) else {
            return Ok(Decision {
                commit: false,
                ..self.decision(record, None, Vec::new())
            });
        };
        match outcome {
            Outcome::Transition(Transition::Next(next)) => {
                let (name, data) = next.to_parts()?;
                if !meta.allows(name) {
                    let effect = Effect::UndeclaredTransition {
                        from: record.state.clone(),
                        to: name.to_owned(),
                    };
                    let message = format!(
                        "handler of {} asked for undeclared transition to {name}",
                        record.state
                    );
                    let mut decision = self.failed_attempt(record, meta, message, None)?;
                    decision.effects.insert(0, effect);
                    return Ok(decision);
                }
                if self.meta(name).is_some_and(StateMeta::is_failed) {
                    let reason = format!("{} moved to {name}", record.state);
                    return Ok(self.begin_unwind(record, reason, name, Vec::new()));
                }
                record.last_error = None;
                let entered = self.enter(&mut record, name, data, None);
                Ok(self.decision(record, Some(Duration::ZERO), vec![entered]))
            }
            Outcome::Transition(Transition::Stay) => {
                Ok(self.resting_attempt(record, self.poll_interval))
            }
            Outcome::Transition(Transition::Wait(delay)) => Ok(self.resting_attempt(record, delay)),
            Outcome::Transition(Transition::Fail(reason)) => {
                let effects = vec![Effect::Failed {
                    state: record.state.clone(),
                    reason: reason.clone(),
                }];
                let target = self.default_failed()?;
                Ok(self.begin_unwind(record, reason, target, effects))
            }
            Outcome::Error {
                message,
                class: ErrorClass::Permanent,
            } => {
                let effects = vec![Effect::Failed {
                    state: record.state.clone(),
                    reason: message.clone(),
                }];
                let target = self.default_failed()?;
                Ok(self.begin_unwind(record, message, target, effects))
            }
            Outcome::Error {
                message,
                class: ErrorClass::Retryable { retry_after },
            } => self.failed_attempt(record, meta, message, retry_after),
            Outcome::Error {
                message,
                class: ErrorClass::RetryWithoutAttempt { retry_after },
            } => Ok(self.transient_failure(record, meta, message, retry_after)),
            Outcome::AttemptTimedOut(limit) => {
                let message = format!("attempt timed out after {}", humanize(limit));
                self.failed_attempt(record, meta, message, None)
            }
        }
    }

    /// A successful attempt that stays: clear failure bookkeeping (if any)
    /// and look again after `delay`.
    fn resting_attempt(&self, mut record: StateRecord, delay: Duration) -> Decision {
        let dirty = record.attempt != 0
            || record.failures_without_attempt != 0
            || record.next_attempt_at.is_some()
            || record.last_error.is_some();
        record.attempt = 0;
        record.failures_without_attempt = 0;
        record.next_attempt_at = None;
        record.last_error = None;
        let requeue = self.until_deadline(&record, Some(delay));
        Decision {
            commit: dirty,
            ..self.decision(record, requeue, Vec::new())
        }
    }

    /// A retryable failure: schedule the next attempt, or take the
    /// exhaustion path.
    fn failed_attempt(
        &self,
        mut record: StateRecord,
        meta: &StateMeta,
        message: String,
        retry_after: Option<Duration>,
    ) -> Result<Decision, DecideError> {
        let policy = self.machine.retry_policy(meta);
        record.attempt = record.attempt.saturating_add(1);
        record.last_error = Some(message.clone());
        if policy.is_exhausted(record.attempt) {
            let effects = vec![Effect::RetriesExhausted {
                state: record.state.clone(),
                error: message.clone(),
            }];
            let reason = format!(
                "retries exhausted in {} after {} attempts: {message}",
                record.state, record.attempt
            );
            return self.move_or_fail(record, meta.exhausted_target(), reason, effects);
        }
        let delay = retry_after.unwrap_or_else(|| policy.delay(record.attempt, self.random));
        record.next_attempt_at = Some(add(self.now, delay));
        let effects = vec![Effect::RetryScheduled {
            state: record.state.clone(),
            attempt: record.attempt,
            delay,
            error: message,
        }];
        let requeue = self.until_deadline(&record, Some(delay));
        Ok(self.decision(record, requeue, effects))
    }

    /// A failure classed `RetryWithoutAttempt`: try again after the backoff of the failures in
    /// a row (or `retry_after`), spending no attempt. Only the state's
    /// timeout ends it.
    fn transient_failure(
        &self,
        mut record: StateRecord,
        meta: &StateMeta,
        message: String,
        retry_after: Option<Duration>,
    ) -> Decision {
        let policy = self.machine.retry_policy(meta);
        record.failures_without_attempt = record.failures_without_attempt.saturating_add(1);
        record.last_error = Some(message.clone());
        let delay = retry_after
            .unwrap_or_else(|| policy.delay(record.failures_without_attempt, self.random));
        record.next_attempt_at = Some(add(self.now, delay));
        let effects = vec![Effect::RetryWithoutAttempt {
            state: record.state.clone(),
            failures: record.failures_without_attempt,
            delay,
            error: message,
        }];
        let requeue = self.until_deadline(&record, Some(delay));
        self.decision(record, requeue, effects)
    }

    /// The workflow failed: start the compensation chain towards `target`,
    /// or go straight there when nothing is to be compensated.
    fn begin_unwind(
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
        if record.trail.is_empty() {
            return self.finish_unwind(record, effects, false);
        }
        effects.push(Effect::CompensationStarted { reason });
        self.decision(record, Some(Duration::ZERO), effects)
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
            return self.decision(record, None, effects);
        };
        unwind.finished_at = Some(self.now);
        unwind.attempt = 0;
        unwind.next_attempt_at = None;
        if compensated {
            effects.push(Effect::CompensationFinished {
                failures: unwind.failures.len(),
            });
        }
        record.trail.clear();
        let reason = unwind.reason.clone();
        let target = unwind.target.clone();
        record.compensation = Some(unwind);
        match target {
            Some(target) => {
                record.last_error = Some(reason.clone());
                effects.push(self.enter(&mut record, &target, None, Some(reason)));
                self.decision(record, None, effects)
            }
            None => {
                effects.push(Effect::Released);
                Decision {
                    release: true,
                    ..self.decision(record, None, effects)
                }
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
        Decision {
            proceed: true,
            ..self.decision(
                record,
                Some(Duration::ZERO),
                vec![Effect::CompensationStarted { reason }],
            )
        }
    }

    /// Deletion is complete.
    pub fn release(&self, record: StateRecord) -> Decision {
        Decision {
            commit: false,
            release: true,
            ..self.decision(record, None, vec![Effect::Released])
        }
    }

    /// The compensation of the last trail entry ran.
    ///
    /// # Errors
    /// Never for a machine whose description validates and which builds
    /// its initial state.
    pub fn after_compensation<S: Fsm>(
        &self,
        mut record: StateRecord,
        result: StepResult,
        observed: &Observed,
    ) -> Result<Decision, DecideError> {
        let Some(entry) = record.trail.last().cloned() else {
            return self.end_unwind::<S>(record, Vec::new(), true, observed);
        };
        let policy = self
            .meta(&entry.state)
            .map_or(self.machine.default_retry(), |m| {
                self.machine.retry_policy(m)
            });
        let mut effects = Vec::new();
        if let StepVerdict::Retry(delay) =
            self.unwind_step(&mut record, &entry.state, policy, result, &mut effects)
        {
            return Ok(self.decision(record, Some(delay), effects));
        }
        record.trail.pop();
        let deleting = record
            .compensation
            .as_ref()
            .is_some_and(|u| u.target.is_none());
        if record.trail.is_empty() && !deleting {
            return self.end_unwind::<S>(record, effects, true, observed);
        }
        Ok(self.decision(record, Some(Duration::ZERO), effects))
    }

    /// The machine's cleanup ran (deletion only).
    pub fn after_cleanup(&self, mut record: StateRecord, result: StepResult) -> Decision {
        let mut effects = Vec::new();
        match self.unwind_step(
            &mut record,
            "cleanup",
            self.machine.default_retry(),
            result,
            &mut effects,
        ) {
            StepVerdict::Retry(delay) => self.decision(record, Some(delay), effects),
            StepVerdict::Done | StepVerdict::GaveUp => {
                effects.push(Effect::Released);
                Decision {
                    commit: false,
                    release: true,
                    ..self.decision(record, None, effects)
                }
            }
        }
    }

    /// Applies one compensation or cleanup result to the unwind progress.
    fn unwind_step(
        &self,
        record: &mut StateRecord,
        step: &str,
        policy: RetryPolicy,
        result: StepResult,
        effects: &mut Vec<Effect>,
    ) -> StepVerdict {
        let Some(unwind) = record.compensation.as_mut() else {
            return StepVerdict::Done;
        };
        let (message, retry_after) = match result {
            StepResult::Done => {
                unwind.attempt = 0;
                unwind.next_attempt_at = None;
                effects.push(Effect::Compensated {
                    state: step.to_owned(),
                });
                return StepVerdict::Done;
            }
            StepResult::Error {
                message,
                class: ErrorClass::Retryable { retry_after },
            } => (message, Some(retry_after)),
            StepResult::Error {
                message,
                class: ErrorClass::Permanent,
            } => (message, None),
            // Unwinding has no timeout to bound it, and must end: there a
            // transient error spends an attempt like a retryable one.
            StepResult::Error {
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
                state: step.to_owned(),
                attempt: unwind.attempt,
                delay,
                error: message,
            });
            return StepVerdict::Retry(delay);
        }
        unwind.attempt = 0;
        unwind.next_attempt_at = None;
        unwind.failures.push(StepFailure {
            step: step.to_owned(),
            error: message.clone(),
        });
        effects.push(Effect::CompensationFailed {
            step: step.to_owned(),
            error: message,
        });
        StepVerdict::GaveUp
    }
}

enum StepVerdict {
    Done,
    Retry(Duration),
    GaveUp,
}

/// A duration for people: `90s` → `1m30s`, `500ms`.
pub(crate) fn humanize(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let mut secs = d.as_secs();
    let mut out = String::new();
    for (unit, size) in [("d", 86_400), ("h", 3_600), ("m", 60)] {
        if secs >= size {
            out.push_str(&format!("{}{unit}", secs / size));
            secs %= size;
        }
    }
    if secs > 0 || out.is_empty() {
        out.push_str(&format!("{secs}s"));
    }
    out
}
