//! Why a `kubectl fsm` command fails.

use fsm_kube::fsm_core::CommandListError;
use fsm_kube::records::COMMANDS_ANNOTATION;

/// Why a command failed; `main` prints it with its causes and exits 1.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reaching the cluster failed (the operator CLI's errors: no
    /// configuration…).
    #[error(transparent)]
    Cli(#[from] fsm_kube::cli::Error),
    /// Reading a record failed: not found, no record, a record that does
    /// not decode, a store whose records live in the operator's memory.
    #[error(transparent)]
    Read(#[from] fsm_kube::records::ReadError),
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
        annotation = fsm_kube::records::MACHINE_ANNOTATION
    )]
    NotPublished(String),
    /// The published machine does not parse.
    #[error("the CRD {crd} has an unreadable {annotation} annotation", annotation = fsm_kube::records::MACHINE_ANNOTATION)]
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
    /// The API server refused a request with 403: the person may not do it.
    #[error(
        "forbidden: you may not {verb} {resource}{}: {message} \
         (`kubectl auth can-i {verb} {resource}{}` checks; sending commands needs get and patch on the custom resource)",
        namespace.as_ref().map(|ns| format!(" in namespace {ns}")).unwrap_or_default(),
        namespace.as_ref().map(|ns| format!(" -n {ns}")).unwrap_or_default()
    )]
    Forbidden {
        /// The verb refused (`patch`, `get`, `list`).
        verb: &'static str,
        /// The resource, as `plural.group` (`chores.example.io`).
        resource: String,
        /// The namespace of the request, if any.
        namespace: Option<String>,
        /// What the server said.
        message: String,
    },
    /// The words given do not name an object.
    #[error("{0:?} names no object: give RESOURCE/NAME or RESOURCE NAME")]
    NoObject(String),
    /// The object does not exist.
    #[error("{0}: not found")]
    ObjectNotFound(String),
    /// A command was not sent: it cannot be valid, or cannot be added.
    #[error("nothing was sent to {object}")]
    NotSent {
        /// The object, as `namespace/name`.
        object: String,
        /// Why.
        #[source]
        why: SendRefusal,
    },
    /// The object changed between each read and write, more times than the
    /// plugin tries.
    #[error(
        "nothing was sent to {object}: it changed between read and write {attempts} times in a row (409 Conflict); try again"
    )]
    KeptChanging {
        /// The object, as `namespace/name`.
        object: String,
        /// How many times the plugin tried.
        attempts: u32,
    },
    /// `--wait` with records the plugin cannot read.
    #[error("--wait cannot tell when the command is taken: {0}")]
    CannotWait(#[source] fsm_kube::records::ReadError),
    /// The operator took the command and refused it.
    #[error("command {seq} ({command}) to {object} was refused: {reason}")]
    Refused {
        /// The command's number.
        seq: u64,
        /// The command, as text.
        command: String,
        /// The object, as `namespace/name`.
        object: String,
        /// The operator's reason.
        reason: String,
    },
    /// `--wait` ran out before the operator took the command.
    #[error(
        "command {seq} ({command}) to {object} was not taken within {waited}: the record has taken commands up to #{taken}. \
         Is the operator running? The command stays in the object's annotation and is taken on the operator's next reconcile"
    )]
    WaitTimedOut {
        /// The command's number.
        seq: u64,
        /// The command, as text.
        command: String,
        /// The object, as `namespace/name`.
        object: String,
        /// How long the plugin waited, for people (`5s`).
        waited: String,
        /// The record's `commandSeq` when the wait ended.
        taken: u64,
    },
}

impl Error {
    /// `error` from a `verb` request on `resource` (`plural.group`) in
    /// `namespace`: [`Error::Forbidden`] for a 403, else [`Error::Kube`].
    pub fn from_request(
        error: kube::Error,
        verb: &'static str,
        resource: &str,
        namespace: Option<&str>,
    ) -> Self {
        match error {
            kube::Error::Api(status) if status.is_forbidden() => Error::Forbidden {
                verb,
                resource: resource.to_owned(),
                namespace: namespace.map(str::to_owned),
                message: status.message.clone(),
            },
            other => Error::Kube(other),
        }
    }
}

/// Why a command is not sent.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SendRefusal {
    /// `goto` to a state the published machine does not have.
    #[error("machine {machine} has no state {state:?} (its states: {})", states.join(", "))]
    UnknownState {
        /// The machine's name.
        machine: String,
        /// The state asked for.
        state: String,
        /// The machine's states.
        states: Vec<String>,
    },
    /// `goto` to a failed state, which the operator always refuses.
    #[error("{0} is a failed state: goto moves to a state the workflow can go on from")]
    FailedState(String),
    /// A signal no state of the machine declares (known only when the
    /// published machine lists signals: it does since signals are drawn).
    #[error("no state of machine {machine} declares signal {signal:?} (the signals: {})", declared.join(", "))]
    UndeclaredSignal {
        /// The machine's name.
        machine: String,
        /// The signal asked for.
        signal: String,
        /// The declared signals, as `NAME (From → To)`.
        declared: Vec<String>,
    },
    /// An empty state or signal name.
    #[error("the {0} name is empty")]
    EmptyName(&'static str),
    /// The annotation holds something that is not a command list; the
    /// operator takes none of it.
    #[error(
        "its {COMMANDS_ANNOTATION} annotation is not a command list ({0}), so the operator takes none of it: fix it, or remove it with `kubectl annotate RESOURCE NAME {COMMANDS_ANNOTATION}-`"
    )]
    Unreadable(String),
    /// The object already carries as many commands not yet taken as it
    /// may.
    #[error(
        "it already carries {pending} commands the operator has not taken, the most it may carry: is the operator running? Send again once it has taken them"
    )]
    TooMany {
        /// How many commands are pending.
        pending: usize,
    },
    /// The new list would be refused by the operator (two commands with
    /// one number that the operator has not taken).
    #[error("the operator would refuse the list: {0}")]
    Invalid(#[source] CommandListError),
}
