//! Label and field selectors, parsed from their query-string form and matched
//! against JSON objects.
//!
//! Label selectors support `=`, `==`, `!=`, `in (…)`, `notin (…)`, `key`
//! (exists), `!key` (does not exist), `key>n` and `key<n` (integer labels),
//! comma-separated, all of which must hold (parsed in
//! [`label_syntax`](crate::label_syntax)). Field selectors support `=`, `==` and `!=` on dotted paths; which
//! paths a resource accepts is decided by the caller (see
//! [`FieldSelector::check_supported`]).

use serde_json::Value;

use crate::status::ApiError;

pub use crate::label_syntax::LabelRequirement;

impl LabelRequirement {
    fn matches(&self, labels: Option<&serde_json::Map<String, Value>>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        match self {
            Self::Equals(k, v) => get(k) == Some(v.as_str()),
            Self::NotEquals(k, v) => get(k) != Some(v.as_str()),
            Self::In(k, vs) => get(k).is_some_and(|x| vs.contains(x)),
            Self::NotIn(k, vs) => get(k).is_none_or(|x| !vs.contains(x)),
            Self::Exists(k) => get(k).is_some(),
            Self::NotExists(k) => get(k).is_none(),
            // A label that is not an integer matches neither.
            Self::GreaterThan(k, n) => integer(get(k)).is_some_and(|v| v > *n),
            Self::LessThan(k, n) => integer(get(k)).is_some_and(|v| v < *n),
        }
    }
}

/// A label's value as the integer it spells (base 10), if it does.
fn integer(value: Option<&str>) -> Option<i64> {
    value?.parse().ok()
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<LabelRequirement>,
}

impl LabelSelector {
    /// Parses the `labelSelector` query parameter.
    ///
    /// # Errors
    /// [`ApiError::BadRequest`] for a selector that does not parse.
    pub fn parse(input: &str) -> Result<Self, ApiError> {
        crate::label_syntax::parse(input)
            .map(|requirements| Self { requirements })
            .map_err(ApiError::BadRequest)
    }

    /// Whether the selector has no requirement (matches everything).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The requirements, in the order written.
    #[must_use]
    pub fn requirements(&self) -> &[LabelRequirement] {
        &self.requirements
    }

    /// Whether `object`'s `metadata.labels` satisfy every requirement.
    #[must_use]
    pub fn matches(&self, object: &Value) -> bool {
        let labels = object
            .get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object);
        self.requirements.iter().all(|r| r.matches(labels))
    }
}

/// A field selector's terms: split at commas, but not at an escaped one
/// (`\,`), which stays in its term with its backslash.
fn split_terms(selector: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in selector.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            ',' => {
                terms.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&selector[start..]);
    terms
}

/// A term's field, value and whether it is negated, split at the first
/// operator (`!=`, `==` or `=`) from the left; `None` without one.
fn split_term(term: &str) -> Option<(&str, &str, bool)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for (operator, negated) in [("!=", true), ("==", false), ("=", false)] {
            if let Some(value) = rest.strip_prefix(operator) {
                return Some((&term[..i], value, negated));
            }
        }
    }
    None
}

/// A field selector's value with its escapes (`\\`, `\,`, `\=`) undone;
/// an unescaped `,` or `=`, or another escape, is an error worded as the
/// real server's.
fn unescape_value(value: &str) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut escaped = false;
    for c in value.chars() {
        if escaped {
            if !matches!(c, '\\' | ',' | '=') {
                return Err(format!(
                    "invalid field selector: invalid escape sequence: \\{c}"
                ));
            }
            out.push(c);
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            ',' | '=' => {
                return Err(format!(
                    "invalid field selector: unescaped character in value: {}",
                    u32::from(c)
                ));
            }
            _ => out.push(c),
        }
    }
    if escaped {
        return Err("invalid field selector: invalid escape sequence: \\".into());
    }
    Ok(out)
}

/// One requirement of a field selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    /// Dotted path, e.g. `metadata.name`.
    pub field: String,
    /// The value compared with.
    pub value: String,
    /// `!=` rather than `=`.
    pub negated: bool,
}

/// A parsed field selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
    /// Selects on stored core Events (`source` reads the source's component).
    events: bool,
}

impl FieldSelector {
    /// Parses the `fieldSelector` query parameter.
    ///
    /// # Errors
    /// [`ApiError::BadRequest`] for a selector that does not parse.
    pub fn parse(input: &str) -> Result<Self, ApiError> {
        let mut requirements = Vec::new();
        for part in split_terms(input) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let Some((field, value, negated)) = split_term(part) else {
                return Err(ApiError::BadRequest(format!(
                    "invalid selector: '{input}'; can't understand '{part}'"
                )));
            };
            requirements.push(FieldRequirement {
                field: field.trim().into(),
                value: unescape_value(value.trim()).map_err(ApiError::BadRequest)?,
                negated,
            });
        }
        Ok(Self {
            requirements,
            events: false,
        })
    }

    /// This selector as it applies to `def`'s stored objects: checked
    /// against the fields `def` indexes, `events.k8s.io` Event fields
    /// renamed to the core fields they are stored as.
    ///
    /// # Errors
    /// [`ApiError::BadRequest`] naming the first field `def` does not index.
    pub fn resolve(&self, def: &crate::resources::ResourceDef) -> Result<Self, ApiError> {
        if !crate::events::is_event(def) {
            self.check_supported(&def.field_selectors)?;
            return Ok(self.clone());
        }
        let mut requirements = Vec::with_capacity(self.requirements.len());
        for r in &self.requirements {
            let field = if crate::events::is_events_api(def) {
                crate::events::core_field_label(&r.field)?.to_string()
            } else if r.field == "metadata.name"
                || r.field == "metadata.namespace"
                || def.field_selectors.contains(&r.field)
            {
                r.field.clone()
            } else {
                return Err(ApiError::BadRequest(format!(
                    "field label not supported: {}",
                    r.field
                )));
            };
            requirements.push(FieldRequirement { field, ..r.clone() });
        }
        Ok(Self {
            requirements,
            events: true,
        })
    }

    /// Whether the selector has no requirement (matches everything).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Refuses fields outside `metadata.name`, `metadata.namespace` and `extra`,
    /// as the real server refuses field labels a resource does not index.
    ///
    /// # Errors
    /// [`ApiError::BadRequest`] naming the first unsupported field.
    pub fn check_supported(&self, extra: &[String]) -> Result<(), ApiError> {
        for r in &self.requirements {
            let ok = r.field == "metadata.name"
                || r.field == "metadata.namespace"
                || extra.contains(&r.field);
            if !ok {
                let known: Vec<String> = ["metadata.name", "metadata.namespace"]
                    .iter()
                    .map(|f| (*f).to_string())
                    .chain(extra.iter().cloned())
                    .map(|f| format!("{f:?}"))
                    .collect();
                return Err(ApiError::BadRequest(format!(
                    "{:?} is not a known field selector: only {}",
                    r.field,
                    known.join(", ")
                )));
            }
        }
        Ok(())
    }

    /// The value `metadata.name=…` requires, if the selector pins the name.
    #[must_use]
    pub fn pinned_name(&self) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| r.field == "metadata.name" && !r.negated)
            .map(|r| r.value.as_str())
    }

    /// Whether `object` satisfies every requirement (a missing field reads as "").
    #[must_use]
    pub fn matches(&self, object: &Value) -> bool {
        self.requirements.iter().all(|r| {
            let special = if self.events {
                crate::events::selectable_field(object, &r.field)
            } else {
                None
            };
            let actual = special.unwrap_or_else(|| {
                r.field
                    .split('.')
                    .try_fold(object, |v, seg| v.get(seg))
                    .map(|v| match v {
                        Value::String(s) => s.clone(),
                        Value::Null => String::new(),
                        other => other.to_string(),
                    })
                    .unwrap_or_default()
            });
            (actual == r.value) != r.negated
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "a", "namespace": "ns", "labels": labels}})
    }

    #[test]
    fn label_operators() {
        let o = obj(json!({"app": "web", "tier": "front", "replicas": "3"}));
        let cases = [
            ("app=web", true),
            ("app==web", true),
            ("app=db", false),
            ("app!=db", true),
            ("missing!=x", true),
            ("app in (web, db)", true),
            ("app in (db)", false),
            ("app notin (db)", true),
            ("missing notin (db)", true),
            ("app notin (web)", false),
            ("app", true),
            ("missing", false),
            ("!missing", true),
            ("!app", false),
            ("app=web,tier=front", true),
            ("app=web,tier in (back)", false),
            ("", true),
            ("replicas>2", true),
            ("replicas > 3", false),
            ("replicas<4", true),
            ("replicas<1", false),
            // Not an integer, or absent: neither greater nor less.
            ("app>1", false),
            ("app<1", false),
            ("missing<1", false),
        ];
        for (sel, want) in cases {
            let s = LabelSelector::parse(sel).unwrap();
            assert_eq!(s.matches(&o), want, "selector {sel:?}");
        }
    }

    #[test]
    fn greater_and_less_than_need_an_integer() {
        for bad in ["x>a", "x<1.5", "x>"] {
            let Err(ApiError::BadRequest(message)) = LabelSelector::parse(bad) else {
                panic!("{bad:?} parsed");
            };
            assert_eq!(
                message,
                "unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer",
                "{bad:?}"
            );
        }
    }

    #[test]
    fn field_selector_values_unescape_and_refuse_bare_operators() {
        let one = FieldSelector::parse(r"metadata.name=a\,b\=c\\d").unwrap();
        assert_eq!(one.requirements[0].value, r"a,b=c\d");
        // Terms split at unescaped commas only.
        let two = FieldSelector::parse(r"metadata.name=a\,b,metadata.namespace!=x").unwrap();
        assert_eq!(two.requirements.len(), 2);
        assert!(two.requirements[1].negated);
        // The first operator from the left splits the term.
        for (bad, message) in [
            ("metadata.name===x", "unescaped character in value: 61"),
            ("metadata.name!==x", "unescaped character in value: 61"),
            (r"metadata.name=a\x", r"invalid escape sequence: \x"),
            (r"metadata.name=x\", r"invalid escape sequence: \"),
        ] {
            let Err(ApiError::BadRequest(got)) = FieldSelector::parse(bad) else {
                panic!("{bad:?} parsed");
            };
            assert_eq!(got, format!("invalid field selector: {message}"), "{bad:?}");
        }
    }

    #[test]
    fn label_parse_errors() {
        for bad in ["app in web", "a=b=c", "=x", "app in (a b)"] {
            assert!(
                LabelSelector::parse(bad).is_err(),
                "{bad:?} should not parse"
            );
        }
    }

    #[test]
    fn invalid_keys_and_values_are_named() {
        let message = |sel: &str| LabelSelector::parse(sel).unwrap_err().to_string();
        assert!(
            message("-a=b").starts_with("unable to parse requirement: invalid label key \"-a\": "),
            "{}",
            message("-a=b")
        );
        assert!(
            message("a=-b").starts_with(
                "unable to parse requirement: invalid label value: \"-b\": at key: \"a\": "
            ),
            "{}",
            message("a=-b")
        );
        assert!(LabelSelector::parse("a in (x, -y)").is_err());
        assert!(LabelSelector::parse(&format!("a={}", "v".repeat(64))).is_err());
        assert!(LabelSelector::parse("example.com/a=x_y").is_ok());
    }

    #[test]
    fn object_without_labels() {
        let o = json!({"metadata": {"name": "a"}});
        assert!(LabelSelector::parse("!x").unwrap().matches(&o));
        assert!(!LabelSelector::parse("x").unwrap().matches(&o));
    }

    #[test]
    fn field_selectors() {
        let o = obj(json!({}));
        let s = FieldSelector::parse("metadata.name=a,metadata.namespace!=other").unwrap();
        assert!(s.matches(&o));
        assert_eq!(s.pinned_name(), Some("a"));
        assert!(
            !FieldSelector::parse("metadata.name==b")
                .unwrap()
                .matches(&o)
        );
        assert!(FieldSelector::parse("metadata.name").is_err());
        let unsupported = FieldSelector::parse("spec.foo=1").unwrap();
        assert!(unsupported.check_supported(&[]).is_err());
        assert!(unsupported.check_supported(&["spec.foo".into()]).is_ok());
    }
}
