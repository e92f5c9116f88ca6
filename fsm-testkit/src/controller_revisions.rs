//! ControllerRevisions (`apps/v1`), validated as kube-apiserver 1.20's
//! `ValidateControllerRevision(Update)`: `data` is mandatory and, once
//! written, immutable; `revision` is not negative.

use serde_json::Value;

use crate::resources::ResourceDef;
use crate::status::{ApiError, Cause, Subject};

/// Validates the ControllerRevision `object` named `name` (after its
/// defaults), an update of `old` if given.
///
/// # Errors
/// `422 Invalid` with a cause per broken rule.
pub fn validate(
    def: &ResourceDef,
    name: &str,
    object: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let mut causes = Vec::new();
    let data = object.get("data").filter(|d| !d.is_null());
    if data.is_none() {
        causes.push(Cause::required("data", "data is mandatory"));
    }
    if let Some(revision) = object.get("revision").and_then(Value::as_i64)
        && revision < 0
    {
        causes.push(Cause {
            reason: "FieldValueInvalid".into(),
            message: format!("Invalid value: {revision}: must be greater than or equal to 0"),
            field: "revision".into(),
        });
    }
    if let Some(old) = old
        && old.get("data").filter(|d| !d.is_null()) != data
    {
        causes.push(Cause {
            reason: "FieldValueInvalid".into(),
            message: format!(
                "Invalid value: {}: field is immutable",
                data.cloned().unwrap_or(Value::Null)
            ),
            field: "data".into(),
        });
    }
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::Invalid(
        Subject::new(&def.group, &def.kind, name),
        causes,
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn data_is_mandatory_and_immutable_and_revisions_not_negative() {
        let def = ResourceDef::builtin(
            "apps",
            "v1",
            "ControllerRevision",
            "controllerrevisions",
            true,
        );
        let good = json!({"data": {"a": 1}, "revision": 1});
        assert!(validate(&def, "r", &good, None).is_ok());
        let bad = json!({"revision": -1});
        let ApiError::Invalid(_, causes) = validate(&def, "r", &bad, None).unwrap_err() else {
            panic!("not Invalid");
        };
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["data", "revision"]);
        let changed = json!({"data": {"a": 2}, "revision": 1});
        let ApiError::Invalid(_, causes) = validate(&def, "r", &changed, Some(&good)).unwrap_err()
        else {
            panic!("not Invalid");
        };
        assert_eq!(
            causes[0].message,
            r#"Invalid value: {"a":2}: field is immutable"#
        );
    }
}
