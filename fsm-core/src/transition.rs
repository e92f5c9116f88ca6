//! What a handler asks the engine to do next.

use std::time::Duration;

/// The outcome of one successful handler call.
///
/// A handler returns `Ok(Transition)` when it did its work (or found there is
/// nothing to do yet) and an error when it could not; see
/// [`Classify`](crate::Classify) for how errors are retried.
///
/// ```
/// use std::time::Duration;
/// use fsm_core::Transition;
///
/// let t: Transition<&str> = Transition::wait(Duration::from_secs(5));
/// assert_eq!(t, Transition::Wait(Duration::from_secs(5)));
/// ```
#[must_use = "a transition does nothing unless the handler returns it"]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transition<S> {
    /// Move to another state. It must be one of the current state's declared
    /// `next` targets; the move is committed with a fresh entry time and
    /// attempt counter.
    Next(S),
    /// Stay in the current state and look again after the runtime's poll
    /// interval. Commits nothing beyond bookkeeping.
    Stay,
    /// Stay in the current state and look again after the given delay.
    /// Commits nothing beyond bookkeeping.
    Wait(Duration),
    /// Give up: the workflow has failed for the given reason. The
    /// compensation chain runs, then the machine rests in its `failed` state.
    Fail(String),
    /// Stay in the current state, but report that it cannot reach what it
    /// keeps converged (a conflict on a dependent, a dependent that does
    /// not become ready): the object shows `Degraded` with the reason, no
    /// attempt is spent, and the handler runs again after a backoff that
    /// grows with the time degraded, within the state's retry policy's
    /// `initial` and `max` (or after `retry_after`). Only the first report
    /// and a change of reason are written. Meant for
    /// `ready` states, which must not fail over what a person or another
    /// controller does to their dependents; any other `Ok` result ends it.
    Degraded {
        /// What is wrong, for the object's condition.
        reason: String,
        /// When to try again; `None` for the state's backoff.
        retry_after: Option<Duration>,
    },
}

impl<S> Transition<S> {
    /// Move to `state`.
    pub fn next(state: S) -> Self {
        Transition::Next(state)
    }

    /// Stay in the current state until the next poll.
    pub fn stay() -> Self {
        Transition::Stay
    }

    /// Stay in the current state and look again after `delay`.
    pub fn wait(delay: Duration) -> Self {
        Transition::Wait(delay)
    }

    /// Fail the workflow with `reason`, running its compensation chain.
    pub fn fail(reason: impl Into<String>) -> Self {
        Transition::Fail(reason.into())
    }

    /// Stay, reporting that the state cannot converge: `reason` goes into
    /// the object's `Degraded` condition; the handler runs again after the
    /// state's retry backoff (see [`Transition::Degraded`]).
    ///
    /// ```
    /// use fsm_core::Transition;
    ///
    /// let t: Transition<&str> = Transition::degraded("Deployment web: field conflict");
    /// assert!(matches!(t, Transition::Degraded { retry_after: None, .. }));
    /// ```
    pub fn degraded(reason: impl Into<String>) -> Self {
        Transition::Degraded {
            reason: reason.into(),
            retry_after: None,
        }
    }

    /// [`Transition::degraded`], trying again after `delay`.
    pub fn degraded_for(reason: impl Into<String>, delay: Duration) -> Self {
        Transition::Degraded {
            reason: reason.into(),
            retry_after: Some(delay),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_build_the_matching_variants() {
        assert_eq!(Transition::next(3), Transition::Next(3));
        assert_eq!(Transition::<u8>::stay(), Transition::Stay);
        assert_eq!(
            Transition::<u8>::fail("gone"),
            Transition::Fail("gone".to_owned())
        );
    }
}
