//! The steps that find which object a write writes: a new one's name
//! (in a namespace that takes new objects), or the stored one, the
//! update's preconditions, and the new object made from both.

use serde_json::{Value, json};

use super::super::meta::{copy_field, finalizers, metadata_mut, spec_changed, str_at};
use super::super::{Part, conflict, namespaces, not_found};
use super::{Admission, Flow};
use crate::status::{ApiError, Cause, Subject};

/// A create's `name` and `generateName`, as the body gives them.
pub(super) fn read_new_name(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    if !a.is_create() {
        return Ok(Flow::Next);
    }
    let meta = a.metadata()?;
    let given = |key: &str| {
        meta.get(key)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
            .map(String::from)
    };
    let (name, prefix) = (given("name"), given("generateName"));
    a.name = name.unwrap_or_default();
    a.generate_prefix = prefix;
    Ok(Flow::Next)
}

/// The namespace lifecycle admission of a create: the namespace must exist
/// and not be terminating. It comes before the name is generated and
/// validated.
pub(super) fn admit_namespace(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    if !a.is_create() || !a.def().namespaced {
        return Ok(Flow::Next);
    }
    let named = if a.name.is_empty() {
        a.generate_prefix.as_deref().unwrap_or("")
    } else {
        a.name.as_str()
    };
    let (def, ns) = (a.write.def, a.write.ns);
    match a.cluster.store.get(&namespaces(), "", ns) {
        None => Err(ApiError::NotFound(Subject::new("", "namespaces", ns))),
        Some(n) if n["metadata"].get("deletionTimestamp").is_some() => {
            Err(ApiError::ForbiddenBecause(
                Subject::new(&def.group, &def.plural, named),
                format!(
                    "unable to create new content in namespace {ns} because it is being terminated"
                ),
                vec![Cause {
                    reason: "NamespaceTerminating".into(),
                    message: format!("namespace {ns} is being terminated"),
                    field: "metadata.namespace".into(),
                }],
            ))
        }
        Some(_) => Ok(Flow::Next),
    }
}

/// A create's name: the body's, else one generated from `generateName`;
/// neither is `Invalid`.
pub(super) fn resolve_name(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    if !a.is_create() || !a.name.is_empty() {
        return Ok(Flow::Next);
    }
    let Some(prefix) = a.generate_prefix.clone() else {
        return Err(a.invalid(vec![Cause::required(
            "metadata.name",
            "name or generateName is required",
        )]));
    };
    a.name = a.cluster.generate_name(a.write.def, a.write.ns, &prefix);
    Ok(Flow::Next)
}

/// The stored object an update replaces (`NotFound` without one).
pub(super) fn load_current(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    if a.is_create() {
        return Ok(Flow::Next);
    }
    let def = a.write.def;
    let current = a
        .cluster
        .store
        .get(&def.group_resource(), a.write.ns, &a.name)
        .ok_or_else(|| not_found(def, &a.name))?;
    a.current = Some(current);
    Ok(Flow::Next)
}

/// An update's preconditions: the body's resourceVersion must be the
/// stored one (and be given, for kinds without unconditional updates), and
/// its uid, if any, the stored one's.
pub(super) fn check_preconditions(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    let Some(current) = a.current.clone() else {
        return Ok(Flow::Next);
    };
    let (def, name, part) = (a.write.def, a.name.clone(), a.part());
    let unconditional = a.rules.unconditional_update;
    let meta = a.metadata()?;
    let sent = meta
        .get("resourceVersion")
        .and_then(Value::as_str)
        .is_some_and(|rv| !rv.is_empty());
    a.sent_resource_version = sent;
    let meta = a.metadata()?;
    match meta.get("resourceVersion").and_then(Value::as_str) {
        Some(rv) if !rv.is_empty() && rv != str_at(&current, "resourceVersion") => {
            return Err(conflict(def, &name));
        }
        Some(rv) if !rv.is_empty() => {}
        _ if !unconditional => {
            // The real store names the resource, not the kind, here.
            return Err(ApiError::Invalid(
                Subject::new(&def.group, &def.plural, &name),
                vec![Cause {
                    reason: "FieldValueInvalid".into(),
                    message: "Invalid value: 0x0: must be specified for an update".into(),
                    field: "metadata.resourceVersion".into(),
                }],
            ));
        }
        _ => {}
    }
    if part == Part::Main
        && let Some(uid) = meta.get("uid").and_then(Value::as_str)
        && !uid.is_empty()
        && uid != str_at(&current, "uid")
    {
        // Checked twice on the real server (the common metadata checks
        // of every update, then the kind's own): two causes.
        let cause = Cause::invalid("metadata.uid", uid, "field is immutable");
        return Err(a.invalid(vec![cause.clone(), cause]));
    }
    Ok(Flow::Next)
}

/// An update's new object: the body with the stored status (when status is
/// a subresource), or the stored object with the body's status (a write of
/// the subresource); the metadata the server owns is the stored one's.
pub(super) fn merge_with_current(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    let Some(current) = a.current.clone() else {
        return Ok(Flow::Next);
    };
    let mut new = match a.part() {
        Part::Main => {
            let mut body = std::mem::take(&mut a.object);
            if a.def().status_subresource {
                copy_field(&current, &mut body, "status");
            }
            body
        }
        Part::Status => {
            let mut n = (*current).clone();
            copy_field(&a.object, &mut n, "status");
            if let Some(kept) = a.rules.status_keeps_metadata
                && a.object.get("metadata").is_some_and(Value::is_object)
            {
                copy_field(&a.object, &mut n, "metadata");
                for field in kept {
                    let stored = current["metadata"].get(*field).cloned();
                    let meta = metadata_mut(&mut n)?;
                    match stored {
                        Some(v) => meta.insert((*field).into(), v),
                        None => meta.remove(*field),
                    };
                }
            }
            n
        }
    };
    let new_meta = metadata_mut(&mut new)?;
    for k in [
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "resourceVersion",
    ] {
        match current["metadata"].get(k) {
            Some(v) => new_meta.insert(k.into(), v.clone()),
            None => new_meta.remove(k),
        };
    }
    a.object = new;
    Ok(Flow::Next)
}

/// An object being deleted takes no new finalizers.
pub(super) fn check_new_finalizers(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    let Some(current) = a.current.clone() else {
        return Ok(Flow::Next);
    };
    if current["metadata"].get("deletionTimestamp").is_none() {
        return Ok(Flow::Next);
    }
    let old = finalizers(&current);
    let added: Vec<String> = finalizers(&a.object)
        .into_iter()
        .filter(|f| !old.contains(f))
        .collect();
    if added.is_empty() {
        return Ok(Flow::Next);
    }
    let listed: Vec<String> = added.iter().map(|f| format!("{f:?}")).collect();
    Err(a.invalid(vec![Cause::forbidden(
        "metadata.finalizers",
        &format!(
            "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
            listed.join(", ")
        ),
    )]))
}

/// A change outside metadata (and status, when it is a subresource) bumps
/// `generation`, for kinds that keep one.
pub(super) fn bump_generation(a: &mut Admission<'_, '_>) -> Result<Flow, ApiError> {
    let Some(current) = a.current.clone() else {
        return Ok(Flow::Next);
    };
    let def = a.write.def;
    // A Deployment's annotations bump it too (1.20 copies them to its
    // ReplicaSets); not through its status.
    let annotations_changed = a.rules.annotations_bump_generation
        && a.part() == Part::Main
        && current["metadata"].get("annotations") != a.object["metadata"].get("annotations");
    if def.generation
        && (annotations_changed || spec_changed(&current, &a.object, def.status_subresource))
    {
        let generation = current["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
        a.object["metadata"]["generation"] = json!(generation);
    }
    Ok(Flow::Next)
}
