//! Requests at a served version of a custom resource whose CRD converts
//! through a webhook: the cluster writes at the storage version, each
//! object keeps the version it was last written at, and what goes in and
//! out is converted by the CRD's webhook ([`crate::webhooks::conversion`])
//! when the versions differ, as kube-apiserver 1.20 converts between what
//! it stores and what it serves (an object written before the storage
//! version changed is converted from the old one). A write is defaulted,
//! pruned and validated by its own version's schema before it is
//! converted (1.20 validates at the version written); what is read is
//! defaulted by the schema of the version it is stored at and pruned by
//! the schema of the version read.

use std::sync::Arc;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use serde_json::Value;

use crate::resources::ResourceDef;
use crate::status::{ApiError, Subject};
use crate::webhooks::conversion::ConversionWebhook;

use crate::state::Shared;

/// How a request at a non-storage version converts.
#[derive(Debug, Clone)]
pub(super) struct Converting {
    pub(super) hook: ConversionWebhook,
    /// The storage version of the resource, where the cluster reads and writes.
    pub(super) storage: Arc<ResourceDef>,
    /// The schema of the version served (what it prunes and validates by).
    served_schema: Option<Value>,
    /// Each version's schema, by `group/version` (what a stored object
    /// is defaulted by).
    schemas: Vec<(String, Value)>,
}

/// The CRD of a custom resource.
pub(super) fn crd_of(cluster: &crate::cluster::Cluster, def: &ResourceDef) -> Option<Arc<Value>> {
    if !def.custom {
        return None;
    }
    let crds = crate::resources::GroupResource {
        group: "apiextensions.k8s.io".into(),
        resource: "customresourcedefinitions".into(),
    };
    cluster
        .store
        .get(&crds, "", &format!("{}.{}", def.plural, def.group))
}

/// The conversion of requests at `def`: `Some` when its CRD's strategy is
/// `Webhook`.
pub(super) fn of(cluster: &crate::cluster::Cluster, def: &ResourceDef) -> Option<Converting> {
    let crd = crd_of(cluster, def)?;
    let hook = ConversionWebhook::of_crd(&crd, &cluster.store)?;
    let storage = crd["spec"]["versions"]
        .as_array()?
        .iter()
        .find(|v| v["storage"] == true)?["name"]
        .as_str()?
        .to_string();
    let schemas = crd["spec"]["versions"]
        .as_array()?
        .iter()
        .filter_map(|v| {
            let schema = v["schema"]["openAPIV3Schema"].clone();
            Some((format!("{}/{}", def.group, v["name"].as_str()?), schema))
        })
        .collect();
    let storage_def = cluster
        .registry
        .get(&def.group, &storage, &def.plural)
        .unwrap_or_else(|| {
            // A storage version that is not served: the same resource at it.
            let mut d = def.clone();
            d.version = storage;
            Arc::new(d)
        });
    Some(Converting {
        hook,
        storage: storage_def,
        served_schema: crate::schema::of(&cluster.store, def),
        schemas,
    })
}

impl Converting {
    /// `object` (as stored, at the version it was written at) as the
    /// version served presents it: defaulted by its stored version's
    /// schema, converted, then pruned by the served version's schema.
    pub(super) async fn to_served(
        &self,
        def: &ResourceDef,
        mut object: Value,
    ) -> Result<Value, ApiError> {
        let stored = self
            .schemas
            .iter()
            .find(|(v, _)| object["apiVersion"] == v.as_str())
            .map(|(_, s)| s)
            .filter(|s| s.is_object());
        crate::schema::decode_stored(stored, None, &mut object);
        let mut out = self.hook.convert(object, &def.api_version()).await?;
        crate::schema::decode_stored(None, self.served_schema.as_ref(), &mut out);
        Ok(out)
    }

    /// A list's items converted; the list at the version served.
    pub(super) async fn list_to_served(
        &self,
        def: &ResourceDef,
        mut list: Value,
    ) -> Result<Value, ApiError> {
        let items = list["items"].as_array().cloned().unwrap_or_default();
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            out.push(self.to_served(def, item).await?);
        }
        list["items"] = Value::Array(out);
        list["apiVersion"] = Value::String(def.api_version());
        Ok(list)
    }

    /// A body written at the version served, defaulted, pruned and
    /// validated by its schema, then converted to the storage version.
    pub(super) async fn to_storage(
        &self,
        def: &ResourceDef,
        mut body: Value,
    ) -> Result<Value, ApiError> {
        if let Some(schema) = &self.served_schema {
            let causes = crate::schema::prune_and_validate(schema, &mut body);
            if !causes.is_empty() {
                let name = body["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                return Err(ApiError::Invalid(
                    Subject::new(&def.group, &def.kind, &name),
                    causes,
                ));
            }
        }
        self.hook.convert(body, &self.storage.api_version()).await
    }

    /// Waits until every object of the resource converts to the version
    /// served, trying again every second: 1.20 serves a watch at a
    /// version from a watch cache of that version, which cannot start
    /// while an object does not convert, and the watch waits for it
    /// without answering (past its `timeoutSeconds`).
    pub(super) async fn wait_until_converting(&self, shared: &Shared, def: &ResourceDef) {
        loop {
            let stored = shared.cluster().list_as_stored(
                &self.storage,
                None,
                &crate::cluster::ListQuery::default(),
            );
            let failed = match stored {
                Ok(list) => self.list_to_served(def, list).await.err(),
                Err(e) => Some(e),
            };
            let Some(e) = failed else {
                return;
            };
            tracing::warn!(error = %e, resource = %def.plural, "the watch waits for every object to convert");
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        }
    }

    /// A watch's lines with their objects converted; an event whose
    /// object does not convert is left out and the watch stays open (on
    /// 1.20 the watch cache of the version stops; not imitated).
    pub(super) fn watch_to_served<S>(
        self,
        def: Arc<ResourceDef>,
        lines: S,
    ) -> impl Stream<Item = Result<Bytes, std::convert::Infallible>> + Send + use<S>
    where
        S: Stream<Item = Result<Bytes, std::convert::Infallible>> + Send,
    {
        let this = Arc::new(self);
        lines.filter_map(move |line| {
            let this = this.clone();
            let def = def.clone();
            async move {
                let Ok(bytes) = line;
                let Ok(mut event) = serde_json::from_slice::<Value>(&bytes) else {
                    return Some(Ok(bytes));
                };
                let object = event["object"].take();
                let converted = match event["type"].as_str() {
                    Some("ADDED" | "MODIFIED" | "DELETED") => {
                        match this.to_served(&def, object).await {
                            Ok(o) => o,
                            Err(e) => {
                                tracing::warn!(error = %e, "a watch event did not convert; left out");
                                return None;
                            }
                        }
                    }
                    Some("BOOKMARK") => {
                        let mut o = object;
                        o["apiVersion"] = Value::String(def.api_version());
                        o
                    }
                    _ => object,
                };
                event["object"] = converted;
                let mut text = event.to_string();
                text.push('\n');
                Some(Ok(Bytes::from(text)))
            }
        })
    }
}
