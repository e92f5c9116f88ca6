//! The conversions of three versions of one kind: `v1` the hub,
//! `v1alpha1` and `v2` its spokes.

use kube::CustomResource;
use kube::core::conversion::ConversionReview;
use proptest::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::*;
use crate::FsmStatus;

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct DatabaseStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fsm: Option<FsmStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
}

pub(crate) mod v1alpha1 {
    use super::*;
    #[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[kube(
        group = "example.io",
        version = "v1alpha1",
        kind = "Database",
        namespaced,
        status = "DatabaseStatus"
    )]
    pub struct DatabaseSpec {
        /// `"<n>Gi"`.
        pub size: String,
        pub engine: String,
    }
}

pub(crate) mod v1 {
    use super::*;
    #[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[kube(
        group = "example.io",
        version = "v1",
        kind = "Database",
        namespaced,
        status = "DatabaseStatus"
    )]
    #[serde(rename_all = "camelCase")]
    pub struct DatabaseSpec {
        pub storage_gi: u32,
        pub engine: String,
        #[serde(default)]
        pub replicas: u8,
    }
}

pub(crate) mod v2 {
    use super::*;
    #[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[kube(
        group = "example.io",
        version = "v2",
        kind = "Database",
        namespaced,
        status = "DatabaseStatus"
    )]
    #[serde(rename_all = "camelCase")]
    pub struct DatabaseSpec {
        pub storage: Storage,
        pub engine: Engine,
    }
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    pub struct Storage {
        pub mebibytes: u64,
    }
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
    pub struct Engine {
        pub name: String,
        pub replicas: u8,
    }
}

#[derive(Debug, thiserror::Error)]
#[error("size {0:?} is not a whole number of Gi")]
pub struct BadSize(String);

#[derive(Debug, thiserror::Error)]
#[error("{0} MiB is not a whole number of Gi")]
pub struct NotWholeGi(u64);

impl TryFrom<v1alpha1::Database> for v1::Database {
    type Error = BadSize;
    fn try_from(old: v1alpha1::Database) -> Result<Self, BadSize> {
        let gi = old
            .spec
            .size
            .strip_suffix("Gi")
            .and_then(|n| n.parse().ok());
        let storage_gi = gi.ok_or_else(|| BadSize(old.spec.size.clone()))?;
        let mut new = v1::Database::new(
            "",
            v1::DatabaseSpec {
                storage_gi,
                engine: old.spec.engine,
                replicas: 1,
            },
        );
        // The record is not copied on purpose: the framework carries it.
        new.status = old.status.map(|s| DatabaseStatus { fsm: None, ..s });
        Ok(new)
    }
}

impl From<v1::Database> for v1alpha1::Database {
    fn from(new: v1::Database) -> Self {
        let mut old = v1alpha1::Database::new(
            "",
            v1alpha1::DatabaseSpec {
                size: format!("{}Gi", new.spec.storage_gi),
                engine: new.spec.engine,
            },
        );
        old.status = new.status;
        old
    }
}

impl From<v1::Database> for v2::Database {
    fn from(new: v1::Database) -> Self {
        let mut v2 = v2::Database::new(
            "",
            v2::DatabaseSpec {
                storage: v2::Storage {
                    mebibytes: u64::from(new.spec.storage_gi) * 1024,
                },
                engine: v2::Engine {
                    name: new.spec.engine,
                    replicas: new.spec.replicas,
                },
            },
        );
        v2.status = new.status;
        v2
    }
}

impl TryFrom<v2::Database> for v1::Database {
    type Error = NotWholeGi;
    fn try_from(v2: v2::Database) -> Result<Self, NotWholeGi> {
        let mib = v2.spec.storage.mebibytes;
        let storage_gi = u32::try_from(mib / 1024)
            .ok()
            .filter(|_| mib.is_multiple_of(1024))
            .ok_or(NotWholeGi(mib))?;
        let mut new = v1::Database::new(
            "",
            v1::DatabaseSpec {
                storage_gi,
                engine: v2.spec.engine.name,
                replicas: v2.spec.engine.replicas,
            },
        );
        new.status = v2.status;
        Ok(new)
    }
}

pub(crate) fn versions() -> Versions<v1::Database> {
    Versions::<v1::Database>::new()
        .spoke::<v1alpha1::Database>(VersionOptions::default().deprecated("use example.io/v1"))
        .spoke::<v2::Database>(VersionOptions::default())
}

pub(crate) fn old_object() -> Value {
    json!({
        "apiVersion": "example.io/v1alpha1",
        "kind": "Database",
        "metadata": {
            "name": "orders", "namespace": "shop", "uid": "u-1", "resourceVersion": "7",
            "generation": 3,
            "labels": {"team": "a"},
            "annotations": {"operator-fsm.io/record": "{\"kept\":true}"},
            "finalizers": ["operator-fsm.io/cleanup"],
            "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
        },
        "spec": {"size": "10Gi", "engine": "postgres"},
        "status": {
            "fsm": {"state": "Serving", "attempt": 2, "fieldOfANewerBuild": {"x": [1, 2]}},
            "endpoint": "orders.shop:5432",
        },
    })
}

fn review(desired: &str, objects: Vec<Value>) -> ConversionReview {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "r-1", "desiredAPIVersion": desired, "objects": objects},
    }))
    .unwrap()
}

/// The answer as the API server reads it: JSON.
fn answer(versions: &Versions<v1::Database>, review: ConversionReview) -> (Value, ReviewOutcome) {
    let (answer, outcome) = versions.review(review);
    (serde_json::to_value(answer).unwrap(), outcome)
}

#[test]
fn a_spoke_to_hub_to_spoke_round_trip_is_identical() {
    let versions = versions();
    let (to_hub, outcome) = answer(&versions, review("example.io/v1", vec![old_object()]));
    assert_eq!(outcome, ReviewOutcome::Success);
    assert_eq!(to_hub["apiVersion"], "apiextensions.k8s.io/v1");
    assert_eq!(to_hub["kind"], "ConversionReview");
    assert_eq!(to_hub["response"]["uid"], "r-1");
    assert_eq!(to_hub["response"]["result"]["status"], "Success");
    let hub = &to_hub["response"]["convertedObjects"][0];
    assert_eq!(hub["apiVersion"], "example.io/v1");
    assert_eq!(
        hub["spec"],
        json!({"storageGi": 10, "engine": "postgres", "replicas": 1})
    );
    assert_eq!(hub["status"]["endpoint"], "orders.shop:5432");

    let (back, _) = answer(&versions, review("example.io/v1alpha1", vec![hub.clone()]));
    assert_eq!(back["response"]["convertedObjects"][0], old_object());
}

#[test]
fn metadata_and_the_record_are_carried_verbatim_whatever_the_conversion_does() {
    let versions = versions();
    // v1alpha1 → v1 drops the record and rebuilds metadata from scratch;
    // v1 → v2 copies neither metadata nor its unknown record fields.
    for desired in ["example.io/v1", "example.io/v2"] {
        let (out, _) = answer(&versions, review(desired, vec![old_object()]));
        let object = &out["response"]["convertedObjects"][0];
        assert_eq!(object["apiVersion"], desired);
        assert_eq!(object["kind"], "Database");
        assert_eq!(object["metadata"], old_object()["metadata"], "{desired}");
        assert_eq!(
            object["status"]["fsm"],
            old_object()["status"]["fsm"],
            "{desired}"
        );
    }
}

#[test]
fn spoke_to_spoke_goes_through_the_hub_and_every_object_is_answered_in_order() {
    let versions = versions();
    let mut second = old_object();
    second["metadata"]["name"] = json!("invoices");
    second["spec"]["size"] = json!("3Gi");
    let (out, outcome) = answer(
        &versions,
        review("example.io/v2", vec![old_object(), second]),
    );
    assert_eq!(outcome, ReviewOutcome::Success);
    let objects = out["response"]["convertedObjects"].as_array().unwrap();
    assert_eq!(objects.len(), 2);
    assert_eq!(objects[0]["spec"]["storage"]["mebibytes"], 10 * 1024);
    assert_eq!(objects[1]["metadata"]["name"], "invoices");
    assert_eq!(
        objects[1]["spec"]["engine"],
        json!({"name": "postgres", "replicas": 1})
    );
}

#[test]
fn a_failing_try_from_answers_failure_naming_the_object_and_the_error() {
    let versions = versions();
    let mut bad = old_object();
    bad["spec"]["size"] = json!("lots");
    let (out, outcome) = answer(&versions, review("example.io/v1", vec![old_object(), bad]));
    assert_eq!(outcome, ReviewOutcome::Failure);
    let response = &out["response"];
    assert_eq!(response["uid"], "r-1");
    assert_eq!(response["result"]["status"], "Failure");
    assert_eq!(response["convertedObjects"], json!([]));
    let message = response["result"]["message"].as_str().unwrap();
    assert_eq!(
        message,
        "shop/orders: converting example.io/v1alpha1 to example.io/v1 failed: \
         size \"lots\" is not a whole number of Gi"
    );
}

#[test]
fn unknown_versions_and_requestless_reviews_are_failures() {
    let versions = versions();
    let (out, outcome) = answer(&versions, review("example.io/v9", vec![old_object()]));
    assert_eq!(outcome, ReviewOutcome::Failure);
    let message = out["response"]["result"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("shop/orders: example.io/v9 is not a version of Database"),
        "{message}"
    );
    assert!(
        message.contains("example.io/v1, example.io/v1alpha1, example.io/v2"),
        "{message}"
    );

    let empty: ConversionReview = serde_json::from_value(
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview"}),
    )
    .unwrap();
    let (out, outcome) = answer(&versions, empty);
    assert_eq!(outcome, ReviewOutcome::Invalid);
    assert_eq!(out["response"]["result"]["status"], "Failure");
}

#[test]
fn the_crd_has_every_version_with_its_flags_and_one_storage_version() {
    let crd = versions().crd().unwrap();
    let names: Vec<&str> = crd.spec.versions.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["v1", "v1alpha1", "v2"]);
    let stored: Vec<bool> = crd.spec.versions.iter().map(|v| v.storage).collect();
    assert_eq!(stored, [true, false, false]);
    assert_eq!(crd.spec.versions[1].deprecated, Some(true));
    assert_eq!(
        crd.spec.versions[1].deprecation_warning.as_deref(),
        Some("use example.io/v1")
    );
    assert_eq!(crd.spec.versions[2].deprecated, None);
    // Each version has its own type's schema.
    let schema = |at: usize| {
        serde_json::to_value(&crd.spec.versions[at].schema).unwrap()["openAPIV3Schema"]
            ["properties"]["spec"]["properties"]
            .clone()
    };
    assert!(schema(0).get("storageGi").is_some());
    assert!(schema(1).get("size").is_some());
    assert!(schema(2).get("storage").is_some());

    let moved = Versions::<v1::Database>::new()
        .spoke::<v2::Database>(VersionOptions::default().storage())
        .spoke::<v1alpha1::Database>(VersionOptions::default().not_served());
    let crd = moved.crd().unwrap();
    let flags: Vec<(&str, bool, bool)> = crd
        .spec
        .versions
        .iter()
        .map(|v| (v.name.as_str(), v.served, v.storage))
        .collect();
    assert_eq!(
        flags,
        [
            ("v1", true, false),
            ("v2", true, true),
            ("v1alpha1", false, false)
        ]
    );

    let twice = Versions::<v1::Database>::new()
        .spoke::<v2::Database>(VersionOptions::default().storage())
        .spoke::<v1alpha1::Database>(VersionOptions::default().storage());
    assert!(matches!(
        twice.crd(),
        Err(VersionsError::SeveralStorageVersions(both)) if both == "v2, v1alpha1"
    ));
    assert_eq!(
        Versions::<v1::Database>::new().crd().unwrap(),
        <v1::Database as kube::CustomResourceExt>::crd()
    );
}

#[test]
fn the_webhook_conversion_block_points_at_a_url_or_a_service() {
    let mut crd = versions().crd().unwrap();
    WebhookTarget::Url("https://127.0.0.1:9443/convert".into()).set_on(&mut crd, b"PEM");
    let conversion = serde_json::to_value(&crd.spec.conversion).unwrap();
    assert_eq!(
        conversion,
        json!({
            "strategy": "Webhook",
            "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"url": "https://127.0.0.1:9443/convert", "caBundle": "UEVN"},
            },
        })
    );
    WebhookTarget::Service {
        namespace: "ops".into(),
        name: "db-operator-webhook".into(),
        port: 443,
    }
    .set_on(&mut crd, b"PEM");
    let conversion = serde_json::to_value(&crd.spec.conversion).unwrap();
    assert_eq!(
        conversion["webhook"]["clientConfig"]["service"],
        json!({"namespace": "ops", "name": "db-operator-webhook", "path": "/convert", "port": 443})
    );
}

fn hub_spec() -> impl Strategy<Value = v1::DatabaseSpec> {
    (0..=u32::MAX / 2048, "[a-z][a-z0-9-]{0,20}", any::<u8>()).prop_map(
        |(storage_gi, engine, replicas)| v1::DatabaseSpec {
            storage_gi,
            engine,
            replicas,
        },
    )
}

fn record() -> impl Strategy<Value = Option<Value>> {
    proptest::option::of(
        ("[A-Z][a-z]{0,10}", any::<u32>(), proptest::option::of("[ -~]{0,30}")).prop_map(
            |(state, attempt, error)| json!({"state": state, "attempt": attempt, "lastError": error}),
        ),
    )
}

fn object(
    api_version: &str,
    spec: Value,
    record: Option<Value>,
    labels: Vec<(String, String)>,
) -> Value {
    let mut object = json!({
        "apiVersion": api_version,
        "kind": "Database",
        "metadata": {
            "name": "db", "namespace": "ns", "uid": "u",
            "labels": labels.into_iter().map(|(k, v)| (k, Value::String(v))).collect::<serde_json::Map<String, Value>>(),
        },
        "spec": spec,
    });
    if let Some(record) = record {
        object["status"] = json!({"fsm": record});
    }
    object
}

proptest! {
    #[test]
    fn v1_to_v2_to_v1_is_identical(
        spec in hub_spec(),
        record in record(),
        labels in proptest::collection::vec(("[a-z]{1,8}", "[a-z0-9]{0,8}"), 0..4),
    ) {
        let versions = versions();
        let hub = object("example.io/v1", serde_json::to_value(&spec).unwrap(), record, labels);
        let v2 = versions.convert(&hub, "example.io/v2").unwrap();
        prop_assert_eq!(&v2["apiVersion"], "example.io/v2");
        prop_assert_eq!(&v2["metadata"], &hub["metadata"]);
        let back = versions.convert(&v2, "example.io/v1").unwrap();
        prop_assert_eq!(back, hub);
    }

    #[test]
    fn v1alpha1_to_v2_to_v1alpha1_is_identical(
        gi in 0..=u32::MAX / 2048,
        engine in "[a-z]{1,12}",
        record in record(),
    ) {
        let versions = versions();
        let old = object(
            "example.io/v1alpha1",
            json!({"size": format!("{gi}Gi"), "engine": engine}),
            record,
            Vec::new(),
        );
        let v2 = versions.convert(&old, "example.io/v2").unwrap();
        prop_assert_eq!(&v2["spec"]["storage"]["mebibytes"], &json!(u64::from(gi) * 1024));
        let back = versions.convert(&v2, "example.io/v1alpha1").unwrap();
        prop_assert_eq!(back, old);
    }
}
