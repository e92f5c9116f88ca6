//! OpenAPI: the `/openapi/v3` index with a document per group/version, and
//! the whole `/openapi/v2` document, built from the kinds the server serves.
//!
//! - **Built-in kinds** get their real schemas and descriptions, generated
//!   from `k8s-openapi`'s `schemars` implementations: JSON Schema `$ref`s
//!   become `#/components/schemas/<name>` (v3, a `$ref` with a description
//!   becomes `allOf: [{$ref}]` as newer servers write it) or
//!   `#/definitions/<name>` (v2), under the real server's definition names
//!   (`io.k8s.api.apps.v1.Deployment`,
//!   `io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta`, …), and each kind
//!   carries `x-kubernetes-group-version-kind`.
//! - **Custom resources** get their CRD's structural schema for every served
//!   version, as the real server's CRD OpenAPI builder publishes it: named
//!   `<reversed group>.<version>.<Kind>` (and `…<Kind>List`), with
//!   `apiVersion`, `kind` and `metadata` (a reference to `ObjectMeta`)
//!   properties, descriptions and `x-kubernetes-*` extensions kept; in v2
//!   the constructs v2 cannot say are dropped as the real server drops
//!   them (`nullable` fields lose their type, `x-kubernetes-preserve-unknown-fields`
//!   their properties, junctors go).
//! - `PATCH` operations declare the `fieldValidation` query parameter: that
//!   is what `kubectl` (1.27+) reads to decide that the server validates
//!   fields itself, so `apply` and `create` send `fieldValidation` instead of
//!   validating against the schema client-side.
//!
//! The same schemas say which fields of a request body are unknown
//! ([`drop_unknown_fields`]): the handlers refuse them under `fieldValidation=Strict`
//! (`400`, "strict decoding error: unknown field …"), and otherwise drop them
//! (the real server's decoding into its types drops them), with a `Warning`
//! header under `Warn`, the default.
//!
//! The index's `hash` of a group/version is a digest of its document, so it
//! changes when a CRD's schema changes and `kubectl explain` refetches.
//! `/openapi/v2` is served as JSON to clients that accept JSON; a client
//! asking for protobuf only (client-go's `OpenAPISchema`) gets the real
//! server's `406` with an empty body.
//!
//! `kubectl explain` reads the v3 documents.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use k8s_openapi::schemars::SchemaGenerator;
use serde_json::{Map, Value, json};

use crate::builtins as builtin_kinds;
use crate::resources::{GroupResource, Registry, ResourceDef};
use crate::store::Store;

/// Which OpenAPI version a schema is written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// OpenAPI v2 (`/openapi/v2`): references under `#/definitions/`.
    V2,
    /// OpenAPI v3 (`/openapi/v3/...`): references under `#/components/schemas/`.
    V3,
}

impl Flavor {
    /// The prefix of a reference to a named definition.
    #[must_use]
    pub fn ref_prefix(self) -> &'static str {
        match self {
            Self::V2 => "#/definitions/",
            Self::V3 => "#/components/schemas/",
        }
    }
}

/// Named schemas, by definition name.
pub type Definitions = BTreeMap<String, Value>;

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
const API_VERSION_DESCRIPTION: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND_DESCRIPTION: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const METADATA_DESCRIPTION: &str = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const LIST_METADATA_DESCRIPTION: &str = "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const EMBEDDED_API_VERSION_DESCRIPTION: &str = "apiVersion defines the versioned schema of this representation of an object. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const EMBEDDED_KIND_DESCRIPTION: &str = "kind is a string value representing the type of this object. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

/// The built-in kinds with a type (from the kinds' table, `builtins`):
/// (group, version, kind) and the definition name of their schema, with
/// the generated definitions (JSON Schema references, `#/$defs/<name>`).
struct Builtins {
    kinds: Vec<((&'static str, &'static str, &'static str), String)>,
    defs: Map<String, Value>,
}

fn builtins() -> &'static Builtins {
    static BUILTINS: OnceLock<Builtins> = OnceLock::new();
    BUILTINS.get_or_init(|| {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
        let mut generator = SchemaGenerator::default();
        let kinds = builtin_kinds::table()
            .iter()
            .filter_map(|k| {
                let name = (k.schema?.add_to)(&mut generator);
                let gvk = (
                    k.def.group.as_str(),
                    k.def.version.as_str(),
                    k.def.kind.as_str(),
                );
                Some((gvk, name.into_owned()))
            })
            .collect();
        // Lists of custom resources refer to ListMeta.
        generator.subschema_for::<meta::ListMeta>();
        Builtins {
            kinds,
            defs: generator.take_definitions(true),
        }
    })
}

/// Where a field of a built-in kind is declared: the definition whose
/// property it is, and the definition the property refers to (an object
/// or the elements of a list), if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BuiltinField {
    /// The definition declaring the field (`io.k8s.api.core.v1.PodSpec`).
    pub owner: &'static str,
    /// The definition of the field's value, or of its list's elements.
    pub target: Option<&'static str>,
}

/// The field at `names` (object keys from the root; list indices left out)
/// of the built-in kind `def`, walking its schema; `None` for a custom
/// resource or a path the schema does not have.
pub(crate) fn builtin_field(def: &ResourceDef, names: &[&str]) -> Option<BuiltinField> {
    if def.custom {
        return None;
    }
    let b = builtins();
    let (_, root) = b.kinds.iter().find(|((g, v, k), _)| {
        *g == def.group.as_str() && *v == def.version.as_str() && *k == def.kind.as_str()
    })?;
    let (last, parents) = names.split_last()?;
    let mut owner: &'static str = root.as_str();
    for name in parents {
        let property = b.defs.get(owner)?.get("properties")?.get(*name)?;
        owner = referenced(property)?;
    }
    let property = b.defs.get(owner)?.get("properties")?.get(*last)?;
    Some(BuiltinField {
        owner,
        target: referenced(property),
    })
}

/// The definition a property's schema refers to, through list items and
/// single-schema junctors (`allOf`, `anyOf` with `null`).
fn referenced(schema: &'static Value) -> Option<&'static str> {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        return r.rsplit('/').next();
    }
    if let Some(items) = schema.get("items") {
        return referenced(items);
    }
    ["allOf", "anyOf", "oneOf"]
        .iter()
        .filter_map(|j| schema.get(*j)?.as_array())
        .flatten()
        .find_map(referenced)
}

/// The built-in definitions written for `flavor`, each kind with its
/// `x-kubernetes-group-version-kind`.
fn builtin_definitions(flavor: Flavor) -> &'static Definitions {
    static V2: OnceLock<Definitions> = OnceLock::new();
    static V3: OnceLock<Definitions> = OnceLock::new();
    let cell = match flavor {
        Flavor::V2 => &V2,
        Flavor::V3 => &V3,
    };
    cell.get_or_init(|| {
        let b = builtins();
        let mut defs: Definitions = b
            .defs
            .iter()
            .map(|(name, schema)| (name.clone(), from_json_schema(schema, flavor)))
            .collect();
        if flavor == Flavor::V2 {
            // v2 has no int-or-string: the real server says string.
            for (name, format) in [
                (
                    "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
                    Some("int-or-string"),
                ),
                ("io.k8s.apimachinery.pkg.api.resource.Quantity", None),
            ] {
                if let Some(Value::Object(s)) = defs.get_mut(name) {
                    s.remove("x-kubernetes-int-or-string");
                    s.insert("type".into(), json!("string"));
                    if let Some(f) = format {
                        s.insert("format".into(), json!(f));
                    }
                }
            }
        }
        for ((group, version, kind), name) in &b.kinds {
            if let Some(Value::Object(s)) = defs.get_mut(name) {
                add_gvk(s, group, version, kind);
                // k8s-openapi requires `metadata`; the API does not.
                if let Some(Value::Array(req)) = s.get_mut("required") {
                    req.retain(|r| r != "metadata");
                    if req.is_empty() {
                        s.remove("required");
                    }
                }
            }
        }
        defs
    })
}

fn add_gvk(schema: &mut Map<String, Value>, group: &str, version: &str, kind: &str) {
    schema.insert(
        "x-kubernetes-group-version-kind".into(),
        json!([{"group": group, "kind": kind, "version": version}]),
    );
}

/// Converts a JSON Schema (as `schemars` writes it, references to
/// `#/$defs/<name>`) to an OpenAPI schema of `flavor`: references point to
/// `#/definitions/<name>` (v2) or `#/components/schemas/<name>` (v3); in v3
/// a reference with siblings (a description) becomes `allOf: [{$ref}]` with
/// the siblings beside it, as the real server writes it.
#[must_use]
pub fn from_json_schema(schema: &Value, flavor: Flavor) -> Value {
    match schema {
        Value::Object(map) => {
            let mut out: Map<String, Value> = map
                .iter()
                .filter(|(k, _)| *k != "$schema")
                .map(|(k, v)| {
                    let v = match k.as_str() {
                        // Values, not schemas.
                        "enum" | "default" | "example" | "required" => v.clone(),
                        _ => from_json_schema(v, flavor),
                    };
                    (k.clone(), v)
                })
                .collect();
            if let Some(Value::String(r)) = out.get("$ref")
                && let Some(name) = r.strip_prefix("#/$defs/")
            {
                let reference = json!(format!("{}{name}", flavor.ref_prefix()));
                if flavor == Flavor::V3 && out.len() > 1 {
                    out.remove("$ref");
                    out.insert("allOf".into(), json!([{ "$ref": reference }]));
                } else {
                    out.insert("$ref".into(), reference);
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| from_json_schema(v, flavor)).collect())
        }
        other => other.clone(),
    }
}

/// `com.example.v1.Widget` for `example.com`, `v1`, `Widget`: the real
/// server's definition name of a custom kind (the group reversed).
#[must_use]
pub fn custom_definition_name(group: &str, version: &str, kind: &str) -> String {
    let reversed: Vec<&str> = group.split('.').rev().collect();
    format!("{}.{version}.{kind}", reversed.join("."))
}

fn metadata_ref(flavor: Flavor, target: &str, description: &str) -> Value {
    let reference = format!("{}{target}", flavor.ref_prefix());
    match flavor {
        Flavor::V2 => json!({"description": description, "$ref": reference}),
        Flavor::V3 => json!({"description": description, "allOf": [{"$ref": reference}]}),
    }
}

/// The definitions (kind and list) a CRD publishes for `version`, as the
/// real server's CRD OpenAPI builder writes them for `flavor`; empty when
/// the CRD does not serve `version`.
#[must_use]
pub fn crd_definitions(crd: &Value, version: &str, flavor: Flavor) -> Definitions {
    let spec = &crd["spec"];
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let (group, kind, plural) = (
        s(&spec["group"]),
        s(&spec["names"]["kind"]),
        s(&spec["names"]["plural"]),
    );
    let list_kind = match s(&spec["names"]["listKind"]) {
        l if l.is_empty() => format!("{kind}List"),
        l => l,
    };
    let Some(v) = spec["versions"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["name"] == version))
        .filter(|v| v["served"].as_bool() == Some(true))
    else {
        return Definitions::new();
    };
    let name = custom_definition_name(&group, version, &kind);
    let schema = &v["schema"]["openAPIV3Schema"];
    let preserve_all = spec["preserveUnknownFields"].as_bool() == Some(true)
        || schema["x-kubernetes-preserve-unknown-fields"].as_bool() == Some(true);
    let mut root = match schema {
        Value::Object(_) if !(flavor == Flavor::V2 && preserve_all) => {
            let mut root = custom_schema(schema, flavor);
            if let Value::Object(m) = &mut root {
                let props = m
                    .entry("properties")
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(props) = props {
                    props.insert(
                        "apiVersion".into(),
                        json!({"description": API_VERSION_DESCRIPTION, "type": "string"}),
                    );
                    props.insert(
                        "kind".into(),
                        json!({"description": KIND_DESCRIPTION, "type": "string"}),
                    );
                    props.insert(
                        "metadata".into(),
                        metadata_ref(flavor, OBJECT_META, METADATA_DESCRIPTION),
                    );
                }
            }
            root
        }
        _ => json!({"type": "object"}),
    };
    if let Value::Object(m) = &mut root {
        add_gvk(m, &group, version, &kind);
    }
    let items_ref = format!("{}{name}", flavor.ref_prefix());
    let mut list = json!({
        "description": format!("{list_kind} is a list of {kind}"),
        "required": ["items"],
        "properties": {
            "apiVersion": {"description": API_VERSION_DESCRIPTION, "type": "string"},
            "items": {
                "description": format!("List of {plural}. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md"),
                "type": "array",
                "items": {"$ref": items_ref},
            },
            "kind": {"description": KIND_DESCRIPTION, "type": "string"},
            "metadata": metadata_ref(flavor, LIST_META, LIST_METADATA_DESCRIPTION),
        },
    });
    if let Value::Object(m) = &mut list {
        add_gvk(m, &group, version, &list_kind);
    }
    Definitions::from([
        (name, root),
        (custom_definition_name(&group, version, &list_kind), list),
    ])
}

/// A CRD's structural schema (or one of its nodes) for `flavor`: kept as
/// written, with embedded resources given `apiVersion`, `kind` and
/// `metadata`; in v2, what v2 cannot say is dropped as the real server's
/// `ToStructuralOpenAPIV2` drops it.
fn custom_schema(schema: &Value, flavor: Flavor) -> Value {
    let Value::Object(input) = schema else {
        return schema.clone();
    };
    let mut s = input.clone();
    for key in ["properties", "patternProperties", "definitions"] {
        if let Some(Value::Object(props)) = s.get_mut(key) {
            for v in props.values_mut() {
                *v = custom_schema(v, flavor);
            }
        }
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(v @ Value::Object(_)) = s.get_mut(key) {
            *v = custom_schema(v, flavor);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(items)) = s.get_mut(key) {
            for v in items {
                *v = custom_schema(v, flavor);
            }
        }
    }
    let flag = |s: &Map<String, Value>, k: &str| s.get(k).and_then(Value::as_bool) == Some(true);
    if flavor == Flavor::V2 {
        for junctor in ["allOf", "anyOf", "oneOf", "not"] {
            s.remove(junctor);
        }
        if flag(&s, "nullable") {
            for k in ["type", "nullable", "items", "properties"] {
                s.remove(k);
            }
        }
        if flag(&s, "x-kubernetes-preserve-unknown-fields") {
            s.remove("items");
            s.remove("properties");
        }
        if s.get("type").and_then(Value::as_str) == Some("array") && !s.contains_key("items") {
            s.remove("type");
        }
        if flag(&s, "x-kubernetes-preserve-unknown-fields")
            && s.get("type").and_then(Value::as_str) == Some("object")
        {
            s.remove("type");
        }
        let nullable: BTreeSet<String> = input
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| {
                p.iter()
                    .filter(|(_, v)| v["nullable"].as_bool() == Some(true))
                    .map(|(k, _)| k.clone())
                    .collect()
            })
            .unwrap_or_default();
        if let Some(Value::Array(req)) = s.get_mut("required") {
            req.retain(|r| !r.as_str().is_some_and(|r| nullable.contains(r)));
            if req.is_empty() {
                s.remove("required");
            }
        }
        if input
            .get("additionalProperties")
            .and_then(|a| a.get("nullable"))
            .and_then(Value::as_bool)
            == Some(true)
        {
            s.remove("required");
        }
    }
    let skip_embedded = flavor == Flavor::V2 && flag(&s, "x-kubernetes-preserve-unknown-fields");
    if flag(&s, "x-kubernetes-embedded-resource") && !skip_embedded {
        let props = s
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(props) = props {
            props.insert(
                "apiVersion".into(),
                json!({"description": EMBEDDED_API_VERSION_DESCRIPTION, "type": "string"}),
            );
            props.insert(
                "kind".into(),
                json!({"description": EMBEDDED_KIND_DESCRIPTION, "type": "string"}),
            );
            props.insert(
                "metadata".into(),
                metadata_ref(flavor, OBJECT_META, METADATA_DESCRIPTION),
            );
        }
        let req = s.entry("required").or_insert_with(|| json!([]));
        if let Value::Array(req) = req {
            for k in ["kind", "apiVersion"] {
                if !req.iter().any(|r| r == k) {
                    req.push(json!(k));
                }
            }
        }
    }
    Value::Object(s)
}

fn crds(store: &Store) -> Vec<std::sync::Arc<Value>> {
    store.list(
        &GroupResource {
            group: "apiextensions.k8s.io".into(),
            resource: "customresourcedefinitions".into(),
        },
        None,
    )
}

/// The definitions of the kinds served at `group/version` (every served
/// group/version when `None`), with every definition they refer to.
fn definitions_for(
    registry: &Registry,
    store: &Store,
    gv: Option<(&str, &str)>,
    flavor: Flavor,
) -> Definitions {
    let builtin = builtin_definitions(flavor);
    let mut roots: Definitions = Definitions::new();
    for ((g, v, k), name) in &builtins().kinds {
        if gv.is_some_and(|gv| gv != (*g, *v)) {
            continue;
        }
        let served = registry
            .resources(g, v)
            .iter()
            .any(|d| !d.custom && d.kind == *k);
        if let (true, Some(schema)) = (served, builtin.get(name)) {
            roots.insert(name.clone(), schema.clone());
        }
    }
    for crd in crds(store) {
        let group = crd["spec"]["group"].as_str().unwrap_or_default();
        for v in crd["spec"]["versions"].as_array().into_iter().flatten() {
            let version = v["name"].as_str().unwrap_or_default();
            if gv.is_some_and(|gv| gv != (group, version)) {
                continue;
            }
            roots.extend(crd_definitions(&crd, version, flavor));
        }
    }
    // Everything the roots refer to.
    let mut pending: Vec<String> = roots.values().flat_map(|s| refs(s, flavor)).collect();
    while let Some(name) = pending.pop() {
        if roots.contains_key(&name) {
            continue;
        }
        if let Some(schema) = builtin.get(&name) {
            pending.extend(refs(schema, flavor));
            roots.insert(name, schema.clone());
        }
    }
    roots
}

/// The definition names `schema` refers to.
fn refs(schema: &Value, flavor: Flavor) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![schema];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(m) => {
                if let Some(name) = m
                    .get("$ref")
                    .and_then(Value::as_str)
                    .and_then(|r| r.strip_prefix(flavor.ref_prefix()))
                {
                    out.push(name.to_string());
                }
                stack.extend(m.values());
            }
            Value::Array(a) => stack.extend(a),
            _ => {}
        }
    }
    out
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The `PATCH` operations of `group/version` (or every group/version):
/// enough for clients to learn that the server takes `fieldValidation`.
fn patch_paths(
    registry: &Registry,
    gv: Option<(&str, &str)>,
    flavor: Flavor,
) -> Map<String, Value> {
    let mut gvs = vec![(String::new(), "v1".to_string())];
    for (group, versions) in registry.groups() {
        gvs.extend(versions.into_iter().map(|v| (group.clone(), v)));
    }
    let mut paths = Map::new();
    for (group, version) in gvs {
        if gv.is_some_and(|gv| gv != (group.as_str(), version.as_str())) {
            continue;
        }
        let prefix = format!("/{}", gv_path(&group, &version));
        for d in registry.resources(&group, &version) {
            let scope = if d.namespaced {
                "/namespaces/{namespace}"
            } else {
                ""
            };
            let gvk = json!({"group": d.group, "version": d.version, "kind": d.kind});
            let param = |name: &str, ty: &str| match flavor {
                Flavor::V2 => json!({"name": name, "in": "query", "type": ty, "uniqueItems": true}),
                Flavor::V3 => {
                    json!({"name": name, "in": "query", "schema": {"type": ty, "uniqueItems": true}})
                }
            };
            let op = json!({
                "description": format!("partially update the specified {}", d.kind),
                "operationId": format!("patch{}", d.kind),
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": gvk,
                "parameters": [
                    param("dryRun", "string"),
                    param("fieldManager", "string"),
                    param("fieldValidation", "string"),
                    param("force", "boolean"),
                ],
                "responses": {"200": {"description": "OK"}, "401": {"description": "Unauthorized"}},
            });
            paths.insert(
                format!("{prefix}{scope}/{}/{{name}}", d.plural),
                json!({ "patch": op }),
            );
        }
    }
    paths
}

/// `GET /openapi/v3`: one entry per served group/version, whose `hash` is
/// a digest of its document, so clients refetch a document that changed.
#[must_use]
pub fn index(registry: &Registry, store: &Store) -> Value {
    let mut paths = Map::new();
    let mut add = |group: &str, version: &str| {
        let Some(doc) = document(registry, store, group, version) else {
            return;
        };
        let digest = ring::digest::digest(&ring::digest::SHA512, doc.to_string().as_bytes());
        let hash: String = digest.as_ref().iter().map(|b| format!("{b:02X}")).collect();
        let p = gv_path(group, version);
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={hash}")}),
        );
    };
    add("", "v1");
    for (group, versions) in registry.groups() {
        for v in versions {
            add(&group, &v);
        }
    }
    json!({ "paths": paths })
}

/// `GET /openapi/v3/api/v1` or `/openapi/v3/apis/{group}/{version}`; `None`
/// when nothing is served there.
#[must_use]
pub fn document(registry: &Registry, store: &Store, group: &str, version: &str) -> Option<Value> {
    if registry.resources(group, version).is_empty() {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.34.0"},
        "paths": patch_paths(registry, Some((group, version)), Flavor::V3),
        "components": {"schemas": definitions_for(registry, store, Some((group, version)), Flavor::V3)},
    }))
}

/// `GET /openapi/v2`: every served kind's definition.
#[must_use]
pub fn swagger(registry: &Registry, store: &Store) -> Value {
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "v1.34.0"},
        "paths": patch_paths(registry, None, Flavor::V2),
        "definitions": definitions_for(registry, store, None, Flavor::V2),
    })
}

/// Whether an `Accept` header lets `/openapi/v2` answer JSON (the real
/// server also speaks protobuf, which this one does not: a client that
/// accepts nothing else gets `406`).
#[must_use]
pub fn accepts_json(accept: &str) -> bool {
    let accept = accept.trim();
    accept.is_empty()
        || accept.split(',').any(|clause| {
            let media = clause.split(';').next().unwrap_or_default().trim();
            matches!(media, "*/*" | "application/*" | "application/json")
        })
}

/// Drops the unknown fields of `object`, a `def` object as a client sent
/// it, as the real server's decoding into its types drops them, and
/// returns their paths. They are unknown by the schema the server publishes
/// for the kind (what a request with `fieldValidation` `Strict` is refused
/// for and `Warn` warns about), named as the real server names them:
/// `spec.bogus`, `spec.containers[0].x`. Nothing is unknown under
/// `x-kubernetes-preserve-unknown-fields`, a map (`additionalProperties`)
/// or an object schema without properties.
pub fn drop_unknown_fields(store: &Store, def: &ResourceDef, object: &mut Value) -> Vec<String> {
    drop_unknown(store, def, object, false)
}

/// Drops the unknown fields of a merge or strategic merge patch of a `def`
/// object and returns their paths: as [`drop_unknown_fields`], except that
/// a strategic merge patch's directives (`$patch`, `$setElementOrder/…`,
/// …) and the removal of a field (`null`) are not unknown fields.
pub fn drop_unknown_patch_fields(
    store: &Store,
    def: &ResourceDef,
    patch: &mut Value,
) -> Vec<String> {
    drop_unknown(store, def, patch, true)
}

fn drop_unknown(store: &Store, def: &ResourceDef, object: &mut Value, patch: bool) -> Vec<String> {
    let builtin = builtin_definitions(Flavor::V3);
    let (custom, root) = if def.custom {
        let crd = store.get(
            &GroupResource {
                group: "apiextensions.k8s.io".into(),
                resource: "customresourcedefinitions".into(),
            },
            "",
            &format!("{}.{}", def.plural, def.group),
        );
        let custom = crd
            .map(|crd| crd_definitions(&crd, &def.version, Flavor::V3))
            .unwrap_or_default();
        (
            custom,
            custom_definition_name(&def.group, &def.version, &def.kind),
        )
    } else {
        let name = builtins()
            .kinds
            .iter()
            .find(|((g, v, k), _)| {
                (*g, *v, *k) == (def.group.as_str(), def.version.as_str(), def.kind.as_str())
            })
            .map(|(_, n)| n.clone())
            .unwrap_or_default();
        (Definitions::new(), name)
    };
    let lookup = |name: &str| custom.get(name).or_else(|| builtin.get(name));
    let Some(schema) = lookup(&root) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    walk_unknown(&lookup, schema, object, "", 0, patch, &mut out);
    out
}

fn walk_unknown<'a>(
    lookup: &impl Fn(&str) -> Option<&'a Value>,
    schema: &'a Value,
    value: &mut Value,
    path: &str,
    depth: usize,
    patch: bool,
    out: &mut Vec<String>,
) {
    // Deep enough for any real object; a bound against reference cycles.
    if depth > 64 {
        return;
    }
    let reference = schema
        .get("$ref")
        .or_else(|| {
            schema
                .get("allOf")
                .and_then(|a| a.get(0))
                .and_then(|a| a.get("$ref"))
        })
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix(Flavor::V3.ref_prefix()));
    if let Some(target) = reference.and_then(lookup) {
        walk_unknown(lookup, target, value, path, depth + 1, patch, out);
        return;
    }
    if schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true)
    {
        return;
    }
    match value {
        Value::Object(fields) => {
            let join = |k: &str| {
                if path.is_empty() {
                    k.to_string()
                } else {
                    format!("{path}.{k}")
                }
            };
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                fields.retain(|k, v| {
                    let known =
                        props.contains_key(k) || (patch && (k.starts_with('$') || v.is_null()));
                    if !known {
                        out.push(join(k));
                    }
                    known
                });
                for (k, v) in fields.iter_mut() {
                    if let Some(sub) = props.get(k) {
                        walk_unknown(lookup, sub, v, &join(k), depth + 1, patch, out);
                    }
                }
            } else if let Some(sub @ Value::Object(_)) = schema.get("additionalProperties") {
                for (k, v) in fields.iter_mut() {
                    walk_unknown(lookup, sub, v, &join(k), depth + 1, patch, out);
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.get("items") {
                for (i, v) in items.iter_mut().enumerate() {
                    walk_unknown(
                        lookup,
                        sub,
                        v,
                        &format!("{path}[{i}]"),
                        depth + 1,
                        patch,
                        out,
                    );
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The unknown fields of `object`, which is left as it is.
    fn unknown_fields(store: &Store, def: &ResourceDef, object: &Value) -> Vec<String> {
        let mut copy = object.clone();
        drop_unknown_fields(store, def, &mut copy)
    }

    #[test]
    fn patch_operations_declare_field_validation() {
        let r = crate::builtins::registry();
        let store = Store::new(10, 10);
        assert!(
            index(&r, &store)["paths"]["apis/apps/v1"]["serverRelativeURL"]
                .as_str()
                .unwrap()
                .starts_with("/openapi/v3/apis/apps/v1?hash=")
        );
        let doc = document(&r, &store, "apps", "v1").unwrap();
        let op = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(op["x-kubernetes-group-version-kind"]["kind"], "Deployment");
        assert!(
            op["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == "fieldValidation")
        );
        assert!(document(&r, &store, "nope.io", "v1").is_none());
    }

    #[test]
    fn json_schema_references_become_openapi_references() {
        let s = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "required": ["spec"],
            "properties": {
                "metadata": {"$ref": "#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "description": "Meta."},
                "items": {"type": "array", "items": {"$ref": "#/$defs/a.B"}},
                "mode": {"type": "string", "enum": ["$ref"]},
            },
        });
        assert_eq!(
            from_json_schema(&s, Flavor::V3),
            json!({
                "type": "object",
                "required": ["spec"],
                "properties": {
                    "metadata": {"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}], "description": "Meta."},
                    "items": {"type": "array", "items": {"$ref": "#/components/schemas/a.B"}},
                    "mode": {"type": "string", "enum": ["$ref"]},
                },
            })
        );
        let v2 = from_json_schema(&s, Flavor::V2);
        assert_eq!(
            v2["properties"]["metadata"],
            json!({"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "description": "Meta."})
        );
        assert_eq!(
            v2["properties"]["items"]["items"]["$ref"],
            "#/definitions/a.B"
        );
    }

    #[test]
    fn builtin_kinds_have_real_names_descriptions_and_gvk() {
        let v3 = builtin_definitions(Flavor::V3);
        let dep = &v3["io.k8s.api.apps.v1.Deployment"];
        assert_eq!(
            dep["x-kubernetes-group-version-kind"],
            json!([{"group": "apps", "kind": "Deployment", "version": "v1"}])
        );
        assert!(dep.get("required").is_none(), "{dep}");
        assert_eq!(
            dep["properties"]["spec"]["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"
        );
        let replicas = &v3["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["replicas"];
        assert_eq!(replicas["type"], "integer");
        assert!(
            replicas["description"]
                .as_str()
                .unwrap()
                .starts_with("Number of desired pods.")
        );
        let v2 = builtin_definitions(Flavor::V2);
        assert_eq!(
            v2["io.k8s.api.apps.v1.Deployment"]["properties"]["metadata"]["$ref"],
            "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );
        let ios = &v2["io.k8s.apimachinery.pkg.util.intstr.IntOrString"];
        assert_eq!(
            (&ios["type"], &ios["format"]),
            (&json!("string"), &json!("int-or-string"))
        );
        // Every reference resolves.
        for flavor in [Flavor::V2, Flavor::V3] {
            let defs = builtin_definitions(flavor);
            for s in defs.values() {
                for r in refs(s, flavor) {
                    assert!(defs.contains_key(&r), "{r} unresolved");
                }
            }
        }
    }

    fn gizmo_crd() -> Value {
        json!({
            "metadata": {"name": "gizmos.example.com"},
            "spec": {
                "group": "example.com",
                "scope": "Namespaced",
                "names": {"plural": "gizmos", "kind": "Gizmo", "listKind": "GizmoList"},
                "versions": [{
                    "name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {
                        "type": "object",
                        "description": "A Gizmo.",
                        "properties": {"spec": {
                            "type": "object",
                            "required": ["color", "note"],
                            "properties": {
                                "color": {"type": "string", "description": "Its color.", "enum": ["red"]},
                                "note": {"type": "string", "nullable": true},
                                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                                         "properties": {"a": {"type": "string"}}},
                                "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                                "inner": {"type": "object", "x-kubernetes-embedded-resource": true,
                                          "x-kubernetes-preserve-unknown-fields": true},
                            },
                        }},
                    }},
                }, {"name": "v0", "served": false, "storage": false}],
            },
        })
    }

    #[test]
    fn crd_schemas_as_the_real_server_publishes_them() {
        let crd = gizmo_crd();
        let v3 = crd_definitions(&crd, "v1", Flavor::V3);
        let g = &v3["com.example.v1.Gizmo"];
        assert_eq!(g["description"], "A Gizmo.");
        assert_eq!(
            g["x-kubernetes-group-version-kind"],
            json!([{"group": "example.com", "kind": "Gizmo", "version": "v1"}])
        );
        assert_eq!(
            g["properties"]["metadata"]["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );
        assert_eq!(g["properties"]["kind"]["type"], "string");
        let spec = &g["properties"]["spec"];
        assert_eq!(spec["properties"]["color"]["description"], "Its color.");
        assert_eq!(spec["properties"]["note"]["nullable"], true);
        assert_eq!(
            spec["properties"]["free"]["properties"]["a"]["type"],
            "string"
        );
        assert_eq!(
            spec["properties"]["inner"]["required"],
            json!(["kind", "apiVersion"])
        );
        assert_eq!(
            v3["com.example.v1.GizmoList"]["properties"]["items"]["items"]["$ref"],
            "#/components/schemas/com.example.v1.Gizmo"
        );

        let v2 = crd_definitions(&crd, "v1", Flavor::V2);
        let spec = &v2["com.example.v1.Gizmo"]["properties"]["spec"];
        assert_eq!(spec["required"], json!(["color"]));
        assert_eq!(spec["properties"]["note"], json!({}));
        assert_eq!(
            spec["properties"]["free"],
            json!({"x-kubernetes-preserve-unknown-fields": true})
        );
        assert_eq!(
            spec["properties"]["port"],
            json!({"x-kubernetes-int-or-string": true})
        );
        assert!(spec["properties"]["inner"].get("properties").is_none());
        assert_eq!(
            v2["com.example.v1.Gizmo"]["properties"]["metadata"]["$ref"],
            "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );
        assert!(crd_definitions(&crd, "v0", Flavor::V3).is_empty());
    }

    #[test]
    fn unknown_fields_by_the_published_schema() {
        let registry = crate::builtins::registry();
        let mut store = Store::new(10, 10);
        let crds = GroupResource {
            group: "apiextensions.k8s.io".into(),
            resource: "customresourcedefinitions".into(),
        };
        store.put(&crds, "", "gizmos.example.com", gizmo_crd());
        let mut gizmo = registry
            .get("", "v1", "configmaps")
            .unwrap()
            .as_ref()
            .clone();
        (
            gizmo.group,
            gizmo.version,
            gizmo.kind,
            gizmo.plural,
            gizmo.custom,
        ) = (
            "example.com".into(),
            "v1".into(),
            "Gizmo".into(),
            "gizmos".into(),
            true,
        );
        let object = json!({
            "apiVersion": "example.com/v1", "kind": "Gizmo",
            "metadata": {"name": "g", "labels": {"a": "b"}, "bogus": 1},
            "spec": {"color": "red", "bogus": 1, "free": {"any": 1}, "port": 3,
                     "inner": {"apiVersion": "v1", "kind": "X", "spec": {"x": "y", "z": 1}}},
            "extra": true,
        });
        assert_eq!(
            unknown_fields(&store, &gizmo, &object),
            // `inner` preserves unknown fields; `free` too, `port` is a value.
            ["extra", "metadata.bogus", "spec.bogus"]
        );
        let deployment = registry.get("apps", "v1", "deployments").unwrap();
        let object = json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "c", "imagee": "x"}]}}},
        });
        assert_eq!(
            unknown_fields(&store, &deployment, &object),
            ["spec.template.spec.containers[0].imagee"]
        );
        let cm = registry.get("", "v1", "configmaps").unwrap();
        assert!(unknown_fields(&store, &cm, &json!({"data": {"k": "v"}})).is_empty());
        let mut sent = json!({"data": {"k": "v"}, "datta": 1, "metadata": {"name": "c", "nam": 1}});
        assert_eq!(
            drop_unknown_fields(&store, &cm, &mut sent),
            ["datta", "metadata.nam"]
        );
        assert_eq!(sent, json!({"data": {"k": "v"}, "metadata": {"name": "c"}}));
        // A patch: directives and removals are not unknown fields.
        let deployment = registry.get("apps", "v1", "deployments").unwrap();
        let mut patch = json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "c"}],
            "containers": [{"name": "c", "$patch": "replace", "imagee": "x"}],
            "old": null, "neu": 1,
        }}}});
        assert_eq!(
            drop_unknown_patch_fields(&store, &deployment, &mut patch),
            [
                "spec.template.spec.neu",
                "spec.template.spec.containers[0].imagee"
            ]
        );
        assert!(patch["spec"]["template"]["spec"].get("old").is_some());
        assert!(unknown_fields(&store, &cm, &json!("not an object")).is_empty());
    }

    #[test]
    fn accept_negotiation() {
        assert!(accepts_json(""));
        assert!(accepts_json("application/json, */*"));
        assert!(accepts_json("application/json;q=0.9"));
        assert!(!accepts_json(
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
        ));
    }
}
