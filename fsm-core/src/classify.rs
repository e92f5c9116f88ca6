//! How handler errors are retried: retryable by default, permanent or
//! retried without spending an attempt on request.

use std::time::Duration;

/// What the engine does with a handler error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorClass {
    /// Try again under the state's retry policy. With `retry_after`, the next
    /// attempt waits exactly that long instead of the policy's backoff (the
    /// attempt still counts towards `max_attempts`).
    Retryable {
        /// An explicit delay before the next attempt, overriding the backoff.
        retry_after: Option<Duration>,
    },
    /// Do not try again: the workflow fails and its compensation chain runs.
    Permanent,
    /// The world around the handler is briefly unavailable (an API server
    /// answering 5xx or 429, a timeout, a dropped connection), what is
    /// often called a *transient* error: try again
    /// with the state's backoff, but **without spending an attempt**, so a
    /// flaky network never exhausts a state's retries nor starts a
    /// compensation that undoes healthy work. Only the state's `timeout`
    /// (when it has one) ends such a wait; the record's `lastError` and
    /// the object's conditions show it meanwhile. With `retry_after`, the
    /// next try waits exactly that long. In compensation and cleanup,
    /// which have no timeout and must end, it spends an attempt like
    /// [`ErrorClass::Retryable`].
    RetryWithoutAttempt {
        /// An explicit delay before the next try, overriding the backoff.
        retry_after: Option<Duration>,
    },
}

impl ErrorClass {
    /// Retry under the state's policy.
    pub const RETRYABLE: ErrorClass = ErrorClass::Retryable { retry_after: None };

    /// Retry after exactly `delay`.
    pub const fn retry_after(delay: Duration) -> ErrorClass {
        ErrorClass::Retryable {
            retry_after: Some(delay),
        }
    }

    /// Try again under the state's backoff without spending an attempt.
    pub const RETRY_WITHOUT_ATTEMPT: ErrorClass =
        ErrorClass::RetryWithoutAttempt { retry_after: None };

    /// Try again after exactly `delay`, without spending an attempt.
    pub const fn retry_without_attempt_after(delay: Duration) -> ErrorClass {
        ErrorClass::RetryWithoutAttempt {
            retry_after: Some(delay),
        }
    }
}

/// Classifies a handler's error type.
///
/// Every error is retryable unless its type says otherwise, so an empty
/// `impl Classify for MyError {}` is a complete implementation.
///
/// The orphan rule allows the impl only in the crate of the error type (or
/// of this trait): an error type of another crate, such as `kube::Error`,
/// is wrapped in an error enum of the operator's own. For Kubernetes
/// errors, `fsm_kube::HandlerError` is such a type, ready-made: `?`
/// converts a `kube::Error` into it, classed by
/// `fsm_kube::classify_kube_error`.
///
/// ```
/// use fsm_core::{Classify, ErrorClass};
///
/// #[derive(Debug, thiserror::Error)]
/// enum AppError {
///     #[error("cloud API unavailable")]
///     Unavailable,
///     #[error("quota exceeded")]
///     Quota,
/// }
///
/// impl Classify for AppError {
///     fn class(&self) -> ErrorClass {
///         match self {
///             AppError::Unavailable => ErrorClass::RETRYABLE,
///             AppError::Quota => ErrorClass::Permanent,
///         }
///     }
/// }
/// assert_eq!(AppError::Quota.class(), ErrorClass::Permanent);
/// ```
#[diagnostic::on_unimplemented(
    note = "add `impl fsm_core::Classify for {Self} {{}}` to retry every error, or override `class` to mark some permanent",
    note = "for an error type of another crate (which the orphan rule forbids implementing `Classify` for), wrap it in an error enum of your own",
    note = "for Kubernetes errors (`kube::Error`), use `error = fsm_kube::HandlerError`: `?` converts a `kube::Error` into it, classed by `fsm_kube::classify_kube_error`"
)]
pub trait Classify {
    /// The class of this error; retryable unless overridden.
    fn class(&self) -> ErrorClass {
        ErrorClass::RETRYABLE
    }
}

impl Classify for std::convert::Infallible {}
impl Classify for std::io::Error {}
impl Classify for serde_json::Error {
    fn class(&self) -> ErrorClass {
        // Data that does not decode will not decode on the next attempt.
        ErrorClass::Permanent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Plain;
    impl Classify for Plain {}

    #[test]
    fn errors_are_retryable_by_default() {
        assert_eq!(Plain.class(), ErrorClass::RETRYABLE);
    }

    #[test]
    fn retry_after_carries_the_delay() {
        assert_eq!(
            ErrorClass::retry_after(Duration::from_secs(3)),
            ErrorClass::Retryable {
                retry_after: Some(Duration::from_secs(3))
            }
        );
    }
}
