//! The engine: one reconcile of one object, from load to commit.
//!
//! The decision is pure ([`plan`] then [`Decider`]); this module adds the
//! I/O around it: loading and decoding the record, running handlers under
//! their attempt timeout, and committing with optimistic concurrency.

mod decide;
mod effect;
mod plan;

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

pub use decide::{DecideError, Decider, Decision, Outcome, StepResult};
pub use effect::Effect;
pub use plan::{Plan, plan};

use crate::record::{DEFAULT_HISTORY_LIMIT, DecodeError, StateRecord};
use crate::step::{CheckpointError, Checkpointer, StatusFields};
use crate::store::{ObjectKey, StateStore, StoreError, Version};
use crate::{
    Authority, AuthorityLost, BoxFuture, Classify, Clock, Extensions, Fsm, MachineError,
    RandomSource, SeededRandom, Step, SystemClock,
};
use tracing::Instrument;

/// What the engine is told about the object it reconciles.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Observed {
    /// The object's identity.
    pub key: ObjectKey,
    /// The object's `metadata.generation`, when it has one.
    pub generation: Option<i64>,
    /// Whether the object is being deleted (`deletionTimestamp` set).
    pub deleting: bool,
    /// The object's spec, for `snapshot_spec`.
    pub spec: Option<serde_json::Value>,
}

impl Default for ObjectKey {
    fn default() -> Self {
        ObjectKey::cluster("")
    }
}

/// How the engine runs.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineOptions {
    /// When to look again after `Transition::stay()`. Default: 60 s.
    pub poll_interval: Duration,
    /// How many history entries a record keeps. Default: 20.
    pub history_limit: usize,
    /// How many transitions one reconcile may commit; more than 1 lets cheap
    /// states chain without waiting for the next reconcile. Default: 1.
    pub max_transitions: u32,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            poll_interval: Duration::from_secs(60),
            history_limit: DEFAULT_HISTORY_LIMIT,
            max_transitions: 1,
        }
    }
}

/// What one reconcile did.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The state the machine is in afterwards.
    pub state: String,
    /// The record afterwards (committed, or unchanged); `None` once released.
    pub record: Option<StateRecord>,
    /// The store's version of that record.
    pub version: Option<Version>,
    /// How many writes were committed (transitions, bookkeeping, checkpoints).
    pub commits: u32,
    /// When to reconcile again: `Some(ZERO)` at once, `None` only on change.
    pub requeue: Option<Duration>,
    /// Deletion is complete: the finalizer may be removed.
    pub released: bool,
    /// What happened.
    pub effects: Vec<Effect>,
}

/// Why a reconcile did not complete. Nothing uncommitted is lost: the next
/// reconcile starts again from the store.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The stored record cannot be used; it was left untouched. Reconciling
    /// this object is pointless until a person or a migration fixes it.
    #[error("the stored state record is unusable: {0}")]
    Corrupt(#[source] DecodeError),
    /// Someone else wrote the record in between; nothing was committed.
    /// Reconcile again at once.
    #[error("the state record changed during the reconcile; nothing was committed")]
    Conflict,
    /// The store failed.
    #[error("the state store failed")]
    Store(#[source] StoreError),
    /// A bug in a hand-written machine (see [`DecideError`]).
    #[error("the machine is inconsistent")]
    Machine(#[source] DecideError),
    /// This process may no longer act (see [`Authority`]): no user code was
    /// run, or what ran failed after the authority was lost, and nothing
    /// about it was committed. Another process takes over.
    #[error(transparent)]
    AuthorityLost(#[from] AuthorityLost),
}

impl From<StoreError> for ReconcileError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Conflict => ReconcileError::Conflict,
            other => ReconcileError::Store(other),
        }
    }
}

impl From<DecideError> for ReconcileError {
    fn from(e: DecideError) -> Self {
        ReconcileError::Machine(e)
    }
}

/// Why an engine could not be built.
#[derive(Debug, thiserror::Error)]
#[error("machine description is invalid: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct InvalidMachine(pub Vec<MachineError>);

/// Runs reconciles of machine `S`.
///
/// # Expected flow
/// One call of [`Engine::reconcile`] per reconcile of an object:
/// 1. load the record (no record: enter the initial state, with its
///    starting data);
/// 2. object being deleted: unwind (compensation when `on_delete =
///    compensate`, then `cleanup` with the current state, or the initial
///    state when there was no record), then report `released`;
/// 3. spec changed: apply `on_spec_change` (with `compensate_and_restart`,
///    the compensation chain runs first, one step per reconcile);
/// 4. the state's `timeout` passed: take `on_timeout` (or fail);
/// 5. a retry is scheduled later: requeue for the rest of the wait;
/// 6. run the handler under its `attempt_timeout` (measured on the
///    engine's [`Clock`]: real time on the system clock, virtual time on a
///    [`ManualClock`](crate::ManualClock)) and decide;
/// 7. commit with the loaded version; a conflict commits nothing.
///
/// # Guarantees
/// A transition is committed at most once (the save is conditional on the
/// version it was decided from) and never lost once committed. A handler
/// runs at least once per attempt.
///
/// # Errors
/// See [`ReconcileError`]; a corrupt record is never overwritten.
pub struct Engine<S: Fsm> {
    clock: Arc<dyn Clock>,
    random: Arc<dyn RandomSource>,
    authority: Option<Arc<dyn Authority>>,
    options: EngineOptions,
    extensions: Extensions,
    machine: PhantomData<fn() -> S>,
}

impl<S: Fsm> Clone for Engine<S> {
    fn clone(&self) -> Self {
        Engine {
            clock: self.clock.clone(),
            random: self.random.clone(),
            authority: self.authority.clone(),
            options: self.options.clone(),
            extensions: self.extensions.clone(),
            machine: PhantomData,
        }
    }
}

impl<S: Fsm> std::fmt::Debug for Engine<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("machine", &S::machine().name())
            .field("options", &self.options)
            .finish()
    }
}

impl<S: Fsm> Engine<S> {
    /// An engine on the system clock, with entropy-seeded jitter.
    ///
    /// # Errors
    /// [`InvalidMachine`] when the machine's description does not validate
    /// (only possible for hand-written machines; the derive checks at
    /// compile time).
    pub fn new() -> Result<Self, InvalidMachine> {
        let machine = S::machine();
        machine.validate().map_err(InvalidMachine)?;
        if S::initial_state().is_none() {
            let name = machine.initial_state().map_or("", crate::StateMeta::name);
            return Err(InvalidMachine(vec![MachineError::InitialNotBuilt(name)]));
        }
        Ok(Engine {
            clock: Arc::new(SystemClock),
            random: Arc::new(SeededRandom::from_entropy()),
            authority: None,
            options: EngineOptions::default(),
            extensions: Extensions::default(),
            machine: PhantomData,
        })
    }

    /// Lends `value` to every handler, compensation and cleanup step
    /// ([`Step::extension`]); one value per type, a later one replacing an
    /// earlier.
    #[must_use]
    pub fn with_extension<T: std::any::Any + Send + Sync>(mut self, value: Arc<T>) -> Self {
        self.extensions = self.extensions.with(value);
        self
    }

    /// Replaces all extensions at once (the harness passes its own).
    pub(crate) fn with_extensions(mut self, extensions: Extensions) -> Self {
        self.extensions = extensions;
        self
    }

    /// Uses `clock` for all timestamps.
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Uses `random` for jitter.
    #[must_use]
    pub fn with_random(mut self, random: Arc<dyn RandomSource>) -> Self {
        self.random = random;
        self
    }

    /// Runs user code only while `authority` allows (leader election): it
    /// is asked before every handler, compensation and cleanup, and after
    /// every checkpoint. Without one the engine assumes it acts alone.
    #[must_use]
    pub fn with_authority(mut self, authority: Arc<dyn Authority>) -> Self {
        self.authority = Some(authority);
        self
    }

    /// Fails with [`ReconcileError::AuthorityLost`] when the authority says
    /// this process may no longer act.
    fn ensure_authority(&self) -> Result<(), AuthorityLost> {
        self.authority.as_deref().map_or(Ok(()), Authority::check)
    }

    /// After user code failed: when the authority is gone meanwhile, the
    /// failure is not this process's to record.
    fn failed_without_authority(&self) -> Result<(), ReconcileError> {
        self.ensure_authority().map_err(|lost| {
            tracing::info!(
                machine = S::machine().name(),
                reason = lost.reason(),
                "authority lost during a step; nothing is recorded"
            );
            ReconcileError::AuthorityLost(lost)
        })
    }

    /// The decider for what user code's result leads to, at the time it
    /// finished: a retry's backoff, an entry time and a history entry
    /// count from then, not from before a long (or timed-out) call.
    fn after_user_code<'d>(&self, decider: Decider<'d>) -> Decider<'d> {
        Decider {
            now: self.clock.now(),
            ..decider
        }
    }

    /// Uses `options`.
    #[must_use]
    pub fn with_options(mut self, options: EngineOptions) -> Self {
        self.options = options;
        self
    }

    /// The engine's options.
    pub fn options(&self) -> &EngineOptions {
        &self.options
    }

    /// The engine's clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Reconciles one object: load, decide, run, commit (see the type's
    /// docs for the flow).
    ///
    /// # Errors
    /// [`ReconcileError`]; on any error nothing further was committed.
    pub async fn reconcile(
        &self,
        store: &dyn StateStore,
        observed: &Observed,
        resource: &S::Resource,
        context: &S::Context,
    ) -> Result<Report, ReconcileError> {
        let loaded = store.load(&observed.key).await?;
        let mut version = loaded.version;
        let mut record = match loaded.record {
            Some(raw) => Some(raw.decode::<S>().map_err(ReconcileError::Corrupt)?),
            None => None,
        };
        let mut report = Report {
            state: String::new(),
            record: None,
            version: None,
            commits: 0,
            requeue: None,
            released: false,
            effects: Vec::new(),
        };
        let mut transitions = 0u32;
        // Bookkeeping decided but not yet committed (deletion start, spec
        // change with `continue`) rides along with the next commit.
        let mut dirty = false;
        // Status fields published by the steps run so far, written with the
        // next commit.
        let mut published: Option<StatusFields> = None;
        loop {
            let now = self.clock.now();
            let decider = Decider {
                machine: S::machine(),
                now,
                random: self.random.as_ref(),
                history_limit: self.options.history_limit,
                poll_interval: self.options.poll_interval,
            };
            let step = plan(S::machine(), record.as_ref(), observed, now);
            tracing::trace!(machine = S::machine().name(), object = %observed.key, ?step, "planned");
            let decision = match (step, record.take()) {
                (Plan::Start, _) => decider.start::<S>(observed)?,
                (Plan::Release, current) => match current {
                    Some(current) => decider.release(current),
                    None => {
                        report.released = true;
                        report.effects.push(Effect::Released);
                        report.requeue = None;
                        break;
                    }
                },
                (_, None) => break,
                (Plan::BeginDeletion, Some(current)) => decider.begin_deletion(current),
                (Plan::Compensate, Some(current)) => {
                    self.ensure_authority()?;
                    let (result, step_status) =
                        self.compensate(current.clone(), resource, context).await;
                    publish(&mut published, step_status);
                    if matches!(result, StepResult::Error { .. }) {
                        self.failed_without_authority()?;
                    }
                    self.after_user_code(decider)
                        .after_compensation::<S>(current, result, observed)?
                }
                (Plan::Cleanup, Some(current)) => {
                    self.ensure_authority()?;
                    let (result, step_status) = self.cleanup(&current, resource, context).await;
                    publish(&mut published, step_status);
                    if matches!(result, StepResult::Error { .. }) {
                        self.failed_without_authority()?;
                    }
                    self.after_user_code(decider).after_cleanup(current, result)
                }
                (Plan::FinishUnwind, Some(current)) => {
                    decider.end_unwind::<S>(current, Vec::new(), true, observed)?
                }
                (Plan::SpecChanged(generation), Some(current)) => {
                    decider.spec_changed::<S>(current, generation, observed)?
                }
                (Plan::TimedOut, Some(current)) => decider.timed_out(current)?,
                (Plan::Backoff(wait), Some(current)) => Decision {
                    commit: false,
                    proceed: false,
                    requeue: Some(wait),
                    release: false,
                    effects: Vec::new(),
                    record: current,
                },
                (Plan::Rest, Some(current)) => Decision {
                    commit: false,
                    proceed: false,
                    requeue: None,
                    release: false,
                    effects: Vec::new(),
                    record: current,
                },
                (Plan::RunHandler, Some(mut current)) => {
                    self.ensure_authority()?;
                    let mut step_status = None;
                    let outcome = self
                        .run_handler(
                            store,
                            observed,
                            &mut current,
                            &mut version,
                            &mut report,
                            &mut step_status,
                            resource,
                            context,
                        )
                        .await?;
                    publish(&mut published, step_status);
                    self.after_user_code(decider)
                        .after_handler::<S>(current, outcome)?
                }
            };
            let Decision {
                record: mut next,
                commit,
                proceed,
                requeue,
                release,
                effects,
            } = decision;
            let entered = effects.iter().any(|e| matches!(e, Effect::Entered { .. }));
            report.effects.extend(effects);
            report.requeue = requeue;
            if proceed {
                dirty |= commit;
                record = Some(next);
                continue;
            }
            if release {
                store.delete(&observed.key, version.as_ref()).await?;
                report.released = true;
                report.commits += 1;
                version = None;
                break;
            }
            if next.observed_generation.is_none() && observed.generation.is_some() {
                next.observed_generation = observed.generation;
                dirty = true;
            }
            if commit || dirty || published.is_some() {
                let saved = match published.take() {
                    Some(status) => {
                        store
                            .save_with_status(&observed.key, &next, &status, version.as_ref())
                            .await?
                    }
                    None => store.save(&observed.key, &next, version.as_ref()).await?,
                };
                version = Some(saved);
                report.commits += 1;
                dirty = false;
            }
            if entered {
                transitions += 1;
            }
            let chain = entered
                && requeue == Some(Duration::ZERO)
                && transitions < self.options.max_transitions;
            record = Some(next);
            if !chain {
                break;
            }
        }
        report.state = record.as_ref().map(|r| r.state.clone()).unwrap_or_default();
        report.record = record;
        report.version = version;
        Ok(report)
    }

    /// Runs the current state's handler under its attempt timeout, with a
    /// checkpointer over the store.
    #[allow(clippy::too_many_arguments)]
    async fn run_handler(
        &self,
        store: &dyn StateStore,
        observed: &Observed,
        record: &mut StateRecord,
        version: &mut Option<Version>,
        report: &mut Report,
        published: &mut Option<StatusFields>,
        resource: &S::Resource,
        context: &S::Context,
    ) -> Result<Outcome<S>, ReconcileError> {
        let state: S = record.current::<S>().map_err(ReconcileError::Corrupt)?;
        let meta = S::machine().state(&record.state);
        let name = state.state_name();
        let attempt_timeout = meta.and_then(crate::StateMeta::handler_timeout);
        let spec_snapshot = record.spec_snapshot.clone();
        let mut checkpointer = StoreCheckpointer {
            store,
            key: &observed.key,
            record,
            version,
            commits: 0,
            conflicted: false,
        };
        let span = tracing::debug_span!("handler", machine = S::machine().name(), state = name, object = %observed.key);
        let result = {
            let mut step = Step::<S> {
                resource,
                context,
                clock: self.clock.as_ref(),
                state: name,
                attempt: checkpointer.record.attempt,
                entered_at: checkpointer.record.entered_at,
                spec_snapshot: spec_snapshot.as_ref(),
                checkpointer: Some(&mut checkpointer),
                authority: self.authority.as_deref(),
                published: None,
                extensions: Some(&self.extensions),
            };
            let call = state.handle(&mut step).instrument(span);
            let result = match attempt_timeout {
                // Timed on the engine's clock, so that a manual clock's
                // attempt timeout elapses in virtual time. The handler is
                // polled first: one finishing as time runs out still counts.
                Some(limit) => {
                    let expired = self.clock.sleep(limit);
                    tokio::select! {
                        biased;
                        result = call => Ok(result),
                        () = expired => Err(limit),
                    }
                }
                None => Ok(call.await),
            };
            *published = step.take_published();
            result
        };
        report.commits += checkpointer.commits;
        for _ in 0..checkpointer.commits {
            report.effects.push(Effect::Checkpointed {
                state: name.to_owned(),
            });
        }
        if checkpointer.conflicted {
            return Err(ReconcileError::Conflict);
        }
        // A transition the handler returned is committed even so (the
        // commit is conditional); a failure is the next leader's to see.
        if !matches!(result, Ok(Ok(_))) {
            self.failed_without_authority()?;
        }
        Ok(match result {
            Err(limit) => Outcome::AttemptTimedOut(limit),
            Ok(Ok(transition)) => Outcome::Transition(transition),
            Ok(Err(error)) => Outcome::Error {
                message: describe(&error),
                class: error.class(),
            },
        })
    }

    /// Runs the compensation of the last state on the trail.
    async fn compensate(
        &self,
        record: StateRecord,
        resource: &S::Resource,
        context: &S::Context,
    ) -> (StepResult, Option<StatusFields>) {
        let Some(entry) = record.trail.last() else {
            return (StepResult::Done, None);
        };
        let state = match S::from_parts(&entry.state, entry.data.as_ref()) {
            Ok(state) => state,
            Err(e) => {
                let error = StepResult::Error {
                    message: format!(
                        "stored data of {} does not fit the variant: {}",
                        entry.state,
                        crate::record::data_error::<S>(&entry.state, &e)
                    ),
                    class: crate::ErrorClass::Permanent,
                };
                return (error, None);
            }
        };
        let unwind_attempt = record.compensation.as_ref().map_or(0, |u| u.attempt);
        let mut step = Step::<S> {
            resource,
            context,
            clock: self.clock.as_ref(),
            state: state.state_name(),
            attempt: unwind_attempt,
            entered_at: entry.entered_at,
            spec_snapshot: record.spec_snapshot.as_ref(),
            checkpointer: None,
            authority: self.authority.as_deref(),
            published: None,
            extensions: Some(&self.extensions),
        };
        let span = tracing::debug_span!(
            "compensate",
            machine = S::machine().name(),
            state = state.state_name()
        );
        let result = step_result(state.compensate(&mut step).instrument(span).await);
        (result, step.take_published())
    }

    /// Runs the machine's cleanup with the current state.
    async fn cleanup(
        &self,
        record: &StateRecord,
        resource: &S::Resource,
        context: &S::Context,
    ) -> (StepResult, Option<StatusFields>) {
        let state: S = match record.current::<S>() {
            Ok(state) => state,
            Err(e) => {
                let error = StepResult::Error {
                    message: e.to_string(),
                    class: crate::ErrorClass::Permanent,
                };
                return (error, None);
            }
        };
        let mut step = Step::<S> {
            resource,
            context,
            clock: self.clock.as_ref(),
            state: state.state_name(),
            attempt: record.compensation.as_ref().map_or(0, |u| u.attempt),
            entered_at: record.entered_at,
            spec_snapshot: record.spec_snapshot.as_ref(),
            checkpointer: None,
            authority: self.authority.as_deref(),
            published: None,
            extensions: Some(&self.extensions),
        };
        let span = tracing::debug_span!(
            "cleanup",
            machine = S::machine().name(),
            state = state.state_name()
        );
        let result = step_result(state.cleanup(&mut step).instrument(span).await);
        (result, step.take_published())
    }
}

/// Adds the status fields one step published to those waiting for the
/// next commit (key by key, the later winning).
fn publish(pending: &mut Option<StatusFields>, step: Option<StatusFields>) {
    let Some(step) = step else { return };
    match pending {
        Some(pending) => pending.extend(step),
        None => *pending = Some(step),
    }
}

fn step_result<E: std::error::Error + Classify>(result: Result<(), E>) -> StepResult {
    match result {
        Ok(()) => StepResult::Done,
        Err(e) => StepResult::Error {
            message: describe(&e),
            class: e.class(),
        },
    }
}

/// An error and its causes, `outer: inner: innermost`, for `lastError`,
/// conditions and events: a handler's error often wraps the one that says
/// what happened (`Kubernetes API call failed` around the API's own
/// message). A cause whose text the error already shows is not repeated.
fn describe(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !text.is_empty() && !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}

/// Commits checkpoints of the current state through the store.
struct StoreCheckpointer<'a> {
    store: &'a dyn StateStore,
    key: &'a ObjectKey,
    record: &'a mut StateRecord,
    version: &'a mut Option<Version>,
    commits: u32,
    conflicted: bool,
}

impl<S: Fsm> Checkpointer<S> for StoreCheckpointer<'_> {
    fn checkpoint(&mut self, state: S) -> BoxFuture<'_, Result<(), CheckpointError>> {
        Box::pin(async move {
            if self.conflicted {
                return Err(CheckpointError::Conflict);
            }
            let (name, data) = state.to_parts().map_err(CheckpointError::Encode)?;
            let mut next = self.record.clone();
            if let Some(entry) = next
                .trail
                .last_mut()
                .filter(|e| e.state == name && e.entered_at == next.entered_at)
            {
                entry.data = data.clone();
            }
            next.data = data;
            match self
                .store
                .save(self.key, &next, self.version.as_ref())
                .await
            {
                Ok(version) => {
                    *self.record = next;
                    *self.version = Some(version);
                    self.commits += 1;
                    Ok(())
                }
                Err(StoreError::Conflict) => {
                    self.conflicted = true;
                    Err(CheckpointError::Conflict)
                }
                Err(e) => Err(CheckpointError::Store(Box::new(e))),
            }
        })
    }
}

#[cfg(test)]
mod tests;
