//! `ValidatingWebhookConfiguration` and `MutatingWebhookConfiguration`
//! (`admissionregistration.k8s.io/v1`, cluster-scoped): the defaults the
//! real server fills into each webhook, and the cheap part of its
//! validation (`sideEffects`, `admissionReviewVersions`, `clientConfig`).
//! Their webhooks are called ([`crate::webhooks::admission`]).

use serde_json::{Value, json};

use crate::resources::ResourceDef;
use crate::status::{ApiError, Cause, Subject};

/// Every write: each webhook's `failurePolicy: Fail`, `matchPolicy:
/// Equivalent`, empty selectors, `timeoutSeconds: 10`, each rule's
/// `scope: "*"`, and a mutating webhook's `reinvocationPolicy: Never`.
pub fn defaults(def: &ResourceDef, object: &mut Value) {
    let mutating = def.kind == "MutatingWebhookConfiguration";
    let Some(webhooks) = object.get_mut("webhooks").and_then(Value::as_array_mut) else {
        return;
    };
    for hook in webhooks.iter_mut().filter_map(Value::as_object_mut) {
        hook.entry("failurePolicy").or_insert_with(|| json!("Fail"));
        hook.entry("matchPolicy")
            .or_insert_with(|| json!("Equivalent"));
        hook.entry("namespaceSelector").or_insert_with(|| json!({}));
        hook.entry("objectSelector").or_insert_with(|| json!({}));
        hook.entry("timeoutSeconds").or_insert_with(|| json!(10));
        if mutating {
            hook.entry("reinvocationPolicy")
                .or_insert_with(|| json!("Never"));
        }
        if let Some(rules) = hook.get_mut("rules").and_then(Value::as_array_mut) {
            for rule in rules.iter_mut().filter_map(Value::as_object_mut) {
                rule.entry("scope").or_insert_with(|| json!("*"));
            }
        }
    }
}

/// The real server's validation of what a webhook must say.
///
/// # Errors
/// `422 Invalid` with a cause per missing or unsupported field.
pub fn validate(def: &ResourceDef, name: &str, object: &Value) -> Result<(), ApiError> {
    let mut causes = Vec::new();
    for (i, hook) in object["webhooks"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = |f: &str| format!("webhooks[{i}].{f}");
        if hook["name"].as_str().is_none_or(str::is_empty) {
            causes.push(Cause::required(&at("name"), ""));
        }
        match hook["sideEffects"].as_str() {
            None => causes.push(Cause::required(
                &at("sideEffects"),
                "must specify one of None, NoneOnDryRun",
            )),
            Some("None" | "NoneOnDryRun") => {}
            Some(other) => causes.push(Cause {
                reason: "FieldValueNotSupported".into(),
                message: format!(
                    "Unsupported value: {other:?}: supported values: \"None\", \"NoneOnDryRun\""
                ),
                field: at("sideEffects"),
            }),
        }
        let config = &hook["clientConfig"];
        if config.get("url").is_some() == config.get("service").is_some() {
            causes.push(Cause::required(
                &at("clientConfig"),
                "exactly one of url or service is required",
            ));
        }
        // 1.20 checks the review versions after the rest of the webhook.
        match &hook["admissionReviewVersions"] {
            Value::Array(v) if !v.is_empty() => {}
            _ => causes.push(Cause::required(
                &at("admissionReviewVersions"),
                "must specify one of v1, v1beta1",
            )),
        }
    }
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::Invalid(
        Subject::new(&def.group, &def.kind, name),
        causes,
    ))
}
