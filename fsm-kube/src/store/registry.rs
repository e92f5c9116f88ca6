//! The registration of the crate's stores: for each [`StoreKind`], where
//! its store keeps records and how to build one.
//!
//! Everything outside the stores (the command line's RBAC, `status` and
//! `preflight`, the web view, `kubectl fsm`) asks a kind for its
//! [`place`](StoreKind::place) instead of naming kinds, so a new store is
//! its own file plus a variant of [`StoreKind`] and its arms here, which
//! the compiler asks for.

use fsm_core::EphemeralStore;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;

use super::KubeStore;
use super::kind::{RecordPlace, StoreKind};
use super::object::ObjectStore;
use super::status_store::StatusStore;
use crate::KubeResource;

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
    ) -> Box<dyn KubeStore<K>> {
        match (self, namespace) {
            (StoreKind::Status, _) => Box::new(StatusStore::new()),
            (StoreKind::ConfigMap, Some(ns)) => {
                Box::new(ObjectStore::<ConfigMap>::namespaced(client, ns))
            }
            (StoreKind::ConfigMap, None) => Box::new(ObjectStore::<ConfigMap>::new(client)),
            (StoreKind::Secret, Some(ns)) => {
                Box::new(ObjectStore::<Secret>::namespaced(client, ns))
            }
            (StoreKind::Secret, None) => Box::new(ObjectStore::<Secret>::new(client)),
            (StoreKind::Ephemeral, _) => Box::new(EphemeralStore::new()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::kind::RecordObjectKind;
    use fsm_core::RawRecord;
    use k8s_openapi::api::core::v1::Namespace;
    use kube::api::DynamicObject;
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
