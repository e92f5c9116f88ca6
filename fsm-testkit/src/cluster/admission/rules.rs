//! The steps that validate and default the object: its metadata, a new
//! object's system fields, the kind's rules (from its entry in the kinds'
//! table, see `builtins`), a custom resource's schema, field ownership, a
//! CRD's status.

use serde_json::{Value, json};

use super::super::Part;
use super::super::meta::set_type;
use super::super::metadata_rules::{metadata_causes, update_metadata_causes};
use super::super::ownership::{ownership_scope, record_ownership};
use super::super::present;
use super::{Admission, Flow};
use crate::builtins::Validate;
use crate::kinds::drop_empty;
use crate::status::{ApiError, Cause};
use crate::time::timestamp;
use crate::validation::{generate_name_problems, name_problems};

/// `Invalid` with every cause found in a create's name and `generateName`,
/// the metadata, and the kind's fields checked with them (a Lease's spec).
pub(super) fn validate_metadata(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    let def = a.write.def;
    let mut causes = Vec::new();
    if a.is_create() {
        if let Some(prefix) = &a.generate_prefix {
            for problem in generate_name_problems(def.name_rule, prefix) {
                causes.push(Cause::invalid("metadata.generateName", prefix, &problem));
            }
        }
        for problem in name_problems(def.name_rule, &a.name) {
            causes.push(Cause::invalid("metadata.name", &a.name, &problem));
        }
    }
    if let Some(meta) = a.object.get("metadata").and_then(Value::as_object) {
        if a.is_create() || a.part() != Part::Main || def.custom {
            causes.extend(metadata_causes(def, meta));
        } else {
            causes.extend(update_metadata_causes(def, meta, a.rules.update_metadata));
        }
    }
    if let Some(field_causes) = a.rules.field_causes {
        // An update's own preparation (a Service turned ClusterIP loses
        // its node ports) comes before the real server validates it.
        let prepared = match (a.rules.on_update, a.current.as_deref()) {
            (Some(on_update), Some(current)) => {
                let mut object = a.object.clone();
                on_update(&mut object, current);
                Some(object)
            }
            _ => None,
        };
        let mut found = field_causes(def, prepared.as_ref().unwrap_or(&a.object));
        if !a.is_create() && a.part() == Part::Main {
            // A kind whose update validation validates the new object
            // again lists its fields' causes again.
            let once = found.clone();
            for _ in 1..a.rules.update_field_checks {
                found.extend(once.iter().cloned());
            }
        }
        if found.is_empty() {
            // (What may not change is checked after the defaults.)
        } else if let Some(immutable) = immutable_causes(a) {
            // 1.20 lists every cause of an update at once: what may not
            // change before or after the fields' causes, as the kind's
            // update validation orders them.
            if a.rules.immutable_first {
                causes.extend(immutable);
                causes.extend(found);
            } else {
                causes.extend(found);
                causes.extend(immutable);
            }
        } else {
            causes.extend(found);
        }
    }
    if causes.is_empty() {
        Ok(Flow::Next)
    } else {
        Err(a.invalid(causes))
    }
}

/// A write of the status subresource: what the kind's status update
/// validation refuses (a workload's counts), every cause at once.
pub(super) fn validate_status(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    let (Some(status_causes), Some(current)) = (a.rules.status_causes, a.current.as_deref()) else {
        return Ok(Flow::Next);
    };
    if a.part() != Part::Status {
        return Ok(Flow::Next);
    }
    let causes = status_causes(&a.object, current);
    if causes.is_empty() {
        Ok(Flow::Next)
    } else {
        Err(a.invalid(causes))
    }
}

/// What an update (of the object itself) changes that may not change,
/// judged on the object as the kind's defaults will leave it; `None` for a
/// create, a subresource, or a kind without such rules.
fn immutable_causes(a: &Admission<'_, '_>) -> Option<Vec<Cause>> {
    let (immutable, current) = (a.rules.immutable?, a.current.as_deref()?);
    if a.part() != Part::Main {
        return None;
    }
    let mut object = a.object.clone();
    if let Some(on_write) = a.rules.on_write {
        on_write(a.write.def, &mut object);
    }
    if let Some(on_update) = a.rules.on_update {
        on_update(&mut object, current);
    }
    Some(immutable(current, &object))
}

/// A new object's metadata: its name, a uid, the creation time, the
/// first generation; what the server owns dropped, and status when it is
/// a subresource.
pub(super) fn init_new_metadata(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    if !a.is_create() {
        return Ok(Flow::Next);
    }
    let (def, now) = (a.write.def, a.write.now);
    let (name, uid) = (a.name.clone(), a.cluster.ids.uid());
    let meta = a.metadata()?;
    let sent_resource_version = meta
        .get("resourceVersion")
        .and_then(Value::as_str)
        .is_some_and(|rv| !rv.is_empty());
    meta.insert("name".into(), json!(name));
    meta.insert("uid".into(), json!(uid));
    meta.insert("creationTimestamp".into(), json!(timestamp(now)));
    for k in [
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
    ] {
        meta.remove(k);
    }
    if def.generation {
        meta.insert("generation".into(), json!(1));
    } else {
        meta.remove("generation");
    }
    a.sent_resource_version = sent_resource_version;
    if def.status_subresource
        && let Some(o) = a.object.as_object_mut()
    {
        o.remove("status");
    }
    Ok(Flow::Next)
}

/// The kind's validation of the object as written, before its defaults
/// (Events).
pub(super) fn validate_as_written(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    validate_with(a, a.rules.validate_written)
}

/// The kind's defaults: those of a new object (initial status, a Job's
/// selector), then those of every write, then what an update changes
/// given the stored object, then (but in a dry run) what the write
/// allocates (a Service's cluster IP and node ports, from the count of
/// writes).
pub(super) fn apply_defaults(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    if a.is_create() {
        a.cluster.sequence += 1;
        if let Some(on_create) = a.rules.on_create {
            on_create(&mut a.object, a.cluster.sequence);
        }
    }
    if let Some(on_write) = a.rules.on_write {
        on_write(a.write.def, &mut a.object);
    }
    let current = a.current.clone();
    if let (Some(on_update), Some(current)) = (a.rules.on_update, current.as_deref()) {
        on_update(&mut a.object, current);
    }
    if let Some(allocate) = a.rules.allocate
        && !a.write.dry_run
    {
        if current.is_some() {
            a.cluster.sequence += 1;
        }
        allocate(&mut a.object, current.as_deref(), a.cluster.sequence);
    }
    drop_empty(a.write.def, &mut a.object);
    Ok(Flow::Next)
}

/// An update changes nothing the kind's update validation keeps
/// (`field is immutable`), every such change a cause; for a kind whose
/// validation wants one, after two causes for a body without
/// `metadata.resourceVersion` (1.20 checks the metadata twice).
pub(super) fn check_immutable_fields(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    let (Some(immutable), Some(current)) = (a.rules.immutable, a.current.as_deref()) else {
        return Ok(Flow::Next);
    };
    let mut causes = Vec::new();
    if a.rules.validates_resource_version && !a.sent_resource_version && a.part() == Part::Main {
        let missing = Cause::invalid(
            "metadata.resourceVersion",
            "",
            "must be specified for an update",
        );
        causes.extend([missing.clone(), missing]);
    }
    causes.extend(immutable(current, &a.object));
    if causes.is_empty() {
        Ok(Flow::Next)
    } else {
        Err(a.invalid(causes))
    }
}

/// The kind's validation of the defaulted object (the RBAC kinds); an
/// update's causes as many times as the kind checks them.
pub(super) fn validate_defaulted(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    match validate_with(a, a.rules.validate) {
        Err(ApiError::Invalid(subject, causes)) if !a.is_create() && a.part() == Part::Main => {
            // A binding's changed roleRef is the update's own check: once,
            // last.
            let (immutable, fields): (Vec<Cause>, Vec<Cause>) = causes
                .into_iter()
                .partition(|c| c.message.ends_with("cannot change roleRef"));
            let mut all = Vec::new();
            for _ in 0..a.rules.update_field_checks {
                all.extend(fields.iter().cloned());
            }
            all.extend(immutable);
            Err(ApiError::Invalid(subject, all))
        }
        other => other,
    }
}

/// Runs a validation of the kind's, if it has one.
fn validate_with(a: &Admission<'_, '_>, validate: Option<Validate>) -> Result<Flow, ApiError> {
    if let Some(validate) = validate {
        validate(&a.written())?;
    }
    Ok(Flow::Next)
}

/// A custom resource is pruned and validated by its CRD's schema.
pub(super) fn enforce_custom_schema(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    crate::schema::enforce(&a.cluster.store, a.write.def, &mut a.object)?;
    Ok(Flow::Next)
}

/// A custom resource with a scale: its replicas and selector fields as
/// the scale reads them (see `cluster::scale`).
pub(super) fn validate_scale_fields(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    let causes = super::super::scale::custom_scale_causes(a.write.def, &a.object);
    if causes.is_empty() {
        return Ok(Flow::Next);
    }
    Err(a.invalid(causes))
}

/// `metadata.managedFields`, as the write's owner says.
pub(super) fn record_field_ownership(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    let w = a.write;
    let schema = a.cluster.crd_schema(w.def);
    let scope = ownership_scope(w.def, a.part(), schema.as_ref());
    let created = json!({});
    let old = a.current.as_deref().unwrap_or(&created);
    record_ownership(w.def, old, &mut a.object, scope, w.owner, w.now);
    Ok(Flow::Next)
}

/// A CRD's validation (an update's against the stored one), defaults
/// and status, and its storage version.
pub(super) fn prepare_crd(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    let old = a.current.clone();
    let main = matches!(a.part(), super::super::Part::Main);
    a.crd_storage = a.cluster.crd_prepare(
        a.write.def,
        &mut a.object,
        old.as_deref(),
        main,
        a.write.now,
    )?;
    Ok(Flow::Next)
}

/// An update keeps the apiVersion the object was stored with, but for a
/// custom resource whose CRD converts through a webhook: stored at the
/// storage version, as every write stores it, so that a read converts it
/// from the version it was last written at.
pub(super) fn keep_stored_type(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    if let Some(current) = &a.current {
        set_type(a.write.def, &mut a.object, current);
        if let Some(storage) = a.cluster.crd_webhook_storage(a.write.def)
            && let Some(m) = a.object.as_object_mut()
        {
            m.insert("apiVersion".into(), Value::String(storage));
        }
    }
    Ok(Flow::Next)
}

/// An update that changes nothing writes nothing.
pub(super) fn answer_unchanged(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    match &a.current {
        Some(current) if a.object == **current => Ok(Flow::Answer(present(a.write.def, current))),
        _ => Ok(Flow::Next),
    }
}

/// The kind's size limit (a ConfigMap's or Secret's data: 1 MiB).
pub(super) fn check_data_size(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    if let Some(check) = a.rules.check_size {
        check(a.write.def, &a.name, &a.object)?;
    }
    Ok(Flow::Next)
}
