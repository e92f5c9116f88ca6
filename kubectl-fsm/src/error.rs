//! Why a `kubectl fsm` command fails.

/// Why a command failed; `main` prints it with its causes and exits 1.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reaching the cluster or reading a record failed (the operator CLI's
    /// errors: no configuration, not found, no record, memory store…).
    #[error(transparent)]
    Cli(#[from] fsm_kube::cli::Error),
    /// The API server answered with an error, or could not be reached.
    #[error("Kubernetes API request failed")]
    Kube(#[source] kube::Error),
    /// No CRD serves the resource the command names.
    #[error("the server has no custom resource named {0:?}")]
    UnknownResource(String),
    /// Several CRDs answer to the name.
    #[error("{name:?} names several custom resources ({}): add the group", candidates.join(", "))]
    AmbiguousResource {
        /// The name given.
        name: String,
        /// The CRDs it matches.
        candidates: Vec<String>,
    },
    /// The CRD carries no published machine.
    #[error(
        "the CRD {0} carries no {annotation} annotation: apply the CRD that the operator's `crd` command prints",
        annotation = fsm_kube::cli::published::MACHINE_ANNOTATION
    )]
    NotPublished(String),
    /// The published machine does not parse.
    #[error("the CRD {crd} has an unreadable {annotation} annotation", annotation = fsm_kube::cli::published::MACHINE_ANNOTATION)]
    BadPublication {
        /// The CRD's name.
        crd: String,
        /// Why it does not parse.
        #[source]
        error: serde_json::Error,
    },
    /// The CRD serves no version.
    #[error("the CRD {0} serves no version")]
    NoVersion(String),
    /// JSON output failed.
    #[error("JSON serialization failed")]
    Json(#[source] serde_json::Error),
    /// Writing the output failed.
    #[error("writing the output failed")]
    Output(#[source] std::io::Error),
}
