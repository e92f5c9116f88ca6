//! The CRD controller's part of a write: a CRD's defaults and status
//! before it is stored, and the resources it serves once it is; a custom
//! resource's schema, from its CRD.

use serde_json::Value;

use super::meta::str_at;
use super::{Cluster, crds};
use crate::crd;
use crate::resources::ResourceDef;
use crate::status::{ApiError, Subject};
use crate::time::timestamp;

impl Cluster {
    /// For a CRD: validates it, fills defaults and status; returns its
    /// storage version. `None` for other kinds.
    ///
    /// An update of the definition (`old`: the stored CRD, `main`: not a
    /// status write) is refused as the real server refuses it: changing
    /// `group` or `scope`, or dropping a version still stored.
    pub(super) fn crd_prepare(
        &self,
        def: &ResourceDef,
        object: &mut Value,
        old: Option<&Value>,
        main: bool,
        now: jiff::Timestamp,
    ) -> Result<Option<String>, ApiError> {
        if def.group_resource() != crds() {
            return Ok(None);
        }
        crd::default_spec(object);
        let invalid = |object: &Value, causes| {
            ApiError::Invalid(
                Subject::new(&def.group, &def.kind, str_at(object, "name")),
                causes,
            )
        };
        let definitions = crd::definitions(object);
        let mut causes = match &definitions {
            Ok(_) => Vec::new(),
            Err(causes) => causes.clone(),
        };
        // The real update validation checks the name only for changes
        // (it is immutable): a changed group is reported as such.
        if old.is_some() {
            causes.retain(|c| c.field != "metadata.name");
        }
        if let Some(old) = old.filter(|_| main) {
            let mut stored: Vec<String> = old["status"]["storedVersions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(String::from))
                .collect();
            if let Ok((_, storage)) = &definitions
                && !stored.contains(storage)
            {
                stored.push(storage.clone());
            }
            causes.extend(crate::crd_rules::update_causes(object, old, &stored));
        }
        match definitions {
            Ok((_, storage)) if causes.is_empty() => {
                crd::set_status(object, &storage, &timestamp(now));
                Ok(Some(storage))
            }
            _ => Err(invalid(object, causes)),
        }
    }

    pub(super) fn crd_register(&mut self, object: &Value, storage: &str) {
        match crd::definitions(object) {
            Ok((defs, _)) => {
                if let Some(first) = defs.first() {
                    self.registry.remove(&first.group_resource());
                }
                for d in defs {
                    let preferred = d.version == storage;
                    self.registry.insert(d, preferred);
                }
            }
            Err(causes) => tracing::error!(?causes, "a stored CRD no longer validates"),
        }
    }

    /// `group/version` of the storage version of a custom resource whose
    /// CRD converts through a webhook (`None` else).
    pub(super) fn crd_webhook_storage(&self, def: &ResourceDef) -> Option<String> {
        if !def.custom {
            return None;
        }
        let crd = self
            .store
            .get(&crds(), "", &format!("{}.{}", def.plural, def.group))?;
        if crd["spec"]["conversion"]["strategy"] != "Webhook" {
            return None;
        }
        let storage = crd["spec"]["versions"]
            .as_array()?
            .iter()
            .find(|v| v["storage"] == true)?["name"]
            .as_str()?
            .to_string();
        Some(format!("{}/{storage}", def.group))
    }

    /// The `openAPIV3Schema` of a custom resource's version, from its CRD.
    pub(super) fn crd_schema(&self, def: &ResourceDef) -> Option<Value> {
        if !def.custom {
            return None;
        }
        let crd = self
            .store
            .get(&crds(), "", &format!("{}.{}", def.plural, def.group))?;
        crd["spec"]["versions"]
            .as_array()?
            .iter()
            .find(|v| v["name"] == def.version.as_str())
            .and_then(|v| v["schema"].get("openAPIV3Schema"))
            .cloned()
    }
}
