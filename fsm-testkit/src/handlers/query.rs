//! What a request on an object says besides its path: its query
//! parameters (percent-decoded), headers, the field manager of a write,
//! the options of a write, a list or a read, validated as the real server
//! validates them.

use std::collections::HashMap;

use http::header;
use http::request::Parts;

use crate::cluster::{ListQuery, ReadOptions};
use crate::selectors::{FieldSelector, LabelSelector};
use crate::status::{ApiError, Cause, Subject};
use crate::validation;

/// The query parameters of a request, percent-decoded.
pub fn query_map(parts: &Parts) -> HashMap<String, String> {
    parts
        .uri
        .query()
        .map(|q| {
            url_decode_pairs(q)
                .into_iter()
                .collect::<HashMap<String, String>>()
        })
        .unwrap_or_default()
}

fn url_decode_pairs(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether the query parameter `key` is `true` (or `1`).
pub(super) fn flag(q: &HashMap<String, String>, key: &str) -> bool {
    matches!(q.get(key).map(String::as_str), Some("true" | "1"))
}

/// The value of the header `name`, or "" (also for one that is not text).
pub(super) fn header_str(parts: &Parts, name: header::HeaderName) -> &str {
    parts
        .headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

/// The field manager of a write: `fieldManager`, else the User-Agent up to
/// its first `/`, without unprintable characters and cut at 128 bytes, as
/// the real server names it (`prefixFromUserAgent`); "unknown" when that
/// leaves nothing.
pub(super) fn field_manager(q: &HashMap<String, String>, parts: &Parts) -> String {
    if let Some(m) = q.get("fieldManager").filter(|m| !m.is_empty()) {
        return m.clone();
    }
    let agent = header_str(parts, header::USER_AGENT);
    let manager = manager_from_user_agent(agent);
    if manager.is_empty() {
        "unknown".into()
    } else {
        manager
    }
}

fn manager_from_user_agent(agent: &str) -> String {
    let mut out = String::new();
    for c in agent.split('/').next().unwrap_or_default().chars() {
        if !is_printable(c) {
            continue;
        }
        if out.len() + c.len_utf8() > validation::FIELD_MANAGER_MAX_BYTES {
            break;
        }
        out.push(c);
    }
    out
}

/// Go's `unicode.IsPrint`, closely enough: no control characters, and
/// the ASCII space is the only space.
fn is_printable(c: char) -> bool {
    !(c.is_control() || (c.is_whitespace() && c != ' '))
}

/// Which options a write carries: `CreateOptions`, `UpdateOptions` or
/// `PatchOptions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WriteOptions {
    Create,
    Update,
    Patch(bool),
}

/// Validates a write's options as the real server does before it reads the
/// body: `fieldManager` (at most 128 bytes, printable), `dryRun` (only
/// `All`), and for a patch `force` (apply only) and `fieldManager`
/// (required for apply).
pub(super) fn check_write_options(parts: &Parts, kind: WriteOptions) -> Result<(), ApiError> {
    let pairs = parts.uri.query().map(url_decode_pairs).unwrap_or_default();
    let values = |key: &str| -> Vec<&str> {
        pairs
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect()
    };
    let manager = values("fieldManager").first().copied().unwrap_or_default();
    let mut causes = Vec::new();
    if let WriteOptions::Patch(apply) = kind {
        if !apply && !values("force").is_empty() {
            causes.push(Cause::forbidden(
                "force",
                "may not be specified for non-apply patch",
            ));
        }
        if apply && manager.is_empty() {
            causes.push(Cause::required(
                "fieldManager",
                "is required for apply patch",
            ));
        }
    }
    if manager.len() > validation::FIELD_MANAGER_MAX_BYTES {
        causes.push(Cause {
            reason: "FieldValueTooLong".into(),
            message: format!(
                "Too long: must have at most {} bytes",
                validation::FIELD_MANAGER_MAX_BYTES
            ),
            field: "fieldManager".into(),
        });
    }
    for (i, c) in manager.char_indices() {
        if !is_printable(c) {
            causes.push(Cause::invalid(
                "fieldManager",
                manager,
                &format!("invalid character U+{:04X} (at position {i})", u32::from(c)),
            ));
        }
    }
    let dry_run = values("dryRun");
    if dry_run.iter().any(|d| *d != "All") {
        let listed: Vec<String> = dry_run.iter().map(|d| format!("{d:?}")).collect();
        causes.push(Cause {
            reason: "FieldValueNotSupported".into(),
            message: format!(
                "Unsupported value: []string{{{}}}: supported values: \"All\"",
                listed.join(", ")
            ),
            field: "dryRun".into(),
        });
    }
    if causes.is_empty() {
        return Ok(());
    }
    let options = match kind {
        WriteOptions::Create => "CreateOptions",
        WriteOptions::Update => "UpdateOptions",
        WriteOptions::Patch(_) => "PatchOptions",
    };
    Err(ApiError::Invalid(
        Subject::new("meta.k8s.io", options, ""),
        causes,
    ))
}

/// The options of a list (and of a delete-collection).
pub(super) fn list_query(q: &HashMap<String, String>) -> Result<ListQuery, ApiError> {
    let labels = LabelSelector::parse(q.get("labelSelector").map_or("", String::as_str))?;
    let fields = FieldSelector::parse(q.get("fieldSelector").map_or("", String::as_str))?;
    let limit: Option<usize> = match q.get("limit") {
        Some(l) => Some(
            l.parse()
                .map_err(|_| ApiError::BadRequest(format!("invalid limit {l:?}")))?,
        ),
        None => None,
    };
    let continue_token = q.get("continue").filter(|c| !c.is_empty()).cloned();
    let at = read_options(q, false)
        .limited(limit.is_some_and(|l| l > 0))
        .read_at()?;
    // `resourceVersion=0` (not Exact, not continued) is served from the
    // real server's watch cache, which has no pages: `limit` is ignored
    // and the whole list comes at once, without a continue token.
    let from_cache = q.get("resourceVersion").is_some_and(|rv| rv == "0")
        && continue_token.is_none()
        && q.get("resourceVersionMatch").is_none_or(|m| m != "Exact");
    let limit = if from_cache { None } else { limit };
    Ok(ListQuery {
        labels,
        fields,
        limit,
        continue_token,
        at,
    })
}

/// The options of `q` that decide the revision of a read.
pub(super) fn read_options(q: &HashMap<String, String>, watch: bool) -> ReadOptions<'_> {
    ReadOptions {
        resource_version: q.get("resourceVersion").map(String::as_str),
        resource_version_match: q.get("resourceVersionMatch").map(String::as_str),
        limited: false,
        continued: q.get("continue").is_some_and(|c| !c.is_empty()),
        watch,
        send_initial_events: q.contains_key("sendInitialEvents"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_decoding() {
        let pairs = url_decode_pairs("labelSelector=app%3Dweb%2Ctier+in+%28a%29&watch=1&x");
        assert_eq!(
            pairs[0],
            ("labelSelector".into(), "app=web,tier in (a)".into())
        );
        assert_eq!(pairs[1], ("watch".into(), "1".into()));
        assert_eq!(pairs[2], ("x".into(), String::new()));
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
    }
}
