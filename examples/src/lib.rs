//! Example operators written with operator-fsm, and the main demo.
//!
//! - [`mutable_jar`]: a Keycloak whose image is augmented by a build Job
//!   before a Deployment rolls it out; a timeout on the build, drift
//!   detection.
//! - [`integration`]: Apache Camel K's Integration phases; a kit build
//!   retried up to a limit, a rebuild when the spec's digest changes.
//! - [`database`]: provisioning through an external, non-idempotent HTTP
//!   API; a checkpointed request id, a state timeout, compensation, and the
//!   credentials in the Secret store.
//! - [`webpage`]: java-operator-sdk's WebPage sample with dependent
//!   resources, without a machine and with one that smoke-tests each
//!   version of the page.
//! - [`shop`]: an object that lives for months: upgraded version after
//!   version, each upgrade a small saga whose failure undoes only itself;
//!   approvals by signal, pause, resume and retry by command, and a ready
//!   state that reports `degraded` instead of failing.
//! - [`demo`]: runs the five above against the embedded API server
//!   (`cargo run -p examples --bin demo`).
//! - [`bucket`]: an API that evolves with objects in flight: `v1alpha1`
//!   to `v1` through a conversion webhook, admission rules derived from
//!   the machine, `migrate-storage` (not in the demo: its story is an
//!   upgrade, which its test, `tests/it/bucket.rs`, runs).
//!
//! The embedded server runs no controllers: `operator_fsm::testkit::simulation`
//! stands in for kube-controller-manager there (Jobs finish, Deployments
//! roll out).
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

pub mod bucket;
pub mod database;
pub mod demo;
pub mod integration;
pub mod mutable_jar;
pub mod shop;
pub mod support;
#[cfg(test)]
mod testing;
pub mod webpage;
