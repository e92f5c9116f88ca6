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
    pub(super) fn crd_prepare(
        &self,
        def: &ResourceDef,
        object: &mut Value,
        now: jiff::Timestamp,
    ) -> Result<Option<String>, ApiError> {
        if def.group_resource() != crds() {
            return Ok(None);
        }
        crd::default_spec(object);
        let (_, storage) = crd::definitions(object).map_err(|causes| {
            ApiError::Invalid(
                Subject::new(&def.group, &def.kind, str_at(object, "name")),
                causes,
            )
        })?;
        crd::set_status(object, &storage, &timestamp(now));
        Ok(Some(storage))
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
