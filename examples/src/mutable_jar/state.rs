//! The augmentation workflow as a state machine.

use fsm_kube::prelude::*;

use super::handlers::{cancel_build, check_drift, roll_out, start_augmentation, watch_build};
use super::{JarContext, JarError, Keycloak};

/// Where one Keycloak's augmentation stands.
///
/// ```mermaid
/// stateDiagram-v2
///     [*] --> Unknown
///     Unknown --> AugmentationStarted
///     AugmentationStarted --> AugmentationFinished
///     AugmentationStarted --> Unknown
///     AugmentationFinished --> Done
///     Done --> Unknown
///     Error --> [*]
/// ```
///
/// `AugmentationStarted` has five minutes to finish its build; a stuck
/// build is cancelled (its Job deleted) and the workflow rests in `Error`.
/// From `Done`, a Deployment that no longer runs the augmented image sends
/// the machine back to `Unknown`, which rebuilds (or reuses) the image and
/// rolls it out again.
#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = Keycloak, context = JarContext, error = JarError)]
#[fsm(retry(max_attempts = 5, initial = "200ms", factor = 2.0, max = "10s"))]
pub enum JarState {
    /// Nothing known yet: plan the build for the current spec and start its
    /// Job.
    #[fsm(initial, handler = start_augmentation, next(AugmentationStarted))]
    Unknown,
    /// The build Job runs.
    #[fsm(
        handler = watch_build,
        timeout = "5m",
        on_timeout = Error,
        compensate = cancel_build,
        next(AugmentationFinished, Unknown)
    )]
    AugmentationStarted {
        /// The build Job.
        job: String,
        /// The image it pushes.
        image: String,
    },
    /// The image exists: roll the Deployment out with it.
    #[fsm(handler = roll_out, next(Done))]
    AugmentationFinished {
        /// The augmented image.
        image: String,
    },
    /// Rolled out; watching for drift.
    #[fsm(ready, handler = check_drift, next(Unknown))]
    Done {
        /// The image the Deployment must run.
        image: String,
    },
    /// The build failed or timed out.
    #[fsm(failed)]
    Error,
}
