//! Why the conversion webhook cannot start.

use std::path::PathBuf;

/// Why the webhook's certificate cannot be read or made, or its address
/// bound.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// A certificate or key file cannot be read (or written).
    #[error("{path}: cannot read or write it")]
    File {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A file is not PEM of what it should hold.
    #[error("{path}: not a PEM {what}")]
    Pem {
        /// The file (or `<memory>`).
        path: PathBuf,
        /// A certificate, or a private key.
        what: &'static str,
        /// The parser's error.
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    /// The certificate file holds no certificate.
    #[error("{0}: no certificate in it")]
    NoCertificate(PathBuf),
    /// rustls refuses the certificate and key (they do not match, or the
    /// key is of a kind it cannot use).
    #[error("the webhook's certificate and key cannot serve TLS")]
    Tls(#[source] rustls::Error),
    /// A certificate could not be generated.
    #[error("generating the webhook's certificate failed")]
    Generate(#[source] rcgen::Error),
    /// Serving failed.
    #[error("conversion webhook on {addr} failed")]
    Serve {
        /// The address.
        addr: std::net::SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The address cannot be bound.
    #[error("conversion webhook on {addr}: cannot listen")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}
