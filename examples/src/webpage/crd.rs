//! The `WebPage` custom resource.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use operator_fsm::FsmStatus;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A static web page served by nginx, reachable from outside the cluster
/// when `exposed`.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "examples.operator-fsm.io",
    version = "v1",
    kind = "WebPage",
    namespaced,
    status = "WebPageStatus",
    printcolumn = r#"{"name":"Exposed","type":"boolean","jsonPath":".spec.exposed"}"#,
    printcolumn = r#"{"name":"State","type":"string","jsonPath":".status.fsm.state"}"#
)]
pub struct WebPageSpec {
    /// The page, served as `index.html`.
    pub html: String,
    /// Whether an Ingress routes outside traffic to the page.
    #[serde(default)]
    pub exposed: bool,
}

/// The conditions (`DependentsReady`; with the machine, also `Ready`) and,
/// with the machine, its record.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WebPageStatus {
    /// The state machine's record (the [`PageState`](super::PageState)
    /// variant only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fsm: Option<FsmStatus>,
    /// `DependentsReady`, and the machine's conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    /// The generation the machine has acted on, at the top of the status
    /// where kstatus (Flux, Argo CD, `kubectl wait`) reads it.
    #[serde(
        default,
        rename = "observedGeneration",
        skip_serializing_if = "Option::is_none"
    )]
    pub observed_generation: Option<i64>,
}
