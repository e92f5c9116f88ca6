//! Comparing two values of a grow-only field: JSON numbers, or
//! Kubernetes quantities written as strings (`10Gi`, `500m`, `1e3`).

use std::cmp::Ordering;

use serde_json::Value;

/// How `new` compares with `old`, when both are amounts (numbers or
/// quantities); `None` when either is not.
pub(crate) fn compare(old: &Value, new: &Value) -> Option<Ordering> {
    amount(new)?.partial_cmp(&amount(old)?)
}

/// A number, or a quantity string, as a float (precise enough to tell
/// growth from shrinkage of any size an object holds).
fn amount(value: &Value) -> Option<f64> {
    match value {
        Value::Number(number) => number.as_f64(),
        Value::String(text) => quantity(text),
        _ => None,
    }
}

/// A Kubernetes quantity: a signed decimal number and a binary (`Ki` …
/// `Ei`), decimal (`n` … `E`) or exponent (`e3`) suffix.
fn quantity(text: &str) -> Option<f64> {
    let text = text.trim();
    let split = text
        .char_indices()
        .find(|(i, c)| !(c.is_ascii_digit() || *c == '.' || (*i == 0 && matches!(c, '+' | '-'))))
        .map_or(text.len(), |(i, _)| i);
    let (number, suffix) = text.split_at(split);
    if number.is_empty() || number == "+" || number == "-" || number == "." {
        return None;
    }
    let number: f64 = number.parse().ok()?;
    let factor = match suffix {
        "" => 1.0,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        exponent => {
            let digits = exponent.strip_prefix(['e', 'E'])?;
            10f64.powi(digits.parse::<i32>().ok()?)
        }
    };
    let value = number * factor;
    value.is_finite().then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_and_quantities_compare_by_amount() {
        assert_eq!(compare(&json!(10), &json!(20)), Some(Ordering::Greater));
        assert_eq!(compare(&json!(20), &json!(10.5)), Some(Ordering::Less));
        assert_eq!(
            compare(&json!("10Gi"), &json!("10240Mi")),
            Some(Ordering::Equal)
        );
        assert_eq!(compare(&json!("1"), &json!("1000m")), Some(Ordering::Equal));
        assert_eq!(
            compare(&json!("1G"), &json!("1Gi")),
            Some(Ordering::Greater)
        );
        assert_eq!(compare(&json!("2e3"), &json!("1k")), Some(Ordering::Less));
        assert_eq!(compare(&json!(5), &json!("5")), Some(Ordering::Equal));
    }

    #[test]
    fn what_is_no_amount_does_not_compare() {
        for text in ["", "Gi", "ten", "1.2.3", "1Zi", "1e", "-", "1e999999"] {
            assert_eq!(compare(&json!(1), &json!(text)), None, "{text:?}");
        }
        assert_eq!(compare(&json!(true), &json!(1)), None);
        assert_eq!(compare(&json!({"a": 1}), &json!(1)), None);
    }
}
