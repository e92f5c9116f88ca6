//! Testing machines without a cluster: one handler alone, or a whole
//! workflow driven to rest in memory.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::record::{HistoryEntry, StateRecord};
use crate::step::{CheckpointError, Checkpointer};
use crate::store::{ObjectKey, StateStore};
use crate::{Authority, Effect, Engine, InvalidMachine};
use crate::{
    BoxFuture, Clock, EngineOptions, EphemeralStore, Fsm, ManualClock, Observed, ReconcileError,
    SeededRandom, Step, Timestamp, Transition,
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
        /// Which reconcile (1-based).
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
    /// How much virtual time passed.
    pub elapsed: Duration,
}

impl<S> Settled<S> {
    /// The names of the states entered, in order (the initial state first).
    pub fn path(&self) -> Vec<&str> {
        self.history.iter().map(|h| h.to.as_str()).collect()
    }
}

/// Runs a machine's handlers without a cluster.
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
    clock: ManualClock,
    random: Arc<SeededRandom>,
    attempt: u32,
    generation: Option<i64>,
    options: EngineOptions,
    max_reconciles: u32,
    store: Arc<EphemeralStore>,
    checkpoints: Mutex<Vec<S>>,
    authority: Option<Arc<dyn Authority>>,
}

/// The time harness clocks start at unless told otherwise.
pub const HARNESS_EPOCH: Timestamp = Timestamp::UNIX_EPOCH;

impl<S: Fsm> Harness<S> {
    /// A harness for `resource` with `context`, starting from the initial
    /// state, on a manual clock at [`HARNESS_EPOCH`], with seeded jitter.
    pub fn new(resource: S::Resource, context: S::Context) -> Self {
        Harness {
            resource,
            context,
            state: None,
            clock: ManualClock::at(HARNESS_EPOCH),
            random: Arc::new(SeededRandom::new(0)),
            attempt: 0,
            generation: None,
            options: EngineOptions::default(),
            max_reconciles: 1_000,
            store: Arc::new(EphemeralStore::new()),
            checkpoints: Mutex::new(Vec::new()),
            authority: None,
        }
    }

    /// Starts from `state` instead of the initial state.
    #[must_use]
    pub fn in_state(mut self, state: S) -> Self {
        self.state = Some(state);
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

    /// The object's `metadata.generation`.
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

    /// The engine options used by `run_until_settled`.
    #[must_use]
    pub fn options(mut self, options: EngineOptions) -> Self {
        self.options = options;
        self
    }

    /// The most reconciles `run_until_settled` runs before giving up.
    #[must_use]
    pub fn max_reconciles(mut self, max: u32) -> Self {
        self.max_reconciles = max;
        self
    }

    /// The harness's clock.
    pub fn manual_clock(&self) -> &ManualClock {
        &self.clock
    }

    /// The states committed through `checkpoint` by `run_handler`.
    pub fn checkpoints(&self) -> Vec<S> {
        self.checkpoints
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn current(&self) -> Option<S> {
        self.state.clone().or_else(S::initial_state)
    }

    /// Runs the handler of the current state once and returns its result.
    /// Checkpoints are recorded (see [`Harness::checkpoints`]).
    ///
    /// # Errors
    /// The handler's error. (A machine that cannot build its initial state
    /// runs the first declared state's handler; see `in_state`.)
    pub async fn run_handler(&self) -> Result<Transition<S>, S::Error> {
        let Some(state) = self.current() else {
            return Ok(Transition::Stay);
        };
        let mut recorder = Recorder { harness: self };
        let mut step = Step::new(
            &self.resource,
            &self.context,
            &self.clock,
            state.state_name(),
        )
        .with_attempt(self.attempt, self.clock.now())
        .with_checkpointer(&mut recorder);
        if let Some(authority) = self.authority.as_deref() {
            step = step.with_authority(authority);
        }
        state.handle(&mut step).await
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
        .with_attempt(self.attempt, self.clock.now());
        if let Some(authority) = self.authority.as_deref() {
            step = step.with_authority(authority);
        }
        state.compensate(&mut step).await
    }

    /// Drives the machine in memory until it rests, advancing the manual
    /// clock by every requeue delay, and returns where it rests with its
    /// full history.
    ///
    /// It rests in a `final` or `failed` state once unwinding is over, or in
    /// a `ready` state whose handler commits nothing.
    ///
    /// # Errors
    /// [`HarnessError`]: an invalid machine, a failed reconcile, or no rest
    /// within the reconcile limit.
    pub async fn run_until_settled(&self) -> Result<Settled<S>, HarnessError> {
        let engine = Engine::<S>::new()?
            .with_clock(Arc::new(self.clock.clone()))
            .with_random(self.random.clone())
            .with_options(self.options.clone());
        let engine = match &self.authority {
            Some(authority) => engine.with_authority(authority.clone()),
            None => engine,
        };
        let observed = Observed {
            key: ObjectKey::cluster("harness"),
            generation: self.generation,
            deleting: false,
            spec: None,
        };
        if let Some(state) = &self.state
            && self.store.get_raw(&observed.key).is_none()
        {
            let record = StateRecord::new(state, self.clock.now()).map_err(HarnessError::Encode)?;
            self.store
                .save(&observed.key, &record, None)
                .await
                .map_err(|e| HarnessError::Reconcile {
                    reconcile: 0,
                    source: e.into(),
                })?;
        }
        let started = self.clock.now();
        let mut history = Vec::new();
        let mut effects = Vec::new();
        let mut reconciles = 0;
        while reconciles < self.max_reconciles {
            reconciles += 1;
            let report = engine
                .reconcile(
                    self.store.as_ref(),
                    &observed,
                    &self.resource,
                    &self.context,
                )
                .await
                .map_err(|source| HarnessError::Reconcile {
                    reconcile: reconciles,
                    source,
                })?;
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
            let Some(record) = report.record else {
                break;
            };
            let meta = S::machine().state(&record.state);
            let resting = meta.is_some_and(|m| m.is_resting()) && !record.is_unwinding();
            let idle_ready =
                meta.is_some_and(|m| m.is_ready()) && report.commits == 0 && !transitioned;
            if resting || idle_ready || report.requeue.is_none() {
                let state = record.current::<S>().map_err(|e| HarnessError::Reconcile {
                    reconcile: reconciles,
                    source: ReconcileError::Corrupt(e),
                })?;
                return Ok(Settled {
                    state,
                    record,
                    history,
                    effects,
                    reconciles,
                    elapsed: crate::clock::until(started, self.clock.now()),
                });
            }
            if let Some(delay) = report.requeue {
                self.clock.advance(delay);
            }
        }
        let state = self
            .store
            .get_raw(&observed.key)
            .and_then(|raw| raw.decode::<S>().ok())
            .map(|r| r.state)
            .unwrap_or_default();
        Err(HarnessError::DidNotSettle { reconciles, state })
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
