//! HTTP: the request pipeline from an axum request to a response.
//!
//! Every request goes through [`handle`]: the path is parsed into a
//! [`route::Route`], the verb decided, the request served by the module for
//! its kind (discovery here, objects in [`objects`]), and the outcome
//! recorded in the request log. Faults and admission steps added later slot
//! in between the parse and the serve.

pub mod objects;
pub mod route;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use http::{StatusCode, header};
use serde_json::Value;

use crate::discovery;
use crate::log::RequestRecord;
use crate::openapi;
use crate::server::Shared;
use crate::status::ApiError;
use route::Route;

/// The router serving the whole API.
pub fn router(shared: Arc<Shared>) -> Router {
    Router::new().fallback(handle).with_state(shared)
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
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_string();
    let mut record = RequestRecord {
        verb: "get".into(),
        group: String::new(),
        resource: String::new(),
        subresource: None,
        namespace: None,
        name: None,
        path: path.clone(),
        code: 0,
    };
    let result = match route::parse(&path) {
        Route::Resource(rp) => objects::handle(&shared, &parts, body, rp, &mut record).await,
        other if parts.method != http::Method::GET => {
            record.verb = parts.method.as_str().to_ascii_lowercase();
            match other {
                Route::Unknown => Err(ApiError::UnknownResource),
                _ => Err(ApiError::MethodNotAllowed),
            }
        }
        other => serve_discovery(&shared, &parts, other),
    };
    let response = result.unwrap_or_else(IntoResponse::into_response);
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

fn serve_discovery(
    shared: &Shared,
    parts: &http::request::Parts,
    route: Route,
) -> Result<Response, ApiError> {
    let ok = |v: Value| Ok(json(StatusCode::OK, &v));
    let cluster = shared.cluster();
    match route {
        Route::Version => ok(discovery::version()),
        Route::Health => Ok((StatusCode::OK, "ok").into_response()),
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
        Route::OpenApiIndex => ok(openapi::index(&cluster.registry, cluster.store.revision())),
        Route::OpenApiDocument(g, v) => {
            openapi::document(&cluster.registry, &g, &v).map_or(Err(ApiError::UnknownResource), ok)
        }
        Route::Resource(_) | Route::Unknown => Err(ApiError::UnknownResource),
    }
}
