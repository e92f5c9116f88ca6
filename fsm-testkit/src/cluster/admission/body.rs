//! The steps on the body as sent: its type, decoded as the real server
//! decodes it, and its metadata checked against the URL.

use serde_json::Value;

use super::super::meta::{check_namespace_field, check_type, name_mismatch, normalize_integers};
use super::super::metadata_rules::drop_unknown_metadata;
use super::{Admission, Flow, Target};
use crate::status::ApiError;

/// 400 for a body of another kind or group/version; a built-in kind's
/// `apiVersion` and `kind` filled in from the URL when left out.
pub(super) fn check_body_type(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    let def = a.write.def;
    check_type(def, &mut a.object)?;
    Ok(Flow::Next)
}

/// A built-in kind decoded against its type: 400 for a wrong JSON type,
/// unknown fields dropped.
pub(super) fn decode_typed(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    crate::typed::decode(a.write.def, &mut a.object)?;
    Ok(Flow::Next)
}

/// A custom resource's metadata decodes into `ObjectMeta`: its labels and
/// annotations are maps of strings, else 400 as the real decoder words it.
pub(super) fn decode_custom_metadata(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    let def = a.write.def;
    if !def.custom {
        return Ok(Flow::Next);
    }
    match crate::custom_metadata::decode_problem(&a.object["metadata"]) {
        None => Ok(Flow::Next),
        Some(problem) => Err(ApiError::BadRequest(format!(
            "{kind} in version {version:?} cannot be handled as a {kind}: {problem}",
            kind = def.kind,
            version = def.version
        ))),
    }
}

/// The kind's stored form (Events of either API are stored as core Events).
pub(super) fn convert_to_storage(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    if let Some(to_storage) = a.rules.to_storage {
        a.object = to_storage(a.write.def, std::mem::take(&mut a.object))?;
    }
    Ok(Flow::Next)
}

/// What the kind's decoder refuses (a Lease's times): 400.
pub(super) fn check_decoded(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    if let Some(check) = a.rules.check_decoded {
        check(a.write.def, &a.object)?;
    }
    Ok(Flow::Next)
}

/// A custom resource's integral numbers are written as integers.
pub(super) fn normalize_numbers(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    if a.def().custom {
        normalize_integers(&mut a.object);
    }
    Ok(Flow::Next)
}

/// An update's body may not name another object than the URL.
pub(super) fn check_url_name(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    let Target::Existing { name, .. } = a.write.target else {
        return Ok(Flow::Next);
    };
    match a.metadata()?.get("name").and_then(Value::as_str) {
        Some(n) if !n.is_empty() && n != name => Err(name_mismatch(n, name)),
        _ => Ok(Flow::Next),
    }
}

/// The body's namespace must be the URL's (a cluster-scoped object has none).
pub(super) fn check_namespace(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    let (def, ns) = (a.write.def, a.write.ns);
    check_namespace_field(def, a.metadata()?, ns)?;
    Ok(Flow::Next)
}

/// Metadata fields `ObjectMeta` does not have are dropped.
pub(super) fn drop_unknown_fields_of_metadata(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    drop_unknown_metadata(a.metadata()?);
    Ok(Flow::Next)
}
