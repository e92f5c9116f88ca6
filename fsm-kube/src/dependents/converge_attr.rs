//! A [`DesiredSet`] is what a state declared
//! `#[fsm(converge = desired_fn, next(S))]` converges: `desired_fn` returns
//! the set, and the generated handler converges it with
//! [`converge_state`].
//!
//! ```no_run
//! use fsm_kube::prelude::*;
//! use fsm_kube::dependents::{Dependent, DependentsError, DesiredSet};
//! use k8s_openapi::api::core::v1::ConfigMap;
//!
//! #[derive(Debug, thiserror::Error)]
//! enum AppError {
//!     #[error(transparent)]
//!     Dependents(#[from] DependentsError),
//!     #[error(transparent)]
//!     Set(#[from] fsm_kube::dependents::SetError),
//! }
//! impl Classify for AppError {}
//!
//! #[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
//! #[fsm(resource = ConfigMap, error = AppError)]
//! enum App {
//!     #[fsm(initial, converge = desired, next(Running), timeout = "10m")]
//!     Deploying,
//!     #[fsm(ready, final)]
//!     Running,
//!     #[fsm(failed)]
//!     Failed,
//! }
//!
//! fn desired(cx: &Step<'_, App>) -> Result<DesiredSet, AppError> {
//!     let copy = ConfigMap { data: cx.resource().data.clone(), ..ConfigMap::default() };
//!     Ok(DesiredSet::builder().dependent(Dependent::new("copy", &copy)).build()?)
//! }
//! ```

use std::marker::PhantomData;

use fsm_core::{BoxFuture, Converge, Fsm, Step, Transition};

use super::error::DependentsError;
use super::report::Convergence;
use super::set::DesiredSet;
use super::step::{converge_state, converge_then};
use crate::KubeResource;

/// [`converge_state`]: the state moves to `next` once every active
/// dependent is ready, waits the runtime's `pending_requeue` while some
/// are pending, and fails with [`DependentsError::Failed`] (retried under
/// the state's policy) when one failed.
///
/// # Errors
/// As [`converge_state`], converted into the machine's error.
impl<S: Fsm> Converge<S> for DesiredSet
where
    S::Resource: KubeResource,
    S::Error: From<DependentsError>,
{
    fn converge_state<'a>(
        &'a self,
        cx: &'a mut Step<'_, S>,
        next: S,
    ) -> BoxFuture<'a, Result<Transition<S>, S::Error>> {
        let converging = converge_state(cx, self, next);
        Box::pin(async move { converging.await.map_err(S::Error::from) })
    }
}

/// A [`DesiredSet`] whose converge state hands on what it converged: the
/// next state is built from the [`Convergence`] once every dependent is
/// ready ([`DesiredSet::then`]).
pub struct ConvergeThen<S, F, E> {
    set: DesiredSet,
    build: F,
    _state: PhantomData<fn() -> (S, E)>,
}

impl<S, F, E> std::fmt::Debug for ConvergeThen<S, F, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConvergeThen")
            .field("set", &self.set)
            .finish_non_exhaustive()
    }
}

impl DesiredSet {
    /// This set, converged by a `#[fsm(converge = desired_fn, next(S))]`
    /// state that enters `S` built by `build` from the [`Convergence`]
    /// (live objects included: [`Convergence::live`]) instead of with
    /// `S`'s `Default` fields. `build` runs once every active dependent is
    /// ready; the state it builds must be the variant `next(..)` declares
    /// (else the step fails with [`DependentsError::WrongNext`], a
    /// permanent error), which stays what the diagram and the validation
    /// see. An error of `build` (a [`LiveError`](super::LiveError) from
    /// `done.live(..)?`) is the step's error.
    ///
    /// ```no_run
    /// use fsm_kube::prelude::*;
    /// use fsm_kube::dependents::{Convergence, Dependent, DependentsError, DesiredSet, LiveError, SetError};
    /// use k8s_openapi::api::core::v1::{ConfigMap, Service};
    ///
    /// #[derive(Debug, thiserror::Error)]
    /// enum AppError {
    ///     #[error(transparent)] Dependents(#[from] DependentsError),
    ///     #[error(transparent)] Set(#[from] SetError),
    ///     #[error(transparent)] Live(#[from] LiveError),
    /// }
    /// impl Classify for AppError {}
    ///
    /// #[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
    /// #[fsm(resource = ConfigMap, error = AppError)]
    /// enum App {
    ///     #[fsm(initial, converge = desired, next(Running))]
    ///     Deploying,
    ///     #[fsm(ready, final)]
    ///     Running { ip: String },
    ///     #[fsm(failed)]
    ///     Failed,
    /// }
    ///
    /// fn desired(_: &Step<'_, App>) -> Result<impl Converge<App> + use<>, AppError> {
    ///     let service = Service { metadata: kube::api::ObjectMeta { name: Some("web".into()), ..Default::default() }, ..Default::default() };
    ///     let set = DesiredSet::builder().dependent(Dependent::new("web", &service)).build()?;
    ///     Ok(set.then(|done: &Convergence| {
    ///         let service: Service = done.live("web")?;
    ///         Ok::<_, LiveError>(App::Running { ip: service.spec.and_then(|s| s.cluster_ip).unwrap_or_default() })
    ///     }))
    /// }
    /// ```
    pub fn then<S, F, E>(self, build: F) -> ConvergeThen<S, F, E>
    where
        F: Fn(&Convergence) -> Result<S, E>,
    {
        ConvergeThen {
            set: self,
            build,
            _state: PhantomData,
        }
    }
}

/// [`DesiredSet`]'s converge, entering the state `build` makes.
///
/// # Errors
/// As [`converge_state`]; [`DependentsError::WrongNext`] when `build`
/// makes another variant than `next`; `build`'s error.
impl<S: Fsm, F, E> Converge<S> for ConvergeThen<S, F, E>
where
    S::Resource: KubeResource,
    S::Error: From<DependentsError> + From<E>,
    F: Fn(&Convergence) -> Result<S, E> + Send + Sync,
{
    fn converge_state<'a>(
        &'a self,
        cx: &'a mut Step<'_, S>,
        next: S,
    ) -> BoxFuture<'a, Result<Transition<S>, S::Error>> {
        let declared = next.state_name();
        Box::pin(converge_then(cx, &self.set, move |done| {
            let built = (self.build)(done).map_err(S::Error::from)?;
            if built.state_name() == declared {
                Ok(built)
            } else {
                Err(S::Error::from(DependentsError::WrongNext {
                    declared,
                    built: built.state_name(),
                }))
            }
        }))
    }
}
