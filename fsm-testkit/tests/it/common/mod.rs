//! Shared fixtures: a small custom resource and helpers.
#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::core::Status;
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A small custom resource with a status subresource.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "example.com",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus",
    shortname = "wd",
    printcolumn = r#"{"name":"Size","type":"integer","jsonPath":".spec.size"}"#
)]
pub struct WidgetSpec {
    pub size: i32,
}

/// Status of a [`Widget`].
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct WidgetStatus {
    pub ready: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// A cluster-scoped custom resource without a status subresource.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(group = "example.com", version = "v1", kind = "Gadget")]
pub struct GadgetSpec {
    pub color: String,
}

/// Bounds a test step in time.
pub async fn within<F: Future>(secs: u64, f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(secs), f)
        .await
        .expect("step timed out")
}

/// Creates the CRD of `K` and waits until it is established.
pub async fn install<K: CustomResourceExt>(client: &Client) -> CustomResourceDefinition {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crds
        .create(&PostParams::default(), &K::crd())
        .await
        .unwrap();
    let name = crd.metadata.name.clone().unwrap();
    within(
        5,
        await_condition(crds, &name, conditions::is_crd_established()),
    )
    .await
    .unwrap();
    crd
}

/// A widget named `name` of `size`.
pub fn widget(name: &str, size: i32) -> Widget {
    Widget::new(name, WidgetSpec { size })
}

/// The `Status` of an API error; panics on other errors.
pub fn status(e: kube::Error) -> Box<Status> {
    match e {
        kube::Error::Api(s) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}
