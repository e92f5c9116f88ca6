//! Calling a webhook: where its `clientConfig` points (a `url`, or a
//! `service` resolved through the Service's Endpoints), and one JSON
//! `POST` over HTTPS trusting only the `caBundle`, with the errors worded
//! as the real server's Go HTTP client words them.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use serde_json::Value;

use crate::resources::GroupResource;
use crate::store::Store;

/// Where a webhook is called, resolved from its `clientConfig`.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The URL the real server would post to (`?timeout=…` added by the call).
    pub url: String,
    /// Where to connect (`host:port`): the URL's, or the Service's
    /// endpoint address; else why there is none.
    pub connect: Result<String, String>,
    /// The name the certificate must be valid for.
    pub server_name: String,
    /// The PEM certificates of `caBundle`, the only trusted roots.
    pub ca_bundle: Vec<u8>,
}

/// Why a webhook could not be called or its answer not read.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The `clientConfig` is unusable.
    #[error("{0}")]
    Config(String),
    /// The request failed: connection, TLS, HTTP (worded as Go's
    /// `Post "<url>": <reason>`).
    #[error("Post \"{url}\": {reason}")]
    Post {
        /// The URL posted to.
        url: String,
        /// Go's words for what failed.
        reason: String,
    },
    /// The webhook answered with an error status.
    #[error("an error on the server ({body:?}) has prevented the request from succeeding")]
    Status {
        /// The answer's body, as text.
        body: String,
    },
    /// The answer is not JSON.
    #[error("{0}")]
    Decode(String),
}

/// The `clientConfig` of a webhook (`webhook.clientConfig` of a CRD's
/// conversion, or of a webhook configuration's entry), resolved against
/// `store`: a `url` as is; a `service` through the Endpoints object of
/// that Service (the embedded server has no Service network: the test
/// creates Endpoints pointing at the address it serves on).
///
/// # Errors
/// [`CallError::Config`] when neither is usable.
pub fn resolve(config: &Value, store: &Store) -> Result<Endpoint, CallError> {
    let ca_bundle = match config["caBundle"].as_str() {
        Some(b) => crate::base64::decode(b)
            .ok_or_else(|| CallError::Config("caBundle is not base64".into()))?,
        None => Vec::new(),
    };
    if let Some(url) = config["url"].as_str() {
        let uri: http::Uri = url
            .parse()
            .map_err(|e| CallError::Config(format!("invalid url {url:?}: {e}")))?;
        let host = uri.host().unwrap_or_default().to_string();
        let port = uri.port_u16().unwrap_or(443);
        return Ok(Endpoint {
            url: url.to_string(),
            connect: Ok(format!("{host}:{port}")),
            server_name: host.trim_start_matches('[').trim_end_matches(']').into(),
            ca_bundle,
        });
    }
    let service = &config["service"];
    let (Some(ns), Some(name)) = (service["namespace"].as_str(), service["name"].as_str()) else {
        return Err(CallError::Config(
            "webhook clientConfig has neither url nor service".into(),
        ));
    };
    let port = service["port"].as_u64().unwrap_or(443);
    let path = service["path"].as_str().unwrap_or_default();
    let endpoints = GroupResource {
        group: String::new(),
        resource: "endpoints".into(),
    };
    let host = format!("{name}.{ns}.svc");
    let url = format!("https://{host}:{port}{path}");
    let address = store.get(&endpoints, ns, name).and_then(|e| {
        let subset = e["subsets"].get(0)?;
        let ip = subset["addresses"][0]["ip"].as_str()?.to_string();
        let port = subset["ports"][0]["port"].as_u64()?;
        Some(format!("{ip}:{port}"))
    });
    let connect = address.ok_or_else(|| format!("service \"{ns}/{name}\" has no endpoints"));
    Ok(Endpoint {
        url,
        connect,
        server_name: host,
        ca_bundle,
    })
}

/// The URL posted to: the endpoint's with the real client's `timeout`
/// query parameter.
fn with_timeout(url: &str, timeout: Duration) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}timeout={}s", timeout.as_secs())
}

/// Posts `body` to `endpoint` and returns the JSON answer, within `timeout`.
///
/// # Errors
/// [`CallError`], worded as the real server's client words it.
pub async fn post(
    endpoint: &Endpoint,
    body: &Value,
    timeout: Duration,
) -> Result<Value, CallError> {
    let url = with_timeout(&endpoint.url, timeout);
    let fail = |reason: String| CallError::Post {
        url: url.clone(),
        reason,
    };
    match tokio::time::timeout(timeout, exchange(endpoint, &url, body)).await {
        Ok(Ok((status, bytes))) => {
            if !status.is_success() {
                return Err(CallError::Status {
                    body: String::from_utf8_lossy(&bytes).into_owned(),
                });
            }
            serde_json::from_slice(&bytes).map_err(|e| CallError::Decode(e.to_string()))
        }
        Ok(Err(reason)) => Err(fail(reason)),
        Err(_) => Err(fail("context deadline exceeded".into())),
    }
}

/// Connects, shakes hands, posts, reads the answer; the error is Go's
/// wording of what failed.
async fn exchange(
    endpoint: &Endpoint,
    url: &str,
    body: &Value,
) -> Result<(http::StatusCode, Bytes), String> {
    let connect = endpoint.connect.as_ref().map_err(Clone::clone)?;
    let tcp = tokio::net::TcpStream::connect(connect).await.map_err(|e| {
        let what = match e.kind() {
            std::io::ErrorKind::ConnectionRefused => "connection refused".to_string(),
            _ => e.to_string(),
        };
        format!("dial tcp {connect}: connect: {what}")
    })?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&endpoint.ca_bundle).flatten() {
        if let Err(e) = roots.add(cert) {
            tracing::debug!(error = %e, "a caBundle certificate is not usable");
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from(endpoint.server_name.clone()).map_err(|e| e.to_string())?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| tls_reason(&e))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "webhook connection ended");
        }
    });
    let uri: http::Uri = url
        .parse()
        .map_err(|e: http::uri::InvalidUri| e.to_string())?;
    let request = http::Request::post(uri.path_and_query().map_or("/", |p| p.as_str()))
        .header(
            http::header::HOST,
            uri.authority().map_or("", |a| a.as_str()),
        )
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json, */*")
        .body(Full::new(Bytes::from(body.to_string())))
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok((status, bytes))
}

/// Go's words for a failed TLS handshake where they are known.
fn tls_reason(e: &std::io::Error) -> String {
    let text = e.to_string();
    if text.contains("UnknownIssuer") {
        "x509: certificate signed by unknown authority".into()
    } else if text.contains("NotValidForName") {
        "x509: certificate is not valid for the requested name".into()
    } else {
        text
    }
}

/// A random (version 4) UUID, as the real server gives each review.
#[must_use]
pub fn new_uid() -> String {
    use ring::rand::SecureRandom;
    let mut b = [0u8; 16];
    if ring::rand::SystemRandom::new().fill(&mut b).is_err() {
        // No system randomness: a time-based value still differs per call.
        let nanos = jiff::Timestamp::now().as_nanosecond().unsigned_abs();
        b = nanos.to_le_bytes();
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}
