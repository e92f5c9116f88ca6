//! Which API server a test talks to: the embedded one, always; a real
//! kube-apiserver too when [`REAL_APISERVER_ENV`] names its kubeconfig.
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

use std::fmt;
use std::path::{Path, PathBuf};

use fsm_testkit::ApiServer;

/// The environment variable naming the kubeconfig of a real kube-apiserver
/// (`scripts/real-apiserver/start` prints one). Unset or empty: only the
/// embedded server is used.
pub const REAL_APISERVER_ENV: &str = "FSM_REAL_APISERVER_KUBECONFIG";

/// Which kind of server a [`TestCluster`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `fsm_testkit::ApiServer`, in-process.
    Embedded,
    /// A real kube-apiserver reached through a kubeconfig.
    Real,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Embedded => "embedded",
            Self::Real => "real",
        })
    }
}

/// Errors of connecting to the real server.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The kubeconfig could not be read or understood.
    #[error("reading the kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The path from [`REAL_APISERVER_ENV`].
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// No client could be built from it.
    #[error("building a client: {0}")]
    Client(#[source] kube::Error),
}

/// An API server for a test, with a `kube::Client` for it.
#[derive(Clone)]
pub struct TestCluster {
    backend: Backend,
    client: kube::Client,
    embedded: Option<ApiServer>,
}

impl fmt::Debug for TestCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestCluster")
            .field("backend", &self.backend)
            .finish_non_exhaustive()
    }
}

impl TestCluster {
    /// A fresh embedded server.
    #[must_use]
    pub fn embedded() -> Self {
        let server = ApiServer::new();
        Self {
            backend: Backend::Embedded,
            client: server.client(),
            embedded: Some(server),
        }
    }

    /// The kubeconfig path from [`REAL_APISERVER_ENV`], if set and not empty.
    #[must_use]
    pub fn real_kubeconfig() -> Option<PathBuf> {
        std::env::var_os(REAL_APISERVER_ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    }

    /// The real server named by [`REAL_APISERVER_ENV`]; `None` when unset.
    ///
    /// # Errors
    /// [`ClusterError`] when the variable is set but no client can be made:
    /// a test asked to use the real server must not quietly skip it.
    pub async fn real() -> Result<Option<Self>, ClusterError> {
        match Self::real_kubeconfig() {
            None => Ok(None),
            Some(path) => Self::connect(&path).await.map(Some),
        }
    }

    /// The real server when [`REAL_APISERVER_ENV`] is set, else a fresh
    /// embedded one.
    ///
    /// # Errors
    /// As [`TestCluster::real`].
    pub async fn from_env() -> Result<Self, ClusterError> {
        Ok(Self::real().await?.unwrap_or_else(Self::embedded))
    }

    /// A real server through the kubeconfig at `path` (its current context).
    ///
    /// # Errors
    /// [`ClusterError`].
    pub async fn connect(path: &Path) -> Result<Self, ClusterError> {
        let err = |source| ClusterError::Kubeconfig {
            path: path.to_owned(),
            source,
        };
        let kubeconfig = kube::config::Kubeconfig::read_from(path).map_err(err)?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .map_err(err)?;
        let client = kube::Client::try_from(config).map_err(ClusterError::Client)?;
        Ok(Self {
            backend: Backend::Real,
            client,
            embedded: None,
        })
    }

    /// Which kind of server this is.
    #[must_use]
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// A client for it.
    #[must_use]
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The embedded server itself (its request log, its revision), if this
    /// is one.
    #[must_use]
    pub fn embedded_server(&self) -> Option<&ApiServer> {
        self.embedded.as_ref()
    }
}
