//! The sharding proof and benchmark (issue 22): replicas of a real
//! operator process (`shard-operator`, built with `fsm_kube::cli::Operator`)
//! sharing 5-step workflows over the embedded API server, scaled up and
//! down, killed, and checked.
//!
//! - [`machine`]: the `Order` resource and its five-step machine, whose
//!   `Charging` step makes a non-idempotent call guarded by a checkpointed
//!   request id;
//! - [`ledger`]: the harness's HTTP ledger of handler intervals and
//!   charges, and the handlers' client of it;
//! - [`checks`]: the pure checks of a run's records (overlapping handling,
//!   charges, histories, status writes, shares);
//! - [`harness`]: the server, the replica processes and their figures.

pub mod checks;
pub mod harness;
pub mod ledger;
pub mod machine;
