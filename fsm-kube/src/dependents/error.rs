//! Why a desired set could not be built, and why converging or tearing it
//! down could not run.

use fsm_core::{Classify, ErrorClass};

use super::report::Convergence;

/// Why [`DesiredSetBuilder::build`](super::DesiredSetBuilder::build)
/// refused a set. Each variant names the dependents at fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SetError {
    /// Two dependents have the same key.
    #[error("two dependents have the key `{0}`")]
    DuplicateKey(String),
    /// A key cannot be a label value (at most 63 characters of
    /// `[A-Za-z0-9_.-]`, beginning and ending with a letter or digit): the
    /// key labels the dependent's objects.
    #[error(
        "dependent key `{0}` is not a valid label value (1-63 of [A-Za-z0-9_.-], alphanumeric at both ends)"
    )]
    InvalidKey(String),
    /// `depends_on` names a key the set does not have.
    #[error("dependent `{key}` depends on `{missing}`, which is not in the set")]
    UnknownDependency {
        /// The dependent whose `depends_on` is wrong.
        key: String,
        /// The key it names.
        missing: String,
    },
    /// The `depends_on` relations form a cycle (the keys in order, the
    /// first repeated at the end).
    #[error("dependents form a cycle: {}", .0.join(" -> "))]
    Cycle(Vec<String>),
    /// Two dependents (or two members of a family) name the same object.
    #[error("dependents `{first}` and `{second}` both name {object}")]
    SameObject {
        /// The first dependent naming it.
        first: String,
        /// The second.
        second: String,
        /// The object: kind, namespace and name.
        object: String,
    },
    /// A desired object has no `metadata.name`.
    #[error("an object of dependent `{0}` has no metadata.name")]
    Unnamed(String),
    /// An [ignore path](super::Dependent::ignore) is malformed or names
    /// what cannot be ignored.
    #[error("dependent `{key}`: ignore path `{path}` is invalid: {reason}")]
    InvalidIgnorePath {
        /// The dependent.
        key: String,
        /// The path as given.
        path: String,
        /// Why it is invalid.
        reason: String,
    },
    /// A desired object could not be encoded as JSON.
    #[error("an object of dependent `{key}` could not be encoded: {message}")]
    Encode {
        /// The dependent.
        key: String,
        /// serde's message.
        message: String,
    },
}

/// Why a read of a secondary object failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// [`Reads::get`](super::Reads::get) found no object of that name.
    #[error("{object} does not exist")]
    Missing {
        /// The object, `Kind namespace/name`.
        object: String,
    },
    /// The server could not be asked (unavailable, refused the read).
    #[error("{object} could not be read")]
    Api {
        /// The object, `Kind namespace/name`.
        object: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The object exists but does not read as the type asked for.
    #[error("{object} could not be decoded: {message}")]
    Decode {
        /// The object, `Kind namespace/name`.
        object: String,
        /// serde's message.
        message: String,
    },
}

impl fsm_core::Classify for ReadError {
    fn class(&self) -> fsm_core::ErrorClass {
        match self {
            ReadError::Api { source, .. } => crate::classify::classify_kube_error(source),
            // Someone may create it, or fix it: looked at again under the
            // state's (or the reconciler's) retry.
            ReadError::Missing { .. } | ReadError::Decode { .. } => fsm_core::ErrorClass::RETRYABLE,
        }
    }
}

/// Why an async desired function of a
/// [`DependentsReconciler`](super::DependentsReconciler) gave no set: `?`
/// converts both a read and a set that does not build.
#[derive(Debug, thiserror::Error)]
pub enum DesiredError {
    /// A read failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The set did not build.
    #[error(transparent)]
    Set(#[from] SetError),
    /// Anything else the function reports, with its message.
    #[error("{0}")]
    Other(String),
}

impl DesiredError {
    /// An error of the desired function's own, with `message`.
    pub fn other(message: impl std::fmt::Display) -> Self {
        DesiredError::Other(message.to_string())
    }
}

impl fsm_core::Classify for DesiredError {
    fn class(&self) -> fsm_core::ErrorClass {
        match self {
            DesiredError::Read(e) => e.class(),
            DesiredError::Set(_) => fsm_core::ErrorClass::Permanent,
            DesiredError::Other(_) => fsm_core::ErrorClass::RETRYABLE,
        }
    }
}

/// Why [`converge`](super::converge) or [`teardown`](super::teardown) could
/// not run, or (from [`converge_state`](super::converge_state)) why a
/// dependent failed. A dependent the server refuses is not an error of
/// `converge`: it is reported as failed in the [`Convergence`].
#[derive(Debug, thiserror::Error)]
pub enum DependentsError {
    /// The step has no [`DependentsRuntime`](super::DependentsRuntime): the
    /// engine was not built by [`ReconcilerBuilder`](crate::ReconcilerBuilder)
    /// (install one with `Engine::with_extension` or
    /// `Harness::with_extension`).
    #[error(
        "no dependents runtime is installed on this engine (ReconcilerBuilder installs one; in tests, Harness::with_extension)"
    )]
    NoRuntime,
    /// The owner cannot own objects: it has no name or UID yet (it was not
    /// read from the API server).
    #[error("the owner has no {0}: only an object read from the API server can own dependents")]
    Owner(&'static str),
    /// The set could not be built (from a
    /// [`DependentsReconciler`](super::DependentsReconciler)'s function).
    #[error("the desired set is invalid")]
    Set(#[source] SetError),
    /// The server could not be asked about a dependent (unavailable,
    /// overloaded, unreachable): nothing is wrong with the dependent; try
    /// again.
    #[error("dependent `{key}` ({object}) could not be reconciled")]
    Api {
        /// The dependent.
        key: String,
        /// The object, `Kind namespace/name`.
        object: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The `DependentsReady` condition could not be written (by a
    /// [`DependentsReconciler`](super::DependentsReconciler)).
    #[error("the DependentsReady condition could not be written")]
    Condition(#[source] kube::Error),
    /// Listing dependents to prune (or tearing down) failed.
    #[error("could not list the {kind} dependents to prune")]
    List {
        /// The kind listed.
        kind: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// A dependent failed (from [`converge_state`](super::converge_state)):
    /// the convergence says which and the server's message.
    #[error("dependents failed: {}", .0.failure_summary())]
    Failed(Box<Convergence>),
    /// A converge state's [`then`](super::DesiredSet::then) built another
    /// state than the `next` its attribute declares.
    #[error("the converge state declares next({declared}) but its `then` built {built}")]
    WrongNext {
        /// The state the attribute's `next(..)` names.
        declared: &'static str,
        /// The state `then` built.
        built: &'static str,
    },
    /// The finalizer of a [`DependentsReconciler`](super::DependentsReconciler)
    /// with [`teardown_on_delete`](super::DependentsReconciler::teardown_on_delete)
    /// could not be added or removed.
    #[error("the dependents' finalizer could not be written")]
    Finalizer(#[source] kube::Error),
    /// An async desired function of a
    /// [`DependentsReconciler`](super::DependentsReconciler) gave no set.
    #[error("the desired set could not be computed")]
    Desired(#[source] DesiredError),
}

impl Classify for DependentsError {
    fn class(&self) -> ErrorClass {
        match self {
            DependentsError::NoRuntime
            | DependentsError::Owner(_)
            | DependentsError::Set(_)
            | DependentsError::WrongNext { .. } => ErrorClass::Permanent,
            DependentsError::Desired(e) => e.class(),
            DependentsError::List { source, .. }
            | DependentsError::Api { source, .. }
            | DependentsError::Condition(source)
            | DependentsError::Finalizer(source) => crate::classify::classify_kube_error(source),
            // A refused object or a failed Job may be fixed by a new spec
            // or by a person: retried under the state's policy.
            DependentsError::Failed(_) => ErrorClass::RETRYABLE,
        }
    }
}

/// A handler returning [`HandlerError`](crate::HandlerError) can use `?` on
/// [`converge`](super::converge) and friends, and a machine with
/// `error = HandlerError` can declare `converge` states: the error keeps
/// its [class](Classify::class) (API failures as the API's error is
/// classed, failed dependents retried under the state's policy, an invalid
/// set permanent).
impl From<DependentsError> for crate::classify::HandlerError {
    fn from(error: DependentsError) -> Self {
        let class = error.class();
        crate::classify::HandlerError::with_class(error, class)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handler_error_keeps_the_dependents_errors_class() {
        let invalid: crate::classify::HandlerError =
            DependentsError::Set(SetError::DuplicateKey("web".into())).into();
        assert_eq!(invalid.class(), ErrorClass::Permanent);
        let invalid: DesiredError = SetError::DuplicateKey("a".into()).into();
        assert_eq!(invalid.class(), ErrorClass::Permanent);
        let missing: crate::classify::HandlerError = DependentsError::NoRuntime.into();
        assert_eq!(missing.class(), ErrorClass::Permanent);
        assert!(missing.to_string().contains("runtime"), "{missing}");
    }
}
