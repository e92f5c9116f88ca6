//! Which API server a test talks to: the embedded one, always; a real
//! kube-apiserver too when [`REAL_APISERVER_ENV`] names its kubeconfig.
//!
//! The switch lives in `fsm_testkit::TestCluster`, so that fsm-kube's and
//! the examples' integration tests use it too; it is re-exported here for
//! the conformance suite.
//!
//! ```no_run
//! # async fn demo() -> Result<(), integration_tests::ClusterError> {
//! use integration_tests::TestCluster;
//!
//! // The real server when FSM_REAL_APISERVER_KUBECONFIG is set, else the
//! // embedded one: for suites that should run against either.
//! let cluster = TestCluster::from_env().await?;
//! let client = cluster.client();
//! # let _ = client; Ok(()) }
//! ```

pub use fsm_testkit::{Backend, ClusterError, REAL_APISERVER_ENV, TestCluster};
