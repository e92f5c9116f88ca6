//! `StoreKind`: which of the crate's stores an operator keeps its records
//! in, and the one place that maps each kind to what its store knows of
//! itself: where the record lives ([`RecordPlace`]) and how to build it.
//!
//! Everything outside the stores (the command line's RBAC, `status` and
//! `preflight`, the web view, `kubectl fsm`) asks a kind for its
//! [`place`](StoreKind::place) instead of naming kinds, so a new store is
//! its own file plus one variant here, whose arms the compiler asks for.

use std::sync::Arc;

use fsm_core::{EphemeralStore, RawRecord};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{ApiResource, DynamicObject};
use kube::{Api, Client};
use serde::{Deserialize, Serialize};

use super::KubeStore;
use super::object::{ObjectStore, RecordObject};
use super::status_store::StatusStore;
use crate::KubeResource;

/// Where the operator keeps its records; decides the RBAC it needs and
/// where `status` reads. Serialized as on the command line (`config-map`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum StoreKind {
    /// [`crate::StatusStore`]: `.status.fsm` of the resource.
    Status,
    /// [`crate::ConfigMapStore`]: a ConfigMap named by
    /// [`crate::store::record_object_name`].
    ConfigMap,
    /// [`crate::SecretStore`]: a Secret named by
    /// [`crate::store::record_object_name`].
    Secret,
    /// `fsm_core::EphemeralStore` or [`crate::DerivingStore`]: process
    /// memory (conditions still go to the status).
    Ephemeral,
}

impl StoreKind {
    /// Where the stores of this kind keep an object's record.
    ///
    /// ```
    /// use fsm_kube::store::{RecordPlace, StoreKind};
    ///
    /// assert_eq!(StoreKind::Status.place(), RecordPlace::Status);
    /// let RecordPlace::Object(secrets) = StoreKind::Secret.place() else { panic!() };
    /// assert_eq!((secrets.kind(), secrets.plural()), ("Secret", "secrets"));
    /// ```
    pub fn place(self) -> RecordPlace {
        match self {
            StoreKind::Status => StatusStore::PLACE,
            StoreKind::ConfigMap => ObjectStore::<ConfigMap>::PLACE,
            StoreKind::Secret => ObjectStore::<Secret>::PLACE,
            StoreKind::Ephemeral => RecordPlace::Memory,
        }
    }

    /// A store of this kind for resource `K`; with `namespace`, one that
    /// keeps record objects in that namespace only (so that a Role there
    /// is enough).
    pub fn store<K: KubeResource>(
        self,
        client: Client,
        namespace: Option<&str>,
    ) -> Arc<dyn KubeStore<K>> {
        match (self, namespace) {
            (StoreKind::Status, _) => Arc::new(StatusStore::new()),
            (StoreKind::ConfigMap, Some(ns)) => {
                Arc::new(ObjectStore::<ConfigMap>::namespaced(client, ns))
            }
            (StoreKind::ConfigMap, None) => Arc::new(ObjectStore::<ConfigMap>::new(client)),
            (StoreKind::Secret, Some(ns)) => {
                Arc::new(ObjectStore::<Secret>::namespaced(client, ns))
            }
            (StoreKind::Secret, None) => Arc::new(ObjectStore::<Secret>::new(client)),
            (StoreKind::Ephemeral, _) => Arc::new(EphemeralStore::new()),
        }
    }
}

/// Where a store keeps an object's record, as what reads it from outside
/// the operator needs to know it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordPlace {
    /// `.status.fsm` of the object itself: read with the object, written
    /// with a patch of its status.
    Status,
    /// An object of its own beside the reconciled one, in its namespace
    /// (so only namespaced resources can use it), named by
    /// [`record_object_name`](super::record_object_name).
    Object(RecordObjectKind),
    /// The operator's memory: nothing outside the process can read it.
    Memory,
}

/// The kind of object a record object is (a ConfigMap, a Secret), and how
/// to read a record from one without its Rust type.
#[derive(Clone, Copy)]
pub struct RecordObjectKind {
    kind: &'static str,
    plural: &'static str,
    text: fn(DynamicObject) -> Option<Result<String, String>>,
}

impl RecordObjectKind {
    /// The record objects of type `O` (core API group, version `v1`).
    pub const fn of<O: RecordObject + k8s_openapi::Resource>() -> Self {
        RecordObjectKind {
            kind: O::KIND,
            plural: O::URL_PATH_SEGMENT,
            text: text_of::<O>,
        }
    }

    /// The kind, as in `kind:` (`ConfigMap`).
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The resource, as in RBAC rules and URLs (`configmaps`).
    pub fn plural(&self) -> &'static str {
        self.plural
    }

    /// The API of these objects in `namespace` (`None`: all namespaces).
    pub fn api(&self, client: Client, namespace: Option<&str>) -> Api<DynamicObject> {
        let resource = ApiResource {
            group: String::new(),
            version: "v1".to_owned(),
            api_version: "v1".to_owned(),
            kind: self.kind.to_owned(),
            plural: self.plural.to_owned(),
        };
        match namespace {
            Some(ns) => Api::namespaced_with(client, ns, &resource),
            None => Api::all_with(client, &resource),
        }
    }

    /// The record `object` holds, if it holds one, as the stores read it
    /// (text that is not UTF-8, or an object not of this kind, is kept as
    /// a description, which does not decode).
    pub fn raw_record(&self, object: &DynamicObject) -> Option<RawRecord> {
        match (self.text)(object.clone())? {
            Ok(text) => Some(RawRecord::Text(text)),
            Err(e) => Some(RawRecord::Text(format!("<not UTF-8: {e}>"))),
        }
    }
}

impl std::fmt::Debug for RecordObjectKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordObjectKind")
            .field("kind", &self.kind)
            .field("plural", &self.plural)
            .finish_non_exhaustive()
    }
}

/// Two record object kinds are the same when they name the same resource.
impl PartialEq for RecordObjectKind {
    fn eq(&self, other: &Self) -> bool {
        (self.kind, self.plural) == (other.kind, other.plural)
    }
}

impl Eq for RecordObjectKind {}

/// `object`'s record text, read as `O`.
fn text_of<O: RecordObject>(object: DynamicObject) -> Option<Result<String, String>> {
    match object.try_parse::<O>() {
        Ok(typed) => typed.record_text(),
        Err(error) => Some(Err(error.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Namespace;
    use serde_json::json;

    const KINDS: [StoreKind; 4] = [
        StoreKind::Status,
        StoreKind::ConfigMap,
        StoreKind::Secret,
        StoreKind::Ephemeral,
    ];

    fn client() -> Client {
        let config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
        Client::try_from(config).unwrap()
    }

    #[tokio::test]
    async fn the_store_a_kind_builds_says_it_is_of_that_kind() {
        for kind in KINDS {
            for namespace in [None, Some("shop")] {
                let store = kind.store::<Namespace>(client(), namespace);
                assert_eq!(store.kind(), Some(kind), "{kind:?} in {namespace:?}");
            }
        }
    }

    #[test]
    fn each_kind_keeps_its_records_where_its_store_says() {
        let places: Vec<RecordPlace> = KINDS.into_iter().map(StoreKind::place).collect();
        let RecordPlace::Object(config_maps) = places[1] else {
            panic!("{places:?}")
        };
        assert_eq!(
            (config_maps.kind(), config_maps.plural()),
            ("ConfigMap", "configmaps")
        );
        assert_eq!(places[0], RecordPlace::Status);
        assert_eq!(
            places[2],
            RecordPlace::Object(RecordObjectKind::of::<Secret>())
        );
        assert_eq!(places[3], RecordPlace::Memory);
    }

    fn dynamic(value: serde_json::Value) -> DynamicObject {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_record_object_is_read_without_its_rust_type() {
        let config_maps = RecordObjectKind::of::<ConfigMap>();
        let secrets = RecordObjectKind::of::<Secret>();
        let map = dynamic(json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "a" },
            "data": { "record": "{\"state\":\"A\"}" }
        }));
        assert_eq!(
            config_maps.raw_record(&map),
            Some(RawRecord::Text("{\"state\":\"A\"}".to_owned()))
        );
        // A Secret's data is base64: "{}" is "e30=".
        let secret = dynamic(json!({
            "apiVersion": "v1", "kind": "Secret", "metadata": { "name": "a" },
            "data": { "record": "e30=" }
        }));
        assert_eq!(
            secrets.raw_record(&secret),
            Some(RawRecord::Text("{}".to_owned()))
        );
        let not_utf8 = dynamic(json!({
            "apiVersion": "v1", "kind": "Secret", "metadata": { "name": "a" },
            "data": { "record": "/w==" }
        }));
        let Some(RawRecord::Text(text)) = secrets.raw_record(&not_utf8) else {
            panic!()
        };
        assert!(text.starts_with("<not UTF-8"), "{text}");
        let empty = dynamic(json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "a" }
        }));
        assert_eq!(config_maps.raw_record(&empty), None);
    }
}
