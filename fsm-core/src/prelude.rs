//! Everything a machine's author needs: `use fsm_core::prelude::*;`.

#[cfg(feature = "derive")]
pub use fsm_macros::OperatorFsm;
pub use serde::{Deserialize, Serialize};

pub use crate::{
    BoxFuture, Classify, Clock, Converge, ErrorClass, Fsm, Harness, Jitter, Machine, ManualClock,
    OnDelete, PublishError, RetryPolicy, SpecChange, StateMeta, Step, SystemClock, Timestamp,
    Transition,
};
