//! A HorizontalPodAutoscaler of `autoscaling/v1`, as 1.20 defaults and
//! validates it (`SetDefaults_HorizontalPodAutoscaler`,
//! `validateHorizontalPodAutoscalerSpec` on its internal form: the CPU
//! target is checked as `spec.metrics[0].resource.target.averageUtilization`,
//! the path 1.20 reports).

use serde_json::{Value, json};

use super::field::FieldErrors;
use super::name_problems;
use crate::resources::{NameRule, ResourceDef};
use crate::status::Cause;

/// Every write: one replica at least, 80% CPU, and the status counts Go
/// always encodes.
pub fn defaults(_def: &ResourceDef, object: &mut Value) {
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
        spec.entry("minReplicas").or_insert_with(|| json!(1));
        spec.entry("targetCPUUtilizationPercentage")
            .or_insert_with(|| json!(80));
    }
    if let Some(o) = object.as_object_mut() {
        let status = o.entry("status").or_insert_with(|| json!({}));
        if let Some(status) = status.as_object_mut() {
            status.entry("currentReplicas").or_insert_with(|| json!(0));
            status.entry("desiredReplicas").or_insert_with(|| json!(0));
        }
    }
}

/// The causes of an autoscaler's spec.
#[must_use]
pub fn causes(_def: &ResourceDef, object: &Value) -> Vec<Cause> {
    let mut e = FieldErrors::new();
    let spec = &object["spec"];
    let min = spec["minReplicas"].as_i64();
    let max = spec["maxReplicas"].as_i64().unwrap_or(0);
    if let Some(min) = min.filter(|m| *m < 1) {
        e.invalid(
            "spec.minReplicas",
            &min.to_string(),
            "must be greater than or equal to 1",
        );
    }
    if max < 1 {
        e.invalid(
            "spec.maxReplicas",
            &max.to_string(),
            "must be greater than 0",
        );
    }
    if min.is_some_and(|m| max < m) {
        e.invalid(
            "spec.maxReplicas",
            &max.to_string(),
            "must be greater than or equal to `minReplicas`",
        );
    }
    for key in ["kind", "name"] {
        let path = format!("spec.scaleTargetRef.{key}");
        match spec["scaleTargetRef"][key].as_str().unwrap_or_default() {
            "" => e.required(&path, ""),
            text => {
                for problem in name_problems(NameRule::PathSegment, text) {
                    e.invalid(&path, &format!("{text:?}"), &problem);
                }
            }
        }
    }
    if let Some(cpu) = spec["targetCPUUtilizationPercentage"]
        .as_i64()
        .filter(|c| *c < 1)
    {
        e.invalid(
            "spec.metrics[0].resource.target.averageUtilization",
            &cpu.to_string(),
            "must be greater than 0",
        );
    }
    e.into_causes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def() -> ResourceDef {
        ResourceDef::builtin(
            "autoscaling",
            "v1",
            "HorizontalPodAutoscaler",
            "horizontalpodautoscalers",
            true,
        )
    }

    #[test]
    fn defaults_and_causes_as_1_20() {
        let mut h = json!({"spec": {"maxReplicas": 5,
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}}});
        defaults(&def(), &mut h);
        assert_eq!(h["spec"]["minReplicas"], 1);
        assert_eq!(h["spec"]["targetCPUUtilizationPercentage"], 80);
        assert!(causes(&def(), &h).is_empty());
        let bad = json!({"spec": {"maxReplicas": 0, "minReplicas": 3,
            "scaleTargetRef": {}, "targetCPUUtilizationPercentage": -1}});
        let fields: Vec<String> = causes(&def(), &bad).into_iter().map(|c| c.field).collect();
        assert_eq!(
            fields,
            [
                "spec.maxReplicas",
                "spec.maxReplicas",
                "spec.scaleTargetRef.kind",
                "spec.scaleTargetRef.name",
                "spec.metrics[0].resource.target.averageUtilization"
            ]
        );
    }
}
