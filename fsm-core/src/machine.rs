//! The static description of a machine: its states, their flags, targets and
//! policies. The derive generates it; a hand-written machine builds it with
//! the `const` builders below.

use std::time::Duration;

use crate::retry::RetryPolicy;

/// What happens when the object's spec changes (its `metadata.generation`
/// moves past the record's `observedGeneration`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SpecChange {
    /// Start the workflow again from the initial state. No compensation
    /// runs: what the states entered so far made is left behind.
    #[default]
    Restart,
    /// Keep the current state; handlers see the new spec.
    Continue,
    /// Move to the named (unit) state; no compensation runs.
    Goto(&'static str),
    /// Run the compensation chain of the states entered (latest first, as
    /// when the workflow fails), then start again from the initial state.
    /// Spec changes that arrive meanwhile wait for the chain to end; the
    /// restart starts from the newest spec.
    CompensateAndRestart,
}

/// What a spec change does to an object that rests in a `failed` state
/// (its failure compensated): how a failed object recovers without being
/// deleted. [`SpecChange`] applies to every other state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FailedSpecChange {
    /// Start the workflow again from the initial state, for the new spec.
    /// The trail's closed scopes (what finished work made) are kept, so
    /// deletion still undoes them; the new run's handlers adopt what
    /// exists (create-or-adopt by deterministic name).
    #[default]
    Restart,
    /// Stay failed: the new generation is recorded and nothing runs until
    /// the object is deleted (or a person retries it).
    Stay,
    /// Move to the named (unit, not failed) state, as a
    /// [`Transition::next`](crate::Transition::next) would.
    Goto(&'static str),
}

/// What happens when the object is deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnDelete {
    /// Nothing beyond the machine's `cleanup` function, if any.
    #[default]
    Nothing,
    /// Run the compensation chain of the states entered, then `cleanup`.
    Compensate,
}

/// One state of a machine.
///
/// ```
/// use std::time::Duration;
/// use fsm_core::StateMeta;
///
/// const WAITING: StateMeta = StateMeta::new("WaitingReady")
///     .with_handler()
///     .with_data()
///     .timeout(Duration::from_secs(600))
///     .on_timeout("Failed")
///     .next(&["Seeding"]);
/// assert!(WAITING.allows("Seeding"));
/// assert!(!WAITING.allows("Ready"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StateMeta {
    name: &'static str,
    initial: bool,
    ready: bool,
    failed: bool,
    is_final: bool,
    sensitive: bool,
    has_handler: bool,
    has_compensation: bool,
    compensation_name: Option<&'static str>,
    has_data: bool,
    next: &'static [&'static str],
    retry: Option<RetryPolicy>,
    timeout: Option<Duration>,
    attempt_timeout: Option<Duration>,
    on_timeout: Option<&'static str>,
    on_exhausted: Option<&'static str>,
    renamed_from: &'static [&'static str],
    batch_entry: bool,
    commit_on_entry: bool,
    commits: bool,
    signals: &'static [(&'static str, &'static str)],
    immutable: &'static [&'static str],
    grow_only: &'static [&'static str],
    refuses_delete: bool,
}

impl StateMeta {
    /// A state with the given variant name and no flags, handler or targets.
    pub const fn new(name: &'static str) -> Self {
        StateMeta {
            name,
            initial: false,
            ready: false,
            failed: false,
            is_final: false,
            sensitive: false,
            has_handler: false,
            has_compensation: false,
            compensation_name: None,
            has_data: false,
            next: &[],
            retry: None,
            timeout: None,
            attempt_timeout: None,
            on_timeout: None,
            on_exhausted: None,
            renamed_from: &[],
            batch_entry: false,
            commit_on_entry: false,
            commits: false,
            signals: &[],
            immutable: &[],
            grow_only: &[],
            refuses_delete: false,
        }
    }

    /// Marks the state the machine starts in.
    pub const fn initial(mut self) -> Self {
        self.initial = true;
        self
    }
    /// Marks a state in which the object's `Ready` condition is true.
    pub const fn ready(mut self) -> Self {
        self.ready = true;
        self
    }
    /// Marks a terminal failure state; compensation ends here.
    pub const fn failed(mut self) -> Self {
        self.failed = true;
        self
    }
    /// Marks a resting state without handler: nothing runs until the spec
    /// changes or the object is deleted.
    pub const fn final_state(mut self) -> Self {
        self.is_final = true;
        self
    }
    /// Marks a state whose data must never be logged or put in events.
    pub const fn sensitive(mut self) -> Self {
        self.sensitive = true;
        self
    }
    /// Declares that the state has a handler.
    pub const fn with_handler(mut self) -> Self {
        self.has_handler = true;
        self
    }
    /// Declares that the state has a compensation (rollback) function.
    pub const fn with_compensation(mut self) -> Self {
        self.has_compensation = true;
        self
    }
    /// Declares that the state has a compensation function and names it
    /// for the diagrams (the derive gives the function's name).
    pub const fn compensated_by(mut self, function: &'static str) -> Self {
        self.has_compensation = true;
        self.compensation_name = Some(function);
        self
    }
    /// Declares that the variant carries data (is not a unit variant).
    pub const fn with_data(mut self) -> Self {
        self.has_data = true;
        self
    }
    /// The states a handler may move to.
    pub const fn next(mut self, targets: &'static [&'static str]) -> Self {
        self.next = targets;
        self
    }
    /// The retry policy of this state, overriding the machine's default.
    pub const fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = Some(policy);
        self
    }
    /// The total time allowed in the state, from entry.
    pub const fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
    /// The time allowed for one handler call.
    pub const fn attempt_timeout(mut self, timeout: Duration) -> Self {
        self.attempt_timeout = Some(timeout);
        self
    }
    /// The (unit) state entered when `timeout` passes; failing otherwise.
    pub const fn on_timeout(mut self, target: &'static str) -> Self {
        self.on_timeout = Some(target);
        self
    }
    /// The (unit) state entered when retries are exhausted; failing otherwise.
    pub const fn on_exhausted(mut self, target: &'static str) -> Self {
        self.on_exhausted = Some(target);
        self
    }

    /// The names this state had in earlier builds of the machine: a record
    /// that names one of them loads as this state (see
    /// [`RawRecord::upgrade`](crate::RawRecord::upgrade)).
    pub const fn renamed_from(mut self, names: &'static [&'static str]) -> Self {
        self.renamed_from = names;
        self
    }

    /// Lets a transition into this state ride with a later commit of the
    /// same reconcile, in a machine that does not batch all its commits
    /// (see [`Machine::batch_commits`]). A state with a compensation
    /// always commits its entry, whatever this says.
    pub const fn batch_entry(mut self) -> Self {
        self.batch_entry = true;
        self
    }

    /// Commits every transition into this state before its handler runs,
    /// in a machine that batches its commits (see
    /// [`Machine::batch_commits`]): for a state whose handler makes a
    /// non-idempotent call with data its predecessor chose, so that a
    /// crash never re-runs the predecessor and enters it with other data.
    pub const fn commit_on_entry(mut self) -> Self {
        self.commit_on_entry = true;
        self
    }

    /// Entering this state closes the saga's scope: the compensable states
    /// entered before it are done for good, and a later failure no longer
    /// undoes them (a `ready` or `final` state closes it as well; see
    /// [`StateMeta::closes_scope`]). For a step whose success makes the
    /// earlier ones final, such as a cut-over after which rolling the
    /// earlier steps back would do harm.
    pub const fn commits(mut self) -> Self {
        self.commits = true;
        self
    }

    /// The variant's name, as stored in records.
    pub const fn name(&self) -> &'static str {
        self.name
    }
    /// Whether the machine starts here.
    pub const fn is_initial(&self) -> bool {
        self.initial
    }
    /// Whether the `Ready` condition is true here.
    pub const fn is_ready(&self) -> bool {
        self.ready
    }
    /// Whether this is a terminal failure state.
    pub const fn is_failed(&self) -> bool {
        self.failed
    }
    /// Whether this is a resting state without handler.
    pub const fn is_final(&self) -> bool {
        self.is_final
    }
    /// Whether the state's data is sensitive.
    pub const fn is_sensitive(&self) -> bool {
        self.sensitive
    }
    /// Whether the state has a handler.
    pub const fn has_handler(&self) -> bool {
        self.has_handler
    }
    /// Whether the state has a compensation function.
    pub const fn has_compensation(&self) -> bool {
        self.has_compensation
    }
    /// The name of the compensation function, when it was given with
    /// [`StateMeta::compensated_by`].
    pub const fn compensation_name(&self) -> Option<&'static str> {
        self.compensation_name
    }
    /// Whether the variant carries data.
    pub const fn has_data(&self) -> bool {
        self.has_data
    }
    /// Whether the machine rests here: nothing runs until the spec changes or
    /// the object is deleted.
    pub const fn is_resting(&self) -> bool {
        self.is_final || self.failed
    }
    /// The declared targets of this state's handler.
    pub const fn targets(&self) -> &'static [&'static str] {
        self.next
    }
    /// Whether a handler may move from here to `target`.
    pub fn allows(&self, target: &str) -> bool {
        self.next.contains(&target)
    }
    /// The state's own retry policy, if it declares one.
    pub const fn own_retry(&self) -> Option<RetryPolicy> {
        self.retry
    }
    /// The total time allowed in the state.
    pub const fn state_timeout(&self) -> Option<Duration> {
        self.timeout
    }
    /// The time allowed for one handler call.
    pub const fn handler_timeout(&self) -> Option<Duration> {
        self.attempt_timeout
    }
    /// The target taken when the state times out.
    pub const fn timeout_target(&self) -> Option<&'static str> {
        self.on_timeout
    }
    /// The target taken when retries are exhausted.
    pub const fn exhausted_target(&self) -> Option<&'static str> {
        self.on_exhausted
    }
    /// The names this state had in earlier builds of the machine.
    pub const fn former_names(&self) -> &'static [&'static str] {
        self.renamed_from
    }
    /// Whether the state itself opts in to batched commits
    /// ([`StateMeta::batch_entry`]).
    pub const fn is_batch_entry(&self) -> bool {
        self.batch_entry
    }
    /// Whether the state opts out of batched commits
    /// ([`StateMeta::commit_on_entry`]).
    pub const fn is_commit_on_entry(&self) -> bool {
        self.commit_on_entry
    }
    /// The signals the state takes, as `(signal, target state)` pairs
    /// (`#[fsm(on_signal(approve) = Serving)]`): a person's
    /// `kubectl fsm signal NAME approve` moves the object to the target,
    /// a unit state. A failed target fails the workflow (its open scope is
    /// compensated), as a handler moving there would.
    pub const fn on_signals(mut self, signals: &'static [(&'static str, &'static str)]) -> Self {
        self.signals = signals;
        self
    }
    /// The signals the state takes, as `(signal, target state)` pairs.
    pub const fn signals(&self) -> &'static [(&'static str, &'static str)] {
        self.signals
    }
    /// The state a signal moves to, when the state takes it.
    pub fn signal_target(&self, signal: &str) -> Option<&'static str> {
        self.signals
            .iter()
            .find(|(name, _)| *name == signal)
            .map(|(_, target)| *target)
    }
    /// Fields of the object (dotted paths such as `spec.engine`) that may
    /// not change while the object is in this state
    /// (`#[fsm(immutable("spec.engine"))]`): the operator's admission
    /// webhook refuses a write that changes one.
    ///
    /// ```
    /// use fsm_core::StateMeta;
    ///
    /// const SERVING: StateMeta = StateMeta::new("Serving")
    ///     .with_handler()
    ///     .immutable(&["spec.engine"])
    ///     .grow_only(&["spec.storageGi"])
    ///     .refuses_delete();
    /// assert_eq!(SERVING.immutable_fields(), ["spec.engine"]);
    /// assert_eq!(SERVING.grow_only_fields(), ["spec.storageGi"]);
    /// assert!(SERVING.is_delete_refused());
    /// ```
    pub const fn immutable(mut self, paths: &'static [&'static str]) -> Self {
        self.immutable = paths;
        self
    }
    /// The fields [`StateMeta::immutable`] declares.
    pub const fn immutable_fields(&self) -> &'static [&'static str] {
        self.immutable
    }
    /// Fields (numbers or quantities) that may grow but not shrink while
    /// the object is in this state (`#[fsm(grow_only("spec.storageGi"))]`).
    pub const fn grow_only(mut self, paths: &'static [&'static str]) -> Self {
        self.grow_only = paths;
        self
    }
    /// The fields [`StateMeta::grow_only`] declares.
    pub const fn grow_only_fields(&self) -> &'static [&'static str] {
        self.grow_only
    }
    /// The object may not be deleted while in this state
    /// (`#[fsm(refuse_delete)]`): the admission webhook refuses the
    /// deletion.
    pub const fn refuses_delete(mut self) -> Self {
        self.refuses_delete = true;
        self
    }
    /// Whether [`StateMeta::refuses_delete`] was declared.
    pub const fn is_delete_refused(&self) -> bool {
        self.refuses_delete
    }
    /// Whether the state declares any admission rule (immutable or
    /// grow-only fields, refused deletion).
    pub const fn has_admission_rules(&self) -> bool {
        !self.immutable.is_empty() || !self.grow_only.is_empty() || self.refuses_delete
    }
    /// Whether the state was marked [`StateMeta::commits`].
    pub const fn is_commits(&self) -> bool {
        self.commits
    }
    /// Whether entering this state closes the saga's scope: a `ready` or
    /// `final` state, or one marked [`StateMeta::commits`]. The compensable
    /// states entered until then stay on the trail for deletion
    /// (`on_delete = compensate`) and `compensate_and_restart`, one entry
    /// each, but a failure no longer undoes them.
    pub const fn closes_scope(&self) -> bool {
        self.closes_scope_with_itself() || self.commits
    }
    /// Whether entering this state closes the scope with its own entry in
    /// it: a `ready` or `final` state is done work. (A `commits` state
    /// closes the scope before its entry, which opens the next one.)
    pub const fn closes_scope_with_itself(&self) -> bool {
        self.ready || self.is_final
    }
}

/// A mistake in a machine's description, found by [`Machine::validate`].
///
/// The derive reports each of these as a compile error; a hand-written
/// machine meets them when an engine is built for it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MachineError {
    /// Exactly one state must be `initial`.
    #[error("machine {machine} must have exactly one initial state, found {found}")]
    Initial {
        /// The machine's name.
        machine: &'static str,
        /// How many states are marked initial.
        found: usize,
    },
    /// A name used as a target is not a state of the machine.
    #[error("state {state}: {role} names unknown state {target}")]
    UnknownTarget {
        /// The state whose attribute names the target.
        state: &'static str,
        /// Which attribute (`next`, `on_timeout`, …).
        role: &'static str,
        /// The unknown name.
        target: &'static str,
    },
    /// A state the engine enters by itself must be a unit variant.
    #[error("state {target} is a target of {role} and must be a unit variant")]
    DataCarryingTarget {
        /// The target.
        target: &'static str,
        /// Why the engine builds it.
        role: &'static str,
    },
    /// `on_failed_spec_change = goto(S)` names a failed state: a failed
    /// object would move from one failure to another.
    #[error(
        "on_failed_spec_change moves a failed object to {0}, itself a failed state: \
         name a state the workflow can go on from"
    )]
    RecoveryIntoFailed(&'static str),
    /// A state that is neither `final` nor `failed` needs a handler.
    #[error("state {0} has no handler but is neither final nor failed")]
    MissingHandler(&'static str),
    /// A `final` or `failed` state has nothing to run.
    #[error("state {0} is final or failed and must not have a handler")]
    RestingWithHandler(&'static str),
    /// The machine has no failed state to rest in when the workflow fails.
    #[error("machine {0} has no failed state")]
    NoFailedState(&'static str),
    /// Several failed states and no default.
    #[error("machine {0} has several failed states; name the default with on_failure")]
    AmbiguousFailedState(&'static str),
    /// Two states with one name.
    #[error("state name {0} is used twice")]
    DuplicateState(&'static str),
    /// A former name (`renamed_from`) that is the name of a state, or the
    /// former name of two states: a record naming it would be ambiguous.
    #[error(
        "state name {name} is used twice: {state} was renamed from it, but {other} uses it too"
    )]
    AmbiguousFormerName {
        /// The former name.
        name: &'static str,
        /// The state that declares it.
        state: &'static str,
        /// The other state that is, or was, called so.
        other: &'static str,
    },
    /// A signal declared by a state that never waits for one: a `final`
    /// or `failed` state runs nothing and takes no signal.
    #[error("state {state} is final or failed and takes no signal, but declares {signal}")]
    SignalOnRestingState {
        /// The state.
        state: &'static str,
        /// The signal.
        signal: &'static str,
    },
    /// One signal declared twice by one state.
    #[error("state {state} declares signal {signal} twice")]
    DuplicateSignal {
        /// The state.
        state: &'static str,
        /// The signal.
        signal: &'static str,
    },
    /// Machine versions start at 1.
    #[error("machine {0} has version 0; versions start at 1")]
    ZeroVersion(&'static str),
    /// The initial state carries data but `Fsm::initial_state` does not
    /// build it (found when an engine is built for a hand-written machine).
    #[error(
        "the initial state {0} carries data, but Fsm::initial_state does not build it: \
         implement initial_state to give it its starting data"
    )]
    InitialNotBuilt(&'static str),
}

/// The static description of a machine.
///
/// ```
/// use fsm_core::{Machine, StateMeta};
///
/// static STATES: [StateMeta; 3] = [
///     StateMeta::new("Pending").initial().with_handler().next(&["Done"]),
///     StateMeta::new("Done").final_state().ready(),
///     StateMeta::new("Failed").failed(),
/// ];
/// static MACHINE: Machine = Machine::new("Job", &STATES);
/// assert_eq!(MACHINE.validate(), Ok(()));
/// assert_eq!(MACHINE.initial_state().map(|s| s.name()), Some("Pending"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Machine {
    name: &'static str,
    states: &'static [StateMeta],
    retry: RetryPolicy,
    on_failure: Option<&'static str>,
    on_spec_change: SpecChange,
    on_failed_spec_change: FailedSpecChange,
    snapshot_spec: bool,
    has_cleanup: bool,
    on_delete: OnDelete,
    version: u32,
    batch_commits: bool,
}

impl Machine {
    /// A machine with the given name (the enum's) and states, the default
    /// retry policy and default options.
    pub const fn new(name: &'static str, states: &'static [StateMeta]) -> Self {
        Machine {
            name,
            states,
            retry: RetryPolicy::DEFAULT,
            on_failure: None,
            on_spec_change: SpecChange::Restart,
            on_failed_spec_change: FailedSpecChange::Restart,
            snapshot_spec: false,
            has_cleanup: false,
            on_delete: OnDelete::Nothing,
            version: 1,
            batch_commits: false,
        }
    }
    /// The machine's version, stored in every record it writes (1 unless
    /// set). Raise it when a new build changes what stored records mean —
    /// a state removed or split, a field changed — so that the new build's
    /// [`Fsm::migrate`](crate::Fsm::migrate) is asked about records of
    /// older versions, and an older build leaves the new build's records
    /// alone (see `docs/upgrading.md`).
    pub const fn versioned(mut self, version: u32) -> Self {
        self.version = version;
        self
    }
    /// The retry policy of states that declare none.
    pub const fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }
    /// The failed state entered by default when there are several.
    pub const fn on_failure(mut self, state: &'static str) -> Self {
        self.on_failure = Some(state);
        self
    }
    /// The reaction to spec changes.
    pub const fn on_spec_change(mut self, policy: SpecChange) -> Self {
        self.on_spec_change = policy;
        self
    }
    /// The reaction to spec changes of an object resting in a `failed`
    /// state (default [`FailedSpecChange::Restart`]).
    pub const fn on_failed_spec_change(mut self, policy: FailedSpecChange) -> Self {
        self.on_failed_spec_change = policy;
        self
    }
    /// Store the spec the workflow started from in the record.
    pub const fn snapshot_spec(mut self) -> Self {
        self.snapshot_spec = true;
        self
    }
    /// Declares a `cleanup` function that runs on deletion.
    pub const fn with_cleanup(mut self) -> Self {
        self.has_cleanup = true;
        self
    }
    /// The reaction to deletion.
    pub const fn on_delete(mut self, policy: OnDelete) -> Self {
        self.on_delete = policy;
        self
    }

    /// Batches commits: when one reconcile runs several transitions
    /// ([`EngineOptions::max_transitions`](crate::EngineOptions)), they
    /// are committed together when the chain stops, instead of one write
    /// each. After a crash, the steps since the last commit run again.
    /// States with a compensation, and states marked
    /// [`StateMeta::commit_on_entry`], still commit their entry before
    /// their handler runs. See `docs/semantics.md`, "Batched commits".
    pub const fn batch_commits(mut self) -> Self {
        self.batch_commits = true;
        self
    }

    /// The machine's name.
    pub const fn name(&self) -> &'static str {
        self.name
    }
    /// The machine's version (see [`Machine::versioned`]).
    pub const fn version(&self) -> u32 {
        self.version
    }
    /// All states, in declaration order.
    pub const fn states(&self) -> &'static [StateMeta] {
        self.states
    }
    /// Whether a state declares an admission rule
    /// ([`StateMeta::has_admission_rules`]): the operator then has a
    /// validating webhook to serve.
    pub fn declares_admission_rules(&self) -> bool {
        self.states.iter().any(StateMeta::has_admission_rules)
    }
    /// The default retry policy.
    pub const fn default_retry(&self) -> RetryPolicy {
        self.retry
    }
    /// The spec-change policy.
    pub const fn spec_change(&self) -> SpecChange {
        self.on_spec_change
    }
    /// The reaction to spec changes of a failed object.
    pub const fn failed_spec_change(&self) -> FailedSpecChange {
        self.on_failed_spec_change
    }
    /// Whether the spec is snapshotted when the workflow starts.
    pub const fn snapshots_spec(&self) -> bool {
        self.snapshot_spec
    }
    /// Whether a `cleanup` function runs on deletion.
    pub const fn has_cleanup(&self) -> bool {
        self.has_cleanup
    }
    /// The deletion policy.
    pub const fn delete_policy(&self) -> OnDelete {
        self.on_delete
    }
    /// Whether deleting an object needs a finalizer (something runs first).
    pub const fn needs_finalizer(&self) -> bool {
        self.has_cleanup || matches!(self.on_delete, OnDelete::Compensate)
    }

    /// Whether the machine batches commits ([`Machine::batch_commits`]).
    pub const fn batches_commits(&self) -> bool {
        self.batch_commits
    }
    /// Whether a transition into `state` may ride with a later commit of
    /// the same reconcile: the machine or the state opted in, the state
    /// did not opt out, and it has no compensation (its entry must be on
    /// the committed trail before its handler acts, so that deletion or
    /// failure compensates it).
    pub const fn batches_entry(&self, state: &StateMeta) -> bool {
        (self.batch_commits || state.batch_entry)
            && !state.commit_on_entry
            && !state.has_compensation
    }

    /// The state with this name.
    pub fn state(&self, name: &str) -> Option<&'static StateMeta> {
        self.states.iter().find(|s| s.name == name)
    }
    /// The state with this name or, failing that, the state that was
    /// renamed from it (see [`StateMeta::renamed_from`]).
    pub fn resolve(&self, name: &str) -> Option<&'static StateMeta> {
        self.state(name)
            .or_else(|| self.states.iter().find(|s| s.renamed_from.contains(&name)))
    }
    /// The initial state.
    pub fn initial_state(&self) -> Option<&'static StateMeta> {
        self.states.iter().find(|s| s.initial)
    }
    /// The failed state the engine enters when a workflow fails.
    pub fn default_failed(&self) -> Option<&'static StateMeta> {
        match self.on_failure {
            Some(name) => self.state(name),
            None => {
                let mut failed = self.states.iter().filter(|s| s.failed);
                match (failed.next(), failed.next()) {
                    (Some(only), None) => Some(only),
                    _ => None,
                }
            }
        }
    }
    /// The retry policy of `state`: its own, or the machine's default.
    pub fn retry_policy(&self, state: &StateMeta) -> RetryPolicy {
        state.retry.unwrap_or(self.retry)
    }

    /// Checks the description: one initial state, known targets, unit
    /// engine-built targets (the initial state excepted: `Fsm::initial_state`
    /// builds it with its data), handlers where needed, a failed state to
    /// rest in.
    ///
    /// # Errors
    /// Every mistake found, in declaration order.
    pub fn validate(&self) -> Result<(), Vec<MachineError>> {
        let mut errors = Vec::new();
        for (i, s) in self.states.iter().enumerate() {
            if self.states[..i].iter().any(|o| o.name == s.name) {
                errors.push(MachineError::DuplicateState(s.name));
            }
        }
        self.check_former_names(&mut errors);
        if self.version == 0 {
            errors.push(MachineError::ZeroVersion(self.name));
        }
        let initials: Vec<_> = self.states.iter().filter(|s| s.initial).collect();
        if initials.len() != 1 {
            errors.push(MachineError::Initial {
                machine: self.name,
                found: initials.len(),
            });
        }
        let require_unit = |target: &'static str, role: &'static str, errors: &mut Vec<_>| {
            if let Some(t) = self.state(target)
                && t.has_data
            {
                errors.push(MachineError::DataCarryingTarget { target, role });
            }
        };
        for s in self.states {
            let mut check = |role: &'static str, target: &'static str| {
                if self.state(target).is_none() {
                    errors.push(MachineError::UnknownTarget {
                        state: s.name,
                        role,
                        target,
                    });
                }
            };
            for t in s.next {
                check("next", t);
            }
            if let Some(t) = s.on_timeout {
                check("on_timeout", t);
            }
            if let Some(t) = s.on_exhausted {
                check("on_exhausted", t);
            }
            for &(_, target) in s.signals {
                check("on_signal", target);
            }
            if let Some(t) = s.on_timeout {
                require_unit(t, "on_timeout", &mut errors);
            }
            if let Some(t) = s.on_exhausted {
                require_unit(t, "on_exhausted", &mut errors);
            }
            for (i, &(signal, _)) in s.signals.iter().enumerate() {
                if s.signals[..i].iter().any(|(other, _)| *other == signal) {
                    errors.push(MachineError::DuplicateSignal {
                        state: s.name,
                        signal,
                    });
                }
                if s.is_resting() {
                    errors.push(MachineError::SignalOnRestingState {
                        state: s.name,
                        signal,
                    });
                }
            }
            for &(_, target) in s.signals {
                require_unit(target, "on_signal", &mut errors);
            }
            if s.failed {
                require_unit(s.name, "failed", &mut errors);
            }
            if s.is_resting() && s.has_handler {
                errors.push(MachineError::RestingWithHandler(s.name));
            }
            if !s.is_resting() && !s.has_handler {
                errors.push(MachineError::MissingHandler(s.name));
            }
        }
        if let SpecChange::Goto(target) = self.on_spec_change {
            if self.state(target).is_none() {
                errors.push(MachineError::UnknownTarget {
                    state: self.name,
                    role: "on_spec_change",
                    target,
                });
            }
            require_unit(target, "on_spec_change", &mut errors);
        }
        if let FailedSpecChange::Goto(target) = self.on_failed_spec_change {
            match self.state(target) {
                None => errors.push(MachineError::UnknownTarget {
                    state: self.name,
                    role: "on_failed_spec_change",
                    target,
                }),
                Some(s) if s.failed => errors.push(MachineError::RecoveryIntoFailed(target)),
                Some(_) => {}
            }
            require_unit(target, "on_failed_spec_change", &mut errors);
        }
        if let Some(target) = self.on_failure {
            match self.state(target) {
                Some(s) if s.failed => {}
                _ => errors.push(MachineError::UnknownTarget {
                    state: self.name,
                    role: "on_failure",
                    target,
                }),
            }
        }
        let failed = self.states.iter().filter(|s| s.failed).count();
        if failed == 0 {
            errors.push(MachineError::NoFailedState(self.name));
        } else if failed > 1 && self.on_failure.is_none() {
            errors.push(MachineError::AmbiguousFailedState(self.name));
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }

    /// Every former name is nobody's current name and only one state's
    /// former name.
    fn check_former_names(&self, errors: &mut Vec<MachineError>) {
        for (i, s) in self.states.iter().enumerate() {
            for (j, &name) in s.renamed_from.iter().enumerate() {
                let current = self.states.iter().find(|o| o.name == name);
                let earlier_here = s.renamed_from[..j].contains(&name);
                let earlier_other = self.states[..i]
                    .iter()
                    .find(|o| o.renamed_from.contains(&name));
                let other = current
                    .or(earlier_other)
                    .map(StateMeta::name)
                    .or(earlier_here.then_some(s.name));
                if let Some(other) = other {
                    errors.push(MachineError::AmbiguousFormerName {
                        name,
                        state: s.name,
                        other,
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static GOOD: [StateMeta; 4] = [
        StateMeta::new("Start")
            .initial()
            .with_handler()
            .next(&["Work"]),
        StateMeta::new("Work")
            .with_handler()
            .with_data()
            .on_timeout("Failed")
            .next(&["Done"]),
        StateMeta::new("Done").final_state().ready(),
        StateMeta::new("Failed").failed(),
    ];

    #[test]
    fn a_good_machine_validates() {
        let m = Machine::new("Good", &GOOD);
        assert_eq!(m.validate(), Ok(()));
        assert_eq!(m.default_failed().map(StateMeta::name), Some("Failed"));
        assert!(!m.needs_finalizer());
        assert!(m.on_delete(OnDelete::Compensate).needs_finalizer());
    }

    static BAD: [StateMeta; 5] = [
        StateMeta::new("A").initial().with_handler().next(&["Nope"]),
        StateMeta::new("B")
            .initial()
            .with_data()
            .on_exhausted("C")
            .next(&[]),
        StateMeta::new("C").with_data().failed(),
        StateMeta::new("D").final_state().with_handler(),
        StateMeta::new("E").failed(),
    ];

    #[test]
    fn every_mistake_is_reported() {
        let errors = Machine::new("Bad", &BAD).validate().unwrap_err();
        assert!(errors.contains(&MachineError::Initial {
            machine: "Bad",
            found: 2
        }));
        assert!(errors.contains(&MachineError::UnknownTarget {
            state: "A",
            role: "next",
            target: "Nope"
        }));
        // A data-carrying initial state is allowed: `Fsm::initial_state`
        // builds it.
        assert!(!errors.contains(&MachineError::DataCarryingTarget {
            target: "B",
            role: "initial"
        }));
        assert!(errors.contains(&MachineError::DataCarryingTarget {
            target: "C",
            role: "on_exhausted"
        }));
        assert!(errors.contains(&MachineError::MissingHandler("B")));
        assert!(errors.contains(&MachineError::RestingWithHandler("D")));
        assert!(errors.contains(&MachineError::AmbiguousFailedState("Bad")));
    }

    #[test]
    fn a_failed_object_recovers_into_a_known_state_that_is_not_failed() {
        let good = Machine::new("Good", &GOOD);
        assert_eq!(good.failed_spec_change(), FailedSpecChange::Restart);
        let into_start = good.on_failed_spec_change(FailedSpecChange::Goto("Start"));
        assert_eq!(into_start.validate(), Ok(()));
        assert_eq!(
            good.on_failed_spec_change(FailedSpecChange::Goto("Failed"))
                .validate(),
            Err(vec![MachineError::RecoveryIntoFailed("Failed")])
        );
        assert_eq!(
            good.on_failed_spec_change(FailedSpecChange::Goto("Work"))
                .validate(),
            Err(vec![MachineError::DataCarryingTarget {
                target: "Work",
                role: "on_failed_spec_change"
            }])
        );
        let unknown = good
            .on_failed_spec_change(FailedSpecChange::Goto("Nope"))
            .validate()
            .unwrap_err();
        assert!(unknown.contains(&MachineError::UnknownTarget {
            state: "Good",
            role: "on_failed_spec_change",
            target: "Nope"
        }));
    }

    #[test]
    fn former_names_resolve_and_must_be_unambiguous() {
        static RENAMED: [StateMeta; 3] = [
            StateMeta::new("Start")
                .initial()
                .with_handler()
                .renamed_from(&["Begin", "Go"])
                .next(&["Done"]),
            StateMeta::new("Done")
                .final_state()
                .renamed_from(&["Finished"]),
            StateMeta::new("Failed").failed(),
        ];
        let m = Machine::new("Renamed", &RENAMED);
        assert_eq!(m.validate(), Ok(()));
        assert_eq!(m.resolve("Go").map(StateMeta::name), Some("Start"));
        assert_eq!(m.resolve("Done").map(StateMeta::name), Some("Done"));
        assert_eq!(m.resolve("Finished").map(StateMeta::name), Some("Done"));
        assert_eq!(m.resolve("Nope"), None);
        assert_eq!(m.state("Go"), None, "state() knows current names only");

        static CLASHING: [StateMeta; 3] = [
            StateMeta::new("Start")
                .initial()
                .with_handler()
                .renamed_from(&["Failed", "Old"]),
            StateMeta::new("Done")
                .final_state()
                .renamed_from(&["Old", "X", "X"]),
            StateMeta::new("Failed").failed(),
        ];
        let errors = Machine::new("Clashing", &CLASHING)
            .versioned(0)
            .validate()
            .unwrap_err();
        assert_eq!(
            errors,
            [
                MachineError::AmbiguousFormerName {
                    name: "Failed",
                    state: "Start",
                    other: "Failed"
                },
                MachineError::AmbiguousFormerName {
                    name: "Old",
                    state: "Done",
                    other: "Start"
                },
                MachineError::AmbiguousFormerName {
                    name: "X",
                    state: "Done",
                    other: "Done"
                },
                MachineError::ZeroVersion("Clashing"),
            ]
        );
    }

    #[test]
    fn on_failure_picks_among_several_failed_states() {
        static TWO: [StateMeta; 3] = [
            StateMeta::new("A").initial().with_handler(),
            StateMeta::new("F1").failed(),
            StateMeta::new("F2").failed(),
        ];
        let m = Machine::new("Two", &TWO).on_failure("F2");
        assert_eq!(m.validate(), Ok(()));
        assert_eq!(m.default_failed().map(StateMeta::name), Some("F2"));
    }
}
