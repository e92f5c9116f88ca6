//! Errors as the real API server reports them: a `Status` object.
//!
//! Every failure of a request is an [`ApiError`]; its [`ApiError::to_status`]
//! builds the `{"kind":"Status","apiVersion":"v1","status":"Failure",…}`
//! document with the `reason`, `code`, `message` and `details` that
//! `kube::Error::Api` (an `ErrorResponse`) and `kubectl` expect.

use axum::response::{IntoResponse, Response};
use http::{StatusCode, header};
use serde_json::{Value, json};

/// One field-level cause of an [`ApiError::Invalid`] error (`details.causes`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// Machine-readable reason, e.g. `FieldValueInvalid`, `FieldValueRequired`.
    pub reason: String,
    /// Human-readable explanation, e.g. `Invalid value: "A": must be lowercase`.
    pub message: String,
    /// The path of the offending field, e.g. `metadata.name`.
    pub field: String,
}

impl Cause {
    /// A `FieldValueInvalid` cause for `field` holding `value`.
    #[must_use]
    pub fn invalid(field: &str, value: &str, why: &str) -> Self {
        Self {
            reason: "FieldValueInvalid".into(),
            message: format!("Invalid value: {value:?}: {why}"),
            field: field.into(),
        }
    }

    /// A `FieldValueRequired` cause for a missing `field`.
    #[must_use]
    pub fn required(field: &str, why: &str) -> Self {
        Self {
            reason: "FieldValueRequired".into(),
            message: format!("Required value: {why}"),
            field: field.into(),
        }
    }

    /// A `FieldValueForbidden` cause for `field`.
    #[must_use]
    pub fn forbidden(field: &str, why: &str) -> Self {
        Self {
            reason: "FieldValueForbidden".into(),
            message: format!("Forbidden: {why}"),
            field: field.into(),
        }
    }
}

/// The identity of the resource an error is about, as the real server
/// names it in messages (`deployments.apps "web"`) and in `details`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    /// API group; empty for the core group.
    pub group: String,
    /// Plural resource name (`configmaps`) or, for `Invalid`, the kind.
    pub kind: String,
    /// Object name.
    pub name: String,
}

impl Subject {
    /// A subject for `resource` (plural) of `group` named `name`.
    #[must_use]
    pub fn new(group: &str, kind: &str, name: &str) -> Self {
        Self {
            group: group.into(),
            kind: kind.into(),
            name: name.into(),
        }
    }

    fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }
}

/// A failed request, carrying what the real server would answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// 404: the object does not exist (`details.kind` is the plural resource).
    #[error("{} {:?} not found", .0.qualified(), .0.name)]
    NotFound(Subject),
    /// 404: the path names no resource this server serves.
    #[error("the server could not find the requested resource")]
    UnknownResource,
    /// 409: an object with this name already exists.
    #[error("{} {:?} already exists", .0.qualified(), .0.name)]
    AlreadyExists(Subject),
    /// 409: a stale `resourceVersion` or a failed precondition.
    #[error("Operation cannot be fulfilled on {} {:?}: {}", .0.qualified(), .0.name, .1)]
    Conflict(Subject, String),
    /// 422: the object fails validation (`details.kind` is the kind).
    #[error("{} {:?} is invalid: {}", .0.qualified(), .0.name, causes_text(.1))]
    Invalid(Subject, Vec<Cause>),
    /// 400: the request itself is malformed.
    #[error("{0}")]
    BadRequest(String),
    /// 403: the request is understood but refused (e.g. a terminating namespace).
    #[error("{1}")]
    Forbidden(Subject, String),
    /// 403 with causes: `<resource> "<name>" is forbidden: <message>`, e.g.
    /// a create in a terminating namespace (cause `NamespaceTerminating`,
    /// which client-go's `HasStatusCause` looks for).
    #[error("{} {:?} is forbidden: {}", .0.qualified(), .0.name, .1)]
    ForbiddenBecause(Subject, String, Vec<Cause>),
    /// 405: the verb is not allowed on this path.
    #[error("the server does not allow this method on the requested resource")]
    MethodNotAllowed,
    /// 410 (reason `Expired`): the requested resourceVersion is older than the kept history.
    #[error("{0}")]
    Gone(String),
    /// 415: a content type (e.g. a patch type) this server does not accept.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 422 (reason `Invalid`, no subject): a patch that cannot be applied,
    /// e.g. a JSON patch whose `test` fails. 1.20 answers Go's
    /// `NewGenericServerResponse`: a generic message, empty details; the
    /// text here (why the patch failed) is not sent.
    #[error("the server rejected our request due to an error in our request")]
    Unprocessable(String),
    /// 409 (reason `Conflict`): a server-side apply that would change fields
    /// other managers own; the causes name them (`FieldManagerConflict`).
    #[error("{0}")]
    ApplyConflict(String, Vec<Cause>),
    /// 500: a bug in the server.
    #[error("Internal error occurred: {0}")]
    Internal(String),
    /// 413 (reason `RequestEntityTooLarge`): the request body is over the
    /// size the server reads.
    #[error("{0}")]
    RequestEntityTooLarge(String),
    /// 500 with no reason, as the real server passes on an error it has
    /// no status for: a storage error (etcd refusing an object too large),
    /// a strategic merge patch's unknown `$patch` directive.
    #[error("{0}")]
    Storage(String),
    /// 504 (reason `Timeout`): a read at a `resourceVersion` (requested,
    /// current) the server has not reached after waiting for it, with the
    /// real server's `ResourceVersionTooLarge` cause and `retryAfterSeconds`.
    #[error("Timeout: Too large resource version: {0}, current: {1}")]
    ResourceVersionTooLarge(u64, u64),
    /// 410 (reason `Expired`) of a continue token older than the history,
    /// carrying in `metadata.continue` a token that goes on with the rest of
    /// the list at the current revision (an inconsistent continue).
    #[error(
        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list."
    )]
    ContinueExpired(String),
    /// 422 (reason `Invalid`) of the request's options, e.g.
    /// `ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: …`.
    #[error("{}.meta.k8s.io \"\" is invalid: {}", .0, causes_text(.1))]
    InvalidOptions(&'static str, Vec<Cause>),
    /// Any HTTP `code` with its own `message`, the reason being the code's
    /// (`ServiceUnavailable` for 503, …; a code that is not one is 500), as
    /// faults injected by tests answer. 429 and 503 tell the client to
    /// retry after a second (`Retry-After`, `details.retryAfterSeconds`).
    #[error("{message}")]
    Other {
        /// The HTTP code (and `Status.code`).
        code: u16,
        /// The `Status.message`.
        message: String,
        /// What the request was about (`details`), if anything.
        subject: Option<Subject>,
    },
    /// A `Status` answered as given, with its `code` (an admission
    /// webhook's denial: its reason, details and message as 1.20 passes
    /// them on).
    #[error("{}", .0["message"].as_str().unwrap_or_default())]
    Verbatim(Value),
}

fn causes_text(causes: &[Cause]) -> String {
    // Go's `ErrorList.ToAggregate` lists a message once.
    let mut parts: Vec<String> = Vec::new();
    for c in causes {
        let part = format!("{}: {}", c.field, c.message);
        if !parts.contains(&part) {
            parts.push(part);
        }
    }
    if parts.len() == 1 {
        parts.join("")
    } else {
        format!("[{}]", parts.join(", "))
    }
}

impl ApiError {
    /// The HTTP status code of this error.
    #[must_use]
    pub fn code(&self) -> StatusCode {
        match self {
            Self::NotFound(_) | Self::UnknownResource => StatusCode::NOT_FOUND,
            Self::AlreadyExists(_) | Self::Conflict(..) | Self::ApplyConflict(..) => {
                StatusCode::CONFLICT
            }
            Self::Invalid(..) | Self::Unprocessable(_) | Self::InvalidOptions(..) => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Forbidden(..) | Self::ForbiddenBecause(..) => StatusCode::FORBIDDEN,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::Gone(_) | Self::ContinueExpired(_) => StatusCode::GONE,
            Self::ResourceVersionTooLarge(..) => StatusCode::GATEWAY_TIMEOUT,
            Self::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::Internal(_) | Self::Storage(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Self::RequestEntityTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Other { code, .. } => {
                StatusCode::from_u16(*code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
            }
            Self::Verbatim(status) => status["code"]
                .as_u64()
                .and_then(|c| u16::try_from(c).ok())
                .and_then(|c| StatusCode::from_u16(c).ok())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        }
    }

    /// The `reason` field of the Status (`NotFound`, `Conflict`, `Expired`,
    /// …); empty for a storage error, whose Status has none.
    #[must_use]
    pub fn reason(&self) -> &'static str {
        match self {
            Self::NotFound(_) | Self::UnknownResource => "NotFound",
            Self::AlreadyExists(_) => "AlreadyExists",
            Self::Conflict(..) | Self::ApplyConflict(..) => "Conflict",
            Self::Invalid(..) | Self::Unprocessable(_) | Self::InvalidOptions(..) => "Invalid",
            Self::BadRequest(_) => "BadRequest",
            Self::Forbidden(..) | Self::ForbiddenBecause(..) => "Forbidden",
            Self::MethodNotAllowed => "MethodNotAllowed",
            Self::Gone(_) | Self::ContinueExpired(_) => "Expired",
            Self::ResourceVersionTooLarge(..) => "Timeout",
            Self::UnsupportedMediaType(_) => "UnsupportedMediaType",
            Self::Internal(_) => "InternalError",
            Self::RequestEntityTooLarge(_) => "RequestEntityTooLarge",
            Self::Storage(_) | Self::Verbatim(_) => "",
            Self::Other { .. } => reason_of(self.code()),
        }
    }

    /// Whether the client is told to retry after a second (`Retry-After`).
    fn retry_after(&self) -> bool {
        match self {
            Self::ResourceVersionTooLarge(..) => true,
            Self::Other { .. } => matches!(
                self.code(),
                StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
            ),
            _ => false,
        }
    }

    /// The `Status` document of this error.
    #[must_use]
    pub fn to_status(&self) -> Value {
        if let Self::Verbatim(status) = self {
            return status.clone();
        }
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": self.reason(),
            "code": self.code().as_u16(),
        });
        if self.reason().is_empty()
            && let Some(o) = status.as_object_mut()
        {
            o.remove("reason");
        }
        let details = match self {
            Self::NotFound(s)
            | Self::AlreadyExists(s)
            | Self::Conflict(s, _)
            | Self::Forbidden(s, _) => Some(subject_details(s)),
            Self::Invalid(s, causes) | Self::ForbiddenBecause(s, _, causes) => {
                let mut d = subject_details(s);
                d["causes"] = causes
                    .iter()
                    .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                    .collect();
                Some(d)
            }
            Self::ApplyConflict(_, causes) => Some(json!({
                "causes": causes
                    .iter()
                    .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                    .collect::<Vec<_>>(),
            })),
            Self::UnknownResource | Self::Unprocessable(_) => Some(json!({})),
            // Go's `NewInternalError`: the error, as the one cause.
            Self::Internal(message) => Some(json!({"causes": [{"message": message}]})),
            Self::InvalidOptions(kind, causes) => Some(json!({
                "group": "meta.k8s.io",
                "kind": kind,
                "causes": causes
                    .iter()
                    .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                    .collect::<Vec<_>>(),
            })),
            Self::ResourceVersionTooLarge(..) => Some(json!({
                "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                "retryAfterSeconds": 1,
            })),
            Self::Other { subject, .. } => {
                let mut d = subject.as_ref().map(subject_details);
                if self.retry_after() {
                    d.get_or_insert_with(|| json!({}))["retryAfterSeconds"] = json!(1);
                }
                d
            }
            _ => None,
        };
        if let Self::ContinueExpired(token) = self {
            status["metadata"]["continue"] = json!(token);
        }
        if let Some(d) = details {
            status["details"] = d;
        }
        status
    }
}

/// The `Status` of success a DELETE answers for kinds that do not return
/// the deleted object.
#[must_use]
pub fn deleted(group: &str, resource: &str, name: &str, uid: &str) -> Value {
    let mut details = subject_details(&Subject::new(group, resource, name));
    details["uid"] = json!(uid);
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    })
}

/// The reason the real server gives a `Status` with HTTP `code`.
fn reason_of(code: StatusCode) -> &'static str {
    match code.as_u16() {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        406 => "NotAcceptable",
        409 => "Conflict",
        410 => "Expired",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "Unknown",
    }
}

fn subject_details(s: &Subject) -> Value {
    // Empty fields are left out, as Go's `omitempty` does.
    let mut d = json!({});
    if !s.name.is_empty() {
        d["name"] = json!(s.name);
    }
    if !s.kind.is_empty() {
        d["kind"] = json!(s.kind);
    }
    if !s.group.is_empty() {
        d["group"] = json!(s.group);
    }
    d
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = self.to_status().to_string();
        let mut response = (
            self.code(),
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response();
        if self.retry_after() {
            // As the real server: clients (client-go, kube's retry policy)
            // wait this long and ask again.
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, http::HeaderValue::from_static("1"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_reads_like_the_real_server() {
        let e = ApiError::NotFound(Subject::new("apps", "deployments", "web"));
        let s = e.to_status();
        assert_eq!(s["message"], r#"deployments.apps "web" not found"#);
        assert_eq!(s["reason"], "NotFound");
        assert_eq!(s["code"], 404);
        assert_eq!(s["details"]["group"], "apps");
        assert_eq!(s["details"]["kind"], "deployments");
        assert_eq!(s["kind"], "Status");
        assert_eq!(s["status"], "Failure");
    }

    #[test]
    fn invalid_lists_causes() {
        let e = ApiError::Invalid(
            Subject::new("", "ConfigMap", "Bad"),
            vec![Cause::invalid("metadata.name", "Bad", "must be lowercase")],
        );
        let s = e.to_status();
        assert_eq!(s["code"], 422);
        assert_eq!(
            s["message"],
            r#"ConfigMap "Bad" is invalid: metadata.name: Invalid value: "Bad": must be lowercase"#
        );
        assert_eq!(s["details"]["causes"][0]["field"], "metadata.name");
        assert!(s["details"].get("group").is_none());
    }

    #[test]
    fn invalid_names_the_kind_with_its_group() {
        let e = ApiError::Invalid(
            Subject::new("example.com", "Widget", "held"),
            vec![Cause::forbidden("metadata.finalizers", "no")],
        );
        assert!(
            e.to_string()
                .starts_with(r#"Widget.example.com "held" is invalid"#)
        );
        assert_eq!(e.to_status()["details"]["kind"], "Widget");
    }

    #[test]
    fn gone_is_expired_410() {
        let s = ApiError::Gone("too old resource version: 1 (5)".into()).to_status();
        assert_eq!(s["code"], 410);
        assert_eq!(s["reason"], "Expired");
        assert!(s.get("details").is_none());
    }

    #[test]
    fn other_codes_take_their_reason_and_503_asks_to_retry() {
        let e = ApiError::Other {
            code: 503,
            message: "injected".into(),
            subject: Some(Subject::new("apps", "deployments", "")),
        };
        let s = e.to_status();
        assert_eq!(
            (&s["code"], &s["reason"], &s["message"]),
            (
                &json!(503),
                &json!("ServiceUnavailable"),
                &json!("injected")
            )
        );
        assert_eq!(
            s["details"],
            json!({"group": "apps", "kind": "deployments", "retryAfterSeconds": 1})
        );
        let response = e.into_response();
        assert_eq!(response.headers()[header::RETRY_AFTER], "1");

        let odd = ApiError::Other {
            code: 42,
            message: "odd".into(),
            subject: None,
        };
        assert_eq!(odd.code(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(odd.to_status()["reason"], "InternalError");
        assert!(odd.to_status().get("details").is_none());
        assert!(
            odd.into_response()
                .headers()
                .get(header::RETRY_AFTER)
                .is_none()
        );
    }
}
