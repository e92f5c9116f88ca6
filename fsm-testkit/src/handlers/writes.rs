//! The write verbs over HTTP: create, update, patch, delete and
//! deletecollection. A write's options are validated before its body is
//! read; its body's unknown fields are refused, dropped or warned about as
//! `fieldValidation` says; the cluster's admission chain does the rest.
//! What a write sets off runs after it: the garbage collector's look at
//! the written object, the namespace controller after a namespace's
//! deletion.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use http::{StatusCode, header};
use serde_json::Value;

use super::json;
use super::query::{
    WriteOptions, check_write_options, field_manager, flag, header_str, list_query,
};
use super::request::{ObjectRequest, read_body, read_object};
use crate::cluster::{DeleteOptions, Ownership, PatchOptions};
use crate::patch::PatchType;
use crate::resources::ResourceDef;
use crate::state::Shared;
use crate::status::{self, ApiError};

/// `POST`: creates an object (`201`).
pub(super) async fn create(r: &ObjectRequest<'_>, body: Body) -> Result<Response, ApiError> {
    let (obj, warnings, manager) = read_written(r, WriteOptions::Create, body).await?;
    let owner = Ownership::Update(&manager);
    let created = r
        .shared
        .cluster()
        .post_as(&r.def, r.ns(), obj, r.dry_run, r.now, &owner)?;
    run_garbage_collector(r.shared, &r.def, &created, r.dry_run);
    Ok(with_warnings(
        json(StatusCode::CREATED, &created),
        &warnings,
    ))
}

/// `PUT`: replaces an object or its status (`201` when it creates one).
pub(super) async fn update(r: &ObjectRequest<'_>, body: Body) -> Result<Response, ApiError> {
    let (obj, warnings, manager) = read_written(r, WriteOptions::Update, body).await?;
    let owner = Ownership::Update(&manager);
    let (updated, created) = r.shared.cluster().replace_as(
        &r.def,
        r.ns(),
        r.name(),
        obj,
        r.part,
        r.dry_run,
        r.now,
        &owner,
    )?;
    run_garbage_collector(r.shared, &r.def, &updated, r.dry_run);
    Ok(with_warnings(json(written(created), &updated), &warnings))
}

/// `PATCH`: patches an object or its status; a server-side apply creates
/// an absent object (`201`).
pub(super) async fn patch(r: &ObjectRequest<'_>, body: Body) -> Result<Response, ApiError> {
    let q = &r.query;
    let kind = PatchType::from_content_type(header_str(r.parts, header::CONTENT_TYPE))?;
    check_write_options(r.parts, WriteOptions::Patch(kind == PatchType::Apply))?;
    let mut patch = read_body(body).await?;
    let warnings = patch_field_validation(r.shared, &r.def, q, kind, &mut patch)?;
    let opts = PatchOptions {
        field_manager: match q.get("fieldManager") {
            Some(m) => Some(m.clone()),
            None if kind == PatchType::Apply => None,
            None => Some(field_manager(q, r.parts)),
        },
        force: flag(q, "force"),
    };
    let (patched, created) = r.shared.cluster().patch(
        &r.def,
        r.ns(),
        r.name(),
        kind,
        &patch,
        r.part,
        &opts,
        r.dry_run,
        r.now,
    )?;
    run_garbage_collector(r.shared, &r.def, &patched, r.dry_run);
    Ok(with_warnings(json(written(created), &patched), &warnings))
}

/// `DELETE` of an object: the object (while finalizers hold it, or for
/// the kinds the real server answers so), else a `Status` of success.
pub(super) async fn delete(r: &ObjectRequest<'_>, body: Body) -> Result<Response, ApiError> {
    let def = &r.def;
    let opts = DeleteOptions::from_request(&read_body(body).await?, &r.query)?;
    let (obj, gone) = r
        .shared
        .cluster()
        .delete(def, r.ns(), r.name(), &opts, r.now)?;
    if def.group.is_empty() && def.kind == "Namespace" && !opts.dry_run {
        run_namespace_controller(r.shared);
    }
    if gone && !def.delete_returns_object {
        let uid = obj["metadata"]["uid"].as_str().unwrap_or_default();
        let deleted = status::deleted(&def.group, &def.plural, r.name(), uid);
        return Ok(json(StatusCode::OK, &deleted));
    }
    Ok(json(StatusCode::OK, &obj))
}

/// `DELETE` of a collection: the objects deleted.
pub(super) async fn delete_collection(
    r: &ObjectRequest<'_>,
    body: Body,
) -> Result<Response, ApiError> {
    let opts = DeleteOptions::from_request(&read_body(body).await?, &r.query)?;
    let list = r.shared.cluster().delete_collection(
        &r.def,
        r.namespace.as_deref(),
        &list_query(&r.query)?,
        &opts,
        r.now,
    )?;
    Ok(json(StatusCode::OK, &list))
}

/// The body of a create or an update, read once its `options` pass, with
/// the warnings about its unknown fields ([`field_validation`]) and the
/// write's field manager.
async fn read_written(
    r: &ObjectRequest<'_>,
    options: WriteOptions,
    body: Body,
) -> Result<(Value, Vec<String>, String), ApiError> {
    check_write_options(r.parts, options)?;
    let mut obj = read_object(r.parts, body, &r.def).await?;
    let warnings = field_validation(r.shared, &r.def, &r.query, &mut obj)?;
    Ok((obj, warnings, field_manager(&r.query, r.parts)))
}

/// The status of a write that may create: `201` if it did.
fn written(created: bool) -> StatusCode {
    if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    }
}

/// Runs the namespace controller after the configured delay, as the real
/// one empties a terminating namespace asynchronously.
fn run_namespace_controller(shared: &Arc<Shared>) {
    let shared = shared.clone();
    tokio::spawn(async move {
        tokio::time::sleep(shared.config.namespace_controller_delay).await;
        let removed = shared.cluster().finalize_namespaces(jiff::Timestamp::now());
        tracing::debug!(?removed, "namespace controller ran");
    });
}

/// The `fieldValidation` of a create or update: the body's fields that
/// the kind's published schema does not know ([`crate::openapi::drop_unknown_fields`])
/// refuse the request under `Strict` (`400`, worded as the real server's
/// strict decoding error); otherwise they are dropped (as decoding into the
/// real server's types drops them) and, under `Warn` (the default),
/// returned to be sent as warnings.
fn field_validation(
    shared: &Arc<Shared>,
    def: &ResourceDef,
    q: &HashMap<String, String>,
    obj: &mut Value,
) -> Result<Vec<String>, ApiError> {
    let directive = q.get("fieldValidation").map_or("Warn", String::as_str);
    let unknown = crate::openapi::drop_unknown_fields(&shared.cluster().store, def, obj);
    if directive == "Ignore" {
        return Ok(Vec::new());
    }
    let listed: Vec<String> = unknown
        .iter()
        .map(|f| format!("unknown field {f:?}"))
        .collect();
    if directive == "Strict" && !listed.is_empty() {
        return Err(ApiError::BadRequest(format!(
            "{kind} in version {version:?} cannot be handled as a {kind}: strict decoding error: {}",
            listed.join(", "),
            kind = def.kind,
            version = def.version,
        )));
    }
    Ok(listed)
}

/// The `fieldValidation` of a merge or strategic merge patch: its unknown
/// fields ([`crate::openapi::drop_unknown_patch_fields`]) are refused under
/// `Strict` (`400`), else dropped and, under `Warn`, returned as warnings.
/// JSON patches and apply patches are not checked; a body that is not JSON
/// is left to the patch's own error.
fn patch_field_validation(
    shared: &Arc<Shared>,
    def: &ResourceDef,
    q: &HashMap<String, String>,
    kind: PatchType,
    patch: &mut bytes::Bytes,
) -> Result<Vec<String>, ApiError> {
    if !matches!(kind, PatchType::Merge | PatchType::StrategicMerge) {
        return Ok(Vec::new());
    }
    let Ok(mut value) = serde_json::from_slice::<Value>(patch) else {
        return Ok(Vec::new());
    };
    let unknown =
        crate::openapi::drop_unknown_patch_fields(&shared.cluster().store, def, &mut value);
    if unknown.is_empty() {
        return Ok(Vec::new());
    }
    let listed: Vec<String> = unknown
        .iter()
        .map(|f| format!("unknown field {f:?}"))
        .collect();
    match q.get("fieldValidation").map_or("Warn", String::as_str) {
        "Strict" => Err(ApiError::BadRequest(format!(
            "strict decoding error: {}",
            listed.join(", ")
        ))),
        directive => {
            *patch = bytes::Bytes::from(value.to_string());
            Ok(if directive == "Ignore" {
                Vec::new()
            } else {
                listed
            })
        }
    }
}

/// Adds a `Warning` header (`299 - "<text>"`) per warning.
fn with_warnings(mut response: Response, warnings: &[String]) -> Response {
    for w in warnings {
        let text = format!("299 - {w:?}");
        if let Ok(value) = http::HeaderValue::from_str(&text) {
            response.headers_mut().append(header::WARNING, value);
        }
    }
    response
}

/// How long after a write of an object with owner references the garbage
/// collector looks for dangling ones (the real one takes about as long).
const GARBAGE_COLLECTOR_DELAY: Duration = Duration::from_millis(200);

/// Schedules the garbage collector's look for dangling owner references
/// at the object a write stored ([`crate::cluster::Cluster::collect_dangling_of`]),
/// after a write that stored `written` (of `def`) with owner references.
/// Only that object: one that becomes dangling later, when an owner goes,
/// is collected by that deletion, so a write costs the same however many
/// objects are stored.
fn run_garbage_collector(
    shared: &Arc<Shared>,
    def: &ResourceDef,
    written: &serde_json::Value,
    dry_run: bool,
) {
    if dry_run
        || written["metadata"]["ownerReferences"]
            .as_array()
            .is_none_or(Vec::is_empty)
    {
        return;
    }
    let shared = shared.clone();
    let gr = def.group_resource();
    let text = |k: &str| {
        written["metadata"][k]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let (ns, name) = (text("namespace"), text("name"));
    tokio::spawn(async move {
        tokio::time::sleep(GARBAGE_COLLECTOR_DELAY).await;
        let touched = shared
            .cluster()
            .collect_dangling_of(&gr, &ns, &name, jiff::Timestamp::now());
        tracing::debug!(touched, %name, "garbage collector looked for dangling owner references");
    });
}
