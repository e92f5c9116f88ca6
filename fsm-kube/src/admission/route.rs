//! The admission webhook's route: `POST /validate` answering an
//! `AdmissionReview` with [`Admission::review`].

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::post;
use fsm_core::Fsm;
use kube::api::DynamicObject;
use kube::core::admission::{AdmissionResponse, AdmissionReview};

use super::configuration::VALIDATE_PATH;
use super::review::Admission;
use crate::KubeResource;

/// The largest review accepted: an object and its old version.
const MAX_BODY: usize = 16 << 20;

/// The route serving `admission` at [`VALIDATE_PATH`], to merge into the
/// webhook server's router. The answer is always `200` with an
/// `AdmissionReview`; a body that is not one is answered with a refusal
/// (the API server then refuses the write, as `failurePolicy: Fail`
/// would).
pub fn admission_router<F>(admission: Admission<F>) -> Router
where
    F: Fsm,
    F::Resource: KubeResource + kube::CustomResourceExt,
{
    Router::new()
        .route(VALIDATE_PATH, post(validate::<F>))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(Arc::new(admission))
}

async fn validate<F>(State(admission): State<Arc<Admission<F>>>, body: Bytes) -> Response
where
    F: Fsm,
    F::Resource: KubeResource + kube::CustomResourceExt,
{
    match serde_json::from_slice::<AdmissionReview<DynamicObject>>(&body) {
        Ok(review) => Json(admission.review(review).await).into_response(),
        Err(error) => {
            tracing::warn!(%error, "admission webhook: the body is not an AdmissionReview");
            let response =
                AdmissionResponse::invalid(format!("the body is not an AdmissionReview: {error}"));
            Json(response.into_review()).into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use fsm_core::prelude::*;
    use serde_json::{Value, json};
    use tower::ServiceExt;

    use super::*;
    use crate::store::StoreKind;

    #[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
    #[fsm(resource = crate::admission::route::tests::Gadget, crate = ::fsm_core)]
    enum GadgetState {
        #[fsm(initial, ready, final, refuse_delete)]
        Serving,
        #[fsm(failed)]
        Failed,
    }

    #[derive(kube::CustomResource, Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
    #[kube(group = "example.io", version = "v1", kind = "Gadget", namespaced)]
    #[kube(status = "GadgetStatus")]
    pub struct GadgetSpec {
        size: u32,
    }

    #[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
    pub struct GadgetStatus {
        fsm: Option<Value>,
    }

    async fn post(body: &str) -> (StatusCode, Value) {
        let router = admission_router(Admission::<GadgetState>::new(StoreKind::Status));
        let request = Request::post(VALIDATE_PATH)
            .header("content-type", "application/json")
            .body(Body::from(body.to_owned()))
            .expect("a request");
        let response = router.oneshot(request).await.expect("an answer");
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .expect("a body");
        (status, serde_json::from_slice(&bytes).expect("JSON"))
    }

    #[tokio::test]
    async fn a_deletion_the_state_refuses_is_denied_with_the_uid_and_the_reason() {
        let review = json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "u-42",
                "kind": {"group": "example.io", "version": "v1", "kind": "Gadget"},
                "resource": {"group": "example.io", "version": "v1", "resource": "gadgets"},
                "name": "g", "namespace": "ns", "operation": "DELETE",
                "userInfo": {"username": "alice"},
                "oldObject": {
                    "apiVersion": "example.io/v1", "kind": "Gadget",
                    "metadata": {"name": "g", "namespace": "ns"},
                    "spec": {"size": 1},
                    "status": {"fsm": {"schemaVersion": 1, "state": "Serving",
                                       "enteredAt": "2026-01-01T00:00:00Z"}},
                },
            },
        });
        let (status, answer) = post(&review.to_string()).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(answer["kind"], "AdmissionReview");
        assert_eq!(answer["response"]["uid"], "u-42");
        assert_eq!(answer["response"]["allowed"], false);
        assert_eq!(answer["response"]["status"]["code"], 403);
        let message = answer["response"]["status"]["message"]
            .as_str()
            .unwrap_or("");
        assert!(
            message.starts_with("Gadget ns/g is Serving, a state in which it may not be deleted"),
            "{answer}"
        );
    }

    #[tokio::test]
    async fn a_body_that_is_no_review_is_refused() {
        let (status, answer) = post("{oops").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(answer["response"]["allowed"], false);
    }
}
