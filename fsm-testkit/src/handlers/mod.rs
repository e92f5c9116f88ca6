//! HTTP: the request pipeline from an axum request to a response.
//!
//! Every request goes through one handler: the path is parsed into a
//! [`route::Route`], the request described ([`describe`]: verb, resource,
//! namespace, name), served by the module for its kind (discovery here,
//! objects in [`objects`]), and recorded with its outcome in the request
//! log. The review resources (TokenReview, SubjectAccessReview), which
//! store nothing, are served by [`reviews`]. Steps that act on the description alone (fault injection, latency)
//! slot in between the description and the serve. The fault API
//! ([`fault_api`]) is a route of its own, in front of the pipeline.

mod admitted;
mod conversion;
mod converted;
pub mod fault_api;
mod legacy_watch;
pub mod objects;
mod query;
mod reads;
mod request;
pub mod reviews;
pub mod route;
mod scale;
mod writes;

pub use reads::WatchResponse;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use http::{StatusCode, header};
use serde_json::Value;

use crate::discovery;
use crate::faults::Answer;
use crate::log::RequestRecord;
use crate::openapi;
use crate::protobuf;
use crate::state::Shared;
use crate::status::ApiError;
use crate::watch;
use route::Route;

/// The router serving the whole API, and the fault API under `/testkit/`.
pub fn router(shared: Arc<Shared>) -> Router {
    let faults = fault_api::router(shared.faults.clone());
    Router::new()
        .fallback(handle)
        .with_state(shared)
        .merge(faults)
}

/// A JSON response.
pub fn json(code: StatusCode, body: &Value) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (mut parts, body) = request.into_parts();
    legacy_watch::rewrite(&mut parts);
    let route = route::parse(parts.uri.path());
    // 1. What is asked: verb, resource, namespace, name.
    let mut record = describe(&parts, &route);
    // 2. Steps that act on the description alone: fault injection, latency.
    let injection = shared.faults.intercept(&record);
    if !injection.latency.is_zero() {
        tokio::time::sleep(injection.latency).await;
    }
    // What the answer is written in (JSON unless protobuf alone is asked).
    let protobuf = wants_protobuf(&shared, &parts, &route);
    // 3. Serve.
    let result = match route {
        _ if below_unserved_group(&shared, &route) => Ok(page_not_found()),
        Route::Unlisted => Ok(unlisted(&shared)),
        _ if protobuf == Some(false) => Ok(not_acceptable()),
        // A fault answers instead (below), unless it lets the request
        // through first and loses its answer.
        _ if injection.answer.is_some() && !injection.serve_first => Ok(Response::default()),
        Route::Resource(rp) => match reviews::review_of(&rp) {
            Some(review) => reviews::handle(&shared, &parts, body, &rp, review).await,
            None => objects::handle(&shared, &parts, body, rp).await,
        },
        _ if parts.method != http::Method::GET => Err(match route {
            Route::Unknown => ApiError::UnknownResource,
            _ => ApiError::MethodNotAllowed,
        }),
        other => serve_discovery(&shared, &parts, other),
    };
    let mut response = match injection.answer {
        Some(Answer::Error(e)) => e.into_response(),
        Some(Answer::ExpiredWatch) => expired_watch(),
        None => result.unwrap_or_else(IntoResponse::into_response),
    };
    if response.extensions().get::<WatchResponse>().is_some() {
        let dropped = shared.faults.watches_dropped(&record.resource);
        let (parts, body) = response.into_parts();
        let stream = futures::StreamExt::take_until(body.into_data_stream(), dropped);
        response = Response::from_parts(parts, axum::body::Body::from_stream(stream));
    } else if protobuf == Some(true) {
        response = to_protobuf(response).await;
    }
    // 4. Record the outcome.
    record.code = response.status().as_u16();
    tracing::debug!(
        method = %parts.method,
        uri = %parts.uri,
        verb = %record.verb,
        code = record.code,
        "request"
    );
    shared.log.record(record);
    response
}

/// Whether `route` lies below `/apis/{group}` of a group nothing serves,
/// where the real server has no handler.
fn below_unserved_group(shared: &Shared, route: &Route) -> bool {
    let group = match route {
        Route::ApiGroup(g) | Route::ResourceList(g, _) => g,
        Route::Resource(rp) => &rp.group,
        _ => return false,
    };
    !group.is_empty() && !discovery::serves_group(&shared.cluster().registry, group)
}

/// The real server's answer where no handler is registered at all: the
/// Go mux's plain text.
fn page_not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "404 page not found\n",
    )
        .into_response()
}

/// A path outside `/api`, `/apis` and the other served paths: a 404 whose
/// body lists paths (not the core APIs), as the real server's does.
fn unlisted(shared: &Shared) -> Response {
    json(
        StatusCode::NOT_FOUND,
        &discovery::not_found_paths(&shared.cluster().registry),
    )
}

/// A watch whose one event is an `ERROR` `410 Expired` (a fault's answer).
fn expired_watch() -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        watch::error_event(&Answer::expired()),
    )
        .into_response()
}

/// For a request on a resource whose `Accept` asks for protobuf alone:
/// `Some(true)` for a built-in kind (answered in protobuf), `Some(false)`
/// for a custom resource (the real server has no protobuf for them: 406);
/// `None` otherwise (JSON).
fn wants_protobuf(shared: &Shared, parts: &http::request::Parts, route: &Route) -> Option<bool> {
    let Route::Resource(rp) = route else {
        return None;
    };
    let accept = parts
        .headers
        .get(header::ACCEPT)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    if !protobuf::wants_protobuf_only(accept) {
        return None;
    }
    let def = shared
        .cluster()
        .registry
        .get(&rp.group, &rp.version, &rp.resource)?;
    Some(!def.custom && protobuf::supports(&def.api_version(), &def.kind))
}

/// The real server's answer to a client that accepts only what it cannot
/// write (in protobuf, which the client asked for).
fn not_acceptable() -> Response {
    let status = ApiError::Other {
        code: 406,
        message: "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf".into(),
        subject: None,
    }
    .to_status();
    let mut response = json(StatusCode::NOT_ACCEPTABLE, &status);
    if let Ok(body) = protobuf::encode(&status) {
        response = (
            StatusCode::NOT_ACCEPTABLE,
            [(header::CONTENT_TYPE, protobuf::MEDIA_TYPE)],
            body,
        )
            .into_response();
    }
    response
}

/// Rewrites a JSON answer (an object, a list, a Status) in protobuf.
async fn to_protobuf(response: Response) -> Response {
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|ct| ct.as_bytes().starts_with(b"application/json"));
    if !is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return Response::from_parts(parts, axum::body::Body::empty());
    };
    let encoded = serde_json::from_slice::<Value>(&bytes)
        .map_err(|e| e.to_string())
        .and_then(|v| protobuf::encode(&v).map_err(|e| e.to_string()));
    match encoded {
        Ok(body) => {
            parts.headers.insert(
                header::CONTENT_TYPE,
                http::HeaderValue::from_static(protobuf::MEDIA_TYPE),
            );
            parts.headers.remove(header::CONTENT_LENGTH);
            Response::from_parts(parts, axum::body::Body::from(body))
        }
        Err(e) => {
            tracing::debug!(error = %e, "answering in JSON: no protobuf encoding");
            Response::from_parts(parts, axum::body::Body::from(bytes))
        }
    }
}

/// Describes a request for the log (and for steps that act on its
/// description): verb, resource, namespace, name. The code is filled in
/// once the request is served.
#[must_use]
pub fn describe(parts: &http::request::Parts, route: &Route) -> RequestRecord {
    let method_verb = || parts.method.as_str().to_ascii_lowercase();
    let mut record = RequestRecord {
        verb: if parts.method == http::Method::GET {
            "get".into()
        } else {
            method_verb()
        },
        group: String::new(),
        resource: String::new(),
        subresource: None,
        namespace: None,
        name: None,
        path: parts.uri.path().to_string(),
        code: 0,
    };
    if let Route::Resource(rp) = route {
        let watch = query::query_map(parts)
            .get("watch")
            .is_some_and(|w| w == "true" || w == "1");
        record.verb = request::Verb::of(&parts.method, rp.name.is_some(), watch)
            .map_or_else(|_| method_verb(), |v| v.as_str().to_string());
        record.group.clone_from(&rp.group);
        record.resource.clone_from(&rp.resource);
        record.subresource.clone_from(&rp.subresource);
        record.namespace.clone_from(&rp.namespace);
        record.name.clone_from(&rp.name);
    }
    record
}

fn serve_discovery(
    shared: &Shared,
    parts: &http::request::Parts,
    route: Route,
) -> Result<Response, ApiError> {
    let ok = |v: Value| Ok(json(StatusCode::OK, &v));
    let cluster = shared.cluster();
    match route {
        Route::Root => ok(discovery::root_paths(&cluster.registry)),
        Route::Version => ok(discovery::version()),
        Route::Health => Ok((StatusCode::OK, "ok").into_response()),
        Route::Api | Route::ApiGroups
            if discovery::wants_aggregated(
                parts
                    .headers
                    .get(header::ACCEPT)
                    .and_then(|h| h.to_str().ok())
                    .unwrap_or_default(),
            ) =>
        {
            let doc = discovery::aggregated(&cluster.registry, route == Route::Api);
            Ok((
                StatusCode::OK,
                [(header::CONTENT_TYPE, discovery::AGGREGATED_CONTENT_TYPE)],
                doc.to_string(),
            )
                .into_response())
        }
        Route::Api => {
            let host = parts
                .headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or("localhost");
            ok(discovery::api_versions(host))
        }
        Route::ApiGroups => ok(discovery::api_groups(&cluster.registry)),
        Route::ApiGroup(g) => {
            discovery::api_group(&cluster.registry, &g).map_or(Err(ApiError::UnknownResource), ok)
        }
        Route::ResourceList(g, v) => discovery::resource_list(&cluster.registry, &g, &v)
            .map_or(Err(ApiError::UnknownResource), ok),
        Route::OpenApiIndex => ok(openapi::index(&cluster.registry, &cluster.store)),
        Route::OpenApiDocument(g, v) => {
            openapi::document(&cluster.registry, &cluster.store, &g, &v)
                .map_or(Err(ApiError::UnknownResource), ok)
        }
        Route::OpenApiV2 => {
            let accept = parts
                .headers
                .get(header::ACCEPT)
                .and_then(|h| h.to_str().ok())
                .unwrap_or_default();
            if openapi::accepts_json(accept) {
                let mut response = json(
                    StatusCode::OK,
                    &openapi::swagger(&cluster.registry, &cluster.store),
                );
                response
                    .headers_mut()
                    .insert(header::VARY, http::HeaderValue::from_static("Accept"));
                Ok(response)
            } else {
                // The real server's answer when it speaks none of the types asked for.
                Ok((StatusCode::NOT_ACCEPTABLE, [(header::VARY, "Accept")]).into_response())
            }
        }
        Route::Resource(_) | Route::Unknown => Err(ApiError::UnknownResource),
        Route::Unlisted => Ok(unlisted(shared)),
    }
}
