//! Admission derived from the machine: the validating webhook that
//! refuses writes a state forbids, with no hand-written webhook.
//!
//! A state declares what may not happen while an object is in it:
//!
//! ```text
//! #[fsm(ready, handler = watch, immutable("spec.engine"), grow_only("spec.storageGi"), refuse_delete)]
//! Serving,
//! ```
//!
//! and [`Admission`](crate::Admission) answers the API server's `AdmissionReview`s for the
//! resource: a change of `spec.engine` or a smaller `spec.storageGi` while
//! `Serving` is refused (422 Invalid), as is deleting the object then (403
//! Forbidden); in every state, `.status.fsm` (the machine's record) is
//! written by the operator only (403). The state is read from the
//! object's record as the operator keeps it. [`judge_admission`](crate::judge_admission) is the decision
//! alone, without I/O.

mod amount;
mod configuration;
mod policy;
mod review;
#[cfg(feature = "http")]
mod route;
mod rules;

pub use configuration::{AdmissionClient, VALIDATE_PATH, validating_webhook_configuration};
pub use policy::admission_policy;
pub use review::Admission;
#[cfg(feature = "http")]
pub use route::admission_router;
pub use rules::{AdmissionChange, AdmissionOperation, AdmissionRefusal, judge_admission};
