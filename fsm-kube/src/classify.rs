//! How a Kubernetes API error met inside a handler should be retried.

use std::time::Duration;

use fsm_core::ErrorClass;

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
