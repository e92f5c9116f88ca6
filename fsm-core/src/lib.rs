//! The engine of operator-fsm.
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

mod classify;
mod clock;
mod diagram;
mod fsm;
mod machine;
mod random;
mod retry;
mod step;
mod transition;

pub mod prelude;

pub use classify::{Classify, ErrorClass};
pub use clock::{Clock, ManualClock, SystemClock, Timestamp};
pub use fsm::{BoxFuture, Fsm};
pub use machine::{Machine, MachineError, OnDelete, SpecChange, StateMeta};
pub use random::{RandomSource, SeededRandom};
pub use retry::{InvalidRetryPolicy, Jitter, RetryPolicy};
pub use step::{CheckpointError, Checkpointer, Step};
pub use transition::Transition;
