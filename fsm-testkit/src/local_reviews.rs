//! `LocalSubjectAccessReview` (`authorization.k8s.io/v1`): a
//! `SubjectAccessReview` posted in a namespace
//! (`POST /apis/authorization.k8s.io/v1/namespaces/NS/localsubjectaccessreviews`),
//! for resources in that namespace only. Validated and answered as
//! kube-apiserver 1.20 does: its spec as a subject access review's; its
//! metadata empty but for the namespace; `spec.resourceAttributes.namespace`
//! equal to `metadata.namespace`; no `nonResourceAttributes` (each `422`);
//! then `metadata.namespace` equal to the request's namespace (`400`).
//! Nothing is stored.

use k8s_openapi::api::authorization::v1::LocalSubjectAccessReview;
use serde_json::Value;

use crate::authz::{
    access_review_answer, decide, invalid_unless_empty, non_resource_cause, spec_causes,
};
use crate::reviews::{self, LOCAL_SUBJECT_ACCESS_REVIEW};
use crate::status::{ApiError, Cause};
use crate::store::Store;

/// Answers a `LocalSubjectAccessReview` posted in `namespace` (the
/// request body): the review with its computed `status`.
///
/// # Errors
/// `400` for a body that does not decode or a review of another
/// namespace than the request's; `422` as described in the module.
pub fn review(store: &Store, namespace: &str, bytes: &[u8]) -> Result<Value, ApiError> {
    let (body, typed) =
        reviews::decode::<LocalSubjectAccessReview>(&LOCAL_SUBJECT_ACCESS_REVIEW, bytes)?;
    let spec = &typed.spec;
    let own_namespace = typed.metadata.namespace.clone().unwrap_or_default();
    let mut causes = spec_causes(spec);
    causes.extend(metadata_cause(&body));
    if let Some(attributes) = &spec.resource_attributes {
        let asked = attributes.namespace.clone().unwrap_or_default();
        if asked != own_namespace {
            causes.push(Cause::invalid(
                "spec.resourceAttributes.namespace",
                &asked,
                "must match metadata.namespace",
            ));
        }
    }
    if let Some(n) = &spec.non_resource_attributes {
        causes.push(non_resource_cause(n, "disallowed on this kind of request"));
    }
    invalid_unless_empty(causes)?;
    if own_namespace != namespace {
        return Err(ApiError::BadRequest(format!(
            "spec.resourceAttributes.namespace must match namespace: {namespace}"
        )));
    }
    let status = decide(store, spec)?;
    Ok(access_review_answer(
        &LOCAL_SUBJECT_ACCESS_REVIEW,
        &body,
        status,
    ))
}

/// The cause of a review whose metadata has more than its namespace.
fn metadata_cause(body: &Value) -> Option<Cause> {
    let metadata = reviews::answer_metadata(body);
    let mut others = metadata.as_object().cloned().unwrap_or_default();
    others.remove("namespace");
    others.remove("creationTimestamp");
    (!others.is_empty()).then(|| Cause {
        reason: "FieldValueInvalid".into(),
        message: format!(
            "Invalid value: v1.ObjectMeta{{{metadata}}}: must be empty except for namespace"
        ),
        field: "metadata".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lsar(metadata: Value, spec: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({"apiVersion": "authorization.k8s.io/v1",
            "kind": "LocalSubjectAccessReview", "metadata": metadata, "spec": spec}))
        .unwrap_or_default()
    }

    fn fields(result: Result<Value, ApiError>) -> Vec<String> {
        match result {
            Err(ApiError::Invalid(_, causes)) => causes.into_iter().map(|c| c.field).collect(),
            other => panic!("not a 422: {other:?}"),
        }
    }

    #[test]
    fn a_review_in_its_namespace_is_answered() {
        let store = Store::new(100, 16);
        let answer = review(
            &store,
            "dc1",
            &lsar(
                json!({"namespace": "dc1"}),
                json!({"user": "alice", "resourceAttributes": {"namespace": "dc1", "verb": "get", "resource": "pods"}}),
            ),
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(answer["kind"], "LocalSubjectAccessReview");
        assert_eq!(answer["metadata"]["namespace"], "dc1");
        assert_eq!(answer["status"]["allowed"], false);
    }

    #[test]
    fn its_namespaces_must_agree_and_it_takes_no_paths() {
        let store = Store::new(100, 16);
        let pods = |ns: Option<&str>| {
            let mut a = json!({"verb": "get", "resource": "pods"});
            if let Some(ns) = ns {
                a["namespace"] = json!(ns);
            }
            json!({"user": "alice", "resourceAttributes": a})
        };
        // No namespace anywhere: valid, then not this request's.
        let bare = review(&store, "dc1", &lsar(json!({}), pods(None)));
        assert!(
            matches!(&bare, Err(ApiError::BadRequest(m)) if m == "spec.resourceAttributes.namespace must match namespace: dc1"),
            "{bare:?}"
        );
        assert_eq!(
            fields(review(
                &store,
                "dc1",
                &lsar(json!({"namespace": "dc1"}), pods(None))
            )),
            ["spec.resourceAttributes.namespace"]
        );
        assert_eq!(
            fields(review(
                &store,
                "dc1",
                &lsar(
                    json!({"namespace": "dc1", "name": "x"}),
                    json!({"resourceAttributes": {"verb": "get"}})
                )
            )),
            ["spec.user", "metadata", "spec.resourceAttributes.namespace"]
        );
        assert_eq!(
            fields(review(
                &store,
                "dc1",
                &lsar(
                    json!({"namespace": "dc1"}),
                    json!({"user": "a", "nonResourceAttributes": {"path": "/x", "verb": "get"}})
                )
            )),
            ["spec.nonResourceAttributes"]
        );
    }
}
