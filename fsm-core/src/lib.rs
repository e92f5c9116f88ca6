//! The engine of operator-fsm: reconcile logic as a finite-state machine,
//! with per-state retries, timeouts and compensation, and no Kubernetes
//! dependency.
//!
//! A machine is an enum whose variants are its states. It implements
//! [`Fsm`] — with `#[derive(OperatorFsm)]`, or by hand as below — and an
//! [`Engine`] drives it one transition per reconcile, keeping its
//! [`StateRecord`] in a [`StateStore`]. The `fsm-kube` crate embeds the
//! engine in a `kube::runtime::Controller`; this crate alone is enough to
//! write and test a machine.
//!
//! # Concepts
//! - [`Fsm`], [`Machine`], [`StateMeta`]: the machine and its static
//!   description (initial, ready, failed and final states, allowed targets,
//!   [`RetryPolicy`], timeouts, compensation).
//! - [`Step`]: what a handler is given; [`Transition`]: what it returns;
//!   [`Classify`]: whether its errors are retried; [`Converge`]: what a
//!   state declared with `converge = desired_fn` brings to its desired
//!   shape before it moves on.
//! - [`Engine::reconcile`]: one reconcile, in three phases: plan what
//!   runs (pure), run it, apply the decision (pure until the commit).
//! - [`RawRecord::upgrade`], [`RecordCompatibility`], [`Fsm::migrate`]:
//!   records written by another build of the machine (renamed states,
//!   older versions, newer ones left alone; `docs/upgrading.md`).
//! - [`Harness`]: one handler alone, a workflow one reconcile at a time,
//!   or a whole workflow to rest, in memory on a virtual clock.
//!
//! # Example
//! A machine written by hand, driven to rest by the harness:
//!
//! ```
//! use fsm_core::prelude::*;
//!
//! #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
//! enum Order { Placed, Paid { receipt: String }, Shipped, Cancelled }
//!
//! #[derive(Debug, thiserror::Error)]
//! #[error("payment declined")]
//! struct Declined;
//! impl Classify for Declined {
//!     fn class(&self) -> ErrorClass { ErrorClass::Permanent }
//! }
//!
//! static STATES: [StateMeta; 4] = [
//!     StateMeta::new("Placed").initial().with_handler().next(&["Paid"]),
//!     StateMeta::new("Paid").with_handler().with_data().with_compensation().next(&["Shipped"]),
//!     StateMeta::new("Shipped").final_state().ready(),
//!     StateMeta::new("Cancelled").failed(),
//! ];
//! static MACHINE: Machine = Machine::new("Order", &STATES);
//!
//! impl Fsm for Order {
//!     type Resource = u32; // the amount
//!     type Context = ();
//!     type Error = Declined;
//!
//!     fn machine() -> &'static Machine { &MACHINE }
//!     fn state_name(&self) -> &'static str {
//!         match self {
//!             Order::Placed => "Placed",
//!             Order::Paid { .. } => "Paid",
//!             Order::Shipped => "Shipped",
//!             Order::Cancelled => "Cancelled",
//!         }
//!     }
//!     fn unit_state(name: &str) -> Option<Self> {
//!         match name {
//!             "Placed" => Some(Order::Placed),
//!             "Shipped" => Some(Order::Shipped),
//!             "Cancelled" => Some(Order::Cancelled),
//!             _ => None,
//!         }
//!     }
//!     fn handle<'a>(&'a self, cx: &'a mut Step<'_, Self>)
//!         -> BoxFuture<'a, Result<Transition<Self>, Declined>> {
//!         Box::pin(async move {
//!             match self {
//!                 Order::Placed if *cx.resource() > 1000 => Err(Declined),
//!                 Order::Placed => Ok(Transition::next(Order::Paid { receipt: "r-1".into() })),
//!                 Order::Paid { .. } => Ok(Transition::next(Order::Shipped)),
//!                 _ => Ok(Transition::stay()),
//!             }
//!         })
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let shipped = Harness::<Order>::new(20, ()).run_until_settled().await.unwrap();
//! assert_eq!(shipped.path(), ["Placed", "Paid", "Shipped"]);
//!
//! let declined = Harness::<Order>::new(5000, ()).run_until_settled().await.unwrap();
//! assert_eq!(declined.state, Order::Cancelled);
//! assert_eq!(declined.record.last_error.as_deref(), Some("payment declined"));
//! # });
//! ```
//!
//! # With the derive
//! `#[derive(OperatorFsm)]` writes the `Fsm` impl and the `Machine` table
//! from attributes on the variants (fsm-macros' documentation lists them):
//!
//! ```
//! use fsm_core::prelude::*;
//!
//! #[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
//! #[fsm(resource = String)]
//! enum Job {
//!     #[fsm(initial, handler = start, next(Done))]
//!     Pending,
//!     #[fsm(final, ready)]
//!     Done,
//!     #[fsm(failed)]
//!     Failed,
//! }
//!
//! async fn start(_cx: &mut Step<'_, Job>) -> Result<Transition<Job>, std::convert::Infallible> {
//!     Ok(Transition::next(Job::Done))
//! }
//!
//! assert_eq!(Job::machine().validate(), Ok(()));
//! assert_eq!(Job::mermaid(), Job::MERMAID);
//! ```
//!
//! The full contract (what runs in which order, what is committed when,
//! at-least-once handlers and at-most-once transitions) is in
//! `docs/semantics.md` and on [`Engine`].
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

// Lets `#[derive(OperatorFsm)]` name this crate `::fsm_core` from inside it.
extern crate self as fsm_core;

mod authority;
mod classify;
mod clock;
mod command;
mod converge;
mod diagram;
mod engine;
mod extensions;
mod fsm;
mod future;
mod graph;
mod harness;
mod layout;
mod machine;
mod machine_graph;
mod memory;
mod migration;
mod parts;
mod random;
mod record;
mod refuse;
mod retry;
mod store;
mod timeline;
mod transition;
mod upgrade;

pub mod prelude;
pub mod text;

#[doc(hidden)]
#[path = "derive_support.rs"]
pub mod __derive;

pub use authority::{Authority, AuthorityLost};
pub use classify::{Classify, ErrorClass};
pub use clock::{Clock, ManualClock, SystemClock, Timestamp};
pub use command::{
    COMMAND_LOG_LIMIT, Command, CommandAction, CommandEntry, CommandListError, Degraded,
    MAX_PENDING_COMMANDS, Pause,
};
pub use converge::Converge;
pub use engine::{
    DecideError, Effect, Engine, EngineOptions, InvalidMachine, Observed, ReconcileError, Report,
};
pub use extensions::Extensions;
pub use fsm::{
    CheckpointError, Checkpointer, Fsm, PublishError, RESERVED_STATUS_FIELDS, StatusFields, Step,
    StoredState,
};
#[cfg(feature = "derive")]
pub use fsm_macros::OperatorFsm;
pub use future::BoxFuture;
pub use harness::{
    DEFAULT_IDLE_AFTER, HARNESS_EPOCH, Harness, HarnessError, RunHandlerError, Settled,
};
pub use machine::{FailedSpecChange, Machine, MachineError, OnDelete, SpecChange, StateMeta};
pub use machine_graph::{GraphEdge, GraphState, MachineGraph};
pub use memory::EphemeralStore;
pub use migration::{Migrated, MigrationError, OldRecord};
pub use random::{RandomSource, SeededRandom};
pub use record::{
    DEFAULT_HISTORY_LIMIT, DecodeError, DecodedRecord, HistoryEntry, MAX_TRAIL, RawRecord,
    SCHEMA_VERSION, StateRecord, TrailEntry, Unwind, UnwindFailure,
};
pub use retry::{InvalidRetryPolicy, Jitter, RetryPolicy};
pub use store::{Commit, Loaded, ObjectKey, StateStore, StoreError, Version};
pub use timeline::{Compensation, Mark, MarkKind, Stay, Timeline};
pub use transition::Transition;
pub use upgrade::{RecordCompatibility, Upgraded};

/// The engine's pure decision (the plan, the decider and what it decides),
/// for this crate's benchmarks; not part of the API, and it may change in
/// any release. [`Engine::reconcile`] is the way to drive a machine.
#[doc(hidden)]
pub mod __internals {
    pub use crate::engine::{Decider, Decision, Outcome, Plan, Then, UnwindResult, plan};
}

/// What the derive's expansion uses; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use crate::fsm::InitialField;
}
