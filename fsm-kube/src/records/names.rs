//! Names from outside (a URL of the web view, a command line) checked
//! before they reach the API server, and made safe to put in an API URL.
//!
//! kube-rs builds a named request's URL by formatting the name into it
//! as it is (`{url_path}/{name}`): a name holding `?`, `/` or `%` would
//! change the request (`x?watch=true` turns a GET into a watch,
//! `x/status` names the status subresource). The web view refuses names
//! that are not Kubernetes names ([`is_dns1123_subdomain`],
//! [`is_dns1123_label`]), and every name we put into a URL goes through
//! [`path_segment`] as well.
//!
//! All three are pure.

use std::borrow::Cow;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// The characters a path segment keeps as they are: RFC 3986's
/// unreserved ones (letters, digits, `-`, `.`, `_`, `~`).
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `text` percent-encoded as one URL path segment: unchanged for a
/// Kubernetes name, `%3F`, `%2F`, `%25`… for what would otherwise end the
/// path, start a query or name another resource.
#[must_use]
pub fn path_segment(text: &str) -> Cow<'_, str> {
    utf8_percent_encode(text, SEGMENT).into()
}

/// A DNS-1123 label, as namespaces are: 1 to 63 lowercase letters, digits
/// and `-`, starting and ending with a letter or digit.
#[must_use]
pub fn is_dns1123_label(text: &str) -> bool {
    let bytes = text.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

/// A DNS-1123 subdomain, as the names of custom resources, ConfigMaps and
/// Secrets are: at most 253 characters, DNS-1123 labels (without their
/// length limit) joined by `.`.
#[must_use]
pub fn is_dns1123_subdomain(text: &str) -> bool {
    text.len() <= 253
        && text.split('.').all(|label| {
            let bytes = label.as_bytes();
            !bytes.is_empty()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
                && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
                && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_would_change_the_request_are_not_kubernetes_names() {
        for name in [
            "x?watch=true",
            "x?resourceVersion=0",
            "x/status",
            "..",
            ".",
            "",
            "X",
            "x%2F",
            "-x",
            "x-",
            "a..b",
        ] {
            assert!(!is_dns1123_subdomain(name), "{name:?}");
            assert!(!is_dns1123_label(name), "{name:?}");
        }
        for name in ["x", "db-1", "db.example.io", "a1"] {
            assert!(is_dns1123_subdomain(name), "{name:?}");
        }
        assert!(is_dns1123_label("team-a"));
        assert!(!is_dns1123_label("team.a"));
        assert!(!is_dns1123_label(&"a".repeat(64)));
        assert!(is_dns1123_subdomain(&"a".repeat(253)));
        assert!(!is_dns1123_subdomain(&"a".repeat(254)));
    }

    #[test]
    fn a_path_segment_cannot_end_the_path() {
        assert_eq!(path_segment("db.example-1"), "db.example-1");
        assert_eq!(path_segment("x?watch=true"), "x%3Fwatch%3Dtrue");
        assert_eq!(path_segment("x/status"), "x%2Fstatus");
        assert_eq!(path_segment("x%3F"), "x%253F");
        assert_eq!(path_segment("a b#c"), "a%20b%23c");
    }
}
