//! The webhook over TLS, with a client that trusts the generated CA.

use std::net::SocketAddr;
use std::sync::Arc;

use prometheus_client::registry::Registry;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::*;
use crate::versions::tests::{old_object, versions};

/// POSTs `body` to `/convert` over TLS trusting `ca_pem`; the status line
/// and the body.
async fn post(addr: SocketAddr, ca_pem: &str, body: &str) -> (String, Value) {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = connector.connect(name, tcp).await.unwrap();
    let request = format!(
        "POST /convert HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    tls.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    tls.read_to_string(&mut response).await.unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let status = head.lines().next().unwrap().to_owned();
    (status, serde_json::from_str(body).unwrap())
}

#[tokio::test]
async fn the_webhook_converts_over_tls_and_counts_each_outcome() {
    let certs = WebhookCertificates::generate(&["127.0.0.1".to_owned()]).unwrap();
    let dir = std::env::temp_dir().join(format!("fsm-webhook-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    certs.write_to(&dir).unwrap();
    let tls = WebhookTls::from_dir(&dir).unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.join(CA_FILE)).unwrap(),
        certs.ca_pem
    );
    std::fs::remove_dir_all(&dir).unwrap();

    let mut registry = Registry::default();
    let metrics = FsmMetrics::new(&mut registry);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server =
        tokio::spawn(async move { serve(listener, &tls, versions(), Some(metrics)).await });

    // A client that never handshakes holds up no other.
    let _silent = TcpStream::connect(addr).await.unwrap();

    let review = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "r-7", "desiredAPIVersion": "example.io/v1", "objects": [old_object()]},
    });
    let (status, answer) = post(addr, &certs.ca_pem, &review.to_string()).await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(answer["kind"], "ConversionReview");
    assert_eq!(answer["response"]["uid"], "r-7");
    assert_eq!(answer["response"]["result"]["status"], "Success");
    let converted = &answer["response"]["convertedObjects"][0];
    assert_eq!(converted["apiVersion"], "example.io/v1");
    assert_eq!(converted["status"]["fsm"], old_object()["status"]["fsm"]);

    let mut bad = old_object();
    bad["spec"]["size"] = json!("huge");
    let failing = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "r-8", "desiredAPIVersion": "example.io/v1", "objects": [bad]},
    });
    let (status, answer) = post(addr, &certs.ca_pem, &failing.to_string()).await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(answer["response"]["result"]["status"], "Failure");
    let message = answer["response"]["result"]["message"].as_str().unwrap();
    assert!(message.starts_with("shop/orders: "), "{message}");

    let (status, answer) = post(addr, &certs.ca_pem, "not json").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(answer["response"]["uid"], "");
    assert_eq!(answer["response"]["result"]["status"], "Failure");

    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    for outcome in ["success", "failure", "invalid"] {
        let line = format!("operator_fsm_conversions_total{{outcome=\"{outcome}\"}} 1");
        assert!(text.contains(&line), "{line} in\n{text}");
    }
    server.abort();
}

#[test]
fn a_key_that_is_not_the_certificates_is_refused() {
    let one = WebhookCertificates::generate(&["a.example".to_owned()]).unwrap();
    let other = WebhookCertificates::generate(&["b.example".to_owned()]).unwrap();
    assert!(WebhookTls::from_pem(one.cert_pem.as_bytes(), one.key_pem.as_bytes()).is_ok());
    let error = WebhookTls::from_pem(one.cert_pem.as_bytes(), other.key_pem.as_bytes());
    assert!(matches!(error, Err(WebhookError::Tls(_))), "{error:?}");
    let error = WebhookTls::from_pem(b"", one.key_pem.as_bytes());
    assert!(
        matches!(error, Err(WebhookError::NoCertificate(_))),
        "{error:?}"
    );
    assert_eq!(
        service_names("op-webhook", "ops"),
        [
            "op-webhook.ops.svc",
            "op-webhook",
            "op-webhook.ops",
            "op-webhook.ops.svc.cluster.local"
        ]
    );
}
