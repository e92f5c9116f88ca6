//! How a Kubernetes API error met inside a handler should be retried, and
//! a handler error type that classes them out of the box.

use std::time::Duration;

use fsm_core::{AuthorityLost, CheckpointError, Classify, ErrorClass};

/// The class of a Kubernetes API error a handler returns, for its
/// [`Classify`](fsm_core::Classify) implementation:
///
/// | error | class |
/// | --- | --- |
/// | `429 Too Many Requests` | retry without attempt, after the server's `retryAfterSeconds` when it gives one |
/// | `5xx` (the server or etcd failing, a timeout) | retry without attempt |
/// | `409 Conflict` (someone wrote in between) | retry without attempt: read again and retry |
/// | no answer at all (connection refused or reset, TLS, timeout) | retry without attempt |
/// | other API answers (`404`, `403`, `422`, `409 AlreadyExists`…) | retryable: spends an attempt, as it may need a person |
/// | the request could not even be built, or its answer not read | retryable |
///
/// These transient errors spend no attempt (see [`ErrorClass::RetryWithoutAttempt`]): a
/// flaky API server never exhausts a state's retries, and so never starts
/// a compensation that undoes healthy work.
///
/// ```
/// use fsm_core::{Classify, ErrorClass};
/// use fsm_kube::classify_kube_error;
///
/// #[derive(Debug, thiserror::Error)]
/// enum MyError {
///     #[error("Kubernetes API call failed")]
///     Kube(#[from] kube::Error),
///     #[error("the spec names no image")]
///     NoImage,
/// }
///
/// impl Classify for MyError {
///     fn class(&self) -> ErrorClass {
///         match self {
///             MyError::Kube(e) => classify_kube_error(e),
///             MyError::NoImage => ErrorClass::Permanent,
///         }
///     }
/// }
///
/// let busy = kube::Error::Api(Box::new(kube::core::Status::failure("etcd is slow", "Timeout").with_code(504)));
/// assert_eq!(MyError::Kube(busy).class(), ErrorClass::RETRY_WITHOUT_ATTEMPT);
/// ```
pub fn classify_kube_error(error: &kube::Error) -> ErrorClass {
    match error {
        kube::Error::Api(status) => match status.code {
            429 => match status.details.as_ref().map(|d| d.retry_after_seconds) {
                Some(secs) if secs > 0 => {
                    ErrorClass::retry_without_attempt_after(Duration::from_secs(u64::from(secs)))
                }
                _ => ErrorClass::RETRY_WITHOUT_ATTEMPT,
            },
            500..=599 => ErrorClass::RETRY_WITHOUT_ATTEMPT,
            409 if status.reason == "Conflict" => ErrorClass::RETRY_WITHOUT_ATTEMPT,
            _ => ErrorClass::RETRYABLE,
        },
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => {
            ErrorClass::RETRY_WITHOUT_ATTEMPT
        }
        _ => ErrorClass::RETRYABLE,
    }
}

/// A ready-made handler error for operators whose handlers call the
/// Kubernetes API: `?` converts a [`kube::Error`] (classed by
/// [`classify_kube_error`]: a failing or busy API server is retried without
/// spending an attempt), a [`CheckpointError`] and an [`AuthorityLost`];
/// any other error goes in with [`HandlerError::other`] (retryable),
/// [`HandlerError::permanent`] or [`HandlerError::with_class`].
///
/// `kube::Error` cannot be a machine's `error` itself: the machine's error
/// must implement [`Classify`], and the orphan rule forbids implementing a
/// trait of `fsm_core` for a type of `kube` outside those crates. An
/// operator with its own error enum wraps `kube::Error` in it and calls
/// [`classify_kube_error`] from its `Classify` impl instead.
///
/// ```
/// use fsm_kube::prelude::*;
/// use k8s_openapi::api::core::v1::ConfigMap;
///
/// #[derive(OperatorFsm, Clone, Debug, Serialize, Deserialize)]
/// #[fsm(resource = ConfigMap, context = kube::Client, error = HandlerError)]
/// enum Mirror {
///     #[fsm(initial, handler = copy, next(Done))]
///     Copying,
///     #[fsm(final, ready)]
///     Done,
///     #[fsm(failed)]
///     Failed,
/// }
///
/// async fn copy(cx: &mut Step<'_, Mirror>) -> Result<Transition<Mirror>, HandlerError> {
///     let source = cx.resource();
///     let Some(namespace) = source.metadata.namespace.as_deref() else {
///         return Err(HandlerError::permanent("the ConfigMap has no namespace"));
///     };
///     let api = kube::Api::<ConfigMap>::namespaced(cx.context().clone(), namespace);
///     let mut copy = ConfigMap { data: source.data.clone(), ..ConfigMap::default() };
///     copy.metadata.name = source.metadata.name.as_ref().map(|n| format!("{n}-copy"));
///     // A kube::Error converts with `?`; a 503 is retried without an attempt.
///     api.create(&kube::api::PostParams::default(), &copy).await?;
///     Ok(Transition::next(Mirror::Done))
/// }
/// ```
#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    /// A Kubernetes API call failed; classed by [`classify_kube_error`].
    #[error("Kubernetes API call failed")]
    Kube(#[from] kube::Error),
    /// A checkpoint could not be committed; retryable.
    #[error("the checkpoint could not be committed")]
    Checkpoint(#[from] CheckpointError),
    /// This process may no longer act for the object (its Lease expired);
    /// retryable (the engine commits nothing of the attempt).
    #[error(transparent)]
    AuthorityLost(#[from] AuthorityLost),
    /// Any other error, with the class it was given.
    #[error("{source}")]
    Other {
        /// The error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
        /// How the engine retries it.
        class: ErrorClass,
    },
}

impl HandlerError {
    /// Any other error, retried under the state's policy.
    pub fn other(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self::with_class(error, ErrorClass::RETRYABLE)
    }

    /// Any other error, not retried: the workflow fails (and compensates).
    pub fn permanent(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self::with_class(error, ErrorClass::Permanent)
    }

    /// Any other error, retried as `class` says.
    pub fn with_class(
        error: impl Into<Box<dyn std::error::Error + Send + Sync>>,
        class: ErrorClass,
    ) -> Self {
        HandlerError::Other {
            source: error.into(),
            class,
        }
    }
}

impl Classify for HandlerError {
    fn class(&self) -> ErrorClass {
        match self {
            HandlerError::Kube(e) => classify_kube_error(e),
            HandlerError::Checkpoint(_) | HandlerError::AuthorityLost(_) => ErrorClass::RETRYABLE,
            HandlerError::Other { class, .. } => *class,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn api(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(Box::new(
            Status::failure("from the server", reason).with_code(code),
        ))
    }

    #[test]
    fn a_failing_or_busy_server_is_retried_without_an_attempt() {
        for (code, reason) in [
            (500, "InternalError"),
            (503, "ServiceUnavailable"),
            (504, "Timeout"),
            (429, "TooManyRequests"),
            (409, "Conflict"),
        ] {
            assert_eq!(
                classify_kube_error(&api(code, reason)),
                ErrorClass::RETRY_WITHOUT_ATTEMPT,
                "{code} {reason}"
            );
        }
    }

    #[test]
    fn too_many_requests_waits_as_long_as_the_server_asks() {
        let mut status = Status::failure("slow down", "TooManyRequests").with_code(429);
        status.details =
            Some(serde_json::from_value(serde_json::json!({ "retryAfterSeconds": 7 })).unwrap());
        assert_eq!(
            classify_kube_error(&kube::Error::Api(Box::new(status))),
            ErrorClass::retry_without_attempt_after(Duration::from_secs(7))
        );
    }

    #[test]
    fn answers_that_may_need_a_person_spend_an_attempt() {
        for (code, reason) in [
            (404, "NotFound"),
            (403, "Forbidden"),
            (422, "Invalid"),
            (409, "AlreadyExists"),
            (400, "BadRequest"),
        ] {
            assert_eq!(
                classify_kube_error(&api(code, reason)),
                ErrorClass::RETRYABLE,
                "{code} {reason}"
            );
        }
    }

    /// A machine whose one handler calls "the API", which answers with the
    /// status code the resource names.
    #[derive(fsm_core::OperatorFsm, Clone, Debug, serde::Serialize, serde::Deserialize)]
    #[fsm(resource = u16, error = HandlerError)]
    enum Probe {
        #[fsm(initial, handler = call_api, next(Done))]
        Calling,
        #[fsm(final)]
        Done,
        #[fsm(failed)]
        Failed,
    }

    async fn call_api(
        cx: &mut fsm_core::Step<'_, Probe>,
    ) -> Result<fsm_core::Transition<Probe>, HandlerError> {
        let code = *cx.resource();
        let answer: Result<(), kube::Error> = match code {
            200 => Ok(()),
            _ => Err(api(code, "from the probe")),
        };
        answer?;
        Ok(fsm_core::Transition::next(Probe::Done))
    }

    #[tokio::test]
    async fn a_kube_error_converts_with_the_question_mark_and_keeps_its_class() {
        for (code, class) in [
            (503, ErrorClass::RETRY_WITHOUT_ATTEMPT),
            (404, ErrorClass::RETRYABLE),
        ] {
            let error = match fsm_core::Harness::<Probe>::new(code, ())
                .run_handler()
                .await
            {
                Err(fsm_core::RunHandlerError::Handler(e)) => e,
                other => panic!("{code}: the handler's own error was expected, not {other:?}"),
            };
            assert!(matches!(error, HandlerError::Kube(_)), "{code}: {error:?}");
            assert_eq!(error.class(), class, "{code}");
        }
        let done = fsm_core::Harness::<Probe>::new(200, ()).run_handler().await;
        assert!(matches!(done, Ok(fsm_core::Transition::Next(Probe::Done))));
    }

    #[test]
    fn other_handler_errors_carry_the_class_they_are_given() {
        let io = std::io::Error::other("disk full");
        assert_eq!(HandlerError::other(io).class(), ErrorClass::RETRYABLE);
        let permanent = HandlerError::permanent("no image");
        assert_eq!(permanent.class(), ErrorClass::Permanent);
        assert_eq!(permanent.to_string(), "no image");
        let later = ErrorClass::retry_without_attempt_after(Duration::from_secs(2));
        assert_eq!(HandlerError::with_class("busy", later).class(), later);
        let checkpoint = HandlerError::from(CheckpointError::Unavailable);
        assert_eq!(checkpoint.class(), ErrorClass::RETRYABLE);
    }

    #[test]
    fn no_answer_at_all_is_retried_without_an_attempt() {
        let refused = kube::Error::Service(Box::new(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "connection refused",
        )));
        assert_eq!(
            classify_kube_error(&refused),
            ErrorClass::RETRY_WITHOUT_ATTEMPT
        );
        let unreadable =
            kube::Error::SerdeError(serde_json::from_str::<serde_json::Value>("{").unwrap_err());
        assert_eq!(classify_kube_error(&unreadable), ErrorClass::RETRYABLE);
    }
}
