//! `ConfigMapStore` and `SecretStore`: the record in an object of its own,
//! `<name>-fsm` beside the custom resource, owned by it (so garbage
//! collection removes it with the resource), read from a watch cache.

use std::collections::BTreeMap;
use std::marker::PhantomData;

use fsm_core::{
    BoxFuture, DecodeError, Loaded, RawRecord, StateRecord, StatusFields, StoreError, Version,
};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::{ByteString, NamespaceResourceScope};
use kube::api::{DeleteParams, PostParams, Preconditions};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::OnceCell;

use super::{KubeStore, Target, namespace_of, report_corrupt_conditions, size, store_error};
use crate::KubeResource;
use crate::cache::{ABSENT, WrittenCache};

/// The label every record object carries, so the store watches only those.
pub const MANAGED_BY_LABEL: (&str, &str) = ("app.kubernetes.io/managed-by", "operator-fsm");
/// The label naming the object a record belongs to.
pub const OWNER_LABEL: &str = "operator-fsm.io/owner";
/// The key of the record in the object's data.
pub const RECORD_KEY: &str = "record";

/// A kind of object that can hold a record as text: ConfigMap or Secret.
pub trait RecordObject:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + std::fmt::Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// A new object holding `text` under [`RECORD_KEY`].
    fn with_record(metadata: ObjectMeta, text: String) -> Self;
    /// The record text, if the object holds one (`Err` when it is not
    /// UTF-8).
    fn record_text(&self) -> Option<Result<String, String>>;
}

impl RecordObject for ConfigMap {
    fn with_record(metadata: ObjectMeta, text: String) -> Self {
        ConfigMap {
            metadata,
            data: Some(BTreeMap::from([(RECORD_KEY.to_owned(), text)])),
            ..ConfigMap::default()
        }
    }
    fn record_text(&self) -> Option<Result<String, String>> {
        self.data.as_ref()?.get(RECORD_KEY).cloned().map(Ok)
    }
}

impl RecordObject for Secret {
    fn with_record(metadata: ObjectMeta, text: String) -> Self {
        Secret {
            metadata,
            data: Some(BTreeMap::from([(
                RECORD_KEY.to_owned(),
                ByteString(text.into_bytes()),
            )])),
            type_: Some("Opaque".to_owned()),
            ..Secret::default()
        }
    }
    fn record_text(&self) -> Option<Result<String, String>> {
        let bytes = self.data.as_ref()?.get(RECORD_KEY)?;
        Some(String::from_utf8(bytes.0.clone()).map_err(|e| e.to_string()))
    }
}

/// Keeps records in `<name>-fsm` objects of kind `O` beside the resource.
///
/// # Expected flow
/// The first use starts a watch of the labelled record objects; loads read
/// that cache (and the runtime's own last commits, while the watch lags), so
/// a reconcile makes no GET. A commit creates the object (owned by the
/// resource, labelled) or replaces it with its `resourceVersion` as a
/// precondition. Conditions go to the resource's status, written only when
/// they change.
///
/// # Assumptions
/// The resource is namespaced; the operator may list, watch, create, update
/// and delete `O` in that namespace.
pub struct ObjectStore<O: RecordObject> {
    client: Client,
    namespace: Option<String>,
    cache: OnceCell<Store<O>>,
    written: WrittenCache,
    kind: PhantomData<fn() -> O>,
}

/// The record in a ConfigMap `<name>-fsm`: state users must not edit
/// through the status.
pub type ConfigMapStore = ObjectStore<ConfigMap>;

/// The record in a Secret `<name>-fsm`: for `sensitive` state data.
pub type SecretStore = ObjectStore<Secret>;

impl<O: RecordObject> ObjectStore<O> {
    /// A store that talks to the API through `client`.
    pub fn new(client: Client) -> Self {
        ObjectStore {
            client,
            namespace: None,
            cache: OnceCell::new(),
            written: WrittenCache::default(),
            kind: PhantomData,
        }
    }

    /// A store for an operator that watches one namespace only: it watches
    /// record objects in `namespace` alone, so a namespaced Role suffices.
    /// Objects of other namespaces are refused with an error.
    pub fn namespaced(client: Client, namespace: impl Into<String>) -> Self {
        ObjectStore {
            namespace: Some(namespace.into()),
            ..Self::new(client)
        }
    }

    /// Checks that the store may hold records in `namespace`.
    fn covers(&self, namespace: &str) -> Result<(), StoreError> {
        match &self.namespace {
            Some(own) if own != namespace => Err(StoreError::Backend(
                format!("this store watches namespace {own} only; the object is in {namespace}")
                    .into(),
            )),
            _ => Ok(()),
        }
    }

    /// The name of the record object of the resource named `name`.
    pub fn object_name(name: &str) -> String {
        format!("{name}-fsm")
    }

    /// The watch cache of record objects, started on first use.
    async fn cache(&self) -> Result<&Store<O>, StoreError> {
        self.cache
            .get_or_try_init(|| async {
                let (reader, writer) = reflector::store();
                let selector = format!("{}={}", MANAGED_BY_LABEL.0, MANAGED_BY_LABEL.1);
                let stream = watcher(
                    match &self.namespace {
                        Some(ns) => Api::<O>::namespaced(self.client.clone(), ns),
                        None => Api::<O>::all(self.client.clone()),
                    },
                    watcher::Config::default().labels(&selector),
                )
                .default_backoff()
                .reflect(writer)
                .applied_objects();
                tokio::spawn(async move {
                    futures::pin_mut!(stream);
                    while let Some(event) = stream.next().await {
                        if let Err(error) = event {
                            tracing::warn!(%error, "watch of record objects failed; retrying");
                        }
                    }
                });
                reader
                    .wait_until_ready()
                    .await
                    .map_err(|e| StoreError::Backend(Box::new(e)))?;
                Ok::<_, StoreError>(reader)
            })
            .await
    }

    fn api(&self, namespace: &str) -> Api<O> {
        Api::namespaced(self.client.clone(), namespace)
    }
}

impl<O: RecordObject> std::fmt::Debug for ObjectStore<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectStore")
            .field("kind", &O::kind(&()))
            .finish_non_exhaustive()
    }
}

fn owner_reference<K: KubeResource>(object: &K) -> Option<OwnerReference> {
    object.controller_owner_ref(&())
}

impl<K: KubeResource, O: RecordObject> KubeStore<K> for ObjectStore<O> {
    fn load<'a>(&'a self, target: &'a Target<K>) -> BoxFuture<'a, Result<Loaded, StoreError>> {
        Box::pin(async move {
            let namespace = namespace_of(target.object.as_ref())?;
            self.covers(&namespace)?;
            let name = Self::object_name(&target.object.name_any());
            let cached = self
                .cache()
                .await?
                .get(&ObjectRef::new(&name).within(&namespace));
            let seen_version = cached
                .as_ref()
                .and_then(|o| o.meta().resource_version.clone())
                .unwrap_or_else(|| ABSENT.to_owned());
            if let Some(written) = self.written.resolve(&target.uid, &seen_version) {
                return Ok(Loaded {
                    record: Some(written.record.clone()),
                    version: Some(written.version.clone()),
                });
            }
            let Some(object) = cached else {
                return Ok(Loaded::default());
            };
            let record = match object.record_text() {
                Some(Ok(text)) => Some(RawRecord::Text(text)),
                Some(Err(e)) => Some(RawRecord::Text(format!("<not UTF-8: {e}>"))),
                None => None,
            };
            Ok(Loaded {
                record,
                version: object.meta().resource_version.clone().map(Version),
            })
        })
    }

    fn save<'a>(
        &'a self,
        target: &'a Target<K>,
        record: &'a StateRecord,
        status: Option<&'a StatusFields>,
        expected: Option<&'a Version>,
    ) -> BoxFuture<'a, Result<Version, StoreError>> {
        Box::pin(async move {
            let namespace = namespace_of(target.object.as_ref())?;
            self.covers(&namespace)?;
            let owner = target.object.name_any();
            let text = serde_json::to_string(record).map_err(StoreError::Encode)?;
            let what = format!("the {}'s data", O::kind(&()));
            size::check(&what, text.len(), size::DATA_LIMIT)?;
            let metadata = ObjectMeta {
                name: Some(Self::object_name(&owner)),
                namespace: Some(namespace.clone()),
                labels: Some(BTreeMap::from([
                    (MANAGED_BY_LABEL.0.to_owned(), MANAGED_BY_LABEL.1.to_owned()),
                    (OWNER_LABEL.to_owned(), owner.clone()),
                ])),
                owner_references: owner_reference(target.object.as_ref()).map(|o| vec![o]),
                resource_version: expected.map(|v| v.0.clone()),
                ..ObjectMeta::default()
            };
            let object = O::with_record(metadata, text.clone());
            let params = PostParams {
                field_manager: Some(target.field_manager.clone()),
                ..PostParams::default()
            };
            let api = self.api(&namespace);
            let written = match expected {
                None => api.create(&params, &object).await,
                Some(_) => {
                    api.replace(&Self::object_name(&owner), &params, &object)
                        .await
                }
            }
            .map_err(|e| size::refused(e, &what, text.len(), size::DATA_LIMIT))?;
            let version = Version(written.meta().resource_version.clone().unwrap_or_default());
            self.written.remember(
                &target.uid,
                expected,
                version.clone(),
                RawRecord::Text(text),
                None,
            );
            target.sync_status(record, status).await?;
            Ok(version)
        })
    }

    fn delete<'a>(
        &'a self,
        target: &'a Target<K>,
        expected: Option<&'a Version>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            self.written.forget(&target.uid);
            let Some(expected) = expected else {
                return Ok(());
            };
            let namespace = namespace_of(target.object.as_ref())?;
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    resource_version: Some(expected.0.clone()),
                    uid: None,
                }),
                ..DeleteParams::default()
            };
            match self
                .api(&namespace)
                .delete(&Self::object_name(&target.object.name_any()), &params)
                .await
            {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
                Err(e) => Err(store_error(e)),
            }
        })
    }

    fn report_corrupt<'a>(
        &'a self,
        target: &'a Target<K>,
        error: &'a DecodeError,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        self.written.forget(&target.uid);
        Box::pin(report_corrupt_conditions(target, error))
    }
}
