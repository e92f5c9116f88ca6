//! The server: the handle tests hold, the in-process `kube::Client`, and
//! serving over HTTP on loopback with a kubeconfig.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, MutexGuard};

use tokio::task::JoinHandle;

use crate::cluster::Cluster;
use crate::faults::Faults;
use crate::handlers;
use crate::kubeconfig;
use crate::log::RequestLog;
use crate::simulation::{self, Simulation, SimulationConfig};
use crate::state::{ServerConfig, Shared};

/// An in-memory Kubernetes API server.
///
/// # Expected flow
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use fsm_testkit::ApiServer;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::api::{Api, PostParams};
///
/// let server = ApiServer::new();
/// let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
/// let mut cm = ConfigMap::default();
/// cm.metadata.name = Some("settings".into());
/// cms.create(&PostParams::default(), &cm).await?;
/// assert_eq!(server.request_log().count("create", "configmaps"), 1);
///
/// // The same server for kubectl:
/// let http = server.serve_http().await?;
/// println!("KUBECONFIG={}", http.kubeconfig().display());
/// # Ok(()) }
/// ```
///
/// # Guarantees
/// Each request is atomic; `resourceVersion`s increase by one per change,
/// across all resources; a watch sees every change after its starting
/// version exactly once, in order, or `410 Expired`.
///
/// # Caveats
/// No authentication; conversion webhooks and admission webhooks are
/// called as 1.20 calls them (see the crate docs for what they, schema
/// validation, garbage collection and patches cover).
/// Core `v1` and `events.k8s.io/v1` Events are stored separately.
#[derive(Debug, Clone)]
pub struct ApiServer {
    shared: Arc<Shared>,
}

impl Default for ApiServer {
    fn default() -> Self {
        Self::new()
    }
}

impl ApiServer {
    /// A server with default settings, the built-in resources and the
    /// `default`, `kube-system` and `kube-public` namespaces.
    #[must_use]
    pub fn new() -> Self {
        Self::with_config(ServerConfig::default())
    }

    /// A server with `config`.
    #[must_use]
    pub fn with_config(config: ServerConfig) -> Self {
        Self {
            shared: Arc::new(Shared::new(config)),
        }
    }

    /// The axum router serving the API (a tower `Service`).
    pub fn router(&self) -> axum::Router {
        handlers::router(self.shared.clone())
    }

    /// A `kube::Client` talking to this server in-process (no socket), with
    /// `default` as its default namespace.
    #[must_use]
    pub fn client(&self) -> kube::Client {
        kube::Client::new(self.router(), "default")
    }

    /// The request log.
    #[must_use]
    pub fn request_log(&self) -> &RequestLog {
        &self.shared.log
    }

    /// The cluster itself, locked, for a test that acts on the server
    /// without a request: nothing it does is in the request log and no
    /// fault applies (watches still see its writes). Do not hold it across
    /// an await.
    pub fn cluster(&self) -> MutexGuard<'_, Cluster> {
        self.shared.cluster()
    }

    /// The injected faults: add, remove, drop watches (see
    /// [`faults`](crate::faults)).
    #[must_use]
    pub fn faults(&self) -> &Faults {
        &self.shared.faults
    }

    /// Starts the simulated workload controllers (see
    /// [`simulation`](crate::simulation)): Deployments and StatefulSets
    /// become ready and Jobs finish after a delay, and claims are bound to
    /// static PersistentVolumes as kube-controller-manager binds them. Off
    /// unless called; runs
    /// until [`Simulation::stop`](crate::simulation::Simulation::stop) or
    /// until the server is dropped.
    ///
    /// # Panics
    /// Outside a Tokio runtime (it spawns a task).
    pub fn simulate(&self, config: SimulationConfig) -> Simulation {
        simulation::start(&self.shared, config)
    }

    /// The newest `resourceVersion`.
    #[must_use]
    pub fn revision(&self) -> u64 {
        self.shared.cluster().store.revision()
    }

    /// Serves over HTTP on `127.0.0.1` with a free port, and writes a
    /// kubeconfig for it in a fresh temporary directory.
    ///
    /// # Errors
    /// [`ServeError`] when the port cannot be bound or the kubeconfig written.
    pub async fn serve_http(&self) -> Result<HttpServer, ServeError> {
        self.serve_http_on(SocketAddr::from(([127, 0, 0, 1], 0)), None)
            .await
    }

    /// Serves over HTTP on `addr`, writing a kubeconfig to `kubeconfig`
    /// (or to a fresh temporary directory of its own, removed with everything in
    /// it when the returned [`HttpServer`] is dropped).
    ///
    /// # Errors
    /// [`ServeError`] when the address cannot be bound or the kubeconfig written.
    pub async fn serve_http_on(
        &self,
        addr: SocketAddr,
        kubeconfig: Option<PathBuf>,
    ) -> Result<HttpServer, ServeError> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(ServeError::Bind)?;
        let addr = listener.local_addr().map_err(ServeError::Bind)?;
        let (path, temporary) = match kubeconfig {
            Some(p) => (p, false),
            None => (
                std::env::temp_dir()
                    .join(format!(
                        "fsm-testkit-{}-{}",
                        std::process::id(),
                        addr.port()
                    ))
                    .join("kubeconfig"),
                true,
            ),
        };
        kubeconfig::write(&path, addr, "default").map_err(ServeError::Kubeconfig)?;
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let router = self
            .router()
            .layer(axum::middleware::map_response(end_watches_on(
                stopped.clone(),
            )));
        let mut serve_stopped = stopped;
        let task = tokio::spawn(async move {
            let shutdown = async move {
                let _ = serve_stopped.wait_for(|s| *s).await;
            };
            if let Err(e) = axum::serve(listener, router)
                .with_graceful_shutdown(shutdown)
                .await
            {
                tracing::error!(error = %e, "HTTP server stopped");
            }
        });
        tracing::info!(%addr, kubeconfig = %path.display(), "serving the API over HTTP");
        Ok(HttpServer {
            addr,
            kubeconfig: path,
            temporary,
            stop,
            task,
        })
    }
}

/// Errors of serving over HTTP.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address could not be bound.
    #[error("binding the listener: {0}")]
    Bind(#[source] std::io::Error),
    /// The kubeconfig could not be written.
    #[error("writing the kubeconfig: {0}")]
    Kubeconfig(#[source] std::io::Error),
    /// The kubeconfig could not be loaded back.
    #[error("loading the kubeconfig: {0}")]
    Config(#[source] kube::config::KubeconfigError),
    /// A client could not be built from it.
    #[error("building a client: {0}")]
    Client(#[source] kube::Error),
}

/// A running HTTP listener. Dropping it stops listening, ends the watches
/// it serves and closes its connections; the [`ApiServer`] and its state
/// live on.
#[derive(Debug)]
pub struct HttpServer {
    addr: SocketAddr,
    kubeconfig: PathBuf,
    temporary: bool,
    stop: tokio::sync::watch::Sender<bool>,
    task: JoinHandle<()>,
}

/// A response mapper that ends watch streams when `stopped` turns true, so
/// that dropping an [`HttpServer`] closes its watches as a server going
/// away would.
fn end_watches_on(
    stopped: tokio::sync::watch::Receiver<bool>,
) -> impl Fn(axum::response::Response) -> std::future::Ready<axum::response::Response> + Clone {
    move |response: axum::response::Response| {
        if response
            .extensions()
            .get::<handlers::WatchResponse>()
            .is_none()
        {
            return std::future::ready(response);
        }
        let mut stopped = stopped.clone();
        let (parts, body) = response.into_parts();
        let until_stopped = async move {
            let _ = stopped.wait_for(|s| *s).await;
        };
        let stream = futures::StreamExt::take_until(body.into_data_stream(), until_stopped);
        std::future::ready(axum::response::Response::from_parts(
            parts,
            axum::body::Body::from_stream(stream),
        ))
    }
}

impl HttpServer {
    /// The bound address.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    #[must_use]
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The kubeconfig written for this listener.
    #[must_use]
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// A `kube::Client` that connects over HTTP using the kubeconfig, as an
    /// operator started with `KUBECONFIG` would.
    ///
    /// # Errors
    /// [`ServeError::Config`] or [`ServeError::Client`].
    pub async fn kube_client(&self) -> Result<kube::Client, ServeError> {
        let kc =
            kube::config::Kubeconfig::read_from(&self.kubeconfig).map_err(ServeError::Config)?;
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .map_err(ServeError::Config)?;
        kube::Client::try_from(config).map_err(ServeError::Client)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        // Ends open watches and stops accepting; connections then close.
        let _ = self.stop.send(true);
        if self.task.is_finished() {
            tracing::debug!("HTTP listener already stopped");
        }
        if self.temporary {
            // The directory was created for this listener alone.
            if let Some(dir) = self.kubeconfig.parent() {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }
}
