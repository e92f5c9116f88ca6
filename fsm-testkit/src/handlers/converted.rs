//! What a request does at a version its CRD converts through a webhook
//! ([`super::conversion`]): the object it names as stored, the stored
//! object settled at the storage version before a write, the request's
//! body and answers converted.

use std::sync::Arc;

use serde_json::Value;

use crate::resources::ResourceDef;
use crate::status::ApiError;

use super::conversion::crd_of;
use super::request::ObjectRequest;

impl ObjectRequest<'_> {
    /// The resource the cluster reads and writes for this request: the
    /// storage version's when the request converts.
    pub(super) fn stored_def(&self) -> Arc<ResourceDef> {
        self.conversion
            .as_ref()
            .map_or_else(|| self.def.clone(), |c| c.storage.clone())
    }

    /// The stored object the request names: as stored when it converts
    /// (converted by [`ObjectRequest::served`]), else as the cluster reads it.
    pub(super) fn current(&self) -> Result<Value, ApiError> {
        let cluster = self.shared.cluster();
        match &self.conversion {
            Some(c) => cluster.get_as_stored(&c.storage, self.ns(), self.name()),
            None => cluster.get(&self.def, self.ns(), self.name()),
        }
    }

    /// Before a write: the stored object, if it is still at a version
    /// other than the storage version, converted to it in place (same
    /// resourceVersion, no event), so that the write compares with it as
    /// 1.20 does (it decodes what etcd holds to the storage version: a
    /// metadata-only write to an object stored at an older version does
    /// not bump its `generation`). Nothing for a request that does not
    /// convert or an object already there.
    ///
    /// # Errors
    /// The conversion webhook failed.
    pub(super) async fn settle_stored_version(&self) -> Result<(), ApiError> {
        let Some(c) = &self.conversion else {
            return Ok(());
        };
        let storage = c.storage.api_version();
        let Ok(stored) = self.current() else {
            return Ok(());
        };
        if stored["apiVersion"].as_str() == Some(storage.as_str()) {
            return Ok(());
        }
        let resource_version = stored["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let converted = c.hook.convert(stored, &storage).await?;
        self.shared.cluster().store.reencode(
            &c.storage.group_resource(),
            self.ns(),
            self.name(),
            &resource_version,
            converted,
        );
        Ok(())
    }

    /// The served versions of a custom resource other than the request's,
    /// in its CRD's order (none for built-in kinds).
    pub(super) fn other_served_versions(&self) -> Vec<String> {
        let cluster = self.shared.cluster();
        crd_of(&cluster, &self.def)
            .and_then(|crd| {
                crd["spec"]["versions"].as_array().map(|versions| {
                    versions
                        .iter()
                        .filter(|v| v["served"] == true && v["name"] != self.def.version.as_str())
                        .filter_map(|v| v["name"].as_str().map(String::from))
                        .collect()
                })
            })
            .unwrap_or_default()
    }

    /// `object` (of the request's resource, at any version) at `version`:
    /// converted by the CRD's webhook, or (strategy `None`) its
    /// `apiVersion` rewritten; pruned by that version's schema.
    pub(super) async fn at_version(&self, object: Value, version: &str) -> Result<Value, ApiError> {
        let mut def = (*self.def).clone();
        def.version = version.to_string();
        let target = def.api_version();
        let mut out = match &self.conversion {
            Some(c) => c.hook.convert(object, &target).await?,
            None => {
                let mut o = object;
                o["apiVersion"] = Value::String(target);
                o
            }
        };
        let schema = crate::schema::of(&self.shared.cluster().store, &def);
        crate::schema::decode_stored(None, schema.as_ref(), &mut out);
        Ok(out)
    }

    /// `object` as read from the cluster, presented at the request's version.
    pub(super) async fn served(&self, object: Value) -> Result<Value, ApiError> {
        match &self.conversion {
            Some(c) => c.to_served(&self.def, object).await,
            None => Ok(object),
        }
    }

    /// A written body as the cluster takes it.
    pub(super) async fn to_storage(&self, body: Value) -> Result<Value, ApiError> {
        match &self.conversion {
            Some(c) => c.to_storage(&self.def, body).await,
            None => Ok(body),
        }
    }
}
