//! The `scale` subresource over HTTP: `GET` answers the object's
//! `autoscaling/v1` `Scale`, `PUT` writes one, `PATCH` patches it (JSON,
//! merge or strategic merge patch); any other verb is `405`. The cluster
//! does the rest (`cluster::scale`).

use axum::body::Body;
use axum::response::Response;
use http::{StatusCode, header};

use super::json;
use super::query::{WriteOptions, check_write_options, field_manager, header_str};
use super::request::{ObjectRequest, Verb, read_body};
use crate::cluster::Ownership;
use crate::patch::PatchType;
use crate::status::ApiError;

/// Serves `verb` on the `scale` of the object `r` names.
///
/// # Errors
/// `405` for a verb other than get, update and patch; the cluster's
/// errors.
pub(super) async fn handle(
    verb: Verb,
    r: &ObjectRequest<'_>,
    body: Body,
) -> Result<Response, ApiError> {
    let manager = field_manager(&r.query, r.parts);
    let owner = Ownership::Update(&manager);
    let scale = match verb {
        Verb::Get => r.shared.cluster().get_scale(&r.def, r.ns(), r.name())?,
        Verb::Update => {
            check_write_options(r.parts, WriteOptions::Update)?;
            let bytes = read_body(body).await?;
            r.shared.cluster().replace_scale(
                &r.def,
                r.ns(),
                r.name(),
                &bytes,
                r.dry_run,
                r.now,
                &owner,
            )?
        }
        Verb::Patch => {
            let kind = PatchType::from_content_type(header_str(r.parts, header::CONTENT_TYPE))?;
            check_write_options(r.parts, WriteOptions::Patch(kind == PatchType::Apply))?;
            let bytes = read_body(body).await?;
            r.shared.cluster().patch_scale(
                &r.def,
                r.ns(),
                r.name(),
                kind,
                &bytes,
                r.dry_run,
                r.now,
                &owner,
            )?
        }
        _ => return Err(ApiError::MethodNotAllowed),
    };
    Ok(json(StatusCode::OK, &scale))
}
