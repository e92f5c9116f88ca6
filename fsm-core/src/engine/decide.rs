//! The second half of a reconcile's decision: given the record and what
//! happened (a handler's outcome, a timeout, a spec change), the new record
//! and what happens next ([`Then`]). Pure: no I/O, time and randomness
//! come in as arguments. Unwinding's decisions are in [`super::unwind`].

use std::time::Duration;

use crate::clock::{add, until};
use crate::engine::describe::humanize;
use crate::engine::{Effect, Observed};
use crate::record::{HistoryEntry, MAX_TRAIL, StateRecord, TrailEntry, Unwind};
use crate::{
    classify::ErrorClass, clock::Timestamp, fsm::Fsm, machine::FailedSpecChange, machine::Machine,
    machine::SpecChange, machine::StateMeta, random::RandomSource, transition::Transition,
};

/// What a fresh start forgets of the compensation trail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Forget {
    /// Everything: `on_spec_change = restart`.
    WholeTrail,
    /// The open scope only; closed scopes stay for deletion: a failed
    /// object recovering (`on_failed_spec_change = restart`).
    OpenScope,
}

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

/// What happens after a decision, as one value (kube's `Action` is the
/// model): the reconcile goes on deciding, commits, leaves the record as it
/// is, or releases the object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Then {
    /// Go on deciding in this reconcile with the changed record: bookkeeping
    /// that is not a step of its own (the machine started, deletion began,
    /// the spec changed under `continue`). The change is committed with the
    /// reconcile's next write.
    Proceed,
    /// Commit the changed record, then reconcile again after `requeue`.
    Commit {
        /// `Some(ZERO)` at once, `None` not until the object changes.
        requeue: Option<Duration>,
    },
    /// The record did not change: commit nothing for this decision, and
    /// reconcile again after `requeue`.
    Unchanged {
        /// `Some(ZERO)` at once, `None` not until the object changes.
        requeue: Option<Duration>,
    },
    /// Deletion is complete: the record goes, and the finalizer may too.
    Release,
}

impl Then {
    /// When to reconcile again: `Some(ZERO)` at once, `None` not until the
    /// object changes.
    pub fn requeue(self) -> Option<Duration> {
        match self {
            Then::Proceed => Some(Duration::ZERO),
            Then::Commit { requeue } | Then::Unchanged { requeue } => requeue,
            Then::Release => None,
        }
    }
}

/// The decision of one step: the record to keep, what happened, and what
/// happens next.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// The record after the step.
    pub record: StateRecord,
    /// What happens next.
    pub then: Then,
    /// What happened, for events, metrics and logs.
    pub effects: Vec<Effect>,
}

impl Decision {
    /// Go on deciding with the changed `record` in this reconcile.
    #[must_use]
    pub fn proceed(record: StateRecord, effects: Vec<Effect>) -> Self {
        Decision {
            record,
            then: Then::Proceed,
            effects,
        }
    }

    /// Commit the changed `record`, then reconcile again after `requeue`.
    #[must_use]
    pub fn commit(record: StateRecord, requeue: Option<Duration>, effects: Vec<Effect>) -> Self {
        Decision {
            record,
            then: Then::Commit { requeue },
            effects,
        }
    }

    /// Keep `record` as it is, and reconcile again after `requeue`.
    #[must_use]
    pub fn unchanged(record: StateRecord, requeue: Option<Duration>, effects: Vec<Effect>) -> Self {
        Decision {
            record,
            then: Then::Unchanged { requeue },
            effects,
        }
    }

    /// Deletion is complete: delete the record, release the object.
    #[must_use]
    pub fn release(record: StateRecord, effects: Vec<Effect>) -> Self {
        Decision {
            record,
            then: Then::Release,
            effects,
        }
    }
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
    pub(super) fn meta(&self, state: &str) -> Option<&'static StateMeta> {
        self.machine.state(state)
    }

    fn default_failed(&self) -> Result<&'static str, DecideError> {
        self.machine
            .default_failed()
            .map(StateMeta::name)
            .ok_or_else(|| DecideError::MissingUnitState("<default failed state>".to_owned()))
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
    pub(super) fn enter(
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
        record.degraded = None;
        let meta = self.meta(to);
        // A `commits` state makes what came before it final; a `ready` or
        // `final` state (below) makes its own entry final as well.
        if meta.is_some_and(StateMeta::is_commits) {
            record.close_scope();
        }
        if meta.is_some_and(StateMeta::has_compensation) {
            let known = record
                .open_trail()
                .iter()
                .any(|e| e.state == record.state && e.data == record.data);
            if !known {
                record.trail.push(TrailEntry {
                    state: record.state.clone(),
                    data: record.data.clone(),
                    entered_at: self.now,
                    closed: false,
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
        if meta.is_some_and(StateMeta::closes_scope_with_itself) {
            record.close_scope();
        }
        Effect::Entered {
            from,
            to: to.to_owned(),
            reason,
        }
    }

    /// The initial state as the machine builds it ([`Fsm::initial_state`]):
    /// its name and starting data.
    pub(super) fn initial<S: Fsm>(
        &self,
    ) -> Result<(S, &'static str, Option<serde_json::Value>), DecideError> {
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
        Ok(Decision::proceed(record, vec![entered]))
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
        if self.meta(&record.state).is_some_and(StateMeta::is_failed) {
            return self.failed_spec_changed::<S>(record, reason, observed, effects);
        }
        match self.machine.spec_change() {
            SpecChange::Continue => {
                return Ok(Decision::proceed(record, effects));
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
        Ok(Decision::commit(record, Some(Duration::ZERO), effects))
    }

    /// The spec of an object resting in a failed state changed: the
    /// machine's recovery policy ([`FailedSpecChange`]) decides.
    fn failed_spec_changed<S: Fsm>(
        &self,
        mut record: StateRecord,
        reason: String,
        observed: &Observed,
        mut effects: Vec<Effect>,
    ) -> Result<Decision, DecideError> {
        match self.machine.failed_spec_change() {
            // Only the new generation is committed.
            FailedSpecChange::Stay => Ok(Decision::commit(record, None, effects)),
            FailedSpecChange::Restart => {
                record.compensation = None;
                self.start_again::<S>(record, reason, observed, effects, Forget::OpenScope)
            }
            FailedSpecChange::Goto(target) => {
                record.compensation = None;
                record.last_error = None;
                effects.push(self.enter(&mut record, target, None, Some(reason)));
                Ok(Decision::commit(record, Some(Duration::ZERO), effects))
            }
        }
    }

    /// Starts the workflow again in the initial state (with its starting
    /// data) for the spec observed now, forgetting the trail.
    pub(super) fn restart<S: Fsm>(
        &self,
        record: StateRecord,
        reason: String,
        observed: &Observed,
        effects: Vec<Effect>,
    ) -> Result<Decision, DecideError> {
        self.start_again::<S>(record, reason, observed, effects, Forget::WholeTrail)
    }

    /// [`Decider::restart`], forgetting what `forget` says of the trail.
    pub(super) fn start_again<S: Fsm>(
        &self,
        mut record: StateRecord,
        reason: String,
        observed: &Observed,
        mut effects: Vec<Effect>,
        forget: Forget,
    ) -> Result<Decision, DecideError> {
        let (_, initial, data) = self.initial::<S>()?;
        match forget {
            Forget::WholeTrail => record.trail.clear(),
            Forget::OpenScope => record.trail.retain(|e| e.closed),
        }
        record.last_error = None;
        if observed.generation.is_some() {
            record.observed_generation = observed.generation;
        }
        if self.machine.snapshots_spec() {
            record.spec_snapshot = observed.spec.clone();
        }
        effects.push(self.enter(&mut record, initial, data, Some(reason)));
        Ok(Decision::commit(record, Some(Duration::ZERO), effects))
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
                Ok(Decision::commit(record, Some(Duration::ZERO), effects))
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
            return Ok(Decision::unchanged(record, None, Vec::new()));
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
                Ok(Decision::commit(
                    record,
                    Some(Duration::ZERO),
                    vec![entered],
                ))
            }
            Outcome::Transition(Transition::Stay) => {
                Ok(self.resting_attempt(record, self.poll_interval))
            }
            Outcome::Transition(Transition::Wait(delay)) => Ok(self.resting_attempt(record, delay)),
            Outcome::Transition(Transition::Degraded {
                reason,
                retry_after,
            }) => Ok(self.degraded(record, meta, reason, retry_after)),
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
            || record.last_error.is_some()
            || record.degraded.is_some();
        record.attempt = 0;
        record.failures_without_attempt = 0;
        record.next_attempt_at = None;
        record.last_error = None;
        let effects = match record.degraded.take() {
            Some(_) => vec![Effect::Recovered {
                state: record.state.clone(),
            }],
            None => Vec::new(),
        };
        let requeue = self.until_deadline(&record, Some(delay));
        if dirty {
            Decision::commit(record, requeue, effects)
        } else {
            Decision::unchanged(record, requeue, effects)
        }
    }

    /// The handler stays but cannot converge: mark the record degraded and
    /// run the handler again after a backoff that grows with the time
    /// degraded (or after `retry_after`), spending no attempt. The record
    /// is written when the state becomes degraded or its reason changes,
    /// not for every report of the same reason: a conflict that lasts for
    /// hours costs no write per try.
    fn degraded(
        &self,
        mut record: StateRecord,
        meta: &StateMeta,
        reason: String,
        retry_after: Option<Duration>,
    ) -> Decision {
        let since = record.degraded.as_ref().map_or(self.now, |d| d.since);
        let policy = self.machine.retry_policy(meta);
        let delay = retry_after.unwrap_or_else(|| {
            let tries = tries_for(&policy, until(since, self.now));
            policy.delay(tries, self.random)
        });
        let requeue = self.until_deadline(&record, Some(delay));
        let same = record.degraded.as_ref().is_some_and(|d| d.reason == reason);
        let clean = record.attempt == 0
            && record.failures_without_attempt == 0
            && record.next_attempt_at.is_none()
            && record.last_error.is_none();
        if same && clean {
            return Decision::unchanged(record, requeue, Vec::new());
        }
        record.attempt = 0;
        record.failures_without_attempt = 0;
        record.next_attempt_at = None;
        record.last_error = None;
        record.degraded = Some(crate::command::Degraded {
            reason: reason.clone(),
            since,
        });
        let effects = if same {
            Vec::new()
        } else {
            vec![Effect::Degraded {
                state: record.state.clone(),
                reason,
            }]
        };
        Decision::commit(record, requeue, effects)
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
        Ok(Decision::commit(record, requeue, effects))
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
        Decision::commit(record, requeue, effects)
    }
}

/// The try whose backoff (before jitter) first covers `elapsed`: a
/// degraded state's waits grow with the time it has been degraded (each
/// about as long as the time so far, within the policy's `initial` and
/// `max`), so that no count needs to be written.
fn tries_for(policy: &crate::retry::RetryPolicy, elapsed: Duration) -> u32 {
    let mut tries = 1;
    while tries < 64 && policy.backoff(tries) < elapsed && policy.backoff(tries) < policy.max() {
        tries += 1;
    }
    tries
}
