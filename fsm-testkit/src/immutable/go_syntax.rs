//! Values as kube-apiserver prints them in a cause's message: with Go's
//! `%#v` for what is neither a number, a boolean nor a string
//! (`[]string{"10.0.0.1"}`, `v1.LabelSelector{MatchLabels:…}`), so that a
//! message reads as the real one does.

use serde_json::Value;

/// A Go string literal.
fn quoted(s: &str) -> String {
    format!("{s:?}")
}

/// A JSON scalar as Go prints an `int`, `bool` or `string` field; `null`
/// for nothing.
#[must_use]
pub fn scalar(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => "null".into(),
        Some(Value::String(s)) => quoted(s),
        Some(v) => v.to_string(),
    }
}

/// A `[]string` (`[]string(nil)` when empty).
#[must_use]
pub fn string_slice(items: &[String]) -> String {
    if items.is_empty() {
        return "[]string(nil)".into();
    }
    let inner: Vec<String> = items.iter().map(|s| quoted(s)).collect();
    format!("[]string{{{}}}", inner.join(", "))
}

/// A `map[string]string`, keys sorted as Go's `fmt` sorts them.
fn string_map(map: Option<&Value>) -> String {
    let Some(map) = map.and_then(Value::as_object).filter(|m| !m.is_empty()) else {
        return "map[string]string(nil)".into();
    };
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    let inner: Vec<String> = entries
        .iter()
        .map(|(k, v)| format!("{}:{}", quoted(k), quoted(v.as_str().unwrap_or_default())))
        .collect();
    format!("map[string]string{{{}}}", inner.join(", "))
}

/// A `v1.LabelSelector` (`null` when there is none).
#[must_use]
pub fn label_selector(selector: Option<&Value>) -> String {
    let Some(selector) = selector.filter(|s| s.is_object()) else {
        return "null".into();
    };
    let expressions = selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .filter(|e| !e.is_empty());
    let expressions = match expressions {
        None => "[]v1.LabelSelectorRequirement(nil)".into(),
        Some(list) => {
            let inner: Vec<String> = list
                .iter()
                .map(|e| {
                    let values: Vec<String> = e
                        .get("values")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect();
                    format!(
                        "v1.LabelSelectorRequirement{{Key:{}, Operator:{}, Values:{}}}",
                        quoted(e.get("key").and_then(Value::as_str).unwrap_or_default()),
                        quoted(
                            e.get("operator")
                                .and_then(Value::as_str)
                                .unwrap_or_default()
                        ),
                        string_slice(&values)
                    )
                })
                .collect();
            format!("[]v1.LabelSelectorRequirement{{{}}}", inner.join(", "))
        }
    };
    format!(
        "v1.LabelSelector{{MatchLabels:{}, MatchExpressions:{expressions}}}",
        string_map(selector.get("matchLabels"))
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_print_as_go_prints_them() {
        assert_eq!(scalar(Some(&json!(3))), "3");
        assert_eq!(scalar(Some(&json!("Opaque"))), "\"Opaque\"");
        assert_eq!(scalar(None), "null");
        assert_eq!(string_slice(&["10.0.0.9".into()]), "[]string{\"10.0.0.9\"}");
        assert_eq!(string_slice(&[]), "[]string(nil)");
        assert_eq!(
            label_selector(Some(&json!({"matchLabels": {"x": "y", "app": "d"}}))),
            "v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"d\", \"x\":\"y\"}, \
             MatchExpressions:[]v1.LabelSelectorRequirement(nil)}"
        );
        assert_eq!(
            label_selector(Some(
                &json!({"matchExpressions": [{"key": "a", "operator": "Exists"}]})
            )),
            "v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:\
             []v1.LabelSelectorRequirement{v1.LabelSelectorRequirement{Key:\"a\", \
             Operator:\"Exists\", Values:[]string(nil)}}}"
        );
    }
}
