//! Continue tokens of paged lists: the revision of the first page and the
//! last key served, hex-encoded so they are opaque and URL-safe; and the
//! revision a read is served at (`resourceVersion`, `resourceVersionMatch`),
//! validated as the real server validates `ListOptions`.

use crate::status::{ApiError, Cause};

/// Which revision a list (or get) is served at.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ReadAt {
    /// No `resourceVersion` (or `0`): the newest.
    #[default]
    Latest,
    /// `resourceVersion=N` (or `resourceVersionMatch=NotOlderThan`): the
    /// newest, once the server has reached N (else 504 after a wait).
    NotOlderThan(u64),
    /// `resourceVersionMatch=Exact&resourceVersion=N`, or the legacy
    /// `resourceVersion=N&limit=M`: the snapshot at N (410 once N has left
    /// the history, as etcd answers for a compacted revision).
    Exact(u64),
}

/// The options of a read that decide its revision, as the query gave them.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadOptions<'a> {
    /// `resourceVersion`.
    pub resource_version: Option<&'a str>,
    /// `resourceVersionMatch`.
    pub resource_version_match: Option<&'a str>,
    /// `limit` > 0.
    pub limited: bool,
    /// A non-empty `continue`.
    pub continued: bool,
    /// `watch=true`.
    pub watch: bool,
    /// `sendInitialEvents` is present.
    pub send_initial_events: bool,
}

const MATCH: &str = "resourceVersionMatch";

impl ReadOptions<'_> {
    /// With `limit` > 0 or not.
    #[must_use]
    pub fn limited(self, limited: bool) -> Self {
        Self { limited, ..self }
    }

    /// The `ListOptions` validation of the real server (422 `Invalid` with
    /// its causes), then the revision to read at.
    ///
    /// # Errors
    /// [`ApiError::InvalidOptions`] for `resourceVersionMatch` misuse;
    /// [`ApiError::BadRequest`] for `resourceVersion` with `continue`;
    /// [`ApiError::Storage`] (500, no reason, as the real storage layer
    /// answers) for a `resourceVersion` that is not a number.
    pub fn read_at(&self) -> Result<ReadAt, ApiError> {
        let rv = self.resource_version.unwrap_or_default();
        let matching = self.resource_version_match.unwrap_or_default();
        let mut causes = Vec::new();
        if self.watch {
            if self.send_initial_events && matching != "NotOlderThan" {
                causes.push(Cause::forbidden(
                    MATCH,
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                ));
            }
            if !matching.is_empty() {
                if !self.send_initial_events {
                    causes.push(Cause::forbidden(
                        MATCH,
                        "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                    ));
                }
                if matching != "NotOlderThan" {
                    causes.push(not_supported(matching, "\"NotOlderThan\""));
                }
                if self.continued {
                    causes.push(Cause::forbidden(
                        MATCH,
                        "resourceVersionMatch is forbidden when continue is provided",
                    ));
                }
            }
        } else {
            if !matching.is_empty() {
                if rv.is_empty() {
                    causes.push(Cause::forbidden(
                        MATCH,
                        "resourceVersionMatch is forbidden unless resourceVersion is provided",
                    ));
                }
                if self.continued {
                    causes.push(Cause::forbidden(
                        MATCH,
                        "resourceVersionMatch is forbidden when continue is provided",
                    ));
                }
                if matching != "Exact" && matching != "NotOlderThan" {
                    causes.push(not_supported(matching, "\"Exact\", \"NotOlderThan\", \"\""));
                }
                if matching == "Exact" && rv == "0" {
                    causes.push(Cause::forbidden(
                        MATCH,
                        "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                    ));
                }
            }
            if self.send_initial_events {
                causes.push(Cause::forbidden(
                    "sendInitialEvents",
                    "sendInitialEvents is forbidden for list",
                ));
            }
        }
        if !causes.is_empty() {
            return Err(ApiError::InvalidOptions("ListOptions", causes));
        }
        if rv.is_empty() {
            return Ok(ReadAt::Latest);
        }
        if self.continued && !self.watch && rv != "0" {
            return Err(ApiError::BadRequest(
                "specifying resource version is not allowed when using continue".into(),
            ));
        }
        let n = parse_resource_version(rv)?;
        Ok(match n {
            0 => ReadAt::Latest,
            n if self.watch => ReadAt::NotOlderThan(n),
            n if matching == "Exact" => ReadAt::Exact(n),
            n if matching.is_empty() && self.limited && !self.continued => ReadAt::Exact(n),
            n => ReadAt::NotOlderThan(n),
        })
    }
}

/// A `resourceVersion` as the storage layer parses it.
///
/// # Errors
/// [`ApiError::Storage`] (500, no reason), worded as the real server's.
pub fn parse_resource_version(rv: &str) -> Result<u64, ApiError> {
    rv.parse().map_err(|_| {
        ApiError::Storage(format!(
            "resourceVersion: Invalid value: {rv:?}: strconv.ParseUint: parsing {rv:?}: invalid syntax"
        ))
    })
}

fn not_supported(value: &str, supported: &str) -> Cause {
    Cause {
        reason: "FieldValueNotSupported".into(),
        message: format!("Unsupported value: {value:?}: supported values: {supported}"),
        field: MATCH.into(),
    }
}

pub(super) fn encode_continue(revision: u64, ns: &str, name: &str) -> String {
    format!("{revision}\u{0}{ns}\u{0}{name}")
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub(super) fn decode_continue(token: &str) -> Result<(u64, String, String), ApiError> {
    let bad = || {
        ApiError::BadRequest(format!(
            "invalid continue token: continue key is not valid: {token:?}"
        ))
    };
    if !token.len().is_multiple_of(2) {
        return Err(bad());
    }
    let bytes: Vec<u8> = (0..token.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(token.get(i..i + 2).unwrap_or("zz"), 16))
        .collect::<Result<_, _>>()
        .map_err(|_| bad())?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    let mut parts = text.split('\u{0}');
    let (Some(rev), Some(ns), Some(name)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad());
    };
    Ok((rev.parse().map_err(|_| bad())?, ns.into(), name.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_token_round_trips() {
        let t = encode_continue(42, "ns", "a.b");
        assert_eq!(
            decode_continue(&t).unwrap(),
            (42, "ns".into(), "a.b".into())
        );
    }

    fn at(rv: &str, matching: &str, limited: bool) -> Result<ReadAt, ApiError> {
        ReadOptions {
            resource_version: Some(rv).filter(|r| !r.is_empty()),
            resource_version_match: Some(matching).filter(|m| !m.is_empty()),
            limited,
            ..ReadOptions::default()
        }
        .read_at()
    }

    fn causes(e: ApiError) -> Vec<String> {
        match e {
            ApiError::InvalidOptions(_, causes) => causes.into_iter().map(|c| c.message).collect(),
            other => panic!("not invalid options: {other:?}"),
        }
    }

    #[test]
    fn read_positions() {
        assert_eq!(at("", "", false).unwrap(), ReadAt::Latest);
        assert_eq!(at("0", "", true).unwrap(), ReadAt::Latest);
        assert_eq!(at("7", "", false).unwrap(), ReadAt::NotOlderThan(7));
        assert_eq!(
            at("7", "", true).unwrap(),
            ReadAt::Exact(7),
            "legacy paged list"
        );
        assert_eq!(at("7", "Exact", false).unwrap(), ReadAt::Exact(7));
        assert_eq!(
            at("7", "NotOlderThan", true).unwrap(),
            ReadAt::NotOlderThan(7)
        );
        assert_eq!(at("x", "", false).unwrap_err().code(), 500);
        assert_eq!(
            causes(at("", "Exact", false).unwrap_err()),
            ["Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"]
        );
        assert_eq!(causes(at("0", "Exact", false).unwrap_err()).len(), 1);
        assert_eq!(
            causes(at("1", "Bogus", false).unwrap_err()),
            ["Unsupported value: \"Bogus\": supported values: \"Exact\", \"NotOlderThan\", \"\""]
        );
        let continued = ReadOptions {
            resource_version: Some("5"),
            continued: true,
            ..ReadOptions::default()
        };
        assert_eq!(continued.read_at().unwrap_err().code(), 400);
        let watch = ReadOptions {
            resource_version: Some("5"),
            resource_version_match: Some("NotOlderThan"),
            watch: true,
            ..ReadOptions::default()
        };
        assert_eq!(causes(watch.read_at().unwrap_err()).len(), 1);
        let streaming = ReadOptions {
            send_initial_events: true,
            ..watch
        };
        assert_eq!(streaming.read_at().unwrap(), ReadAt::NotOlderThan(5));
    }
}
