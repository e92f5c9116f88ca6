//! The review resources: `TokenReview` (`authentication.k8s.io/v1`),
//! `SubjectAccessReview` and the self reviews (`authorization.k8s.io/v1`,
//! see [`crate::self_reviews`]). They are not stored:
//! a `POST` of one is answered with the object and its computed `status`
//! (see [`crate::authn`] and [`crate::authz`]); nothing else is served on
//! them. This module holds what both share: which paths they are, their
//! discovery entries, and decoding a request body as the real server does.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::status::ApiError;

/// One create-only review resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Review {
    /// API group.
    pub group: &'static str,
    /// API version.
    pub version: &'static str,
    /// Plural resource name.
    pub plural: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Whether it is posted in a namespace (`LocalSubjectAccessReview`).
    pub namespaced: bool,
}

impl Review {
    /// `group/version`.
    #[must_use]
    pub fn api_version(&self) -> String {
        format!("{}/{}", self.group, self.version)
    }
}

/// `tokenreviews.authentication.k8s.io/v1`.
pub const TOKEN_REVIEW: Review = Review {
    group: "authentication.k8s.io",
    version: "v1",
    plural: "tokenreviews",
    kind: "TokenReview",
    namespaced: false,
};

/// `subjectaccessreviews.authorization.k8s.io/v1`.
pub const SUBJECT_ACCESS_REVIEW: Review = Review {
    group: "authorization.k8s.io",
    version: "v1",
    plural: "subjectaccessreviews",
    kind: "SubjectAccessReview",
    namespaced: false,
};

/// `localsubjectaccessreviews.authorization.k8s.io/v1`: a
/// `SubjectAccessReview` in one namespace, posted there.
pub const LOCAL_SUBJECT_ACCESS_REVIEW: Review = Review {
    group: "authorization.k8s.io",
    version: "v1",
    plural: "localsubjectaccessreviews",
    kind: "LocalSubjectAccessReview",
    namespaced: true,
};

/// `selfsubjectaccessreviews.authorization.k8s.io/v1`.
pub const SELF_SUBJECT_ACCESS_REVIEW: Review = Review {
    group: "authorization.k8s.io",
    version: "v1",
    plural: "selfsubjectaccessreviews",
    kind: "SelfSubjectAccessReview",
    namespaced: false,
};

/// `selfsubjectrulesreviews.authorization.k8s.io/v1`.
pub const SELF_SUBJECT_RULES_REVIEW: Review = Review {
    group: "authorization.k8s.io",
    version: "v1",
    plural: "selfsubjectrulesreviews",
    kind: "SelfSubjectRulesReview",
    namespaced: false,
};

/// Every review resource served, in the order `/apis` lists their groups
/// (as kube-apiserver 1.20 does: authentication, then authorization) and
/// discovery their resources (by name).
pub const REVIEWS: [Review; 5] = [
    TOKEN_REVIEW,
    LOCAL_SUBJECT_ACCESS_REVIEW,
    SELF_SUBJECT_ACCESS_REVIEW,
    SELF_SUBJECT_RULES_REVIEW,
    SUBJECT_ACCESS_REVIEW,
];

/// The review resource at `group/version/plural`, if one is served there.
#[must_use]
pub fn find(group: &str, version: &str, plural: &str) -> Option<Review> {
    REVIEWS
        .into_iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The review resources of `group/version`.
#[must_use]
pub fn of(group: &str, version: &str) -> Vec<Review> {
    REVIEWS
        .into_iter()
        .filter(|r| r.group == group && r.version == version)
        .collect()
}

/// The discovery entry of a review resource, as kube-apiserver 1.20 lists
/// it (no singular name, no storage version hash: nothing is stored).
#[must_use]
pub fn discovery_entry(r: &Review) -> Value {
    json!({
        "name": r.plural,
        "singularName": "",
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": ["create"],
    })
}

/// The aggregated discovery (`apidiscovery.k8s.io/v2`) entry of a review
/// resource.
#[must_use]
pub fn aggregated_entry(r: &Review) -> Value {
    json!({
        "resource": r.plural,
        "responseKind": {"group": r.group, "version": r.version, "kind": r.kind},
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": "",
        "verbs": ["create"],
    })
}

/// Decodes a review's request body as the real server does: a body that
/// is not a JSON object is `400` (`the object provided is unrecognized`),
/// another `apiVersion` or `kind` is `400`, and so is a field of the wrong
/// type (`T` is the kind's k8s-openapi type; its decoder's words differ from
/// Go's). `apiVersion` and `kind` may be left out. Returns the body (with
/// `apiVersion` and `kind` set) and its typed form.
///
/// # Errors
/// [`ApiError::BadRequest`] as above.
pub fn decode<T: DeserializeOwned>(r: &Review, bytes: &[u8]) -> Result<(Value, T), ApiError> {
    let unrecognized = |why: String| {
        ApiError::BadRequest(format!(
            "the object provided is unrecognized (must be of type {}): couldn't get version/kind; json parse error: {why}",
            r.kind
        ))
    };
    let mut body: Value = serde_json::from_slice(bytes).map_err(|e| {
        let shown = if bytes.is_empty() {
            "<empty>".to_string()
        } else {
            String::from_utf8_lossy(bytes).into_owned()
        };
        unrecognized(format!("{e} ({shown})"))
    })?;
    let Some(object) = body.as_object_mut() else {
        return Err(unrecognized(format!(
            "the body is not a JSON object ({body})"
        )));
    };
    let text = |o: &Map<String, Value>, k: &str| {
        o.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let (api_version, kind) = (text(object, "apiVersion"), text(object, "kind"));
    if !api_version.is_empty() && api_version != r.api_version() {
        return Err(ApiError::BadRequest(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({})",
            r.api_version()
        )));
    }
    if !kind.is_empty() && kind != r.kind {
        return Err(ApiError::BadRequest(format!(
            "{kind} in version {:?} cannot be handled as a {}: no kind {kind:?} is registered for version {:?}",
            r.version,
            r.kind,
            r.api_version()
        )));
    }
    object.insert("apiVersion".into(), json!(r.api_version()));
    object.insert("kind".into(), json!(r.kind));
    let typed = serde_json::from_value::<T>(body.clone()).map_err(|e| {
        ApiError::BadRequest(format!(
            "{kind} in version {:?} cannot be handled as a {kind}: {e}",
            r.version,
            kind = r.kind
        ))
    })?;
    Ok((body, typed))
}

/// The answer's `metadata`: what the body's metadata holds of `ObjectMeta`,
/// with `creationTimestamp: null` (the real server encodes the zero time
/// of an object never stored so).
#[must_use]
pub fn answer_metadata(body: &Value) -> Value {
    let mut meta = body
        .get("metadata")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    meta.retain(|k, v| {
        !matches!(
            k.as_str(),
            "creationTimestamp" | "managedFields" | "deletionTimestamp"
        ) && !is_empty(v)
    });
    meta.insert("creationTimestamp".into(), Value::Null);
    Value::Object(meta)
}

/// Whether Go's `omitempty` leaves `v` out: `null`, `""`, `[]`, `{}`,
/// `false` and `0`.
#[must_use]
pub fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::authentication::v1::TokenReview;

    #[test]
    fn bodies_are_decoded_as_the_real_server_does() {
        let (body, typed) =
            decode::<TokenReview>(&TOKEN_REVIEW, br#"{"spec": {"token": "t"}}"#).unwrap();
        assert_eq!(body["apiVersion"], "authentication.k8s.io/v1");
        assert_eq!(typed.spec.token.as_deref(), Some("t"));
        for (bad, start) in [
            (&b""[..], "the object provided is unrecognized"),
            (b"{", "the object provided is unrecognized"),
            (b"[]", "the object provided is unrecognized"),
            (
                br#"{"apiVersion": "authentication.k8s.io/v1beta1"}"#,
                "the API version in the data",
            ),
            (br#"{"kind": "ConfigMap"}"#, "ConfigMap in version"),
            (br#"{"spec": {"token": 5}}"#, "TokenReview in version"),
        ] {
            let e = decode::<TokenReview>(&TOKEN_REVIEW, bad).unwrap_err();
            assert_eq!(e.code().as_u16(), 400);
            assert!(e.to_string().starts_with(start), "{e}");
        }
    }

    #[test]
    fn paths_and_metadata() {
        assert_eq!(
            find("authorization.k8s.io", "v1", "subjectaccessreviews"),
            Some(SUBJECT_ACCESS_REVIEW)
        );
        assert_eq!(find("authorization.k8s.io", "v1", "other"), None);
        assert_eq!(of("authentication.k8s.io", "v1"), vec![TOKEN_REVIEW]);
        let meta = answer_metadata(&json!({"metadata": {"name": "x", "labels": {}}}));
        assert_eq!(meta, json!({"name": "x", "creationTimestamp": null}));
    }
}
