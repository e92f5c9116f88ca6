//! The engine of operator-fsm.
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

mod classify;
mod clock;
mod diagram;
mod engine;
mod fsm;
mod harness;
mod machine;
mod memory;
mod random;
mod record;
mod retry;
mod step;
mod store;
mod transition;

pub mod prelude;

pub use classify::{Classify, ErrorClass};
pub use clock::{Clock, ManualClock, SystemClock, Timestamp};
pub use engine::{
    DecideError, Decider, Decision, Effect, Engine, EngineOptions, InvalidMachine, Observed,
    Outcome, Plan, ReconcileError, Report, StepResult, plan,
};
pub use fsm::{BoxFuture, Fsm};
pub use harness::{HARNESS_EPOCH, Harness, HarnessError, Settled};
pub use machine::{Machine, MachineError, OnDelete, SpecChange, StateMeta};
pub use memory::EphemeralStore;
pub use random::{RandomSource, SeededRandom};
pub use record::{
    DEFAULT_HISTORY_LIMIT, DecodeError, HistoryEntry, MAX_TRAIL, RawRecord, SCHEMA_VERSION,
    StateRecord, StepFailure, TrailEntry, Unwind,
};
pub use retry::{InvalidRetryPolicy, Jitter, RetryPolicy};
pub use step::{CheckpointError, Checkpointer, Step};
pub use store::{Loaded, ObjectKey, StateStore, StoreError, Version};
pub use transition::Transition;
