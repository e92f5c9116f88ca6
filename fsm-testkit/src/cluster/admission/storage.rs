//! The steps at the storage: a POST's resourceVersion, a taken name, a
//! dry run's stop, an update that finishes a deletion, and the store
//! itself.

use serde_json::Value;

use super::super::meta::finalizers;
use super::super::present;
use super::{Admission, Flow, Target};
use crate::status::{ApiError, Subject};

/// A POST's body may not carry a resourceVersion (the storage's 500; a dry
/// run does not reach storage).
pub(super) fn refuse_resource_version(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    if matches!(a.write.target, Target::New { post: true })
        && a.sent_resource_version
        && !a.write.dry_run
    {
        return Err(ApiError::Storage(
            "resourceVersion should not be set on objects to be created".into(),
        ));
    }
    Ok(Flow::Next)
}

/// A create's name must be free (`AlreadyExists`).
pub(super) fn check_name_free(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    let w = a.write;
    if a.is_create()
        && a.cluster
            .store
            .get(&w.def.group_resource(), w.ns, &a.name)
            .is_some()
    {
        return Err(ApiError::AlreadyExists(Subject::new(
            &w.def.group,
            &w.def.plural,
            &a.name,
        )));
    }
    Ok(Flow::Next)
}

/// A dry run answers what would be stored.
pub(super) fn stop_at_dry_run(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    if a.write.dry_run {
        return Ok(Flow::Answer(present(a.write.def, &a.object)));
    }
    Ok(Flow::Next)
}

/// An update that removes the last finalizer of an object being deleted
/// (with nothing left in it) removes the object.
pub(super) fn finish_deletion(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    let Some(current) = &a.current else {
        return Ok(Flow::Next);
    };
    let def = a.write.def;
    if current["metadata"].get("deletionTimestamp").is_some()
        && finalizers(&a.object).is_empty()
        && !a.cluster.has_content(def, &a.object)
    {
        let object = std::mem::take(&mut a.object);
        let gone = a.cluster.remove_object(def, a.write.ns, &a.name, object);
        return Ok(Flow::Answer(present(def, &gone)));
    }
    Ok(Flow::Next)
}

/// Stores the object (if the storage takes its size), then what storing
/// it starts: the resources a CRD serves, a ServiceAccount's token, a
/// namespace's `default` ServiceAccount.
pub(super) fn store(a: &mut Admission<'_, '_>) -> Result<Value, ApiError> {
    let w = a.write;
    let gr = w.def.group_resource();
    crate::limits::check_storable(&gr, w.ns, &a.name, &a.object)?;
    let object = std::mem::take(&mut a.object);
    let stored = a.cluster.store.put(&gr, w.ns, &a.name, object);
    if let Some(storage) = &a.crd_storage {
        a.cluster.crd_register(&stored, storage);
    }
    if super::super::tokens::is_service_account(w.def) {
        a.cluster.ensure_token(&stored, w.now);
    }
    a.cluster.ensure_default_account_of(w.def, &stored, w.now);
    Ok(present(w.def, &stored))
}
