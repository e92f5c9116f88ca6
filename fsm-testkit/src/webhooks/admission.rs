//! Admission webhooks: the `MutatingWebhookConfiguration`s and
//! `ValidatingWebhookConfiguration`s whose rules match a write, called as
//! kube-apiserver 1.20's dispatchers call them
//! (`admission/plugin/webhook/{mutating,validating}`; mutating ones one
//! after another, their `JSONPatch`es applied, without reinvocation): an
//! `admission.k8s.io/v1` (or `v1beta1`) `AdmissionReview` each, their
//! answers checked (kind, uid), a denial answered as
//! `admission webhook "NAME" denied the request: MESSAGE` with the
//! answer's code (400 below 400), a failed call refused (`500
//! InternalError`, `failed calling webhook "NAME": …`) unless
//! `failurePolicy: Ignore`.
//!
//! Matching follows 1.20's rules: operations, apiGroups, apiVersions,
//! resources (`*`, `*/*`, `plural/*`, `*/status`, `plural/status`), scope,
//! `namespaceSelector` (the namespace's labels; a Namespace's own),
//! `objectSelector` (the object's or the old object's labels).
//! `matchPolicy: Equivalent` (the default) matches a rule naming another
//! served version of the resource; the webhook is then sent the object at
//! that version (`kind`, `resource`) and the version written as
//! `requestKind`, `requestResource`.

use std::time::Duration;

use serde_json::{Value, json};

use super::client::{self, Endpoint};
use crate::resources::{GroupResource, ResourceDef};
use crate::status::ApiError;
use crate::store::Store;
use crate::validation::pod::selector_matches;

/// What a write is, as admission sees it.
#[derive(Debug, Clone)]
pub struct Attributes {
    /// `CREATE`, `UPDATE` or `DELETE`.
    pub operation: &'static str,
    /// The group, version, kind and plural written.
    pub group: String,
    /// The version the webhook is sent (the version written, or the one
    /// an `Equivalent` rule matched).
    pub version: String,
    /// The version written (`requestKind`, `requestResource`).
    pub request_version: String,
    /// The other served versions of the resource, which a rule with
    /// `matchPolicy: Equivalent` matches too (a CRD's).
    pub equivalent_versions: Vec<String>,
    /// The kind written.
    pub kind: String,
    /// The resource (plural) written.
    pub resource: String,
    /// `status` for the status subresource, else "".
    pub subresource: String,
    /// Whether the resource is namespaced.
    pub namespaced: bool,
    /// The object's name (may be empty for a create with `generateName`).
    pub name: String,
    /// The namespace ("" for cluster-scoped objects).
    pub namespace: String,
    /// The object as it would be stored (`None` for a delete).
    pub object: Option<Value>,
    /// The stored object an update or delete replaces.
    pub old_object: Option<Value>,
    /// `dryRun=All`.
    pub dry_run: bool,
    /// The write's options (`CreateOptions`, `UpdateOptions`, `DeleteOptions`).
    pub options: Value,
    /// Who writes: `username`, `uid`, `groups`.
    pub user_info: Value,
}

impl Attributes {
    /// The attributes of a write of `def`.
    #[must_use]
    pub fn of(def: &ResourceDef, operation: &'static str, subresource: &str) -> Self {
        let options = match operation {
            "CREATE" => "CreateOptions",
            "DELETE" => "DeleteOptions",
            _ => "UpdateOptions",
        };
        Self {
            operation,
            group: def.group.clone(),
            version: def.version.clone(),
            request_version: def.version.clone(),
            equivalent_versions: Vec::new(),
            kind: def.kind.clone(),
            resource: def.plural.clone(),
            subresource: subresource.into(),
            namespaced: def.namespaced,
            name: String::new(),
            namespace: String::new(),
            object: None,
            old_object: None,
            dry_run: false,
            options: json!({"kind": options, "apiVersion": "meta.k8s.io/v1"}),
            user_info: json!({}),
        }
    }
}

/// A validating webhook that matches a write, ready to be called.
#[derive(Debug, Clone)]
pub struct Hook {
    /// The version an `Equivalent` rule matched, when not the one written.
    pub version: Option<String>,
    name: String,
    endpoint: Result<Endpoint, String>,
    review_version: Option<&'static str>,
    ignore_failures: bool,
    timeout: Duration,
    side_effects: String,
}

/// Which webhooks: mutating or validating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// `MutatingWebhookConfiguration`s, called one after another, each
    /// patching the object.
    Mutating,
    /// `ValidatingWebhookConfiguration`s, called together.
    Validating,
}

fn configurations(phase: Phase) -> GroupResource {
    GroupResource {
        group: "admissionregistration.k8s.io".into(),
        resource: match phase {
            Phase::Mutating => "mutatingwebhookconfigurations",
            Phase::Validating => "validatingwebhookconfigurations",
        }
        .into(),
    }
}

/// Whether any webhook configuration is stored (a write needs no look at
/// admission otherwise).
#[must_use]
pub fn any_configured(store: &Store) -> bool {
    [Phase::Mutating, Phase::Validating]
        .into_iter()
        .any(|phase| {
            store
                .list(&configurations(phase), None)
                .iter()
                .any(|c| c["webhooks"].as_array().is_some_and(|w| !w.is_empty()))
        })
}

/// The webhooks of `phase` in `store`'s configurations matching `attrs`,
/// in the order of the configurations' names and their entries.
#[must_use]
pub fn matching(store: &Store, attrs: &Attributes, phase: Phase) -> Vec<Hook> {
    let mut configurations = store.list(&configurations(phase), None);
    configurations.sort_by(|a, b| {
        a["metadata"]["name"]
            .as_str()
            .cmp(&b["metadata"]["name"].as_str())
    });
    let namespace_labels = namespace_labels(store, attrs);
    let mut hooks = Vec::new();
    for configuration in configurations {
        for webhook in configuration["webhooks"].as_array().into_iter().flatten() {
            if !namespace_matches(&webhook["namespaceSelector"], namespace_labels.as_ref())
                || !object_matches(&webhook["objectSelector"], attrs)
            {
                continue;
            }
            // The version written, else (`Equivalent`, the default) the
            // first other version of the resource a rule names.
            let version = if rules_match(&webhook["rules"], attrs) {
                None
            } else if webhook["matchPolicy"] == "Exact" {
                continue;
            } else {
                let found = attrs.equivalent_versions.iter().find(|v| {
                    let mut other = attrs.clone();
                    other.version = (*v).clone();
                    rules_match(&webhook["rules"], &other)
                });
                match found {
                    Some(v) => Some(v.clone()),
                    None => continue,
                }
            };
            hooks.push(Hook {
                version,
                name: webhook["name"].as_str().unwrap_or_default().into(),
                endpoint: client::resolve(&webhook["clientConfig"], store)
                    .map_err(|e| e.to_string()),
                review_version: webhook["admissionReviewVersions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find_map(|v| match v.as_str() {
                        Some("v1") => Some("v1"),
                        Some("v1beta1") => Some("v1beta1"),
                        _ => None,
                    }),
                ignore_failures: webhook["failurePolicy"] == "Ignore",
                timeout: Duration::from_secs(webhook["timeoutSeconds"].as_u64().unwrap_or(10)),
                side_effects: webhook["sideEffects"].as_str().unwrap_or_default().into(),
            });
        }
    }
    hooks
}

/// The labels the `namespaceSelector` is matched against: the object's
/// namespace's, a Namespace's own; `None` for other cluster-scoped
/// objects (every selector matches them).
fn namespace_labels(store: &Store, attrs: &Attributes) -> Option<Value> {
    if attrs.group.is_empty() && attrs.resource == "namespaces" {
        let o = attrs.object.as_ref().or(attrs.old_object.as_ref())?;
        return Some(o["metadata"]["labels"].clone());
    }
    if !attrs.namespaced {
        return None;
    }
    let namespaces = GroupResource {
        group: String::new(),
        resource: "namespaces".into(),
    };
    Some(
        store
            .get(&namespaces, "", &attrs.namespace)
            .map(|n| n["metadata"]["labels"].clone())
            .unwrap_or(Value::Null),
    )
}

fn namespace_matches(selector: &Value, labels: Option<&Value>) -> bool {
    match labels {
        None => true,
        Some(labels) => selector.is_null() || selector_matches(selector, labels),
    }
}

/// The `objectSelector` matches the object's or the old object's labels.
fn object_matches(selector: &Value, attrs: &Attributes) -> bool {
    if selector.is_null() || selector.as_object().is_some_and(serde_json::Map::is_empty) {
        return true;
    }
    [attrs.object.as_ref(), attrs.old_object.as_ref()]
        .into_iter()
        .flatten()
        .any(|o| selector_matches(selector, &o["metadata"]["labels"]))
}

fn listed(list: &Value, wanted: &str) -> bool {
    list.as_array()
        .into_iter()
        .flatten()
        .any(|v| v == "*" || v == wanted)
}

/// Whether one of `rules` matches the write (1.20's `rules.Matcher`).
fn rules_match(rules: &Value, attrs: &Attributes) -> bool {
    rules.as_array().into_iter().flatten().any(|rule| {
        let scope = rule["scope"].as_str().unwrap_or("*");
        let scope_ok = match scope {
            "Cluster" => !attrs.namespaced,
            "Namespaced" => attrs.namespaced,
            _ => true,
        };
        scope_ok
            && listed(&rule["operations"], attrs.operation)
            && listed(&rule["apiGroups"], &attrs.group)
            && listed(&rule["apiVersions"], &attrs.version)
            && rule["resources"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .any(|r| resource_matches(r, &attrs.resource, &attrs.subresource))
    })
}

/// A rule's resource against `resource` and `subresource` ("" for none).
fn resource_matches(rule: &str, resource: &str, subresource: &str) -> bool {
    let (res, sub) = rule.split_once('/').unwrap_or((rule, ""));
    let res_ok = res == "*" || res == resource;
    let sub_ok = match sub {
        "*" => true,
        s => s == subresource,
    };
    res_ok && sub_ok
}

/// Calls every hook of `hooks` with `attrs` (all of them, as 1.20 calls
/// them in parallel) and answers the first refusal.
///
/// # Errors
/// The denial or the failed call, worded as 1.20 words them.
pub async fn validate(hooks: &[Hook], attrs: &Attributes) -> Result<(), ApiError> {
    let calls = hooks.iter().map(|h| ask(h, attrs, Phase::Validating));
    let results = futures::future::join_all(calls).await;
    results
        .into_iter()
        .find_map(Result::err)
        .map_or(Ok(()), Err)
}

/// Calls the mutating `hooks` one after another, each with the object as
/// the ones before patched it (1.20's mutating dispatcher, without
/// reinvocation); answers whether the object changed.
///
/// # Errors
/// A denial or a failed call (as [`validate`]), a patch that does not
/// apply or an object a DELETE cannot have patched (`500 InternalError`).
pub async fn mutate(hooks: &[Hook], attrs: &mut Attributes) -> Result<bool, ApiError> {
    let mut changed = false;
    for hook in hooks {
        let response = ask(hook, attrs, Phase::Mutating).await?;
        let Some(patch) = response["patch"].as_str() else {
            continue;
        };
        let bytes = crate::base64::decode(patch).ok_or_else(|| {
            ApiError::Internal("illegal base64 data in the webhook's patch".into())
        })?;
        let operations: Value =
            serde_json::from_slice(&bytes).map_err(|e| ApiError::Internal(e.to_string()))?;
        if operations.as_array().is_none_or(Vec::is_empty) {
            continue;
        }
        let Some(object) = attrs.object.as_mut() else {
            return Err(ApiError::Internal(format!(
                "admission webhook {:?} attempted to modify the object, which is not supported for this operation",
                hook.name
            )));
        };
        let before = object.clone();
        crate::patch::json::apply(object, &bytes).map_err(|e| ApiError::Internal(e.to_string()))?;
        changed |= *object != before;
    }
    Ok(changed)
}

/// One hook's call: its answer's `response` when it allows (an empty
/// one when the call failed and failures are ignored).
async fn ask(hook: &Hook, attrs: &Attributes, phase: Phase) -> Result<Value, ApiError> {
    let calling_failed = |why: String| {
        let message = format!("failed calling webhook {:?}: {why}", hook.name);
        if hook.ignore_failures {
            tracing::warn!(webhook = %hook.name, %message, "failing open");
            Ok(json!({}))
        } else {
            Err(ApiError::Internal(message))
        }
    };
    if attrs.dry_run {
        match hook.side_effects.as_str() {
            "None" | "NoneOnDryRun" => {}
            "" => return calling_failed("Webhook SideEffects is nil".into()),
            _ => {
                return Err(ApiError::BadRequest(format!(
                    "admission webhook {:?} does not support dry run",
                    hook.name
                )));
            }
        }
    }
    let Some(version) = hook.review_version else {
        return calling_failed(
            "webhook does not accept known AdmissionReview versions (v1, v1beta1)".into(),
        );
    };
    let endpoint = match &hook.endpoint {
        Ok(e) => e,
        Err(e) => return calling_failed(e.clone()),
    };
    let uid = client::new_uid();
    let review = review(attrs, version, &uid);
    tracing::debug!(webhook = %hook.name, %uid, operation = attrs.operation, ?phase, "calling an admission webhook");
    let answer = match client::post(endpoint, &review, hook.timeout).await {
        Ok(a) => a,
        Err(e) => return calling_failed(e.to_string()),
    };
    let response = &answer["response"];
    let checked = if response.is_object() {
        check_answer(&answer, version, &uid, phase)
    } else {
        Err("webhook response was absent".into())
    };
    if let Err(why) = checked {
        return calling_failed(why);
    }
    if response["allowed"] == true {
        return Ok(response.clone());
    }
    Err(denial(&hook.name, &response["status"]))
}

/// 1.20's checks of an answer (`VerifyAdmissionResponse`) beyond its presence.
fn check_answer(answer: &Value, version: &str, uid: &str, phase: Phase) -> Result<(), String> {
    let response = &answer["response"];
    if version == "v1" {
        let got = response["uid"].as_str().unwrap_or_default();
        if got != uid {
            return Err(format!("expected response.uid={uid:?}, got {got:?}"));
        }
        let (gv, kind) = (
            answer["apiVersion"].as_str().unwrap_or_default(),
            answer["kind"].as_str().unwrap_or_default(),
        );
        if gv != "admission.k8s.io/v1" || kind != "AdmissionReview" {
            return Err(format!(
                "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {gv}, Kind={kind}"
            ));
        }
    }
    let patch = response.get("patch").is_some_and(|p| !p.is_null());
    let patch_type = response["patchType"].as_str();
    match phase {
        Phase::Validating if patch => {
            Err("validating webhook may not return response.patch".into())
        }
        Phase::Validating if patch_type.is_some() => {
            Err("validating webhook may not return response.patchType".into())
        }
        Phase::Mutating if patch && patch_type.is_none() => {
            Err("webhook returned response.patch but not response.patchType".into())
        }
        Phase::Mutating if !patch && patch_type.is_some() => {
            Err("webhook returned response.patchType but not response.patch".into())
        }
        Phase::Mutating if patch_type.is_some_and(|t| t != "JSONPatch") => Err(format!(
            "webhook returned invalid response.patchType of {:?}",
            patch_type.unwrap_or_default()
        )),
        _ => Ok(()),
    }
}

/// The `AdmissionReview` 1.20 sends for `attrs`.
fn review(attrs: &Attributes, version: &str, uid: &str) -> Value {
    let kind = json!({"group": attrs.group, "version": attrs.version, "kind": attrs.kind});
    let request_kind =
        json!({"group": attrs.group, "version": attrs.request_version, "kind": attrs.kind});
    let request_resource = json!({"group": attrs.group, "version": attrs.request_version,
        "resource": attrs.resource});
    let resource =
        json!({"group": attrs.group, "version": attrs.version, "resource": attrs.resource});
    let mut request = json!({
        "uid": uid,
        "kind": kind,
        "resource": resource,
        "requestKind": request_kind,
        "requestResource": request_resource,
        "operation": attrs.operation,
        "userInfo": attrs.user_info,
        "object": attrs.object,
        "oldObject": attrs.old_object,
        "dryRun": attrs.dry_run,
        "options": attrs.options,
    });
    if !attrs.subresource.is_empty() {
        request["subResource"] = json!(attrs.subresource);
        request["requestSubResource"] = json!(attrs.subresource);
    }
    if !attrs.name.is_empty() {
        request["name"] = json!(attrs.name);
    }
    if !attrs.namespace.is_empty() {
        request["namespace"] = json!(attrs.namespace);
    }
    json!({
        "kind": "AdmissionReview",
        "apiVersion": format!("admission.k8s.io/{version}"),
        "request": request,
    })
}

/// A webhook's refusal as 1.20 answers it (`ToStatusErr`): the answer's
/// status with its message prefixed, code at least 400, status `Failure`.
fn denial(name: &str, status: &Value) -> ApiError {
    let denied = format!("admission webhook {name:?} denied the request");
    let mut out = status.as_object().cloned().unwrap_or_default();
    let code = out
        .get("code")
        .and_then(Value::as_u64)
        .filter(|c| *c >= 400)
        .unwrap_or(400);
    let message = match (
        out.get("message")
            .and_then(Value::as_str)
            .filter(|m| !m.is_empty()),
        out.get("reason")
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty()),
    ) {
        (Some(m), _) => format!("{denied}: {m}"),
        (None, Some(r)) => format!("{denied}: {r}"),
        (None, None) => format!("{denied} without explanation"),
    };
    out.insert("kind".into(), json!("Status"));
    out.insert("apiVersion".into(), json!("v1"));
    out.insert("metadata".into(), json!({}));
    out.insert("status".into(), json!("Failure"));
    out.insert("message".into(), json!(message));
    out.insert("code".into(), json!(code));
    ApiError::Verbatim(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(resource: &str, sub: &str) -> Attributes {
        Attributes {
            resource: resource.into(),
            subresource: sub.into(),
            group: "g.example.com".into(),
            version: "v1".into(),
            namespaced: true,
            ..Attributes::of(
                &crate::builtins::registry()
                    .get("", "v1", "configmaps")
                    .map(|d| (*d).clone())
                    .unwrap_or_else(|| unreachable!()),
                "CREATE",
                sub,
            )
        }
    }

    #[test]
    fn resources_and_subresources_match_as_in_1_20() {
        assert!(resource_matches("*", "disks", ""));
        assert!(!resource_matches("*", "disks", "status"));
        assert!(resource_matches("*/*", "disks", "status"));
        assert!(resource_matches("*/status", "disks", "status"));
        assert!(resource_matches("disks/*", "disks", ""));
        assert!(!resource_matches("disks", "disks", "status"));
        let rules = json!([{"apiGroups": ["g.example.com"], "apiVersions": ["*"],
            "operations": ["CREATE"], "resources": ["disks"], "scope": "Cluster"}]);
        assert!(!rules_match(&rules, &attrs("disks", "")), "scope");
        let rules = json!([{"apiGroups": ["*"], "apiVersions": ["v1"],
            "operations": ["UPDATE", "CREATE"], "resources": ["disks"]}]);
        assert!(rules_match(&rules, &attrs("disks", "")));
        assert!(!rules_match(&rules, &attrs("tapes", "")));
    }

    #[test]
    fn denials_are_worded_as_1_20_words_them() {
        let e = denial("d.example.com", &json!({"message": "no", "code": 403}));
        let ApiError::Verbatim(s) = e else {
            unreachable!("a denial is a verbatim status")
        };
        assert_eq!(
            s["message"],
            "admission webhook \"d.example.com\" denied the request: no"
        );
        assert_eq!(s["code"], 403);
        let ApiError::Verbatim(s) = denial("d", &json!({"code": 200})) else {
            unreachable!("a denial is a verbatim status")
        };
        assert_eq!(
            s["message"],
            "admission webhook \"d\" denied the request without explanation"
        );
        assert_eq!(s["code"], 400);
    }
}
