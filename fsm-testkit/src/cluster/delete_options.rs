//! `DeleteOptions` as a request sends them, in its body or its query,
//! read and validated as the real server reads them.

use std::collections::HashMap;

use serde::Deserialize;

use super::DeleteOptions;
use super::gc::Propagation;
use crate::status::{ApiError, Cause, Subject};

/// `DeleteOptions` as sent (a body, or query parameters).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireOptions {
    grace_period_seconds: Option<i64>,
    #[serde(default)]
    preconditions: Option<WirePreconditions>,
    orphan_dependents: Option<bool>,
    propagation_policy: Option<String>,
    #[serde(default)]
    dry_run: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WirePreconditions {
    uid: Option<String>,
    resource_version: Option<String>,
}

/// A boolean query parameter as the real server reads it
/// (`Convert_Slice_string_To_Pointer_bool`): only `0` and `false` (any
/// case) are false, anything else (`maybe`, the empty string) is true.
fn query_bool(text: &str) -> bool {
    !(text == "0" || text.eq_ignore_ascii_case("false"))
}

impl DeleteOptions {
    /// Reads a `DeleteOptions` body (which may be empty).
    ///
    /// # Errors
    /// [`ApiError::BadRequest`] for a body that is not a `DeleteOptions`;
    /// [`ApiError::Invalid`] for options the real server refuses.
    pub fn from_body(body: &[u8]) -> Result<Self, ApiError> {
        Self::from_request(body, &HashMap::new())
    }

    /// Reads the options of a DELETE as the real server does: from the
    /// body when there is one, else from the query parameters
    /// (`propagationPolicy`, `orphanDependents`, `gracePeriodSeconds`,
    /// `dryRun`; preconditions only come in a body), then validates them.
    ///
    /// # Errors
    /// [`ApiError::BadRequest`] for a body that is not a `DeleteOptions`
    /// or a parameter that does not parse; [`ApiError::Invalid`] (kind
    /// `DeleteOptions.meta.k8s.io`) for a policy other than the three,
    /// `orphanDependents` together with `propagationPolicy`, or a `dryRun`
    /// other than `All`.
    pub fn from_request(body: &[u8], query: &HashMap<String, String>) -> Result<Self, ApiError> {
        let wire = if body.iter().all(u8::is_ascii_whitespace) {
            WireOptions {
                grace_period_seconds: match query.get("gracePeriodSeconds") {
                    Some(g) => Some(g.parse().map_err(|_| {
                        ApiError::BadRequest(format!(
                            "strconv.ParseInt: parsing {g:?}: invalid syntax"
                        ))
                    })?),
                    None => None,
                },
                preconditions: None,
                orphan_dependents: query.get("orphanDependents").map(|o| query_bool(o)),
                propagation_policy: query.get("propagationPolicy").cloned(),
                dry_run: query.get("dryRun").map(|d| vec![d.clone()]),
            }
        } else {
            serde_json::from_slice(body).map_err(|e| {
                ApiError::BadRequest(format!(
                    "DeleteOptions in version \"v1\" cannot be handled as a DeleteOptions: {e}"
                ))
            })?
        };
        let mut causes = Vec::new();
        if wire.orphan_dependents.is_some()
            && let Some(p) = &wire.propagation_policy
        {
            causes.push(Cause::invalid(
                "propagationPolicy",
                p,
                "orphanDependents and deletionPropagation cannot be both set",
            ));
        }
        let propagation = match &wire.propagation_policy {
            Some(p) => {
                let parsed = Propagation::parse(p);
                if parsed.is_none() {
                    causes.push(Cause {
                        reason: "FieldValueNotSupported".into(),
                        message: format!(
                            "Unsupported value: {p:?}: supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
                        ),
                        field: "propagationPolicy".into(),
                    });
                }
                parsed
            }
            None => match wire.orphan_dependents {
                Some(true) => Some(Propagation::Orphan),
                Some(false) => Some(Propagation::Background),
                None => None,
            },
        };
        let dry_run = wire.dry_run.unwrap_or_default();
        if dry_run.iter().any(|d| d != "All") {
            let values = dry_run
                .iter()
                .map(|d| format!("{d:?}"))
                .collect::<Vec<_>>()
                .join(", ");
            causes.push(Cause {
                reason: "FieldValueNotSupported".into(),
                message: format!(
                    "Unsupported value: []string{{{values}}}: supported values: \"All\""
                ),
                field: "dryRun".into(),
            });
        }
        if !causes.is_empty() {
            return Err(ApiError::Invalid(
                Subject::new("meta.k8s.io", "DeleteOptions", ""),
                causes,
            ));
        }
        let preconditions = wire.preconditions.unwrap_or_default();
        Ok(Self {
            uid: preconditions.uid,
            resource_version: preconditions.resource_version,
            dry_run: !dry_run.is_empty(),
            propagation,
            grace_period_seconds: wire.grace_period_seconds,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn options_from_the_query_are_validated() {
        let q = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect::<HashMap<_, _>>()
        };
        let o = DeleteOptions::from_request(
            b"",
            &q(&[("propagationPolicy", "Orphan"), ("dryRun", "All")]),
        )
        .unwrap();
        assert_eq!(o.propagation, Some(Propagation::Orphan));
        assert!(o.dry_run);
        let o = DeleteOptions::from_request(b"", &q(&[("orphanDependents", "")])).unwrap();
        assert_eq!(o.propagation, Some(Propagation::Orphan));
        let o = DeleteOptions::from_request(b"{}", &q(&[("propagationPolicy", "Bogus")])).unwrap();
        assert_eq!(o.propagation, None, "a body wins over the query");
        for bad in [
            q(&[("propagationPolicy", "Bogus")]),
            q(&[
                ("propagationPolicy", "Orphan"),
                ("orphanDependents", "false"),
            ]),
            q(&[("dryRun", "Some")]),
        ] {
            let e = DeleteOptions::from_request(b"", &bad).unwrap_err();
            assert_eq!(e.code().as_u16(), 422, "{bad:?}");
            assert_eq!(
                e.to_status()["details"],
                json!({"group": "meta.k8s.io", "kind": "DeleteOptions",
                "causes": e.to_status()["details"]["causes"]})
            );
        }
        let e = DeleteOptions::from_request(b"", &q(&[("gracePeriodSeconds", "x")])).unwrap_err();
        assert_eq!(e.code().as_u16(), 400);
    }
}
