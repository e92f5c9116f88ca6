//! What kube-apiserver 1.20 checks in a `CustomResourceDefinition`'s
//! versions beyond its names (those are `crd::definitions`): a schema for
//! every version, structural schemas (a `type` everywhere, `items` for
//! arrays), defaults valid by their own schemas, printer columns, scale
//! subresource paths; and in an update: `group` and `scope` unchanged,
//! every stored version still in `spec.versions`.
//!
//! Where the real server reports a problem depends on its internal form
//! of the CRD: a schema, subresources or columns that every version has
//! alike are lifted to the top (`spec.validation.openAPIV3Schema`,
//! `spec.subresources`, `spec.additionalPrinterColumns`) and reported
//! there, after the per-version problems (`spec.versions[i]…`) of those
//! that differ.

use serde_json::Value;

use crate::schema;
use crate::status::Cause;
use crate::validation::field::{FieldErrors, go_string, index};

/// The column types (sorted, as Go lists a set).
const COLUMN_TYPES: &str = "boolean,date,integer,number,string";
/// The column formats (sorted).
const COLUMN_FORMATS: [&str; 8] = [
    "byte",
    "date",
    "date-time",
    "double",
    "float",
    "int32",
    "int64",
    "password",
];

/// Where a part of the versions is checked.
enum Placement {
    /// Every version has it alike: checked once, at the top.
    Top,
    /// Checked per version.
    PerVersion,
}

fn placement(versions: &[Value], part: impl Fn(&Value) -> &Value) -> Placement {
    match versions.split_first() {
        Some((first, rest)) if rest.iter().all(|v| part(v) == part(first)) => Placement::Top,
        _ => Placement::PerVersion,
    }
}

/// Every version needs a schema (`spec.versions[i].schema.openAPIV3Schema:
/// Required value: schemas are required`), reported after the scope.
#[must_use]
pub fn schemas_required(spec: &Value) -> Vec<Cause> {
    let mut e = FieldErrors::new();
    let versions = spec["versions"].as_array().map_or(&[][..], Vec::as_slice);
    for (i, v) in versions.iter().enumerate() {
        if !v["schema"]["openAPIV3Schema"].is_object() {
            e.required(
                &format!("spec.versions[{i}].schema.openAPIV3Schema"),
                "schemas are required",
            );
        }
    }
    e.into_causes()
}

/// The problems of the versions' schemas, subresources and columns, per
/// version where they differ, then at the top where they are alike.
#[must_use]
pub fn version_causes(spec: &Value) -> Vec<Cause> {
    let mut e = FieldErrors::new();
    let versions = spec["versions"].as_array().map_or(&[][..], Vec::as_slice);
    let schemas = placement(versions, |v| &v["schema"]);
    let subresources = placement(versions, |v| &v["subresources"]);
    let columns = placement(versions, |v| &v["additionalPrinterColumns"]);
    for (i, v) in versions.iter().enumerate() {
        let at = index("spec.versions", i);
        if matches!(schemas, Placement::PerVersion) {
            schema_causes(
                &v["schema"]["openAPIV3Schema"],
                &format!("{at}.schema"),
                &mut e,
            );
        }
        if matches!(subresources, Placement::PerVersion) {
            scale_causes(&v["subresources"], &format!("{at}.subresources"), &mut e);
        }
        if matches!(columns, Placement::PerVersion) {
            column_causes(
                &v["additionalPrinterColumns"],
                &format!("{at}.additionalPrinterColumns"),
                &mut e,
            );
        }
    }
    if let Some(first) = versions.first() {
        if matches!(schemas, Placement::Top) {
            schema_causes(
                &first["schema"]["openAPIV3Schema"],
                "spec.validation",
                &mut e,
            );
        }
        if matches!(subresources, Placement::Top) {
            scale_causes(&first["subresources"], "spec.subresources", &mut e);
        }
        if matches!(columns, Placement::Top) {
            column_causes(
                &first["additionalPrinterColumns"],
                "spec.additionalPrinterColumns",
                &mut e,
            );
        }
    }
    e.into_causes()
}

/// An update's problems: `group` and `scope` changed, a stored version
/// (`stored`: the old status's, and the new storage version) no longer
/// in `spec.versions`.
#[must_use]
pub fn update_causes(new: &Value, old: &Value, stored: &[String]) -> Vec<Cause> {
    let mut e = FieldErrors::new();
    for field in ["group", "scope"] {
        let (now, before) = (&new["spec"][field], &old["spec"][field]);
        if now != before {
            e.invalid(
                &format!("spec.{field}"),
                &go_string(now.as_str().unwrap_or_default()),
                "field is immutable",
            );
        }
    }
    let names: Vec<&str> = new["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["name"].as_str())
        .collect();
    if stored.is_empty() {
        e.invalid(
            "status.storedVersions",
            "[]string{}",
            "must have at least one stored version",
        );
    }
    for (i, version) in stored.iter().enumerate() {
        if !names.contains(&version.as_str()) {
            e.invalid(
                &index("status.storedVersions", i),
                &go_string(version),
                "must appear in spec.versions",
            );
        }
    }
    e.into_causes()
}

/// A schema at `at` (`….schema` or `spec.validation`): structural, and its
/// defaults valid (checked only once it is structural, as the real
/// server does).
fn schema_causes(schema: &Value, at: &str, e: &mut FieldErrors) {
    if !schema.is_object() {
        return;
    }
    let root = format!("{at}.openAPIV3Schema");
    let mut structural = FieldErrors::new();
    structural_causes(schema, &root, Level::Root, &mut structural);
    let structural = structural.into_causes();
    if structural.is_empty() {
        default_causes(schema, &root, e);
    } else {
        structural.into_iter().for_each(|c| e.push_cause(c));
    }
}

/// Where a schema node is.
#[derive(Clone, Copy)]
enum Level {
    Root,
    Items,
    Field,
}

/// The structural invariants (`validateStructuralInvariants`): an array
/// has `items`, every node a `type` (unless it is int-or-string or
/// preserves unknown fields); children before the node itself.
fn structural_causes(node: &Value, at: &str, level: Level, e: &mut FieldErrors) {
    if node["type"] == "array" && node.get("items").is_none() {
        e.required(&format!("{at}.items"), "must be specified");
    }
    if node["items"].is_object() {
        structural_causes(&node["items"], &format!("{at}.items"), Level::Items, e);
    }
    if let Some(properties) = node["properties"].as_object() {
        for (k, sub) in properties {
            structural_causes(sub, &format!("{at}.properties[{k}]"), Level::Field, e);
        }
    }
    let untyped = node["type"].as_str().is_none_or(str::is_empty)
        && node["x-kubernetes-int-or-string"] != true
        && node["x-kubernetes-preserve-unknown-fields"] != true;
    if untyped {
        let why = match level {
            Level::Root => "must not be empty at the root",
            Level::Items => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        e.required(&format!("{at}.type"), why);
    }
}

/// Every `default` valid by the schema it is the default of.
fn default_causes(node: &Value, at: &str, e: &mut FieldErrors) {
    if let Some(default) = node.get("default").filter(|d| !d.is_null()) {
        let mut value = default.clone();
        for c in schema::validate_value(node, &mut value) {
            let field = if c.field.is_empty() {
                format!("{at}.default")
            } else {
                format!("{at}.default.{}", c.field)
            };
            let reason = if c.reason == "FieldValueTypeInvalid" {
                "FieldValueInvalid".to_string()
            } else {
                c.reason
            };
            e.push_cause(Cause {
                reason,
                message: c.message,
                field,
            });
        }
    }
    if node["items"].is_object() {
        default_causes(&node["items"], &format!("{at}.items"), e);
    }
    if let Some(properties) = node["properties"].as_object() {
        for (k, sub) in properties {
            default_causes(sub, &format!("{at}.properties[{k}]"), e);
        }
    }
    if node["additionalProperties"].is_object() {
        default_causes(
            &node["additionalProperties"],
            &format!("{at}.additionalProperties"),
            e,
        );
    }
}

/// `validateSimpleJSONPath`: not empty, starting with `.`. Returns
/// whether it is one.
fn simple_json_path(path: &str, at: &str, e: &mut FieldErrors) -> bool {
    if path.is_empty() {
        e.invalid(at, &go_string(path), "must not be empty");
        false
    } else if !path.starts_with('.') {
        e.invalid(
            at,
            &go_string(path),
            "must be a simple json path starting with .",
        );
        false
    } else {
        true
    }
}

/// The scale subresource's paths (`ValidateCustomResourceDefinitionSubresources`).
fn scale_causes(subresources: &Value, at: &str, e: &mut FieldErrors) {
    let scale = &subresources["scale"];
    if !scale.is_object() {
        return;
    }
    for (key, under) in [
        ("specReplicasPath", ".spec."),
        ("statusReplicasPath", ".status."),
    ] {
        let field = format!("{at}.scale.{key}");
        match scale[key].as_str().unwrap_or_default() {
            "" => e.required(&field, ""),
            path => {
                if simple_json_path(path, &field, e) && !path.starts_with(under) {
                    let why = format!(
                        "should be a json path under {}",
                        under.trim_end_matches('.')
                    );
                    e.invalid(&field, &go_string(path), &why);
                }
            }
        }
    }
    if let Some(path) = scale["labelSelectorPath"]
        .as_str()
        .filter(|p| !p.is_empty())
    {
        let field = format!("{at}.scale.labelSelectorPath");
        if simple_json_path(path, &field, e)
            && !path.starts_with(".spec.")
            && !path.starts_with(".status.")
        {
            // Go prints the *string it checks: an address; shown quoted.
            e.invalid(
                &field,
                &go_string(path),
                "should be a json path under either .spec or .status",
            );
        }
    }
}

/// The printer columns (`ValidateCustomResourceColumnDefinition`).
fn column_causes(columns: &Value, at: &str, e: &mut FieldErrors) {
    for (i, col) in columns.as_array().into_iter().flatten().enumerate() {
        let here = index(at, i);
        if col["name"].as_str().unwrap_or_default().is_empty() {
            e.required(&format!("{here}.name"), "");
        }
        let why = format!("must be one of {COLUMN_TYPES}");
        match col["type"].as_str().unwrap_or_default() {
            "" => e.required(&format!("{here}.type"), &why),
            t if COLUMN_TYPES.split(',').any(|k| k == t) => {}
            t => e.invalid(&format!("{here}.type"), &go_string(t), &why),
        }
        let format = col["format"].as_str().unwrap_or_default();
        if !format.is_empty() && !COLUMN_FORMATS.contains(&format) {
            e.invalid(
                &format!("{here}.format"),
                &go_string(format),
                &format!("must be one of {}", COLUMN_FORMATS.join(",")),
            );
        }
        match col["jsonPath"].as_str().unwrap_or_default() {
            "" => e.required(&format!("{here}.JSONPath"), ""),
            path => {
                simple_json_path(path, &format!("{here}.JSONPath"), e);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(version: Value) -> Value {
        json!({"versions": [version]})
    }

    fn fields(causes: &[Cause]) -> Vec<&str> {
        causes.iter().map(|c| c.field.as_str()).collect()
    }

    #[test]
    fn schemas_are_required_and_structural() {
        let none = spec(json!({"name": "v1"}));
        assert_eq!(
            fields(&schemas_required(&none)),
            ["spec.versions[0].schema.openAPIV3Schema"]
        );
        let untyped = spec(
            json!({"name": "v1", "schema": {"openAPIV3Schema": {"type": "object",
            "properties": {"spec": {"type": "object", "properties": {"mode": {"description": "x"},
                "list": {"type": "array"}}}}}}}),
        );
        let causes = version_causes(&untyped);
        let mut found = fields(&causes);
        found.sort_unstable();
        assert_eq!(
            found,
            [
                "spec.validation.openAPIV3Schema.properties[spec].properties[list].items",
                "spec.validation.openAPIV3Schema.properties[spec].properties[mode].type",
            ]
        );
    }

    #[test]
    fn defaults_must_be_valid_by_their_schema() {
        let bad = spec(
            json!({"name": "v1", "schema": {"openAPIV3Schema": {"type": "object",
            "properties": {"size": {"type": "integer", "default": 0, "minimum": 1}}}}}),
        );
        let causes = version_causes(&bad);
        assert_eq!(
            fields(&causes),
            ["spec.validation.openAPIV3Schema.properties[size].default"]
        );
        assert_eq!(
            causes[0].message,
            "Invalid value: 0:  in body should be greater than or equal to 1"
        );
    }

    #[test]
    fn columns_and_scale_paths() {
        let bad = spec(json!({"name": "v1",
            "additionalPrinterColumns": [{"name": "S", "type": "integer", "jsonPath": "spec.size"},
                                         {"name": "X", "type": "weird", "jsonPath": ".spec.x"}],
            "subresources": {"scale": {"specReplicasPath": "spec.replicas",
                                       "statusReplicasPath": ".spec.replicas"}}}));
        assert_eq!(
            fields(&version_causes(&bad)),
            [
                "spec.subresources.scale.specReplicasPath",
                "spec.subresources.scale.statusReplicasPath",
                "spec.additionalPrinterColumns[0].JSONPath",
                "spec.additionalPrinterColumns[1].type",
            ]
        );
    }

    #[test]
    fn differing_versions_are_checked_each() {
        let two = json!({"versions": [
            {"name": "v1", "additionalPrinterColumns": [{"name": "S", "type": "x", "jsonPath": ".a"}]},
            {"name": "v2"}]});
        assert_eq!(
            fields(&version_causes(&two)),
            ["spec.versions[0].additionalPrinterColumns[0].type"]
        );
    }

    #[test]
    fn updates_keep_group_scope_and_stored_versions() {
        let old = json!({"spec": {"group": "a.test", "scope": "Namespaced", "versions": [{"name": "v1"}]}});
        let new =
            json!({"spec": {"group": "b.test", "scope": "Cluster", "versions": [{"name": "v2"}]}});
        let causes = update_causes(&new, &old, &["v1".into(), "v2".into()]);
        assert_eq!(
            fields(&causes),
            ["spec.group", "spec.scope", "status.storedVersions[0]"]
        );
        assert_eq!(
            causes[2].message,
            "Invalid value: \"v1\": must appear in spec.versions"
        );
    }
}
