//! Field errors as the real server words them (apimachinery's
//! `field.Error`): a path, a reason and a message, collected in the order
//! the real validation finds them, and Go's way of printing the values
//! they name.

use serde_json::Value;

use crate::status::Cause;

/// The causes found so far, in the real server's order.
#[derive(Debug, Default)]
pub struct FieldErrors(Vec<Cause>);

impl FieldErrors {
    /// No causes yet.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    fn push(&mut self, reason: &str, field: &str, message: String) {
        self.0.push(Cause {
            reason: reason.into(),
            message,
            field: field.into(),
        });
    }

    /// A cause found by another checker.
    pub fn push_cause(&mut self, cause: Cause) {
        self.0.push(cause);
    }

    /// `FieldValueRequired` (`Required value[: detail]`).
    pub fn required(&mut self, field: &str, detail: &str) {
        let message = if detail.is_empty() {
            "Required value".to_string()
        } else {
            format!("Required value: {detail}")
        };
        self.push("FieldValueRequired", field, message);
    }

    /// `FieldValueInvalid` with `shown`, the value as Go prints it (see
    /// [`go_value`]).
    pub fn invalid(&mut self, field: &str, shown: &str, detail: &str) {
        self.push(
            "FieldValueInvalid",
            field,
            format!("Invalid value: {shown}: {detail}"),
        );
    }

    /// `FieldValueNotSupported`: `value` is none of `supported`.
    pub fn not_supported(&mut self, field: &str, value: &str, supported: &[&str]) {
        self.not_supported_shown(field, &go_string(value), supported);
    }

    /// `FieldValueNotSupported` of a value that is no string, `shown` as
    /// Go prints it.
    pub fn not_supported_shown(&mut self, field: &str, shown: &str, supported: &[&str]) {
        let listed: Vec<String> = supported.iter().map(|s| go_string(s)).collect();
        self.push(
            "FieldValueNotSupported",
            field,
            format!(
                "Unsupported value: {shown}: supported values: {}",
                listed.join(", ")
            ),
        );
    }

    /// `FieldValueDuplicate` of `shown`.
    pub fn duplicate(&mut self, field: &str, shown: &str) {
        self.push(
            "FieldValueDuplicate",
            field,
            format!("Duplicate value: {shown}"),
        );
    }

    /// `FieldValueForbidden`.
    pub fn forbidden(&mut self, field: &str, detail: &str) {
        self.push("FieldValueForbidden", field, format!("Forbidden: {detail}"));
    }

    /// `ValidateNonnegativeField`: `value` at `field`, when present, is not
    /// below 0.
    pub fn nonnegative(&mut self, field: &str, value: &Value) {
        if let Some(n) = value.as_i64().filter(|n| *n < 0) {
            self.invalid(field, &n.to_string(), "must be greater than or equal to 0");
        }
    }

    /// `ValidatePositiveIntOrPercent`: a count not below 0, or a
    /// percentage.
    pub fn int_or_percent(&mut self, field: &str, value: &Value) {
        match value {
            Value::String(s) if percent(s).is_none() => self.invalid(
                field,
                &go_int_or_string(value),
                "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
            ),
            Value::String(_) => {}
            other => self.nonnegative(field, other),
        }
    }

    /// `IsNotMoreThan100Percent`: a percentage is at most 100.
    pub fn not_over_100_percent(&mut self, field: &str, value: &Value) {
        if value.as_str().and_then(percent).is_some_and(|p| p > 100) {
            self.invalid(
                field,
                &go_int_or_string(value),
                "must not be greater than 100%",
            );
        }
    }

    /// The causes, in order.
    #[must_use]
    pub fn into_causes(self) -> Vec<Cause> {
        self.0
    }
}

/// A string as Go's `%q` prints it.
#[must_use]
pub fn go_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
}

/// A JSON value as Go prints the field it decodes to in an `Invalid
/// value` (`%q` for a string, `%d` for a number, `%#v` else, which for a
/// JSON value is its JSON).
#[must_use]
pub fn go_value(v: &Value) -> String {
    match v {
        Value::String(s) => go_string(s),
        other => other.to_string(),
    }
}

/// The value of a percentage (`[0-9]+%`).
#[must_use]
pub fn percent(s: &str) -> Option<u64> {
    let digits = s.strip_suffix('%')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(digits.parse().unwrap_or(u64::MAX))
}

/// An `intstr.IntOrString` as Go's `%#v` prints it.
#[must_use]
pub fn go_int_or_string(v: &Value) -> String {
    match v {
        Value::String(s) => format!(
            "intstr.IntOrString{{Type:1, IntVal:0, StrVal:{}}}",
            go_string(s)
        ),
        other => format!(
            "intstr.IntOrString{{Type:0, IntVal:{}, StrVal:\"\"}}",
            other.as_i64().unwrap_or(0)
        ),
    }
}

/// A label selector as Go's `%#v` prints it (as 1.20 shows an empty one
/// in its causes).
pub fn go_label_selector(selector: &Value) -> String {
    let labels = if selector["matchLabels"].is_null() {
        "map[string]string(nil)".to_string()
    } else {
        go_string_map(&selector["matchLabels"])
    };
    let expressions = if selector["matchExpressions"].is_null() {
        "[]v1.LabelSelectorRequirement(nil)"
    } else {
        "[]v1.LabelSelectorRequirement{}"
    };
    format!("v1.LabelSelector{{MatchLabels:{labels}, MatchExpressions:{expressions}}}")
}

/// A label map as Go's `%#v` prints a `map[string]string`: keys sorted,
/// `(nil)` when absent.
#[must_use]
pub fn go_string_map(v: &Value) -> String {
    match v.as_object() {
        None => "map[string]string(nil)".into(),
        Some(m) => {
            let mut pairs: Vec<(&String, &Value)> = m.iter().collect();
            pairs.sort_by(|a, b| a.0.cmp(b.0));
            let inner: Vec<String> = pairs
                .into_iter()
                .map(|(k, v)| format!("{}:{}", go_string(k), go_string(v.as_str().unwrap_or(""))))
                .collect();
            format!("map[string]string{{{}}}", inner.join(", "))
        }
    }
}

/// `path` with `key` appended as a child (`spec.ports`).
#[must_use]
pub fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// `path` with index `i` appended (`spec.ports[0]`).
#[must_use]
pub fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

/// `path` with map key `key` appended (`data[key]`).
#[must_use]
pub fn key(path: &str, key: &str) -> String {
    format!("{path}[{key}]")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn messages_are_worded_as_the_real_server() {
        let mut e = FieldErrors::new();
        e.required("spec.ports", "");
        e.required(
            "spec.template.spec.restartPolicy",
            "valid values: \"OnFailure\", \"Never\"",
        );
        e.not_supported("spec.type", "Magic", &["ClusterIP", "NodePort"]);
        e.duplicate("spec.ports[1].name", &go_string("a"));
        e.nonnegative("spec.replicas", &json!(-1));
        e.nonnegative("spec.replicas", &json!(1));
        let messages: Vec<String> = e.into_causes().into_iter().map(|c| c.message).collect();
        assert_eq!(
            messages,
            [
                "Required value",
                "Required value: valid values: \"OnFailure\", \"Never\"",
                "Unsupported value: \"Magic\": supported values: \"ClusterIP\", \"NodePort\"",
                "Duplicate value: \"a\"",
                "Invalid value: -1: must be greater than or equal to 0",
            ]
        );
    }

    #[test]
    fn label_maps_print_as_go_maps() {
        assert_eq!(go_string_map(&Value::Null), "map[string]string(nil)");
        assert_eq!(
            go_string_map(&json!({"b": "2", "a": "1"})),
            "map[string]string{\"a\":\"1\", \"b\":\"2\"}"
        );
        assert_eq!(go_string_map(&json!({})), "map[string]string{}");
    }
}
