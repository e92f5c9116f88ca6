//! Patch types and their application.
//!
//! - JSON merge patch (RFC 7386): [`merge`].
//! - JSON patch (RFC 6902, with `test`): [`json`].
//! - Strategic merge patch for the built-in kinds: [`strategic`] (which
//!   lists merge by which key); custom resources answer `415`, as on a real
//!   server.
//! - Server-side apply (`application/apply-patch+yaml`, with a JSON body):
//!   [`apply`], with field ownership in `metadata.managedFields`
//!   ([`managed_fields`]). Applying is not a function of the object alone
//!   (it creates absent objects and needs the field manager), so the
//!   cluster runs it, not [`apply_patch`].

pub mod apply;
pub mod json;
pub mod list_rules;
pub mod managed_fields;
pub mod strategic;

use serde_json::{Map, Value};

use crate::resources::ResourceDef;
use crate::status::ApiError;

/// The patch types of the Kubernetes API, by `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/strategic-merge-patch+json`.
    StrategicMerge,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

/// The patch content types this server applies (to every kind).
pub const SUPPORTED: &str =
    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml";

impl PatchType {
    /// The patch type of a `Content-Type` header value.
    ///
    /// # Errors
    /// [`ApiError::UnsupportedMediaType`] for anything that is not a patch type.
    pub fn from_content_type(content_type: &str) -> Result<Self, ApiError> {
        let essence = content_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        match essence.as_str() {
            "application/merge-patch+json" => Ok(Self::Merge),
            "application/json-patch+json" => Ok(Self::Json),
            "application/strategic-merge-patch+json" => Ok(Self::StrategicMerge),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => Ok(Self::Apply),
            _ => Err(unsupported(content_type)),
        }
    }
}

fn unsupported(what: &str) -> ApiError {
    ApiError::UnsupportedMediaType(format!(
        "the body of the request was in an unknown format ({what}) - accepted media types include: {SUPPORTED}"
    ))
}

/// Applies `patch` of type `kind` to `target`, an object of `def`.
///
/// # Errors
/// [`ApiError::BadRequest`] when the patch is not valid JSON for its type;
/// [`ApiError::Unprocessable`] when a JSON patch operation cannot be
/// applied; [`ApiError::UnsupportedMediaType`] for a strategic merge patch
/// of a custom resource, and for server-side apply (which the cluster runs
/// itself).
pub fn apply_patch(
    kind: PatchType,
    target: &mut Value,
    patch: &[u8],
    def: &ResourceDef,
) -> Result<(), ApiError> {
    let object = || -> Result<Value, ApiError> {
        let patch: Value = serde_json::from_slice(patch)
            .map_err(|e| ApiError::BadRequest(format!("error decoding patch: {e}")))?;
        if patch.is_object() {
            Ok(patch)
        } else {
            Err(ApiError::BadRequest(
                "error decoding patch: the patch must be a JSON object".into(),
            ))
        }
    };
    match kind {
        PatchType::Merge => {
            merge(target, &object()?);
            Ok(())
        }
        PatchType::Json => json::apply(target, patch),
        PatchType::StrategicMerge if def.custom => {
            Err(unsupported("application/strategic-merge-patch+json"))
        }
        PatchType::StrategicMerge => strategic::apply(def, target, &object()?),
        PatchType::Apply => Err(unsupported("application/apply-patch+yaml")),
    }
}

/// RFC 7386 JSON merge patch: objects merge key by key, `null` removes a
/// key, anything else replaces.
pub fn merge(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            if let Value::Object(t) = target {
                for (k, v) in p {
                    if v.is_null() {
                        t.remove(k);
                    } else {
                        merge(t.entry(k.clone()).or_insert(Value::Null), v);
                    }
                }
            }
        }
        other => *target = other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rfc7386_examples() {
        let cases = [
            (json!({"a":"b"}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"b"}), json!({"b":"c"}), json!({"a":"b","b":"c"})),
            (json!({"a":"b"}), json!({"a":null}), json!({})),
            (
                json!({"a":"b","b":"c"}),
                json!({"a":null}),
                json!({"b":"c"}),
            ),
            (json!({"a":["b"]}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"c"}), json!({"a":["b"]}), json!({"a":["b"]})),
            (
                json!({"a":{"b":"c"}}),
                json!({"a":{"b":"d","c":null}}),
                json!({"a":{"b":"d"}}),
            ),
            (json!({"a":[{"b":"c"}]}), json!({"a":[1]}), json!({"a":[1]})),
            (json!({"e":null}), json!({"a":1}), json!({"e":null,"a":1})),
            (json!([1, 2]), json!({"a":"b","c":null}), json!({"a":"b"})),
            (
                json!({}),
                json!({"a":{"bb":{"ccc":null}}}),
                json!({"a":{"bb":{}}}),
            ),
        ];
        for (mut target, patch, want) in cases {
            merge(&mut target, &patch);
            assert_eq!(target, want, "patch {patch}");
        }
    }

    #[test]
    fn content_types() {
        assert_eq!(
            PatchType::from_content_type("application/merge-patch+json; charset=utf-8").unwrap(),
            PatchType::Merge
        );
        assert_eq!(
            PatchType::from_content_type("application/apply-patch+yaml").unwrap(),
            PatchType::Apply
        );
        assert!(PatchType::from_content_type("text/plain").is_err());
        let mut v = json!({});
        let custom = crate::internals::patch::custom();
        let pod = crate::internals::patch::builtin("Pod").unwrap();
        let e = apply_patch(PatchType::StrategicMerge, &mut v, b"{}", &custom).unwrap_err();
        assert_eq!(e.reason(), "UnsupportedMediaType");
        apply_patch(PatchType::StrategicMerge, &mut v, b"{}", pod).unwrap();
        apply_patch(PatchType::Json, &mut v, b"[]", &custom).unwrap();
        assert!(apply_patch(PatchType::Merge, &mut v, b"{not json", pod).is_err());
        assert!(apply_patch(PatchType::Merge, &mut v, b"[1]", pod).is_err());
        assert!(apply_patch(PatchType::StrategicMerge, &mut v, b"[1]", pod).is_err());
    }
}
