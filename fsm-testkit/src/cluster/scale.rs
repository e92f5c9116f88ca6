//! The `scale` subresource: an `autoscaling/v1` `Scale` read from and
//! written to an object at the paths of its resource's [`ScalePaths`]
//! (a CRD's `subresources.scale`; `.spec.replicas`, `.status.replicas`
//! and `.spec.selector` of Deployments, StatefulSets and ReplicaSets), as
//! kube-apiserver 1.20's scale storages do.
//!
//! A read answers the Scale of the object: its name, namespace, uid,
//! resourceVersion and creation time, `spec.replicas` (left out when 0,
//! as Go's `omitempty`), `status.replicas` (0 when absent) and
//! `status.selector` (the CRD's string, or the workload's label selector
//! printed). A write (a PUT of a Scale, or a patch of the current one)
//! sets the object's replicas and updates the object through the
//! admission chain, its Scale's resourceVersion, if any, a precondition.

use serde_json::{Value, json};

use super::meta::{name_mismatch, str_at};
use super::{Cluster, Ownership, Part, not_found, present};
use crate::patch::{self, PatchType};
use crate::resources::{ResourceDef, ScalePaths, ScaleSelector};
use crate::reviews::{self, Review};
use crate::status::{ApiError, Cause, Subject};

/// The Scale kind, as request bodies are decoded against it.
const SCALE: Review = Review {
    group: "autoscaling",
    version: "v1",
    plural: "scale",
    kind: "Scale",
    namespaced: true,
};

/// The Scale kind as a resource, for patching a Scale: a built-in type,
/// so a strategic merge patch of it is taken even for a custom resource's
/// scale.
fn scale_def() -> &'static ResourceDef {
    static DEF: std::sync::OnceLock<ResourceDef> = std::sync::OnceLock::new();
    DEF.get_or_init(|| ResourceDef::builtin("autoscaling", "v1", "Scale", "scale", true))
}

/// The keys of a path such as `.spec.replicas`.
fn keys(path: &str) -> impl Iterator<Item = &str> {
    path.trim_start_matches('.')
        .split('.')
        .filter(|k| !k.is_empty())
}

fn at<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    keys(path).try_fold(object, |v, k| v.get(k))
}

/// The integer at `path`, `None` when absent.
///
/// # Errors
/// `500` for a value that is not an integer (the real `NestedInt64`).
fn replicas_at(object: &Value, path: &str) -> Result<Option<i64>, ApiError> {
    match at(object, path) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_i64().map(Some).ok_or_else(|| {
            ApiError::Internal(format!(
                "{} accessor error: {v} is of the type {}, expected int64",
                path.trim_start_matches('.'),
                json_type(v)
            ))
        }),
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "string",
        Value::Bool(_) => "bool",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
        Value::Number(_) => "float64",
        Value::Null => "<nil>",
    }
}

/// A label selector printed as Go's `labels.Selector` prints it:
/// requirements sorted by key, values sorted.
fn selector_string(selector: &Value) -> String {
    let mut requirements: Vec<(String, String)> = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), format!("{k}={}", v.as_str().unwrap_or_default())))
        .collect();
    for e in selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let key = e["key"].as_str().unwrap_or_default().to_string();
        let mut values: Vec<&str> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        values.sort_unstable();
        let text = match e["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.clone(),
            "DoesNotExist" => format!("!{key}"),
            other => format!("{key} {other}"),
        };
        requirements.push((key, text));
    }
    requirements.sort();
    requirements
        .into_iter()
        .map(|(_, text)| text)
        .collect::<Vec<_>>()
        .join(",")
}

/// The Scale of `object`, and whether it has its desired replicas (a
/// built-in workload without them has the kinds' default, 1).
fn scale_of(
    def: &ResourceDef,
    paths: &ScalePaths,
    object: &Value,
) -> Result<(Value, bool), ApiError> {
    let spec = replicas_at(object, &paths.spec_replicas)?;
    let status = replicas_at(object, &paths.status_replicas)?.unwrap_or(0);
    let (spec, found) = match (spec, def.custom) {
        (Some(n), _) => (n, true),
        (None, true) => (0, false),
        (None, false) => (1, true),
    };
    let selector = match &paths.selector {
        ScaleSelector::None => String::new(),
        ScaleSelector::Text(path) => at(object, path)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        ScaleSelector::LabelSelector(path) => {
            at(object, path).map(selector_string).unwrap_or_default()
        }
    };
    let meta = &object["metadata"];
    let mut metadata = json!({"name": meta["name"]});
    for field in ["namespace", "uid", "resourceVersion", "creationTimestamp"] {
        if let Some(v) = meta.get(field).filter(|v| !reviews::is_empty(v)) {
            metadata[field] = v.clone();
        }
    }
    let mut scale = json!({
        "kind": SCALE.kind,
        "apiVersion": SCALE.api_version(),
        "metadata": metadata,
        "spec": {},
        "status": {"replicas": status},
    });
    if spec != 0 {
        scale["spec"]["replicas"] = json!(spec);
    }
    if !selector.is_empty() {
        scale["status"]["selector"] = json!(selector);
    }
    Ok((scale, found))
}

/// A missing object, as a read of its scale names it: the built-in
/// storages' GET says `deployments/scale`, a CRD's the resource itself
/// (as their writes do).
fn scale_not_found(def: &ResourceDef, name: &str) -> ApiError {
    if def.custom {
        return not_found(def, name);
    }
    ApiError::NotFound(Subject::new(
        &def.group,
        &format!("{}/scale", def.plural),
        name,
    ))
}

fn paths_of(def: &ResourceDef) -> Result<&ScalePaths, ApiError> {
    def.scale.as_ref().ok_or(ApiError::UnknownResource)
}

/// A built-in workload's Scale (1.20's `ValidateScale`): a namespace
/// when the resource is namespaced, replicas not negative.
fn validate(name: &str, without_namespace: bool, replicas: i64) -> Result<(), ApiError> {
    let mut causes = Vec::new();
    if without_namespace {
        causes.push(Cause {
            reason: "FieldValueRequired".into(),
            message: "Required value".into(),
            field: "metadata.namespace".into(),
        });
    }
    if replicas < 0 {
        causes.push(Cause {
            reason: "FieldValueInvalid".into(),
            message: format!("Invalid value: {replicas}: must be greater than or equal to 0"),
            field: "spec.replicas".into(),
        });
    }
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::Invalid(
        Subject::new(SCALE.group, SCALE.kind, name),
        causes,
    ))
}

/// The causes a custom resource of `def` (with a scale) is refused for:
/// its spec and status replicas must be integers from 0 to 2^31-1, its
/// label selector a string (1.20's `ValidateScaleSpec`/`…Status`, on
/// every write of the resource, its status' and its scale's).
#[must_use]
pub(crate) fn custom_scale_causes(def: &ResourceDef, object: &Value) -> Vec<Cause> {
    let Some(paths) = def.scale.as_ref().filter(|_| def.custom) else {
        return Vec::new();
    };
    let mut causes = Vec::new();
    for path in [&paths.spec_replicas, &paths.status_replicas] {
        let invalid = |value: i64, why: String| Cause {
            reason: "FieldValueInvalid".into(),
            message: format!("Invalid value: {value}: {why}"),
            field: path.clone(),
        };
        match replicas_at(object, path) {
            Err(e) => causes.push(invalid(0, e.to_string())),
            Ok(Some(n)) if n < 0 => {
                causes.push(invalid(n, "should be a non-negative integer".into()))
            }
            Ok(Some(n)) if n > i64::from(i32::MAX) => causes.push(invalid(
                n,
                format!("should be less than or equal to {}", i32::MAX),
            )),
            Ok(_) => {}
        }
    }
    if let ScaleSelector::Text(path) = &paths.selector
        && let Some(v) = at(object, path).filter(|v| !v.is_null() && !v.is_string())
    {
        causes.push(Cause {
            reason: "FieldValueInvalid".into(),
            message: format!(
                "Invalid value: \"\": {} accessor error: {v} is of the type {}, expected string",
                path.trim_start_matches('.'),
                json_type(v)
            ),
            field: path.clone(),
        });
    }
    causes
}

impl Cluster {
    /// The Scale of the object `name`.
    ///
    /// # Errors
    /// `NotFound`; for a custom resource without its desired replicas,
    /// `500` (`the spec replicas field … does not exist`).
    pub fn get_scale(&self, def: &ResourceDef, ns: &str, name: &str) -> Result<Value, ApiError> {
        let paths = paths_of(def)?;
        let object = self
            .get(def, ns, name)
            .map_err(|_| scale_not_found(def, name))?;
        let (scale, found) = scale_of(def, paths, &object)?;
        if !found {
            return Err(ApiError::Internal(format!(
                "the spec replicas field {:?} does not exist",
                paths.spec_replicas
            )));
        }
        Ok(scale)
    }

    /// Writes the Scale `body` (a PUT): the object's desired replicas
    /// become its `spec.replicas`. Answers the object's new Scale.
    ///
    /// # Errors
    /// `400` for a body that is not a Scale or names another object,
    /// `422` for negative replicas, `409` for a stale resourceVersion,
    /// and whatever the object's update refuses.
    #[allow(clippy::too_many_arguments)]
    pub fn replace_scale(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        body: &[u8],
        dry_run: bool,
        now: jiff::Timestamp,
        owner: &Ownership<'_>,
    ) -> Result<Value, ApiError> {
        let (scale, _) = reviews::decode::<k8s_openapi::api::autoscaling::v1::Scale>(&SCALE, body)?;
        let current = self.get(def, ns, name)?;
        self.write_scale(def, ns, name, current, &scale, dry_run, now, owner)
    }

    /// Patches the object's Scale (JSON, merge or strategic merge patch)
    /// and writes the result as [`Cluster::replace_scale`] does.
    ///
    /// # Errors
    /// As [`Cluster::replace_scale`], the patch's own errors, `400` when
    /// a custom resource without desired replicas gets none from the patch,
    /// `415` for server-side apply.
    #[allow(clippy::too_many_arguments)]
    pub fn patch_scale(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        kind: PatchType,
        patch_body: &[u8],
        dry_run: bool,
        now: jiff::Timestamp,
        owner: &Ownership<'_>,
    ) -> Result<Value, ApiError> {
        let paths = paths_of(def)?.clone();
        let current = self.get(def, ns, name)?;
        let (mut scale, found) = scale_of(def, &paths, &current)?;
        if !found {
            // The real storage marks the replicas unset with int32's minimum.
            scale["spec"]["replicas"] = json!(i64::from(i32::MIN));
        }
        patch::apply_patch(kind, &mut scale, patch_body, scale_def())?;
        if scale["spec"]["replicas"] == json!(i64::from(i32::MIN)) {
            return Err(ApiError::BadRequest(format!(
                "the spec replicas field {:?} cannot be empty",
                paths.spec_replicas
            )));
        }
        let bytes = serde_json::to_vec(&scale).map_err(|e| ApiError::Internal(e.to_string()))?;
        let (scale, _) =
            reviews::decode::<k8s_openapi::api::autoscaling::v1::Scale>(&SCALE, &bytes)?;
        self.write_scale(def, ns, name, current, &scale, dry_run, now, owner)
    }

    #[allow(clippy::too_many_arguments)]
    fn write_scale(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        mut object: Value,
        scale: &Value,
        dry_run: bool,
        now: jiff::Timestamp,
        owner: &Ownership<'_>,
    ) -> Result<Value, ApiError> {
        let paths = paths_of(def)?.clone();
        let in_body = str_at(scale, "name");
        if !in_body.is_empty() && in_body != name {
            return Err(name_mismatch(in_body, name));
        }
        let body_ns = str_at(scale, "namespace");
        if !body_ns.is_empty() && body_ns != ns {
            return Err(ApiError::BadRequest(format!(
                "the namespace of the object ({body_ns}) does not match the namespace on the request ({ns})"
            )));
        }
        let replicas = scale["spec"]["replicas"].as_i64().unwrap_or(0);
        if !def.custom {
            // The built-in scales validate the Scale itself (1.20's
            // `ValidateScale`: its metadata, then its replicas).
            validate(name, def.namespaced && body_ns.is_empty(), replicas)?;
        }
        set_at(&mut object, &paths.spec_replicas, json!(replicas));
        let precondition = str_at(scale, "resourceVersion");
        if !precondition.is_empty() {
            object["metadata"]["resourceVersion"] = json!(precondition);
        }
        let updated = self.update_as(def, ns, name, object, Part::Main, dry_run, now, owner)?;
        let stored = self
            .store
            .get(&def.group_resource(), ns, name)
            .map(|o| present(def, &o));
        let answered = if dry_run {
            updated
        } else {
            stored.ok_or_else(|| not_found(def, name))?
        };
        scale_of(def, &paths, &answered).map(|(s, _)| s)
    }
}

/// Sets `value` at `path`, making the maps on the way.
fn set_at(object: &mut Value, path: &str, value: Value) {
    let keys: Vec<&str> = keys(path).collect();
    let Some((last, parents)) = keys.split_last() else {
        return;
    };
    let mut cur = object;
    for k in parents {
        if !cur.get(*k).is_some_and(Value::is_object) {
            cur[*k] = json!({});
        }
        cur = &mut cur[*k];
    }
    cur[*last] = value;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_800_000_000).unwrap()
    }

    fn deployment(replicas: i64) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": replicas,
                "selector": {"matchLabels": {"b": "2", "a": "1"},
                    "matchExpressions": [{"key": "tier", "operator": "In", "values": ["y", "x"]}]},
                "template": {"metadata": {"labels": {"a": "1", "b": "2", "tier": "x"}},
                    "spec": {"containers": [{"name": "c", "image": "i"}]}}}})
    }

    #[test]
    fn a_deployment_scales_through_its_scale() {
        let mut c = Cluster::new(100, 16, 7);
        let def = c.registry.get("apps", "v1", "deployments").unwrap();
        c.create(&def, "default", deployment(2), false, now())
            .unwrap();
        let scale = c.get_scale(&def, "default", "web").unwrap();
        assert_eq!(scale["spec"], json!({"replicas": 2}));
        assert_eq!(
            scale["status"],
            json!({"replicas": 0, "selector": "a=1,b=2,tier in (x,y)"})
        );
        let owner = Ownership::Update("kubectl");
        let body = br#"{"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web", "namespace": "default"}, "spec": {"replicas": 5}}"#;
        let scaled = c
            .replace_scale(&def, "default", "web", body, false, now(), &owner)
            .unwrap();
        assert_eq!(scaled["spec"]["replicas"], 5);
        let stored = c.get(&def, "default", "web").unwrap();
        assert_eq!(stored["spec"]["replicas"], 5);
        assert_eq!(stored["metadata"]["generation"], 2);
        let patched = c
            .patch_scale(
                &def,
                "default",
                "web",
                PatchType::Merge,
                br#"{"spec": {"replicas": 0}}"#,
                false,
                now(),
                &owner,
            )
            .unwrap();
        assert_eq!(patched["spec"], json!({}));
        let negative = br#"{"spec": {"replicas": -1}}"#;
        let e = c
            .patch_scale(
                &def,
                "default",
                "web",
                PatchType::Merge,
                negative,
                false,
                now(),
                &owner,
            )
            .unwrap_err();
        assert_eq!(e.code().as_u16(), 422);
        let stale = br#"{"metadata": {"name": "web", "namespace": "default", "resourceVersion": "1"}, "spec": {"replicas": 1}}"#;
        let e = c
            .replace_scale(&def, "default", "web", stale, false, now(), &owner)
            .unwrap_err();
        assert_eq!(e.code().as_u16(), 409);
        let other = br#"{"metadata": {"name": "db"}, "spec": {"replicas": 1}}"#;
        let e = c
            .replace_scale(&def, "default", "web", other, false, now(), &owner)
            .unwrap_err();
        assert_eq!(e.code().as_u16(), 400);
        let no_namespace = br#"{"metadata": {"name": "web"}, "spec": {"replicas": 1}}"#;
        let e = c
            .replace_scale(&def, "default", "web", no_namespace, false, now(), &owner)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "Scale.autoscaling \"web\" is invalid: metadata.namespace: Required value"
        );
    }

    #[test]
    fn custom_paths_and_a_missing_replicas_field() {
        let mut def = ResourceDef::builtin("example.com", "v1", "Widget", "widgets", true);
        def.custom = true;
        def.scale = Some(ScalePaths {
            spec_replicas: ".spec.size".into(),
            status_replicas: ".status.size".into(),
            selector: ScaleSelector::Text(".status.selector".into()),
        });
        let object = json!({"metadata": {"name": "w"}, "spec": {"size": 3},
            "status": {"size": 1, "selector": "app=w"}});
        let (scale, found) = scale_of(&def, def.scale.as_ref().unwrap(), &object).unwrap();
        assert!(found);
        assert_eq!(scale["spec"], json!({"replicas": 3}));
        assert_eq!(scale["status"], json!({"replicas": 1, "selector": "app=w"}));
        let (_, found) =
            scale_of(&def, def.scale.as_ref().unwrap(), &json!({"metadata": {}})).unwrap();
        assert!(!found);
        let wrong = json!({"metadata": {}, "spec": {"size": "3"}});
        assert!(scale_of(&def, def.scale.as_ref().unwrap(), &wrong).is_err());
        let causes = custom_scale_causes(
            &def,
            &json!({"spec": {"size": -1}, "status": {"selector": 1}}),
        );
        let messages: Vec<&str> = causes.iter().map(|c| c.message.as_str()).collect();
        assert_eq!(
            messages[0],
            "Invalid value: -1: should be a non-negative integer"
        );
        assert_eq!(causes[1].field, ".status.selector");
        let mut o = json!({});
        set_at(&mut o, ".spec.size", json!(4));
        assert_eq!(o, json!({"spec": {"size": 4}}));
    }
}
