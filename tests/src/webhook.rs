//! A webhook server for the conformance suite: HTTPS on 127.0.0.1 with a
//! self-signed certificate (its own CA bundle), serving
//!
//! - `/convert`: a `ConversionReview` between `v1` (`spec.size`) and `v2`
//!   (`spec.sizeGi`) of any kind;
//! - `/fail`: a conversion answered `Failure` ("sizes do not convert");
//! - `/wrong-uid`: a conversion answered with another uid;
//! - `/relabel`: `/convert` that also adds the label `converted: "yes"`
//!   and sets `metadata.generation` to 99;
//! - `/rename`: `/convert` that also renames the object;
//! - `/validate`: an `AdmissionReview` denied when the object (for a
//!   DELETE, the old object) has the label `deny`: its value is the
//!   message, and the code when it is a number;
//! - `/mutate`: an `AdmissionReview` allowed with a `JSONPatch` adding the
//!   label `mutated: "yes"` and setting `spec.size` to 2;
//! - `/patch-without-type`: allowed with a patch but no `patchType`.
//!
//! Every review received is kept, with the path it came to.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use http::Uri;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::Fallible;

/// The reviews received: the path and the review.
type Received = Arc<Mutex<Vec<(String, Value)>>>;

/// A running webhook server (stopped when dropped).
pub struct WebhookServer {
    addr: SocketAddr,
    ca_bundle: String,
    received: Received,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for WebhookServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A listener accepting TLS connections.
struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, addr)) = self.tcp.accept().await else {
                continue;
            };
            match self.acceptor.accept(tcp).await {
                Ok(tls) => return (tls, addr),
                Err(e) => tracing::debug!(error = %e, "a webhook client's handshake failed"),
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

impl WebhookServer {
    /// Starts the server on a free port of 127.0.0.1.
    ///
    /// # Errors
    /// When the certificate cannot be made or the port bound.
    pub async fn start() -> Fallible<Self> {
        Self::start_for(&[]).await
    }

    /// Starts the server on a free port of 127.0.0.1, its certificate
    /// valid for `names` too (`NAME.NAMESPACE.svc` of a Service).
    ///
    /// # Errors
    /// When the certificate cannot be made or the port bound.
    pub async fn start_for(names: &[&str]) -> Fallible<Self> {
        // A CA (the caBundle) and a serving certificate it signs for
        // 127.0.0.1: webpki refuses a CA certificate as the server's.
        let tcp = TcpListener::bind("127.0.0.1:0").await?;
        let addr = tcp.local_addr()?;
        let ca_key = rcgen::KeyPair::generate()?;
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new())?;
        // Its own name: a client trusting another server's CA must not
        // take this one for it (Go would then report a bad signature).
        ca_params.distinguished_name.push(
            rcgen::DnType::CommonName,
            format!("fsm conformance webhook CA {addr}"),
        );
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_pem = ca_params.self_signed(&ca_key)?.pem();
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let key = rcgen::KeyPair::generate()?;
        let mut sans = vec!["127.0.0.1".to_string()];
        sans.extend(names.iter().map(ToString::to_string));
        let cert = rcgen::CertificateParams::new(sans)?.signed_by(&key, &issuer)?;
        let chain = vec![CertificateDer::from_pem_slice(cert.pem().as_bytes())?];
        let private = PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes())?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, private)?;
        let listener = TlsListener {
            tcp,
            acceptor: TlsAcceptor::from(Arc::new(config)),
        };
        let received: Received = Arc::default();
        let app = axum::Router::new()
            .route("/{*path}", post(review))
            .with_state(received.clone());
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "the webhook server stopped");
            }
        });
        let ca_bundle = serde_json::to_value(k8s_openapi::ByteString(ca_pem.into_bytes()))?
            .as_str()
            .unwrap_or_default()
            .to_string();
        Ok(Self {
            addr,
            ca_bundle,
            received,
            task,
        })
    }

    /// The port served on.
    #[must_use]
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `https://127.0.0.1:<port><path>`.
    #[must_use]
    pub fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }

    /// The base64 PEM of the server's certificate, for `caBundle`.
    #[must_use]
    pub fn ca_bundle(&self) -> &str {
        &self.ca_bundle
    }

    /// A `clientConfig` for `path`.
    #[must_use]
    pub fn client_config(&self, path: &str) -> Value {
        json!({"url": self.url(path), "caBundle": self.ca_bundle})
    }

    /// The reviews received so far (path with its query, review).
    #[must_use]
    pub fn received(&self) -> Vec<(String, Value)> {
        self.received
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// A `https://127.0.0.1:<port>` URL nothing listens on.
///
/// # Errors
/// When no port can be bound.
pub async fn unreachable_url(path: &str) -> Fallible<String> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    drop(listener);
    Ok(format!("https://{addr}{path}"))
}

async fn review(
    State(received): State<Received>,
    uri: Uri,
    Json(body): Json<Value>,
) -> Json<Value> {
    let path = uri.path().to_string();
    received
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((
            uri.path_and_query()
                .map_or(path.clone(), |p| p.as_str().to_string()),
            body.clone(),
        ));
    let request = &body["request"];
    let uid = request["uid"].clone();
    let response = match path.as_str() {
        "/fail" => {
            json!({"uid": uid, "result": {"status": "Failure", "message": "sizes do not convert"}})
        }
        "/wrong-uid" => {
            json!({"uid": "wrong", "result": {"status": "Success"}, "convertedObjects": []})
        }
        "/validate" => admit(request),
        "/mutate" | "/patch-without-type" => {
            let operations = json!([
                {"op": "add", "path": "/metadata/labels/mutated", "value": "yes"},
                {"op": "add", "path": "/spec/size", "value": 2},
            ]);
            let patch =
                serde_json::to_value(k8s_openapi::ByteString(operations.to_string().into_bytes()))
                    .unwrap_or_default();
            let mut response = json!({"uid": uid, "allowed": true, "patch": patch});
            if path == "/mutate" {
                response["patchType"] = json!("JSONPatch");
            }
            response
        }
        _ => {
            let desired = request["desiredAPIVersion"].as_str().unwrap_or_default();
            let objects: Vec<Value> = request["objects"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|o| {
                    let mut out = convert(o.clone(), desired);
                    if path == "/relabel" {
                        out["metadata"]["labels"]["converted"] = json!("yes");
                        out["metadata"]["generation"] = json!(99);
                    }
                    if path == "/rename" {
                        let name = o["metadata"]["name"].as_str().unwrap_or_default();
                        out["metadata"]["name"] = json!(format!("{name}-renamed"));
                    }
                    out
                })
                .collect();
            json!({"uid": uid, "result": {"status": "Success"}, "convertedObjects": objects})
        }
    };
    Json(json!({"apiVersion": body["apiVersion"], "kind": body["kind"], "response": response}))
}

/// `v1` `spec.size` ↔ `v2` `spec.sizeGi`.
fn convert(mut object: Value, desired: &str) -> Value {
    let to_v2 = desired.ends_with("/v2");
    let (from, to) = if to_v2 {
        ("size", "sizeGi")
    } else {
        ("sizeGi", "size")
    };
    if let Some(spec) = object["spec"].as_object_mut()
        && let Some(v) = spec.remove(from)
    {
        spec.insert(to.into(), v);
    }
    object["apiVersion"] = json!(desired);
    object
}

/// Allowed unless the object (or the old one) is labelled `deny`.
fn admit(request: &Value) -> Value {
    let object = if request["object"].is_object() {
        &request["object"]
    } else {
        &request["oldObject"]
    };
    match object["metadata"]["labels"]["deny"].as_str() {
        None => json!({"uid": request["uid"], "allowed": true}),
        Some(why) => {
            let mut status = json!({"message": format!("label deny is set: {why}")});
            if let Ok(code) = why.parse::<u16>() {
                status["code"] = json!(code);
            }
            json!({"uid": request["uid"], "allowed": false, "status": status})
        }
    }
}
