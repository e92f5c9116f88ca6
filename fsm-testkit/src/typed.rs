//! Built-in kinds decoded against their types, as the real server decodes
//! a request body into the kind's Go struct before anything else looks at
//! it: a value of the wrong JSON type (a string for a map, a float for an
//! integer, base64 that does not decode) is `400 BadRequest` ("… cannot be
//! handled as a …"), and fields the type does not have are dropped.
//!
//! One generic walk, not code per kind: each kind's k8s-openapi type (its
//! entry in the kinds' table, `builtins`) gives its schema (through
//! `schemars`); [`decode`] walks a body against it. Required fields are not
//! checked here (Go's decoder does not either; validation says
//! `Required value` later).
//!
//! A `Quantity` is written back in its canonical form (`1000m` as `1`,
//! `1024Mi` as `1Gi`; in a resource list rounded up to milli first:
//! `quantity`), as the real server does; one that is no quantity is
//! `400 BadRequest`.
//!
//! # Caveats
//! - A `Quantity` given as a JSON number is read from the number's text as
//!   serde prints it (`1e3` as `1000.0`, so `1k`, where the real server,
//!   reading the JSON text itself, answers `1e3`).
//! - Timestamps are not parsed; `fieldValidation=Strict` does not refuse
//!   the unknown fields this drops (it is not passed down to the cluster).

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::{Map, Value};

use crate::builtins;
use crate::resources::ResourceDef;
use crate::status::ApiError;

/// A kind's schema: the root, whose `$defs` its `$ref`s name.
struct KindSchema {
    root: Value,
}

/// The schemas of the built-in kinds that have a type (the table's
/// [`BuiltinKind::schema`](crate::builtins::BuiltinKind)), by (group,
/// version, kind).
fn schemas() -> &'static HashMap<(&'static str, &'static str, &'static str), KindSchema> {
    static SCHEMAS: OnceLock<HashMap<(&str, &str, &str), KindSchema>> = OnceLock::new();
    SCHEMAS.get_or_init(|| {
        builtins::table()
            .iter()
            .filter_map(|k| {
                let schema = k.schema?;
                let key = (
                    k.def.group.as_str(),
                    k.def.version.as_str(),
                    k.def.kind.as_str(),
                );
                Some((
                    key,
                    KindSchema {
                        root: (schema.root_schema)(),
                    },
                ))
            })
            .collect()
    })
}

/// Decodes `body`, an object of `def`'s kind as sent, against the kind's
/// type: drops the fields the type does not have (and `null`s, as Go's
/// `omitempty` does). Kinds outside the registry (custom resources) are
/// left alone.
///
/// # Errors
/// [`ApiError::BadRequest`] when a value does not decode into its field's
/// type, worded as the real server (`ConfigMap in version "v1" cannot be
/// handled as a ConfigMap: …`) though the decoder's own words differ.
pub fn decode(def: &ResourceDef, body: &mut Value) -> Result<(), ApiError> {
    if def.custom {
        return Ok(());
    }
    let Some(schema) =
        schemas().get(&(def.group.as_str(), def.version.as_str(), def.kind.as_str()))
    else {
        return Ok(());
    };
    let walker = Walker {
        defs: schema.root.get("$defs").and_then(Value::as_object),
    };
    let type_name = format!("{}.{}", def.version, def.kind);
    walker.walk(&schema.root, body, &type_name).map_err(|e| {
        ApiError::BadRequest(format!(
            "{kind} in version {version:?} cannot be handled as a {kind}: {e}",
            kind = def.kind,
            version = def.version
        ))
    })
}

/// [`decode`] for the result of a patch: the real server answers `422
/// Invalid` with a `patch` cause holding the patched object, not 400.
///
/// # Errors
/// [`ApiError::Invalid`] (no kind, no name) when the patched object does
/// not decode.
pub fn decode_patched(def: &ResourceDef, patched: &mut Value) -> Result<(), ApiError> {
    let shown = patched.to_string();
    decode(def, patched).map_err(|e| {
        let why = e.to_string();
        let why = why
            .split_once(": ")
            .map_or(why.as_str(), |(_, w)| w)
            .to_string();
        ApiError::Invalid(
            crate::status::Subject::new("", "", ""),
            vec![crate::status::Cause::invalid("patch", &shown, &why)],
        )
    })
}

struct Walker<'a> {
    defs: Option<&'a Map<String, Value>>,
}

impl Walker<'_> {
    /// The schema `node` names (following a `$ref`), and the name of the
    /// definition it came from.
    fn resolve<'s>(&'s self, node: &'s Value) -> (&'s Value, Option<&'s str>) {
        match node.get("$ref").and_then(Value::as_str) {
            Some(r) => {
                let name = r.rsplit('/').next().unwrap_or_default();
                match self.defs.and_then(|d| d.get(name)) {
                    Some(target) => (target, Some(name)),
                    None => (node, None),
                }
            }
            None => (node, None),
        }
    }

    fn walk(&self, node: &Value, value: &mut Value, path: &str) -> Result<(), String> {
        let (node, def_name) = self.resolve(node);
        if node.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
            let quantity = def_name.is_some_and(|n| n.ends_with(".Quantity"));
            if quantity {
                return canonical_quantity(value, path);
            }
            return match value {
                Value::String(_) | Value::Null => Ok(()),
                Value::Number(n) if n.is_i64() || n.is_u64() => Ok(()),
                other => Err(format!(
                    "{path}: expected a string or an integer, found {}",
                    json_type(other)
                )),
            };
        }
        if value.is_null() {
            return Ok(());
        }
        let ty = node.get("type").and_then(Value::as_str).unwrap_or_default();
        match ty {
            "object" => {
                let properties = node.get("properties").and_then(Value::as_object);
                let additional = node.get("additionalProperties").filter(|a| a.is_object());
                if properties.is_none() && additional.is_none() {
                    // Free-form JSON (a CRD schema's `default` or `enum`
                    // values, `FieldsV1`).
                    return Ok(());
                }
                let Value::Object(fields) = value else {
                    return Err(format!(
                        "{path}: expected an object, found {}",
                        json_type(value)
                    ));
                };
                let mut unknown = Vec::new();
                for (key, v) in fields.iter_mut() {
                    let field_schema = properties.and_then(|p| p.get(key)).or(additional);
                    match field_schema {
                        Some(s) => {
                            let child = if properties.is_some_and(|p| p.contains_key(key)) {
                                format!("{path}.{key}")
                            } else {
                                format!("{path}[{key:?}]")
                            };
                            if v.is_null() && properties.is_some_and(|p| p.contains_key(key)) {
                                unknown.push(key.clone());
                                continue;
                            }
                            self.walk(s, v, &child)?;
                        }
                        None => unknown.push(key.clone()),
                    }
                }
                for key in unknown {
                    fields.remove(&key);
                }
                Ok(())
            }
            "array" => {
                let Value::Array(items) = value else {
                    return Err(format!(
                        "{path}: expected an array, found {}",
                        json_type(value)
                    ));
                };
                if let Some(item) = node.get("items").filter(|i| i.is_object()) {
                    for (i, v) in items.iter_mut().enumerate() {
                        self.walk(item, v, &format!("{path}[{i}]"))?;
                    }
                }
                Ok(())
            }
            "string" => match value {
                Value::String(s) => {
                    if node.get("format").and_then(Value::as_str) == Some("byte")
                        && serde_json::from_value::<k8s_openapi::ByteString>(Value::String(
                            s.clone(),
                        ))
                        .is_err()
                    {
                        return Err(format!("{path}: decode base64: illegal base64 data"));
                    }
                    Ok(())
                }
                other => Err(format!(
                    "{path}: expected a string, found {}",
                    json_type(other)
                )),
            },
            "integer" => match value {
                Value::Number(n) if n.is_i64() || n.is_u64() => Ok(()),
                Value::Number(_) => Err(format!("{path}: can not decode float as int")),
                other => Err(format!(
                    "{path}: expected an integer, found {}",
                    json_type(other)
                )),
            },
            "number" => match value {
                Value::Number(_) => Ok(()),
                other => Err(format!(
                    "{path}: expected a number, found {}",
                    json_type(other)
                )),
            },
            "boolean" => match value {
                Value::Bool(_) => Ok(()),
                other => Err(format!(
                    "{path}: expected a boolean, found {}",
                    json_type(other)
                )),
            },
            _ => Ok(()),
        }
    }
}

/// A quantity in its canonical form (`quantity`), or why it is none.
fn canonical_quantity(value: &mut Value, path: &str) -> Result<(), String> {
    let text = match value {
        Value::Null => return Ok(()),
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        other => {
            return Err(format!(
                "{path}: expected a string or an integer, found {}",
                json_type(other)
            ));
        }
    };
    // A map entry's path ends `["key"]`: a map of quantities is a resource
    // list, whose values core v1's defaults round up to milli.
    let canonical = if path.ends_with("\"]") {
        crate::quantity::canonical_in_resource_list(&text)
    } else {
        crate::quantity::canonical(&text)
    }
    .ok_or_else(|| format!("{path}: {}", crate::quantity::QUANTITY_SYNTAX))?;
    *value = Value::String(canonical);
    Ok(())
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn def(g: &str, p: &str) -> std::sync::Arc<ResourceDef> {
        crate::builtins::registry().get(g, "v1", p).unwrap()
    }

    #[test]
    fn wrong_types_are_bad_requests() {
        let cm = def("", "configmaps");
        for body in [
            json!({"metadata": {"name": "a"}, "data": "x"}),
            json!({"metadata": {"name": "a", "labels": ["x"]}}),
            json!({"metadata": {"name": "a"}, "data": {"k": 1}}),
            json!({"metadata": {"name": "a"}, "binaryData": {"k": "!!"}}),
            json!({"metadata": {"name": "a"}, "immutable": "yes"}),
        ] {
            let mut b = body.clone();
            let e = decode(&cm, &mut b).unwrap_err();
            assert_eq!(e.code().as_u16(), 400, "{body}");
            assert!(
                e.to_string()
                    .starts_with("ConfigMap in version \"v1\" cannot be handled as a ConfigMap: "),
                "{e}"
            );
        }
        let deployment = def("apps", "deployments");
        let mut b = json!({"metadata": {"name": "d"}, "spec": {"replicas": 2.0}});
        assert_eq!(
            decode(&deployment, &mut b).unwrap_err().reason(),
            "BadRequest"
        );
    }

    #[test]
    fn unknown_fields_and_nulls_are_dropped() {
        let deployment = def("apps", "deployments");
        let mut b = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "bogus": 1, "labels": {"a": "b"}, "annotations": null},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"a": "b"}},
                     "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
                     "template": {"spec": {"containers": [{"name": "c", "image": "x", "extra": true,
                         "resources": {"limits": {"cpu": 1, "memory": "1Gi"}}}]}}},
            "top": {}
        });
        decode(&deployment, &mut b).unwrap();
        assert_eq!(
            b,
            json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "d", "labels": {"a": "b"}},
                "spec": {"replicas": 2, "selector": {"matchLabels": {"a": "b"}},
                         "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
                         "template": {"spec": {"containers": [{"name": "c", "image": "x",
                             "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}}
            })
        );
    }

    #[test]
    fn a_patch_that_does_not_decode_is_invalid() {
        let cm = def("", "configmaps");
        let mut patched = json!({"metadata": {"name": "a"}, "data": "x"});
        let e = decode_patched(&cm, &mut patched).unwrap_err();
        let status = e.to_status();
        assert_eq!(status["code"], 422);
        assert_eq!(status["details"]["causes"][0]["field"], "patch");
        assert!(status["details"].get("kind").is_none(), "{status}");
        assert!(
            status["message"]
                .as_str()
                .unwrap()
                .starts_with(" \"\" is invalid: patch: ")
        );
    }

    #[test]
    fn crd_schemas_keep_free_form_json() {
        let crds = crate::builtins::registry()
            .get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
            .unwrap();
        let mut crd = json!({"metadata": {"name": "things.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "things", "kind": "Thing"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {
                            "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
                            "extra": {"type": "object",
                                      "x-kubernetes-preserve-unknown-fields": true}}}}}}}]}});
        let before = crd.clone();
        decode(&crds, &mut crd).unwrap();
        assert_eq!(crd, before);
    }

    #[test]
    fn managed_fields_and_custom_resources_are_kept() {
        let cm = def("", "configmaps");
        let mut b = json!({"metadata": {"name": "a", "managedFields": [{"manager": "m",
            "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:k": {}}}}]},
            "data": {"k": "v"}});
        let before = b.clone();
        decode(&cm, &mut b).unwrap();
        assert_eq!(b, before);
        let mut custom = (*cm).clone();
        custom.custom = true;
        let mut w = json!({"data": "not a map", "spec": {"anything": 1.5}});
        let before = w.clone();
        decode(&custom, &mut w).unwrap();
        assert_eq!(w, before);
    }

    #[test]
    fn quantities_are_stored_canonical_and_bad_ones_refused() {
        let deployment = def("apps", "deployments");
        let mut b = json!({"metadata": {"name": "d"}, "spec": {"template": {"spec": {"containers": [
            {"name": "app", "resources": {"limits": {"cpu": "1000m", "memory": "1024Mi"}, "requests": {"cpu": 0.5, "memory": "0.0001"}}}
        ]}}}});
        decode(&deployment, &mut b).unwrap();
        let resources = &b["spec"]["template"]["spec"]["containers"][0]["resources"];
        assert_eq!(resources["limits"], json!({"cpu": "1", "memory": "1Gi"}));
        assert_eq!(
            resources["requests"],
            json!({"cpu": "500m", "memory": "1m"})
        );
        let mut bad = json!({"metadata": {"name": "d"}, "spec": {"template": {"spec": {"containers": [
            {"name": "app", "resources": {"limits": {"cpu": "lots"}}}
        ]}}}});
        let e = decode(&deployment, &mut bad).unwrap_err();
        assert_eq!(e.code().as_u16(), 400);
        assert!(
            e.to_string()
                .contains("quantities must match the regular expression"),
            "{e}"
        );
    }
}
