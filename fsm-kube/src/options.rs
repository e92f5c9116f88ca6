//! [`ReconcilerOptions`]: how the reconciler behaves, apart from the
//! reconciler itself so that what reads the options (the reconciler, the
//! decoding watch) does not depend on it.

use std::time::Duration;

use fsm_core::EngineOptions;

/// How an [`FsmReconciler`](crate::FsmReconciler) behaves: the engine's options and the
/// runtime's own. Set them with the builder-style setters, in the style of
/// kube's `watcher::Config`:
///
/// ```
/// use std::time::Duration;
/// use fsm_kube::ReconcilerOptions;
///
/// let options = ReconcilerOptions::default()
///     .poll_interval(Duration::from_secs(10))
///     .max_transitions(5)
///     .error_requeue(Duration::from_secs(1))
///     .events(false);
/// assert_eq!(options.engine.max_transitions, 5);
/// ```
///
/// Each setting has one name; the ones the engine reads live in
/// [`engine`](ReconcilerOptions::engine) ([`EngineOptions`]). The options
/// are given when the reconciler is built ([`FsmReconciler::builder`](crate::FsmReconciler::builder)) and
/// cannot change afterwards.
#[derive(Clone, Debug, PartialEq)]
pub struct ReconcilerOptions {
    /// The engine's options: `poll_interval` (when to look again after
    /// `Transition::stay()`, default 60 s; also the wait after a record too
    /// large to commit), `max_transitions` (how many transitions one
    /// reconcile may commit, default 1; more lets cheap states chain; 0
    /// counts as 1) and `history_limit` (history entries a record keeps,
    /// default 20).
    pub engine: EngineOptions,
    /// The finalizer added when the machine has something to run on
    /// deletion. Default `operator-fsm.io/finalizer`.
    pub finalizer: String,
    /// The field manager of the runtime's writes. Default `operator-fsm`.
    pub field_manager: String,
    /// Whether to publish Kubernetes Events. Default on.
    pub events: bool,
    /// The controller name in events. Default `operator-fsm`.
    pub reporter: String,
    /// Whether to maintain the conditions of [`crate::conditions`]
    /// (`Ready`, `Progressing`, `Degraded`, `Reconciling`, `Stalled`,
    /// `Paused`, `LastCommand`, `DependentsReady`) on the object. Default
    /// on. `status.observedGeneration` is written either way.
    pub conditions: bool,
    /// The requeue delay after an error other than a conflict. Default 5 s.
    pub error_requeue: Duration,
    /// After a transition committed to the object itself
    /// ([`StatusStore`](crate::StatusStore)), how long the next step waits
    /// for the controller's watch to deliver that write before it runs
    /// anyway. The event normally comes within milliseconds and runs the
    /// next step on the fresh object, so the object is reconciled once per
    /// transition rather than twice (once at once, once for the event).
    /// Default 1 s. Zero runs the next step at once, as after commits to
    /// the other stores, whose writes wake nothing: set it to zero when the
    /// controller's watch of the object drops status changes (a
    /// `predicate_filter` on the generation), or the machine takes this
    /// long per transition.
    pub own_write_wait: Duration,
}

impl Default for ReconcilerOptions {
    fn default() -> Self {
        ReconcilerOptions {
            engine: EngineOptions::default(),
            finalizer: "operator-fsm.io/finalizer".to_owned(),
            field_manager: "operator-fsm".to_owned(),
            events: true,
            reporter: "operator-fsm".to_owned(),
            conditions: true,
            error_requeue: Duration::from_secs(5),
            own_write_wait: DEFAULT_OWN_WRITE_WAIT,
        }
    }
}

/// The default of [`ReconcilerOptions::own_write_wait`].
pub const DEFAULT_OWN_WRITE_WAIT: Duration = Duration::from_secs(1);

impl ReconcilerOptions {
    /// Sets [`EngineOptions::poll_interval`].
    #[must_use]
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.engine.poll_interval = interval;
        self
    }

    /// Sets [`EngineOptions::max_transitions`] (0 counts as 1).
    #[must_use]
    pub fn max_transitions(mut self, transitions: u32) -> Self {
        self.engine.max_transitions = transitions;
        self
    }

    /// Sets [`EngineOptions::history_limit`].
    #[must_use]
    pub fn history_limit(mut self, entries: usize) -> Self {
        self.engine.history_limit = entries;
        self
    }

    /// Sets all of the engine's options at once.
    #[must_use]
    pub fn engine(mut self, engine: EngineOptions) -> Self {
        self.engine = engine;
        self
    }

    /// Sets [`finalizer`](ReconcilerOptions::finalizer).
    #[must_use]
    pub fn finalizer(mut self, finalizer: impl Into<String>) -> Self {
        self.finalizer = finalizer.into();
        self
    }

    /// Sets [`field_manager`](ReconcilerOptions::field_manager).
    #[must_use]
    pub fn field_manager(mut self, field_manager: impl Into<String>) -> Self {
        self.field_manager = field_manager.into();
        self
    }

    /// Turns Kubernetes Events on or off.
    #[must_use]
    pub fn events(mut self, on: bool) -> Self {
        self.events = on;
        self
    }

    /// Sets [`reporter`](ReconcilerOptions::reporter).
    #[must_use]
    pub fn reporter(mut self, reporter: impl Into<String>) -> Self {
        self.reporter = reporter.into();
        self
    }

    /// Turns the conditions of [`crate::conditions`] on or off.
    #[must_use]
    pub fn conditions(mut self, on: bool) -> Self {
        self.conditions = on;
        self
    }

    /// Sets [`error_requeue`](ReconcilerOptions::error_requeue).
    #[must_use]
    pub fn error_requeue(mut self, delay: Duration) -> Self {
        self.error_requeue = delay;
        self
    }

    /// Sets [`own_write_wait`](ReconcilerOptions::own_write_wait).
    #[must_use]
    pub fn own_write_wait(mut self, wait: Duration) -> Self {
        self.own_write_wait = wait;
        self
    }
}
