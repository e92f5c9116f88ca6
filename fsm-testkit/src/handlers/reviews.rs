//! The review resources over HTTP ([`crate::reviews`]): `POST` of a
//! `TokenReview`, a `SubjectAccessReview` or a self review to its collection is answered
//! `201` with the review and its status; any other method there is `405`,
//! and a named or subresource path `404`, as is a namespaced path of a
//! cluster review or a cluster path of a namespaced one
//! (`LocalSubjectAccessReview`), as on the real server.

use axum::body::Body;
use http::request::Parts;
use http::{Method, StatusCode};

use super::json;
use super::request::read_body;
use super::route::ResourcePath;
use crate::reviews::{
    self, LOCAL_SUBJECT_ACCESS_REVIEW, Review, SELF_SUBJECT_ACCESS_REVIEW,
    SELF_SUBJECT_RULES_REVIEW, SUBJECT_ACCESS_REVIEW, TOKEN_REVIEW,
};
use crate::self_reviews;
use crate::state::Shared;
use crate::status::ApiError;

/// The review resource `rp` names, if it names one (whatever the rest of
/// the path).
#[must_use]
pub fn review_of(rp: &ResourcePath) -> Option<Review> {
    reviews::find(&rp.group, &rp.version, &rp.resource)
}

/// Serves a request on the review resource `review`.
///
/// # Errors
/// `404` for a path below the collection or in a namespace, `405` for a
/// method other than `POST`, and the review's own errors.
pub async fn handle(
    shared: &Shared,
    parts: &Parts,
    body: Body,
    rp: &ResourcePath,
    review: Review,
) -> Result<axum::response::Response, ApiError> {
    if rp.namespace.is_some() != review.namespaced || rp.name.is_some() || rp.subresource.is_some()
    {
        return Err(ApiError::UnknownResource);
    }
    if parts.method != Method::POST {
        return Err(ApiError::MethodNotAllowed);
    }
    let bytes = read_body(body).await?;
    let answer = {
        let cluster = shared.cluster();
        if review == TOKEN_REVIEW {
            crate::authn::review(&cluster.store, &bytes)?
        } else if review == SUBJECT_ACCESS_REVIEW {
            crate::authz::review(&cluster.store, &bytes)?
        } else if review == LOCAL_SUBJECT_ACCESS_REVIEW {
            let namespace = rp.namespace.as_deref().unwrap_or_default();
            crate::local_reviews::review(&cluster.store, namespace, &bytes)?
        } else if review == SELF_SUBJECT_ACCESS_REVIEW {
            let user = self_reviews::requester(&cluster.store, &parts.headers);
            self_reviews::access_review(&cluster.store, &user, &bytes)?
        } else if review == SELF_SUBJECT_RULES_REVIEW {
            let user = self_reviews::requester(&cluster.store, &parts.headers);
            self_reviews::rules_review(&cluster.store, &user, &bytes)?
        } else {
            return Err(ApiError::UnknownResource);
        }
    };
    Ok(json(StatusCode::CREATED, &answer))
}
