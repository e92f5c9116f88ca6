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
    }
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
    fn labels() {
        assert_eq!(name_problem(NameRule::Label, "kube-system"), None);
        assert!(name_problem(NameRule::Label, "a.b").is_some());
        assert!(name_problem(NameRule::Label, &"a".repeat(64)).is_some());
        assert_eq!(name_problem(NameRule::Label1035, "svc-1"), None);
        assert!(name_problem(NameRule::Label1035, "1svc").is_some());
    }
}
