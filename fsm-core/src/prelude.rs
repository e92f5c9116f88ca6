//! Everything a machine's author needs: `use fsm_core::prelude::*;`.

#[cfg(feature = "derive")]
pub use fsm_macros::OperatorFsm;
pub use serde::{Deserialize, Serialize};

pub use crate::{
    classify::Classify, classify::ErrorClass, clock::Clock, clock::ManualClock, clock::SystemClock,
    clock::Timestamp, converge::Converge, fsm::Fsm, fsm::PublishError, fsm::Step,
    future::BoxFuture, harness::Harness, machine::Machine, machine::OnDelete, machine::SpecChange,
    machine::StateMeta, migration::Migrated, migration::MigrationError, migration::OldRecord,
    retry::Jitter, retry::RetryPolicy, transition::Transition,
};
