//! The resource verbs over HTTP: get, list, watch, create, update, patch,
//! delete, deletecollection, on objects and their `status` subresource.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use http::request::Parts;
use http::{Method, StatusCode, header};
use serde_json::Value;

use super::json;
use super::route::ResourcePath;
use crate::cluster::{
    DeleteOptions, ListQuery, Ownership, Part, PatchOptions, ReadAt, ReadOptions,
    parse_resource_version,
};
use crate::limits;
use crate::patch::PatchType;
use crate::protobuf;
use crate::resources::ResourceDef;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::state::Shared;
use crate::status::{self, ApiError, Cause, Subject};
use crate::table::{self, IncludeObject};
use crate::validation;
use crate::watch::{Watch, WatchRequest};

/// Marks the response of a watch (a long-lived stream), so that a listener
/// going away can end it.
#[derive(Debug, Clone, Copy)]
pub struct WatchResponse;

/// A resource verb.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// Read one object.
    Get,
    /// Read a collection.
    List,
    /// Follow changes.
    Watch,
    /// Create an object.
    Create,
    /// Replace an object.
    Update,
    /// Patch an object.
    Patch,
    /// Delete an object.
    Delete,
    /// Delete a collection.
    DeleteCollection,
}

impl Verb {
    /// The verb's name in RBAC and audit logs.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::List => "list",
            Self::Watch => "watch",
            Self::Create => "create",
            Self::Update => "update",
            Self::Patch => "patch",
            Self::Delete => "delete",
            Self::DeleteCollection => "deletecollection",
        }
    }

    /// The verb of a method on a path (with or without an object name).
    ///
    /// # Errors
    /// [`ApiError::MethodNotAllowed`] for combinations the API does not have.
    ///
    /// `watch` counts only without a name: kube-apiserver decides a GET's
    /// verb from the name first, so a named GET with `?watch=true` is a
    /// plain GET (answered at once), never a watch held open.
    pub fn of(method: &Method, named: bool, watch: bool) -> Result<Self, ApiError> {
        Ok(match (method.as_str(), named) {
            ("GET", false) if watch => Self::Watch,
            ("GET", true) => Self::Get,
            ("GET", false) => Self::List,
            ("POST", false) => Self::Create,
            ("PUT", true) => Self::Update,
            ("PATCH", true) => Self::Patch,
            ("DELETE", true) => Self::Delete,
            ("DELETE", false) => Self::DeleteCollection,
            _ => return Err(ApiError::MethodNotAllowed),
        })
    }
}

/// The query parameters of a request, percent-decoded.
pub fn query_map(parts: &Parts) -> HashMap<String, String> {
    parts
        .uri
        .query()
        .map(|q| {
            url_decode_pairs(q)
                .into_iter()
                .collect::<HashMap<String, String>>()
        })
        .unwrap_or_default()
}

fn url_decode_pairs(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn flag(q: &HashMap<String, String>, key: &str) -> bool {
    matches!(q.get(key).map(String::as_str), Some("true" | "1"))
}

fn header_str(parts: &Parts, name: header::HeaderName) -> &str {
    parts
        .headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

/// The field manager of a write: `fieldManager`, else the User-Agent up to
/// its first `/`, without unprintable characters and cut at 128 bytes, as
/// the real server names it (`prefixFromUserAgent`); "unknown" when that
/// leaves nothing.
fn field_manager(q: &HashMap<String, String>, parts: &Parts) -> String {
    if let Some(m) = q.get("fieldManager").filter(|m| !m.is_empty()) {
        return m.clone();
    }
    let agent = header_str(parts, header::USER_AGENT);
    let manager = manager_from_user_agent(agent);
    if manager.is_empty() {
        "unknown".into()
    } else {
        manager
    }
}

fn manager_from_user_agent(agent: &str) -> String {
    let mut out = String::new();
    for c in agent.split('/').next().unwrap_or_default().chars() {
        if !is_printable(c) {
            continue;
        }
        if out.len() + c.len_utf8() > validation::FIELD_MANAGER_MAX_BYTES {
            break;
        }
        out.push(c);
    }
    out
}

/// Go's `unicode.IsPrint`, closely enough: no control characters, and
/// the ASCII space is the only space.
fn is_printable(c: char) -> bool {
    !(c.is_control() || (c.is_whitespace() && c != ' '))
}

/// Which options a write carries: `CreateOptions`, `UpdateOptions` or
/// `PatchOptions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WriteOptions {
    Create,
    Update,
    Patch(bool),
}

/// Validates a write's options as the real server does before it reads the
/// body: `fieldManager` (at most 128 bytes, printable), `dryRun` (only
/// `All`), and for a patch `force` (apply only) and `fieldManager`
/// (required for apply).
fn check_write_options(parts: &Parts, kind: WriteOptions) -> Result<(), ApiError> {
    let pairs = parts.uri.query().map(url_decode_pairs).unwrap_or_default();
    let values = |key: &str| -> Vec<&str> {
        pairs
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect()
    };
    let manager = values("fieldManager").first().copied().unwrap_or_default();
    let mut causes = Vec::new();
    if let WriteOptions::Patch(apply) = kind {
        if !apply && !values("force").is_empty() {
            causes.push(Cause::forbidden(
                "force",
                "may not be specified for non-apply patch",
            ));
        }
        if apply && manager.is_empty() {
            causes.push(Cause::required(
                "fieldManager",
                "is required for apply patch",
            ));
        }
    }
    if manager.len() > validation::FIELD_MANAGER_MAX_BYTES {
        causes.push(Cause {
            reason: "FieldValueTooLong".into(),
            message: format!(
                "Too long: must have at most {} bytes",
                validation::FIELD_MANAGER_MAX_BYTES
            ),
            field: "fieldManager".into(),
        });
    }
    for (i, c) in manager.char_indices() {
        if !is_printable(c) {
            causes.push(Cause::invalid(
                "fieldManager",
                manager,
                &format!("invalid character U+{:04X} (at position {i})", u32::from(c)),
            ));
        }
    }
    let dry_run = values("dryRun");
    if dry_run.iter().any(|d| *d != "All") {
        let listed: Vec<String> = dry_run.iter().map(|d| format!("{d:?}")).collect();
        causes.push(Cause {
            reason: "FieldValueNotSupported".into(),
            message: format!(
                "Unsupported value: []string{{{}}}: supported values: \"All\"",
                listed.join(", ")
            ),
            field: "dryRun".into(),
        });
    }
    if causes.is_empty() {
        return Ok(());
    }
    let options = match kind {
        WriteOptions::Create => "CreateOptions",
        WriteOptions::Update => "UpdateOptions",
        WriteOptions::Patch(_) => "PatchOptions",
    };
    Err(ApiError::Invalid(
        Subject::new("meta.k8s.io", options, ""),
        causes,
    ))
}

fn list_query(q: &HashMap<String, String>) -> Result<ListQuery, ApiError> {
    let labels = LabelSelector::parse(q.get("labelSelector").map_or("", String::as_str))?;
    let fields = FieldSelector::parse(q.get("fieldSelector").map_or("", String::as_str))?;
    let limit: Option<usize> = match q.get("limit") {
        Some(l) => Some(
            l.parse()
                .map_err(|_| ApiError::BadRequest(format!("invalid limit {l:?}")))?,
        ),
        None => None,
    };
    let continue_token = q.get("continue").filter(|c| !c.is_empty()).cloned();
    let at = read_options(q, false)
        .limited(limit.is_some_and(|l| l > 0))
        .read_at()?;
    Ok(ListQuery {
        labels,
        fields,
        limit,
        continue_token,
        at,
    })
}

/// The options of `q` that decide the revision of a read.
fn read_options(q: &HashMap<String, String>, watch: bool) -> ReadOptions<'_> {
    ReadOptions {
        resource_version: q.get("resourceVersion").map(String::as_str),
        resource_version_match: q.get("resourceVersionMatch").map(String::as_str),
        limited: false,
        continued: q.get("continue").is_some_and(|c| !c.is_empty()),
        watch,
        send_initial_events: q.contains_key("sendInitialEvents"),
    }
}

/// How long a read at a `resourceVersion` newer than the server's waits
/// for it before `504 Timeout` (the real server's watch cache waits 3 s).
const TOO_LARGE_WAIT: Duration = Duration::from_secs(3);

/// Waits until the store has reached `wanted` (`NotOlderThan`), at most
/// [`TOO_LARGE_WAIT`], as the real server's watch cache does.
///
/// # Errors
/// [`ApiError::ResourceVersionTooLarge`] when it does not arrive.
async fn wait_for_revision(shared: &Shared, at: ReadAt) -> Result<(), ApiError> {
    let ReadAt::NotOlderThan(wanted) = at else {
        return Ok(());
    };
    let deadline = tokio::time::Instant::now() + TOO_LARGE_WAIT;
    loop {
        let current = shared.cluster().store.revision();
        if current >= wanted {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(ApiError::ResourceVersionTooLarge(wanted, current));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Reads a request body of at most [`limits::MAX_REQUEST_BODY`] bytes; a
/// longer one is `413`, as on the real server (which stops reading there).
pub(super) async fn read_body(body: Body) -> Result<bytes::Bytes, ApiError> {
    use futures::StreamExt;
    let mut stream = body.into_data_stream();
    let mut buffer = bytes::BytesMut::new();
    while let Some(chunk) = stream.next().await {
        let chunk =
            chunk.map_err(|e| ApiError::BadRequest(format!("reading the request body: {e}")))?;
        if buffer.len() + chunk.len() > limits::MAX_REQUEST_BODY {
            return Err(limits::body_too_large());
        }
        buffer.extend_from_slice(&chunk);
    }
    Ok(buffer.freeze())
}

async fn read_object(parts: &Parts, body: Body, def: &ResourceDef) -> Result<Value, ApiError> {
    let ct = header_str(parts, header::CONTENT_TYPE);
    let essence = ct.split(';').next().unwrap_or_default().trim();
    // Built-in kinds also take Kubernetes protobuf, as kubectl's generators
    // (`kubectl create configmap …`) send it; custom resources do not.
    if essence == protobuf::MEDIA_TYPE {
        let bytes = read_body(body).await?;
        if def.custom {
            // The real server's protobuf decoder cannot fill an
            // unstructured object: it answers 400 (not 415).
            return Err(ApiError::BadRequest(format!(
                "{kind} in version {version:?} cannot be handled as a {kind}: Object 'Kind' is missing in 'object has no kind field '",
                kind = def.kind,
                version = def.version,
            )));
        }
        return protobuf::decode(&bytes).map_err(|e| {
            let shown: String = bytes.iter().take(64).map(|b| format!("{b:02x}")).collect();
            ApiError::BadRequest(format!(
                "the object provided is unrecognized (must be of type {}): {e} ({shown})",
                def.kind
            ))
        });
    }
    if !(essence.is_empty() || essence == "application/json" || essence == "*/*") {
        return Err(ApiError::UnsupportedMediaType(
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf".into(),
        ));
    }
    let bytes = read_body(body).await?;
    serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::BadRequest(format!("couldn't get version/kind; json parse error: {e}"))
    })
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
    def: &crate::resources::ResourceDef,
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
    def: &crate::resources::ResourceDef,
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

/// Serves a request on a resource path.
pub async fn handle(
    shared: &Arc<Shared>,
    parts: &Parts,
    body: Body,
    path: ResourcePath,
) -> Result<Response, ApiError> {
    let q = query_map(parts);
    let verb = Verb::of(&parts.method, path.name.is_some(), flag(&q, "watch"));
    let def = shared
        .cluster()
        .registry
        .get(&path.group, &path.version, &path.resource)
        .ok_or(ApiError::UnknownResource)?;
    let verb = verb?;
    let namespace = match (def.namespaced, &path.namespace) {
        (true, Some(ns)) => Some(ns.clone()),
        (true, None) if matches!(verb, Verb::List | Verb::Watch) && path.name.is_none() => None,
        (true, None) if path.name.is_some() => return Err(ApiError::UnknownResource),
        (true, None) => return Err(ApiError::MethodNotAllowed),
        (false, Some(_)) => return Err(ApiError::UnknownResource),
        (false, None) => None,
    };
    let ns = namespace.clone().unwrap_or_default();
    let part = match path.subresource.as_deref() {
        None => Part::Main,
        Some("status") if def.status_subresource => Part::Status,
        // The real server answers as if the object were missing.
        Some("status") => {
            return Err(ApiError::NotFound(Subject::new(
                &def.group,
                &def.plural,
                path.name.as_deref().unwrap_or_default(),
            )));
        }
        Some(_) => return Err(ApiError::UnknownResource),
    };
    if part == Part::Status && !matches!(verb, Verb::Get | Verb::Update | Verb::Patch) {
        return Err(ApiError::MethodNotAllowed);
    }
    let name = path.name.clone().unwrap_or_default();
    let dry_run = q.get("dryRun").is_some_and(|d| d == "All");
    let accept = header_str(parts, header::ACCEPT);
    let table = table::wanted(accept)
        .then(|| IncludeObject::parse(q.get("includeObject").map(String::as_str)));
    let now = jiff::Timestamp::now();
    let ok = |code: StatusCode, v: Value| Ok(json(code, &v));

    match verb {
        Verb::Get => {
            if let Some(rv) = q.get("resourceVersion").filter(|r| !r.is_empty()) {
                match parse_resource_version(rv)? {
                    0 => {}
                    n => wait_for_revision(shared, ReadAt::NotOlderThan(n)).await?,
                }
            }
            let obj = shared.cluster().get(&def, &ns, &name)?;
            match table {
                Some(include) => {
                    let rv = obj["metadata"]["resourceVersion"]
                        .as_str()
                        .map(String::from);
                    ok(
                        StatusCode::OK,
                        table::render(&def, &[obj], rv.as_deref(), include, now),
                    )
                }
                None => ok(StatusCode::OK, obj),
            }
        }
        Verb::List => {
            let query = list_query(&q)?;
            wait_for_revision(shared, query.at).await?;
            let list = shared.cluster().list(&def, namespace.as_deref(), &query)?;
            match table {
                Some(include) => {
                    let items = list["items"].as_array().cloned().unwrap_or_default();
                    let mut t = table::render(
                        &def,
                        &items,
                        list["metadata"]["resourceVersion"].as_str(),
                        include,
                        now,
                    );
                    if let Some(c) = list["metadata"].get("continue") {
                        t["metadata"]["continue"] = c.clone();
                    }
                    ok(StatusCode::OK, t)
                }
                None => ok(StatusCode::OK, list),
            }
        }
        Verb::Watch => {
            let mut selector = q.get("fieldSelector").cloned().unwrap_or_default();
            if let Some(n) = &path.name {
                if !selector.is_empty() {
                    selector.push(',');
                }
                selector.push_str(&format!("metadata.name={n}"));
            }
            let labels = LabelSelector::parse(q.get("labelSelector").map_or("", String::as_str))?;
            let fields = FieldSelector::parse(&selector)?;
            let resource_version = match read_options(&q, true).read_at()? {
                ReadAt::Latest => q
                    .get("resourceVersion")
                    .filter(|r| !r.is_empty())
                    .map(|_| 0),
                ReadAt::NotOlderThan(n) | ReadAt::Exact(n) => Some(n),
            };
            let timeout =
                match q.get("timeoutSeconds") {
                    Some(t) => Duration::from_secs(t.parse().map_err(|_| {
                        ApiError::BadRequest(format!("invalid timeoutSeconds {t:?}"))
                    })?),
                    None => shared.config.default_watch_timeout,
                };
            let req = WatchRequest {
                def: def.clone(),
                namespace,
                labels,
                fields,
                resource_version,
                send_initial_events: flag(&q, "sendInitialEvents"),
                bookmarks: flag(&q, "allowWatchBookmarks"),
                timeout,
                bookmark_interval: shared.config.bookmark_interval,
                table,
            };
            let watch = Watch::start(&shared.cluster(), req)?;
            let mut response = (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/json")],
                Body::from_stream(watch.into_stream()),
            )
                .into_response();
            response.extensions_mut().insert(WatchResponse);
            Ok(response)
        }
        Verb::Create => {
            check_write_options(parts, WriteOptions::Create)?;
            let mut obj = read_object(parts, body, &def).await?;
            let warnings = field_validation(shared, &def, &q, &mut obj)?;
            let manager = field_manager(&q, parts);
            let owner = Ownership::Update(&manager);
            let created = shared
                .cluster()
                .post_as(&def, &ns, obj, dry_run, now, &owner)?;
            run_garbage_collector(shared, &def, &created, dry_run);
            Ok(with_warnings(
                json(StatusCode::CREATED, &created),
                &warnings,
            ))
        }
        Verb::Update => {
            check_write_options(parts, WriteOptions::Update)?;
            let mut obj = read_object(parts, body, &def).await?;
            let warnings = field_validation(shared, &def, &q, &mut obj)?;
            let manager = field_manager(&q, parts);
            let owner = Ownership::Update(&manager);
            let (updated, created) = shared
                .cluster()
                .replace_as(&def, &ns, &name, obj, part, dry_run, now, &owner)?;
            run_garbage_collector(shared, &def, &updated, dry_run);
            let code = if created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok(with_warnings(json(code, &updated), &warnings))
        }
        Verb::Patch => {
            let kind = PatchType::from_content_type(header_str(parts, header::CONTENT_TYPE))?;
            check_write_options(parts, WriteOptions::Patch(kind == PatchType::Apply))?;
            let mut patch = read_body(body).await?;
            let warnings = patch_field_validation(shared, &def, &q, kind, &mut patch)?;
            let opts = PatchOptions {
                field_manager: match q.get("fieldManager") {
                    Some(m) => Some(m.clone()),
                    None if kind == PatchType::Apply => None,
                    None => Some(field_manager(&q, parts)),
                },
                force: flag(&q, "force"),
            };
            let (patched, created) = shared
                .cluster()
                .patch(&def, &ns, &name, kind, &patch, part, &opts, dry_run, now)?;
            run_garbage_collector(shared, &def, &patched, dry_run);
            let code = if created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok(with_warnings(json(code, &patched), &warnings))
        }
        Verb::Delete => {
            let opts = DeleteOptions::from_request(&read_body(body).await?, &q)?;
            let (obj, gone) = shared.cluster().delete(&def, &ns, &name, &opts, now)?;
            if def.group.is_empty() && def.kind == "Namespace" && !opts.dry_run {
                run_namespace_controller(shared);
            }
            if gone && !def.delete_returns_object {
                let uid = obj["metadata"]["uid"].as_str().unwrap_or_default();
                return ok(
                    StatusCode::OK,
                    status::deleted(&def.group, &def.plural, &name, uid),
                );
            }
            ok(StatusCode::OK, obj)
        }
        Verb::DeleteCollection => {
            let opts = DeleteOptions::from_request(&read_body(body).await?, &q)?;
            let list = shared.cluster().delete_collection(
                &def,
                namespace.as_deref(),
                &list_query(&q)?,
                &opts,
                now,
            )?;
            ok(StatusCode::OK, list)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_of_methods() {
        assert_eq!(Verb::of(&Method::GET, false, true).unwrap(), Verb::Watch);
        assert_eq!(Verb::of(&Method::GET, true, false).unwrap(), Verb::Get);
        // A named GET with ?watch=true is a GET, as on kube-apiserver.
        assert_eq!(Verb::of(&Method::GET, true, true).unwrap(), Verb::Get);
        assert_eq!(
            Verb::of(&Method::DELETE, false, false).unwrap(),
            Verb::DeleteCollection
        );
        assert!(Verb::of(&Method::POST, true, false).is_err());
        assert!(Verb::of(&Method::PUT, false, false).is_err());
    }

    #[test]
    fn query_decoding() {
        let pairs = url_decode_pairs("labelSelector=app%3Dweb%2Ctier+in+%28a%29&watch=1&x");
        assert_eq!(
            pairs[0],
            ("labelSelector".into(), "app=web,tier in (a)".into())
        );
        assert_eq!(pairs[1], ("watch".into(), "1".into()));
        assert_eq!(pairs[2], ("x".into(), String::new()));
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
    }
}
