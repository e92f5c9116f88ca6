//! Where records live: the `StateStore` trait and its version tokens.

use std::fmt;

use crate::fsm::StatusFields;
use crate::future::BoxFuture;
use crate::record::{RawRecord, StateRecord};

/// Identifies the object a record belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// The object's namespace; `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// The object's name.
    pub name: String,
}

impl ObjectKey {
    /// A key for a namespaced object.
    pub fn namespaced(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        ObjectKey {
            namespace: Some(namespace.into()),
            name: name.into(),
        }
    }

    /// A key for a cluster-scoped object.
    pub fn cluster(name: impl Into<String>) -> Self {
        ObjectKey {
            namespace: None,
            name: name.into(),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// An opaque optimistic-concurrency token: a `resourceVersion`, or a
/// counter for in-memory stores.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Version(pub String);

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a store holds for one object.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Loaded {
    /// The stored record, undecoded; `None` when there is none yet.
    pub record: Option<RawRecord>,
    /// The token to pass to [`StateStore::save`]; `None` when nothing is
    /// stored (a store whose token belongs to the object, like the status
    /// store, has one even without a record).
    pub version: Option<Version>,
}

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The stored version is not the expected one: someone else wrote in
    /// between. Nothing was written; reconcile again with fresh data.
    #[error("the stored record changed since it was loaded")]
    Conflict,
    /// The record could not be encoded.
    #[error("the record could not be encoded")]
    Encode(#[source] serde_json::Error),
    /// The backend failed (API error, I/O).
    #[error("the state store failed")]
    Backend(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The record does not fit: written, it would make `what` `size` bytes,
    /// over the backend's `limit`. Nothing was written; the stored record
    /// is as it was. Retrying the same write cannot succeed.
    #[error("the record would make {what} {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// What the limit applies to, e.g. `the ConfigMap's data`.
        what: String,
        /// The size the write would have reached, in bytes.
        size: usize,
        /// The limit, in bytes.
        limit: usize,
    },
}

/// One write of a record, as a store's `save` is given it.
///
/// ```
/// use fsm_core::{Commit, StateRecord, StatusFields, Version};
///
/// # fn f(record: &StateRecord, status: &StatusFields) {
/// let first = Commit::new(record, None);
/// let version = Version("7".to_owned());
/// let next = Commit::new(record, Some(&version)).with_status(status);
/// assert!(first.status.is_none() && next.status.is_some());
/// # }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Commit<'a> {
    /// The record to store.
    pub record: &'a StateRecord,
    /// The status fields the step published since the last commit
    /// ([`Step::publish_status`](crate::Step::publish_status)); `None`
    /// when it published none.
    pub status: Option<&'a StatusFields>,
    /// The version the stored record must still be at; `None`: nothing may
    /// be stored yet.
    pub expected: Option<&'a Version>,
}

impl<'a> Commit<'a> {
    /// A commit of `record` over version `expected`, publishing nothing.
    pub fn new(record: &'a StateRecord, expected: Option<&'a Version>) -> Self {
        Commit {
            record,
            status: None,
            expected,
        }
    }

    /// The same commit, publishing `status` with the record.
    pub fn with_status(self, status: &'a StatusFields) -> Self {
        Commit {
            status: Some(status),
            ..self
        }
    }
}

/// Persists records with optimistic concurrency.
///
/// # Guarantees expected of an implementation
/// `save` with an expected version writes only if the stored version is
/// that one, and returns the new version; otherwise it fails with
/// [`StoreError::Conflict`] and writes nothing. `save` with `None` writes
/// only if nothing is stored.
pub trait StateStore: Send + Sync {
    /// Loads the record of `key`.
    fn load<'a>(&'a self, key: &'a ObjectKey) -> BoxFuture<'a, Result<Loaded, StoreError>>;

    /// Saves `commit.record` if the stored version is `commit.expected`,
    /// with the status fields a step published (`commit.status`) in the
    /// same write where the store keeps them (a store with no object to
    /// publish on keeps only the record).
    fn save<'a>(
        &'a self,
        key: &'a ObjectKey,
        commit: Commit<'a>,
    ) -> BoxFuture<'a, Result<Version, StoreError>>;

    /// Deletes the record of `key` if the stored version is `expected`.
    fn delete<'a>(
        &'a self,
        key: &'a ObjectKey,
        expected: Option<&'a Version>,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
}
