//! `StoreKind`: which of the crate's stores an operator keeps its records
//! in, and which kind a store type is.

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

/// The kind of the stores the crate provides, by type; `None` for others.
#[cfg(feature = "cli")]
pub(crate) fn store_kind_of<F, S>() -> Option<StoreKind>
where
    F: fsm_core::Fsm,
    S: 'static,
{
    use std::any::TypeId;
    let store = TypeId::of::<S>();
    if store == TypeId::of::<super::StatusStore>() {
        Some(StoreKind::Status)
    } else if store == TypeId::of::<super::ConfigMapStore>() {
        Some(StoreKind::ConfigMap)
    } else if store == TypeId::of::<super::SecretStore>() {
        Some(StoreKind::Secret)
    } else if store == TypeId::of::<fsm_core::EphemeralStore>()
        || store == TypeId::of::<super::DerivingStore<F>>()
    {
        Some(StoreKind::Ephemeral)
    } else {
        None
    }
}
