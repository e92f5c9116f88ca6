//! The resource verbs over HTTP: get, list, watch, create, update, patch,
//! delete, deletecollection, on objects and their `status` subresource
//! (and get, update, patch of their `scale`, in [`super::scale`]).
//! A request is resolved ([`super::request`]), then served by the function
//! of its verb: the reads in [`super::reads`], the writes in
//! [`super::writes`].

use std::sync::Arc;

use axum::body::Body;
use axum::response::Response;
use http::request::Parts;

use super::request::{Verb, resolve};
use super::route::ResourcePath;
use super::{reads, scale, writes};
use crate::state::Shared;
use crate::status::ApiError;

/// Serves a request on a resource path: one function per verb.
///
/// # Errors
/// The request's answer when it fails, as a `Status`.
pub async fn handle(
    shared: &Arc<Shared>,
    parts: &Parts,
    body: Body,
    path: ResourcePath,
) -> Result<Response, ApiError> {
    let (verb, request) = resolve(shared, parts, path)?;
    if request.scale {
        return scale::handle(verb, &request, body).await;
    }
    match verb {
        Verb::Get => reads::get(&request).await,
        Verb::List => reads::list(&request).await,
        Verb::Watch => reads::watch(&request).await,
        Verb::Create => writes::create(&request, body).await,
        Verb::Update => writes::update(&request, body).await,
        Verb::Patch => writes::patch(&request, body).await,
        Verb::Delete => writes::delete(&request, body).await,
        Verb::DeleteCollection => writes::delete_collection(&request, body).await,
    }
}
