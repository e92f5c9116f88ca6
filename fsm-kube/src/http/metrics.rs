//! `/metrics`: the registry [`FsmMetrics`](crate::FsmMetrics) registers in,
//! in the OpenMetrics text format.

use std::sync::Arc;

use prometheus_client::registry::Registry;

/// The registry's metrics in the Prometheus text format; an error only
/// when a metric cannot be encoded (a formatting error).
fn encode(registry: &Registry) -> Result<String, std::fmt::Error> {
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, registry)?;
    Ok(out)
}

/// Serves `registry` at `GET /metrics` on `addr` until the returned future
/// is dropped.
///
/// # Errors
/// Binding the address or serving failed.
pub async fn serve_metrics(
    addr: std::net::SocketAddr,
    registry: Arc<Registry>,
) -> std::io::Result<()> {
    serve_metrics_listener(tokio::net::TcpListener::bind(addr).await?, registry).await
}

/// Serves `registry` at `GET /metrics` on an already bound `listener`.
///
/// # Errors
/// Serving failed.
pub async fn serve_metrics_listener(
    listener: tokio::net::TcpListener,
    registry: Arc<Registry>,
) -> std::io::Result<()> {
    axum::serve(listener, metrics_router(registry)).await
}

/// The route `GET /metrics`, serving `registry` in the OpenMetrics text
/// format ([`serve`](super::serve) adds the health routes).
pub fn metrics_router(registry: Arc<Registry>) -> axum::Router {
    use axum::http::{StatusCode, header};
    use axum::routing::get;

    axum::Router::new().route(
        "/metrics",
        get(move || {
            let registry = registry.clone();
            async move {
                match encode(&registry) {
                    Ok(body) => (
                        StatusCode::OK,
                        [(
                            header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        body,
                    ),
                    Err(_) => (
                        StatusCode::INTERNAL_SERVER_ERROR,
                        [(header::CONTENT_TYPE, "text/plain")],
                        "metrics could not be encoded".to_owned(),
                    ),
                }
            }
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_endpoint_serves_the_registry() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        let mut registry = Registry::default();
        let metrics = crate::FsmMetrics::new(&mut registry);
        metrics.set_state("Db", "u1", Some("Ready"));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(serve_metrics_listener(listener, Arc::new(registry)));
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        server.abort();
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        assert!(
            response.contains("operator_fsm_objects{machine=\"Db\",state=\"Ready\"} 1"),
            "{response}"
        );
    }
}
