//! [`ReadError`]: why a record could not be read.

use super::record_view::Location;

/// Why an object's record could not be read from where its store keeps
/// it ([`super::record_view`]).
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The API server answered with an error, or could not be reached.
    #[error("Kubernetes API request failed")]
    Kube(#[source] kube::Error),
    /// The object does not exist.
    #[error("{0}: not found")]
    NotFound(Box<Location>),
    /// The object has no record yet (not reconciled yet).
    #[error("{0}: no record yet; has the operator reconciled it?")]
    NoRecord(Box<Location>),
    /// The record exists but cannot be decoded; the runtime has stopped
    /// reconciling the object until someone fixes it.
    #[error("{location}: the record cannot be decoded: {error}")]
    CorruptRecord {
        /// The object and where its record is.
        location: Box<Location>,
        /// What is wrong with the record.
        #[source]
        error: fsm_core::DecodeError,
    },
    /// The ephemeral store: records live in the operator's memory only.
    #[error(
        "the ephemeral store keeps records in the operator's memory; status cannot read them (the object's conditions summarize its state)"
    )]
    MemoryStore,
    /// A ConfigMap or Secret store for a cluster-scoped resource: there is
    /// no namespace to keep the record object in.
    #[error("the ConfigMap and Secret stores need a namespaced resource")]
    ClusterScopedObjectStore,
}
