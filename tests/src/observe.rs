//! What a scenario observed, made comparable across servers.
//!
//! Two servers never agree on uids, timestamps, resourceVersions, continue
//! tokens or the managedFields bookkeeping, and each run uses its own
//! namespace and CRD group names; [`normalize`] replaces all of these with
//! placeholders so that the rest (objects, status codes, `Status` reasons and
//! messages, event sequences, generations) can be compared exactly.

use serde::Serialize;
use serde_json::Value;

/// The placeholder for a run's unique token (namespace, CRD group).
pub const RUN_PLACEHOLDER: &str = "<run>";

/// What one scenario observed on one server, in order, each under a label.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observations {
    run_token: String,
    entries: Vec<Entry>,
}

/// One observation.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// What was observed.
    pub label: String,
    /// The normalised value.
    pub value: Value,
    /// Set when the embedded server is known to differ here: the fidelity
    /// difference it describes is reported, not failed.
    pub known_difference: Option<&'static str>,
}

/// The outcome of comparing two servers' observations.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Comparison {
    /// Differences nobody expected, as readable reports.
    pub unexpected: Vec<String>,
    /// Differences at observations marked as known, as readable reports.
    pub known: Vec<String>,
    /// Observations marked as known differences where both servers agreed.
    pub agreed_known: Vec<String>,
}

impl Observations {
    /// Observations of a run whose unique names all contain `run_token`.
    #[must_use]
    pub fn new(run_token: impl Into<String>) -> Self {
        Self {
            run_token: run_token.into(),
            entries: Vec::new(),
        }
    }

    /// Records `value`, normalised, under `label`.
    ///
    /// # Panics
    /// If `value` cannot be serialised to JSON (a bug in the scenario).
    pub fn record(&mut self, label: impl Into<String>, value: impl Serialize) {
        self.push(label.into(), value, None);
    }

    /// Records `value` where the embedded server is known to differ from
    /// the real one, for the reason `difference`: a difference here is
    /// reported as known instead of failing.
    ///
    /// # Panics
    /// As [`Observations::record`].
    pub fn record_known(
        &mut self,
        label: impl Into<String>,
        value: impl Serialize,
        difference: &'static str,
    ) {
        self.push(label.into(), value, Some(difference));
    }

    fn push(&mut self, label: String, value: impl Serialize, known: Option<&'static str>) {
        let mut value = serde_json::to_value(value).expect("observation serialises");
        normalize(&mut value, &self.run_token);
        self.entries.push(Entry {
            label,
            value,
            known_difference: known,
        });
    }

    /// The entries, in the order they were recorded.
    #[must_use]
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Compares entry by entry with `other`; `names` label the two sides in
    /// the reports.
    #[must_use]
    pub fn compare(&self, other: &Self, names: (&str, &str)) -> Comparison {
        let mut out = Comparison::default();
        let n = self.entries.len().max(other.entries.len());
        for i in 0..n {
            let (a, b) = (self.entries.get(i), other.entries.get(i));
            let known = a
                .and_then(|e| e.known_difference)
                .or_else(|| b.and_then(|e| e.known_difference));
            let same_label = matches!((a, b), (Some(a), Some(b)) if a.label == b.label);
            if a.map(|e| &e.value) == b.map(|e| &e.value) && same_label {
                if let (Some(reason), Some(a)) = (known, a) {
                    out.agreed_known.push(format!("[{}] {reason}", a.label));
                }
                continue;
            }
            let show = |e: Option<&Entry>| match e {
                Some(e) => format!(
                    "[{}] {}",
                    e.label,
                    serde_json::to_string_pretty(&e.value).unwrap_or_default()
                ),
                None => "(nothing: the scenario ended earlier)".to_owned(),
            };
            let report = format!(
                "observation #{i} differs{}\n--- {}:\n{}\n--- {}:\n{}",
                known.map(|k| format!(" (known: {k})")).unwrap_or_default(),
                names.0,
                show(a),
                names.1,
                show(b)
            );
            match known {
                Some(_) if same_label => out.known.push(report),
                _ => out.unexpected.push(report),
            }
        }
        out
    }
}

/// Replaces what legitimately differs between servers and runs with
/// placeholders, in place:
///
/// - `uid` anywhere (metadata, ownerReferences, `Status` details) → `<uid>`;
/// - `resourceVersion` anywhere, `continue` tokens → `<rv>`, `<continue>`;
/// - any string field whose name ends in `Time` or `Timestamp` → `<time>`;
/// - `managedFields` → removed (1.20 and the embedded server both keep
///   them, but their entries are bookkeeping of timestamps and versions);
/// - a `name` generated from `generateName` → the prefix + `<generated>`;
/// - `run_token` inside any string (namespace and group names) → `<run>`.
pub fn normalize(value: &mut Value, run_token: &str) {
    match value {
        Value::Object(map) => {
            map.remove("managedFields");
            let generate_name = map
                .get("generateName")
                .and_then(Value::as_str)
                .map(str::to_owned);
            for (key, v) in map.iter_mut() {
                match (key.as_str(), &*v) {
                    ("uid", Value::String(_)) => *v = Value::from("<uid>"),
                    ("resourceVersion", Value::String(s)) if !s.is_empty() => {
                        *v = Value::from("<rv>");
                    }
                    ("continue", Value::String(s)) if !s.is_empty() => {
                        *v = Value::from("<continue>");
                    }
                    (k, Value::String(_)) if k.ends_with("Time") || k.ends_with("Timestamp") => {
                        *v = Value::from("<time>");
                    }
                    ("name", Value::String(s)) => {
                        if let Some(prefix) = generate_name.as_deref()
                            && let Some(rest) = s.strip_prefix(prefix)
                            && !rest.is_empty()
                        {
                            *v = Value::from(format!("{prefix}<generated>"));
                        }
                        normalize(v, run_token);
                    }
                    _ => normalize(v, run_token),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| normalize(v, run_token)),
        Value::String(s) if !run_token.is_empty() && s.contains(run_token) => {
            *s = s.replace(run_token, RUN_PLACEHOLDER);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn normalises_what_servers_may_disagree_on() {
        let mut v = json!({
            "metadata": {
                "name": "web-x7k2p", "generateName": "web-", "namespace": "conf-abc-tok",
                "uid": "1234", "resourceVersion": "77", "creationTimestamp": "2026-01-01T00:00:00Z",
                "managedFields": [{"manager": "x"}],
                "ownerReferences": [{"uid": "9", "name": "owner"}]
            },
            "status": {"conditions": [{"lastTransitionTime": "t", "type": "Ready"}]},
            "list": {"continue": "abc", "resourceVersion": ""}
        });
        normalize(&mut v, "tok");
        assert_eq!(
            v,
            json!({
                "metadata": {
                    "name": "web-<generated>", "generateName": "web-",
                    "namespace": "conf-abc-<run>", "uid": "<uid>", "resourceVersion": "<rv>",
                    "creationTimestamp": "<time>",
                    "ownerReferences": [{"uid": "<uid>", "name": "owner"}]
                },
                "status": {"conditions": [{"lastTransitionTime": "<time>", "type": "Ready"}]},
                "list": {"continue": "<continue>", "resourceVersion": ""}
            })
        );
    }

    #[test]
    fn separates_known_from_unexpected_differences() {
        let mut a = Observations::new("t");
        let mut b = Observations::new("t");
        a.record("x", 1);
        b.record("x", 1);
        assert_eq!(a.compare(&b, ("a", "b")), Comparison::default());
        a.record_known("k", 1, "a known gap");
        b.record_known("k", 2, "a known gap");
        a.record("y", json!({"k": 1}));
        b.record("y", json!({"k": 2}));
        let c = a.compare(&b, ("a", "b"));
        assert_eq!(c.known.len(), 1);
        assert!(
            c.known[0].contains("observation #1 differs (known: a known gap)"),
            "{c:?}"
        );
        assert_eq!(c.unexpected.len(), 1);
        assert!(c.unexpected[0].contains("observation #2"), "{c:?}");
        b.record("z", 3);
        assert_eq!(a.compare(&b, ("a", "b")).unexpected.len(), 2);
        assert_eq!(a.entries().len(), 3);
    }
}
