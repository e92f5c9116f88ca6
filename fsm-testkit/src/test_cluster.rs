//! Which API server a test talks to: a fresh embedded [`ApiServer`], or a
//! real kube-apiserver when [`REAL_APISERVER_ENV`] names its kubeconfig.
//!
//! A suite written against [`TestCluster`] runs on either: in a namespace of
//! its own ([`TestCluster::create_namespace`]), with its CRDs installed and
//! established ([`TestCluster::install_crd`]). Checks that need what only
//! the embedded server has (its request log, faults, its clock, simulation)
//! reach it through [`TestCluster::embedded_server`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), fsm_testkit::ClusterError> {
//! use fsm_testkit::TestCluster;
//!
//! // The real server when FSM_REAL_APISERVER_KUBECONFIG is set, else a
//! // fresh embedded one.
//! let cluster = TestCluster::from_env().await?;
//! let ns = cluster.create_namespace("widgets").await?;
//! let client = cluster.client();
//! # let _ = (client, ns); Ok(()) }
//! ```

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, ObjectMeta, PostParams};

use crate::server::ApiServer;

/// The environment variable naming the kubeconfig of a real kube-apiserver
/// (`scripts/real-apiserver/start` prints one). Unset or empty: only the
/// embedded server is used.
pub const REAL_APISERVER_ENV: &str = "FSM_REAL_APISERVER_KUBECONFIG";

/// How long [`TestCluster::install_crd`] waits for a CRD to be served.
const CRD_DEADLINE: Duration = Duration::from_secs(30);

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

/// Errors of connecting to a server or preparing it for a test.
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
    /// The server refused a request made to prepare the test.
    #[error("{what}: {source}")]
    Api {
        /// What was being done.
        what: String,
        /// The server's answer.
        #[source]
        source: kube::Error,
    },
    /// The server did not get there in time.
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long it was awaited.
        after: Duration,
    },
}

/// An API server for a test, with a `kube::Client` for it.
#[derive(Clone)]
pub struct TestCluster {
    backend: Backend,
    client: kube::Client,
    embedded: Option<ApiServer>,
    kubeconfig: Option<PathBuf>,
}

impl fmt::Debug for TestCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestCluster")
            .field("backend", &self.backend)
            .field("kubeconfig", &self.kubeconfig)
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
            kubeconfig: None,
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
            kubeconfig: Some(path.to_owned()),
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

    /// The embedded server itself (its request log, faults, clock), if this
    /// is one.
    #[must_use]
    pub fn embedded_server(&self) -> Option<&ApiServer> {
        self.embedded.as_ref()
    }

    /// The real server's kubeconfig, if this is one.
    #[must_use]
    pub fn kubeconfig(&self) -> Option<&Path> {
        self.kubeconfig.as_deref()
    }

    /// Creates a namespace named `prefix-` and a suffix the server
    /// generates, and returns its name: tests sharing a real server never
    /// meet each other's objects.
    ///
    /// # Errors
    /// [`ClusterError::Api`] when the server refuses.
    pub async fn create_namespace(&self, prefix: &str) -> Result<String, ClusterError> {
        let api: Api<Namespace> = Api::all(self.client());
        let namespace = Namespace {
            metadata: ObjectMeta {
                generate_name: Some(format!("{}-", prefix.trim_end_matches('-'))),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        let created = api
            .create(&PostParams::default(), &namespace)
            .await
            .map_err(|source| ClusterError::Api {
                what: format!("creating a namespace {prefix}-…"),
                source,
            })?;
        Ok(created.name_any())
    }

    /// Installs `crd` (replacing the spec of an existing definition of the
    /// same name, as another test may have installed it first) and waits
    /// until it is `Established` and its resource answers a list.
    ///
    /// # Errors
    /// [`ClusterError::Api`] when the server refuses the CRD,
    /// [`ClusterError::Timeout`] when it is not served within 30 s.
    pub async fn install_crd(&self, crd: &CustomResourceDefinition) -> Result<(), ClusterError> {
        let name = crd.name_any();
        let api: Api<CustomResourceDefinition> = Api::all(self.client());
        let refused = |source| ClusterError::Api {
            what: format!("installing the CRD {name}"),
            source,
        };
        let deadline = tokio::time::Instant::now() + CRD_DEADLINE;
        // Tests running side by side install the same CRDs, and the server's
        // own controllers update a CRD's status meanwhile: a replace that
        // lost such a race (409) reads the CRD again and tries once more.
        loop {
            let replaced = match api.create(&PostParams::default(), crd).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(status)) if status.is_already_exists() => {
                    let mut current = api.get(&name).await.map_err(refused)?;
                    if current.spec == crd.spec {
                        Ok(())
                    } else {
                        current.spec = crd.spec.clone();
                        api.replace(&name, &PostParams::default(), &current)
                            .await
                            .map(drop)
                    }
                }
                Err(e) => Err(e),
            };
            match replaced {
                Ok(()) => break,
                Err(kube::Error::Api(status))
                    if status.is_conflict() && tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => return Err(refused(e)),
            }
        }
        let served =
            Self::served_resource(crd).map(|ar| Api::<DynamicObject>::all_with(self.client(), &ar));
        loop {
            let established = api.get(&name).await.ok().is_some_and(|c| {
                c.status
                    .and_then(|s| s.conditions)
                    .into_iter()
                    .flatten()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            });
            let listed = match &served {
                Some(list) => list.list(&ListParams::default().limit(1)).await.is_ok(),
                None => true,
            };
            if established && listed {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(ClusterError::Timeout {
                    what: format!("the CRD {name} to be established and served"),
                    after: CRD_DEADLINE,
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The resource of `crd`'s storage version (else its first served one).
    fn served_resource(crd: &CustomResourceDefinition) -> Option<ApiResource> {
        let spec = &crd.spec;
        let version = spec
            .versions
            .iter()
            .find(|v| v.storage)
            .or_else(|| spec.versions.iter().find(|v| v.served))?;
        Some(ApiResource {
            group: spec.group.clone(),
            version: version.name.clone(),
            api_version: format!("{}/{}", spec.group, version.name),
            kind: spec.names.kind.clone(),
            plural: spec.names.plural.clone(),
        })
    }
}
