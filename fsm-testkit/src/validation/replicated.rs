//! The specs of the kinds that keep pods running without a rollout of
//! their own, as 1.20 validates them: a ReplicaSet's
//! (`ValidateReplicaSetSpec`) and a DaemonSet's (`ValidateDaemonSetSpec`,
//! whose selector may be absent: it then matches no labels). Fields the
//! real server defaults first are taken at their defaults when absent.

use serde_json::Value;

use super::field::{
    FieldErrors, child, go_int_or_string, go_label_selector, go_string, go_string_map, percent,
};
use super::pod;
use super::workloads::{always_restarts, selector_matches_template, selector_required};
use crate::resources::ResourceDef;
use crate::status::Cause;

/// The causes of a ReplicaSet's spec.
#[must_use]
pub fn replica_set_causes(_def: &ResourceDef, object: &Value) -> Vec<Cause> {
    let mut e = FieldErrors::new();
    let spec = &object["spec"];
    e.nonnegative("spec.replicas", &spec["replicas"]);
    e.nonnegative("spec.minReadySeconds", &spec["minReadySeconds"]);
    // 1.20 words an empty ReplicaSet selector as a Deployment's.
    selector_required(spec, "deployment", &mut e);
    let template = &spec["template"];
    selector_matches_template(spec, &mut e);
    pod::template(template, "spec.template", &mut e);
    always_restarts(template, &mut e);
    if !template["spec"]["activeDeadlineSeconds"].is_null() {
        e.forbidden(
            "spec.template.spec.activeDeadlineSeconds",
            "activeDeadlineSeconds in ReplicaSet is not Supported",
        );
    }
    e.into_causes()
}

/// The causes of a DaemonSet's spec.
#[must_use]
pub fn daemon_set_causes(_def: &ResourceDef, object: &Value) -> Vec<Cause> {
    let mut e = FieldErrors::new();
    let spec = &object["spec"];
    let selector = &spec["selector"];
    if !selector.is_null() {
        pod::selector(selector, "spec.selector", &mut e);
    }
    let labels = &spec["template"]["metadata"]["labels"];
    if selector.is_null() || !pod::selector_matches(selector, labels) {
        e.invalid(
            "spec.template.metadata.labels",
            &go_string_map(labels),
            "`selector` does not match template `labels`",
        );
    }
    if !selector.is_null() && pod::selector_is_empty(selector) {
        e.invalid(
            "spec.selector",
            &go_label_selector(selector),
            "empty selector is invalid for daemonset",
        );
    }
    let template = &spec["template"];
    pod::template(template, "spec.template", &mut e);
    always_restarts(template, &mut e);
    if !template["spec"]["activeDeadlineSeconds"].is_null() {
        e.forbidden(
            "spec.template.spec.activeDeadlineSeconds",
            "activeDeadlineSeconds in DaemonSet is not Supported",
        );
    }
    e.nonnegative("spec.minReadySeconds", &spec["minReadySeconds"]);
    update_strategy(&spec["updateStrategy"], &mut e);
    e.nonnegative("spec.revisionHistoryLimit", &spec["revisionHistoryLimit"]);
    e.into_causes()
}

/// A DaemonSet's update strategy: `OnDelete`, or `RollingUpdate` (the
/// default) with at least one pod, at most 100%, unavailable at a time.
fn update_strategy(strategy: &Value, e: &mut FieldErrors) {
    let path = "spec.updateStrategy";
    match strategy["type"].as_str() {
        Some("OnDelete") => {}
        None | Some("RollingUpdate") => {
            let rolling = &strategy["rollingUpdate"];
            // Defaulted to 1 when absent.
            let Some(unavailable) = rolling.get("maxUnavailable").filter(|v| !v.is_null()) else {
                return;
            };
            let field = child(&child(path, "rollingUpdate"), "maxUnavailable");
            e.int_or_percent(&field, unavailable);
            let zero = match unavailable {
                Value::String(s) => percent(s) == Some(0),
                other => other.as_i64() == Some(0),
            };
            if zero {
                e.invalid(&field, &go_int_or_string(unavailable), "cannot be 0");
            }
            e.not_over_100_percent(&field, unavailable);
        }
        Some(other) => {
            // Go prints the struct, the rolling update as an address; here
            // as JSON.
            let rolling = if strategy["rollingUpdate"].is_null() {
                "(*apps.RollingUpdateDaemonSet)(nil)".to_string()
            } else {
                strategy["rollingUpdate"].to_string()
            };
            let shown = format!(
                "apps.DaemonSetUpdateStrategy{{Type:{}, RollingUpdate:{rolling}}}",
                go_string(other)
            );
            e.not_supported_shown(path, &shown, &["RollingUpdate", "OnDelete"]);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn def() -> ResourceDef {
        ResourceDef::builtin("apps", "v1", "DaemonSet", "daemonsets", true)
    }

    fn fields(causes: Vec<Cause>) -> Vec<String> {
        causes.into_iter().map(|c| c.field).collect()
    }

    fn set(selector: Value, labels: Value, extra: Value) -> Value {
        let mut spec = json!({"selector": selector,
            "template": {"metadata": {"labels": labels},
                         "spec": {"containers": [{"name": "c", "image": "x"}]}}});
        if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
            spec.extend(extra.clone());
        }
        json!({"spec": spec})
    }

    #[test]
    fn a_replica_set_selector_must_match_and_replicas_be_positive() {
        let ok = set(
            json!({"matchLabels": {"a": "b"}}),
            json!({"a": "b"}),
            json!({}),
        );
        assert!(replica_set_causes(&def(), &ok).is_empty());
        let bad = set(
            json!({"matchLabels": {"a": "b"}}),
            json!({"a": "c"}),
            json!({"replicas": -1}),
        );
        assert_eq!(
            fields(replica_set_causes(&def(), &bad)),
            ["spec.replicas", "spec.template.metadata.labels"]
        );
    }

    #[test]
    fn a_daemon_set_strategy_is_checked() {
        let zero = set(
            json!({"matchLabels": {"a": "b"}}),
            json!({"a": "b"}),
            json!({"updateStrategy": {"type": "RollingUpdate",
                                      "rollingUpdate": {"maxUnavailable": 0}}}),
        );
        let causes = daemon_set_causes(&def(), &zero);
        assert_eq!(
            causes[0].message,
            "Invalid value: intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}: cannot be 0"
        );
        let unknown = set(
            json!({"matchLabels": {"a": "b"}}),
            json!({"a": "b"}),
            json!({"updateStrategy": {"type": "Foo"}}),
        );
        assert_eq!(
            fields(daemon_set_causes(&def(), &unknown)),
            ["spec.updateStrategy"]
        );
        let no_selector = set(Value::Null, json!({"a": "b"}), json!({}));
        assert_eq!(
            fields(daemon_set_causes(&def(), &no_selector)),
            ["spec.template.metadata.labels"]
        );
    }
}
