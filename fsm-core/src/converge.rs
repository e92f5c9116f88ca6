//! [`Converge`]: what a state declared with `#[fsm(converge = desired_fn,
//! next(S))]` brings to its desired shape before it moves on. The trait
//! knows nothing of Kubernetes; `fsm-kube` implements it for its set of
//! dependent objects (`fsm_kube::dependents::DesiredSet`).

use crate::{fsm::Fsm, fsm::Step, future::BoxFuture, transition::Transition};

/// Something a state converges: a desired shape of the world that one
/// handler call brings closer, and that says when it is reached.
///
/// A state written `#[fsm(converge = desired_fn, next(Running))]` has a
/// handler generated for it: each time it runs, it calls
/// `desired_fn(cx, &field1, &field2, ...)` (the step, then the state's
/// fields by reference, as a handler gets them) for a value implementing
/// `Converge<S>`, then returns what [`Converge::converge_state`] returns
/// with the state `Running`.
///
/// # Expected flow
/// [`Converge::converge_state`] does one round of work and answers:
/// - everything is ready: `Ok(Transition::next(next))`;
/// - something is still on its way: `Ok(Transition::wait(d))` (or
///   [`Transition::stay`]), and the engine runs the state again later;
/// - something failed: an error, which the engine treats as any handler's
///   error — retried under the state's retry policy, or failing the
///   workflow (compensation first) when [`Classify`](crate::Classify)
///   says it is permanent or the retries are exhausted.
///
/// The state's `timeout`, `on_timeout`, `attempt_timeout`, `retry`,
/// `on_exhausted` and `compensate` apply as to any state: a state that
/// waits too long for its dependents times out.
///
/// # Guarantees
/// The engine gives the state's handler the same guarantees as any
/// other's: at least once per attempt, so a round must be idempotent
/// (apply the desired shape, do not add to it).
///
/// # Example
/// A state that waits for as many replicas as the resource asks for, one
/// coming up per look:
///
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use std::time::Duration;
/// use fsm_core::prelude::*;
/// use fsm_core::Converge;
///
/// #[derive(Debug, thiserror::Error)]
/// #[error("a replica crashed")]
/// struct Crashed;
/// impl Classify for Crashed {}
///
/// #[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
/// #[fsm(resource = u32, context = AtomicU32, error = Crashed)]
/// enum Cluster {
///     #[fsm(initial, converge = replicas, next(Running), timeout = "10m")]
///     Scaling,
///     #[fsm(ready, final)]
///     Running,
///     #[fsm(failed)]
///     Failed,
/// }
///
/// /// What `Scaling` waits for.
/// struct Replicas { want: u32 }
///
/// fn replicas(cx: &Step<'_, Cluster>) -> Result<Replicas, Crashed> {
///     Ok(Replicas { want: *cx.resource() })
/// }
///
/// impl Converge<Cluster> for Replicas {
///     fn converge_state<'a>(
///         &'a self,
///         cx: &'a mut Step<'_, Cluster>,
///         next: Cluster,
///     ) -> BoxFuture<'a, Result<Transition<Cluster>, Crashed>> {
///         Box::pin(async move {
///             let up = cx.context().fetch_add(1, Ordering::SeqCst) + 1;
///             Ok(if up >= self.want {
///                 Transition::next(next)
///             } else {
///                 Transition::wait(Duration::from_secs(5))
///             })
///         })
///     }
/// }
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let settled = Harness::<Cluster>::new(3, AtomicU32::new(0)).run_until_settled().await.unwrap();
/// assert_eq!(settled.path(), ["Scaling", "Running"]);
/// assert_eq!(settled.elapsed, Duration::from_secs(10));
/// # });
/// ```
#[diagnostic::on_unimplemented(
    message = "a state of `{S}` cannot converge `{Self}`",
    label = "this `converge` function does not return a value implementing `Converge<{S}>`",
    note = "`#[fsm(converge = desired_fn, next(State))]` calls `desired_fn(cx, /* the state's fields by reference */) -> Result<D, Error>` and converges `D`: with fsm-kube, return a `fsm_kube::dependents::DesiredSet`; else implement `fsm_core::Converge<{S}>` for `{Self}`"
)]
pub trait Converge<S: Fsm>: Send + Sync {
    /// One round of convergence in the step's state: `next` when
    /// everything is ready, a wait while something is pending, an error
    /// when something failed (see the trait's expected flow).
    ///
    /// # Errors
    /// Whatever failed, as the machine's error, which the engine retries
    /// or fails on as it does any handler's.
    fn converge_state<'a>(
        &'a self,
        cx: &'a mut Step<'_, S>,
        next: S,
    ) -> BoxFuture<'a, Result<Transition<S>, S::Error>>;
}
