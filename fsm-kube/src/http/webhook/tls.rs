//! The webhook's TLS: the server configuration from a certificate and key
//! (files, as a mounted `kubernetes.io/tls` Secret gives them, or PEM in
//! memory), and a listener that completes handshakes off the accept loop.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use super::error::WebhookError;

/// The certificate file in a certificate directory (a Secret of type
/// `kubernetes.io/tls` mounted as files).
pub const CERT_FILE: &str = "tls.crt";
/// The private key file in a certificate directory.
pub const KEY_FILE: &str = "tls.key";

/// How long a client may take to complete the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshakes in progress at a time; more connections wait to be accepted.
const MAX_HANDSHAKES: usize = 64;

/// The webhook's TLS server configuration: its certificate chain and key,
/// HTTP/1.1, TLS 1.2 and 1.3 with ring.
#[derive(Clone)]
pub struct WebhookTls {
    config: Arc<ServerConfig>,
}

impl std::fmt::Debug for WebhookTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookTls").finish_non_exhaustive()
    }
}

impl WebhookTls {
    /// From `dir/tls.crt` (the chain, leaf first) and `dir/tls.key`.
    ///
    /// # Errors
    /// A file cannot be read or is not PEM of a certificate or a key;
    /// they do not match.
    pub fn from_dir(dir: &Path) -> Result<Self, WebhookError> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read(&path)
                .map(|bytes| (bytes, path.clone()))
                .map_err(|source| WebhookError::File { path, source })
        };
        let (cert, cert_path) = read(CERT_FILE)?;
        let (key, key_path) = read(KEY_FILE)?;
        Self::build(&cert, &cert_path, &key, &key_path)
    }

    /// From a PEM certificate chain (leaf first) and a PEM private key.
    ///
    /// # Errors
    /// Not PEM of a certificate or a key; they do not match.
    pub fn from_pem(cert_pem: &[u8], key_pem: &[u8]) -> Result<Self, WebhookError> {
        let memory = PathBuf::from("<memory>");
        Self::build(cert_pem, &memory, key_pem, &memory)
    }

    fn build(
        cert: &[u8],
        cert_path: &Path,
        key: &[u8],
        key_path: &Path,
    ) -> Result<Self, WebhookError> {
        let chain = CertificateDer::pem_slice_iter(cert)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|source| WebhookError::Pem {
                path: cert_path.to_owned(),
                what: "certificate",
                source,
            })?;
        if chain.is_empty() {
            return Err(WebhookError::NoCertificate(cert_path.to_owned()));
        }
        let key = PrivateKeyDer::from_pem_slice(key).map_err(|source| WebhookError::Pem {
            path: key_path.to_owned(),
            what: "private key",
            source,
        })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(WebhookError::Tls)?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(WebhookError::Tls)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(WebhookTls {
            config: Arc::new(config),
        })
    }
}

/// A TLS listener for `axum::serve`: a task accepts TCP connections and
/// completes each handshake in a task of its own (at most
/// [`MAX_HANDSHAKES`] at a time, each within [`HANDSHAKE_TIMEOUT`]), so a
/// slow or silent client holds up no other.
pub(super) struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    acceptor: tokio::task::JoinHandle<()>,
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.acceptor.abort();
    }
}

impl TlsListener {
    /// Accepts on `listener`, with `tls`.
    pub(super) fn new(listener: TcpListener, tls: &WebhookTls) -> std::io::Result<Self> {
        let local = listener.local_addr()?;
        let (send, ready) = mpsc::channel(MAX_HANDSHAKES);
        let acceptor = TlsAcceptor::from(tls.config.clone());
        let acceptor = tokio::spawn(accept_loop(listener, acceptor, send));
        Ok(TlsListener {
            ready,
            local,
            acceptor,
        })
    }
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    ready: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    let handshakes = Arc::new(Semaphore::new(MAX_HANDSHAKES));
    loop {
        let Ok(permit) = handshakes.clone().acquire_owned().await else {
            return;
        };
        let (tcp, remote) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of file descriptors and the like: wait, as axum's
                // own listener does.
                tracing::warn!(%error, "conversion webhook: cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let (acceptor, ready) = (acceptor.clone(), ready.clone());
        tokio::spawn(async move {
            let _permit = permit;
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(stream)) => {
                    // Only fails once the server is gone.
                    let _ = ready.send((stream, remote)).await;
                }
                Ok(Err(error)) => {
                    tracing::debug!(%remote, %error, "conversion webhook: TLS handshake failed");
                }
                Err(_) => tracing::debug!(%remote, "conversion webhook: TLS handshake timed out"),
            }
        });
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(connection) => connection,
            // The accept loop never ends while the listener lives.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}
