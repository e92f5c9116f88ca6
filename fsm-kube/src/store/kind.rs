//! `StoreKind`: which of the crate's stores an operator keeps its records
//! in, and where a store keeps them ([`RecordPlace`]). Which store is of
//! which kind is registered in `registry.rs`.

use fsm_core::RawRecord;
use kube::api::{ApiResource, DynamicObject};
use kube::{Api, Client};
use serde::{Deserialize, Serialize};

/// Where the operator keeps its records; decides the RBAC it needs and
/// where `status` reads. Serialized as on the command line (`config-map`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum StoreKind {
    /// [`crate::StatusStore`]: `.status.fsm` of the resource.
    Status,
    /// [`crate::ConfigMapStore`]: a ConfigMap named by
    /// [`crate::store::record_object_name`].
    ConfigMap,
    /// [`crate::SecretStore`]: a Secret named by
    /// [`crate::store::record_object_name`].
    Secret,
    /// `fsm_core::EphemeralStore` or [`crate::DerivingStore`]: process
    /// memory (conditions still go to the status).
    Ephemeral,
}

/// Where a store keeps an object's record, as what reads it from outside
/// the operator needs to know it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordPlace {
    /// `.status.fsm` of the object itself: read with the object, written
    /// with a patch of its status.
    Status,
    /// An object of its own beside the reconciled one, in its namespace
    /// (so only namespaced resources can use it), named by
    /// [`record_object_name`](super::record_object_name).
    Object(RecordObjectKind),
    /// The operator's memory: nothing outside the process can read it.
    Memory,
}

/// The kind of object a record object is (a ConfigMap, a Secret), and how
/// to read a record from one without its Rust type.
#[derive(Clone, Copy)]
pub struct RecordObjectKind {
    kind: &'static str,
    plural: &'static str,
    text: fn(DynamicObject) -> Option<Result<String, String>>,
}

impl RecordObjectKind {
    /// Record objects of kind `kind` (resource `plural`, core API group,
    /// version `v1`) whose record `text` reads.
    pub(crate) const fn new(
        kind: &'static str,
        plural: &'static str,
        text: fn(DynamicObject) -> Option<Result<String, String>>,
    ) -> Self {
        RecordObjectKind { kind, plural, text }
    }

    /// The kind, as in `kind:` (`ConfigMap`).
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The resource, as in RBAC rules and URLs (`configmaps`).
    pub fn plural(&self) -> &'static str {
        self.plural
    }

    /// The API of these objects in `namespace` (`None`: all namespaces).
    pub fn api(&self, client: Client, namespace: Option<&str>) -> Api<DynamicObject> {
        let resource = ApiResource {
            group: String::new(),
            version: "v1".to_owned(),
            api_version: "v1".to_owned(),
            kind: self.kind.to_owned(),
            plural: self.plural.to_owned(),
        };
        match namespace {
            Some(ns) => Api::namespaced_with(client, ns, &resource),
            None => Api::all_with(client, &resource),
        }
    }

    /// The record `object` holds, if it holds one, as the stores read it
    /// (text that is not UTF-8, or an object not of this kind, is kept as
    /// a description, which does not decode).
    pub fn raw_record(&self, object: &DynamicObject) -> Option<RawRecord> {
        match (self.text)(object.clone())? {
            Ok(text) => Some(RawRecord::Text(text)),
            Err(e) => Some(RawRecord::Text(format!("<not UTF-8: {e}>"))),
        }
    }
}

impl std::fmt::Debug for RecordObjectKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordObjectKind")
            .field("kind", &self.kind)
            .field("plural", &self.plural)
            .finish_non_exhaustive()
    }
}

/// Two record object kinds are the same when they name the same resource.
impl PartialEq for RecordObjectKind {
    fn eq(&self, other: &Self) -> bool {
        (self.kind, self.plural) == (other.kind, other.plural)
    }
}

impl Eq for RecordObjectKind {}
