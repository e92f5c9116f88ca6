//! The storage version of a new `CustomResourceDefinition`, as 1.20
//! validates it: exactly one version marked `storage` (the cause prints
//! the versions as Go's `%#v` of its internal type), and the
//! `status.storedVersions` its create strategy derives from them (the
//! first storage version), checked against the versions.

use serde_json::Value;

use crate::status::Cause;

/// The message of a CRD without exactly one storage version.
const ONE_STORAGE: &str = "must have exactly one version marked as storage version";

/// The causes of `versions` (a CRD's `spec.versions`) that do not have
/// exactly one storage version: on `spec.versions`, then on
/// `status.storedVersions`.
#[must_use]
pub fn storage_causes(versions: &[Value]) -> Vec<Cause> {
    let storage: Vec<&Value> = versions.iter().filter(|v| is_storage(v)).collect();
    if versions.is_empty() {
        // The schema rules report a missing list; the stored versions
        // have nothing to be derived from.
        return vec![
            shown("spec.versions", "null", ONE_STORAGE),
            shown(
                "status.storedVersions",
                "[]string(nil)",
                "must have at least one stored version",
            ),
        ];
    }
    if storage.len() == 1 {
        return Vec::new();
    }
    let mut causes = vec![shown("spec.versions", &go_versions(versions), ONE_STORAGE)];
    match storage.split_first() {
        None => causes.push(shown(
            "status.storedVersions",
            "[]string(nil)",
            "must have at least one stored version",
        )),
        // The first is stored; every later one is missing from the list.
        Some((_, later)) => {
            for version in later {
                let name = version["name"].as_str().unwrap_or_default();
                causes.push(shown(
                    "status.storedVersions",
                    &go_version(version, versions),
                    &format!("must have the storage version {name}"),
                ));
            }
        }
    }
    causes
}

fn is_storage(version: &Value) -> bool {
    version["storage"].as_bool() == Some(true)
}

/// A `FieldValueInvalid` cause whose value is printed already.
fn shown(field: &str, value: &str, why: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {value}: {why}"),
        field: field.into(),
    }
}

/// `[]apiextensions.CustomResourceDefinitionVersion{…}`.
fn go_versions(versions: &[Value]) -> String {
    let inner: Vec<String> = versions.iter().map(|v| go_version(v, versions)).collect();
    format!(
        "[]apiextensions.CustomResourceDefinitionVersion{{{}}}",
        inner.join(", ")
    )
}

/// One version as Go prints the internal type. A schema, subresources or
/// columns that every version shares are moved to the spec by the
/// conversion from v1 (the version's pointer is nil); otherwise Go prints
/// an address, which no client can expect, shown here as `0xc000000000`.
fn go_version(version: &Value, all: &[Value]) -> String {
    let shared = |key: &str| all.iter().all(|v| v.get(key) == version.get(key));
    let pointer = |key: &str, ty: &str| {
        if shared(key) || version.get(key).is_none_or(Value::is_null) {
            format!("(*{ty})(nil)")
        } else {
            format!("(*{ty})(0xc000000000)")
        }
    };
    let columns = if shared("additionalPrinterColumns")
        || version
            .get("additionalPrinterColumns")
            .is_none_or(Value::is_null)
    {
        "[]apiextensions.CustomResourceColumnDefinition(nil)".to_string()
    } else {
        "[]apiextensions.CustomResourceColumnDefinition{…}".to_string()
    };
    let warning = match version.get("deprecationWarning") {
        Some(Value::String(_)) => "(*string)(0xc000000000)",
        _ => "(*string)(nil)",
    };
    format!(
        "apiextensions.CustomResourceDefinitionVersion{{Name:{:?}, Served:{}, Storage:{}, \
         Deprecated:{}, DeprecationWarning:{warning}, Schema:{}, Subresources:{}, \
         AdditionalPrinterColumns:{columns}}}",
        version["name"].as_str().unwrap_or_default(),
        version["served"].as_bool() == Some(true),
        is_storage(version),
        version["deprecated"].as_bool() == Some(true),
        pointer("schema", "apiextensions.CustomResourceValidation"),
        pointer("subresources", "apiextensions.CustomResourceSubresources"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn version(name: &str, storage: bool) -> Value {
        json!({"name": name, "served": true, "storage": storage,
               "schema": {"openAPIV3Schema": {"type": "object"}}})
    }

    #[test]
    fn one_storage_version_is_valid() {
        assert!(storage_causes(&[version("v1", true), version("v2", false)]).is_empty());
    }

    #[test]
    fn no_storage_version_has_no_stored_version() {
        let causes = storage_causes(&[version("v1", false)]);
        assert_eq!(causes.len(), 2);
        assert_eq!(
            causes[0].message,
            "Invalid value: []apiextensions.CustomResourceDefinitionVersion{apiextensions.CustomResourceDefinitionVersion{Name:\"v1\", Served:true, Storage:false, Deprecated:false, DeprecationWarning:(*string)(nil), Schema:(*apiextensions.CustomResourceValidation)(nil), Subresources:(*apiextensions.CustomResourceSubresources)(nil), AdditionalPrinterColumns:[]apiextensions.CustomResourceColumnDefinition(nil)}}: must have exactly one version marked as storage version"
        );
        assert_eq!(
            causes[1].message,
            "Invalid value: []string(nil): must have at least one stored version"
        );
    }

    #[test]
    fn a_second_storage_version_is_not_stored() {
        let causes = storage_causes(&[version("v1", true), version("v2", true)]);
        assert_eq!(causes[1].field, "status.storedVersions");
        assert!(
            causes[1]
                .message
                .ends_with("}: must have the storage version v2")
        );
    }
}
