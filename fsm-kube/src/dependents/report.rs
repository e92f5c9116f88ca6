//! What a converge or a teardown found: each dependent's state, as values.

use std::fmt::Write as _;

use super::live::{LiveDependents, LiveError};

/// The state of one dependent after a [`converge`](super::converge).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DependentState {
    /// Applied (or already as desired) and ready.
    Ready,
    /// Applied (or already as desired), not ready yet: why.
    NotReady(String),
    /// Not applied: these dependencies (keys) are not ready.
    Waiting(Vec<String>),
    /// Not applied: its reconcile precondition does not hold; left as it is.
    PreconditionUnmet,
    /// Not desired ([`Dependent::when`](super::Dependent::when) is
    /// false): not created, deleted if it existed.
    Inactive,
    /// It failed; [`DependentFailure::kind`] says how: the server refused
    /// it, it conflicts with another field manager, it exists without
    /// being owned, or its readiness says it failed (a failed Job).
    Failed(DependentFailure),
}

/// How a dependent failed: what kind of failure, and the message (the
/// object, and the server's words or the readiness rule's).
///
/// ```
/// use fsm_kube::dependents::{DependentFailure, FailureKind};
///
/// let failure = DependentFailure::new(FailureKind::Refused { code: 422 }, "Service web: field is immutable");
/// assert!(failure.is_refused());
/// assert_eq!(failure.to_string(), "Service web: field is immutable");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DependentFailure {
    kind: FailureKind,
    message: String,
}

/// The kinds of [`DependentFailure`], each with what a handler needs to
/// decide (the HTTP code, the field managers). New kinds may be added.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FailureKind {
    /// The server refused the object: `422 Invalid` (a field that is
    /// immutable, a value out of range), `400`, `404` (its namespace is
    /// missing), or another 4xx but 403, 409 with managers and 429.
    /// Changing the desired object (or deleting the live one) is the
    /// way out.
    Refused {
        /// The HTTP status code.
        code: u16,
    },
    /// A field we apply is owned by another *applier* (`409 Conflict`):
    /// [`Dependent::force`](super::Dependent::force) takes their fields;
    /// otherwise one of the two must stop applying it.
    Conflict {
        /// The field managers the server named.
        managers: Vec<String>,
    },
    /// `403 Forbidden`: the operator's RBAC (or an admission policy) does
    /// not allow the write or read.
    Forbidden,
    /// An object of the same name exists and the owner does not own it:
    /// left alone ([`Dependent::adopt`](super::Dependent::adopt) takes it
    /// over).
    NotOwned,
    /// The desired object cannot be owned as declared (in another
    /// namespace than its owner, not a JSON object): nothing was sent.
    InvalidDesired,
    /// A [derived](super::Dependent::derived) dependent's function could
    /// not compute its object from its dependencies' live objects (its
    /// error is the message): nothing was sent, and its earlier objects
    /// are kept.
    DeriveFailed,
    /// The object was applied, and its readiness says it failed
    /// ([`Readiness::Failed`](super::Readiness::Failed): a failed Job or
    /// Pod, a stalled rollout, a custom rule).
    ReadinessFailed,
}

impl FailureKind {
    /// A short name for logs and metrics: `refused`, `conflict`,
    /// `forbidden`, `not-owned`, `invalid-desired`, `derive-failed`,
    /// `readiness-failed`.
    pub fn name(&self) -> &'static str {
        match self {
            FailureKind::Refused { .. } => "refused",
            FailureKind::Conflict { .. } => "conflict",
            FailureKind::Forbidden => "forbidden",
            FailureKind::NotOwned => "not-owned",
            FailureKind::InvalidDesired => "invalid-desired",
            FailureKind::DeriveFailed => "derive-failed",
            FailureKind::ReadinessFailed => "readiness-failed",
        }
    }
}

impl DependentFailure {
    /// A failure of `kind` with `message`.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        DependentFailure {
            kind,
            message: message.into(),
        }
    }

    /// What kind of failure. For a family whose members failed, the first
    /// failed member's (the message names each).
    pub fn kind(&self) -> &FailureKind {
        &self.kind
    }

    /// The message: the object and why.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether the server refused the object ([`FailureKind::Refused`]).
    pub fn is_refused(&self) -> bool {
        matches!(self.kind, FailureKind::Refused { .. })
    }

    /// Whether it conflicts with another field manager
    /// ([`FailureKind::Conflict`]).
    pub fn is_conflict(&self) -> bool {
        matches!(self.kind, FailureKind::Conflict { .. })
    }

    /// Whether its readiness says it failed
    /// ([`FailureKind::ReadinessFailed`]).
    pub fn is_readiness_failed(&self) -> bool {
        self.kind == FailureKind::ReadinessFailed
    }
}

impl std::fmt::Display for DependentFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl DependentState {
    /// Whether it is [`DependentState::Ready`].
    pub fn is_ready(&self) -> bool {
        matches!(self, DependentState::Ready)
    }

    /// Whether it is waiting for something: not ready, waiting for a
    /// dependency, or held by its precondition.
    pub fn is_pending(&self) -> bool {
        matches!(
            self,
            DependentState::NotReady(_)
                | DependentState::Waiting(_)
                | DependentState::PreconditionUnmet
        )
    }

    /// Whether it is [`DependentState::Failed`].
    pub fn is_failed(&self) -> bool {
        matches!(self, DependentState::Failed(_))
    }

    /// The failure, when it is [`DependentState::Failed`].
    pub fn failure(&self) -> Option<&DependentFailure> {
        match self {
            DependentState::Failed(failure) => Some(failure),
            _ => None,
        }
    }

    /// Whether dependents that depend on it may go ahead: ready, or
    /// inactive (absent on purpose).
    pub(crate) fn satisfies(&self) -> bool {
        matches!(self, DependentState::Ready | DependentState::Inactive)
    }

    /// The state in a few words, for messages.
    pub fn describe(&self) -> String {
        match self {
            DependentState::Ready => "ready".to_owned(),
            DependentState::NotReady(why) => format!("not ready: {why}"),
            DependentState::Waiting(keys) => format!("waiting for {}", keys.join(", ")),
            DependentState::PreconditionUnmet => "reconcile precondition not met".to_owned(),
            DependentState::Inactive => "inactive".to_owned(),
            DependentState::Failed(why) => format!("failed: {why}"),
        }
    }
}

/// What one [`converge`](super::converge) found and did.
///
/// ```
/// use fsm_kube::dependents::{Convergence, DependentState};
///
/// let c = Convergence {
///     dependents: vec![
///         ("db".into(), DependentState::NotReady("readyReplicas 0/1".into())),
///         ("app".into(), DependentState::Waiting(vec!["db".into()])),
///     ],
///     ..Convergence::default()
/// };
/// assert!(!c.is_ready());
/// assert_eq!(c.pending().collect::<Vec<_>>(), ["db", "app"]);
/// assert_eq!(c.summary(), "pending: db (not ready: readyReplicas 0/1), app (waiting for db)");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Convergence {
    /// Each dependent's state, in the set's order.
    pub dependents: Vec<(String, DependentState)>,
    /// Objects deleted because no dependent desires them any more (an
    /// inactive dependent, a family that shrank, a key gone), as
    /// `Kind namespace/name`.
    pub pruned: Vec<String>,
    /// Objects no longer desired that were released instead of deleted
    /// ([`Dependent::keep_on_prune`](super::Dependent::keep_on_prune)):
    /// the owner's reference and labels removed, the object kept.
    pub orphaned: Vec<String>,
    /// Objects applied (created or changed).
    pub applied: Vec<String>,
    /// Objects found as desired, so not written.
    pub unchanged: u32,
    /// The live objects of the dependents found ready, by key: what a
    /// converge state hands on to its next state
    /// ([`Convergence::live`]).
    pub live: LiveDependents,
}

impl Convergence {
    /// The state of dependent `key`.
    pub fn state(&self, key: &str) -> Option<&DependentState> {
        self.dependents
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, state)| state)
    }

    /// The live object of ready dependent `key`, read as `T` (a
    /// Service's allocated `spec.clusterIP`, a Job's `status`).
    ///
    /// # Errors
    /// [`LiveError`] when `key` is not ready here, is a family (see
    /// [`LiveDependents::family`] on [`Convergence::live`](field@Convergence::live)),
    /// or does not read as `T`.
    pub fn live<T: serde::de::DeserializeOwned>(&self, key: &str) -> Result<T, LiveError> {
        self.live.get(key)
    }

    /// Whether every dependent is ready or inactive: the set converged.
    pub fn is_ready(&self) -> bool {
        self.dependents.iter().all(|(_, s)| s.satisfies())
    }

    /// Whether some dependent failed.
    pub fn is_failed(&self) -> bool {
        self.dependents.iter().any(|(_, s)| s.is_failed())
    }

    /// The keys of the ready dependents.
    pub fn ready(&self) -> impl Iterator<Item = &str> {
        self.keys_where(DependentState::is_ready)
    }

    /// The keys of the pending dependents.
    pub fn pending(&self) -> impl Iterator<Item = &str> {
        self.keys_where(DependentState::is_pending)
    }

    /// The keys of the failed dependents.
    pub fn failed(&self) -> impl Iterator<Item = &str> {
        self.keys_where(DependentState::is_failed)
    }

    /// The failed dependents, each with its failure (kind and message),
    /// in the set's order.
    ///
    /// ```
    /// use fsm_kube::dependents::{Convergence, DependentFailure, DependentState, FailureKind};
    ///
    /// let c = Convergence {
    ///     dependents: vec![
    ///         ("build".into(), DependentState::Failed(DependentFailure::new(FailureKind::ReadinessFailed, "the Job failed"))),
    ///         ("service".into(), DependentState::Failed(DependentFailure::new(FailureKind::Refused { code: 422 }, "field is immutable"))),
    ///         ("config".into(), DependentState::Ready),
    ///     ],
    ///     ..Convergence::default()
    /// };
    /// let refused: Vec<&str> = c.failures().filter(|(_, f)| f.is_refused()).map(|(k, _)| k).collect();
    /// assert_eq!(refused, ["service"]);
    /// ```
    pub fn failures(&self) -> impl Iterator<Item = (&str, &DependentFailure)> {
        self.dependents
            .iter()
            .filter_map(|(k, s)| s.failure().map(|f| (k.as_str(), f)))
    }

    fn keys_where(&self, pick: fn(&DependentState) -> bool) -> impl Iterator<Item = &str> {
        self.dependents
            .iter()
            .filter(move |(_, s)| pick(s))
            .map(|(k, _)| k.as_str())
    }

    /// What failed and what is pending, with why: `failed: a (…); pending:
    /// b (…)`, or `all N dependents ready`.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        for (label, pick) in [
            (
                "failed",
                DependentState::is_failed as fn(&DependentState) -> bool,
            ),
            ("pending", DependentState::is_pending),
        ] {
            let items: Vec<String> = self
                .dependents
                .iter()
                .filter(|(_, s)| pick(s))
                .map(|(k, s)| format!("{k} ({})", s.describe()))
                .collect();
            if !items.is_empty() {
                if !out.is_empty() {
                    out.push_str("; ");
                }
                let _ = write!(out, "{label}: {}", items.join(", "));
            }
        }
        if out.is_empty() {
            let ready = self.dependents.iter().filter(|(_, s)| s.is_ready()).count();
            out = format!("all {ready} active dependent(s) ready");
        }
        out
    }

    /// The failed dependents with their messages.
    pub(crate) fn failure_summary(&self) -> String {
        self.dependents
            .iter()
            .filter(|(_, s)| s.is_failed())
            .map(|(k, s)| format!("{k} ({})", s.describe()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The state of one dependent during a [`teardown`](super::teardown).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TeardownState {
    /// Deleted, and its delete postcondition holds.
    Gone,
    /// Deletion requested; its delete postcondition does not hold yet.
    Deleting(String),
    /// Not deleted yet: these dependents (keys), which depend on it, are
    /// not gone yet.
    Waiting(Vec<String>),
    /// The server refused the deletion (its message).
    Failed(String),
}

/// What one [`teardown`](super::teardown) found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Teardown {
    /// Each dependent's state, in the set's order.
    pub dependents: Vec<(String, TeardownState)>,
    /// Deletions requested by this call, as `Kind namespace/name`, in order.
    pub deleted: Vec<String>,
    /// Objects released instead of deleted by this call
    /// ([`Dependent::keep_on_prune`](super::Dependent::keep_on_prune)).
    pub orphaned: Vec<String>,
}

impl Teardown {
    /// Whether every dependent is gone: the owner may go.
    pub fn is_done(&self) -> bool {
        self.dependents
            .iter()
            .all(|(_, s)| matches!(s, TeardownState::Gone))
    }

    /// The state of dependent `key`.
    pub fn state(&self, key: &str) -> Option<&TeardownState> {
        self.dependents
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, state)| state)
    }

    /// The keys not gone yet, with why.
    pub fn summary(&self) -> String {
        let items: Vec<String> = self
            .dependents
            .iter()
            .filter_map(|(k, s)| match s {
                TeardownState::Gone => None,
                TeardownState::Deleting(why) => Some(format!("{k} (deleting: {why})")),
                TeardownState::Waiting(keys) => {
                    Some(format!("{k} (waiting for {})", keys.join(", ")))
                }
                TeardownState::Failed(why) => Some(format!("{k} (failed: {why})")),
            })
            .collect();
        if items.is_empty() {
            "all dependents gone".to_owned()
        } else {
            items.join(", ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_reads_as_its_message_and_names_its_kind() {
        let conflict = DependentFailure::new(
            FailureKind::Conflict {
                managers: vec!["helm".into()],
            },
            "ConfigMap ns/c: conflict with field manager helm",
        );
        assert!(
            conflict.is_conflict() && !conflict.is_refused() && !conflict.is_readiness_failed()
        );
        assert_eq!(conflict.kind().name(), "conflict");
        let state = DependentState::Failed(conflict.clone());
        assert_eq!(state.failure(), Some(&conflict));
        assert_eq!(
            state.describe(),
            "failed: ConfigMap ns/c: conflict with field manager helm"
        );
        assert_eq!(DependentState::Ready.failure(), None);
        let names: Vec<&str> = [
            FailureKind::Refused { code: 422 },
            FailureKind::Forbidden,
            FailureKind::NotOwned,
            FailureKind::InvalidDesired,
            FailureKind::DeriveFailed,
            FailureKind::ReadinessFailed,
        ]
        .iter()
        .map(FailureKind::name)
        .collect();
        assert_eq!(
            names,
            [
                "refused",
                "forbidden",
                "not-owned",
                "invalid-desired",
                "derive-failed",
                "readiness-failed"
            ]
        );
    }

    #[test]
    fn failures_lists_the_failed_dependents_in_order() {
        let failed = |kind| DependentState::Failed(DependentFailure::new(kind, "x"));
        let c = Convergence {
            dependents: vec![
                ("a".into(), failed(FailureKind::NotOwned)),
                ("b".into(), DependentState::Ready),
                ("c".into(), failed(FailureKind::Refused { code: 400 })),
            ],
            ..Convergence::default()
        };
        let kinds: Vec<(&str, &FailureKind)> = c.failures().map(|(k, f)| (k, f.kind())).collect();
        assert_eq!(
            kinds,
            [
                ("a", &FailureKind::NotOwned),
                ("c", &FailureKind::Refused { code: 400 })
            ]
        );
        assert!(c.is_failed());
        assert_eq!(c.failed().collect::<Vec<_>>(), ["a", "c"]);
    }
}
