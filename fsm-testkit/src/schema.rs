//! Custom resources checked against their CRD's structural
//! `openAPIV3Schema`, as the real server does on every write (create,
//! update, patch, and the status subresource):
//!
//! 0. **Defaulting**: the schema's `default`s fill what is absent.
//! 1. **Pruning**: fields the schema does not declare are dropped, unless
//!    the object (or an ancestor) carries
//!    `x-kubernetes-preserve-unknown-fields: true`; an object with
//!    `additionalProperties` keeps every key. `null` is dropped where the
//!    schema is not `nullable`. `apiVersion`, `kind` and `metadata` are kept
//!    at the root and under `x-kubernetes-embedded-resource`.
//! 2. **Validation**: `type` (with `x-kubernetes-int-or-string`), `enum`,
//!    `required`, `minimum`/`maximum` (and their `exclusive` forms),
//!    `minItems`/`maxItems`, `minLength`/`maxLength`. Each violation is a
//!    cause of a `422 Invalid` naming the field, worded as the real server
//!    words it (`spec.size: Invalid value: "string": spec.size in body must
//!    be of type integer: "string"`).
//!
//! # Caveats
//! `pattern` and `format` (see [`crate::formats`]) are checked too.
//!
//! `minProperties`/`maxProperties` are checked; structural defaults
//! (`default`) are applied first ([`apply_defaults`]): to what a write
//! leaves absent (a merge patch's `null` included), and to what a read
//! finds absent in an object stored before the default existed.
//!
//! Not checked: `allOf`/`anyOf`/`oneOf`/`not`,
//! `x-kubernetes-validations` (CEL), list-type and map-type uniqueness.
//! `metadata` is pruned to `ObjectMeta`'s fields by the cluster, for
//! every kind.

use serde_json::{Map, Value};

use crate::resources::{GroupResource, ResourceDef};
use crate::status::{ApiError, Cause, Subject};
use crate::store::Store;

/// The `openAPIV3Schema` of `def`'s version, from its CRD in `store`;
/// `None` for built-in resources and versions without a schema.
#[must_use]
pub fn of(store: &Store, def: &ResourceDef) -> Option<Value> {
    version_schema(store, def, |v| v["name"] == def.version.as_str())
}

/// The `openAPIV3Schema` of the storage version of `def`'s CRD, when it
/// is not `def`'s own version (`None` else, or without a schema).
#[must_use]
pub fn of_other_storage(store: &Store, def: &ResourceDef) -> Option<Value> {
    version_schema(store, def, |v| {
        v["storage"] == true && v["name"] != def.version.as_str()
    })
}

fn version_schema(
    store: &Store,
    def: &ResourceDef,
    pick: impl Fn(&Value) -> bool,
) -> Option<Value> {
    if !def.custom {
        return None;
    }
    let crds = GroupResource {
        group: "apiextensions.k8s.io".into(),
        resource: "customresourcedefinitions".into(),
    };
    let crd = store.get(&crds, "", &format!("{}.{}", def.plural, def.group))?;
    crd["spec"]["versions"]
        .as_array()?
        .iter()
        .find(|v| pick(v))
        .map(|v| v["schema"]["openAPIV3Schema"].clone())
        .filter(Value::is_object)
}

/// Prunes and validates `object`, a custom resource of `def`, against its
/// CRD's schema in `store` (nothing happens without one).
///
/// # Errors
/// [`ApiError::Invalid`] with a cause per violation.
pub fn enforce(store: &Store, def: &ResourceDef, object: &mut Value) -> Result<(), ApiError> {
    let Some(schema) = of(store, def) else {
        return Ok(());
    };
    let causes = prune_and_validate(&schema, object);
    if causes.is_empty() {
        // Written through another version than the storage one: stored
        // as that version, pruned by its schema (no conversion else).
        if let Some(storage) = of_other_storage(store, def) {
            prune(&storage, object);
        }
        return Ok(());
    }
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    Err(ApiError::Invalid(
        Subject::new(&def.group, &def.kind, &name),
        causes,
    ))
}

/// Defaults, prunes `object` (a whole resource: `apiVersion`, `kind` and
/// `metadata` are kept) by `schema` and returns the validation failures.
#[must_use]
pub fn prune_and_validate(schema: &Value, object: &mut Value) -> Vec<Cause> {
    apply_defaults(schema, object);
    let mut causes = Vec::new();
    walk(schema, object, "", true, &mut causes);
    causes
}

/// The failures of `value` (not a whole resource: a schema's `default`)
/// by `schema`, their fields relative to it (`""` for the value itself).
#[must_use]
pub fn validate_value(schema: &Value, value: &mut Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    walk(schema, value, "", false, &mut causes);
    causes
}

/// A stored custom resource as a read through a version decodes it, as
/// 1.20 does: defaulted by the storage version's schema (`storage`: what
/// was stored before a default existed takes it), then pruned by the
/// schema of the version read (`served`). Nothing is refused on a read.
pub fn decode_stored(storage: Option<&Value>, served: Option<&Value>, object: &mut Value) {
    if let Some(storage) = storage {
        apply_defaults(storage, object);
    }
    if let Some(served) = served {
        prune(served, object);
    }
}

/// Drops what `schema` does not declare (and non-nullable `null`s).
pub fn prune(schema: &Value, object: &mut Value) {
    let mut ignored = Vec::new();
    walk(schema, object, "", true, &mut ignored);
}

/// Fills the structural defaults of `schema` into `value`, as the real
/// server does when it decodes a custom resource (a write, or a read of
/// one stored before the default existed): a property that is absent, or
/// `null` where the schema is not `nullable`, takes its `default`, and
/// what it takes is defaulted in turn; items of arrays and values of
/// `additionalProperties` are defaulted by their schemas.
pub fn apply_defaults(schema: &Value, value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                for (key, sub) in properties {
                    let Some(default) = sub.get("default").filter(|d| !d.is_null()) else {
                        continue;
                    };
                    let missing = match map.get(key) {
                        None => true,
                        Some(Value::Null) => !flag(sub, "nullable"),
                        Some(_) => false,
                    };
                    if missing {
                        map.insert(key.clone(), default.clone());
                    }
                }
                for (key, v) in map.iter_mut() {
                    if let Some(sub) = properties.get(key) {
                        apply_defaults(sub, v);
                    }
                }
            } else if let Some(sub) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for v in map.values_mut() {
                    apply_defaults(sub, v);
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.get("items").filter(|i| i.is_object()) {
                for item in items {
                    apply_defaults(sub, item);
                }
            }
        }
        _ => {}
    }
}

/// The JSON type of `v` as the real server names it in messages.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn has_type(v: &Value, ty: &str) -> bool {
    match ty {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        _ => true,
    }
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// A value as the real server quotes it in `Invalid value: …` (Go's `%#v`).
fn quoted(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

fn invalid(path: &str, value: &Value, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {}: {detail}", quoted(value)),
        field: path.into(),
    }
}

fn walk(schema: &Value, value: &mut Value, path: &str, root: bool, causes: &mut Vec<Cause>) {
    if value.is_null() && flag(schema, "nullable") {
        return;
    }
    if let Some(ty) = schema.get("type").and_then(Value::as_str) {
        let int_or_string = flag(schema, "x-kubernetes-int-or-string");
        let ok = if int_or_string {
            has_type(value, "integer") || value.is_string()
        } else {
            has_type(value, ty)
        };
        if !ok {
            let given = type_name(value);
            let expected = if int_or_string { "integer,string" } else { ty };
            causes.push(Cause {
                reason: "FieldValueInvalid".into(), // 1.20: field.Invalid
                message: format!(
                    "Invalid value: {given:?}: {path} in body must be of type {expected}: {given:?}"
                ),
                field: path.into(),
            });
            return;
        }
    } else if flag(schema, "x-kubernetes-int-or-string")
        && !(has_type(value, "integer") || value.is_string())
    {
        let given = type_name(value);
        causes.push(Cause {
            reason: "FieldValueInvalid".into(), // 1.20: field.Invalid
            message: format!(
                "Invalid value: {given:?}: {path} in body must be of type integer,string: {given:?}"
            ),
            field: path.into(),
        });
        return;
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(value)
    {
        let supported: Vec<String> = options.iter().map(quoted).collect();
        causes.push(Cause {
            reason: "FieldValueNotSupported".into(),
            message: format!(
                "Unsupported value: {}: supported values: {}",
                quoted(value),
                supported.join(", ")
            ),
            field: path.into(),
        });
    }
    bounds(schema, value, path, causes);
    if let Value::String(text) = &*value {
        strings(schema, text, path, causes);
    }
    match value {
        Value::Object(map) => object(schema, map, path, root, causes),
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
                // 1.20's validator (go-openapi) names an item by its
                // array's path, without the index.
                for item in items.iter_mut() {
                    walk(item_schema, item, path, false, causes);
                }
            }
            item_counts(schema, items.len(), path, causes);
        }
        _ => {}
    }
}

/// An array's `minItems` and `maxItems`, checked after its items (as
/// go-openapi does), the count as the invalid value.
fn item_counts(schema: &Value, n: usize, path: &str, causes: &mut Vec<Cause>) {
    let limit = |k: &str| schema.get(k).and_then(Value::as_u64);
    let n = n as u64;
    if let Some(min) = limit("minItems").filter(|m| n < *m) {
        let detail = format!("{path} in body should have at least {min} items");
        causes.push(invalid(path, &Value::from(n), &detail));
    }
    if let Some(max) = limit("maxItems").filter(|m| n > *m) {
        let detail = format!("{path} in body should have at most {max} items");
        causes.push(invalid(path, &Value::from(n), &detail));
    }
}

fn bounds(schema: &Value, value: &Value, path: &str, causes: &mut Vec<Cause>) {
    let num = |k: &str| schema.get(k).and_then(Value::as_f64);
    if let Some(x) = value.as_f64().filter(|_| value.is_number()) {
        if let Some(min) = num("minimum") {
            let exclusive = flag(schema, "exclusiveMinimum");
            if x < min || (exclusive && x == min) {
                let op = if exclusive {
                    "greater than"
                } else {
                    "greater than or equal to"
                };
                let detail = format!("{path} in body should be {op} {}", schema["minimum"]);
                causes.push(invalid(path, value, &detail));
            }
        }
        if let Some(max) = num("maximum") {
            let exclusive = flag(schema, "exclusiveMaximum");
            if x > max || (exclusive && x == max) {
                let op = if exclusive {
                    "less than"
                } else {
                    "less than or equal to"
                };
                let detail = format!("{path} in body should be {op} {}", schema["maximum"]);
                causes.push(invalid(path, value, &detail));
            }
        }
    }
    if let Value::Object(map) = value {
        let limit = |k: &str| schema.get(k).and_then(Value::as_u64);
        // The real server shows the bound as the invalid value.
        if let Some(min) = limit("minProperties").filter(|m| (map.len() as u64) < *m) {
            causes.push(invalid(
                path,
                &Value::from(min),
                &format!("{path} in body should have at least {min} properties"),
            ));
        }
        if let Some(max) = limit("maxProperties").filter(|m| (map.len() as u64) > *m) {
            causes.push(invalid(
                path,
                &Value::from(max),
                &format!("{path} in body should have at most {max} properties"),
            ));
        }
    }
    // go-openapi's words, as 1.20 passes them on: a string itself as the
    // invalid value (an array's counts: `item_counts`).
    let limit = |k: &str| schema.get(k).and_then(Value::as_u64);
    if let Value::String(s) = value {
        let n = s.chars().count() as u64;
        if let Some(min) = limit("minLength").filter(|m| n < *m) {
            let detail = format!("{path} in body should be at least {min} chars long");
            causes.push(invalid(path, value, &detail));
        }
        if let Some(max) = limit("maxLength").filter(|m| n > *m) {
            let detail = format!("{path} in body should be at most {max} chars long");
            causes.push(invalid(path, value, &detail));
        }
    }
}

/// `pattern` (Go's regexp search, unanchored unless the pattern anchors
/// it) and `format` ([`crate::formats`]) of a string.
fn strings(schema: &Value, text: &str, path: &str, causes: &mut Vec<Cause>) {
    let value = Value::String(text.to_string());
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str)
        && let Ok(re) = regex::Regex::new(pattern)
        && !re.is_match(text)
    {
        causes.push(invalid(
            path,
            &value,
            &format!("{path} in body should match '{pattern}'"),
        ));
    }
    if let Some(format) = schema.get("format").and_then(Value::as_str)
        && !crate::formats::is_valid(format, text)
    {
        causes.push(invalid(
            path,
            &value,
            &format!("{path} in body must be of type {format}: {text:?}"),
        ));
    }
}

fn object(
    schema: &Value,
    map: &mut Map<String, Value>,
    path: &str,
    root: bool,
    causes: &mut Vec<Cause>,
) {
    let properties = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties");
    let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
    let embedded = root || flag(schema, "x-kubernetes-embedded-resource");
    let keys: Vec<String> = map.keys().cloned().collect();
    for key in keys {
        if embedded && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        let declared = properties
            .and_then(|p| p.get(&key))
            .or_else(|| additional.filter(|a| a.is_object()));
        let Some(sub) = declared else {
            if !(preserve || additional == Some(&Value::Bool(true))) {
                map.remove(&key);
            }
            continue;
        };
        let Some(v) = map.get_mut(&key) else {
            continue;
        };
        if v.is_null() && !flag(sub, "nullable") {
            map.remove(&key);
            continue;
        }
        walk(sub, v, &child(path, &key), false, causes);
    }
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for key in required.iter().filter_map(Value::as_str) {
            if !map.contains_key(key) {
                causes.push(Cause {
                    reason: "FieldValueRequired".into(),
                    message: "Required value".into(),
                    field: child(path, key),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["size"], "properties": {
                "size": {"type": "integer", "minimum": 1},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "port": {"x-kubernetes-int-or-string": true},
                "tags": {"type": "array", "items": {"type": "string"}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                         "properties": {"n": {"type": "integer"}}},
                "maybe": {"type": "string", "nullable": true},
                "gone": {"type": "string"}
            }},
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
        }})
    }

    #[test]
    fn unknown_fields_are_pruned_except_where_preserved() {
        let mut o = json!({"apiVersion": "x/v1", "kind": "W", "metadata": {"name": "a"},
            "top": 1,
            "spec": {"size": 2, "extra": true, "free": {"anything": {"deep": 1}, "n": 3},
                     "labels": {"k": "v"}, "maybe": null, "gone": null, "port": "http"},
            "status": {"ready": true, "undeclared": "x"}});
        assert_eq!(prune_and_validate(&schema(), &mut o), vec![]);
        assert_eq!(
            o,
            json!({"apiVersion": "x/v1", "kind": "W", "metadata": {"name": "a"},
                "spec": {"size": 2, "free": {"anything": {"deep": 1}, "n": 3},
                         "labels": {"k": "v"}, "maybe": null, "port": "http"},
                "status": {"ready": true}})
        );
    }

    #[test]
    fn violations_name_their_fields_as_the_real_server() {
        let mut o = json!({"spec": {"size": "big", "mode": "c", "tags": ["x", 1],
            "labels": {"k": 2}, "port": true, "free": {"n": "x"}}});
        let causes = prune_and_validate(&schema(), &mut o);
        let text: Vec<String> = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        assert!(text.contains(&r#"spec.size: Invalid value: "string": spec.size in body must be of type integer: "string""#.to_string()), "{text:?}");
        assert!(
            text.contains(
                &r#"spec.mode: Unsupported value: "c": supported values: "a", "b""#.to_string()
            ),
            "{text:?}"
        );
        assert!(text.contains(&r#"spec.tags: Invalid value: "integer": spec.tags in body must be of type string: "integer""#.to_string()), "{text:?}");
        assert!(
            text.iter().any(|t| t.starts_with("spec.labels.k: ")),
            "{text:?}"
        );
        assert!(
            text.iter()
                .any(|t| t.starts_with("spec.port: ") && t.contains("integer,string")),
            "{text:?}"
        );
        assert!(
            text.iter().any(|t| t.starts_with("spec.free.n: ")),
            "{text:?}"
        );
        assert_eq!(causes[0].reason, "FieldValueInvalid");
    }

    #[test]
    fn required_and_bounds() {
        let mut o = json!({"spec": {}});
        let causes = prune_and_validate(&schema(), &mut o);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "spec.size");
        assert_eq!(causes[0].message, "Required value");
        let mut low = json!({"spec": {"size": 0}});
        let causes = prune_and_validate(&schema(), &mut low);
        assert_eq!(
            causes[0].message,
            "Invalid value: 0: spec.size in body should be greater than or equal to 1"
        );
    }

    #[test]
    fn defaults_fill_what_is_absent_or_null() {
        let schema = serde_json::json!({"type": "object", "properties": {"spec": {
            "type": "object", "default": {},
            "properties": {
                "size": {"type": "integer", "default": 3},
                "tags": {"type": "array", "items": {"type": "object",
                    "properties": {"k": {"type": "string", "default": "x"}}}},
                "opts": {"type": "object", "minProperties": 1,
                    "additionalProperties": {"type": "string"}},
                "n": {"type": "integer", "nullable": true, "default": 1}}}}});
        let mut o =
            serde_json::json!({"metadata": {"name": "a"}, "spec": {"tags": [{}], "n": null}});
        assert!(prune_and_validate(&schema, &mut o).is_empty());
        assert_eq!(
            o["spec"],
            serde_json::json!({"size": 3, "tags": [{"k": "x"}], "n": null})
        );
        let mut o = serde_json::json!({"metadata": {"name": "a"}});
        assert!(prune_and_validate(&schema, &mut o).is_empty());
        assert_eq!(o["spec"], serde_json::json!({"size": 3, "n": 1}));
        let mut o = serde_json::json!({"spec": {"opts": {}}});
        let causes = prune_and_validate(&schema, &mut o);
        assert_eq!(
            causes[0].message,
            "Invalid value: 1: spec.opts in body should have at least 1 properties"
        );
    }

    #[test]
    fn an_object_without_properties_keeps_nothing_unless_preserved() {
        let s = json!({"type": "object", "properties": {
            "a": {"type": "object"},
            "b": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}});
        let mut o = json!({"a": {"x": 1}, "b": {"y": 2}});
        assert!(prune_and_validate(&s, &mut o).is_empty());
        assert_eq!(o, json!({"a": {}, "b": {"y": 2}}));
    }
}
