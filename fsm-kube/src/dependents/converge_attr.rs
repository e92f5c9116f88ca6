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

use fsm_core::{BoxFuture, Converge, Fsm, Step, Transition};

use super::error::DependentsError;
use super::set::DesiredSet;
use super::step::converge_state;
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
