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
    let mut obj = r.to_storage(obj).await?;
    let def = r.stored_def();
    let owner = Ownership::Update(&manager);
    if r.admission_configured() {
        let dry_run = |body: Value| {
            r.shared
                .cluster()
                .post_as(&def, r.ns(), body, true, r.now, &owner)
        };
        let dry = dry_run(obj.clone())?;
        if let Some(mutated) = r.admit("CREATE", Some(dry), None, &dry_run).await? {
            obj = mutated;
        }
    }
    let created = r
        .shared
        .cluster()
        .post_as(&def, r.ns(), obj, r.dry_run, r.now, &owner)?;
    run_garbage_collector(r.shared, &def, &created, r.dry_run);
    Ok(with_warnings(
        json(StatusCode::CREATED, &r.served(created).await?),
        &warnings,
    ))
}

/// `PUT`: replaces an object or its status (`201` when it creates one).
pub(super) async fn update(r: &ObjectRequest<'_>, body: Body) -> Result<Response, ApiError> {
    let (obj, warnings, manager) = read_written(r, WriteOptions::Update, body).await?;
    r.settle_stored_version().await?;
    let mut obj = r.to_storage(obj).await?;
    let def = r.stored_def();
    let owner = Ownership::Update(&manager);
    if r.admission_configured() {
        let dry_run = |body: Value| {
            r.shared
                .cluster()
                .replace_as(&def, r.ns(), r.name(), body, r.part, true, r.now, &owner)
                .map(|(o, _)| o)
        };
        let old = r.current().ok();
        let dry = dry_run(obj.clone())?;
        let operation = if old.is_some() { "UPDATE" } else { "CREATE" };
        if let Some(mutated) = r.admit(operation, Some(dry), old, &dry_run).await? {
            obj = mutated;
        }
    }
    let (updated, created) = r.shared.cluster().replace_as(
        &def,
        r.ns(),
        r.name(),
        obj,
        r.part,
        r.dry_run,
        r.now,
        &owner,
    )?;
    run_garbage_collector(r.shared, &def, &updated, r.dry_run);
    Ok(with_warnings(
        json(written(created), &r.served(updated).await?),
        &warnings,
    ))
}

/// `PATCH`: patches an object or its status; a server-side apply creates
/// an absent object (`201`).
pub(super) async fn patch(r: &ObjectRequest<'_>, body: Body) -> Result<Response, ApiError> {
    let q = &r.query;
    let kind = PatchType::from_content_type(header_str(r.parts, header::CONTENT_TYPE))?;
    check_write_options(r.parts, WriteOptions::Patch(kind == PatchType::Apply))?;
    let mut patch = read_body(body).await?;
    let warnings = patch_field_validation(r.shared, &r.def, q, kind, &mut patch)?;
    r.settle_stored_version().await?;
    let opts = PatchOptions {
        field_manager: match q.get("fieldManager") {
            Some(m) => Some(m.clone()),
            None if kind == PatchType::Apply => None,
            None => Some(field_manager(q, r.parts)),
        },
        force: flag(q, "force"),
    };
    // Server-side apply at the storage version is the cluster's own.
    let converting = r
        .conversion
        .as_ref()
        .is_some_and(|c| !(kind == PatchType::Apply && c.storage.version == r.def.version));
    if converting {
        return patch_converted(r, kind, &patch, &opts, &warnings).await;
    }
    let manager = opts.field_manager.clone().unwrap_or_default();
    let owner = Ownership::Update(&manager);
    let replace = |body: Value, dry_run: bool| {
        r.shared.cluster().replace_as(
            &r.def,
            r.ns(),
            r.name(),
            body,
            r.part,
            dry_run,
            r.now,
            &owner,
        )
    };
    let mut mutated = None;
    if r.admission_configured() {
        let (old, dry) = {
            let mut cluster = r.shared.cluster();
            let old = cluster.get(&r.def, r.ns(), r.name()).ok();
            let (dry, _) = cluster.patch(
                &r.def,
                r.ns(),
                r.name(),
                kind,
                &patch,
                r.part,
                &opts,
                true,
                r.now,
            )?;
            (old, dry)
        };
        let operation = if old.is_some() { "UPDATE" } else { "CREATE" };
        let dry_run = |body: Value| replace(body, true).map(|(o, _)| o);
        mutated = r.admit(operation, Some(dry), old, &dry_run).await?;
    }
    // A mutated object is written as an update of what the patch made.
    let (patched, created) = match mutated {
        Some(body) => replace(body, r.dry_run)?,
        None => r.shared.cluster().patch(
            &r.def,
            r.ns(),
            r.name(),
            kind,
            &patch,
            r.part,
            &opts,
            r.dry_run,
            r.now,
        )?,
    };
    run_garbage_collector(r.shared, &r.def, &patched, r.dry_run);
    Ok(with_warnings(json(written(created), &patched), &warnings))
}

/// A patch at a version that converts through a webhook: applied to the
/// object converted to that version, written back converted to the
/// storage version as an update at the resourceVersion read.
/// Server-side apply there is refused: its field ownership is kept per
/// version, which the embedded server does not imitate.
async fn patch_converted(
    r: &ObjectRequest<'_>,
    kind: PatchType,
    patch: &[u8],
    opts: &PatchOptions,
    warnings: &[String],
) -> Result<Response, ApiError> {
    if kind == PatchType::Apply {
        return Err(ApiError::BadRequest(format!(
            "server-side apply at {} (not the storage version of a CRD converting through a webhook) is not imitated by the embedded server",
            r.def.api_version()
        )));
    }
    let def = r.stored_def();
    let current = r.current()?;
    let mut target = r.served(current.clone()).await?;
    crate::patch::apply_patch(kind, &mut target, patch, &r.def)?;
    let mut obj = r.to_storage(target).await?;
    let manager = opts.field_manager.clone().unwrap_or_default();
    let owner = Ownership::Update(&manager);
    if r.admission_configured() {
        let dry_run = |body: Value| {
            r.shared
                .cluster()
                .replace_as(&def, r.ns(), r.name(), body, r.part, true, r.now, &owner)
                .map(|(o, _)| o)
        };
        let dry = dry_run(obj.clone())?;
        if let Some(mutated) = r
            .admit("UPDATE", Some(dry), Some(current), &dry_run)
            .await?
        {
            obj = mutated;
        }
    }
    let (patched, created) = r.shared.cluster().replace_as(
        &def,
        r.ns(),
        r.name(),
        obj,
        r.part,
        r.dry_run,
        r.now,
        &owner,
    )?;
    run_garbage_collector(r.shared, &def, &patched, r.dry_run);
    Ok(with_warnings(
        json(written(created), &r.served(patched).await?),
        warnings,
    ))
}

/// `DELETE` of an object: the object (while finalizers hold it, or for
/// the kinds the real server answers so), else a `Status` of success.
pub(super) async fn delete(r: &ObjectRequest<'_>, body: Body) -> Result<Response, ApiError> {
    let def = &r.stored_def();
    let opts = DeleteOptions::from_request(&read_body(body).await?, &r.query)?;
    if r.admission_configured() {
        let old = r.current()?;
        // Nothing to write again: a DELETE's object cannot be mutated.
        let nothing = |_: Value| Err(ApiError::MethodNotAllowed);
        r.admit("DELETE", None, Some(old), &nothing).await?;
    }
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
    Ok(json(StatusCode::OK, &r.served(obj).await?))
}

/// `DELETE` of a collection: the objects deleted.
pub(super) async fn delete_collection(
    r: &ObjectRequest<'_>,
    body: Body,
) -> Result<Response, ApiError> {
    let opts = DeleteOptions::from_request(&read_body(body).await?, &r.query)?;
    let list = r.shared.cluster().delete_collection(
        &r.stored_def(),
        r.namespace.as_deref(),
        &list_query(&r.query)?,
        &opts,
        r.now,
    )?;
    let list = match &r.conversion {
        Some(c) => c.list_to_served(&r.def, list).await?,
        None => list,
    };
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
