//! The Integration's phases as a state machine.

use fsm_kube::prelude::*;

use super::handlers::{build_kit, deploy, initialize, monitor};
use super::{Integration, IntegrationContext, IntegrationError};

/// The phase of one Integration, as Camel K names them.
///
/// ```mermaid
/// stateDiagram-v2
///     [*] --> Initialization
///     Initialization --> BuildingKit
///     BuildingKit --> Deploying
///     Deploying --> Running
///     Running --> Deploying
///     Error --> [*]
/// ```
///
/// The kit build is tried three times (a new build Job each attempt) before
/// the integration rests in `Error`. Any change of the spec restarts the
/// workflow from `Initialization` (`on_spec_change = restart`), which
/// computes the kit's digest from the spec the workflow started from
/// (`snapshot_spec`): a digest already built is reused, a new one is built.
#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = Integration, context = IntegrationContext, error = IntegrationError)]
#[fsm(on_spec_change = restart, snapshot_spec)]
#[fsm(retry(max_attempts = 5, initial = "200ms", factor = 2.0, max = "10s"))]
pub enum IntegrationPhase {
    /// Compute the kit's digest.
    #[fsm(initial, handler = initialize, next(BuildingKit))]
    Initialization,
    /// Build (or reuse) the kit of `digest`.
    #[fsm(
        handler = build_kit,
        retry(max_attempts = 3, initial = "300ms", factor = 2.0, max = "5s"),
        on_exhausted = Error,
        timeout = "10m",
        on_timeout = Error,
        next(Deploying)
    )]
    BuildingKit {
        /// The kit's digest.
        digest: String,
    },
    /// Roll the integration out with the kit's image.
    #[fsm(handler = deploy, next(Running))]
    Deploying {
        /// The kit's digest.
        digest: String,
    },
    /// Running; redeployed if its Deployment drifts.
    #[fsm(ready, handler = monitor, next(Deploying))]
    Running {
        /// The kit's digest.
        digest: String,
    },
    /// The kit could not be built.
    #[fsm(failed)]
    Error,
}
