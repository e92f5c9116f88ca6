//! A PodDisruptionBudget's spec, as `ValidatePodDisruptionBudgetSpec`
//! checks it: not both `minAvailable` and `maxUnavailable`, each a count
//! or a percentage of at most 100, and its selector's labels.

use serde_json::Value;

use super::field::FieldErrors;
use super::pod;
use crate::resources::ResourceDef;
use crate::status::Cause;

/// The causes of a PodDisruptionBudget's spec. Both bounds set is
/// reported on `spec` with the spec as JSON: the real server prints the
/// Go struct, with the addresses of its pointers.
#[must_use]
pub fn pdb_causes(_def: &ResourceDef, object: &Value) -> Vec<Cause> {
    let mut e = FieldErrors::new();
    let spec = &object["spec"];
    let min = &spec["minAvailable"];
    let max = &spec["maxUnavailable"];
    if !min.is_null() && !max.is_null() {
        e.invalid(
            "spec",
            &spec.to_string(),
            "minAvailable and maxUnavailable cannot be both set",
        );
    }
    if !min.is_null() {
        e.int_or_percent("spec.minAvailable", min);
        e.not_over_100_percent("spec.minAvailable", min);
    }
    if !max.is_null() {
        e.int_or_percent("spec.maxUnavailable", max);
        e.not_over_100_percent("spec.maxUnavailable", max);
    }
    pod::selector(&spec["selector"], "spec.selector", &mut e);
    e.into_causes()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn both_bounds_are_refused() {
        let def = ResourceDef::builtin(
            "policy",
            "v1",
            "PodDisruptionBudget",
            "poddisruptionbudgets",
            true,
        );
        let causes = pdb_causes(
            &def,
            &json!({"spec": {"minAvailable": 1, "maxUnavailable": "150%"}}),
        );
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["spec", "spec.maxUnavailable"]);
        assert!(pdb_causes(&def, &json!({"spec": {"minAvailable": "50%"}})).is_empty());
    }
}
