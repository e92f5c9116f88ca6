//! What a reconcile did, for events, metrics and logs.

use std::time::Duration;

/// Something notable that a reconcile did. The Kubernetes runtime turns
/// these into events, conditions and metrics; none carries state data, so
/// they are safe to log for `sensitive` states too.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// A transition was committed.
    Entered {
        /// The state left (`None` when the machine started).
        from: Option<String>,
        /// The state entered.
        to: String,
        /// Why, when the engine moved by itself.
        reason: Option<String>,
    },
    /// A handler failed and will be tried again.
    RetryScheduled {
        /// The state.
        state: String,
        /// Failed attempts so far.
        attempt: u32,
        /// The wait before the next attempt.
        delay: Duration,
        /// The error.
        error: String,
    },
    /// A handler failed with an error classed
    /// [`crate::ErrorClass::RetryWithoutAttempt`] and will be tried again;
    /// no attempt was spent.
    RetryWithoutAttempt {
        /// The state.
        state: String,
        /// Such failures in a row.
        failures: u32,
        /// The wait before the next try.
        delay: Duration,
        /// The error.
        error: String,
    },
    /// A handler failed for the last time its policy allows.
    RetriesExhausted {
        /// The state.
        state: String,
        /// The last error.
        error: String,
    },
    /// A handler failed with a permanent error or asked to fail.
    Failed {
        /// The state.
        state: String,
        /// Why.
        reason: String,
    },
    /// The state's total time ran out.
    TimedOut {
        /// The state.
        state: String,
    },
    /// A handler asked for a target its state does not declare (a bug in
    /// the handler). Counted as a failed attempt.
    UndeclaredTransition {
        /// The state.
        from: String,
        /// The target asked for.
        to: String,
    },
    /// The object's spec changed and the spec-change policy was applied.
    SpecChanged {
        /// The new generation.
        generation: i64,
    },
    /// Unwinding (compensation, or deletion) started.
    CompensationStarted {
        /// Why.
        reason: String,
    },
    /// One state's compensation succeeded.
    Compensated {
        /// The state.
        state: String,
    },
    /// One state's compensation (or the cleanup) failed for good; the chain
    /// goes on without it.
    CompensationFailed {
        /// The state, or `cleanup`.
        step: String,
        /// The last error.
        error: String,
    },
    /// The compensation chain ended.
    CompensationFinished {
        /// How many steps failed for good.
        failures: usize,
    },
    /// A checkpoint committed new data for the current state.
    Checkpointed {
        /// The state.
        state: String,
    },
    /// Deletion is complete: the finalizer may go.
    Released,
    /// A record written by an earlier build of the machine (a renamed
    /// state, an older machine version, a migrated state) was written back
    /// as this build reads it, before anything else ran.
    Upgraded {
        /// The state stored before.
        from: String,
        /// The state now.
        to: String,
        /// The machine version of the stored record.
        from_version: u32,
        /// This build's machine version.
        to_version: u32,
    },
    /// A state that stays reported it cannot converge
    /// ([`Transition::Degraded`](crate::Transition::Degraded)), for the
    /// first time since it last succeeded or for another reason than
    /// before.
    Degraded {
        /// The state.
        state: String,
        /// What the handler said.
        reason: String,
    },
    /// A degraded state converged again.
    Recovered {
        /// The state.
        state: String,
    },
    /// A person's command was applied.
    CommandApplied {
        /// Its sequence number.
        seq: u64,
        /// What it asked for (`goto Serving`).
        command: String,
        /// Who asked, as the command says.
        by: Option<String>,
    },
    /// A person's command was refused; only its number was recorded.
    CommandRefused {
        /// Its sequence number.
        seq: u64,
        /// What it asked for.
        command: String,
        /// Who asked, as the command says.
        by: Option<String>,
        /// Why it was refused.
        reason: String,
    },
}
