//! The operator's HTTP endpoint: `/metrics` (what
//! [`FsmMetrics`](crate::FsmMetrics) records), `/healthz` and `/readyz`
//! ([`Health`]) on one port, the one `run --http-addr` names and the
//! Deployment's probes and scrapes use. [`serve`] serves all three; the
//! routers ([`metrics_router`], [`health_router`]) and
//! [`serve_metrics`] are there for a server of one's own. With the
//! `webhook` feature, `webhook` serves the conversion webhook over TLS on
//! a port of its own.

mod health;
mod metrics;
#[cfg(feature = "webhook")]
pub mod webhook;

use std::net::SocketAddr;
use std::sync::Arc;

use prometheus_client::registry::Registry;

pub use health::{Health, NotReady, health_router};
pub use metrics::{metrics_router, serve_metrics, serve_metrics_listener};

/// Serves `/metrics`, `/healthz` and `/readyz` on `addr` until the
/// returned future is dropped.
///
/// # Errors
/// Binding the address or serving failed.
pub async fn serve(
    addr: SocketAddr,
    registry: Arc<Registry>,
    health: Health,
) -> std::io::Result<()> {
    serve_listener(tokio::net::TcpListener::bind(addr).await?, registry, health).await
}

/// As [`serve`], on an already bound `listener`.
///
/// # Errors
/// Serving failed.
pub async fn serve_listener(
    listener: tokio::net::TcpListener,
    registry: Arc<Registry>,
    health: Health,
) -> std::io::Result<()> {
    let app = metrics_router(registry).merge(health_router(health));
    axum::serve(listener, app).await
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(addr: SocketAddr, path: &str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        response
    }

    #[tokio::test]
    async fn one_port_serves_metrics_liveness_and_readiness() {
        let mut registry = Registry::default();
        let metrics = crate::FsmMetrics::new(&mut registry);
        metrics.set_state("Db", "u1", Some("Ready"));
        let health = Health::new();
        let hold = health.hold("the resource has not been listed yet");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(serve_listener(listener, Arc::new(registry), health));

        let live = get(addr, "/healthz").await;
        assert!(live.starts_with("HTTP/1.1 200"), "{live}");
        let unready = get(addr, "/readyz").await;
        assert!(unready.starts_with("HTTP/1.1 503"), "{unready}");
        assert!(
            unready.ends_with("not ready:\n- the resource has not been listed yet\n"),
            "{unready}"
        );
        drop(hold);
        let ready = get(addr, "/readyz").await;
        assert!(ready.starts_with("HTTP/1.1 200"), "{ready}");
        let scraped = get(addr, "/metrics").await;
        assert!(
            scraped.contains("operator_fsm_objects{machine=\"Db\",state=\"Ready\"} 1"),
            "{scraped}"
        );
        server.abort();
    }
}
