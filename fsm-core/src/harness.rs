//! Testing machines without a cluster: one handler alone, a workflow
//! stepped one reconcile at a time, or a whole workflow driven to rest in
//! memory, all on a virtual clock.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use crate::fsm::{CheckpointError, Checkpointer};
use crate::record::{HistoryEntry, StateRecord, TrailEntry};
use crate::store::{Commit, Loaded, ObjectKey, StateStore, StoreError, Version};
use crate::{
    authority::Authority, classify::Classify, classify::ErrorClass, command::Command,
    command::CommandAction, engine::Effect, engine::Engine, engine::InvalidMachine, engine::Report,
    extensions::Extensions, machine::StateMeta,
};
use crate::{
    clock::Clock, clock::ManualClock, clock::Timestamp, engine::EngineOptions, engine::Observed,
    engine::ReconcileError, fsm::Fsm, fsm::Step, future::BoxFuture, memory::EphemeralStore,
    random::SeededRandom, transition::Transition,
};

/// Why a harness run did not come to rest.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// The machine's description is invalid.
    #[error(transparent)]
    InvalidMachine(#[from] InvalidMachine),
    /// A reconcile failed.
    #[error("reconcile {reconcile} failed")]
    Reconcile {
        /// Which reconcile of this harness (1-based; 0 when storing the
        /// `in_state` state failed).
        reconcile: u32,
        /// The error.
        #[source]
        source: ReconcileError,
    },
    /// The machine was still busy after the step limit.
    #[error("the machine did not settle within {reconciles} reconciles; it is in state {state}")]
    DidNotSettle {
        /// The reconciles run.
        reconciles: u32,
        /// The state it was in.
        state: String,
    },
    /// The state given to `in_state` could not be encoded.
    #[error("the starting state could not be encoded")]
    Encode(#[source] serde_json::Error),
    /// The object was deleted (`mark_deleting`) before the machine ever
    /// started, so there is no state to report; the engine released it at
    /// once.
    #[error("the object was released before the machine started")]
    ReleasedBeforeStart,
}

/// Why [`Harness::run_handler`] returned no transition.
#[derive(Debug, thiserror::Error)]
pub enum RunHandlerError<E> {
    /// The handler returned this error.
    #[error(transparent)]
    Handler(E),
    /// The handler asked for a target its state does not declare in
    /// `next(...)`. The engine would not take it: it reports
    /// [`Effect::UndeclaredTransition`] and counts a failed attempt.
    #[error(
        "the handler of {from} returned a transition to {to}, which {from} does not declare (next: {declared:?})"
    )]
    UndeclaredTransition {
        /// The state whose handler ran.
        from: &'static str,
        /// The target it returned.
        to: &'static str,
        /// The targets the state declares.
        declared: &'static [&'static str],
    },
    /// The handler did not finish within its state's `attempt_timeout`,
    /// measured on the harness's virtual clock. The engine would drop it
    /// and count a failed attempt.
    #[error("the handler of {state} did not finish within its attempt timeout of {limit:?}")]
    AttemptTimedOut {
        /// The state whose handler ran.
        state: &'static str,
        /// Its `attempt_timeout`.
        limit: Duration,
    },
}

impl<E> RunHandlerError<E> {
    /// The handler's own error, if that is what this is.
    pub fn handler_error(&self) -> Option<&E> {
        match self {
            RunHandlerError::Handler(e) => Some(e),
            _ => None,
        }
    }

    /// The handler's own error, if that is what this is.
    pub fn into_handler_error(self) -> Option<E> {
        match self {
            RunHandlerError::Handler(e) => Some(e),
            _ => None,
        }
    }
}

impl<E: Classify> Classify for RunHandlerError<E> {
    /// The handler error's class; an undeclared transition or an attempt
    /// timeout is retryable, as the engine treats them.
    fn class(&self) -> ErrorClass {
        match self {
            RunHandlerError::Handler(e) => e.class(),
            _ => ErrorClass::RETRYABLE,
        }
    }
}

/// The machine at rest after [`Harness::run_until_settled`].
#[derive(Clone, Debug, PartialEq)]
pub struct Settled<S> {
    /// The state it rests in.
    pub state: S,
    /// Its record.
    pub record: StateRecord,
    /// Every committed transition, oldest first (not truncated).
    pub history: Vec<HistoryEntry>,
    /// Everything that happened, in order.
    pub effects: Vec<Effect>,
    /// How many reconciles it took.
    pub reconciles: u32,
    /// How many writes those reconciles committed (transitions,
    /// bookkeeping, checkpoints, the release): with
    /// [`Machine::batch_commits`](crate::Machine::batch_commits) and
    /// [`Harness::max_transitions`], a chain of transitions is one.
    pub commits: u32,
    /// How much virtual time passed.
    pub elapsed: Duration,
    /// The object's deletion is complete (see [`Harness::mark_deleting`]):
    /// the engine deleted the record and the finalizer may go. `state`
    /// and `record` are then the last ones stored before the release.
    pub released: bool,
}

impl<S> Settled<S> {
    /// The names of the states entered, in order (the initial state first).
    pub fn path(&self) -> Vec<&str> {
        self.history.iter().map(|h| h.to.as_str()).collect()
    }
}

/// Runs a machine without a cluster, on a virtual clock.
///
/// # Expected flow
/// - One handler alone: [`Harness::run_handler`] (and
///   [`Harness::run_compensation`]), in the state set by `in_state` or
///   `in_state_for`, checked against the state's `next(...)` and timed by
///   its `attempt_timeout` as the engine would.
/// - Step by step: [`Harness::reconcile`] runs one reconcile of the real
///   engine over an in-memory store kept between calls; the test reads
///   [`Harness::record`] and [`Harness::state`], moves time with
///   [`Harness::advance`], and changes the object with
///   [`Harness::bump_generation`] and [`Harness::mark_deleting`].
/// - To rest: [`Harness::run_until_settled`] reconciles, advancing the
///   clock by each requeue, until the machine rests.
///
/// # Guarantees
/// Virtual time moves only by [`Harness::advance`], by
/// `run_until_settled`'s requeues, and when a reconcile or handler is idle
/// (see [`Harness::idle_after`]) while a sleep on the clock is pending,
/// such as an `attempt_timeout`.
///
/// One handler, alone:
/// ```
/// # use fsm_core::prelude::*;
/// # use fsm_core::{Harness, ManualClock};
/// # #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
/// # enum Light { Off, On, Broken }
/// # #[derive(Debug, thiserror::Error)] #[error("x")] struct E;
/// # impl Classify for E {}
/// # static STATES: [StateMeta; 3] = [
/// #     StateMeta::new("Off").initial().with_handler().next(&["On"]),
/// #     StateMeta::new("On").final_state(),
/// #     StateMeta::new("Broken").failed(),
/// # ];
/// # static MACHINE: Machine = Machine::new("Light", &STATES);
/// # impl Fsm for Light {
/// #     type Resource = bool; type Context = (); type Error = E;
/// #     fn machine() -> &'static Machine { &MACHINE }
/// #     fn state_name(&self) -> &'static str { match self { Light::Off => "Off", Light::On => "On", Light::Broken => "Broken" } }
/// #     fn unit_state(n: &str) -> Option<Self> { match n { "Off" => Some(Light::Off), "On" => Some(Light::On), "Broken" => Some(Light::Broken), _ => None } }
/// #     fn handle<'a>(&'a self, cx: &'a mut Step<'_, Self>) -> BoxFuture<'a, Result<Transition<Self>, E>> {
/// #         Box::pin(async move { Ok(if *cx.resource() { Transition::next(Light::On) } else { Transition::stay() }) })
/// #     }
/// # }
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let t0 = "2026-01-01T00:00:00Z".parse().unwrap();
/// let out = Harness::<Light>::new(true, ())
///     .in_state(Light::Off)
///     .clock(ManualClock::at(t0))
///     .run_handler()
///     .await;
/// assert_eq!(out.unwrap(), Transition::next(Light::On));
///
/// // The whole workflow, to rest:
/// let settled = Harness::<Light>::new(true, ()).run_until_settled().await.unwrap();
/// assert_eq!(settled.path(), ["Off", "On"]);
/// # });
/// ```
pub struct Harness<S: Fsm> {
    resource: S::Resource,
    context: S::Context,
    state: Option<S>,
    time_in_state: Duration,
    clock: ManualClock,
    random: Arc<SeededRandom>,
    attempt: u32,
    generation: Option<i64>,
    deleting: bool,
    options: EngineOptions,
    max_reconciles: u32,
    idle_after: Duration,
    store: Arc<EphemeralStore>,
    seeded: AtomicBool,
    reconciles: AtomicU32,
    checkpoints: Mutex<Vec<S>>,
    authority: Option<Arc<dyn Authority>>,
    extensions: Extensions,
    crash_at_next_write: AtomicBool,
    commands: Vec<Command>,
}

/// The time harness clocks start at unless told otherwise.
pub const HARNESS_EPOCH: Timestamp = Timestamp::UNIX_EPOCH;

/// How long a reconcile waits with nothing happening before the harness
/// moves its clock to the next pending sleep, by default (see
/// [`Harness::idle_after`]).
pub const DEFAULT_IDLE_AFTER: Duration = Duration::from_millis(100);

impl<S: Fsm> Harness<S> {
    /// A harness for `resource` with `context`, starting from the initial
    /// state, on a manual clock at [`HARNESS_EPOCH`], with seeded jitter,
    /// for an object at generation 1.
    pub fn new(resource: S::Resource, context: S::Context) -> Self {
        Harness {
            resource,
            context,
            state: None,
            time_in_state: Duration::ZERO,
            clock: ManualClock::at(HARNESS_EPOCH),
            random: Arc::new(SeededRandom::new(0)),
            attempt: 0,
            generation: Some(1),
            deleting: false,
            options: EngineOptions::default(),
            max_reconciles: 1_000,
            idle_after: DEFAULT_IDLE_AFTER,
            store: Arc::new(EphemeralStore::new()),
            seeded: AtomicBool::new(false),
            reconciles: AtomicU32::new(0),
            checkpoints: Mutex::new(Vec::new()),
            authority: None,
            extensions: Extensions::default(),
            crash_at_next_write: AtomicBool::new(false),
            commands: Vec::new(),
        }
    }

    /// Starts from `state` instead of the initial state, as if the engine
    /// had just entered it: a compensable state is on the compensation
    /// trail, and the record's history begins with it.
    #[must_use]
    pub fn in_state(mut self, state: S) -> Self {
        self.state = Some(state);
        self
    }

    /// Starts from `state`, entered `elapsed` before the first reconcile
    /// (or `run_handler`) on the harness clock: `cx.time_in_state()` and
    /// the state's `timeout` count from there.
    #[must_use]
    pub fn in_state_for(mut self, state: S, elapsed: Duration) -> Self {
        self.state = Some(state);
        self.time_in_state = elapsed;
        self
    }

    /// Uses `clock`; the harness advances it by each requeue delay.
    #[must_use]
    pub fn clock(mut self, clock: ManualClock) -> Self {
        self.clock = clock;
        self
    }

    /// The number of failed attempts the handler sees (`run_handler`).
    #[must_use]
    pub fn attempt(mut self, attempt: u32) -> Self {
        self.attempt = attempt;
        self
    }

    /// Seeds the jitter.
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.random = Arc::new(SeededRandom::new(seed));
        self
    }

    /// The object's `metadata.generation` (1 by default); to change the
    /// spec between reconciles, see [`Harness::set_generation`].
    #[must_use]
    pub fn generation(mut self, generation: i64) -> Self {
        self.generation = Some(generation);
        self
    }

    /// Runs handlers under `authority`, as a replica with leader election
    /// does: [`Step::ensure_authority`] and checkpoints consult it, and
    /// [`Harness::run_until_settled`] stops when it is lost.
    #[must_use]
    pub fn authority(mut self, authority: Arc<dyn Authority>) -> Self {
        self.authority = Some(authority);
        self
    }

    /// Lends `value` to the steps the harness runs, as
    /// [`Engine::with_extension`] does in production, so that a handler
    /// reading [`Step::extension`] can be tested.
    #[must_use]
    pub fn with_extension<T: std::any::Any + Send + Sync>(mut self, value: Arc<T>) -> Self {
        self.extensions = self.extensions.with(value);
        self
    }

    /// The engine options used by `reconcile` and `run_until_settled`.
    #[must_use]
    pub fn options(mut self, options: EngineOptions) -> Self {
        self.options = options;
        self
    }

    /// Lets one reconcile run up to `transitions` transitions, as
    /// [`EngineOptions::max_transitions`] (0 counts as 1). With
    /// [`Machine::batch_commits`](crate::Machine::batch_commits) they are
    /// committed together: see [`Settled::commits`] and
    /// [`Harness::crash_at_next_write`].
    #[must_use]
    pub fn max_transitions(mut self, transitions: u32) -> Self {
        self.options.max_transitions = transitions.max(1);
        self
    }

    /// The next write of the next reconcile (a commit, a checkpoint or the
    /// release) fails as if the operator died just before it: nothing of it
    /// is stored, and [`Harness::reconcile`] returns the store's error. The
    /// reconcile after it starts again from what was stored, so a test sees
    /// which handlers run again after a crash in the middle of a batched
    /// chain.
    ///
    /// ```
    /// # use fsm_core::prelude::*;
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    /// # enum Job { Config, Deploy, Done, Failed }
    /// # #[derive(Debug, thiserror::Error)] #[error("e")] struct E;
    /// # impl Classify for E {}
    /// # static STATES: [StateMeta; 4] = [
    /// #     StateMeta::new("Config").initial().with_handler().next(&["Deploy"]),
    /// #     StateMeta::new("Deploy").with_handler().next(&["Done"]),
    /// #     StateMeta::new("Done").final_state().ready(),
    /// #     StateMeta::new("Failed").failed(),
    /// # ];
    /// // Every step of this chain is committed with the last one.
    /// static MACHINE: Machine = Machine::new("Job", &STATES).batch_commits();
    /// # impl Fsm for Job {
    /// #     type Resource = (); type Context = std::sync::Mutex<Vec<&'static str>>; type Error = E;
    /// #     fn machine() -> &'static Machine { &MACHINE }
    /// #     fn state_name(&self) -> &'static str { match self { Job::Config => "Config", Job::Deploy => "Deploy", Job::Done => "Done", Job::Failed => "Failed" } }
    /// #     fn unit_state(n: &str) -> Option<Self> { match n { "Config" => Some(Job::Config), "Deploy" => Some(Job::Deploy), "Done" => Some(Job::Done), "Failed" => Some(Job::Failed), _ => None } }
    /// #     fn handle<'a>(&'a self, cx: &'a mut Step<'_, Self>) -> BoxFuture<'a, Result<Transition<Self>, E>> {
    /// #         Box::pin(async move {
    /// #             cx.context().lock().unwrap().push(self.state_name());
    /// #             Ok(match self { Job::Config => Transition::next(Job::Deploy), _ => Transition::next(Job::Done) })
    /// #         })
    /// #     }
    /// # }
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let harness = Harness::<Job>::new((), Default::default()).max_transitions(5);
    /// harness.crash_at_next_write();
    /// assert!(harness.reconcile().await.is_err()); // Config and Deploy ran, nothing stored
    /// assert_eq!(harness.record(), None);
    /// let settled = harness.run_until_settled().await.unwrap();
    /// assert_eq!(settled.path(), ["Config", "Deploy", "Done"]);
    /// assert_eq!(settled.commits, 1); // the whole chain, in one write
    /// // Both handlers ran again after the crash: they must be idempotent.
    /// assert_eq!(*harness.context().lock().unwrap(), ["Config", "Deploy", "Config", "Deploy"]);
    /// # });
    /// ```
    pub fn crash_at_next_write(&self) {
        self.crash_at_next_write.store(true, Ordering::SeqCst);
    }

    /// The most reconciles `run_until_settled` runs before giving up.
    #[must_use]
    pub fn max_reconciles(mut self, max: u32) -> Self {
        self.max_reconciles = max;
        self
    }

    /// How long (real time) a reconcile or handler must wait with nothing
    /// waking it before the harness counts it idle and moves the virtual
    /// clock to the next pending sleep on it, such as the end of an
    /// `attempt_timeout`. Default [`DEFAULT_IDLE_AFTER`]; raise it for a
    /// handler that waits long on real I/O while its state has an
    /// `attempt_timeout`.
    #[must_use]
    pub fn idle_after(mut self, quiet: Duration) -> Self {
        self.idle_after = quiet;
        self
    }

    /// The context the handlers get.
    pub fn context(&self) -> &S::Context {
        &self.context
    }

    /// The harness's clock.
    pub fn manual_clock(&self) -> &ManualClock {
        &self.clock
    }

    /// The current virtual time.
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Moves the virtual clock forward by `d`, as time passing between
    /// reconciles (a backoff, a requeue, a state's timeout).
    pub fn advance(&self, d: Duration) {
        self.clock.advance(d);
    }

    /// Changes the object's `metadata.generation` (a spec change) for the
    /// reconciles that follow: the next one applies the machine's
    /// `on_spec_change`.
    pub fn set_generation(&mut self, generation: i64) {
        self.generation = Some(generation);
    }

    /// Replaces the object the handlers see in the reconciles that follow,
    /// as an edit of the object does; with [`Harness::bump_generation`] it
    /// is a spec change the machine's `on_spec_change` applies to.
    pub fn set_resource(&mut self, resource: S::Resource) {
        self.resource = resource;
    }

    /// Increments the object's `metadata.generation`, as an edit of the
    /// spec does, and returns the new one.
    pub fn bump_generation(&mut self) -> i64 {
        let next = self.generation.unwrap_or(0).saturating_add(1);
        self.generation = Some(next);
        next
    }

    /// Sends a person's command, as `kubectl fsm` does: the reconciles that
    /// follow see it (with every command sent before) and the engine takes
    /// it once. Returns its sequence number; the record's `commands` log
    /// says whether it was applied or refused.
    ///
    /// ```
    /// # use fsm_core::prelude::*;
    /// # use fsm_core::{CommandAction, Harness};
    /// # #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    /// # enum Gate { Waiting, Open, Shut }
    /// # #[derive(Debug, thiserror::Error)] #[error("x")] struct E;
    /// # impl Classify for E {}
    /// # static STATES: [StateMeta; 3] = [
    /// #     StateMeta::new("Waiting").initial().with_handler().on_signals(&[("approve", "Open")]),
    /// #     StateMeta::new("Open").final_state(),
    /// #     StateMeta::new("Shut").failed(),
    /// # ];
    /// # static MACHINE: Machine = Machine::new("Gate", &STATES);
    /// # impl Fsm for Gate {
    /// #     type Resource = (); type Context = (); type Error = E;
    /// #     fn machine() -> &'static Machine { &MACHINE }
    /// #     fn state_name(&self) -> &'static str { match self { Gate::Waiting => "Waiting", Gate::Open => "Open", Gate::Shut => "Shut" } }
    /// #     fn unit_state(n: &str) -> Option<Self> { match n { "Waiting" => Some(Gate::Waiting), "Open" => Some(Gate::Open), "Shut" => Some(Gate::Shut), _ => None } }
    /// #     fn handle<'a>(&'a self, _: &'a mut Step<'_, Self>) -> BoxFuture<'a, Result<Transition<Self>, E>> {
    /// #         Box::pin(async move { Ok(Transition::stay()) })
    /// #     }
    /// # }
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let mut harness = Harness::<Gate>::new((), ());
    /// harness.reconcile().await.unwrap();
    /// assert_eq!(harness.state(), Some(Gate::Waiting));
    /// harness.send(CommandAction::Signal("approve".into()));
    /// harness.run_until_settled().await.unwrap();
    /// assert_eq!(harness.state(), Some(Gate::Open));
    /// assert!(harness.record().unwrap().commands[0].applied());
    /// # });
    /// ```
    pub fn send(&mut self, action: CommandAction) -> u64 {
        let seq = self.commands.last().map_or(0, |c| c.seq).saturating_add(1);
        self.commands.push(Command::new(seq, action).by("harness"));
        seq
    }

    /// Sends signal `name` ([`Harness::send`]).
    pub fn signal(&mut self, name: &str) -> u64 {
        self.send(CommandAction::Signal(name.to_owned()))
    }

    /// Marks the object as being deleted (`deletionTimestamp` set) for the
    /// reconciles that follow: they run the compensation (`on_delete =
    /// compensate`) and `cleanup`, then release the object.
    pub fn mark_deleting(&mut self) {
        self.deleting = true;
    }

    /// How many reconciles this harness has run.
    pub fn reconciles(&self) -> u32 {
        self.reconciles.load(Ordering::Relaxed)
    }

    /// The stored record: `None` before the first reconcile and after the
    /// object was released.
    pub fn record(&self) -> Option<StateRecord> {
        self.store
            .get_raw(&Self::key())
            .and_then(|raw| raw.decode::<S>().ok())
    }

    /// The stored current state: `None` before the first reconcile and
    /// after the object was released.
    pub fn state(&self) -> Option<S> {
        self.record().and_then(|r| r.current::<S>().ok())
    }

    /// The status fields the steps published so far
    /// ([`Step::publish_status`]), as they would stand on the object: each
    /// commit's fields merged over the earlier ones. `None` until a step
    /// publishes.
    pub fn published_status(&self) -> Option<crate::fsm::StatusFields> {
        self.store.status(&Self::key())
    }

    /// The states committed through `checkpoint` by `run_handler`.
    pub fn checkpoints(&self) -> Vec<S> {
        self.checkpoints
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn key() -> ObjectKey {
        ObjectKey::cluster("harness")
    }

    fn observed(&self) -> Observed {
        Observed {
            key: Self::key(),
            generation: self.generation,
            deleting: self.deleting,
            spec: None,
            commands: self.commands.clone(),
        }
    }

    fn current(&self) -> Option<S> {
        self.state.clone().or_else(S::initial_state)
    }

    /// When the starting state was entered, by the harness clock now.
    fn entered_at(&self) -> Timestamp {
        self.clock
            .now()
            .checked_sub(self.time_in_state)
            .unwrap_or(Timestamp::MIN)
    }

    fn engine(&self) -> Result<Engine<S>, HarnessError> {
        let engine = Engine::<S>::new()?
            .with_clock(Arc::new(self.clock.clone()))
            .with_random(self.random.clone())
            .with_options(self.options.clone())
            .with_extensions(self.extensions.clone());
        Ok(match &self.authority {
            Some(authority) => engine.with_authority(authority.clone()),
            None => engine,
        })
    }

    /// Stores the record of the `in_state` state, once, as the engine
    /// would have written it on entering that state.
    async fn seed_record(&self, observed: &Observed) -> Result<(), HarnessError> {
        let Some(state) = &self.state else {
            return Ok(());
        };
        if self.seeded.load(Ordering::SeqCst) || self.store.get_raw(&observed.key).is_some() {
            return Ok(());
        }
        let entered_at = self.entered_at();
        let mut record = StateRecord::new(state, entered_at).map_err(HarnessError::Encode)?;
        record.observed_generation = observed.generation;
        record.transitions = 1;
        if self.options.history_limit > 0 {
            record.history.push(HistoryEntry {
                seq: 1,
                from: None,
                to: record.state.clone(),
                at: entered_at,
                reason: None,
            });
        }
        if S::machine()
            .state(&record.state)
            .is_some_and(StateMeta::has_compensation)
        {
            record.trail.push(TrailEntry {
                state: record.state.clone(),
                data: record.data.clone(),
                entered_at,
                closed: false,
            });
        }
        if S::machine()
            .state(&record.state)
            .is_some_and(StateMeta::closes_scope_with_itself)
        {
            record.close_scope();
        }
        self.store
            .save(&observed.key, Commit::new(&record, None))
            .await
            .map_err(|e| HarnessError::Reconcile {
                reconcile: 0,
                source: e.into(),
            })?;
        self.seeded.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// Runs the handler of the current state once, as the engine would,
    /// and returns its result. Checkpoints are recorded (see
    /// [`Harness::checkpoints`]).
    ///
    /// # Expected flow
    /// The handler sees the attempt set by [`Harness::attempt`] and the
    /// entry time set by [`Harness::in_state_for`]. It runs under the
    /// state's `attempt_timeout` on the virtual clock: a handler that
    /// hangs times out as soon as it is idle (see [`Harness::idle_after`]),
    /// with the clock moved by the timeout.
    ///
    /// # Errors
    /// [`RunHandlerError::Handler`] with the handler's error;
    /// [`RunHandlerError::UndeclaredTransition`] when it returns a target its
    /// state does not declare in `next(...)` (the engine would refuse it);
    /// [`RunHandlerError::AttemptTimedOut`] when it outlives its
    /// `attempt_timeout`. (A machine that cannot build its initial state
    /// runs nothing and stays; see `in_state`.)
    pub async fn run_handler(&self) -> Result<Transition<S>, RunHandlerError<S::Error>> {
        let Some(state) = self.current() else {
            return Ok(Transition::Stay);
        };
        let name = state.state_name();
        let meta = S::machine().state(name);
        let mut recorder = Recorder { harness: self };
        let mut step = Step::new(&self.resource, &self.context, &self.clock, name)
            .with_attempt(self.attempt, self.entered_at())
            .with_checkpointer(&mut recorder)
            .with_extensions(&self.extensions);
        if let Some(authority) = self.authority.as_deref() {
            step = step.with_authority(authority);
        }
        let call = state.handle(&mut step);
        let limit = meta.and_then(StateMeta::handler_timeout);
        let expired = limit.map(|limit| self.clock.sleep(limit));
        let raced = async {
            match expired {
                Some(expired) => tokio::select! {
                    biased;
                    result = call => Some(result),
                    () = expired => None,
                },
                None => Some(call.await),
            }
        };
        let Some(result) = drive(&self.clock, self.idle_after, raced).await else {
            return Err(RunHandlerError::AttemptTimedOut {
                state: name,
                limit: limit.unwrap_or_default(),
            });
        };
        let transition = result.map_err(RunHandlerError::Handler)?;
        if let (Some(meta), Transition::Next(next)) = (meta, &transition) {
            let to = next.state_name();
            if !meta.allows(to) {
                return Err(RunHandlerError::UndeclaredTransition {
                    from: name,
                    to,
                    declared: meta.targets(),
                });
            }
        }
        Ok(transition)
    }

    /// Runs the compensation of the current state once.
    ///
    /// # Errors
    /// The compensation's error.
    pub async fn run_compensation(&self) -> Result<(), S::Error> {
        let Some(state) = self.current() else {
            return Ok(());
        };
        let mut step = Step::new(
            &self.resource,
            &self.context,
            &self.clock,
            state.state_name(),
        )
        .with_attempt(self.attempt, self.entered_at())
        .with_extensions(&self.extensions);
        if let Some(authority) = self.authority.as_deref() {
            step = step.with_authority(authority);
        }
        drive(&self.clock, self.idle_after, state.compensate(&mut step)).await
    }

    /// Runs one reconcile with the real engine over the harness's store,
    /// and returns what it did. The store and the clock persist between
    /// calls, so a test can walk a workflow step by step, asserting
    /// [`Harness::record`] after each and moving time with
    /// [`Harness::advance`].
    ///
    /// # Expected flow
    /// The first reconcile stores the `in_state` state (if any), then the
    /// engine loads, decides, runs and commits as in production, with the
    /// generation and deletion mark set on the harness. The clock does not
    /// move by itself, except that a handler that is idle while its
    /// `attempt_timeout` runs jumps the clock to the end of that timeout
    /// (see [`Harness::idle_after`]). The report's `requeue` says when the
    /// engine wants to look again.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use fsm_core::prelude::*;
    /// # use fsm_core::Effect;
    /// # #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    /// # enum Job { Submit, Done, Failed }
    /// # #[derive(Debug, thiserror::Error)] #[error("busy")] struct Busy;
    /// # impl Classify for Busy {}
    /// # static STATES: [StateMeta; 3] = [
    /// #     StateMeta::new("Submit").initial().with_handler().next(&["Done"]),
    /// #     StateMeta::new("Done").final_state(),
    /// #     StateMeta::new("Failed").failed(),
    /// # ];
    /// # static MACHINE: Machine = Machine::new("Job", &STATES);
    /// # impl Fsm for Job {
    /// #     type Resource = (); type Context = std::sync::atomic::AtomicU32; type Error = Busy;
    /// #     fn machine() -> &'static Machine { &MACHINE }
    /// #     fn state_name(&self) -> &'static str { match self { Job::Submit => "Submit", Job::Done => "Done", Job::Failed => "Failed" } }
    /// #     fn unit_state(n: &str) -> Option<Self> { match n { "Submit" => Some(Job::Submit), "Done" => Some(Job::Done), "Failed" => Some(Job::Failed), _ => None } }
    /// #     fn handle<'a>(&'a self, cx: &'a mut Step<'_, Self>) -> BoxFuture<'a, Result<Transition<Self>, Busy>> {
    /// #         Box::pin(async move {
    /// #             // The first call fails; the second succeeds.
    /// #             if cx.context().fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 { Err(Busy) } else { Ok(Transition::next(Job::Done)) }
    /// #         })
    /// #     }
    /// # }
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let harness = Harness::<Job>::new((), Default::default());
    /// // The first attempt fails: a retry is scheduled 1 s later.
    /// let report = harness.reconcile().await?;
    /// assert_eq!(report.state, "Submit");
    /// assert_eq!(report.requeue, Some(Duration::from_secs(1)));
    /// assert_eq!(harness.record().unwrap().attempt, 1);
    /// // Too early: nothing runs.
    /// harness.advance(Duration::from_millis(500));
    /// assert!(harness.reconcile().await?.effects.is_empty());
    /// // On time: the retry succeeds.
    /// harness.advance(Duration::from_millis(500));
    /// harness.reconcile().await?;
    /// assert_eq!(harness.state(), Some(Job::Done));
    /// # Ok::<(), fsm_core::HarnessError>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    /// [`HarnessError`]: an invalid machine, a starting state that cannot
    /// be encoded, or the engine's [`ReconcileError`].
    pub async fn reconcile(&self) -> Result<Report, HarnessError> {
        let engine = self.engine()?;
        let observed = self.observed();
        self.seed_record(&observed).await?;
        let reconcile = self.reconciles.fetch_add(1, Ordering::Relaxed) + 1;
        let store = CrashingStore {
            inner: self.store.as_ref(),
            crash: &self.crash_at_next_write,
        };
        let run = engine.reconcile(&store, &observed, &self.resource, &self.context);
        drive(&self.clock, self.idle_after, run)
            .await
            .map_err(|source| HarnessError::Reconcile { reconcile, source })
    }

    /// Drives the machine in memory until it rests, advancing the manual
    /// clock by every requeue delay, and returns where it rests with its
    /// full history.
    ///
    /// It rests in a `final` or `failed` state once unwinding is over, or in
    /// a `ready` state whose handler commits nothing — in either, once every
    /// command sent ([`Harness::send`]) was taken — or while paused, or — after
    /// [`Harness::mark_deleting`] — once the object is released. It goes on
    /// from wherever earlier calls of [`Harness::reconcile`] left it.
    ///
    /// # Errors
    /// [`HarnessError`]: an invalid machine, a failed reconcile, or no rest
    /// within the reconcile limit.
    pub async fn run_until_settled(&self) -> Result<Settled<S>, HarnessError> {
        self.seed_record(&self.observed()).await?;
        let started = self.clock.now();
        let mut last = self.record();
        let mut history: Vec<HistoryEntry> =
            last.as_ref().map(|r| r.history.clone()).unwrap_or_default();
        let mut effects = Vec::new();
        let mut reconciles = 0;
        let mut commits = 0;
        let corrupt = |source| HarnessError::Reconcile {
            reconcile: self.reconciles(),
            source: ReconcileError::Corrupt(source),
        };
        while reconciles < self.max_reconciles {
            reconciles += 1;
            let report = self.reconcile().await?;
            commits += report.commits;
            if let Some(record) = &report.record {
                for entry in &record.history {
                    if history
                        .last()
                        .is_none_or(|h: &HistoryEntry| entry.seq > h.seq)
                    {
                        history.push(entry.clone());
                    }
                }
            }
            let transitioned = report
                .effects
                .iter()
                .any(|e| matches!(e, Effect::Entered { .. }));
            effects.extend(report.effects);
            if report.released {
                let record = last.ok_or(HarnessError::ReleasedBeforeStart)?;
                return Ok(Settled {
                    state: record.current::<S>().map_err(corrupt)?,
                    record,
                    history,
                    effects,
                    reconciles,
                    commits,
                    elapsed: crate::clock::until(started, self.clock.now()),
                    released: true,
                });
            }
            let Some(record) = report.record else {
                break;
            };
            let meta = S::machine().state(&record.state);
            // Commands sent and not yet taken keep it from resting.
            let pending = self
                .commands
                .last()
                .is_some_and(|c| c.seq > record.command_seq);
            let resting =
                meta.is_some_and(|m| m.is_resting()) && !record.is_unwinding() && !pending;
            let idle_ready = meta.is_some_and(|m| m.is_ready())
                && report.commits == 0
                && !transitioned
                && !pending;
            if resting || idle_ready || report.requeue.is_none() {
                return Ok(Settled {
                    state: record.current::<S>().map_err(corrupt)?,
                    record,
                    history,
                    effects,
                    reconciles,
                    commits,
                    elapsed: crate::clock::until(started, self.clock.now()),
                    released: false,
                });
            }
            last = Some(record);
            if let Some(delay) = report.requeue {
                self.clock.advance(delay);
            }
        }
        let state = last.map(|r| r.state).unwrap_or_default();
        Err(HarnessError::DidNotSettle { reconciles, state })
    }
}

/// Polls `future` to completion like `.await`, and keeps virtual time
/// moving: when nothing has woken it for `idle_after` of real time while a
/// sleep on `clock` is pending (an attempt timeout, a fake's virtual
/// delay), the clock jumps to that sleep's deadline. This is tokio's
/// paused-clock rule, applied to the harness's clock only.
async fn drive<F: Future>(clock: &ManualClock, idle_after: Duration, future: F) -> F::Output {
    let mut future = pin!(future);
    let signal = Arc::new(Signal::default());
    let waker = Waker::from(signal.clone());
    loop {
        let polled = std::future::poll_fn(|cx| {
            signal.register(cx.waker());
            signal.woken.store(false, Ordering::SeqCst);
            Poll::Ready(future.as_mut().poll(&mut Context::from_waker(&waker)))
        })
        .await;
        if let Poll::Ready(output) = polled {
            return output;
        }
        if signal.woken.load(Ordering::SeqCst) {
            // It woke itself: let the rest of the runtime run first.
            tokio::task::yield_now().await;
            continue;
        }
        if clock.next_sleep().is_none() {
            signal.wait().await;
            continue;
        }
        tokio::select! {
            biased;
            () = signal.wait() => {}
            () = tokio::time::sleep(idle_after) => {
                tracing::trace!("harness: reconcile idle, advancing the virtual clock");
                clock.advance_to_next_sleep();
            }
        }
    }
}

/// Records that the driven future was woken, and wakes the task driving it.
#[derive(Default)]
struct Signal {
    woken: AtomicBool,
    driver: Mutex<Option<Waker>>,
}

impl Signal {
    fn register(&self, waker: &Waker) {
        let mut driver = self.driver.lock().unwrap_or_else(PoisonError::into_inner);
        if !driver.as_ref().is_some_and(|w| w.will_wake(waker)) {
            *driver = Some(waker.clone());
        }
    }

    /// Until the driven future is woken.
    async fn wait(&self) {
        std::future::poll_fn(|cx| {
            self.register(cx.waker());
            if self.woken.load(Ordering::SeqCst) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
    }
}

impl Wake for Signal {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::SeqCst);
        if let Some(driver) = self
            .driver
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
        {
            driver.wake_by_ref();
        }
    }
}

/// Records checkpoints made under `run_handler`.
struct Recorder<'a, S: Fsm> {
    harness: &'a Harness<S>,
}

impl<S: Fsm> Checkpointer<S> for Recorder<'_, S> {
    fn checkpoint(&mut self, state: S) -> BoxFuture<'_, Result<(), CheckpointError>> {
        self.harness
            .checkpoints
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(state);
        Box::pin(async { Ok(()) })
    }
}

/// The harness's store, as the engine sees it: a write fails once when
/// [`Harness::crash_at_next_write`] asked for it.
struct CrashingStore<'a> {
    inner: &'a EphemeralStore,
    crash: &'a AtomicBool,
}

impl CrashingStore<'_> {
    /// Fails when a crash was asked for, once.
    fn crashed(&self) -> Result<(), StoreError> {
        if self.crash.swap(false, Ordering::SeqCst) {
            return Err(StoreError::Backend(
                "the harness crashed the operator before this write".into(),
            ));
        }
        Ok(())
    }
}

impl StateStore for CrashingStore<'_> {
    fn load<'a>(&'a self, key: &'a ObjectKey) -> BoxFuture<'a, Result<Loaded, StoreError>> {
        self.inner.load(key)
    }

    fn save<'a>(
        &'a self,
        key: &'a ObjectKey,
        commit: Commit<'a>,
    ) -> BoxFuture<'a, Result<Version, StoreError>> {
        match self.crashed() {
            Ok(()) => self.inner.save(key, commit),
            Err(e) => Box::pin(async { Err(e) }),
        }
    }

    fn delete<'a>(
        &'a self,
        key: &'a ObjectKey,
        expected: Option<&'a Version>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        match self.crashed() {
            Ok(()) => self.inner.delete(key, expected),
            Err(e) => Box::pin(async { Err(e) }),
        }
    }
}
