//! Field ownership: `metadata.managedFields` and its `fieldsV1` sets.
//!
//! A field set is the set of paths to the leaves a manager owns, written
//! as the real server writes them: `f:<field>` for an object field,
//! `k:{"name":"app"}` for an element of a list merged by key (the keys of
//! [`super::list_rules`] for built-in kinds, read from the real server's
//! OpenAPI extensions; a CRD's `x-kubernetes-list-map-keys` for custom
//! resources: see [`list_kind`]), `v:"a"` for an element of a set, and `.`
//! for the element itself. A key field the element leaves out counts with
//! its default (`protocol: TCP` of a port), as on the real server.
//! Scalars, empty objects, atomic maps (a `LabelSelector`,
//! `x-kubernetes-map-type: atomic`) and atomic lists (`args`, lists
//! without extensions) are leaves, owned whole.
//!
//! Writes other than an apply (create, update, patch) are recorded as
//! operation `Update` of their field manager (`fieldManager`, else the
//! User-Agent up to its first `/`): the fields they change move to that
//! manager. Fields a write removes leave every set. What a client writes
//! into `managedFields` counts as the real server counts it ([`given`]):
//! `[{}]` drops every entry, a list of valid entries replaces the live ones
//! (kubectl's client-side to server-side apply migration writes them with
//! a JSON patch), anything else leaves the live entries.
//!
//! Not tracked: `apiVersion`, `kind`, the identity and system fields of
//! `metadata` (`name`, `namespace`, `uid`, `resourceVersion`, `generation`,
//! `creationTimestamp`, `deletionTimestamp`, `managedFields`), and `status`
//! for writes to the main resource when the status subresource exists.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::list_rules::{self, ApplyList};
use crate::resources::ResourceDef;

/// A path to a leaf: `fieldsV1` keys (`f:spec`, `k:{"name":"a"}`, `.`).
pub type FieldPath = Vec<String>;

/// The leaves of an object, each with its value (`null` for `.`).
pub type Leaves = BTreeMap<FieldPath, Value>;

const SYSTEM_METADATA: [&str; 10] = [
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

/// Which fields of an object a write can own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scope<'a> {
    /// The built-in kind written: its lists and maps merge as its OpenAPI
    /// extensions say ([`list_rules`]).
    pub builtin: Option<&'a ResourceDef>,
    /// A custom resource's `openAPIV3Schema`: its lists marked
    /// `x-kubernetes-list-type: map` are keyed by their
    /// `x-kubernetes-list-map-keys`.
    pub schema: Option<&'a Value>,
    /// The write targets the `status` subresource (only `status` counts).
    pub status_only: bool,
    /// `status` does not count (main resource with a status subresource).
    pub without_status: bool,
}

/// The owned-field leaves of `object` in `scope`.
#[must_use]
pub fn leaves(object: &Value, scope: Scope<'_>) -> Leaves {
    let mut out = Leaves::new();
    let Some(top) = object.as_object() else {
        return out;
    };
    for (k, v) in top {
        let skip = match k.as_str() {
            "apiVersion" | "kind" => true,
            "status" => scope.without_status,
            _ => scope.status_only,
        };
        if skip {
            continue;
        }
        let mut path = vec![format!("f:{k}")];
        if k == "metadata" {
            if let Some(m) = v.as_object() {
                for (mk, mv) in m {
                    if SYSTEM_METADATA.contains(&mk.as_str()) {
                        continue;
                    }
                    path.push(format!("f:{mk}"));
                    walk(mv, &mut path, &mut vec!["metadata", mk], scope, &mut out);
                    path.pop();
                }
            }
            continue;
        }
        walk(v, &mut path, &mut vec![k.as_str()], scope, &mut out);
    }
    out
}

/// How the elements of a list are owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListKind {
    /// Elements identified by these key fields (`k:{…}`).
    Keys(Vec<String>),
    /// Scalars, each its own element (`v:…`).
    Set,
}

/// How the elements of the list at `names` (object keys from the root)
/// are merged and owned, if one by one: a built-in kind's list by its
/// OpenAPI extensions, a CRD's by `x-kubernetes-list-type` (`map` with
/// its `x-kubernetes-list-map-keys`, or `set`). `None`: atomic.
#[must_use]
pub fn list_kind(names: &[&str], scope: Scope<'_>) -> Option<ListKind> {
    if let Some(def) = scope.builtin {
        return match list_rules::at(def, names)?.apply_list() {
            ApplyList::Map(keys) => {
                Some(ListKind::Keys(keys.into_iter().map(String::from).collect()))
            }
            ApplyList::Set => Some(ListKind::Set),
            ApplyList::Atomic => None,
        };
    }
    let node = schema_at(names, scope)?;
    match node.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => Some(ListKind::Set),
        Some("map") => {
            let keys: Vec<String> = node
                .get("x-kubernetes-list-map-keys")?
                .as_array()?
                .iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect();
            (!keys.is_empty()).then_some(ListKind::Keys(keys))
        }
        _ => None,
    }
}

/// The key fields of the list at `names`, if it is merged by key.
#[must_use]
pub fn list_keys(names: &[&str], scope: Scope<'_>) -> Option<Vec<String>> {
    match list_kind(names, scope)? {
        ListKind::Keys(keys) => Some(keys),
        ListKind::Set => None,
    }
}

/// Whether the map at `names` is owned as one value.
#[must_use]
pub fn atomic_map(names: &[&str], scope: Scope<'_>) -> bool {
    if let Some(def) = scope.builtin {
        return list_rules::at(def, names).is_some_and(|r| r.atomic_map());
    }
    schema_at(names, scope)
        .and_then(|n| n.get("x-kubernetes-map-type"))
        .and_then(Value::as_str)
        == Some("atomic")
}

/// A custom resource's schema of the field at `names`.
fn schema_at<'a>(names: &[&str], scope: Scope<'a>) -> Option<&'a Value> {
    let mut node = scope.schema?;
    for name in names {
        if node.get("type").and_then(Value::as_str) == Some("array") {
            node = node.get("items")?;
        }
        node = node.get("properties")?.get(*name)?;
    }
    Some(node)
}

/// The `k:` key of a list element, if the list at `names` merges by key:
/// its key fields' values, a missing one with its default.
pub(crate) fn element_key(names: &[&str], item: &Value, scope: Scope<'_>) -> Option<String> {
    let keys = list_keys(names, scope)?;
    let mut id = Map::new();
    for k in keys {
        let v = item
            .get(&k)
            .cloned()
            .or_else(|| list_rules::key_default(&k))?;
        id.insert(k, v);
    }
    Some(format!("k:{}", Value::Object(id)))
}

/// The `v:` step of a set's element.
pub(crate) fn set_element(item: &Value) -> String {
    format!("v:{item}")
}

fn walk<'a>(
    v: &'a Value,
    path: &mut FieldPath,
    names: &mut Vec<&'a str>,
    scope: Scope<'_>,
    out: &mut Leaves,
) {
    match v {
        Value::Object(m) if !m.is_empty() && !atomic_map(names, scope) => {
            for (k, child) in m {
                path.push(format!("f:{k}"));
                names.push(k);
                walk(child, path, names, scope, out);
                names.pop();
                path.pop();
            }
        }
        Value::Array(items)
            if !items.is_empty()
                && items.iter().all(|i| element_key(names, i, scope).is_some()) =>
        {
            for item in items {
                let Some(k) = element_key(names, item, scope) else {
                    continue;
                };
                path.push(k);
                path.push(".".into());
                out.insert(path.clone(), Value::Null);
                path.pop();
                if let Some(m) = item.as_object() {
                    for (ik, iv) in m {
                        path.push(format!("f:{ik}"));
                        names.push(ik);
                        walk(iv, path, names, scope, out);
                        names.pop();
                        path.pop();
                    }
                }
                path.pop();
            }
        }
        Value::Array(items)
            if !items.is_empty()
                && items.iter().all(|i| !i.is_object() && !i.is_array())
                && list_kind(names, scope) == Some(ListKind::Set) =>
        {
            for item in items {
                path.push(set_element(item));
                out.insert(path.clone(), item.clone());
                path.pop();
            }
        }
        other => {
            out.insert(path.clone(), other.clone());
        }
    }
}

/// A `fieldsV1` tree of a set of paths.
#[must_use]
pub fn to_fields_v1<'a>(paths: impl IntoIterator<Item = &'a FieldPath>) -> Value {
    let mut root = Map::new();
    for p in paths {
        let mut node = &mut root;
        for step in p {
            let next = node
                .entry(step.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            if !next.is_object() {
                *next = Value::Object(Map::new());
            }
            let Value::Object(m) = next else {
                break;
            };
            node = m;
        }
    }
    Value::Object(root)
}

/// The paths of a `fieldsV1` tree (paths to its empty objects).
#[must_use]
pub fn from_fields_v1(tree: &Value) -> BTreeSet<FieldPath> {
    fn go(v: &Value, path: &mut FieldPath, out: &mut BTreeSet<FieldPath>) {
        match v.as_object() {
            Some(m) if !m.is_empty() => {
                for (k, child) in m {
                    path.push(k.clone());
                    go(child, path, out);
                    path.pop();
                }
            }
            _ => {
                if !path.is_empty() {
                    out.insert(path.clone());
                }
            }
        }
    }
    let mut out = BTreeSet::new();
    go(tree, &mut Vec::new(), &mut out);
    out
}

/// A path as the real server prints it in conflicts: `.spec.replicas`,
/// `.spec.containers[name="app"].image`.
#[must_use]
pub fn display(path: &FieldPath) -> String {
    let mut out = String::new();
    for step in path {
        if let Some(f) = step.strip_prefix("f:") {
            out.push('.');
            out.push_str(f);
        } else if let Some(k) = step.strip_prefix("k:") {
            let fields: Vec<String> = serde_json::from_str::<Map<String, Value>>(k)
                .map(|m| m.iter().map(|(k, v)| format!("{k}={v}")).collect())
                .unwrap_or_else(|_| vec![k.to_string()]);
            out.push_str(&format!("[{}]", fields.join(",")));
        }
    }
    out
}

/// Whether an entry records an apply or another write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// Server-side apply.
    Apply,
    /// Create, update or patch.
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Self::Apply => "Apply",
            Self::Update => "Update",
        }
    }
}

/// One entry of `metadata.managedFields`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The field manager.
    pub manager: String,
    /// Apply or Update.
    pub operation: Operation,
    /// The group/version the write used.
    pub api_version: String,
    /// When the entry last changed (RFC 3339).
    pub time: String,
    /// `status` for writes to the status subresource.
    pub subresource: Option<String>,
    /// The owned fields.
    pub fields: BTreeSet<FieldPath>,
}

impl Entry {
    fn same_owner(&self, manager: &str, operation: Operation, subresource: Option<&str>) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource.as_deref() == subresource
    }

    /// The entry as JSON.
    #[must_use]
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "manager": self.manager,
            "operation": self.operation.as_str(),
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": to_fields_v1(&self.fields),
        });
        // Entries a client wrote may lack these; the real server keeps
        // them absent.
        for (key, empty) in [
            ("manager", self.manager.is_empty()),
            ("apiVersion", self.api_version.is_empty()),
            ("time", self.time.is_empty()),
        ] {
            if empty && let Some(m) = v.as_object_mut() {
                m.remove(key);
            }
        }
        if let Some(s) = &self.subresource {
            v["subresource"] = json!(s);
        }
        v
    }

    fn from_json(v: &Value) -> Option<Self> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(String::from);
        Some(Self {
            manager: s("manager").unwrap_or_default(),
            operation: match v.get("operation").and_then(Value::as_str)? {
                "Apply" => Operation::Apply,
                _ => Operation::Update,
            },
            api_version: s("apiVersion").unwrap_or_default(),
            time: s("time").unwrap_or_default(),
            subresource: s("subresource"),
            fields: v.get("fieldsV1").map(from_fields_v1).unwrap_or_default(),
        })
    }
}

/// What a written object carries in `metadata.managedFields`.
#[derive(Debug, Clone, PartialEq)]
pub enum Given {
    /// Nothing usable (absent, empty, or an entry the real server cannot
    /// decode): the live object's entries stay.
    None,
    /// `[{}]`: the real server drops every entry.
    Reset,
    /// A list of valid entries: they replace the live ones.
    Entries(Value),
}

/// Classifies the `managedFields` a client wrote into `object`, as the
/// real field manager does: `[{}]` resets, a list of entries each with
/// `fieldsType: FieldsV1` and a `fieldsV1` object replaces the live
/// entries, anything else is ignored.
#[must_use]
pub fn given(object: &Value) -> Given {
    let Some(list) = object["metadata"]["managedFields"].as_array() else {
        return Given::None;
    };
    if list.len() == 1 && list[0].as_object().is_some_and(Map::is_empty) {
        return Given::Reset;
    }
    let valid = |e: &Value| e["fieldsType"] == "FieldsV1" && e["fieldsV1"].is_object();
    if list.is_empty() || !list.iter().all(valid) {
        return Given::None;
    }
    Given::Entries(Value::Array(list.clone()))
}

/// The entries of `object`'s `metadata.managedFields`.
#[must_use]
pub fn entries(object: &Value) -> Vec<Entry> {
    object["metadata"]["managedFields"]
        .as_array()
        .map(|a| a.iter().filter_map(Entry::from_json).collect())
        .unwrap_or_default()
}

/// Writes `entries` (without empty ones) into `object`'s metadata.
pub fn set_entries(object: &mut Value, entries: &[Entry]) {
    let list: Vec<Value> = entries
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(Entry::to_json)
        .collect();
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        if list.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(list));
        }
    }
}

/// Who writes: the field manager and the identity of its entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Writer<'a> {
    /// The field manager.
    pub manager: &'a str,
    /// Apply or Update.
    pub operation: Operation,
    /// The group/version of the request.
    pub api_version: &'a str,
    /// `status` for the status subresource.
    pub subresource: Option<&'a str>,
    /// The time of the write (RFC 3339).
    pub time: &'a str,
}

/// Records a write other than an apply, from `old` to `new`: the fields it
/// changed move to `writer` (when there is one: internal writes of the
/// server have none), the fields it removed leave every entry. `new`'s
/// `managedFields` are those of `old`, updated.
pub fn record_update(old: &Value, new: &mut Value, scope: Scope<'_>, writer: Option<&Writer<'_>>) {
    let before = leaves(old, scope);
    let after = leaves(new, scope);
    let mut list = entries(old);
    let changed: BTreeSet<&FieldPath> = after
        .iter()
        .filter(|(p, v)| before.get(*p) != Some(*v))
        .map(|(p, _)| p)
        .collect();
    for e in &mut list {
        // Entries of the other scope (status vs main) keep what they own
        // outside this write's scope.
        let mine = writer.is_some_and(|w| e.same_owner(w.manager, w.operation, w.subresource));
        e.fields.retain(|p| {
            !p_in_scope(p, scope) || (after.contains_key(p) && (mine || !changed.contains(p)))
        });
    }
    if let Some(w) = writer
        && !changed.is_empty()
    {
        match list
            .iter_mut()
            .find(|e| e.same_owner(w.manager, w.operation, w.subresource))
        {
            Some(e) => {
                e.fields.extend(changed.iter().map(|p| (*p).clone()));
                e.time = w.time.to_string();
                e.api_version = w.api_version.to_string();
            }
            None => list.push(Entry {
                manager: w.manager.to_string(),
                operation: w.operation,
                api_version: w.api_version.to_string(),
                time: w.time.to_string(),
                subresource: w.subresource.map(String::from),
                fields: changed.iter().map(|p| (*p).clone()).collect(),
            }),
        }
    }
    set_entries(new, &list);
}

/// Whether `path` is one a write in `scope` could touch.
fn p_in_scope(path: &FieldPath, scope: Scope<'_>) -> bool {
    let is_status = path.first().is_some_and(|f| f == "f:status");
    if scope.status_only {
        is_status
    } else {
        !(is_status && scope.without_status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment() -> &'static ResourceDef {
        crate::internals::patch::builtin("Deployment").unwrap()
    }

    const NO_SCHEMA: Scope<'static> = Scope {
        builtin: None,
        schema: None,
        status_only: false,
        without_status: true,
    };

    #[test]
    fn leaves_and_fields_v1() {
        let d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [
                {"name": "app", "image": "a:1", "args": ["x"]}]}}},
            "status": {"replicas": 1}});
        let scope = Scope {
            builtin: Some(deployment()),
            ..NO_SCHEMA
        };
        let l = leaves(&d, scope);
        let fields = to_fields_v1(l.keys());
        assert_eq!(
            fields,
            json!({"f:metadata": {"f:labels": {"f:app": {}}},
                   "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
                       "k:{\"name\":\"app\"}": {".": {}, "f:name": {}, "f:image": {}, "f:args": {}}}}}}})
        );
        assert_eq!(from_fields_v1(&fields), l.keys().cloned().collect());
        let image = l
            .keys()
            .find(|p| p.last().is_some_and(|s| s == "f:image"))
            .unwrap();
        assert_eq!(
            display(image),
            ".spec.template.spec.containers[name=\"app\"].image"
        );
    }

    #[test]
    fn updates_move_changed_fields() {
        let old = json!({"metadata": {"managedFields": [
            {"manager": "a", "operation": "Apply", "apiVersion": "v1", "time": "t", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:data": {"f:x": {}, "f:y": {}, "f:z": {}}}}]},
            "data": {"x": "1", "y": "2", "z": "3"}});
        let mut new = json!({"metadata": {}, "data": {"x": "1", "y": "changed", "w": "new"}});
        let w = Writer {
            manager: "b",
            operation: Operation::Update,
            api_version: "v1",
            subresource: None,
            time: "t2",
        };
        record_update(&old, &mut new, NO_SCHEMA, Some(&w));
        let e = entries(&new);
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].manager, "a");
        assert_eq!(e[0].to_json()["fieldsV1"], json!({"f:data": {"f:x": {}}}));
        assert_eq!(e[1].manager, "b");
        assert_eq!(e[1].operation, Operation::Update);
        assert_eq!(
            e[1].to_json()["fieldsV1"],
            json!({"f:data": {"f:y": {}, "f:w": {}}})
        );
    }

    #[test]
    fn keys_with_defaults_atomic_selectors_and_sets_as_on_the_real_server() {
        // Seen on kube-apiserver 1.20: a port applied without its protocol
        // is keyed with the default, the selector is one leaf, finalizers
        // are a set.
        let d = json!({"metadata": {"finalizers": ["a/b"]},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80}]}]}}}});
        let scope = Scope {
            builtin: Some(deployment()),
            ..NO_SCHEMA
        };
        assert_eq!(
            to_fields_v1(leaves(&d, scope).keys()),
            json!({"f:metadata": {"f:finalizers": {"v:\"a/b\"": {}}},
                   "f:spec": {"f:selector": {}, "f:template": {"f:spec": {"f:containers": {
                       "k:{\"name\":\"c\"}": {".": {}, "f:name": {}, "f:ports": {
                           "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}}}}}}})
        );
    }
}
