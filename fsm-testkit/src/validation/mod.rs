//! Validation as the real server's: names (its `ValidateObjectMeta`),
//! here, and the fields of the built-in kinds operators create, one
//! module per kind family, each rule a function the kinds' table
//! (`builtins`) names in the kind's entry (`KindRules::field_causes`).

pub mod autoscaler;
pub mod claim;
pub mod cron_job;
pub mod data;
pub mod field;
pub mod ingress;
pub mod load_balancer;
pub mod network_policy;
pub mod pod;
pub mod policy;
pub mod replicated;
pub mod service;
pub mod workload_status;
pub mod workloads;

use serde_json::Value;

use crate::resources::{NameRule, ResourceDef};
use crate::status::{ApiError, Cause};

const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const LABEL_1035_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

/// Why `name` breaks `rule`, or `None` when it is valid (the first of
/// [`name_problems`]).
#[must_use]
pub fn name_problem(rule: NameRule, name: &str) -> Option<String> {
    name_problems(rule, name).into_iter().next()
}

/// Every reason why `name` breaks `rule`, as the real server lists them
/// (each becomes a cause of its own). A DNS subdomain (most kinds,
/// custom resources included) may be 253 characters long with parts of
/// any length; a DNS label (Namespace) or DNS-1035 label (Service) 63.
#[must_use]
pub fn name_problems(rule: NameRule, name: &str) -> Vec<String> {
    let mut out = Vec::new();
    match rule {
        NameRule::Subdomain => {
            if name.len() > 253 {
                out.push("must be no more than 253 characters".into());
            }
            if !is_subdomain(name) {
                out.push(SUBDOMAIN_MSG.into());
            }
        }
        NameRule::Label => {
            if name.len() > 63 {
                out.push("must be no more than 63 characters".into());
            }
            if !is_label(name) {
                out.push(LABEL_MSG.into());
            }
        }
        NameRule::Label1035 => {
            if name.len() > 63 {
                out.push("must be no more than 63 characters".into());
            }
            let starts_alpha = name.chars().next().is_some_and(|c| c.is_ascii_lowercase());
            if !(is_label(name) && starts_alpha) {
                out.push(LABEL_1035_MSG.into());
            }
        }
        NameRule::PathSegment => {
            if name == "." || name == ".." {
                out.push(format!("may not be '{name}'"));
            }
            for bad in ["/", "%"] {
                if name.contains(bad) {
                    out.push(format!("may not contain '{bad}'"));
                }
            }
        }
    }
    out
}

/// Why a `generateName` prefix is invalid: the name rule with a trailing
/// `-` allowed (the real server's `maskTrailingDash`).
#[must_use]
pub fn generate_name_problems(rule: NameRule, prefix: &str) -> Vec<String> {
    let masked = match prefix.strip_suffix('-') {
        Some(head) if prefix.len() > 1 => format!("{head}a"),
        _ => prefix.to_string(),
    };
    match rule {
        // A prefix may be "." or "..": only '/' and '%' are refused.
        NameRule::PathSegment => ["/", "%"]
            .into_iter()
            .filter(|bad| prefix.contains(bad))
            .map(|bad| format!("may not contain '{bad}'"))
            .collect(),
        _ => name_problems(rule, &masked),
    }
}

const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const QUALIFIED_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const NAME_PART_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]` (the length is checked apart).
fn is_qualified_part(s: &str) -> bool {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    edge(s.chars().next())
        && edge(s.chars().last())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Why a label key is invalid, or `None` (the first of
/// [`qualified_name_problems`]).
#[must_use]
pub fn label_key_problem(key: &str) -> Option<String> {
    qualified_name_problems(key).into_iter().next()
}

/// Every reason why `key` is not a qualified name (`[prefix/]name`), as
/// the real server's `IsQualifiedName` lists them: label and annotation
/// keys.
#[must_use]
pub fn qualified_name_problems(key: &str) -> Vec<String> {
    let mut out = Vec::new();
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts[..] {
        [name] => name,
        [prefix, name] => {
            if prefix.is_empty() {
                out.push("prefix part must be non-empty".into());
            } else {
                out.extend(
                    name_problems(NameRule::Subdomain, prefix)
                        .into_iter()
                        .map(|p| format!("prefix part {p}")),
                );
            }
            name
        }
        _ => {
            out.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                QUALIFIED_MSG
            ));
            return out;
        }
    };
    if name.is_empty() {
        out.push("name part must be non-empty".into());
    } else if name.len() > 63 {
        out.push("name part must be no more than 63 characters".into());
    }
    if !is_qualified_part(name) {
        out.push(NAME_PART_MSG.into());
    }
    out
}

/// The most bytes all annotations (keys and values) of an object may take.
pub const TOTAL_ANNOTATION_BYTES: usize = 256 * 1024;

/// The longest `fieldManager`.
pub const FIELD_MANAGER_MAX_BYTES: usize = 128;

/// Why a label value is invalid, or `None`.
#[must_use]
pub fn label_value_problem(value: &str) -> Option<String> {
    if value.len() > 63 {
        return Some("must be no more than 63 characters".into());
    }
    (!value.is_empty() && !is_qualified_part(value)).then(|| LABEL_VALUE_MSG.into())
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*`: no
/// limit on a part's length (the real server's `IsDNS1123Subdomain`).
fn is_subdomain(s: &str) -> bool {
    s.split('.').all(|part| {
        let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
        !part.is_empty()
            && part.chars().all(ok_char)
            && !part.starts_with('-')
            && !part.ends_with('-')
    })
}

/// A `MicroTime` as Go decodes it: `2006-01-02T15:04:05.000000Z07:00`,
/// exactly six fractional digits.
fn is_micro_time(s: &str) -> bool {
    let b = s.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    let shape = b.len() >= 27
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && b[19] == b'.'
        && digits(20..26)
        && match &b[26..] {
            [b'Z'] => true,
            [sign, h1, h2, b':', m1, m2] => {
                matches!(sign, b'+' | b'-') && [h1, h2, m1, m2].iter().all(|d| d.is_ascii_digit())
            }
            _ => false,
        };
    shape && s.parse::<jiff::Timestamp>().is_ok()
}

/// Refuses a Lease whose `acquireTime` or `renewTime` is not a `MicroTime`
/// as the real server's decoder does: 400 `BadRequest`.
///
/// # Errors
/// `BadRequest` naming the field.
pub fn check_lease_times(def: &ResourceDef, body: &Value) -> Result<(), ApiError> {
    for (field, go) in [("acquireTime", "AcquireTime"), ("renewTime", "RenewTime")] {
        match &body["spec"][field] {
            Value::Null => {}
            Value::String(t) if is_micro_time(t) => {}
            other => {
                return Err(ApiError::BadRequest(format!(
                    "Lease in version \"{}\" cannot be handled as a Lease: v1.Lease.Spec: v1.LeaseSpec.{go}: unmarshalerDecoder: parsing time {other} as \"2006-01-02T15:04:05.000000Z07:00\"",
                    def.version
                )));
            }
        }
    }
    Ok(())
}

/// The causes the real server finds in a Lease's spec: a duration of at
/// least 1 s, transitions not negative.
#[must_use]
pub fn lease_causes(_def: &ResourceDef, body: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = &body["spec"];
    if spec["leaseDurationSeconds"]
        .as_f64()
        .is_some_and(|d| d <= 0.0)
    {
        causes.push(Cause {
            reason: "FieldValueInvalid".into(),
            message: format!(
                "Invalid value: {}: must be greater than 0",
                spec["leaseDurationSeconds"]
            ),
            field: "spec.leaseDurationSeconds".into(),
        });
    }
    if spec["leaseTransitions"].as_f64().is_some_and(|t| t < 0.0) {
        causes.push(Cause {
            reason: "FieldValueInvalid".into(),
            message: format!(
                "Invalid value: {}: must to greater or equal than 0",
                spec["leaseTransitions"]
            ),
            field: "spec.leaseTransitions".into(),
        });
    }
    causes
}

fn is_label(s: &str) -> bool {
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    !s.is_empty()
        && s.len() <= 63
        && s.chars().all(ok_char)
        && !s.starts_with('-')
        && !s.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subdomains() {
        for ok in ["a", "web-1", "a.b.c", "0abc"] {
            assert_eq!(name_problem(NameRule::Subdomain, ok), None, "{ok}");
        }
        for bad in ["", "A", "a_b", "-a", "a-", "a..b", ".a", &"a".repeat(254)] {
            assert!(name_problem(NameRule::Subdomain, bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn qualified_names() {
        for ok in ["kubernetes", "example.com/hold", "A_b.c", "x/y"] {
            assert!(qualified_name_problems(ok).is_empty(), "{ok}");
        }
        assert_eq!(
            qualified_name_problems("bad name!"),
            vec![NAME_PART_MSG.to_string()]
        );
        assert_eq!(
            qualified_name_problems("/x"),
            vec!["prefix part must be non-empty".to_string()]
        );
        assert_eq!(qualified_name_problems("a/b/c").len(), 1);
        assert_eq!(qualified_name_problems("").len(), 2);
    }

    #[test]
    fn label_keys_and_values() {
        for ok in ["app", "app.kubernetes.io/name", "A_b-c.d", "example.com/x"] {
            assert_eq!(label_key_problem(ok), None, "{ok}");
        }
        for bad in ["", "-a", "a b", "Bad_Prefix/x", "a/", &"k".repeat(64)] {
            assert!(label_key_problem(bad).is_some(), "{bad}");
        }
        for ok in ["", "v1", "My_value.2"] {
            assert_eq!(label_value_problem(ok), None, "{ok}");
        }
        for bad in ["bad value", "-x", "x-", "a!", &"v".repeat(64)] {
            assert!(label_value_problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn labels() {
        assert_eq!(name_problem(NameRule::Label, "kube-system"), None);
        assert!(name_problem(NameRule::Label, "a.b").is_some());
        assert!(name_problem(NameRule::Label, &"a".repeat(64)).is_some());
        assert_eq!(name_problem(NameRule::Label1035, "svc-1"), None);
        assert!(name_problem(NameRule::Label1035, "1svc").is_some());
        assert_eq!(
            name_problem(NameRule::PathSegment, "system:controller:x"),
            None
        );
        assert_eq!(
            name_problem(NameRule::PathSegment, "..").as_deref(),
            Some("may not be '..'")
        );
        assert_eq!(
            name_problem(NameRule::PathSegment, "a/b").as_deref(),
            Some("may not contain '/'")
        );
    }

    #[test]
    fn subdomain_parts_have_no_length_limit() {
        assert_eq!(
            name_problems(NameRule::Subdomain, &"a".repeat(100)),
            Vec::<String>::new()
        );
        assert_eq!(
            name_problems(NameRule::Subdomain, &format!("{}.b", "a".repeat(200))),
            Vec::<String>::new()
        );
        assert_eq!(
            name_problems(NameRule::Subdomain, &"a".repeat(254)),
            vec!["must be no more than 253 characters".to_string()]
        );
        assert_eq!(
            name_problems(NameRule::Subdomain, &"A".repeat(254)).len(),
            2
        );
    }

    #[test]
    fn generate_name_prefixes_may_end_in_a_dash() {
        assert!(generate_name_problems(NameRule::Subdomain, "web-").is_empty());
        assert!(generate_name_problems(NameRule::Subdomain, "web.").len() == 1);
        assert_eq!(
            generate_name_problems(NameRule::Subdomain, "Bad_"),
            vec![SUBDOMAIN_MSG.to_string()]
        );
        assert!(generate_name_problems(NameRule::Subdomain, "-").len() == 1);
    }

    #[test]
    fn qualified_names_as_the_real_server() {
        assert_eq!(qualified_name_problems("x/y/z").len(), 1);
        assert!(qualified_name_problems("x/y/z")[0].starts_with("a qualified name must consist"));
        assert_eq!(
            qualified_name_problems("/x"),
            vec!["prefix part must be non-empty".to_string()]
        );
        assert_eq!(qualified_name_problems("a/").len(), 2);
        assert_eq!(
            qualified_name_problems(&"k".repeat(64)),
            vec!["name part must be no more than 63 characters".to_string()]
        );
        assert!(qualified_name_problems("Example.com/Key").len() == 1);
    }
}
