//! Kubernetes operators whose reconcile logic is a finite-state machine:
//! the one crate an operator depends on.
//!
//! It fronts the workspace's crates the way `kube` fronts kube-client,
//! kube-runtime and kube-derive:
//!
//! | path | what | from |
//! | --- | --- | --- |
//! | [`prelude`] | everything an operator's author needs, `use operator_fsm::prelude::*;` | |
//! | [`core`] | the engine: `Fsm`, `Transition`, retries, timeouts, compensation, `Harness`; no Kubernetes | `fsm-core` |
//! | [`derive`] | `#[derive(OperatorFsm)]` (also in the prelude) | `fsm-macros` |
//! | the root: [`FsmReconciler`], [`StatusStore`], [`leader`], [`metrics`], `cli` (feature `cli`, default), … | the kube-rs integration | `fsm-kube` |
//! | `testkit` (feature `testkit`) | the embedded API server, for tests | `fsm-testkit` |
//!
//! ```toml
//! [dependencies]
//! operator-fsm = "0.1"
//!
//! [dev-dependencies]
//! operator-fsm = { version = "0.1", features = ["testkit"] }
//! ```
//!
//! Its default feature `cli` brings the operator binary's command line, the
//! web view (`view`) and the `/metrics`, `/healthz` and `/readyz` server
//! (`http`). A program that embeds the reconciler in its own `Controller`
//! needs none of them and compiles no HTTP server or command-line parser:
//!
//! ```toml
//! [dependencies]
//! operator-fsm = { version = "0.1", default-features = false }
//! ```
//!
//! The derive finds the engine through this crate, so a manifest that names
//! only `operator-fsm` is enough:
//!
//! ```
//! use operator_fsm::prelude::*;
//! use kube::CustomResource;
//!
//! #[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
//! #[kube(group = "example.io", version = "v1", kind = "Database", namespaced, status = "DatabaseStatus")]
//! pub struct DatabaseSpec { pub size: u32 }
//!
//! #[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
//! pub struct DatabaseStatus { pub fsm: Option<FsmStatus> }
//!
//! #[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
//! #[fsm(resource = Database)]
//! pub enum DbState {
//!     #[fsm(initial, final, ready)]
//!     Ready,
//!     #[fsm(failed)]
//!     Failed,
//! }
//!
//! assert_eq!(DbState::machine().name(), "DbState");
//! ```
//!
//! The guide lives in the repository's `docs/`: a tutorial from an empty
//! crate to a tested operator, the attribute reference, the semantics,
//! stores, testing, observability and deploying.

#[cfg(doctest)]
mod guide;

pub use fsm_kube::*;

/// The engine (`fsm-core`): machines, transitions, records, the harness;
/// no Kubernetes dependency.
pub use fsm_core as core;

/// `#[derive(OperatorFsm)]` (`fsm-macros`).
pub mod derive {
    pub use fsm_macros::OperatorFsm;
}

/// The embedded, in-memory Kubernetes API server (`fsm-testkit`), for
/// integration tests: enable the `testkit` feature in `[dev-dependencies]`.
#[cfg(feature = "testkit")]
pub use fsm_testkit as testkit;
