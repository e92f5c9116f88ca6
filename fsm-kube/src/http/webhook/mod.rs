//! The webhook server. The conversion: `POST /convert` answering a `ConversionReview`
//! (`apiextensions.k8s.io/v1`) with [`Versions::review`], over TLS
//! ([`WebhookTls`]: a certificate from files, or generated with
//! [`WebhookCertificates`]). `run --webhook-addr` serves it.
//!
//! The answer is always `200` with a `ConversionReview`: a conversion
//! error is `result.status: Failure` with a message naming the object; a
//! body that is not a review is a `Failure` with an empty uid. Each review
//! is logged and, with metrics, counted in
//! `operator_fsm_conversions_total{outcome}`.

mod certs;
mod error;
mod tls;

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::post;
use kube::CustomResourceExt;
use kube::core::Status;
use kube::core::conversion::{ConversionResponse, ConversionReview};

pub use certs::{CA_FILE, WebhookCertificates, service_names};
pub use error::WebhookError;
pub use tls::{CERT_FILE, KEY_FILE, WebhookTls};

use crate::KubeResource;
use crate::metrics::FsmMetrics;
use crate::versions::{ReviewOutcome, Versions, WebhookTarget};

/// The largest review body accepted: a list converted at once can hold
/// hundreds of objects.
const MAX_BODY: usize = 64 << 20;

struct Converter<H> {
    versions: Versions<H>,
    metrics: Option<FsmMetrics>,
}

/// The webhook's routes: `POST` [`WebhookTarget::CONVERT_PATH`] converting
/// with `versions`, counting each review's outcome into `metrics` when
/// given.
pub fn router<H>(versions: Versions<H>, metrics: Option<FsmMetrics>) -> Router
where
    H: KubeResource + CustomResourceExt,
{
    Router::new()
        .route(WebhookTarget::CONVERT_PATH, post(convert::<H>))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(Arc::new(Converter { versions, metrics }))
}

async fn convert<H>(State(converter): State<Arc<Converter<H>>>, body: Bytes) -> Response
where
    H: KubeResource + CustomResourceExt,
{
    let (review, outcome) = match serde_json::from_slice::<ConversionReview>(&body) {
        Ok(review) => converter.versions.review(review),
        Err(error) => {
            tracing::warn!(%error, "conversion webhook: the body is not a ConversionReview");
            let status = Status::failure(
                &format!("the body is not a ConversionReview: {error}"),
                "BadRequest",
            );
            (
                ConversionResponse::invalid(status).into_review(),
                ReviewOutcome::Invalid,
            )
        }
    };
    if let Some(metrics) = &converter.metrics {
        metrics.count_conversion(outcome.as_str());
    }
    Json(review).into_response()
}

/// Serves [`router`] over TLS on `listener` until serving fails or the
/// future is dropped.
///
/// # Errors
/// The listener's address cannot be read; serving failed.
pub async fn serve<H>(
    listener: tokio::net::TcpListener,
    tls: &WebhookTls,
    versions: Versions<H>,
    metrics: Option<FsmMetrics>,
) -> std::io::Result<()>
where
    H: KubeResource + CustomResourceExt,
{
    serve_router(listener, tls, router(versions, metrics)).await
}

/// Serves `routes` (the conversion's [`router`], the admission's
/// [`admission_router`](crate::admission_router), merged) over TLS on
/// `listener` until serving fails or the future is dropped.
///
/// # Errors
/// The listener's address cannot be read; serving failed.
pub async fn serve_router(
    listener: tokio::net::TcpListener,
    tls: &WebhookTls,
    routes: Router,
) -> std::io::Result<()> {
    let listener = tls::TlsListener::new(listener, tls)?;
    axum::serve(listener, routes).await
}

#[cfg(test)]
mod tests;
