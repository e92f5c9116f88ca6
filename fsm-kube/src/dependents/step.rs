//! Dependents from inside a state: `cx.converge(&set)` and
//! `cx.teardown(&set)` on a machine's step, and [`converge_state`], the
//! handler a state that only converges a set needs.

use std::future::Future;

use fsm_core::{Fsm, Step, Transition};

use super::converge::converge_for;
use super::error::DependentsError;
use super::object::Owner;
use super::reads::Reads;
use super::report::{Convergence, Teardown};
use super::runtime::DependentsRuntime;
use super::set::DesiredSet;
use super::teardown::teardown_for;
use crate::KubeResource;

/// Dependent resources on a machine's [`Step`]: in scope with
/// `use fsm_kube::prelude::*`.
///
/// ```no_run
/// # use fsm_kube::prelude::*;
/// # use fsm_kube::dependents::{Dependent, DesiredSet, DependentsError};
/// # async fn provisioning<S: Fsm>(cx: &mut Step<'_, S>, set: DesiredSet) -> Result<(), DependentsError>
/// # where S::Resource: fsm_kube::KubeResource {
/// let convergence = cx.converge(&set).await?;
/// if convergence.is_ready() {
///     // go on to the next state
/// }
/// # Ok(()) }
/// ```
pub trait StepDependents {
    /// The runtime the engine was given.
    ///
    /// # Errors
    /// [`DependentsError::NoRuntime`] when the engine has none.
    fn dependents_runtime(&self) -> Result<&DependentsRuntime, DependentsError>;

    /// Typed reads of secondary objects in the step's object's namespace
    /// (a Secret, a ConfigMap another operator writes), through the
    /// runtime and its watch caches: for a desired function that needs
    /// more than the object. Owned, so an `async` function holds it
    /// across `.await`s.
    ///
    /// ```no_run
    /// # use fsm_kube::prelude::*;
    /// # use fsm_kube::dependents::{DependentsError, ReadError};
    /// # #[derive(Debug, thiserror::Error)]
    /// # enum AppError { #[error(transparent)] D(#[from] DependentsError), #[error(transparent)] R(#[from] ReadError) }
    /// # async fn demo<S: Fsm>(cx: &mut Step<'_, S>) -> Result<(), AppError> where S::Resource: fsm_kube::KubeResource {
    /// use k8s_openapi::api::core::v1::Secret;
    ///
    /// let reads = cx.reads()?;
    /// let password: Secret = reads.get("db-password").await?;
    /// # let _ = password; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`DependentsError::NoRuntime`] without a runtime,
    /// [`DependentsError::Owner`] when the object has no name or UID.
    fn reads(&self) -> Result<Reads, DependentsError>;

    /// [`converge`](super::converge)s `set` for the step's object, and
    /// reports the `DependentsReady` condition, which the store writes with
    /// the step's commit (no extra write).
    ///
    /// # Errors
    /// As [`converge`](super::converge); [`DependentsError::NoRuntime`]
    /// without a runtime.
    fn converge<'s>(
        &'s self,
        set: &'s DesiredSet,
    ) -> impl Future<Output = Result<Convergence, DependentsError>> + Send + 's;

    /// [`teardown`](super::teardown) of `set` for the step's object (in
    /// `cleanup` or `compensate`).
    ///
    /// # Errors
    /// As [`teardown`](super::teardown); [`DependentsError::NoRuntime`]
    /// without a runtime.
    fn teardown<'s>(
        &'s self,
        set: &'s DesiredSet,
    ) -> impl Future<Output = Result<Teardown, DependentsError>> + Send + 's;
}

impl<S: Fsm> StepDependents for Step<'_, S>
where
    S::Resource: KubeResource,
{
    fn dependents_runtime(&self) -> Result<&DependentsRuntime, DependentsError> {
        self.extension::<DependentsRuntime>()
            .ok_or(DependentsError::NoRuntime)
    }

    fn reads(&self) -> Result<Reads, DependentsError> {
        let runtime = self.dependents_runtime()?;
        Ok(Reads::new(runtime.clone(), &Owner::of(self.resource())?))
    }

    fn converge<'s>(
        &'s self,
        set: &'s DesiredSet,
    ) -> impl Future<Output = Result<Convergence, DependentsError>> + Send + 's {
        let runtime = self.dependents_runtime();
        let resource = self.resource();
        async move {
            let runtime = runtime?;
            let owner = Owner::of(resource)?;
            let convergence = converge_for(runtime, &owner, set).await?;
            let (ready, reason, message) = condition_of(&convergence);
            runtime
                .reported
                .report_dependents(&owner.uid, ready, reason, message);
            Ok(convergence)
        }
    }

    fn teardown<'s>(
        &'s self,
        set: &'s DesiredSet,
    ) -> impl Future<Output = Result<Teardown, DependentsError>> + Send + 's {
        let runtime = self.dependents_runtime();
        let resource = self.resource();
        async move {
            let runtime = runtime?;
            teardown_for(runtime, &Owner::of(resource)?, set).await
        }
    }
}

/// The `DependentsReady` status, reason and message for a convergence:
/// `True`, `Ready`; else `False` with `Failed` or `Pending`; the message is
/// the [summary](Convergence::summary), cut to a readable length.
pub(crate) fn condition_of(convergence: &Convergence) -> (bool, &'static str, String) {
    const LIMIT: usize = 4096;
    let mut message = convergence.summary();
    if message.len() > LIMIT {
        let mut cut = LIMIT - 3;
        while !message.is_char_boundary(cut) {
            cut -= 1;
        }
        message.truncate(cut);
        message.push_str("...");
    }
    if convergence.is_ready() {
        (true, "Ready", message)
    } else if convergence.is_failed() {
        (false, "Failed", message)
    } else {
        (false, "Pending", message)
    }
}

/// The handler of a state that converges `set` and moves on once it is
/// ready: [`Transition::next`]`(next)` when every active dependent is
/// ready, [`Transition::wait`] for the runtime's
/// [`pending_requeue`](DependentsRuntime::pending_requeue) while some are
/// pending, and [`DependentsError::Failed`] (retried under the state's
/// retry policy) when one failed. This is what a state's `converge`
/// attribute calls; a machine's error type takes it with
/// `From<DependentsError>`.
///
/// ```no_run
/// # use fsm_kube::prelude::*;
/// # use fsm_kube::dependents::{DesiredSet, DependentsError, converge_state};
/// # async fn deploying<S: Fsm>(cx: &mut Step<'_, S>, set: DesiredSet, ready: S)
/// #     -> Result<Transition<S>, DependentsError>
/// # where S::Resource: fsm_kube::KubeResource {
/// converge_state(cx, &set, ready).await
/// # }
/// ```
///
/// # Errors
/// As [`StepDependents::converge`], and [`DependentsError::Failed`] with
/// the convergence when a dependent failed.
pub fn converge_state<'s, S: Fsm>(
    cx: &'s Step<'_, S>,
    set: &'s DesiredSet,
    next: S,
) -> impl Future<Output = Result<Transition<S>, DependentsError>> + Send + 's
where
    S::Resource: KubeResource,
{
    converge_then(cx, set, move |_| Ok(next))
}

/// [`converge_state`] whose next state is built, once the set is ready,
/// from the [`Convergence`] (what [`DesiredSet::then`] converges).
pub(crate) fn converge_then<'s, S: Fsm, E>(
    cx: &'s Step<'_, S>,
    set: &'s DesiredSet,
    next: impl FnOnce(&Convergence) -> Result<S, E> + Send + 's,
) -> impl Future<Output = Result<Transition<S>, E>> + Send + 's
where
    S::Resource: KubeResource,
    E: From<DependentsError>,
{
    // The step itself is not `Sync`: take what the future needs from it
    // now, so that a handler returning this future stays `Send`.
    let converging = cx.converge(set);
    let requeue = cx.dependents_runtime().map(|r| r.pending_requeue);
    async move {
        let convergence = converging.await?;
        if convergence.is_ready() {
            Ok(Transition::next(next(&convergence)?))
        } else if convergence.is_failed() {
            Err(DependentsError::Failed(Box::new(convergence)).into())
        } else {
            Ok(Transition::wait(requeue?))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dependents::DependentState;

    #[test]
    fn the_condition_says_failed_before_pending_and_stays_short() {
        let convergence = Convergence {
            dependents: vec![
                (
                    "a".into(),
                    DependentState::Failed(crate::dependents::DependentFailure::new(
                        crate::dependents::FailureKind::ReadinessFailed,
                        "x".repeat(5000),
                    )),
                ),
                ("b".into(), DependentState::Waiting(vec!["a".into()])),
            ],
            ..Convergence::default()
        };
        let (ready, reason, message) = condition_of(&convergence);
        assert!(!ready);
        assert_eq!(reason, "Failed");
        assert!(message.len() <= 4096 && message.ends_with("..."));
        let ready = Convergence {
            dependents: vec![
                ("a".into(), DependentState::Ready),
                ("b".into(), DependentState::Inactive),
            ],
            ..Convergence::default()
        };
        assert_eq!(
            condition_of(&ready),
            (true, "Ready", "all 1 active dependent(s) ready".into())
        );
    }
}
