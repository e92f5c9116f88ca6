//! Field ownership (`metadata.managedFields`): which fields a write can
//! own, and how a write records its owner.

use serde_json::Value;

use super::{Ownership, Part};
use crate::patch::managed_fields::{self, Operation, Scope, Writer};
use crate::resources::ResourceDef;
use crate::time::timestamp;

/// Which fields a write to `part` of `def`'s objects can own (`schema`:
/// a custom resource's `openAPIV3Schema`).
pub(super) fn ownership_scope<'a>(
    def: &'a ResourceDef,
    part: Part,
    schema: Option<&'a Value>,
) -> Scope<'a> {
    Scope {
        builtin: (!def.custom).then_some(def),
        schema,
        status_only: part == Part::Status,
        without_status: part == Part::Main && def.status_subresource,
    }
}

/// Sets `new`'s `managedFields` for a write from `old` (`{}` for a create).
pub(super) fn record_ownership(
    def: &ResourceDef,
    old: &Value,
    new: &mut Value,
    scope: Scope<'_>,
    owner: &Ownership<'_>,
    now: jiff::Timestamp,
) {
    match owner {
        Ownership::Applied(fields) => {
            if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                if fields.is_array() {
                    meta.insert("managedFields".into(), fields.clone());
                } else {
                    meta.remove("managedFields");
                }
            }
        }
        Ownership::Internal | Ownership::Update(_) => {
            // managedFields the client wrote: `[{}]` resets them (the
            // object keeps none); a valid list replaces the live one
            // before this write is recorded; anything else is ignored.
            let base = match managed_fields::given(new) {
                managed_fields::Given::Reset => {
                    if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                        meta.remove("managedFields");
                    }
                    return;
                }
                managed_fields::Given::Entries(list) => {
                    let mut base = old.clone();
                    if let Some(meta) = base.get_mut("metadata").and_then(Value::as_object_mut) {
                        meta.insert("managedFields".into(), list);
                    }
                    std::borrow::Cow::Owned(base)
                }
                managed_fields::Given::None => std::borrow::Cow::Borrowed(old),
            };
            let Ownership::Update(manager) = owner else {
                managed_fields::record_update(&base, new, scope, None);
                return;
            };
            let time = timestamp(now);
            let api_version = def.api_version();
            let writer = Writer {
                manager,
                operation: Operation::Update,
                api_version: &api_version,
                subresource: scope.status_only.then_some("status"),
                time: &time,
            };
            managed_fields::record_update(&base, new, scope, Some(&writer));
        }
    }
}
