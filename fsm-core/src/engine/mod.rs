//! The engine: one reconcile of one object, from load to commit.
//!
//! A reconcile repeats three phases until the decision says to stop:
//! [`plan`](plan::plan) what runs now (pure), [`run`](InFlight::run) it —
//! user code, when the plan calls for some — and let the [`Decider`] turn
//! what came of it into a [`Decision`] (pure), then
//! [`apply`](InFlight::apply) the decision: commit it with optimistic
//! concurrency, and either go on or stop.

mod apply;
mod command;
mod decide;
mod describe;
mod effect;
mod plan;
mod run;
mod unwind;
mod upgrade;

use std::marker::PhantomData;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

pub use decide::{DecideError, Decider, Decision, Outcome, Then};
pub use effect::Effect;
pub use plan::{Plan, plan};
pub use unwind::UnwindResult;

use crate::record::{DEFAULT_HISTORY_LIMIT, DecodeError, StateRecord};
use crate::store::{ObjectKey, StateStore, StoreError, Version};
use crate::{
    authority::Authority, authority::AuthorityLost, clock::Clock, clock::SystemClock,
    clock::Timestamp, extensions::Extensions, fsm::Fsm, machine::MachineError,
    random::RandomSource, random::SeededRandom,
};
use apply::InFlight;

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
    /// The commands the object carries, in order of sequence number
    /// ([`Command::parse_list`](crate::Command::parse_list)); those numbered
    /// at or below the record's `command_seq` were taken before.
    pub commands: Vec<crate::command::Command>,
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
    /// How many transitions one reconcile may take; more than 1 lets cheap
    /// states chain without waiting for the next reconcile (each committed
    /// on its own, unless the machine batches commits:
    /// [`Machine::batch_commits`](crate::Machine::batch_commits)). Default: 1.
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
    /// The stored record was written by a newer version of the machine
    /// (see [`Machine::versioned`](crate::Machine::versioned)), as during a
    /// rolling update or after a rollback: this build left it untouched
    /// and ran nothing. Not worth retrying soon: the newer build acts on
    /// the object; a runtime says so on the object and looks again later.
    #[error(
        "the stored state record was written by version {found} of the machine, newer than \
         this build's {supported}; it was left untouched"
    )]
    NewerRecord {
        /// The record's machine version.
        found: u32,
        /// This build's machine version.
        supported: u32,
    },
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
/// 3. a command numbered above the record's `command_seq`
///    ([`Observed::commands`]): apply or refuse it, committed with its
///    number; while the record is paused nothing of steps 4 to 7 runs;
/// 4. spec changed: apply `on_spec_change` (with `compensate_and_restart`,
///    the compensation chain runs first, one step per reconcile);
/// 5. the state's `timeout` passed: take `on_timeout` (or fail);
/// 6. a retry is scheduled later: requeue for the rest of the wait;
/// 7. run the handler under its `attempt_timeout` (measured on the
///    engine's [`Clock`]: real time on the system clock, virtual time on a
///    [`ManualClock`](crate::ManualClock)) and decide;
/// 8. commit with the loaded version; a conflict commits nothing.
///
/// Steps 2 to 7 are one plan (which of them applies, decided from the
/// record, the object and the clock alone), then the user code it calls
/// for, then a decision of what happens next; bookkeeping (the initial
/// entry, deletion's start, a spec change under `continue`) goes on to
/// the next plan in the same reconcile and rides along with its commit.
///
/// With [`EngineOptions::max_transitions`] above 1, a transition that
/// leads straight on to the next state's handler may chain within the
/// reconcile; under [`Machine::batch_commits`](crate::Machine::batch_commits)
/// (or [`StateMeta::batch_entry`](crate::StateMeta::batch_entry)) its
/// commit waits and rides with the write that ends the chain.
///
/// # Guarantees
/// A transition is committed at most once (the save is conditional on the
/// version it was decided from) and never lost once committed; so is a
/// command's number, with what the command did: each command is applied
/// once. A handler
/// runs at least once per attempt. Batched transitions not yet committed
/// when the process stops are decided again, their handlers run again.
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
            let name = machine
                .initial_state()
                .map_or("", crate::machine::StateMeta::name);
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

    /// Reconciles one object: load, then plan, run and apply until the
    /// decision says to stop (see the type's docs for the flow).
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
        let mut flight = InFlight::load(self, store, observed, resource, context).await?;
        loop {
            let now = self.clock.now();
            let planned = flight.plan(now);
            let Some(decision) = flight.run(planned, now).await? else {
                break;
            };
            if let ControlFlow::Break(()) = flight.apply(decision).await? {
                break;
            }
        }
        Ok(flight.into_report())
    }

    /// The decider for decisions made at `now`.
    fn decider(&self, now: Timestamp) -> Decider<'_> {
        Decider {
            machine: S::machine(),
            now,
            random: self.random.as_ref(),
            history_limit: self.options.history_limit,
            poll_interval: self.options.poll_interval,
        }
    }
}

#[cfg(test)]
mod batch_tests;
#[cfg(test)]
mod tests;
