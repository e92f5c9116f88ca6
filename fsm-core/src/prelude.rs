//! Everything a machine's author needs: `use fsm_core::prelude::*;`.

#[cfg(feature = "derive")]
pub use fsm_macros::OperatorFsm;
pub use serde::{Deserialize, Serialize};

pub use crate::{
    classify::Classify, classify::ErrorClass, clock::Clock, clock::ManualClock, clock::SystemClock,
    clock::Timestamp, converge::Converge, fsm::BoxFuture, fsm::Fsm, harness::Harness,
    machine::Machine, machine::OnDelete, machine::SpecChange, machine::StateMeta, retry::Jitter,
    retry::RetryPolicy, step::PublishError, step::Step, transition::Transition, upgrade::Migrated,
    upgrade::MigrationError, upgrade::OldRecord,
};
