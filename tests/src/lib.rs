//! Cross-crate integration tests of operator-fsm live in `tests/tests/`.
//!
//! This library holds what those tests share:
//!
//! - [`cluster`]: the switch between the embedded API server
//!   (`fsm_testkit::ApiServer`) and a real kube-apiserver named by the
//!   [`cluster::REAL_APISERVER_ENV`] environment variable (a kubeconfig
//!   path, as written by `scripts/real-apiserver/start`);
//! - [`observe`]: the normalisation that makes two servers' answers
//!   comparable (uids, timestamps, resourceVersions, managedFields, names
//!   generated per run);
//! - [`scene`]: one differential scenario's workspace on one server (its
//!   own namespace and CRD group), the raw-request helpers, and
//!   [`scene::run_differential`], which runs a scenario on both servers and
//!   compares what each observed;
//! - [`sharding`]: the sharding proof's operator, ledger, checks and
//!   harness (`tests/sharding_proof.rs`, the `shard-bench` binary).

pub mod cluster;
pub mod observe;
pub mod scene;
pub mod sharding;
pub mod webhook;

pub use cluster::{Backend, ClusterError, REAL_APISERVER_ENV, TestCluster};
pub use observe::{Observations, normalize};
pub use scene::{Fallible, Reply, Scene, run_differential};
