//! The machine of the current build: its resource is `v1`, and its ready
//! state declares what may not happen to a bucket that serves.

use std::time::Duration;

use kube::ResourceExt;
use operator_fsm::prelude::*;

use super::api::v1;
use super::backend::Backend;
use super::may_fill;

/// Never fails: the fake service always answers.
#[derive(Debug, thiserror::Error)]
#[error("never")]
pub struct Never;
impl Classify for Never {}

/// A bucket: made, filled (once a person says so), then serving.
#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = v1::Bucket, context = Backend, error = Never)]
pub enum BucketState {
    /// Asks the service for the bucket.
    #[fsm(initial, handler = create, next(Filling))]
    Creating,
    /// Waits for the annotation [`GO_ANNOTATION`](super::GO_ANNOTATION).
    #[fsm(handler = fill, next(Serving))]
    Filling,
    /// Serving: its region may not change, its size may only grow, and it
    /// may not be deleted (the admission webhook refuses all three).
    #[fsm(
        ready,
        final,
        immutable("spec.region"),
        grow_only("spec.storageGi"),
        refuse_delete
    )]
    Serving,
    /// Never entered by this machine's handlers.
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
