//! Reading and checking object metadata and type fields.

use serde_json::{Map, Value, json};

use crate::resources::ResourceDef;
use crate::status::ApiError;

/// Checks the body of a create or an update is an object of `def`'s kind
/// and group/version. A built-in kind's body may leave `apiVersion` and
/// `kind` out: the real server's decoder takes them from the URL, and so
/// they are filled in here; a custom resource's must name its kind.
pub(super) fn check_type(def: &ResourceDef, body: &mut Value) -> Result<(), ApiError> {
    let Some(obj) = body.as_object_mut() else {
        return Err(ApiError::BadRequest(
            "the body of the request must be a JSON object".into(),
        ));
    };
    if !def.custom {
        for (field, value) in [
            ("kind", def.kind.clone()),
            ("apiVersion", def.api_version()),
        ] {
            let absent = obj
                .get(field)
                .and_then(Value::as_str)
                .is_none_or(str::is_empty);
            if absent {
                obj.insert(field.into(), Value::String(value));
            }
        }
    }
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
    if kind.is_empty() {
        return Err(ApiError::BadRequest(
            "Object 'Kind' is missing in the request body".into(),
        ));
    }
    let api_version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if def.custom {
        if api_version != def.api_version() {
            return Err(ApiError::BadRequest(format!(
                "the API version in the data ({api_version}) does not match the expected API version ({})",
                def.api_version()
            )));
        }
        if kind != def.kind {
            return Err(ApiError::BadRequest(format!(
                "the kind in the data ({kind}) does not match the expected kind ({}) of the resource {}",
                def.kind, def.plural
            )));
        }
        return Ok(());
    }
    // The real server's decoder, in its words.
    let cannot = |why: String| {
        ApiError::BadRequest(format!(
            "{kind} in version {version:?} cannot be handled as a {expected}: {why}",
            version = def.version,
            expected = def.kind
        ))
    };
    if api_version != def.api_version() {
        return Err(cannot(format!(
            "no kind {kind:?} is registered for version {api_version:?} in scheme \"k8s.io/kubernetes/pkg/api/legacyscheme/scheme.go:30\""
        )));
    }
    if kind != def.kind {
        return Err(cannot(format!(
            "converting ({version}.{kind}) to ({internal}.{expected}): unknown conversion",
            version = def.version,
            internal = internal_package(&def.group),
            expected = def.kind
        )));
    }
    Ok(())
}

/// The Go package of a group's internal types, as the real server's
/// conversion errors name it (`core.ConfigMap`, `apps.Deployment`).
fn internal_package(group: &str) -> &str {
    match group {
        "" => "core",
        g => g.split('.').next().unwrap_or(g),
    }
}

/// Checks an apply configuration names `def`'s group/version and kind, as
/// the real server's field manager does: another or no `apiVersion` is
/// `400`, no `kind` a `500` (it finds no type to apply).
pub(super) fn check_apply_type(def: &ResourceDef, config: &Value) -> Result<(), ApiError> {
    let Some(obj) = config.as_object() else {
        return Err(ApiError::BadRequest(
            "the body of the request must be a JSON object".into(),
        ));
    };
    let api_version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if api_version != def.api_version() {
        return Err(ApiError::BadRequest(format!(
            "Incorrect version specified in apply patch. Specified patch version: {api_version}, expected: {}",
            def.api_version()
        )));
    }
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
    if kind.is_empty() {
        return Err(ApiError::Storage(format!(
            "failed to create typed patch object: no corresponding type for {}/{}, Kind=",
            def.group, def.version
        )));
    }
    if kind != def.kind {
        return Err(ApiError::BadRequest(format!(
            "the kind in the data ({kind}) does not match the expected kind ({}) of the resource {}",
            def.kind, def.plural
        )));
    }
    Ok(())
}

/// The answer to a body naming another object than the URL.
pub(super) fn name_mismatch(in_body: &str, on_url: &str) -> ApiError {
    ApiError::BadRequest(format!(
        "the name of the object ({in_body}) does not match the name on the URL ({on_url})"
    ))
}

pub(super) fn metadata_mut(body: &mut Value) -> Result<&mut Map<String, Value>, ApiError> {
    let obj = body.as_object_mut().ok_or_else(|| {
        ApiError::BadRequest("the body of the request must be a JSON object".into())
    })?;
    let meta = obj
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    meta.as_object_mut()
        .ok_or_else(|| ApiError::BadRequest("metadata must be a JSON object".into()))
}

pub(super) fn check_namespace_field(
    def: &ResourceDef,
    meta: &mut Map<String, Value>,
    ns: &str,
) -> Result<(), ApiError> {
    if !def.namespaced {
        meta.remove("namespace");
        return Ok(());
    }
    match meta.get("namespace").and_then(Value::as_str) {
        Some(given) if !given.is_empty() && given != ns => Err(ApiError::BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request"
                .into(),
        )),
        _ => {
            meta.insert("namespace".into(), json!(ns));
            Ok(())
        }
    }
}

pub(super) fn copy_field(from: &Value, to: &mut Value, field: &str) {
    let Some(to) = to.as_object_mut() else {
        return;
    };
    match from.get(field) {
        Some(v) => to.insert(field.into(), v.clone()),
        None => to.remove(field),
    };
}

/// Whether anything outside `metadata` (and `status`, when it is a
/// subresource) differs: the changes that bump `generation`.
pub(super) fn spec_changed(old: &Value, new: &Value, status_is_subresource: bool) -> bool {
    let strip = |v: &Value| -> Map<String, Value> {
        v.as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| match k.as_str() {
                        "metadata" | "apiVersion" | "kind" => false,
                        "status" => !status_is_subresource,
                        _ => true,
                    })
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    strip(old) != strip(new)
}

pub(super) fn finalizers(object: &Value) -> Vec<String> {
    object["metadata"]["finalizers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// A string field of `metadata`, or "".
pub(super) fn str_at<'a>(object: &'a Value, field: &str) -> &'a str {
    object["metadata"][field].as_str().unwrap_or_default()
}

/// Gives `new` the apiVersion `current` was stored with (unless there is
/// none) and `def`'s kind.
pub(super) fn set_type(def: &ResourceDef, new: &mut Value, current: &Value) {
    // Keep the version the object was stored with unless the writer named another.
    let api_version = current
        .get("apiVersion")
        .cloned()
        .unwrap_or_else(|| json!(def.api_version()));
    if let Some(m) = new.as_object_mut() {
        m.insert("apiVersion".into(), api_version);
        m.insert("kind".into(), json!(def.kind));
    }
}

/// Writes integral numbers as integers (`2.0` → `2`), as the real server
/// re-encodes a custom resource (its JSON decoder reads numbers into
/// `int64` or `float64`, and Go writes an integral `float64` without a
/// fraction).
pub(super) fn normalize_integers(v: &mut Value) {
    match v {
        Value::Number(n) if !n.is_i64() && !n.is_u64() => {
            if let Some(f) = n.as_f64()
                && f.fract() == 0.0
                && f.abs() < 9.0e15
            {
                #[allow(clippy::cast_possible_truncation)]
                let i = f as i64;
                *v = json!(i);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalize_integers),
        Value::Object(m) => m.values_mut().for_each(normalize_integers),
        _ => {}
    }
}
