//! Answering a `ConversionReview` (`apiextensions.k8s.io/v1`): every
//! object converted, or a `Failure` naming the first that could not be.

use fsm_core::text::display_chain;
use kube::CustomResourceExt;
use kube::core::Status;
use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};

use super::error::ConversionError;
use super::registry::Versions;
use crate::KubeResource;

/// The outcome of one review, as counted and logged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReviewOutcome {
    /// Every object was converted.
    Success,
    /// An object could not be converted.
    Failure,
    /// The review had no request.
    Invalid,
}

impl ReviewOutcome {
    /// `success`, `failure` or `invalid`: the metric's label.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            ReviewOutcome::Success => "success",
            ReviewOutcome::Failure => "failure",
            ReviewOutcome::Invalid => "invalid",
        }
    }
}

impl<H> Versions<H>
where
    H: KubeResource + CustomResourceExt,
{
    /// The answer to `review`: its request's uid, and either every object
    /// at `desiredAPIVersion` in the order given (`result.status:
    /// Success`) or, when one cannot be converted, no objects and
    /// `result.status: Failure` with a message naming that object and the
    /// conversion's error. A review without a request is answered
    /// `Failure` with an empty uid.
    #[must_use]
    pub fn review(&self, review: ConversionReview) -> (ConversionReview, ReviewOutcome) {
        let request = match ConversionRequest::from_review(review) {
            Ok(request) => request,
            Err(error) => {
                tracing::warn!(%error, "conversion review without a request");
                let status = Status::failure(&error.to_string(), "BadRequest");
                return (
                    ConversionResponse::invalid(status).into_review(),
                    ReviewOutcome::Invalid,
                );
            }
        };
        let desired = request.desired_api_version.clone();
        let converted: Result<Vec<_>, ConversionError> = request
            .objects
            .iter()
            .map(|object| self.convert(object, &desired))
            .collect();
        let count = request.objects.len();
        let uid = request.uid.clone();
        let response = ConversionResponse::for_request(request);
        match converted {
            Ok(objects) => {
                tracing::debug!(%uid, %desired, count, "converted");
                (
                    response.success(objects).into_review(),
                    ReviewOutcome::Success,
                )
            }
            Err(error) => {
                let message = display_chain(&error, ": ");
                tracing::warn!(%uid, %desired, error = %message, "conversion failed");
                let status = Status::failure(&message, "ConversionFailed");
                (
                    response.failure(status).into_review(),
                    ReviewOutcome::Failure,
                )
            }
        }
    }
}
