//! Why a version set or a conversion fails.

/// Why an object could not be converted. Its message names the object
/// (`namespace/name`, or `name` for a cluster-scoped one) and the
/// versions; the user's conversion error is its source.
#[derive(Debug, thiserror::Error)]
pub enum ConversionError {
    /// The object is not a JSON object with a string `apiVersion`.
    #[error("{object}: not an object with an apiVersion")]
    NotAnObject {
        /// The object's name, as far as it could be read.
        object: String,
    },
    /// The object's, or the desired, version is none this operator knows.
    #[error("{object}: {api_version} is not a version of {kind} this operator knows ({known})")]
    UnknownVersion {
        /// The object's name.
        object: String,
        /// The version asked for or found.
        api_version: String,
        /// The resource's kind.
        kind: String,
        /// The versions it knows, comma-separated.
        known: String,
    },
    /// The object does not decode as its version's type.
    #[error("{object}: cannot read it as {api_version}")]
    Decode {
        /// The object's name.
        object: String,
        /// The version it was read as.
        api_version: String,
        /// serde's error.
        #[source]
        source: serde_json::Error,
    },
    /// The user's conversion (`TryFrom`) refused the object.
    #[error("{object}: converting {from} to {to} failed")]
    Convert {
        /// The object's name.
        object: String,
        /// The version converted from.
        from: String,
        /// The version converted to.
        to: String,
        /// The conversion's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The converted object does not serialize.
    #[error("{object}: cannot write it as {api_version}")]
    Encode {
        /// The object's name.
        object: String,
        /// The version it was written as.
        api_version: String,
        /// serde's error.
        #[source]
        source: serde_json::Error,
    },
}

/// Why the versions cannot make one CRD.
#[derive(Debug, thiserror::Error)]
pub enum VersionsError {
    /// More than one version says it is the storage version.
    #[error("more than one version is declared the storage version: {0}")]
    SeveralStorageVersions(String),
    /// The same version is declared twice.
    #[error("version {0} is declared more than once")]
    Duplicate(String),
    /// A spoke's group, kind or scope is not the hub's (kube's merge).
    #[error("the versions' CRDs do not merge")]
    Merge(#[source] kube::core::crd::MergeError),
}
