//! Name validation, as the real server's `ValidateObjectMeta` does it.

use crate::resources::NameRule;

const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const LABEL_1035_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

/// Why `name` breaks `rule`, or `None` when it is valid.
#[must_use]
pub fn name_problem(rule: NameRule, name: &str) -> Option<String> {
    match rule {
        NameRule::Subdomain => {
            if name.len() > 253 {
                return Some("must be no more than 253 characters".into());
            }
            (!name.split('.').all(is_label)).then(|| SUBDOMAIN_MSG.into())
        }
        NameRule::Label => {
            if name.len() > 63 {
                return Some("must be no more than 63 characters".into());
            }
            (!is_label(name)).then(|| LABEL_MSG.into())
        }
        NameRule::Label1035 => {
            if name.len() > 63 {
                return Some("must be no more than 63 characters".into());
            }
            let starts_alpha = name.chars().next().is_some_and(|c| c.is_ascii_lowercase());
            (!(is_label(name) && starts_alpha)).then(|| LABEL_1035_MSG.into())
        }
        NameRule::PathSegment => {
            if name == "." || name == ".." {
                return Some(format!("may not be '{name}'"));
            }
            ["/", "%"]
                .into_iter()
                .find(|bad| name.contains(bad))
                .map(|bad| format!("may not contain '{bad}'"))
        }
    }
}

const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const NAME_PART_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, at most 63 characters.
fn is_qualified_part(s: &str) -> bool {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    s.len() <= 63
        && edge(s.chars().next())
        && edge(s.chars().last())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Why a label key is invalid, or `None`.
#[must_use]
pub fn label_key_problem(key: &str) -> Option<String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix
        && let Some(problem) = name_problem(NameRule::Subdomain, p)
    {
        return Some(format!("prefix part {problem}"));
    }
    if name.len() > 63 {
        return Some("name part must be no more than 63 characters".into());
    }
    (!is_qualified_part(name)).then(|| NAME_PART_MSG.into())
}

/// Every problem of `value` as a qualified name (`IsQualifiedName`: an
/// optional DNS subdomain prefix and `/`, then a name part), empty when it
/// is one.
#[must_use]
pub fn qualified_name_problems(value: &str) -> Vec<String> {
    let parts: Vec<&str> = value.split('/').collect();
    let mut problems = Vec::new();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                problems.push("prefix part must be non-empty".into());
            } else if let Some(problem) = name_problem(NameRule::Subdomain, prefix) {
                problems.push(format!("prefix part {problem}"));
            }
            *name
        }
        _ => {
            return vec![format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                &NAME_PART_MSG["name part ".len()..]
            )];
        }
    };
    if name.is_empty() {
        problems.push("name part must be non-empty".into());
    } else if name.len() > 63 {
        problems.push("name part must be no more than 63 characters".into());
    }
    if !is_qualified_part_chars(name) {
        problems.push(NAME_PART_MSG.into());
    }
    problems
}

/// The regex of a qualified name's name part, without its length limit.
fn is_qualified_part_chars(s: &str) -> bool {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    edge(s.chars().next())
        && edge(s.chars().last())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Why a label value is invalid, or `None`.
#[must_use]
pub fn label_value_problem(value: &str) -> Option<String> {
    if value.len() > 63 {
        return Some("must be no more than 63 characters".into());
    }
    (!value.is_empty() && !is_qualified_part(value)).then(|| LABEL_VALUE_MSG.into())
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
}
