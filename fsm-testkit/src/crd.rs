//! `CustomResourceDefinition`s: validation (names and storage here, the
//! versions' schemas, subresources and columns in `crd_rules`), defaults,
//! the resources they define, and the status the real server's
//! controllers would write.

use serde_json::{Value, json};

use crate::resources::{NameRule, PrinterColumn, ResourceDef};
use crate::status::Cause;

/// The resource definitions (one per served version) of `crd`, and which
/// version is the storage version.
///
/// # Errors
/// The field-level causes when `crd` is not a valid definition.
pub fn definitions(crd: &Value) -> Result<(Vec<ResourceDef>, String), Vec<Cause>> {
    let mut causes = Vec::new();
    let spec = &crd["spec"];
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let group = s(&spec["group"]);
    let names = &spec["names"];
    let plural = s(&names["plural"]);
    let kind = s(&names["kind"]);
    let name = s(&crd["metadata"]["name"]);
    if group.is_empty() {
        causes.push(Cause::required("spec.group", ""));
    } else if !group.contains('.') {
        causes.push(Cause::invalid(
            "spec.group",
            &group,
            "should be a domain with at least one dot",
        ));
    }
    if plural.is_empty() {
        causes.push(Cause::required("spec.names.plural", ""));
    } else if plural
        .chars()
        .any(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
    {
        causes.push(Cause::invalid(
            "spec.names.plural",
            &plural,
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-'",
        ));
    }
    if kind.is_empty() {
        causes.push(Cause::required("spec.names.kind", ""));
    }
    if !plural.is_empty() && !group.is_empty() && name != format!("{plural}.{group}") {
        causes.push(Cause::invalid(
            "metadata.name",
            &name,
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    let scope = s(&spec["scope"]);
    if scope != "Namespaced" && scope != "Cluster" {
        causes.push(Cause {
            reason: "FieldValueNotSupported".into(),
            message: format!(
                "Unsupported value: {scope:?}: supported values: \"Cluster\", \"Namespaced\""
            ),
            field: "spec.scope".into(),
        });
    }
    causes.extend(crate::crd_rules::schemas_required(spec));
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    // The stored-versions cause comes last (status is validated after the
    // spec): set aside.
    let mut storage_causes = crate::crd_storage::storage_causes(&versions);
    let stored_versions_at = storage_causes
        .iter()
        .position(|c| c.field.starts_with("status."))
        .unwrap_or(storage_causes.len());
    let stored_versions = storage_causes.split_off(stored_versions_at);
    causes.extend(storage_causes);
    let storage: Vec<String> = versions
        .iter()
        .filter(|v| v["storage"].as_bool() == Some(true))
        .map(|v| s(&v["name"]))
        .collect();
    causes.extend(crate::crd_rules::version_causes(spec));
    causes.extend(crate::crd_conversion::causes(spec));
    causes.extend(stored_versions);
    if !causes.is_empty() {
        return Err(causes);
    }
    let list = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default()
    };
    let singular = names["singular"]
        .as_str()
        .filter(|x| !x.is_empty())
        .map_or_else(|| kind.to_lowercase(), String::from);
    let defs = versions
        .iter()
        .filter(|v| v["served"].as_bool() == Some(true))
        .map(|v| {
            let printer_columns: Vec<PrinterColumn> = v["additionalPrinterColumns"]
                .as_array()
                .map(|cols| {
                    cols.iter()
                        .map(|c| PrinterColumn {
                            name: s(&c["name"]),
                            type_: s(&c["type"]),
                            json_path: s(&c["jsonPath"]),
                            format: s(&c["format"]),
                            description: match s(&c["description"]) {
                                d if d.is_empty() => format!(
                                    "Custom resource definition column (in JSONPath format): {}",
                                    s(&c["jsonPath"])
                                ),
                                d => d,
                            },
                            priority: c["priority"].as_i64().unwrap_or(0),
                        })
                        .collect()
                })
                .unwrap_or_default();
            ResourceDef {
                group: group.clone(),
                version: s(&v["name"]),
                kind: kind.clone(),
                plural: plural.clone(),
                singular: singular.clone(),
                namespaced: scope == "Namespaced",
                status_subresource: v["subresources"].get("status").is_some(),
                generation: true,
                custom: true,
                short_names: list(&names["shortNames"]),
                categories: list(&names["categories"]),
                name_rule: NameRule::Subdomain,
                field_selectors: v["selectableFields"]
                    .as_array()
                    .map(|f| {
                        f.iter()
                            .map(|x| s(&x["jsonPath"]).trim_start_matches('.').to_string())
                            .collect()
                    })
                    .unwrap_or_default(),
                age_column: printer_columns.is_empty(),
                delete_returns_object: false,
                storage_version_hash: crate::resources::storage_version_hash(
                    &group,
                    storage.first().map_or("", String::as_str),
                    &kind,
                ),
                printer_columns,
                stored_with: None,
                scale: scale_paths(&v["subresources"]["scale"]),
            }
        })
        .collect();
    Ok((defs, storage.into_iter().next().unwrap_or_default()))
}

/// The `scale` subresource a CRD version's `subresources.scale` declares.
fn scale_paths(scale: &Value) -> Option<crate::resources::ScalePaths> {
    use crate::resources::{ScalePaths, ScaleSelector};
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    scale.as_object()?;
    Some(ScalePaths {
        spec_replicas: text(&scale["specReplicasPath"]),
        status_replicas: text(&scale["statusReplicasPath"]),
        selector: match text(&scale["labelSelectorPath"]) {
            path if path.is_empty() => ScaleSelector::None,
            path => ScaleSelector::Text(path),
        },
    })
}

/// Fills the defaults the real server writes into a CRD's spec
/// (`names.singular`, `names.listKind`, `conversion`).
pub fn default_spec(crd: &mut Value) {
    if let Some(versions) = crd
        .get_mut("spec")
        .and_then(|s| s.get_mut("versions"))
        .and_then(Value::as_array_mut)
    {
        for v in versions {
            if let Some(schema) = v.get_mut("schema") {
                drop_null_defaults(schema);
            }
        }
    }
    let Some(spec) = crd.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
        let kind = names
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        names
            .entry("singular")
            .or_insert_with(|| json!(kind.to_lowercase()));
        names
            .entry("listKind")
            .or_insert_with(|| json!(format!("{kind}List")));
    }
    spec.entry("conversion")
        .or_insert_with(|| json!({"strategy": "None"}));
}

/// `default: null` in a schema is dropped (Go cannot tell it from no default).
fn drop_null_defaults(schema: &mut Value) {
    match schema {
        Value::Object(m) => {
            if m.get("default").is_some_and(Value::is_null) {
                m.remove("default");
            }
            m.values_mut().for_each(drop_null_defaults);
        }
        Value::Array(a) => a.iter_mut().for_each(drop_null_defaults),
        _ => {}
    }
}

/// Sets the status the CRD controllers write once names are accepted:
/// `NamesAccepted` and `Established` conditions, `acceptedNames`,
/// `storedVersions` (keeping earlier stored versions and transition times).
pub fn set_status(crd: &mut Value, storage_version: &str, now: &str) {
    let previous = crd.get("status").cloned().unwrap_or(Value::Null);
    let since = |ty: &str| {
        previous["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == ty))
            .and_then(|c| c["lastTransitionTime"].as_str())
            .unwrap_or(now)
            .to_string()
    };
    let mut stored: Vec<Value> = previous["storedVersions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !stored.iter().any(|v| v == storage_version) {
        stored.push(json!(storage_version));
    }
    let status = json!({
        "conditions": [
            {
                "type": "NamesAccepted",
                "status": "True",
                "reason": "NoConflicts",
                "message": "no conflicts found",
                "lastTransitionTime": since("NamesAccepted"),
            },
            {
                "type": "Established",
                "status": "True",
                "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted",
                "lastTransitionTime": since("Established"),
            }
        ],
        "acceptedNames": crd["spec"]["names"].clone(),
        "storedVersions": stored,
    });
    if let Some(obj) = crd.as_object_mut() {
        obj.insert("status".into(), status);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        json!({"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}})
    }

    fn crd() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com",
                "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
                "scope": "Namespaced",
                "versions": [
                    {"name": "v1", "served": true, "storage": true, "schema": schema(),
                     "subresources": {"status": {}},
                     "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}]},
                    {"name": "v1beta1", "served": true, "storage": false, "schema": schema()},
                    {"name": "v0", "served": false, "storage": false, "schema": schema()}
                ]
            }
        })
    }

    #[test]
    fn served_versions_become_resources() {
        let (defs, storage) = definitions(&crd()).unwrap();
        assert_eq!(storage, "v1");
        assert_eq!(defs.len(), 2);
        let v1 = &defs[0];
        assert_eq!(
            (v1.version.as_str(), v1.singular.as_str()),
            ("v1", "widget")
        );
        assert!(v1.status_subresource && v1.namespaced && v1.custom && v1.generation);
        assert_eq!(v1.short_names, vec!["wd"]);
        assert_eq!(v1.printer_columns[0].json_path, ".spec.size");
        assert!(!v1.age_column);
        assert!(!defs[1].status_subresource);
        assert!(defs[1].age_column);
    }

    #[test]
    fn invalid_definitions_name_their_fields() {
        let mut bad = crd();
        bad["metadata"]["name"] = json!("wrong");
        bad["spec"]["scope"] = json!("Galaxy");
        let causes = definitions(&bad).unwrap_err();
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, vec!["metadata.name", "spec.scope"]);
        let mut no_group = crd();
        no_group["spec"]["group"] = json!("nodots");
        assert_eq!(definitions(&no_group).unwrap_err()[0].field, "spec.group");
    }

    #[test]
    fn status_is_established_and_keeps_history() {
        let mut c = crd();
        c["spec"]["versions"][0]["schema"] = json!({"openAPIV3Schema": {"type": "object",
            "properties": {"a": {"type": "string", "default": null},
                           "b": {"type": "string", "default": "x"}}}});
        default_spec(&mut c);
        assert_eq!(c["spec"]["names"]["listKind"], "WidgetList");
        let props = &c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"];
        assert!(props["a"].get("default").is_none());
        assert_eq!(props["b"]["default"], "x");
        set_status(&mut c, "v1", "2026-01-01T00:00:00Z");
        set_status(&mut c, "v2", "2027-01-01T00:00:00Z");
        let conds = c["status"]["conditions"].as_array().unwrap();
        assert!(
            conds
                .iter()
                .any(|x| x["type"] == "Established" && x["status"] == "True")
        );
        assert_eq!(conds[1]["lastTransitionTime"], "2026-01-01T00:00:00Z");
        assert_eq!(c["status"]["storedVersions"], json!(["v1", "v2"]));
    }
}
