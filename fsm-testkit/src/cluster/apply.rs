//! Patches: merge, JSON and strategic merge patches of the stored object,
//! and server-side apply (which creates an absent object). Each ends in a
//! create or an update, so in the admission chain.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::meta::{check_apply_type, metadata_mut, name_mismatch};
use super::ownership::ownership_scope;
use super::{Cluster, Ownership, Part, PatchOptions, not_found, present};
use crate::patch::managed_fields::{self, Operation, Scope, Writer};
use crate::patch::{self, PatchType};
use crate::resources::ResourceDef;
use crate::status::{ApiError, Cause, Subject};
use crate::time::timestamp;

impl Cluster {
    /// Patches an object (or its status); a server-side apply creates an
    /// absent object. Returns the object and whether it was created.
    ///
    /// # Errors
    /// As [`Cluster::update`] (and [`Cluster::create`] for an apply), plus
    /// `BadRequest` for a malformed patch, `Invalid` for a JSON patch that
    /// cannot be applied or an apply without a field manager,
    /// `UnsupportedMediaType` for a strategic merge patch of a custom
    /// resource, and `Conflict` (with the conflicting fields) for an apply
    /// that would change fields other managers own.
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        kind: PatchType,
        patch_body: &[u8],
        part: Part,
        opts: &PatchOptions,
        dry_run: bool,
        now: jiff::Timestamp,
    ) -> Result<(Value, bool), ApiError> {
        if kind == PatchType::Apply {
            return self.server_side_apply(def, ns, name, patch_body, part, opts, dry_run, now);
        }
        if opts.force {
            return Err(ApiError::Invalid(
                Subject::new("meta.k8s.io", "PatchOptions", ""),
                vec![Cause::forbidden(
                    "force",
                    "may not be specified for non-apply patch",
                )],
            ));
        }
        let current = self
            .store
            .get(&def.group_resource(), ns, name)
            .ok_or_else(|| not_found(def, name))?;
        let mut target = present(def, &current);
        patch::apply_patch(kind, &mut target, patch_body, def)?;
        crate::typed::decode_patched(def, &mut target)?;
        let manager = opts.field_manager.as_deref().unwrap_or("unknown");
        let owner = Ownership::Update(manager);
        self.update_as(def, ns, name, target, part, dry_run, now, &owner)
            .map(|o| (o, false))
    }

    #[allow(clippy::too_many_arguments)]
    fn server_side_apply(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        body: &[u8],
        part: Part,
        opts: &PatchOptions,
        dry_run: bool,
        now: jiff::Timestamp,
    ) -> Result<(Value, bool), ApiError> {
        let Some(manager) = opts.field_manager.as_deref().filter(|m| !m.is_empty()) else {
            return Err(ApiError::Invalid(
                Subject::new("meta.k8s.io", "PatchOptions", ""),
                vec![Cause::required(
                    "fieldManager",
                    "is required for apply patch",
                )],
            ));
        };
        // An apply configuration is YAML (JSON is YAML too).
        let mut config: Value = serde_yaml_ng::from_slice(body).map_err(|e| {
            ApiError::BadRequest(format!(
                "error decoding YAML: error converting YAML to JSON: yaml: {e}"
            ))
        })?;
        check_apply_type(def, &config)?;
        let meta = metadata_mut(&mut config)?;
        match meta.get("name").and_then(Value::as_str) {
            Some(n) if n != name => return Err(name_mismatch(n, name)),
            Some(_) => {}
            None => {
                meta.insert("name".into(), json!(name));
            }
        }
        let time = timestamp(now);
        let writer = Writer {
            manager,
            operation: Operation::Apply,
            api_version: &def.api_version(),
            subresource: (part == Part::Status).then_some("status"),
            time: &time,
        };
        let schema = self.crd_schema(def);
        let scope = ownership_scope(def, part, schema.as_ref());
        let live = self
            .store
            .get(&def.group_resource(), ns, name)
            .map(|o| present(def, &o));
        let Some(live) = live else {
            if part == Part::Status {
                return Err(not_found(def, name));
            }
            let object = patch::apply::apply(None, &config, &writer, opts.force, scope)?;
            let owner = Ownership::Applied(object["metadata"]["managedFields"].clone());
            return self
                .create_as(def, ns, object, dry_run, now, &owner)
                .map(|o| (o, true));
        };
        let object = match patch::apply::apply(Some(&live), &config, &writer, opts.force, scope) {
            Err(ApiError::ApplyConflict(message, causes)) => {
                // kubectl's first server-side apply of an object it applied
                // client-side: conflicts on fields the last-applied
                // annotation still matches are forced (the real server's
                // lastAppliedManager), for the manager "kubectl" only.
                let allowed = if manager == "kubectl" {
                    last_applied_fields(def, &live, scope)
                } else {
                    BTreeSet::new()
                };
                if causes.iter().all(|c| allowed.contains(&c.field)) {
                    patch::apply::apply(Some(&live), &config, &writer, true, scope)?
                } else {
                    let left = causes
                        .into_iter()
                        .filter(|c| !allowed.contains(&c.field))
                        .collect();
                    return Err(ApiError::ApplyConflict(message, left));
                }
            }
            other => other?,
        };
        let owner = Ownership::Applied(object["metadata"]["managedFields"].clone());
        self.update_as(def, ns, name, object, part, dry_run, now, &owner)
            .map(|o| (o, false))
    }
}

/// The fields (as conflicts name them: `.data.mode`) that `live`'s
/// `kubectl.kubernetes.io/last-applied-configuration` sets to the value
/// they still have: those client-side apply owned.
fn last_applied_fields(def: &ResourceDef, live: &Value, scope: Scope<'_>) -> BTreeSet<String> {
    let Some(text) =
        live["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
    else {
        return BTreeSet::new();
    };
    let Ok(applied) = serde_json::from_str::<Value>(text) else {
        return BTreeSet::new();
    };
    if applied["apiVersion"] != def.api_version().as_str() {
        return BTreeSet::new();
    }
    let live_leaves = managed_fields::leaves(live, scope);
    managed_fields::leaves(&applied, scope)
        .into_iter()
        .filter(|(path, value)| live_leaves.get(path) == Some(value))
        .map(|(path, _)| managed_fields::display(&path))
        .collect()
}
