//! The build before: its resource is `v1alpha1`, the only version its CRD
//! has. Kept to show (and test) the upgrade from it; a real project has it
//! in its history, not beside the current build.

use std::time::Duration;

use kube::ResourceExt;
use operator_fsm::prelude::*;

use super::api::v1alpha1;
use super::backend::Backend;
use super::may_fill;
use super::state::Never;

/// The same workflow as [`BucketState`](super::BucketState), on
/// `v1alpha1` and without admission rules.
#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = v1alpha1::Bucket, context = Backend, error = Never)]
pub enum BucketState {
    /// Asks the service for the bucket.
    #[fsm(initial, handler = create, next(Filling))]
    Creating,
    /// Waits for the annotation.
    #[fsm(handler = fill, next(Serving))]
    Filling,
    /// Serving.
    #[fsm(ready, final)]
    Serving,
    /// Never entered.
    #[fsm(failed)]
    Failed,
}

async fn create(cx: &mut Step<'_, BucketState>) -> Result<Transition<BucketState>, Never> {
    cx.context().create(&cx.resource().name_any());
    Ok(Transition::next(BucketState::Filling))
}

async fn fill(cx: &mut Step<'_, BucketState>) -> Result<Transition<BucketState>, Never> {
    Ok(if may_fill(cx.resource().annotations()) {
        Transition::next(BucketState::Serving)
    } else {
        Transition::wait(Duration::from_millis(200))
    })
}
