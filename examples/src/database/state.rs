//! The provisioning workflow as a state machine.

use fsm_kube::prelude::*;

use super::handlers::{
    check_instance, delete_instance, provision, publish_credentials, release_request, seed,
    validate, wait_ready,
};
use super::{Database, DbContext, DbError};

/// Where one database's provisioning stands.
///
/// ```mermaid
/// stateDiagram-v2
///     [*] --> Pending
///     Pending --> Provisioning
///     Provisioning --> WaitingReady
///     WaitingReady --> Seeding
///     Seeding --> Credentials
///     Credentials --> Ready
///     Ready --> Pending
///     Failed --> [*]
/// ```
///
/// # The non-idempotent create
/// `Provisioning` first checkpoints a request id into its own data, then
/// calls the create with it. A retry (after an error, or after a crash that
/// lost the answer) finds the id in the record and asks the API which
/// instance that request created before creating anything: each database
/// is paid for once.
///
/// # Failure
/// An instance gets two minutes to become available. A seed the API
/// rejects fails the workflow: the compensations run in reverse order of
/// entry, deleting the instance (`WaitingReady`) and anything the request
/// created (`Provisioning`), and the machine rests in `Failed`. Deleting
/// the `Database` runs the same chain (`on_delete = compensate`).
///
/// `Credentials` holds the password: it is `sensitive` (never logged nor
/// put in events) and the operator keeps its records in Secrets.
#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = Database, context = DbContext, error = DbError, on_delete = compensate)]
#[fsm(retry(max_attempts = 10, initial = "100ms", factor = 2.0, max = "2s"))]
pub enum DbState {
    /// Check the spec against what the cloud offers.
    #[fsm(initial, handler = validate, next(Provisioning))]
    Pending,
    /// Create the instance, at most once.
    #[fsm(handler = provision, compensate = release_request, next(WaitingReady))]
    Provisioning {
        /// The create's request id, checkpointed before the call.
        request_id: Option<String>,
    },
    /// Wait until the instance is available.
    #[fsm(
        handler = wait_ready,
        timeout = "2m",
        on_timeout = Failed,
        compensate = delete_instance,
        next(Seeding)
    )]
    WaitingReady {
        /// The instance.
        instance_id: String,
    },
    /// Run the seed SQL, then issue credentials.
    #[fsm(handler = seed, next(Credentials))]
    Seeding {
        /// The instance.
        instance_id: String,
    },
    /// Publish the credentials in the connection Secret.
    #[fsm(handler = publish_credentials, sensitive, next(Ready))]
    Credentials {
        /// The instance.
        instance_id: String,
        /// The user name.
        username: String,
        /// The password.
        password: String,
    },
    /// Available; provisioned again if the instance disappears.
    #[fsm(ready, handler = check_instance, next(Pending))]
    Ready {
        /// The instance.
        instance_id: String,
    },
    /// Provisioning failed; whatever was created was deleted.
    #[fsm(failed)]
    Failed,
}
