//! Why a subcommand fails.

use std::net::SocketAddr;

use super::StoreKind;
use super::rbac::InvalidRule;
use crate::records::ReadError;

/// Why a subcommand failed. [`Operator::main`](super::Operator::main) prints it and exits with
/// status 1, or 3 for [`Error::CannotRun`] and
/// [`Error::StoredVersionsDropped`] ([`Error::exit_status`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No usable Kubernetes configuration (kubeconfig or in-cluster).
    #[error("no usable Kubernetes configuration")]
    Config(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The API server answered with an error, or could not be reached.
    #[error("Kubernetes API request failed")]
    Kube(#[source] kube::Error),
    /// `status`, `preflight`: a record could not be read (the object or
    /// its record is missing, the record does not decode, or the store
    /// keeps it where nothing outside the operator reads it).
    #[error(transparent)]
    Read(#[from] ReadError),
    /// `crd --printer-columns` for an operator whose records are not in
    /// the object's status, where printer columns read.
    #[error(
        "printer columns read .status.fsm, but the operator keeps its records in the {0:?} store"
    )]
    PrinterColumnsNeedStatusStore(StoreKind),
    /// The declared versions do not make one CRD.
    #[error(transparent)]
    Versions(#[from] crate::versions::VersionsError),
    /// `crd` for an operator serving several versions, without a webhook
    /// for the API server to convert them with.
    #[error(
        "the CRD serves {versions}, which the API server converts by calling the operator's \
         conversion webhook: give `crd --webhook-url https://HOST:PORT/convert --webhook-ca-file \
         CA.pem` (an operator run outside the cluster), or use `manifests` (its Service, \
         Secret and CA)"
    )]
    ConversionWebhookNeeded {
        /// The versions, comma-separated.
        versions: String,
    },
    /// A conversion webhook flag for an operator that declares one
    /// version only.
    #[error(
        "the operator serves one version of its resource ({version}): there is no conversion \
         for a webhook to serve"
    )]
    NoConversion {
        /// The one version.
        version: String,
    },
    /// `crd --webhook-ca-file` cannot be read.
    #[error("{}: cannot read the webhook's CA certificate", path.display())]
    WebhookCa {
        /// The file.
        path: std::path::PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The conversion webhook cannot start (its certificate, its address)
    /// or failed.
    #[error(transparent)]
    Webhook(#[from] crate::http::webhook::WebhookError),
    /// A declared RBAC rule is refused.
    #[error(transparent)]
    InvalidRule(#[from] InvalidRule),
    /// YAML output failed.
    #[error("YAML serialization failed")]
    Yaml(#[source] serde_yaml_ng::Error),
    /// JSON output failed.
    #[error("JSON serialization failed")]
    Json(#[source] serde_json::Error),
    /// Writing the output failed.
    #[error("writing the output failed")]
    Output(#[source] std::io::Error),
    /// The metrics endpoint failed (binding the address, mostly).
    #[error("metrics endpoint on {addr} failed")]
    Metrics {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        #[source]
        error: std::io::Error,
    },
    /// The web view's address cannot be bound.
    #[error("web view on {addr} failed")]
    View {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        #[source]
        error: std::io::Error,
    },
    /// A sharding setting cannot work (a name too long for a label value).
    #[error(transparent)]
    Shard(#[from] crate::shard::ShardError),
    /// Leader election failed.
    #[error("leader election failed")]
    LeaderElection(#[source] crate::leader::LeaderError),
    /// [`RunContext::reconciler_with_store`](super::RunContext::reconciler_with_store) was given a store other than
    /// the one the operator declares ([`Operator::new`](super::Operator::new)): `status` would
    /// look for records where there are none, and `rbac` would grant the
    /// wrong permissions.
    #[error(
        "the operator declares the {declared:?} store, but its reconciler was given {given} ({})",
        match given_kind {
            Some(kind) => format!("the {kind:?} store"),
            None => "a store the command line cannot describe".to_owned(),
        }
    )]
    StoreMismatch {
        /// The store [`Operator::new`](super::Operator::new) was given.
        declared: StoreKind,
        /// The kind of the store given, `None` when no [`StoreKind`]
        /// describes it.
        given_kind: Option<StoreKind>,
        /// The given store's type.
        given: &'static str,
    },
    /// `preflight`: this build cannot run the records of some existing
    /// objects (written by a newer version of the machine, or unreadable);
    /// the report says which. Exit status 3.
    #[error(
        "{cannot} stored record(s) cannot be run by this build ({machine} version {version}); \
         upgrading to it would stall their objects"
    )]
    CannotRun {
        /// How many.
        cannot: usize,
        /// The machine's name.
        machine: &'static str,
        /// This build's machine version.
        version: u32,
    },
    /// `preflight`: this build's CRD drops versions at which objects may
    /// still be stored (the CRD's `status.storedVersions`); the API server
    /// would refuse the CRD. `migrate-storage` first. Exit status 3.
    #[error(
        "this build's CRD drops {} of {crd}, at which objects may still be stored; \
         run `migrate-storage` with the build now running first",
        versions.join(", ")
    )]
    StoredVersionsDropped {
        /// The CRD's name.
        crd: String,
        /// The versions dropped while stored.
        versions: Vec<String>,
    },
    /// `migrate-storage` could not finish; what it did is in its output,
    /// and `status.storedVersions` is left as it was.
    #[error("storage migration of {crd} stopped: {reason}")]
    Migration {
        /// The CRD's name.
        crd: String,
        /// Why.
        reason: String,
    },
    /// `manifests --admission cel` for an operator whose records are not
    /// in the object's status, where CEL reads the state.
    #[error(
        "--admission cel reads the state from .status.fsm, but the operator keeps its records \
         in the {0:?} store: use --admission webhook"
    )]
    AdmissionPolicyNeedsStatusStore(StoreKind),
    /// The operator's main function returned an error.
    #[error("the controller failed")]
    Controller(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl Error {
    /// The exit status of a command that failed with this error: 3 for
    /// [`Error::CannotRun`] and [`Error::StoredVersionsDropped`] (a
    /// pre-flight check that found records this build cannot run, or
    /// stored versions its CRD drops), 1 for every other failure (2 is clap's, for a
    /// usage error).
    pub fn exit_status(&self) -> u8 {
        match self {
            Error::CannotRun { .. } | Error::StoredVersionsDropped { .. } => 3,
            _ => 1,
        }
    }
}

/// An error an operator's main function returns ([`RunOutcome`](super::RunOutcome)).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
