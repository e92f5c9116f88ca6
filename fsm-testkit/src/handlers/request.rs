//! A request on a resource path, resolved: its verb, the resource and
//! object it names, and what every verb reads of it; and its body, read
//! within the size limit and decoded.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Body;
use http::request::Parts;
use http::{Method, header};
use serde_json::Value;

use super::query::{flag, header_str, query_map};
use super::route::ResourcePath;
use crate::cluster::Part;
use crate::limits;
use crate::protobuf;
use crate::resources::ResourceDef;
use crate::state::Shared;
use crate::status::{ApiError, Subject};
use crate::table::{self, IncludeObject};

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

/// A request on an object or a collection, resolved against the served
/// resources.
pub(super) struct ObjectRequest<'a> {
    /// What every request shares.
    pub(super) shared: &'a Arc<Shared>,
    /// The request's method, URI and headers.
    pub(super) parts: &'a Parts,
    /// The query parameters.
    pub(super) query: HashMap<String, String>,
    /// The resource.
    pub(super) def: Arc<ResourceDef>,
    /// The namespace on the URL; `None` for a cluster-scoped resource, or a
    /// list or watch across namespaces.
    pub(super) namespace: Option<String>,
    /// The object's name on the URL, if any.
    pub(super) name: Option<String>,
    /// The object or its `status` subresource.
    pub(super) part: Part,
    /// Whether the path names the object's `scale` subresource.
    pub(super) scale: bool,
    /// `dryRun=All`.
    pub(super) dry_run: bool,
    /// Whether the client asked for a table, and with what objects.
    pub(super) table: Option<IncludeObject>,
    /// The time the request is served at.
    pub(super) now: jiff::Timestamp,
    /// How objects convert between the version requested and the
    /// storage version (a CRD with a conversion webhook), if they do.
    pub(super) conversion: Option<super::conversion::Converting>,
}

impl ObjectRequest<'_> {
    /// The namespace on the URL, or "".
    pub(super) fn ns(&self) -> &str {
        self.namespace.as_deref().unwrap_or_default()
    }

    /// The object's name on the URL, or "".
    pub(super) fn name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }
}

/// Resolves a request on `path`: its verb, resource, namespace and part.
///
/// # Errors
/// `NotFound` (an unknown resource, `status` of a resource without
/// the subresource, `scale` of one without a scale), `MethodNotAllowed` (a method the path does not take).
pub(super) fn resolve<'a>(
    shared: &'a Arc<Shared>,
    parts: &'a Parts,
    path: ResourcePath,
) -> Result<(Verb, ObjectRequest<'a>), ApiError> {
    let query = query_map(parts);
    let verb = Verb::of(&parts.method, path.name.is_some(), flag(&query, "watch"));
    let def = shared
        .cluster()
        .registry
        .get(&path.group, &path.version, &path.resource)
        .ok_or(ApiError::UnknownResource)?;
    let verb = verb?;
    let namespace = match (def.namespaced, path.namespace) {
        (true, Some(ns)) => Some(ns),
        (true, None) if matches!(verb, Verb::List | Verb::Watch) && path.name.is_none() => None,
        (true, None) if path.name.is_some() => return Err(ApiError::UnknownResource),
        (true, None) => return Err(ApiError::MethodNotAllowed),
        (false, Some(_)) => return Err(ApiError::UnknownResource),
        (false, None) => None,
    };
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
        Some("scale") if def.scale.is_some() => Part::Main,
        Some(_) => return Err(ApiError::UnknownResource),
    };
    let scale = path.subresource.as_deref() == Some("scale");
    if scale && !matches!(verb, Verb::Get | Verb::Update | Verb::Patch) {
        return Err(ApiError::MethodNotAllowed);
    }
    if part == Part::Status && !matches!(verb, Verb::Get | Verb::Update | Verb::Patch) {
        return Err(ApiError::MethodNotAllowed);
    }
    let dry_run = query.get("dryRun").is_some_and(|d| d == "All");
    let table = table::wanted(header_str(parts, header::ACCEPT))
        .then(|| IncludeObject::parse(query.get("includeObject").map(String::as_str)));
    let conversion = super::conversion::of(&shared.cluster(), &def);
    let request = ObjectRequest {
        conversion,
        shared,
        parts,
        query,
        def,
        namespace,
        name: path.name,
        part,
        scale,
        dry_run,
        table,
        now: jiff::Timestamp::now(),
    };
    Ok((verb, request))
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

/// A YAML document (JSON is YAML too) as a JSON value.
///
/// # Errors
/// The parser's message when `bytes` is not YAML or not one object.
fn yaml_object(bytes: &[u8]) -> Result<serde_json::Value, String> {
    let value: serde_json::Value = serde_yaml_ng::from_slice(bytes).map_err(|e| e.to_string())?;
    if value.is_object() {
        Ok(value)
    } else {
        Err("the document is not an object".into())
    }
}

/// Reads the body of a create or an update: JSON, YAML, or protobuf for a
/// built-in kind.
pub(super) async fn read_object(
    parts: &Parts,
    body: Body,
    def: &ResourceDef,
) -> Result<Value, ApiError> {
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
    if essence == "application/yaml" {
        let bytes = read_body(body).await?;
        return yaml_object(&bytes).map_err(|e| {
            let shown: String = bytes.iter().take(30).map(|b| format!("{b:02x}")).collect();
            ApiError::BadRequest(format!(
                "the object provided is unrecognized (must be of type {}): yaml: {e} ({shown} ...)",
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
}
